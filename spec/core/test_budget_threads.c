/*
 * One retry budget (gRPC A6 retryThrottling) shared by 8 threads calling rf_decide at once. Each scenario is
 * built so that its outcome does not depend on how the threads interleave, and the test asserts it exactly:
 *   - failures only: the tokens fall to 0 and stay there; exactly the decisions that left more than
 *     maxTokens / 2 tokens retried — 4 of 80 000 with maxTokens 10 — whichever threads made them;
 *   - balanced: each thread's failure is followed by its own success (tokenRatio 1), so the bucket never
 *     saturates: it ends exactly full, never dips below maxTokens − 8, and every failure retried;
 *   - fractional: two failures, then twenty successes at tokenRatio 0.1, per thread: the thousandths add up
 *     exactly (no lost update), the bucket ends exactly full.
 *   - a ratio (retryBudget.retryRatio 0.2, one window): every decision counts a request and asks for a retry, so
 *     exactly one in five retried (the window's count and check are one step under its lock), whichever threads.
 * A watcher thread samples the count throughout: it stays within [0, maxTokens] (a ratio: the window's retries
 * never pass its allowance). .ci/tsan builds this test with ThreadSanitizer, which must report no data race.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "retryfreeze/decide.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define THREADS 8
#define ROUNDS 10000

/* A GET route (no idempotency key needed), 503 retryable, no jitter, a budget the test sets. */
#define LOCK_WITH_BUDGET(max, ratio)                                                                          \
    "{\"endpoint\":\"GET /v1/jobs\",\"maxAttempts\":10,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":60000," \
    "\"retryable\":[\"HTTP_503\"],\"backoff\":{\"baseMs\":10,\"maxMs\":100,\"jitter\":\"none\"},"             \
    "\"retryBudget\":{\"maxTokens\":" max ",\"tokenRatio\":" ratio "}}"

/* The same route under a ratio budget over a 60 s window. */
#define LOCK_WITH_RATIO(ratio)                                                                                \
    "{\"endpoint\":\"GET /v1/jobs\",\"maxAttempts\":10,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":60000," \
    "\"retryable\":[\"HTTP_503\"],\"backoff\":{\"baseMs\":10,\"maxMs\":100,\"jitter\":\"none\"},"             \
    "\"retryBudget\":{\"retryRatio\":" ratio ",\"ttlMs\":60000}}"

/* The monotonic time every decision of this test is made at (ms): one slot of the ratio window. */
#define NOW_MS 5000

typedef enum step { FAIL, SUCCEED } step;

typedef struct shared {
    const rf_policy *policy;
    rf_retry_budget *budget;
    const step *pattern; /* repeated ROUNDS times by every thread */
    size_t pattern_len;
    pthread_barrier_t start;
    atomic_bool done;
} shared;

typedef struct worker {
    shared *s;
    uint64_t seed;
    long retried, throttled, succeeded, other, errors;
    int64_t min_seen, max_seen; /* token counts sampled by the watcher (watcher only) */
} worker;

static void *decide_loop(void *arg) {
    worker *w = arg;
    shared *s = w->s;
    rf_rng rng;
    rf_rng_seed(&rng, w->seed);
    rf_facts f;
    memset(&f, 0, sizeof f);
    f.method = "GET";
    f.method_len = 3;
    f.path = "/v1/jobs";
    f.path_len = 8;
    f.transport = RF_TRANSPORT_OK;
    f.attempts = 1;
    f.elapsed_ms = 0;
    f.mono_ms = NOW_MS;
    pthread_barrier_wait(&s->start);
    for (long r = 0; r < ROUNDS; r++) {
        for (size_t i = 0; i < s->pattern_len; i++) {
            f.status = s->pattern[i] == FAIL ? 503 : 200;
            rf_budget_request ticket = RF_BUDGET_REQUEST_INIT; /* each decision: a request of its own */
            f.budget_request = &ticket;
            rf_verdict v;
            rf_error err;
            if (rf_decide(s->policy, &f, &rng, s->budget, &v, &err) != RF_OK) {
                w->errors++;
            } else if (v.retry) {
                w->retried++;
            } else if (v.reason == RF_REASON_RETRY_THROTTLED) {
                w->throttled++;
            } else if (v.reason == RF_REASON_SUCCESS) {
                w->succeeded++;
            } else {
                w->other++;
            }
        }
    }
    return NULL;
}

