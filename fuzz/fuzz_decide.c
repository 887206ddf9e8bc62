/*
 * Fuzz target: rf_decide (and rf_budget, rf_backoff_ms) over random facts (wait header hints included) against a
 * fixed set of locks (one reading every wait header, with class limits): the
 * two example locks (read from RF_EXAMPLES_DIR) and the edge locks below. One input is a sequence of
 * decisions that share one rf_retry_budget per lock, so throttling is reached too.
 * Invariants, for every verdict (decide.h and README "Reasons"):
 *   - RF_OK or RF_EINVAL, never a crash; a stop has delay_ms = timeout_ms = 0;
 *   - never retry past maxAttempts (a retry needs attempts < maxAttempts);
 *   - delay_ms ≤ backoff.maxMs, or, when the Retry-After was honored, delay_ms ≤ retryAfter.maxMs;
 *   - 1 ≤ timeout_ms ≤ perAttemptTimeoutMs and elapsed_ms + delay_ms + timeout_ms ≤ totalBudgetMs (never past
 *     the deadline), and the attempt gets at least minAttemptMs;
 *   - a method in idempotencyRequired (POST under the default list) without a key never retries;
 *   - a source other than "pinned-map" never retries, 2xx/3xx never retries;
 *   - the retry budget only narrows: with the same RNG state, the verdict with a budget equals the verdict
 *     without one, or is retry-throttled where that one retried; its tokens stay in [0, maxTokens] and move
 *     exactly as gRPC A6 says (−1 for a retryable failure, +tokenRatio for a success, else unchanged);
 *   - more elapsed time never widens: a retry at elapsed e2 is also a retry at any e1 < e2 (same RNG state);
 *   - the same facts and seed give the same verdict;
 *   - a retry stays under its class's own limit (rf_policy_class_attempts, classLimits); the verdict's
 *     retry_after_header is one the route lists and the facts carry, and server-pushback comes only from
 *     grpc-retry-pushback-ms;
 *   - rf_budget: an allowed attempt has 1 ≤ timeout_ms ≤ perAttemptTimeoutMs and ends by the deadline;
 *   - rf_backoff_ms is in [0, backoff.maxMs] for every attempt count up to INT_MAX;
 *   - propagation only narrows: an overloaded response or a caller's attempt above 1 never turns a stop into a
 *     retry, stops on a route with propagation (the attempt only with inboundAttempt) and changes nothing on a
 *     route without it.
 */
#include "fuzz.h"

#include "retryfreeze/decide.h"
#include "retryfreeze/propagation.h"

#include <limits.h>
#include <stdbool.h>

#ifndef RF_EXAMPLES_DIR
#define RF_EXAMPLES_DIR "examples"
#endif

