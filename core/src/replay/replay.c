/*
 * The replay object (retryfreeze/replay.h): records in, two tallies out. Each record is counted as recorded, offered to
 * the pools (replay_model.c), and walked under the candidate (replay_walk.c) over its recorded tries; a request the
 * candidate takes past them waits in a bounded queue until the pools have seen more of the record (the queue is
 * drained oldest first when full, and by rf_replay_finish), then its missing tries are drawn, once for the prediction
 * and once per replicate for the interval (replay_interval.c). Every predicted request goes into the predicted tally
 * as a ledger record, so its figures are those `stats` would print for that request.
 */
#include "replay_internal.h"
#include "../ledger/ledger_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of a waiting request's path it keeps: routing is done, and the engine reads only that a path is there. */
#define PENDING_PATH 512

/* A request waiting for drawn tries, with copies of the strings its walk reads. */
typedef struct pending {
    rfi_replay_walk w;
    char method[24];
    char path[PENDING_PATH];
    char host[RF_LEDGER_MAX_HOST + 1];
} pending;

typedef struct gap {
    long route;
    uint16_t class_id;
    int64_t samples, tries;
    const char *fallback;
} gap;

/* Tries drawn beyond the record: at an attempt (depth + 1) after a class its requests reached too rarely. */
typedef struct beyond {
    long route;
    uint16_t class_id;
    int depth, drawn_depth;
    int64_t samples, tries;
    const char *fallback;
} beyond;

typedef struct lock_count {
    char *digest;
    int64_t requests;
} lock_count;

struct rf_replay {
    const rf_policy *p;
    rf_replay_options o;
    rf_ledger_tally *recorded, *predicted;
    rfi_replay_route *routes;
    size_t n_routes;
    int64_t *fastest_ms; /* by candidate route: its fastest recorded success so far (a hedge's best case), -1 none */
    rf_retry_budget *budget;         /* the candidate's retryBudget, its bucket in tokens_milli; NULL without */
    int64_t tokens_milli, max_milli; /* the bucket (the budget's store: replay_store_add) */
    rf_rng jitter, draws;            /* the prediction's backoff jitter, and its draws from the pools */
    rf_rng *replicate_rng;           /* one per replicate: its jitter and its draws */
    rfi_replay_pools *pools;
    rfi_replay_spread *spread;
    pending *queue; /* a ring: n waiting from head */
    size_t queue_cap, queue_head, queue_n;
    gap *gaps;
    size_t n_gaps, cap_gaps;
    beyond *beyonds;
    size_t n_beyonds, cap_beyonds;
    lock_count *locks;
    size_t n_locks, cap_locks, last_lock;
    char class_names[RFI_REPLAY_CLASSES][RF_CLASS_NAME_MAX];
    int64_t last_end_ms; /* the latest recorded end so far (for overlapping requests) */
    rf_replay_info info;
    bool incomplete;
};

/* ---- the candidate's retry budget ------------------------------------------------------------------------------ */

/* The budget's shared store, kept here: the replay sets and reads its bucket (a waiting request and each replicate
 * start from the bucket as it was when the request was put aside). */
static bool replay_store_add(void *ctx, int64_t delta_milli, int64_t max_milli, int64_t *tokens_milli) {
    rf_replay *r = ctx;
    int64_t t = r->tokens_milli + delta_milli;
    r->tokens_milli = t < 0 ? 0 : t > max_milli ? max_milli : t;
    *tokens_milli = r->tokens_milli;
    return true;
}

/* ---- making and freeing ------------------------------------------------------------------------------------------ */

/* An option out of its range: RF_EINVAL naming it. */
static rf_status out_of_range(rf_error *err, const char *option, long long lo, long long hi, long long got) {
    rfi_ledger_error(err, option, 0, 0, "%s must be %lld..%lld, got %lld", option, lo, hi, got);
    return RF_EINVAL;
}

static rf_status check_options(const rf_policy *p, const rf_replay_options *o, rf_error *err) {
    if (p == NULL) {
        rfi_ledger_error(err, "candidate", 0, 0, "candidate is NULL");
        return RF_EINVAL;
    }
    if (o->group != RF_TALLY_BY_ROUTE && o->group != RF_TALLY_BY_HOST)
        return out_of_range(err, "group", RF_TALLY_BY_ROUTE, RF_TALLY_BY_HOST, (long long)o->group);
    if (o->min_samples > 1000000) return out_of_range(err, "min_samples", 1, 1000000, o->min_samples);
    if (o->replicates == 1 || o->replicates > RF_REPLAY_MAX_REPLICATES)
        return out_of_range(err, "replicates", 2, RF_REPLAY_MAX_REPLICATES, o->replicates);
    if (o->pending > RF_REPLAY_MAX_PENDING) return out_of_range(err, "pending", 1, RF_REPLAY_MAX_PENDING, o->pending);
    return RF_OK;
}

