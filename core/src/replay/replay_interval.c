/*
 * The interval of a replay's predicted ratios. Each replicate redraws every modelled try of every modelled request
 * (from its own bootstrap resample of the pools, with its own jitter), so it is one more possible outcome of the
 * candidate on the same traffic; its counts differ from the point prediction only in the modelled requests. Each
 * scope keeps, per replicate, the sum of those differences (RFI_REPLAY_COUNTS numbers), and the interval of a ratio is
 * the prediction ± 1.96 times the ratio's standard deviation over the replicates (a normal 95% interval), clamped to
 * the ratio's range. Tries beyond the record (an attempt its requests never reached often enough) are drawn as the
 * deepest it has, which the record cannot confirm: there the chance that a try fails again may be anything from 0 to
 * 1, so the interval also spans the scope's figures in each case of them: the first m failing as the one before it did
 * and the next succeeding, for every m, and all of them failing (the same case for every request of the scope). Memory:
 * replicates × 7 integers per scope that holds a modelled request.
 */
#include "replay_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct block {
    char *name;  /* NULL for the whole */
    int64_t *d;  /* [replicate][RFI_REPLAY_COUNTS]: replicate − point, summed over the scope's modelled requests */
    bool drawn;  /* it holds a request with drawn tries (d is then more than zeros) */
    bool hedged; /* it holds a request with hedges: best − point of hedges and of hedge wins, summed */
    int64_t best_hedges, best_wins;
    bool beyond; /* it holds a request with tries beyond the record: each case − point, summed */
    int64_t cases[RFI_REPLAY_CASES][RFI_REPLAY_COUNTS];
} block;

struct rfi_replay_spread {
    uint32_t k;
    block whole;
    block *named;
    size_t n, cap;
};

rfi_replay_spread *rfi_replay_spread_new(uint32_t replicates) {
    rfi_replay_spread *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->k = replicates;
    return s;
}

void rfi_replay_spread_free(rfi_replay_spread *s) {
    if (s == NULL) return;
    free(s->whole.d);
    for (size_t i = 0; i < s->n; i++) {
        free(s->named[i].name);
        free(s->named[i].d);
    }
    free(s->named);
    free(s);
}

static const block *find(const rfi_replay_spread *s, const char *name) {
    if (name == NULL) return s->whole.d ? &s->whole : NULL;
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->named[i].name, name) == 0) return &s->named[i];
    return NULL;
}

/* The block of name (NULL: the whole), made on first use; NULL when memory ran out. */
static block *block_of(rfi_replay_spread *s, const char *name) {
    block *b = (block *)find(s, name);
    if (b != NULL) return b;
    int64_t *d = calloc((size_t)s->k * RFI_REPLAY_COUNTS, sizeof *d);
    if (d == NULL) return NULL;
    if (name == NULL) {
        s->whole.d = d;
        return &s->whole;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        block *more = realloc(s->named, cap * sizeof *more);
        if (more == NULL) {
            free(d);
            return NULL;
        }
        s->named = more;
        s->cap = cap;
    }
    char *copy = malloc(strlen(name) + 1);
    if (copy == NULL) {
        free(d);
        return NULL;
    }
    strcpy(copy, name);
    s->named[s->n] = (block){.name = copy, .d = d};
    return &s->named[s->n++];
}

/* The blocks a request of scope name counts in, into out[0..*n): the whole's, and name's (NULL: the whole only). False
 * when memory ran out for one (the others are still given). */
static bool blocks_of(rfi_replay_spread *s, const char *name, block *out[2], int *n) {
    bool ok = true;
    *n = 0;
    for (int scope = 0; scope < (name ? 2 : 1); scope++) {
        block *b = block_of(s, scope == 0 ? NULL : name); /* the whole's is not in named: out[0] stays valid */
        if (b == NULL)
            ok = false;
        else
            out[(*n)++] = b;
    }
    return ok;
}

bool rfi_replay_spread_add(rfi_replay_spread *s, const char *name, uint32_t k, const rfi_replay_counts *point,
                           const rfi_replay_counts *replicate) {
    block *b[2];
    int n;
    const bool ok = blocks_of(s, name, b, &n);
    for (int j = 0; j < n; j++) {
        b[j]->drawn = true;
        for (size_t i = 0; i < RFI_REPLAY_COUNTS; i++)
            b[j]->d[(size_t)k * RFI_REPLAY_COUNTS + i] += replicate->n[i] - point->n[i];
    }
    return ok;
}

bool rfi_replay_spread_hedges(rfi_replay_spread *s, const char *name, int64_t hedges_delta, int64_t wins_delta) {
    block *b[2];
    int n;
    const bool ok = blocks_of(s, name, b, &n);
    for (int j = 0; j < n; j++) {
        b[j]->hedged = true;
        b[j]->best_hedges += hedges_delta;
        b[j]->best_wins += wins_delta;
    }
    return ok;
}

bool rfi_replay_spread_beyond(rfi_replay_spread *s, const char *name, const rfi_replay_counts *point,
                              const rfi_replay_counts *cases, int n) {
    block *b[2];
    int nb;
    const bool ok = blocks_of(s, name, b, &nb);
    for (int j = 0; j < nb; j++) {
        b[j]->beyond = true;
        for (int m = 0; m < RFI_REPLAY_CASES; m++) {
            const rfi_replay_counts *c = &cases[m < n ? m : n - 1];
            for (size_t i = 0; i < RFI_REPLAY_COUNTS; i++) b[j]->cases[m][i] += c->n[i] - point->n[i];
        }
    }
    return ok;
}

