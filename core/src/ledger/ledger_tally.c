/*
 * The ledger's tally (retryfreeze/ledger_tally.h): counters per scope, fed one record at a time, and the figures
 * read from them. A record's derived values (its histogram bucket, its le slot, what its tries' wait headers
 * became) are worked out once and added to every scope it counts in: the whole, its route's or host's, its time
 * bucket. Reading files into it is ledger_tally_read.c; the Retry-After rule is ledger_wait_use.c.
 */
#define _POSIX_C_SOURCE 200809L
#include "ledger_internal.h"
#include "retryfreeze/ledger_tally.h"
#include "retryfreeze/outcome.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RF_X_LE(ms) ms,
static const int64_t LE_MS[RF_TALLY_LE_COUNT] = {RF_TALLY_LE_MS(RF_X_LE)};
#undef RF_X_LE

/* Names counted in a scope: (outcome, reason) pairs, or failure classes (reason NULL). Their strings are owned.
 * last is the index the previous count went to: most records repeat it (success, success), so it is tried first.
 * A named scope's list also links each name to the same name in the whole's list (up[i]), so that counting a
 * record in the whole costs no second search. */
typedef struct names {
    rf_tally_count *items;
    size_t *up; /* cap of them in a named scope's list; NULL in the others */
    size_t n, cap, last;
} names;

typedef struct scope {
    char *name; /* owned; NULL for the whole and the time buckets */
    int64_t requests, successes, retried_successes, attempts, success_attempts, retries;
    int64_t hedged, hedges, hedge_wins; /* a hedged request's tries: hedge and fate */
    int64_t elapsed_sum, elapsed_min, elapsed_max;
    names outcomes, classes;
    int64_t by_attempts[RF_LEDGER_MAX_TRIES + 1];
    int64_t retry_after[RF_RA_USE_COUNT];
    int64_t elapsed_le[RF_TALLY_LE_COUNT + 1]; /* in (LE_MS[i-1], LE_MS[i]]; the last slot above the last bound */
    int64_t hist[RF_TALLY_BUCKETS];
} scope;

struct rf_ledger_tally {
    rf_tally_options opts;
    scope whole;
    scope **named; /* by route or host, in the order first counted; each its own block, so none moves */
    size_t n_named, cap_named;
    scope *buckets; /* opts.time_buckets of them, or NULL */
    int64_t lines, torn_lines, corrupt_lines;
    int64_t ts_min, ts_max; /* INT64_MAX, INT64_MIN until a record with a ts is counted */
    bool incomplete;
};

/* What a record brings to every scope it counts in, worked out once. */
typedef struct derived {
    size_t bucket, le, attempts_slot;
    int64_t uses[RF_RA_USE_COUNT];
    const char *retried[RF_LEDGER_MAX_TRIES]; /* the classes of its tries the verdict retried (pinned-status) */
    size_t n_retried;
    bool timed; /* it has a ts: not a seed-harness record */
} derived;

/* ---- the histogram ---------------------------------------------------------------------------------- */

size_t rf_tally_bucket_of(int64_t v) {
    if (v < 128) return v < 0 ? 0 : (size_t)v;
    int e = 7; /* v in [2^e, 2^(e+1)) */
    for (int64_t t = v >> 8; t > 0; t >>= 1) e++;
    size_t b = 128 + (size_t)(e - 7) * 64 + (size_t)(v >> (e - 6)) - 64;
    return b < RF_TALLY_BUCKETS ? b : RF_TALLY_BUCKETS - 1;
}

void rf_tally_bucket_range(size_t b, int64_t *lo_ms, int64_t *hi_ms) {
    if (b >= RF_TALLY_BUCKETS) b = RF_TALLY_BUCKETS - 1;
    int64_t lo = (int64_t)b, hi = (int64_t)b;
    if (b >= 128) {
        int shift = (int)((b - 128) / 64) + 1; /* the bucket's width is 2^shift */
        lo = (int64_t)(64 + (b - 128) % 64) << shift;
        hi = lo + ((int64_t)1 << shift) - 1;
    }
    if (lo_ms) *lo_ms = lo;
    if (hi_ms) *hi_ms = hi;
}