/* The candidate's routes as a walk reads them. */
static bool load_routes(rf_replay *r) {
    r->n_routes = rf_policy_route_count(r->p);
    r->routes = calloc(r->n_routes ? r->n_routes : 1, sizeof *r->routes);
    r->fastest_ms = malloc((r->n_routes ? r->n_routes : 1) * sizeof *r->fastest_ms);
    if (r->routes == NULL || r->fastest_ms == NULL) return false;
    for (size_t i = 0; i < r->n_routes; i++) {
        rf_route_view v;
        if (rf_policy_route(r->p, i, &v) != RF_OK) return false;
        rfi_replay_route *route = &r->routes[i];
        route->endpoint = v.endpoint;
        r->fastest_ms[i] = -1;
        for (size_t k = 0; k < v.n_retry_after_headers; k++) {
            rf_wait_header h;
            if (rf_wait_header_parse_name(v.retry_after_headers[k], strlen(v.retry_after_headers[k]), &h) != 0)
                continue;
            route->reads[h] = true;
            if (h != RF_WAIT_RETRY_AFTER) route->reads_beyond_retry_after = true;
        }
    }
    return true;
}

static void name_classes(rf_replay *r) {
    for (int c = 0; c < RFI_REPLAY_CLASSES; c++) strcpy(r->class_names[c], "UNKNOWN");
    strcpy(r->class_names[RFI_REPLAY_FIRST], "(first try)");
    strcpy(r->class_names[RFI_REPLAY_ANY], "(any failure)");
    for (int s = RF_HTTP_STATUS_MIN; s <= RF_HTTP_STATUS_MAX; s++)
        snprintf(r->class_names[s], RF_CLASS_NAME_MAX, "HTTP_%d", s);
#define RF_X_NAMED(e, token) strcpy(r->class_names[RFI_REPLAY_NAMED + e], token);
    RF_NAMED_CLASSES(RF_X_NAMED)
#undef RF_X_NAMED
}

/* The candidate's retry budget, when it has one: the engine's own budget, so the replay throttles as the client
 * does. A token bucket keeps its count in a store of the replay's own (replay_store_add: set and read around a
 * waiting request and each replicate); a ratio keeps its local window, saved and restored at the same points
 * (rfi_retry_budget_save). RF_ENOMEM, or the budget's refusal of the store, with its own error in *err. */
static rf_status make_budget(rf_replay *r, rf_error *err) {
    int64_t ratio;
    r->info.budget = rf_policy_retry_budget(r->p, &r->max_milli, &ratio);
    if (!r->info.budget) return RF_OK;
    r->budget = rf_retry_budget_new(r->p);
    if (r->budget == NULL) {
        rfi_ledger_error(err, "replay", 0, 0, "out of memory for the candidate's retry budget");
        return RF_ENOMEM;
    }
    if (rf_policy_retry_ratio(r->p, NULL, NULL, NULL)) return RF_OK; /* its local window is the replay's */
    r->tokens_milli = r->max_milli;                                  /* a bucket starts full */
    const rf_retry_budget_store store = {.add = replay_store_add, .free = NULL, .ctx = r};
    return rf_retry_budget_set_store(r->budget, &store, err);
}

rf_status rf_replay_new(const rf_policy *candidate, const rf_replay_options *opts, rf_replay **out, rf_error *err) {
    static const rf_replay_options none = {0};
    if (out == NULL) {
        rfi_ledger_error(err, "out", 0, 0, "out is NULL");
        return RF_EINVAL;
    }
    *out = NULL;
    if (opts == NULL) opts = &none;
    rf_status st = check_options(candidate, opts, err);
    if (st != RF_OK) return st;
    rf_replay *r = calloc(1, sizeof *r);
    if (r == NULL) {
        rfi_ledger_error(err, "replay", 0, 0, "out of memory");
        return RF_ENOMEM;
    }
    r->p = candidate;
    r->o = *opts;
    if (r->o.min_samples == 0) r->o.min_samples = RF_REPLAY_MIN_SAMPLES;
    if (r->o.replicates == 0) r->o.replicates = RF_REPLAY_REPLICATES;
    if (r->o.pending == 0) r->o.pending = RF_REPLAY_PENDING;
    r->info.min_samples = r->o.min_samples;
    r->info.replicates = r->o.replicates;
    r->info.seed = r->o.seed;
    r->last_end_ms = INT64_MIN;
    rf_rng_seed(&r->jitter, r->o.seed);
    rf_rng_seed(&r->draws, r->o.seed ^ UINT64_C(0x6472617773)); /* "draws": a stream of its own */
    name_classes(r);
    const rf_tally_options tally = {.group = r->o.group};
    r->replicate_rng = malloc(r->o.replicates * sizeof *r->replicate_rng);
    r->pools = rfi_replay_pools_new(r->o.seed);
    r->spread = rfi_replay_spread_new(r->o.replicates);
    /* Each step fails with its own error: memory is named as memory, and a refusal keeps its message. */
    if (!(r->replicate_rng && r->pools && r->spread && load_routes(r))) {
        rf_replay_free(r);
        rfi_ledger_error(err, "replay", 0, 0, "out of memory");
        return RF_ENOMEM;
    }
    st = make_budget(r, err);
    if (st == RF_OK) st = rf_ledger_tally_new(&tally, &r->recorded, err);
    if (st == RF_OK) st = rf_ledger_tally_new(&tally, &r->predicted, err);
    if (st != RF_OK) {
        rf_replay_free(r);
        return st;
    }
    for (uint32_t k = 0; k < r->o.replicates; k++)
        rf_rng_seed(&r->replicate_rng[k], r->o.seed + UINT64_C(0x9e3779b97f4a7c15) * (k + 1));
    *out = r;
    return RF_OK;
}