/* The counts of RF_TALLY_COUNTS, by name, from the seven kept ones; the hedges are the prediction's (a replicate
 * redraws no hedge: their answers are bounded by the best and the worst case instead). */
typedef struct counts {
    int64_t requests, successes, failures, terminal, retried_successes, attempts, success_attempts, retries;
    int64_t hedges, hedge_wins;
} counts;

#define RF_X_RATIO_FIELD(name, num, den) double name;
typedef struct ratios {
    RF_TALLY_RATIOS(RF_X_RATIO_FIELD)
} ratios;
#undef RF_X_RATIO_FIELD

/* The counts of the point less the seven kept differences d (the hedges: the point's). */
static counts shifted(const counts *point, const int64_t *d) {
    counts c = {point->requests + d[0],
                point->successes + d[1],
                0,
                point->terminal + d[2],
                point->retried_successes + d[3],
                point->attempts + d[4],
                point->success_attempts + d[5],
                point->retries + d[6],
                point->hedges,
                point->hedge_wins};
    c.failures = c.requests - c.successes;
    return c;
}

static ratios ratios_of(const counts *c) {
    ratios r;
#define RF_X_RATIO(name, num, den) r.name = c->den > 0 ? (double)c->num / (double)c->den : 0;
    RF_TALLY_RATIOS(RF_X_RATIO)
#undef RF_X_RATIO
    return r;
}

/* A ratio's range: the rates are fractions (0..1), the others only not negative. */
static double clamp(double x, bool fraction) {
    if (x < 0) return 0;
    return fraction && x > 1 ? 1 : x;
}

void rfi_replay_spread_interval(const rfi_replay_spread *s, const char *name, const rf_tally_figures *f,
                                rf_replay_interval *out) {
    memset(out, 0, sizeof *out);
    const counts point = {f->requests, f->successes,        f->failures, f->terminal, f->retried_successes,
                          f->attempts, f->success_attempts, f->retries,  f->hedges,   f->hedge_wins};
    const ratios p = ratios_of(&point);
    const block *b = find(s, name);
    out->modelled = b != NULL && b->drawn && s->k >= 2;
    ratios sum = {0}, sum2 = {0}; /* of each replicate's difference from the prediction: no cancellation when they
                                     barely differ (replicates that all equal it give 0, not a rounding residue) */
    for (uint32_t k = 0; out->modelled && k < s->k; k++) {
        const counts c = shifted(&point, b->d + (size_t)k * RFI_REPLAY_COUNTS);
        ratios r = ratios_of(&c);
#define RF_X_SUM(name, num, den) sum.name += r.name - p.name, sum2.name += (r.name - p.name) * (r.name - p.name);
        RF_TALLY_RATIOS(RF_X_SUM)
#undef RF_X_SUM
    }
    const double k = (double)s->k;
    /* Beyond the record: the least and the most of each ratio over its cases. */
    out->beyond = b != NULL && b->beyond;
    ratios least = p, most = p;
    for (int m = 0; out->beyond && m < RFI_REPLAY_CASES; m++) {
        const counts c = shifted(&point, b->cases[m]);
        const ratios r = ratios_of(&c);
#define RF_X_SPAN(name, num, den) least.name = fmin(least.name, r.name), most.name = fmax(most.name, r.name);
        RF_TALLY_RATIOS(RF_X_SPAN)
#undef RF_X_SPAN
    }
    /* the sample standard deviation over the replicates (0 without modelled requests), then the prediction ± 1.96 of
     * it, widened to the cases beyond the record */
#define RF_X_BOUNDS(name, num, den)                                                                   \
    {                                                                                                 \
        double var = out->modelled ? (sum2.name - sum.name * sum.name / k) / (k - 1) : 0;             \
        double sd = var > 0 ? sqrt(var) : 0;                                                          \
        bool fraction = strstr(#name, "rate") != NULL || strcmp(#name, "retried_success_ratio") == 0; \
        double lo = p.name - 1.96 * sd, hi = p.name + 1.96 * sd;                                      \
        lo = fmin(lo, least.name);                                                                    \
        hi = fmax(hi, most.name);                                                                     \
        out->name##_lo = clamp(lo, fraction);                                                         \
        out->name##_hi = clamp(hi, fraction);                                                         \
    }
    RF_TALLY_RATIOS(RF_X_BOUNDS)
#undef RF_X_BOUNDS
    /* Hedges: from the best case (fewer hedges, each first to answer winning) to the prediction, the worst (a hedge
     * never wins). */
    out->hedges_modelled = b != NULL && b->hedged;
    if (out->hedges_modelled && point.requests > 0) {
        out->hedges_per_request_lo = (double)(point.hedges + b->best_hedges) / (double)point.requests;
        out->hedges_per_request_hi = p.hedges_per_request;
        out->hedge_win_rate_lo = p.hedge_win_rate;
        out->hedge_win_rate_hi = clamp((double)(point.hedge_wins + b->best_wins) / (double)point.requests, true);
    }
}