int64_t rf_tally_percentile_ms(const rf_tally_scope *s, double q) {
    if (s == NULL || s->hist == NULL || s->figures.requests <= 0) return 0;
    int64_t n = s->figures.requests;
    double r = ceil(q * (double)n - 1e-9); /* the rank; the epsilon keeps 0.95 × 100 from rounding up to 96 */
    int64_t rank = !(r >= 1) ? 1 : r >= (double)n ? n : (int64_t)r;
    int64_t seen = 0;
    size_t b = 0;
    while (b < RF_TALLY_BUCKETS - 1 && (seen += s->hist[b]) < rank) b++;
    int64_t lo, hi;
    rf_tally_bucket_range(b, &lo, &hi);
    int64_t v = lo + (hi - lo) / 2;
    if (v < s->figures.elapsed_min_ms) v = s->figures.elapsed_min_ms;
    if (v > s->figures.elapsed_max_ms) v = s->figures.elapsed_max_ms;
    return v;
}

/* ---- making and freeing ----------------------------------------------------------------------------- */

/* A scope's start state: zero counts, min and max ready for the first value. */
static void scope_init(scope *s) {
    memset(s, 0, sizeof *s);
    s->elapsed_min = INT64_MAX;
    s->elapsed_max = INT64_MIN;
}

static void names_free(names *l) {
    for (size_t i = 0; i < l->n; i++) {
        free((char *)l->items[i].name);
        free((char *)l->items[i].reason);
    }
    free(l->items);
    free(l->up);
    *l = (names){0};
}

/* Frees what s owns (not s itself). */
static void scope_clear(scope *s) {
    free(s->name);
    s->name = NULL;
    names_free(&s->outcomes);
    names_free(&s->classes);
}

rf_status rf_ledger_tally_new(const rf_tally_options *opts, rf_ledger_tally **out, rf_error *err) {
    static const rf_tally_options none = {0};
    if (out == NULL) {
        rfi_ledger_error(err, "out", 0, 0, "out is NULL");
        return RF_EINVAL;
    }
    *out = NULL;
    if (opts == NULL) opts = &none;
    if (opts->group != RF_TALLY_BY_ROUTE && opts->group != RF_TALLY_BY_HOST) {
        rfi_ledger_error(err, "group", 0, 0, "must be RF_TALLY_BY_ROUTE or RF_TALLY_BY_HOST, got %d", (int)opts->group);
        return RF_EINVAL;
    }
    if (opts->time_buckets > RF_TALLY_MAX_TIME_BUCKETS) {
        rfi_ledger_error(err, "time_buckets", 0, 0, "must be 0..%d, got %zu", RF_TALLY_MAX_TIME_BUCKETS,
                         opts->time_buckets);
        return RF_EINVAL;
    }
    if (opts->time_buckets > 0 && (opts->bucket_ms < 1 || opts->bucket_ms > RFI_LEDGER_TS_MAX_MS)) {
        rfi_ledger_error(err, "bucket_ms", 0, 0, "must be 1..%lld (ms), got %lld", (long long)RFI_LEDGER_TS_MAX_MS,
                         (long long)opts->bucket_ms);
        return RF_EINVAL;
    }
    if (opts->time_buckets > 0 && (opts->origin_ms < -RFI_LEDGER_TS_MAX_MS || opts->origin_ms > RFI_LEDGER_TS_MAX_MS)) {
        rfi_ledger_error(err, "origin_ms", 0, 0, "must be -%lld..%lld (Unix ms), got %lld",
                         (long long)RFI_LEDGER_TS_MAX_MS, (long long)RFI_LEDGER_TS_MAX_MS, (long long)opts->origin_ms);
        return RF_EINVAL;
    }
    rf_ledger_tally *t = malloc(sizeof *t);
    scope *buckets = opts->time_buckets > 0 ? malloc(opts->time_buckets * sizeof *buckets) : NULL;
    if (t == NULL || (opts->time_buckets > 0 && buckets == NULL)) {
        free(t);
        free(buckets);
        rfi_ledger_error(err, "tally", 0, 0, "out of memory");
        return RF_ENOMEM;
    }
    *t = (rf_ledger_tally){.opts = *opts, .buckets = buckets, .ts_min = INT64_MAX, .ts_max = INT64_MIN};
    scope_init(&t->whole);
    for (size_t i = 0; i < opts->time_buckets; i++) scope_init(&buckets[i]);
    *out = t;
    return RF_OK;
}