void rf_replay_free(rf_replay *r) {
    if (r == NULL) return;
    rf_ledger_tally_free(r->recorded);
    rf_ledger_tally_free(r->predicted);
    rf_retry_budget_free(r->budget);
    free(r->routes);
    free(r->fastest_ms);
    free(r->replicate_rng);
    rfi_replay_pools_free(r->pools);
    rfi_replay_spread_free(r->spread);
    free(r->queue);
    free(r->gaps);
    free(r->beyonds);
    for (size_t i = 0; i < r->n_locks; i++) free(r->locks[i].digest);
    free(r->locks);
    free(r);
}

/* ---- the predicted request ------------------------------------------------------------------------------------- */

/* The name of the scope w's request counts in (the candidate's endpoint, or its host). */
static const char *scope_of(const rf_replay *r, const rfi_replay_walk *w) {
    if (r->o.group == RF_TALLY_BY_HOST) return w->host ? w->host : "";
    return r->routes[w->route].endpoint;
}

/* The counts of w's request the interval needs (rfi_replay_counts). */
static rfi_replay_counts counts_of(const rfi_replay_walk *w) {
    const bool ok = rfi_replay_walk_outcome(w) == RF_OUTCOME_SUCCESS;
    const bool terminal = rfi_replay_walk_outcome(w) == RF_OUTCOME_TERMINAL;
    const int64_t n = w->requests;
    return (rfi_replay_counts){{1, ok, terminal, ok && n > 1, n, ok ? n : 0, n > 1 ? n - 1 : 0}};
}

/* Clears a predicted record's head (every field but the tries, which emit writes one by one): zeroing all
 * RF_LEDGER_MAX_TRIES tries per request would cost more than the rest of its prediction. */
static void clear_head(rf_ledger_record *rec) {
    memset(rec, 0, offsetof(rf_ledger_record, tries));
    rec->host = NULL;
    rec->budget = NULL;
}

/* Counts the best case of w's hedges (rfi_replay_walk_best), in the whole and in its scope. */
static void count_best(rf_replay *r, const rfi_replay_walk *w) {
    int hedges, requests;
    bool won;
    rfi_replay_walk_best(w, &hedges, &requests, &won);
    r->info.hedges_best += hedges;
    r->info.hedge_wins_best += won;
    r->info.attempts_best += requests;
    if (w->hedges > 0 && !w->unmodelled) {
        if (w->unbounded) r->info.hedges_unbounded++;
        if (!rfi_replay_spread_hedges(r->spread, scope_of(r, w), hedges - w->hedges, won)) r->incomplete = true;
    }
}

/* Counts w's request as predicted, and what became of it. */
static void emit(rf_replay *r, const rfi_replay_walk *w) {
    const rf_outcome outcome = rfi_replay_walk_outcome(w);
    const rf_reason reason = w->unmodelled ? (rf_reason)w->rec_reason : (rf_reason)w->stop;
    int64_t ts = w->start_wall_ms + w->clock_ms;
    rf_ledger_record rec;
    clear_head(&rec);
    rec.ts_ms = ts < 0 ? 0 : ts > RFI_LEDGER_TS_MAX_MS ? RFI_LEDGER_TS_MAX_MS : ts;
    rec.route = r->routes[w->route].endpoint;
    rec.method = w->method;
    rec.path = w->path;
    rec.key = w->has_key ? "" : NULL;
    rec.policy = rf_policy_digest(r->p);
    rec.attempts = w->requests;
    rec.elapsed_ms = w->clock_ms;
    rec.outcome = rf_outcome_name(outcome);
    rec.reason = rf_reason_name(reason);
    rec.ok = outcome == RF_OUTCOME_SUCCESS;
    rec.status = w->last_status;
    rec.n_tries = w->n;
    rec.host = w->host;
    for (size_t i = 0; i < w->n; i++) {
        const rfi_replay_try *t = &w->tries[i];
        if (t->hedge) { /* no answer of its own: the request's end cancelled it */
            rec.tries[i] = (rf_ledger_try){.class_name = r->class_names[t->class_id],
                                           .elapsed_ms = w->clock_ms - t->start_ms,
                                           .reason = rf_reason_name(reason),
                                           .timeout_ms = t->timeout_ms,
                                           .transport = rf_transport_name(RF_TRANSPORT_OTHER),
                                           .start_ms = t->start_ms,
                                           .hedge = true,
                                           .fate = rf_try_fate_name(RF_FATE_CANCELLED)};
            continue;
        }
        rec.tries[i] =
            (rf_ledger_try){.class_name = r->class_names[t->class_id],
                            .status = t->status,
                            .elapsed_ms = t->elapsed_ms,
                            .delay_ms = t->delay_ms,
                            .reason = rf_reason_name((rf_reason)t->reason),
                            .retry_after = t->ra_at ? w->text + t->ra_at - 1 : NULL,
                            .retry_after_header = t->ra_at ? rf_wait_header_name((rf_wait_header)t->ra_header) : NULL,
                            .timeout_ms = t->timeout_ms};
        if (w->hedges > 0) { /* a request that hedged: each attempt's start and fate, as the client writes them */
            rec.tries[i].start_ms = t->start_ms;
            rec.tries[i].fate = rf_try_fate_name(t->reason == RF_REASON_SUCCESS ? RF_FATE_WINNER : RF_FATE_FAILED);
        }
    }
    if (!rfi_ledger_tally_record(r->predicted, &rec, w->host)) r->incomplete = true;
    count_best(r, w);
    rf_replay_info *info = &r->info;
    if (w->unmodelled)
        info->unmodelled++;
    else if (w->modelled)
        info->modelled++;
    else
        info->exact++;
    if (!w->unmodelled && (reason == RF_REASON_DEADLINE || reason == RF_REASON_RETRY_AFTER_EXCEEDS_BUDGET) &&
        w->requests < w->rec_tries)
        info->deadline_cut++;
    if (!w->unmodelled && reason == RF_REASON_RETRY_THROTTLED) info->throttled++;
    if (!w->unmodelled && w->beyond) info->beyond_requests++;
}