static void *watch(void *arg) {
    worker *w = arg;
    w->min_seen = INT64_MAX;
    w->max_seen = INT64_MIN;
    pthread_barrier_wait(&w->s->start);
    do { /* at least one sample, however the threads are scheduled */
        rf_budget_window bw;
        int64_t t = rf_retry_budget_window(w->s->budget, NOW_MS, &bw) ? bw.allowance_milli - bw.retries * 1000
                                                                      : rf_retry_budget_tokens_milli(w->s->budget);
        if (t < w->min_seen) w->min_seen = t;
        if (t > w->max_seen) w->max_seen = t;
    } while (!atomic_load(&w->s->done));
    return NULL;
}

typedef struct totals {
    long retried, throttled, succeeded, other, errors;
    int64_t min_seen, max_seen, final_tokens;
} totals;

static totals run(const char *lock, const step *pattern, size_t pattern_len) {
    rf_policy *p = NULL;
    rf_error err;
    if (rf_policy_load_buffer(lock, strlen(lock), &p, &err) != RF_OK) fail_msg("%s: %s", err.path, err.message);
    shared s = {.policy = p, .pattern = pattern, .pattern_len = pattern_len};
    s.budget = rf_retry_budget_new(p);
    assert_non_null(s.budget);
    atomic_init(&s.done, false);
    assert_int_equal(pthread_barrier_init(&s.start, NULL, THREADS + 1), 0);
    worker workers[THREADS + 1];
    pthread_t ids[THREADS + 1];
    memset(workers, 0, sizeof workers);
    for (int i = 0; i <= THREADS; i++) {
        workers[i].s = &s;
        workers[i].seed = (uint64_t)i + 1;
        assert_int_equal(pthread_create(&ids[i], NULL, i < THREADS ? decide_loop : watch, &workers[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_join(ids[i], NULL), 0);
    atomic_store(&s.done, true);
    assert_int_equal(pthread_join(ids[THREADS], NULL), 0);
    pthread_barrier_destroy(&s.start);

    totals t = {0};
    for (int i = 0; i < THREADS; i++) {
        t.retried += workers[i].retried;
        t.throttled += workers[i].throttled;
        t.succeeded += workers[i].succeeded;
        t.other += workers[i].other;
        t.errors += workers[i].errors;
    }
    t.min_seen = workers[THREADS].min_seen;
    t.max_seen = workers[THREADS].max_seen;
    t.final_tokens = rf_retry_budget_tokens_milli(s.budget);
    print_message("%ld retried, %ld throttled, %ld successes; tokens seen %lld..%lld, final %lld (thousandths)\n",
                  t.retried, t.throttled, t.succeeded, (long long)t.min_seen, (long long)t.max_seen,
                  (long long)t.final_tokens);
    rf_retry_budget_free(s.budget);
    rf_policy_free(p);
    return t;
}

static void test_failures_only(void **state) {
    (void)state;
    static const step pattern[] = {FAIL};
    totals t = run(LOCK_WITH_BUDGET("10", "0.5"), pattern, 1);
    assert_int_equal(t.errors, 0);
    assert_int_equal(t.other, 0);
    /* Tokens after each decision: 9, 8, 7, 6 (> 5: retry), then 5, 4, …, 0, 0, … (throttled). */
    assert_int_equal(t.retried, 4);
    assert_int_equal(t.throttled, THREADS * ROUNDS - 4);
    assert_int_equal(t.final_tokens, 0);
    assert_true(t.min_seen >= 0);
    assert_true(t.max_seen <= 10000);
}

static void test_balanced(void **state) {
    (void)state;
    static const step pattern[] = {FAIL, SUCCEED};
    totals t = run(LOCK_WITH_BUDGET("1000", "1"), pattern, 2);
    assert_int_equal(t.errors, 0);
    assert_int_equal(t.other, 0);
    assert_int_equal(t.retried, THREADS * ROUNDS);
    assert_int_equal(t.throttled, 0);
    assert_int_equal(t.succeeded, THREADS * ROUNDS);
    assert_int_equal(t.final_tokens, 1000000);
    assert_true(t.min_seen >= 1000000 - THREADS * 1000);
    assert_true(t.max_seen <= 1000000);
}

static void test_fractional_ratio(void **state) {
    (void)state;
    static const step pattern[] = {FAIL,    FAIL,    SUCCEED, SUCCEED, SUCCEED, SUCCEED, SUCCEED, SUCCEED,
                                   SUCCEED, SUCCEED, SUCCEED, SUCCEED, SUCCEED, SUCCEED, SUCCEED, SUCCEED,
                                   SUCCEED, SUCCEED, SUCCEED, SUCCEED, SUCCEED, SUCCEED};
    totals t = run(LOCK_WITH_BUDGET("100", "0.1"), pattern, sizeof pattern / sizeof pattern[0]);
    assert_int_equal(t.errors, 0);
    assert_int_equal(t.other, 0);
    assert_int_equal(t.retried, 2 * THREADS * ROUNDS);
    assert_int_equal(t.throttled, 0);
    assert_int_equal(t.succeeded, 20 * THREADS * ROUNDS);
    assert_int_equal(t.final_tokens, 100000);
    assert_true(t.min_seen >= 100000 - 2 * THREADS * 1000);
    assert_true(t.max_seen <= 100000);
}

static void test_ratio_window(void **state) {
    (void)state;
    static const step pattern[] = {FAIL};
    totals t = run(LOCK_WITH_RATIO("0.2"), pattern, 1);
    assert_int_equal(t.errors, 0);
    assert_int_equal(t.other, 0);
    /* After q requests the window holds floor(q / 5) retries: the n-th retry waits for the 5n-th request. */
    assert_int_equal(t.retried, THREADS * ROUNDS / 5);
    assert_int_equal(t.throttled, THREADS * ROUNDS - THREADS * ROUNDS / 5);
    assert_true(t.min_seen >= 0); /* retries × 1000 never passed the allowance */
}

/* The window slides: counts older than ttlMs leave it, slot by slot (10 slots of ttlMs / 10). */
static void test_ratio_window_slides(void **state) {
    (void)state;
    const char *lock = LOCK_WITH_RATIO("0.5");
    rf_policy *p = NULL;
    rf_error err;
    assert_int_equal(rf_policy_load_buffer(lock, strlen(lock), &p, &err), RF_OK);
    rf_retry_budget *b = rf_retry_budget_new(p);
    rf_facts f = {.method = "GET", .method_len = 3, .path = "/v1/jobs", .path_len = 8, .status = 503, .attempts = 1};
    rf_rng rng;
    rf_rng_seed(&rng, 1);
    rf_verdict v;
    long retried = 0;
    /* Without the request's token a ratio budget cannot count the request once: refused, and nothing counted. */
    f.mono_ms = 1000;
    assert_int_equal(rf_decide(p, &f, &rng, b, &v, &err), RF_EINVAL);
    assert_string_equal(err.path, "budget_request");
    assert_non_null(strstr(err.message, "is required with a ratio retry budget (retryBudget.retryRatio)"));
    const rf_hedge_facts hf = {.method = "GET", .method_len = 3, .started = 1, .mono_ms = 1000};
    assert_int_equal(rf_hedge_decide(p, 0, &hf, b, &v, &err), RF_EINVAL);
    assert_string_equal(err.path, "budget_request");
    rf_budget_window w;
    assert_true(rf_retry_budget_window(b, 1000, &w));
    assert_int_equal(w.requests, 0);
    rf_budget_request ticket;
    f.budget_request = &ticket;
    for (int i = 0; i < 10; i++) { /* 10 requests at t = 1 s: 5 retries allowed */
        ticket = RF_BUDGET_REQUEST_INIT;
        f.mono_ms = 1000;
        assert_int_equal(rf_decide(p, &f, &rng, b, &v, &err), RF_OK);
        retried += v.retry;
    }
    assert_int_equal(retried, 5);
    assert_true(rf_retry_budget_window(b, 1000, &w));
    assert_int_equal(w.requests, 10);
    assert_int_equal(w.retries, 5);
    assert_int_equal(w.allowance_milli, 5000);
    assert_int_equal(w.ttl_ms, 60000);
    /* Slots of 6 s: the slot of t = 1 s (0..5.999 s) is in the window until t = 59.999 s and has left at 60 s. */
    assert_true(rf_retry_budget_window(b, 59999, &w));
    assert_int_equal(w.requests, 10);
    assert_true(rf_retry_budget_window(b, 60000, &w));
    assert_int_equal(w.requests, 0);
    assert_int_equal(w.retries, 0);
    /* A retry asked then (attempts 2: its request already counted) finds an empty window: throttled, not counted. */
    ticket = (rf_budget_request){.counted = true};
    f.mono_ms = 61000;
    f.attempts = 2;
    assert_int_equal(rf_decide(p, &f, &rng, b, &v, &err), RF_OK);
    assert_false(v.retry);
    assert_int_equal(v.reason, RF_REASON_RETRY_THROTTLED);
    assert_true(rf_retry_budget_window(b, 61000, &w));
    assert_int_equal(w.retries, 0);
    /* A clock that runs back never reopens the past: the window stays at its newest slot. */
    assert_true(rf_retry_budget_window(b, 1000, &w));
    assert_int_equal(w.requests, 0);
    assert_int_equal(rf_retry_budget_tokens_milli(b), -1);
    rf_retry_budget_free(b);
    rf_policy_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ratio_window),     cmocka_unit_test(test_ratio_window_slides),
        cmocka_unit_test(test_failures_only),    cmocka_unit_test(test_balanced),
        cmocka_unit_test(test_fractional_ratio),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