static const char *const edge_locks[] = {
    /* Jitter none, a tiny budget, no idempotency requirement, every class retryable. */
    "{\"endpoint\":\"POST /v1/jobs\",\"maxAttempts\":10,\"perAttemptTimeoutMs\":1,\"totalBudgetMs\":1,"
    "\"retryable\":[\"HTTP_4XX\",\"HTTP_5XX\",\"TIMEOUT\",\"CONNECT_RESET\",\"CONNECT_REFUSED\",\"DNS_FAILURE\","
    "\"TLS_FAILURE\",\"UNKNOWN\"],\"idempotencyRequired\":[],\"backoff\":{\"jitter\":\"none\"}}",
    /* minAttemptMs 0 and a zero backoff: an attempt with no time left must not be granted. */
    "{\"endpoint\":\"GET /a/{id}\",\"maxAttempts\":10,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":1000,"
    "\"minAttemptMs\":0,\"retryable\":[\"HTTP_5XX\",\"TIMEOUT\"],\"backoff\":{\"baseMs\":0,\"maxMs\":0,"
    "\"jitter\":\"none\"},\"retryAfter\":{\"maxMs\":0}}",
    /* Largest numbers everywhere, decorrelated jitter, Retry-After not honored, a throttling budget. */
    "{\"version\":1,\"defaults\":{\"maxAttempts\":10,\"perAttemptTimeoutMs\":600000,\"totalBudgetMs\":3600000,"
    "\"minAttemptMs\":600000,\"retryable\":[\"HTTP_5XX\",\"HTTP_429\",\"TIMEOUT\"],\"notRetryable\":[\"HTTP_501\"],"
    "\"backoff\":{\"baseMs\":600000,\"multiplier\":10,\"maxMs\":600000,\"jitter\":\"decorrelated\"},"
    "\"retryAfter\":{\"honor\":false,\"maxMs\":3600000}},\"routes\":[{\"endpoint\":\"POST /v1/*\"},"
    "{\"endpoint\":\"PUT /v1/jobs/{id}\",\"backoff\":{\"jitter\":\"equal\",\"baseMs\":1,\"multiplier\":1.001}},"
    "{\"endpoint\":\"GET /\",\"retryAfter\":{\"honor\":true}}],\"retryBudget\":{\"maxTokens\":2,\"tokenRatio\":0.5}}",
    /* The same route under several methods, Retry-After honored up to an hour. */
    "{\"version\":1,\"defaults\":{\"maxAttempts\":3,\"perAttemptTimeoutMs\":500,\"totalBudgetMs\":10000,"
    "\"retryable\":[\"HTTP_503\",\"HTTP_429\",\"CONNECT_RESET\"],\"idempotencyRequired\":[\"POST\",\"PUT\"],"
    "\"retryAfter\":{\"maxMs\":3600000},\"backoff\":{\"jitter\":\"equal\"}},\"routes\":[{\"endpoint\":\"POST "
    "/v1/jobs\"},"
    "{\"endpoint\":\"PUT /v1/jobs\"},{\"endpoint\":\"DELETE /v1/jobs\"},{\"endpoint\":\"GET /v1/jobs\"}],"
    "\"retryBudget\":{\"maxTokens\":1000,\"tokenRatio\":1000}}",
    /* Every wait header a route may read, and per-class attempt limits (a status over its family, an alias). */
    "{\"version\":1,\"defaults\":{\"maxAttempts\":5,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":60000,"
    "\"retryable\":[\"HTTP_5XX\",\"HTTP_429\",\"TIMEOUT\",\"UNKNOWN\"],\"idempotencyRequired\":[],"
    "\"classLimits\":{\"UNKNOWN\":2,\"HTTP_5XX\":3,\"HTTP_503\":4,\"GATEWAY_TIMEOUT\":1},"
    "\"retryAfter\":{\"maxMs\":30000,\"headers\":[\"grpc-retry-pushback-ms\",\"retry-after-ms\","
    "\"x-ms-retry-after-ms\",\"ratelimit\",\"ratelimit-reset\",\"x-ratelimit-reset\",\"retry-after\"]}},"
    "\"routes\":[{\"endpoint\":\"POST /v1/jobs\"},{\"endpoint\":\"GET /v1/*\",\"retryAfter\":{\"honor\":false,"
    "\"headers\":[\"ratelimit\",\"retry-after\"]}}]}",
    /* Propagation across layers: every narrowing on one route, the caller's attempt ignored on another. */
    "{\"version\":1,\"defaults\":{\"maxAttempts\":4,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,"
    "\"retryable\":[\"HTTP_5XX\",\"TIMEOUT\"],\"idempotencyRequired\":[]},"
    "\"routes\":[{\"endpoint\":\"POST /v1/jobs\",\"propagation\":{}},{\"endpoint\":\"GET /v1/*\","
    "\"propagation\":{\"inboundAttempt\":false}},{\"endpoint\":\"PUT /v1/jobs\"}]}",
};

/* Values for the wait headers other than Retry-After (retry_afters serves all of them too). */
static const char *const hint_values[] = {"250",
                                          "0",
                                          "-1",
                                          "2147483648",
                                          "1.5",
                                          " 80 ",
                                          "\"a\";r=0;t=3",
                                          "\"a\";r=0;t=3, \"b\";r=0;t=9",
                                          "\"a\";r=1;t=3",
                                          "a;t=-1",
                                          "1700000060",
                                          "1600000000",
                                          "1000000000",
                                          "250, 300"};

#define MAX_LOCKS 9
static rf_policy *locks[MAX_LOCKS];
static size_t n_locks;

static const char *const methods[] = {"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"};
static const char *const paths[] = {"/v1/jobs",     "/v1/jobs/7", "/v1/refunds", "/v1/x/y", "/a/1",        "/",
                                    "/v1/jobs?x=1", "/v1/jobs#f", "/a",          "/v1",     "/v1/jobs/7/", "//"};