/* A request the candidate routes nowhere: refused before any attempt, as the client refuses it. */
static void emit_no_route(rf_replay *r, const rf_ledger_record *rec) {
    rf_ledger_record out;
    clear_head(&out);
    out.ts_ms = rec->ts_ms - rec->elapsed_ms < 0 ? 0 : rec->ts_ms - rec->elapsed_ms;
    out.route = "";
    out.method = rec->method;
    out.path = rec->path;
    out.key = rec->key;
    out.policy = rf_policy_digest(r->p);
    out.outcome = rf_outcome_name(RF_OUTCOME_REFUSED);
    out.reason = rf_reason_name(RF_REASON_NO_ROUTE);
    out.host = rec->host;
    if (!rfi_ledger_tally_record(r->predicted, &out, rec->host)) r->incomplete = true;
    r->info.no_route++;
}

/* ---- drawing the tries the record never made --------------------------------------------------------------------- */

/* Notes a draw for route after class that found too few samples of its own (fallback: what it used; ok false: none). */
static void note_gap(rf_replay *r, long route, uint16_t class_id, int depth, bool ok, const char *fallback) {
    if (ok && fallback == NULL) return;
    gap *g = NULL;
    for (size_t i = 0; i < r->n_gaps && g == NULL; i++)
        if (r->gaps[i].route == route && r->gaps[i].class_id == class_id) g = &r->gaps[i];
    if (g == NULL) {
        if (r->n_gaps == r->cap_gaps) {
            size_t cap = r->cap_gaps ? 2 * r->cap_gaps : 8;
            gap *more = realloc(r->gaps, cap * sizeof *more);
            if (more == NULL) {
                r->incomplete = true;
                return;
            }
            r->gaps = more;
            r->cap_gaps = cap;
        }
        g = &r->gaps[r->n_gaps++];
        *g = (gap){.route = route, .class_id = class_id};
    }
    g->samples = rfi_replay_pools_seen(r->pools, route, class_id, depth);
    g->tries++;
    g->fallback = ok ? fallback : NULL;
}

/* Notes a try at depth after class_id on route drawn from d, a pool of a shallower depth (fallback: its class source).
 */
static void note_beyond(rf_replay *r, long route, uint16_t class_id, int depth, const rfi_replay_drawn *d,
                        const char *fallback) {
    beyond *b = NULL;
    for (size_t i = 0; i < r->n_beyonds && b == NULL; i++)
        if (r->beyonds[i].route == route && r->beyonds[i].class_id == class_id && r->beyonds[i].depth == depth)
            b = &r->beyonds[i];
    if (b == NULL) {
        if (r->n_beyonds == r->cap_beyonds) {
            size_t cap = r->cap_beyonds ? 2 * r->cap_beyonds : 8;
            beyond *more = realloc(r->beyonds, cap * sizeof *more);
            if (more == NULL) {
                r->incomplete = true;
                return;
            }
            r->beyonds = more;
            r->cap_beyonds = cap;
        }
        b = &r->beyonds[r->n_beyonds++];
        *b = (beyond){.route = route, .class_id = class_id, .depth = depth};
    }
    b->samples = rfi_replay_pools_seen_at(r->pools, route, class_id, depth);
    b->drawn_depth = d->depth;
    b->fallback = fallback;
    b->tries++;
    r->info.beyond_tries++;
}