void rf_ledger_tally_free(rf_ledger_tally *t) {
    if (t == NULL) return;
    scope_clear(&t->whole);
    for (size_t i = 0; i < t->n_named; i++) {
        scope_clear(t->named[i]);
        free(t->named[i]);
    }
    free(t->named);
    for (size_t i = 0; i < t->opts.time_buckets; i++) scope_clear(&t->buckets[i]);
    free(t->buckets);
    free(t);
}

/* ---- counting --------------------------------------------------------------------------------------- */

/* strcmp(a, b) == 0, without the call when the first bytes differ (most names a count is compared with). */
static inline bool same(const char *a, const char *b) { return a[0] == b[0] && strcmp(a, b) == 0; }

/* A copy of s, or NULL for NULL (*ok unchanged) or when memory runs out (*ok false). */
static char *copy_name(const char *s, bool *ok) {
    if (s == NULL) return NULL;
    char *d = strdup(s);
    if (d == NULL) *ok = false;
    return d;
}

/* The index of the count named (name, reason) in l, or -1 (linear: a scope has few distinct names). reason NULL: a
 * class, matched on its name alone. */
static long find(names *l, const char *name, const char *reason) {
    for (size_t k = 0; k < l->n; k++) {
        size_t i = k == 0 ? l->last : k == l->last ? 0 : k; /* last first, then the others in order */
        const rf_tally_count *c = &l->items[i];
        if (same(c->name, name) && (reason == NULL || same(c->reason, reason))) return (long)(l->last = i);
    }
    return -1;
}

/* Appends the count (name, reason) = n to l, linked to up (with_up: l is a named scope's list); its index, or -1 when
 * memory ran out (nothing added). */
static long append(names *l, const char *name, const char *reason, int64_t n, bool with_up, size_t up) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        rf_tally_count *more = realloc(l->items, cap * sizeof *more);
        if (more == NULL) return -1;
        l->items = more;
        if (with_up) {
            size_t *ups = realloc(l->up, cap * sizeof *ups);
            if (ups == NULL) return -1; /* items grew: harmless, cap stays */
            l->up = ups;
        }
        l->cap = cap;
    }
    bool ok = true;
    rf_tally_count c = {.name = copy_name(name, &ok), .reason = copy_name(reason, &ok), .n = n};
    if (!ok) {
        free((char *)c.name);
        free((char *)c.reason);
        return -1;
    }
    if (with_up) l->up[l->n] = up;
    l->items[l->n] = c;
    return (long)(l->last = l->n++);
}

/* Adds 1 to (name, reason) in l, and, with whole (l is then a named scope's list), to the same name in whole through
 * l's link; false when memory ran out (then the count is missing from one of them or both). */
static bool bump(names *l, names *whole, const char *name, const char *reason) {
    long i = find(l, name, reason);
    if (i >= 0) {
        l->items[i].n++;
        if (whole) whole->items[l->up[i]].n++;
        return true;
    }
    if (whole == NULL) return append(l, name, reason, 1, false, 0) >= 0;
    long w = find(whole, name, reason); /* the whole may know it from another scope */
    if (w >= 0)
        whole->items[w].n++;
    else if ((w = append(whole, name, reason, 1, false, 0)) < 0)
        return false;
    return append(l, name, reason, 1, true, (size_t)w) >= 0;
}

static void derive(const rf_ledger_record *rec, derived *d) {
    d->bucket = rf_tally_bucket_of(rec->elapsed_ms);
    d->le = 0;
    while (d->le < RF_TALLY_LE_COUNT && rec->elapsed_ms > LE_MS[d->le]) d->le++;
    d->attempts_slot = rec->attempts < 0                     ? 0
                       : rec->attempts > RF_LEDGER_MAX_TRIES ? RF_LEDGER_MAX_TRIES
                                                             : (size_t)rec->attempts;
    memset(d->uses, 0, sizeof d->uses);
    d->n_retried = 0;
    const char *pinned = rf_reason_name(RF_REASON_PINNED_STATUS); /* the reason of a retried try */
    for (size_t i = 0; i < rec->n_tries; i++) {
        int use = rec->tries[i].retry_after != NULL ? rfi_ledger_wait_use(rec, i) : -1; /* most tries have none */
        if (use >= 0 && use < RF_RA_USE_COUNT) d->uses[use]++;
        if (rec->attempts > 1 && same(rec->tries[i].reason, pinned))
            d->retried[d->n_retried++] = rec->tries[i].class_name;
    }
    d->timed = strcmp(rec->route, RF_LEDGER_HARNESS_ROUTE) != 0;
}