static const int statuses[] = {0, 200, 204, 301, 399, 400, 404, 408, 429, 500, 501, 502, 503, 504, 599, 100};
static const char *const retry_afters[] = {"0",
                                           "1",
                                           "2",
                                           "120",
                                           "3600",
                                           "9223372036854775",
                                           "9223372036854776",
                                           "-1",
                                           "1.5",
                                           " 3 ",
                                           "",
                                           "Sun, 06 Nov 1994 08:49:37 GMT",
                                           "Sunday, 06-Nov-94 08:49:37 GMT",
                                           "Sun Nov  6 08:49:37 1994",
                                           "Tue, 14 Nov 2023 22:13:21 GMT",
                                           "Tue, 14 Nov 2023 22:15:20 GMT",
                                           "Fri, 31 Dec 9999 23:59:60 GMT",
                                           "soon"};
static const char *const dates[] = {"Sun, 06 Nov 1994 08:49:37 GMT", "Tue, 14 Nov 2023 22:13:20 GMT",
                                    "Mon, 01 Jan 0001 00:00:00 GMT", "garbage"};
static const char *const sources[] = {"pinned-map", "env", "pinned-map-x"};

static void add_lock(const char *text, size_t len, const char *what) {
    rf_policy *p = NULL;
    rf_error err;
    if (rf_policy_load_buffer(text, len, &p, &err) != RF_OK) {
        fprintf(stderr, "fuzz_decide: cannot load %s: %s: %s\n", what, err.path, err.message);
        abort();
    }
    locks[n_locks++] = p;
}

static void add_lock_file(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", RF_EXAMPLES_DIR, name);
    rf_policy *p = NULL;
    rf_error err;
    if (rf_policy_load_file(path, &p, &err) != RF_OK) {
        fprintf(stderr, "fuzz_decide: cannot load %s: %s: %s\n", path, err.path, err.message);
        abort();
    }
    locks[n_locks++] = p;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    if (n_locks > 0) return 0;
    add_lock_file("retry-budget.lock.json");
    add_lock_file("service.lock.json");
    for (size_t i = 0; i < sizeof edge_locks / sizeof edge_locks[0]; i++)
        add_lock(edge_locks[i], strlen(edge_locks[i]), "an edge lock");
    return 0;
}

/* Either one of the table's strings or raw fuzz bytes. */
static const char *pick_string(fz_in *in, const char *const *table, size_t n, size_t *len, bool allow_absent) {
    size_t k = fz_pick(in, n + 2);
    if (k < n) {
        *len = strlen(table[k]);
        return table[k];
    }
    if (k == n && allow_absent) {
        *len = 0;
        return NULL;
    }
    return fz_bytes(in, 64, len);
}

/* Budget-relevant instants: a route's totalBudgetMs, less a little, hit the deadline checks' edges. */
static const int64_t edges[] = {1, 1000, 2000, 2500, 3000, 4000, 10000, 60000, 3600000};

static int64_t pick_ms(fz_in *in) {
    switch (fz_pick(in, 8)) {
    case 6: return edges[fz_pick(in, sizeof edges / sizeof edges[0])] - (int64_t)(fz_u8(in) % 8);
    case 7: return edges[fz_pick(in, sizeof edges / sizeof edges[0])] - (int64_t)fz_u8(in) * 8;
    case 0: return 0;
    case 1: return (int64_t)fz_u8(in) * 10;
    case 2: return (int64_t)fz_uint(in, 2);
    case 3: return (int64_t)fz_uint(in, 3);
    case 4: return (int64_t)fz_uint(in, 4);
    default: return fz_i64(in);
    }
}

static bool in_list(const char *const *list, size_t n, const char *s, size_t len) {
    for (size_t i = 0; i < n; i++)
        if (strlen(list[i]) == len && memcmp(list[i], s, len) == 0) return true;
    return false;
}

static bool same_verdict(const rf_verdict *a, const rf_verdict *b) {
    return a->retry == b->retry && a->reason == b->reason && strcmp(a->class_name, b->class_name) == 0 &&
           a->delay_ms == b->delay_ms && a->timeout_ms == b->timeout_ms && a->retry_after == b->retry_after &&
           a->route == b->route;
}