/* The facts of a try beyond the record after w's last try, into *f: failing as it did, or succeeding. */
static void beyond_facts(const rf_replay *r, const rfi_replay_walk *w, bool fails, rfi_replay_facts *f) {
    if (fails) { /* the failure persists: the last try again, without its wait headers */
        *f = (rfi_replay_facts){.status = w->last_status,
                                .transport = (rf_transport)w->last_transport,
                                .not_sent = w->last_not_sent,
                                .elapsed_ms = w->last_elapsed_ms,
                                .timeout_ms = w->last_elapsed_ms > 0 ? w->last_elapsed_ms : 1,
                                .wall_ms = w->last_wall_ms};
        return;
    }
    /* it succeeds, as fast as the route's fastest recorded success (else as long as the last try took) */
    const int64_t fastest = r->fastest_ms[w->route];
    const int64_t ms = fastest >= 0 ? fastest : w->last_elapsed_ms;
    *f = (rfi_replay_facts){.status = 200,
                            .transport = RF_TRANSPORT_OK,
                            .elapsed_ms = ms,
                            .timeout_ms = ms > 0 ? ms : 1,
                            .wall_ms = w->last_wall_ms};
}

/* Draws w's tries until the candidate stops, or no pool can give one (then its request ends as recorded).
 * replicate < 0: the prediction (c counts what it finds); else that replicate's draws. A try beyond the record is
 * drawn as the deepest the record has when fails < 0; else the first fails such tries fail as the try before did,
 * and the next succeeds (one case of the interval's bounds). */
static void continue_walk(rf_replay *r, const rfi_replay_ctx *c, rfi_replay_walk *w, rf_rng *jitter, rf_rng *draws,
                          int replicate, int fails) {
    while (!w->done) {
        const uint16_t after = w->requests == 0 ? RFI_REPLAY_FIRST : w->prev_class;
        const int depth = after == RFI_REPLAY_FIRST ? 0 : w->depth < 1 ? 1 : w->depth;
        rfi_replay_drawn d;
        const char *fallback = NULL;
        /* A followed redirect's next hop is not drawn: its target's answers are not pooled. */
        bool ok = !w->in_hop && rfi_replay_pools_draw(r->pools, w->route, after, depth, r->o.min_samples, draws,
                                                      replicate, &d, &fallback);
        if (c->info != NULL && !w->in_hop) note_gap(r, w->route, after, depth, ok, fallback);
        if (!ok) {
            w->unmodelled = true;
            rfi_replay_walk_end(w, RF_REASON_NO_ROUTE); /* not read: an unmodelled request ends as recorded */
            return;
        }
        if (after != RFI_REPLAY_FIRST && d.depth < depth) { /* an attempt the record did not reach often enough */
            w->beyond = true;
            if (c->info != NULL) note_beyond(r, w->route, after, depth, &d, fallback);
            if (fails >= 0) beyond_facts(r, w, w->beyond_tries < fails, &d.facts);
            w->beyond_tries++;
        }
        w->modelled = true;
        if (c->info != NULL) c->info->modelled_tries++;
        rfi_replay_walk_try(c, w, &d.facts, jitter);
    }
}

/* Draws a waiting request's tries: the prediction, then each replicate from the same start, then, when the
 * prediction drew a try beyond the record, its worst and best case there (with the prediction's draws before it). */
static void draw_pending(rf_replay *r, pending *e) {
    rfi_replay_walk start;
    memcpy(&start, &e->w, offsetof(rfi_replay_walk, n));
    const int64_t saved = r->tokens_milli;
    rfi_budget_state saved_window;
    rfi_retry_budget_save(r->budget, &saved_window);
    const rfi_replay_ctx point = {
        .p = r->p, .routes = r->routes, .budget = r->budget, .info = &r->info, .fastest_ms = r->fastest_ms};
    r->tokens_milli = e->w.tokens_milli;
    const rf_rng jitter0 = r->jitter, draws0 = r->draws;
    rfi_retry_budget_restore(r->budget, &e->w.window);
    continue_walk(r, &point, &e->w, &r->jitter, &r->draws, -1, -1);
    emit(r, &e->w);
    if (e->w.unmodelled) {
        r->tokens_milli = saved;
        rfi_retry_budget_restore(r->budget, &saved_window);
        return;
    }
    const rfi_replay_counts predicted = counts_of(&e->w);
    const rfi_replay_ctx quiet = {
        .p = r->p, .routes = r->routes, .budget = r->budget, .info = NULL, .fastest_ms = r->fastest_ms};
    const char *scope = scope_of(r, &e->w);
    for (uint32_t k = 0; k < r->o.replicates; k++) {
        rfi_replay_walk rep;
        memcpy(&rep, &start, offsetof(rfi_replay_walk, n));
        rep.light = true;
        r->tokens_milli = start.tokens_milli;
        rfi_retry_budget_restore(r->budget, &start.window);
        continue_walk(r, &quiet, &rep, &r->replicate_rng[k], &r->replicate_rng[k], (int)k, -1);
        const rfi_replay_counts drawn = counts_of(&rep);
        if (!rfi_replay_spread_add(r->spread, scope, k, &predicted, &drawn)) r->incomplete = true;
    }
    if (e->w.beyond) { /* case m: m tries beyond the record fail, the next succeeds; the last: they all fail */
        rfi_replay_counts cases[RFI_REPLAY_CASES];
        int n = 0;
        while (n < RFI_REPLAY_CASES) {
            rfi_replay_walk rep;
            memcpy(&rep, &start, offsetof(rfi_replay_walk, n));
            rep.light = true;
            r->tokens_milli = start.tokens_milli;
            rfi_retry_budget_restore(r->budget, &start.window);
            rf_rng jitter = jitter0, draws = draws0; /* the prediction's, up to its first try beyond the record */
            continue_walk(r, &quiet, &rep, &jitter, &draws, -1, n);
            cases[n++] = counts_of(&rep);
            if (rep.beyond_tries <= n - 1) break; /* no try succeeded: every one failed */
        }
        if (!rfi_replay_spread_beyond(r->spread, scope, &predicted, cases, n)) r->incomplete = true;
    }
    r->tokens_milli = saved;
    rfi_retry_budget_restore(r->budget, &saved_window);
}