/* Counts rec's names into s: its (outcome, reason) and its retried classes; with whole (s is a named scope), into
 * the whole's too. False when memory ran out for a new name. */
static bool count_names(scope *s, scope *whole, const rf_ledger_record *rec, const derived *d) {
    bool ok = bump(&s->outcomes, whole ? &whole->outcomes : NULL, rec->outcome, rec->reason);
    for (size_t i = 0; i < d->n_retried; i++)
        ok = bump(&s->classes, whole ? &whole->classes : NULL, d->retried[i], NULL) && ok;
    return ok;
}

/* Counts rec (derived d) into s's numbers: everything but its names (count_names). */
static void count_numbers(scope *s, const rf_ledger_record *rec, const derived *d) {
    s->requests++;
    s->attempts += rec->attempts;
    if (rec->attempts > 1) s->retries += rec->attempts - 1;
    if (rec->ok) {
        s->successes++;
        s->success_attempts += rec->attempts;
        if (rec->attempts > 1) s->retried_successes++;
    }
    int64_t hedges = 0;
    bool hedge_won = false;
    for (size_t i = 0; i < rec->n_tries; i++) {
        const rf_ledger_try *t = &rec->tries[i];
        if (!t->hedge) continue;
        hedges++;
        if (t->fate != NULL && strcmp(t->fate, rf_try_fate_name(RF_FATE_WINNER)) == 0) hedge_won = true;
    }
    s->hedged += hedges > 0;
    s->hedges += hedges;
    s->hedge_wins += hedge_won;
    s->elapsed_sum += rec->elapsed_ms;
    if (rec->elapsed_ms < s->elapsed_min) s->elapsed_min = rec->elapsed_ms;
    if (rec->elapsed_ms > s->elapsed_max) s->elapsed_max = rec->elapsed_ms;
    s->hist[d->bucket]++;
    s->by_attempts[d->attempts_slot]++;
    s->elapsed_le[d->le]++;
    for (int u = 0; u < RF_RA_USE_COUNT; u++) s->retry_after[u] += d->uses[u];
}

/* The named scope of key (made on first use), or NULL when memory ran out. */
static scope *named_scope(rf_ledger_tally *t, const char *key) {
    for (size_t i = 0; i < t->n_named; i++)
        if (same(t->named[i]->name, key)) return t->named[i];
    if (t->n_named == t->cap_named) {
        size_t cap = t->cap_named ? 2 * t->cap_named : 8;
        scope **more = realloc(t->named, cap * sizeof *more);
        if (more == NULL) return NULL;
        t->named = more;
        t->cap_named = cap;
    }
    scope *s = malloc(sizeof *s);
    char *name = strdup(key);
    if (s == NULL || name == NULL) {
        free(s);
        free(name);
        return NULL;
    }
    scope_init(s);
    s->name = name;
    t->named[t->n_named++] = s;
    return s;
}

bool rfi_ledger_tally_record(rf_ledger_tally *t, const rf_ledger_record *rec, const char *host) {
    derived d;
    derive(rec, &d);
    count_numbers(&t->whole, rec, &d);
    scope *s = named_scope(t, t->opts.group == RF_TALLY_BY_HOST ? (host ? host : "") : rec->route);
    bool ok = s != NULL;
    if (ok) {
        count_numbers(s, rec, &d);
        ok = count_names(s, &t->whole, rec, &d); /* the whole's names through the named scope's links */
    }
    if (d.timed) { /* seed-harness records carry no ts */
        if (rec->ts_ms < t->ts_min) t->ts_min = rec->ts_ms;
        if (rec->ts_ms > t->ts_max) t->ts_max = rec->ts_ms;
        if (t->buckets != NULL) {
            int64_t off = rec->ts_ms - t->opts.origin_ms; /* both within ±RFI_LEDGER_TS_MAX_MS: no overflow */
            int64_t i = off < 0 ? 0 : off / t->opts.bucket_ms;
            if (i >= (int64_t)t->opts.time_buckets) i = (int64_t)t->opts.time_buckets - 1;
            count_numbers(&t->buckets[i], rec, &d);
            ok = count_names(&t->buckets[i], NULL, rec, &d) && ok;
        }
    }
    if (!ok) t->incomplete = true;
    return ok;
}