static void describe(const rf_facts *f, const rf_verdict *v) {
    fprintf(stderr,
            "  facts: %.*s %.*s status %d transport %s attempts %d elapsed %lld key %d RA \"%.*s\" "
            "Date \"%.*s\" now %lld\n  verdict: retry %d %s %s delay %lld timeout %lld ra %s route %ld\n",
            (int)f->method_len, f->method, (int)f->path_len, f->path, f->status, rf_transport_name(f->transport),
            f->attempts, (long long)f->elapsed_ms, f->has_idempotency_key, (int)f->retry_after_len,
            f->retry_after ? f->retry_after : "", (int)f->date_len, f->date ? f->date : "", (long long)f->now_ms,
            v->retry, rf_reason_name(v->reason), v->class_name, (long long)v->delay_ms, (long long)v->timeout_ms,
            rf_retry_after_use_name(v->retry_after), v->route);
}

#define CHECK_V(cond, ...)           \
    do {                             \
        if (!(cond)) describe(f, v); \
        FZ_CHECK(cond, __VA_ARGS__); \
    } while (0)

/* The verdict's own invariants against its route. */
static void check_verdict(const rf_policy *p, const rf_facts *f, const rf_verdict *v) {
    FZ_CHECK((unsigned)v->reason < RF_REASON_COUNT, "reason %d", (int)v->reason);
    FZ_CHECK(memchr(v->class_name, '\0', sizeof v->class_name) != NULL, "class not terminated");
    if (!v->retry) {
        CHECK_V(v->delay_ms == 0 && v->timeout_ms == 0, "a stop with a delay or a timeout");
        CHECK_V(v->reason != RF_REASON_PINNED_STATUS && v->reason != RF_REASON_WITHIN_BUDGET, "stop with a go reason");
        return;
    }
    CHECK_V(v->reason == RF_REASON_PINNED_STATUS, "a retry with reason %s", rf_reason_name(v->reason));
    CHECK_V(v->route >= 0 && (size_t)v->route < rf_policy_route_count(p), "a retry without a route");
    rf_route_view r;
    FZ_CHECK(rf_policy_route(p, (size_t)v->route, &r) == RF_OK, "route view");
    CHECK_V(f->attempts < r.max_attempts, "retry after attempt %d of maxAttempts %d", f->attempts, r.max_attempts);
    CHECK_V(v->delay_ms >= 0, "negative delay");
    if (v->retry_after == RF_RA_USE_HONORED)
        CHECK_V(v->delay_ms <= r.retry_after_max_ms, "honored Retry-After %lld over retryAfter.maxMs %lld",
                (long long)v->delay_ms, (long long)r.retry_after_max_ms);
    else
        CHECK_V(v->delay_ms <= r.backoff_max_ms, "backoff %lld over backoff.maxMs %lld", (long long)v->delay_ms,
                (long long)r.backoff_max_ms);
    CHECK_V(v->timeout_ms >= 1, "a retry with a per-try timeout of %lld ms", (long long)v->timeout_ms);
    CHECK_V(v->timeout_ms <= r.per_attempt_timeout_ms, "timeout %lld over perAttemptTimeoutMs %lld",
            (long long)v->timeout_ms, (long long)r.per_attempt_timeout_ms);
    CHECK_V(v->timeout_ms >= r.min_attempt_ms, "timeout %lld under minAttemptMs %lld", (long long)v->timeout_ms,
            (long long)r.min_attempt_ms);
    CHECK_V(f->elapsed_ms <= r.total_budget_ms && v->delay_ms + v->timeout_ms <= r.total_budget_ms - f->elapsed_ms,
            "elapsed %lld + delay %lld + timeout %lld past totalBudgetMs %lld", (long long)f->elapsed_ms,
            (long long)v->delay_ms, (long long)v->timeout_ms, (long long)r.total_budget_ms);
    CHECK_V(f->has_idempotency_key ||
                !in_list(r.idempotency_required, r.n_idempotency_required, f->method, f->method_len),
            "%.*s without an idempotency key retried", (int)f->method_len, f->method);
    CHECK_V(f->source == NULL || f->source_len == 0 ||
                (f->source_len == 10 && memcmp(f->source, "pinned-map", 10) == 0),
            "an unpinned source retried");
    CHECK_V(!(f->transport == RF_TRANSPORT_OK && f->status >= 200 && f->status <= 399), "a success retried");
    CHECK_V(f->attempts < rf_policy_class_attempts(p, (size_t)v->route, f->status, f->transport),
            "retry after attempt %d past the class's own limit %d", f->attempts,
            rf_policy_class_attempts(p, (size_t)v->route, f->status, f->transport));
}