/* Points e's walk at e's own copies of its strings: an entry holds pointers into itself, so every move of one
 * (the queue's growth) must call this. */
static void rebind(pending *e) {
    e->w.method = e->method;
    e->w.path = e->path;
    if (e->w.host != NULL) e->w.host = e->host;
}

/* Puts w aside until its tries can be drawn (the oldest waiting request is drawn first when the queue is full). */
static void put_aside(rf_replay *r, const rfi_replay_walk *w) {
    if (r->queue_n == r->o.pending) {
        pending *oldest = &r->queue[r->queue_head];
        draw_pending(r, oldest);
        r->queue_head = (r->queue_head + 1) % r->queue_cap;
        r->queue_n--;
    }
    if (r->queue_n == r->queue_cap) { /* grow, oldest first */
        size_t cap = r->queue_cap ? 2 * r->queue_cap : 64;
        if (cap > r->o.pending) cap = r->o.pending;
        pending *more = malloc(cap * sizeof *more);
        if (more == NULL) {
            r->incomplete = true;
            return;
        }
        for (size_t i = 0; i < r->queue_n; i++) {
            more[i] = r->queue[(r->queue_head + i) % r->queue_cap];
            rebind(&more[i]);
        }
        free(r->queue);
        r->queue = more;
        r->queue_cap = cap;
        r->queue_head = 0;
    }
    pending *e = &r->queue[(r->queue_head + r->queue_n++) % r->queue_cap];
    memcpy(&e->w, w, offsetof(rfi_replay_walk, tries) + w->n * sizeof w->tries[0]);
    memcpy(e->w.text, w->text, w->text_used);
    snprintf(e->method, sizeof e->method, "%.*s", (int)w->method_len, w->method);
    snprintf(e->path, sizeof e->path, "%.*s", (int)w->path_len, w->path);
    e->w.method_len = strlen(e->method);
    e->w.path_len = strlen(e->path);
    if (w->host != NULL) snprintf(e->host, sizeof e->host, "%s", w->host);
    rebind(e);
    e->w.tokens_milli = r->tokens_milli;
    rfi_retry_budget_save(r->budget, &e->w.window);
}

/* ---- one record ------------------------------------------------------------------------------------------------- */

static void count_lock(rf_replay *r, const char *digest) {
    if (r->last_lock < r->n_locks && strcmp(r->locks[r->last_lock].digest, digest) == 0) {
        r->locks[r->last_lock].requests++;
        return;
    }
    for (size_t i = 0; i < r->n_locks; i++) {
        if (strcmp(r->locks[i].digest, digest) == 0) {
            r->locks[i].requests++;
            r->last_lock = i;
            return;
        }
    }
    if (r->n_locks == r->cap_locks) {
        size_t cap = r->cap_locks ? 2 * r->cap_locks : 4;
        lock_count *more = realloc(r->locks, cap * sizeof *more);
        if (more == NULL) {
            r->incomplete = true;
            return;
        }
        r->locks = more;
        r->cap_locks = cap;
    }
    char *copy = malloc(strlen(digest) + 1);
    if (copy == NULL) {
        r->incomplete = true;
        return;
    }
    strcpy(copy, digest);
    r->locks[r->n_locks] = (lock_count){.digest = copy, .requests = 1};
    r->last_lock = r->n_locks++;
}

/* Whether recorded try t is an attempt of the request's own course with its answer: not a hedge (started beside
 * another by the recorded lock's hedging, which the candidate's own hedging replaces) and not cancelled (its answer
 * never came: the record cannot say what it would have been). */
static bool primary(const rf_ledger_try *t) {
    return !t->hedge && (t->fate == NULL || strcmp(t->fate, rf_try_fate_name(RF_FATE_CANCELLED)) != 0);
}

/* The fastest answered success among rec's tries (a recorded hedge's included) into fastest_ms, when it is faster. */
static void note_fastest(const rf_ledger_record *rec, int64_t *fastest_ms) {
    for (size_t i = 0; i < rec->n_tries; i++) {
        const rf_ledger_try *t = &rec->tries[i];
        const bool answered = t->fate == NULL || strcmp(t->fate, rf_try_fate_name(RF_FATE_CANCELLED)) != 0;
        if (answered && t->reason[0] == 's' && strcmp(t->reason, "success") == 0 && t->status >= 200 &&
            t->status <= 299 && (*fastest_ms < 0 || t->elapsed_ms < *fastest_ms))
            *fastest_ms = t->elapsed_ms;
    }
}