void rfi_ledger_tally_lines(rf_ledger_tally *t, const rf_tally_file *f) {
    t->lines += f->lines;
    t->torn_lines += f->torn_lines;
    t->corrupt_lines += f->corrupt_lines;
}

const char *rfi_ledger_tally_missing(const rf_ledger_record *rec) {
    if (rec->route == NULL) return "$.route";
    if (rec->outcome == NULL) return "$.outcome";
    if (rec->reason == NULL) return "$.reason";
    if (rec->n_tries > RF_LEDGER_MAX_TRIES) return "$.tries";
    for (size_t i = 0; i < rec->n_tries; i++)
        if (rec->tries[i].class_name == NULL || rec->tries[i].reason == NULL) return "$.tries";
    return NULL;
}

rf_status rfi_ledger_refuse_missing(const char *missing, const char *reader, rf_error *err) {
    if (missing == NULL) return RF_OK;
    rfi_ledger_error(err, missing, 0, 0, "a string the %s reads is NULL, or more than %d tries", reader,
                     RF_LEDGER_MAX_TRIES);
    return RF_EINVAL;
}

rf_status rf_ledger_tally_add(rf_ledger_tally *t, const rf_ledger_record *rec, const char *host, rf_error *err) {
    if (t == NULL || rec == NULL) {
        rfi_ledger_error(err, t ? "rec" : "t", 0, 0, "%s is NULL", t ? "rec" : "t");
        return RF_EINVAL;
    }
    if (rfi_ledger_refuse_missing(rfi_ledger_tally_missing(rec), "tally", err) != RF_OK) return RF_EINVAL;
    t->lines++;
    if (!rfi_ledger_tally_record(t, rec, host)) {
        rfi_ledger_error(err, "tally", 0, 0, "out of memory: the tally is incomplete");
        return RF_ENOMEM;
    }
    return RF_OK;
}

void rf_ledger_tally_observer(void *ud, const rf_ledger_record *rec, const char *host) {
    rf_ledger_tally_add(ud, rec, host, NULL); /* ENOMEM marks it incomplete; a writer's records are whole */
}

/* ---- copying ------------------------------------------------------------------------------------------ */

static bool names_copy(names *to, const names *from) {
    *to = (names){0};
    if (from->n == 0) return true;
    to->items = malloc(from->n * sizeof *to->items);
    if (to->items == NULL) return false;
    if (from->up != NULL) {
        to->up = malloc(from->n * sizeof *to->up);
        if (to->up == NULL) return false;
        memcpy(to->up, from->up, from->n * sizeof *to->up);
    }
    to->cap = from->n;
    bool ok = true;
    for (size_t i = 0; i < from->n && ok; i++) {
        rf_tally_count c = {.name = copy_name(from->items[i].name, &ok),
                            .reason = copy_name(from->items[i].reason, &ok),
                            .n = from->items[i].n};
        to->items[to->n++] = c; /* freed with the others should a copy fail */
    }
    return ok;
}

/* Copies from into to (every count and name); false when memory ran out (to then owns what was copied). */
static bool scope_copy(scope *to, const scope *from) {
    *to = *from;
    to->name = NULL;
    to->outcomes = to->classes = (names){0};
    bool ok = true;
    to->name = copy_name(from->name, &ok);
    return names_copy(&to->outcomes, &from->outcomes) && names_copy(&to->classes, &from->classes) && ok;
}

rf_status rf_ledger_tally_copy(const rf_ledger_tally *t, rf_ledger_tally **out, rf_error *err) {
    if (t == NULL || out == NULL) {
        rfi_ledger_error(err, t ? "out" : "t", 0, 0, "%s is NULL", t ? "out" : "t");
        return RF_EINVAL;
    }
    rf_ledger_tally *c;
    rf_status st = rf_ledger_tally_new(&t->opts, &c, err);
    if (st != RF_OK) return st;
    c->lines = t->lines;
    c->torn_lines = t->torn_lines;
    c->corrupt_lines = t->corrupt_lines;
    c->ts_min = t->ts_min;
    c->ts_max = t->ts_max;
    c->incomplete = t->incomplete;
    bool ok = scope_copy(&c->whole, &t->whole);
    for (size_t i = 0; ok && i < t->opts.time_buckets; i++) ok = scope_copy(&c->buckets[i], &t->buckets[i]);
    if (ok && t->n_named > 0) {
        c->named = malloc(t->n_named * sizeof *c->named);
        ok = c->named != NULL;
        if (ok) c->cap_named = t->n_named;
    }
    for (size_t i = 0; ok && i < t->n_named; i++) {
        scope *s = malloc(sizeof *s);
        if (s == NULL) {
            ok = false;
            break;
        }
        c->named[c->n_named++] = s; /* freed with the tally should its copy fail */
        ok = scope_copy(s, t->named[i]);
    }
    if (!ok) {
        rf_ledger_tally_free(c);
        rfi_ledger_error(err, "tally", 0, 0, "out of memory");
        return RF_ENOMEM;
    }
    *out = c;
    return RF_OK;
}