/* A verdict's wait header: one the route reads and the facts carry; a pushback stop only from a pushback. */
static void check_wait_header(const rf_policy *p, const rf_facts *f, const rf_verdict *v) {
    CHECK_V(v->retry_after_header >= -1 && v->retry_after_header < RF_WAIT_HEADER_COUNT, "retry_after_header %d",
            v->retry_after_header);
    if (v->reason == RF_REASON_SERVER_PUSHBACK)
        CHECK_V(v->retry_after_header == RF_WAIT_GRPC_RETRY_PUSHBACK_MS && !v->retry, "server-pushback from header %d",
                v->retry_after_header);
    if (v->retry_after_header < 0 || v->route < 0) {
        CHECK_V(v->retry_after == RF_RA_USE_ABSENT || v->retry_after == RF_RA_USE_NOT_NEEDED,
                "retry_after %s without a header", rf_retry_after_use_name(v->retry_after));
        return;
    }
    rf_route_view r;
    FZ_CHECK(rf_policy_route(p, (size_t)v->route, &r) == RF_OK, "route view");
    const char *name = rf_wait_header_name((rf_wait_header)v->retry_after_header);
    CHECK_V(in_list(r.retry_after_headers, r.n_retry_after_headers, name, strlen(name)),
            "verdict names %s, which the route does not read", name);
    /* Present is not NULL, even empty: an empty field is one the server sent (core/src/engine/wait_hints.c). */
    bool given = f->hints[v->retry_after_header] != NULL;
    if (v->retry_after_header == RF_WAIT_RETRY_AFTER) given |= f->retry_after != NULL;
    CHECK_V(given, "verdict names %s, which the facts do not carry", name);
}

static void check_budget_call(const rf_policy *p, const rf_facts *f) {
    rf_attempt_budget b;
    rf_error err;
    int attempts = f->attempts;
    rf_status st = rf_budget(p, f->method, f->method_len, f->path, f->path_len, attempts, f->elapsed_ms, &b, &err);
    if (st != RF_OK) {
        FZ_CHECK(st == RF_EINVAL && err.message[0], "rf_budget status %d", (int)st);
        return;
    }
    if (!b.allowed) {
        FZ_CHECK(b.timeout_ms == 0, "a refused attempt with a timeout");
        return;
    }
    rf_route_view r;
    FZ_CHECK(b.route >= 0 && rf_policy_route(p, (size_t)b.route, &r) == RF_OK, "allowed without a route");
    FZ_CHECK(b.reason == RF_REASON_WITHIN_BUDGET, "allowed with reason %s", rf_reason_name(b.reason));
    FZ_CHECK(attempts < r.max_attempts, "attempt %d allowed under maxAttempts %d", attempts + 1, r.max_attempts);
    FZ_CHECK(b.timeout_ms >= 1 && b.timeout_ms <= r.per_attempt_timeout_ms, "budget timeout %lld",
             (long long)b.timeout_ms);
    FZ_CHECK(b.timeout_ms <= r.total_budget_ms - f->elapsed_ms, "budget timeout %lld past the deadline (elapsed %lld)",
             (long long)b.timeout_ms, (long long)f->elapsed_ms);
}