/* Whether recorded try i of rec starts an attempt of its own (not a followed redirect's hop) and is no 3xx the
 * client decided as a redirect: the tries a pool may hold. */
static bool poolable(const rf_ledger_record *rec, size_t i, const rfi_replay_facts *f) {
    if (!primary(&rec->tries[i])) return false;
    if (i > 0 && rec->tries[i - 1].reason[0] == 'r' && strcmp(rec->tries[i - 1].reason, "redirect") == 0) return false;
    return f->redirect == 0;
}

/* Replays rec (its strings complete): counted as predicted now, or put aside for its drawn tries. */
static void replay_record(rf_replay *r, const rf_ledger_record *rec) {
    rf_replay_info *info = &r->info;
    info->records++;
    count_lock(r, rec->policy);
    if (rec->method[0] == '\0' && strcmp(rec->route, RF_LEDGER_HARNESS_ROUTE) == 0) { /* no method, path or tries */
        info->harness++;
        return;
    }
    if (rec->ts_ms - rec->elapsed_ms < r->last_end_ms) info->overlapping++;
    if (rec->ts_ms > r->last_end_ms) r->last_end_ms = rec->ts_ms;
    /* rf_budget before the first attempt routes the request, as the client's first call does; a method or path it
     * refuses is refused again before any attempt (no-route, fail closed), the route found the policy's way. */
    const size_t method_len = strlen(rec->method), path_len = strlen(rec->path);
    rf_attempt_budget first = {.reason = RF_REASON_NO_ROUTE};
    rf_error refused;
    if (rf_budget(r->p, rec->method, method_len, rec->path, path_len, 0, 0, &first, &refused) != RF_OK)
        first = (rf_attempt_budget){.reason = RF_REASON_NO_ROUTE,
                                    .route = rf_policy_match(r->p, rec->method, method_len, rec->path, path_len)};
    const long route = first.route;
    if (route < 0) {
        emit_no_route(r, rec);
        return;
    }
    /* Each try ended at ts less what came after it (the request ended with its last try). */
    int64_t ends[RF_LEDGER_MAX_TRIES];
    int64_t end = rec->ts_ms;
    for (size_t i = rec->n_tries; i-- > 0;) {
        ends[i] = end;
        end -= rec->tries[i].elapsed_ms + rec->tries[i].delay_ms;
    }
    const rfi_replay_route *candidate_route = &r->routes[route];
    rfi_replay_facts facts[RF_LEDGER_MAX_TRIES];
    bool older = false;
    int depth = 0; /* the attempts before try i (a followed redirect's hop and a hedge are none) */
    for (size_t i = 0; i < rec->n_tries; i++) {
        rfi_replay_recorded_facts(rec, i, ends[i], candidate_route, info, &facts[i]);
        older = older || facts[i].older;
        const bool hop =
            i > 0 && rec->tries[i - 1].reason[0] == 'r' && strcmp(rec->tries[i - 1].reason, "redirect") == 0;
        const bool attempt = primary(&rec->tries[i]) && !hop;
        if (poolable(rec, i, &facts[i])) {
            const uint16_t after =
                i == 0 ? RFI_REPLAY_FIRST : (uint16_t)rfi_replay_class_id(rec->tries[i - 1].class_name);
            if (!rfi_replay_pools_offer(r->pools, route, after, depth, &facts[i])) r->incomplete = true;
        }
        if (attempt) depth++;
    }
    if (older) info->older_records++;
    note_fastest(rec, &r->fastest_ms[route]);
    rfi_replay_walk w;
    const rfi_replay_ctx c = {
        .p = r->p, .routes = r->routes, .budget = r->budget, .info = info, .fastest_ms = r->fastest_ms};
    rfi_replay_walk_start(&c, &w, rec, &first);
    /* The record's own course: its hedges are not the candidate's, and a cancelled attempt's answer is drawn. */
    for (size_t i = 0; i < rec->n_tries && !w.done; i++) {
        if (rec->tries[i].hedge) continue;
        if (!primary(&rec->tries[i])) break;
        if (i > 0 && !w.in_hop && w.delay_ms < rec->tries[i].delay_ms) info->sooner++;
        rfi_replay_walk_try(&c, &w, &facts[i], &r->jitter);
    }
    if (w.done)
        emit(r, &w);
    else
        put_aside(r, &w);
}

/* NULL when rec holds every string a replay reads (those the tally reads, then method, path and policy), else the
 * first missing one's JSON path. */
static const char *missing_string(const rf_ledger_record *rec) {
    const char *missing = rfi_ledger_tally_missing(rec);
    if (missing != NULL) return missing;
    if (rec->method == NULL) return "$.method";
    if (rec->path == NULL) return "$.path";
    if (rec->policy == NULL) return "$.policy";
    return NULL;
}

static rf_status incomplete(const rf_replay *r, rf_error *err) {
    if (!r->incomplete) return RF_OK;
    rfi_ledger_error(err, "replay", 0, 0, "out of memory: the replay is incomplete");
    return RF_ENOMEM;
}