/* ---- reading ------------------------------------------------------------------------------------------ */

/* Fills out with s's figures and the views of its counts. */
static void view(const scope *s, rf_tally_scope *out) {
    *out = (rf_tally_scope){.name = s->name,
                            .outcomes = s->outcomes.items,
                            .n_outcomes = s->outcomes.n,
                            .retried_classes = s->classes.items,
                            .n_retried_classes = s->classes.n,
                            .by_attempts = s->by_attempts,
                            .retry_after = s->retry_after,
                            .hist = s->hist};
    rf_tally_figures *f = &out->figures;
    const char *terminal = rf_outcome_name(RF_OUTCOME_TERMINAL);
    for (size_t i = 0; i < s->outcomes.n; i++)
        if (strcmp(s->outcomes.items[i].name, terminal) == 0) f->terminal += s->outcomes.items[i].n;
    f->requests = s->requests;
    f->successes = s->successes;
    f->failures = s->requests - s->successes;
    f->retried_successes = s->retried_successes;
    f->attempts = s->attempts;
    f->success_attempts = s->success_attempts;
    f->retries = s->retries;
    f->hedged = s->hedged;
    f->hedges = s->hedges;
    f->hedge_wins = s->hedge_wins;
#define RF_X_RATIO(name, num, den) f->name = f->den > 0 ? (double)f->num / (double)f->den : 0;
    RF_TALLY_RATIOS(RF_X_RATIO)
#undef RF_X_RATIO
    f->elapsed_ms_sum = s->elapsed_sum;
    int64_t below = 0;
    for (size_t i = 0; i < RF_TALLY_LE_COUNT; i++) f->elapsed_le[i] = below += s->elapsed_le[i];
    if (s->requests == 0) return;
    f->elapsed_min_ms = s->elapsed_min;
    f->elapsed_max_ms = s->elapsed_max;
    f->elapsed_mean_ms = (double)s->elapsed_sum / (double)s->requests;
    f->elapsed_p50_ms = rf_tally_percentile_ms(out, 0.50);
    f->elapsed_p95_ms = rf_tally_percentile_ms(out, 0.95);
    f->elapsed_p99_ms = rf_tally_percentile_ms(out, 0.99);
}

void rf_ledger_tally_whole(const rf_ledger_tally *t, rf_tally_scope *out) {
    if (t == NULL) {
        *out = (rf_tally_scope){0};
        return;
    }
    view(&t->whole, out);
}

size_t rf_ledger_tally_scope_count(const rf_ledger_tally *t) { return t ? t->n_named : 0; }

bool rf_ledger_tally_scope(const rf_ledger_tally *t, size_t i, rf_tally_scope *out) {
    if (t == NULL || i >= t->n_named) return false;
    view(t->named[i], out);
    return true;
}

size_t rf_ledger_tally_time_bucket_count(const rf_ledger_tally *t) { return t ? t->opts.time_buckets : 0; }

bool rf_ledger_tally_time_bucket(const rf_ledger_tally *t, size_t i, rf_tally_scope *out) {
    if (t == NULL || i >= t->opts.time_buckets) return false;
    view(&t->buckets[i], out);
    out->start_ms = t->opts.origin_ms + (int64_t)i * t->opts.bucket_ms;
    return true;
}

void rf_ledger_tally_info(const rf_ledger_tally *t, rf_tally_info *out) {
    if (t == NULL) {
        *out = (rf_tally_info){0};
        return;
    }
    *out = (rf_tally_info){.lines = t->lines,
                           .torn_lines = t->torn_lines,
                           .corrupt_lines = t->corrupt_lines,
                           .has_ts = t->ts_min <= t->ts_max,
                           .incomplete = t->incomplete};
    if (out->has_ts) {
        out->ts_min_ms = t->ts_min;
        out->ts_max_ms = t->ts_max;
    }
}