static void check_backoff(const rf_policy *p, long route, int attempts, rf_rng *rng) {
    rf_route_view r;
    if (route < 0 || rf_policy_route(p, (size_t)route, &r) != RF_OK) return;
    const int counts[] = {attempts < 1 ? 1 : attempts, 1, 2, 31, 64, 1000, INT_MAX};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        int64_t d = rf_backoff_ms(p, (size_t)route, counts[i], rng);
        FZ_CHECK(d >= 0 && d <= r.backoff_max_ms, "backoff after attempt %d is %lld (maxMs %lld)", counts[i],
                 (long long)d, (long long)r.backoff_max_ms);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (n_locks == 0) LLVMFuzzerInitialize(NULL, NULL);
    fz_in in = {data, size};
    rf_retry_budget *budgets[MAX_LOCKS] = {0};
    for (size_t i = 0; i < n_locks; i++) {
        budgets[i] = rf_retry_budget_new(locks[i]);
        FZ_CHECK(budgets[i] != NULL, "rf_retry_budget_new");
    }
    for (int round = 0; round < 64 && in.n > 0; round++) {
        size_t li = fz_pick(&in, n_locks);
        const rf_policy *p = locks[li];
        rf_facts fs;
        rf_facts *f = &fs;
        memset(f, 0, sizeof *f);
        f->method = pick_string(&in, methods, sizeof methods / sizeof methods[0], &f->method_len, false);
        f->path = pick_string(&in, paths, sizeof paths / sizeof paths[0], &f->path_len, false);
        size_t sk = fz_pick(&in, 20);
        f->status = sk < 16 ? statuses[sk] : (int)fz_uint(&in, 2) % 700;
        f->transport = (rf_transport)(fz_u8(&in) % (RF_TRANSPORT_COUNT + 1));
        uint8_t ak = fz_u8(&in);
        f->attempts = ak < 240 ? ak % 12 : (int)(uint32_t)fz_uint(&in, 4);
        f->elapsed_ms = pick_ms(&in);
        f->has_idempotency_key = fz_u8(&in) & 1;
        f->source = pick_string(&in, sources, sizeof sources / sizeof sources[0], &f->source_len, true);
        uint8_t nk = fz_u8(&in) % 4;
        f->now_ms = nk == 0 ? 0 : nk == 1 ? INT64_C(1700000000000) : nk == 2 ? pick_ms(&in) : INT64_C(784111777000);
        f->retry_after =
            pick_string(&in, retry_afters, sizeof retry_afters / sizeof retry_afters[0], &f->retry_after_len, true);
        f->date = pick_string(&in, dates, sizeof dates / sizeof dates[0], &f->date_len, true);
        uint8_t hint_mask = fz_u8(&in); /* bit h: give hints[h] (a route that does not read it refuses the facts) */
        for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) {
            if (!((hint_mask >> h) & 1)) continue;
            if (fz_u8(&in) & 1)
                f->hints[h] =
                    pick_string(&in, hint_values, sizeof hint_values / sizeof hint_values[0], &f->hint_lens[h], true);
            else
                f->hints[h] = pick_string(&in, retry_afters, sizeof retry_afters / sizeof retry_afters[0],
                                          &f->hint_lens[h], true);
        }
        uint8_t pk = fz_u8(&in); /* the propagation facts, read only by a route with propagation */
        f->overloaded = pk & 1;
        f->inbound_attempt = (pk >> 1) % 4 == 3 ? (int)(fz_uint(&in, 4) & INT_MAX) : (pk >> 1) % 4;
        uint64_t seed = fz_uint(&in, 8);
        bool no_rng = (fz_u8(&in) & 7) == 0;

        rf_rng rng0, rng1, rng2;
        rf_rng_seed(&rng0, seed);
        rng1 = rng0;
        rng2 = rng0;
        rf_rng *use = no_rng ? NULL : &rng0;

        /* Without the budget, twice: deterministic. */
        rf_verdict plain, again;
        rf_error err;
        memset(&err, 0, sizeof err);
        rf_status st = rf_decide(p, f, use, NULL, &plain, &err);
        if (st != RF_OK) {
            FZ_CHECK(st == RF_EINVAL && err.message[0] != '\0', "rf_decide status %d without a message", (int)st);
            continue;
        }
        rf_verdict *v = &plain;
        check_verdict(p, f, v);
        check_wait_header(p, f, v);
        FZ_CHECK(rf_decide(p, f, no_rng ? NULL : &rng1, NULL, &again, &err) == RF_OK && same_verdict(&plain, &again),
                 "the same facts and seed give a different verdict");

        /* With the lock's shared budget: only narrows, and the tokens move as gRPC A6 says. */
        rf_retry_budget *b = budgets[li];
        int64_t max_milli = 0, ratio_milli = 0;
        bool active = rf_policy_retry_budget(p, &max_milli, &ratio_milli);
        int64_t before = rf_retry_budget_tokens_milli(b);
        rf_verdict budgeted;
        FZ_CHECK(rf_decide(p, f, no_rng ? NULL : &rng2, b, &budgeted, &err) == RF_OK, "decide with a budget failed");
        int64_t after = rf_retry_budget_tokens_milli(b);
        v = &budgeted;
        check_verdict(p, f, v);
        if (!same_verdict(&plain, &budgeted)) {
            CHECK_V(plain.retry && !budgeted.retry && budgeted.reason == RF_REASON_RETRY_THROTTLED,
                    "the budget changed %s into %s", rf_reason_name(plain.reason), rf_reason_name(budgeted.reason));
        }
        if (!active) {
            FZ_CHECK(before == -1 && after == -1, "an inert budget has tokens");
            FZ_CHECK(budgeted.reason != RF_REASON_RETRY_THROTTLED, "an inert budget throttled");
        } else {
            FZ_CHECK(after >= 0 && after <= max_milli, "tokens %lld outside [0, %lld]", (long long)after,
                     (long long)max_milli);
            int64_t taken = before - 1000 < 0 ? 0 : before - 1000;
            int64_t given = before + ratio_milli > max_milli ? max_milli : before + ratio_milli;
            switch (budgeted.reason) {
            case RF_REASON_UNPINNED_SOURCE:
            case RF_REASON_NO_ROUTE:
            case RF_REASON_STATUS_NOT_RETRYABLE:
                CHECK_V(after == before, "tokens %lld -> %lld on %s", (long long)before, (long long)after,
                        rf_reason_name(budgeted.reason));
                break;
            case RF_REASON_SUCCESS:
                CHECK_V(after == given, "tokens %lld -> %lld on a success (ratio %lld)", (long long)before,
                        (long long)after, (long long)ratio_milli);
                break;
            case RF_REASON_MAX_ATTEMPTS:
            case RF_REASON_CLASS_LIMIT:
                CHECK_V(after == before || after == taken, "tokens %lld -> %lld on %s", (long long)before,
                        (long long)after, rf_reason_name(budgeted.reason));
                break;
            default:
                CHECK_V(after == taken, "tokens %lld -> %lld on a retryable failure (%s)", (long long)before,
                        (long long)after, rf_reason_name(budgeted.reason));
                break;
            }
            if (budgeted.retry) CHECK_V(after > max_milli / 2, "a retry with %lld tokens left", (long long)after);
            if (budgeted.reason == RF_REASON_RETRY_THROTTLED)
                CHECK_V(after <= max_milli / 2, "throttled with %lld tokens left", (long long)after);
        }

        /* Propagation only narrows: the verdict without the caller's and the response's propagation facts retries
         * whenever this one does, and the two agree where the route has no propagation. */
        if (f->overloaded || f->inbound_attempt != 0) {
            rf_facts bare = *f;
            bare.overloaded = false;
            bare.inbound_attempt = 0;
            rf_rng rng5;
            rf_rng_seed(&rng5, seed);
            rf_verdict b5;
            rf_status st5 = rf_decide(p, &bare, no_rng ? NULL : &rng5, NULL, &b5, &err);
            /* without an rng, the bare facts may reach the jittered backoff the propagation facts stopped before */
            FZ_CHECK(st5 == RF_OK || (no_rng && !plain.retry && strcmp(err.path, "rng") == 0), "decide bare failed: %s",
                     err.message);
            if (st5 != RF_OK) b5 = (rf_verdict){.retry = true};
            rf_propagation prop;
            FZ_CHECK(rf_policy_propagation(p, plain.route, &prop) == RF_OK, "rf_policy_propagation");
            if (!prop.enabled) CHECK_V(same_verdict(&plain, &b5), "propagation facts changed a route without it");
            if (plain.retry) CHECK_V(b5.retry, "the propagation facts turned a stop into a retry");
            if (prop.enabled && f->overloaded) CHECK_V(!plain.retry, "an overloaded response was retried");
            if (prop.enabled && prop.inbound_attempt && f->inbound_attempt > 1)
                CHECK_V(!plain.retry, "retried while the caller retries (inbound attempt %d)", f->inbound_attempt);
        }

        /* More elapsed time never widens. */
        if (plain.retry && f->elapsed_ms > 0) {
            rf_facts earlier = *f;
            earlier.elapsed_ms = f->elapsed_ms / 2;
            rf_rng rng3;
            rf_rng_seed(&rng3, seed);
            rf_verdict e;
            FZ_CHECK(rf_decide(p, &earlier, no_rng ? NULL : &rng3, NULL, &e, &err) == RF_OK, "decide earlier failed");
            CHECK_V(e.retry, "retried at elapsed %lld but not at %lld (%s)", (long long)f->elapsed_ms,
                    (long long)earlier.elapsed_ms, rf_reason_name(e.reason));
        }

        check_budget_call(p, f);
        rf_rng rng4;
        rf_rng_seed(&rng4, seed);
        check_backoff(p, plain.route, f->attempts, &rng4);
    }
    for (size_t i = 0; i < n_locks; i++) rf_retry_budget_free(budgets[i]);
    return 0;
}