rf_status rf_replay_add(rf_replay *r, const rf_ledger_record *rec, rf_error *err) {
    if (r == NULL || rec == NULL) {
        rfi_ledger_error(err, r ? "rec" : "r", 0, 0, "%s is NULL", r ? "rec" : "r");
        return RF_EINVAL;
    }
    if (r->info.finished) {
        rfi_ledger_error(err, "r", 0, 0, "the replay is finished: rf_replay_finish ended its feeding");
        return RF_EINVAL;
    }
    if (rfi_ledger_refuse_missing(missing_string(rec), "replay", err) != RF_OK) return RF_EINVAL;
    if (rf_ledger_tally_add(r->recorded, rec, rec->host, err) != RF_OK) r->incomplete = true;
    replay_record(r, rec);
    return incomplete(r, err);
}

/* One record of a file: counted as recorded, then replayed; the read stops once memory ran out. */
static rf_status replay_one(void *ctx, const rf_ledger_record *rec, rf_error *err) {
    rf_replay *r = ctx;
    if (!rfi_ledger_tally_record(r->recorded, rec, rec->host)) r->incomplete = true;
    replay_record(r, rec);
    return incomplete(r, err);
}

rf_status rf_replay_read(rf_replay *r, const char *path, bool skip_corrupt, rf_tally_file *file, rf_error *err) {
    rf_tally_file local;
    if (file == NULL) file = &local;
    memset(file, 0, sizeof *file);
    if (r == NULL || r->info.finished) {
        rfi_ledger_error(err, "r", 0, 0,
                         r ? "the replay is finished: rf_replay_finish ended its feeding" : "r is NULL");
        return RF_EINVAL;
    }
    rf_status st = rfi_ledger_read_each(path, 0, skip_corrupt, file, replay_one, r, err);
    if (st == RF_OK) rfi_ledger_tally_lines(r->recorded, file);
    return st;
}

rf_status rf_replay_finish(rf_replay *r, rf_error *err) {
    if (r == NULL) {
        rfi_ledger_error(err, "r", 0, 0, "r is NULL");
        return RF_EINVAL;
    }
    while (r->queue_n > 0) {
        draw_pending(r, &r->queue[r->queue_head]);
        r->queue_head = (r->queue_head + 1) % r->queue_cap;
        r->queue_n--;
    }
    r->info.finished = true;
    return incomplete(r, err);
}

/* ---- reading ------------------------------------------------------------------------------------------------------
 */

const rf_ledger_tally *rf_replay_recorded(const rf_replay *r) { return r ? r->recorded : NULL; }

const rf_ledger_tally *rf_replay_predicted(const rf_replay *r) { return r ? r->predicted : NULL; }

void rf_replay_summary(const rf_replay *r, rf_replay_info *out) {
    if (r == NULL) {
        *out = (rf_replay_info){0};
        return;
    }
    *out = r->info;
}

bool rf_replay_interval_of(const rf_replay *r, const char *scope, rf_replay_interval *out) {
    if (r == NULL || out == NULL) return false;
    rf_tally_scope s;
    if (scope == NULL) {
        rf_ledger_tally_whole(r->predicted, &s);
    } else {
        bool found = false;
        for (size_t i = 0; !found && rf_ledger_tally_scope(r->predicted, i, &s); i++)
            found = strcmp(s.name, scope) == 0;
        if (!found) return false;
    }
    rfi_replay_spread_interval(r->spread, scope, &s.figures, out);
    return true;
}

size_t rf_replay_gap_count(const rf_replay *r) { return r ? r->n_gaps : 0; }

bool rf_replay_gap_at(const rf_replay *r, size_t i, rf_replay_gap *out) {
    if (r == NULL || i >= r->n_gaps) return false;
    const gap *g = &r->gaps[i];
    *out = (rf_replay_gap){.route = r->routes[g->route].endpoint,
                           .class_name = r->class_names[g->class_id],
                           .samples = g->samples,
                           .tries = g->tries,
                           .fallback = g->fallback};
    return true;
}

size_t rf_replay_beyond_count(const rf_replay *r) { return r ? r->n_beyonds : 0; }

bool rf_replay_beyond_at(const rf_replay *r, size_t i, rf_replay_beyond *out) {
    if (r == NULL || i >= r->n_beyonds) return false;
    const beyond *b = &r->beyonds[i];
    *out = (rf_replay_beyond){.route = r->routes[b->route].endpoint,
                              .class_name = r->class_names[b->class_id],
                              .attempt = b->depth + 1,
                              .samples = b->samples,
                              .drawn_as = b->drawn_depth + 1,
                              .fallback = b->fallback,
                              .tries = b->tries};
    return true;
}

size_t rf_replay_lock_count(const rf_replay *r) { return r ? r->n_locks : 0; }

bool rf_replay_lock_at(const rf_replay *r, size_t i, rf_replay_lock *out) {
    if (r == NULL || i >= r->n_locks) return false;
    *out = (rf_replay_lock){.digest = r->locks[i].digest, .requests = r->locks[i].requests};
    return true;
}
