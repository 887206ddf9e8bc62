/*
 * The replay (retryfreeze/replay.h) on hand-made records whose every prediction is worked out here: a candidate that
 * stops sooner (fewer attempts, fewer retryable classes, a key now required, a shorter per-try timeout, a deadline, a
 * retry budget) is decided by the record alone; one that goes further draws from the record, names its gaps and gives
 * an interval around its prediction; requests no route takes, seed-harness records, several locks, older lines and
 * bad options each say what they are. Files live in a fresh directory under $TMPDIR (or /tmp).
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "retryfreeze/replay.h"

#define TMP_FILES_TAG "rf-test-replay"
#include "tmp_files.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T0 INT64_C(1795972800000) /* 2026-11-29T17:20:00.000Z */

/* A lock from its JSON, every route's fields given but those in extra (a JSON fragment of the route, may be ""). The
 * backoff has no jitter, so the delays are known. */
static rf_policy *lock(const char *fields) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"version\":1,\"defaults\":{\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":10000,"
             "\"backoff\":{\"baseMs\":10,\"multiplier\":1,\"maxMs\":10,\"jitter\":\"none\"}},"
             "\"routes\":[{\"endpoint\":\"POST /v1/jobs\",%s}]}",
             fields);
    rf_policy *p = NULL;
    rf_error err;
    if (rf_policy_load_buffer(text, strlen(text), &p, &err) != RF_OK) fail_msg("lock: %s: %s", err.path, err.message);
    return p;
}

/* A recorded request: POST /v1/jobs with a key, ended at ts; tries added with try_(). */
static rf_ledger_record rec(int64_t ts_ms, const char *outcome, const char *reason, bool ok) {
    rf_ledger_record r;
    memset(&r, 0, sizeof r);
    r.ts_ms = ts_ms;
    r.route = "POST /v1/jobs";
    r.method = "POST";
    r.path = "/v1/jobs";
    r.key = "k";
    r.policy = "sha256:recorded";
    r.outcome = outcome;
    r.reason = reason;
    r.ok = ok;
    return r;
}

/* One try of r: class and status, its duration, the delay before it, its verdict's reason; timeout_ms 1000 (a line of
 * this writer; 0 makes it an older line's). */
static void try_(rf_ledger_record *r, const char *class_name, int status, int64_t elapsed_ms, int64_t delay_ms,
                 const char *reason, int64_t timeout_ms) {
    r->tries[r->n_tries++] = (rf_ledger_try){.class_name = class_name,
                                             .status = status,
                                             .elapsed_ms = elapsed_ms,
                                             .delay_ms = delay_ms,
                                             .reason = reason,
                                             .timeout_ms = timeout_ms,
                                             .transport = strcmp(class_name, "TIMEOUT") == 0 ? "timeout" : NULL};
    r->attempts = (int)r->n_tries;
    r->elapsed_ms += elapsed_ms + delay_ms;
    r->status = status;
}

/* The four shapes the tests reuse: a first-try success, 503 then 200, three 503s (exhausted under maxAttempts 3),
 * and a 404 (terminal). */
static rf_ledger_record ok_first(int64_t ts) {
    rf_ledger_record r = rec(ts, "success", "success", true);
    try_(&r, "HTTP_200", 200, 5, 0, "success", 1000);
    return r;
}
static rf_ledger_record retried(int64_t ts) {
    rf_ledger_record r = rec(ts, "success", "success", true);
    try_(&r, "HTTP_503", 503, 5, 0, "pinned-status", 1000);
    try_(&r, "HTTP_200", 200, 5, 10, "success", 1000);
    return r;
}
static rf_ledger_record exhausted(int64_t ts) {
    rf_ledger_record r = rec(ts, "exhausted", "max-attempts", false);
    try_(&r, "HTTP_503", 503, 5, 0, "pinned-status", 1000);
    try_(&r, "HTTP_503", 503, 5, 10, "pinned-status", 1000);
    try_(&r, "HTTP_503", 503, 5, 10, "max-attempts", 1000);
    return r;
}
static rf_ledger_record not_found(int64_t ts) {
    rf_ledger_record r = rec(ts, "terminal", "status-not-retryable", false);
    try_(&r, "HTTP_404", 404, 5, 0, "status-not-retryable", 1000);
    return r;
}

static rf_replay *replay_of(const rf_policy *p, const rf_replay_options *o) {
    rf_replay *r = NULL;
    rf_error err;
    if (rf_replay_new(p, o, &r, &err) != RF_OK) fail_msg("rf_replay_new: %s: %s", err.path, err.message);
    return r;
}

static void add(rf_replay *r, const rf_ledger_record *rec) {
    rf_error err;
    if (rf_replay_add(r, rec, &err) != RF_OK) fail_msg("rf_replay_add: %s: %s", err.path, err.message);
}

static void finish(rf_replay *r) {
    rf_error err;
    if (rf_replay_finish(r, &err) != RF_OK) fail_msg("rf_replay_finish: %s", err.message);
}

static rf_tally_figures whole(const rf_ledger_tally *t) {
    rf_tally_scope s;
    rf_ledger_tally_whole(t, &s);
    return s.figures;
}

/* The number of requests of scope s that ended with (outcome, reason). */
static int64_t ended(const rf_ledger_tally *t, const char *outcome, const char *reason) {
    rf_tally_scope s;
    rf_ledger_tally_whole(t, &s);
    for (size_t i = 0; i < s.n_outcomes; i++)
        if (strcmp(s.outcomes[i].name, outcome) == 0 && strcmp(s.outcomes[i].reason, reason) == 0)
            return s.outcomes[i].n;
    return 0;
}

static void assert_same_figures(const rf_tally_figures *a, const rf_tally_figures *b) {
#define RF_X_COUNT(name) assert_int_equal(a->name, b->name);
    RF_TALLY_COUNTS(RF_X_COUNT)
#undef RF_X_COUNT
}

/* The lock the records ran under, replayed: every prediction is the record (the delays have no jitter). */
static void test_the_recorded_lock_predicts_the_record(void **state) {
    (void)state;
    rf_policy *p = lock("\"maxAttempts\":3,\"retryable\":[\"HTTP_503\"]");
    rf_replay *r = replay_of(p, NULL);
    rf_ledger_record recs[] = {ok_first(T0), retried(T0 + 100), exhausted(T0 + 200), not_found(T0 + 300)};
    for (size_t i = 0; i < 4; i++) add(r, &recs[i]);
    finish(r);
    rf_tally_figures got = whole(rf_replay_predicted(r)), want = whole(rf_replay_recorded(r));
    assert_same_figures(&got, &want);
    assert_int_equal(got.requests, 4);
    assert_int_equal(got.attempts, 7);
    assert_int_equal(ended(rf_replay_predicted(r), "exhausted", "max-attempts"), 1);
    assert_int_equal(ended(rf_replay_predicted(r), "terminal", "status-not-retryable"), 1);
    rf_replay_info info;
    rf_replay_summary(r, &info);
    assert_int_equal(info.records, 4);
    assert_int_equal(info.exact, 4);
    assert_int_equal(info.modelled + info.unmodelled + info.no_route + info.harness, 0);
    rf_replay_interval iv;
    assert_true(rf_replay_interval_of(r, NULL, &iv));
    assert_false(iv.modelled);
    assert_true(iv.success_rate_lo == got.success_rate && iv.success_rate_hi == got.success_rate);
    rf_replay_free(r);
    rf_policy_free(p);
}

/* Fewer attempts, no retryable class, a key required, a shorter deadline: each decided by the record alone. */
static void test_a_narrower_candidate_is_exact(void **state) {
    (void)state;
    static const struct {
        const char *fields;
        int64_t requests, successes, attempts;
        const char *outcome, *reason;
        int64_t ended;
    } cases[] = {
        /* two attempts: the three 503s stop after two, exhausted; 503 then 200 still succeeds */
        {"\"maxAttempts\":2,\"retryable\":[\"HTTP_503\"]", 4, 2, 6, "exhausted", "max-attempts", 1},
        /* 503 is no longer retried: both 503 requests stop at once, terminal */
        {"\"maxAttempts\":3,\"retryable\":[]", 4, 1, 4, "terminal", "status-not-retryable", 3},
        /* 30 ms in all, 10 of backoff before each retry, 10 ms at least per attempt: the second retry does not fit */
        {"\"maxAttempts\":3,\"retryable\":[\"HTTP_503\"],\"totalBudgetMs\":30,\"perAttemptTimeoutMs\":30,"
         "\"minAttemptMs\":10",
         4, 2, 6, "deadline", "deadline", 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rf_policy *p = lock(cases[c].fields);
        rf_replay *r = replay_of(p, NULL);
        rf_ledger_record recs[] = {ok_first(T0), retried(T0 + 100), exhausted(T0 + 200), not_found(T0 + 300)};
        for (size_t i = 0; i < 4; i++) add(r, &recs[i]);
        finish(r);
        rf_tally_figures got = whole(rf_replay_predicted(r));
        print_message("case %zu: %lld requests, %lld successes, %lld attempts\n", c, (long long)got.requests,
                      (long long)got.successes, (long long)got.attempts);
        assert_int_equal(got.requests, cases[c].requests);
        assert_int_equal(got.successes, cases[c].successes);
        assert_int_equal(got.attempts, cases[c].attempts);
        assert_int_equal(ended(rf_replay_predicted(r), cases[c].outcome, cases[c].reason), cases[c].ended);
        rf_replay_info info;
        rf_replay_summary(r, &info);
        assert_int_equal(info.exact, 4);
        assert_int_equal(info.deadline_cut, strcmp(cases[c].reason, "deadline") == 0 ? 1 : 0);
        rf_replay_free(r);
        rf_policy_free(p);
    }
}

/* A request without a key under a candidate that requires one for its method: refused after its first failure. */
static void test_a_key_now_required(void **state) {
    (void)state;
    rf_policy *p = lock("\"maxAttempts\":3,\"retryable\":[\"HTTP_503\"],\"idempotencyRequired\":[\"POST\"]");
    rf_replay *r = replay_of(p, NULL);
    rf_ledger_record keyless = retried(T0);
    keyless.key = NULL;
    add(r, &keyless);
    finish(r);
    rf_tally_figures got = whole(rf_replay_predicted(r));
    assert_int_equal(got.successes, 0);
    assert_int_equal(got.attempts, 1);
    assert_int_equal(ended(rf_replay_predicted(r), "refused", "mutating-without-idempotency"), 1);
    rf_replay_free(r);
    rf_policy_free(p);
}

/* The candidate's per-try timeout: an answer that came later is a TIMEOUT at it (exact); a try that timed out sooner
 * than the candidate would have waited is assumed to time out again, at the candidate's timeout. */
static void test_per_try_timeouts(void **state) {
    (void)state;
    rf_policy *p = lock("\"maxAttempts\":2,\"retryable\":[\"HTTP_503\",\"TIMEOUT\"],\"perAttemptTimeoutMs\":200");
    rf_replay *r = replay_of(p, NULL);
    rf_ledger_record slow = rec(T0, "success", "success", true); /* a 200 after 300 ms: cut at 200, then retried */
    try_(&slow, "HTTP_200", 200, 300, 0, "success", 1000);
    add(r, &slow);
    rf_ledger_record stalled = rec(T0 + 1000, "exhausted", "max-attempts", false); /* timed out at 100 ms */
    try_(&stalled, "TIMEOUT", 0, 100, 0, "max-attempts", 100);
    stalled.attempts = 1;
    add(r, &stalled);
    finish(r);
    rf_replay_info info;
    rf_replay_summary(r, &info);
    assert_int_equal(info.timeouts_cut, 1);
    assert_int_equal(info.assumed_timeouts, 1);
    rf_tally_figures got = whole(rf_replay_predicted(r));
    assert_int_equal(got.requests, 2);
    /* the slow 200: TIMEOUT at 200 ms, then a retry no record holds (drawn: but the pools are too small, so it ends
     * as recorded) */
    assert_int_equal(info.unmodelled, 2);
    rf_replay_free(r);
    rf_policy_free(p);
}

/* A request the candidate routes nowhere is refused, and a seed-harness record is not predicted at all. */
static void test_no_route_and_harness(void **state) {
    (void)state;
    rf_policy *p = lock("\"maxAttempts\":3,\"retryable\":[\"HTTP_503\"]");
    rf_replay *r = replay_of(p, NULL);
    rf_ledger_record other = retried(T0);
    other.method = "GET";
    other.path = "/v1/other";
    other.route = "GET /v1/other";
    add(r, &other);
    rf_ledger_record harness = rec(0, "success", "success", true);
    harness.route = RF_LEDGER_HARNESS_ROUTE;
    harness.method = harness.path = harness.policy = "";
    harness.attempts = 2;
    add(r, &harness);
    rf_error err;
    assert_int_equal(rf_replay_add(r, &(rf_ledger_record){0}, &err), RF_EINVAL); /* no strings: refused, not counted */
    assert_string_equal(err.path, "$.route");
    char want[128]; /* the reader is named: the replay, not the tally that shares the check */
    snprintf(want, sizeof want, "a string the replay reads is NULL, or more than %d tries", RF_LEDGER_MAX_TRIES);
    assert_non_null(strstr(err.message, want));
    finish(r);
    rf_replay_info info;
    rf_replay_summary(r, &info);
    assert_int_equal(info.records, 2);
    assert_int_equal(info.no_route, 1);
    assert_int_equal(info.harness, 1);
    assert_int_equal(whole(rf_replay_recorded(r)).requests, 2);
    rf_tally_figures got = whole(rf_replay_predicted(r));
    assert_int_equal(got.requests, 1);
    assert_int_equal(got.attempts, 0);
    assert_int_equal(ended(rf_replay_predicted(r), "refused", "no-route"), 1);
    assert_int_equal(rf_replay_lock_count(r), 2);
    rf_replay_lock l;
    assert_true(rf_replay_lock_at(r, 0, &l));
    assert_string_equal(l.digest, "sha256:recorded");
    assert_int_equal(l.requests, 1);
    assert_true(rf_replay_lock_at(r, 1, &l));
    assert_string_equal(l.digest, "");
    rf_replay_free(r);
    rf_policy_free(p);
}

/* A wider candidate: a fourth attempt for the three-503 requests, drawn from the tries that followed a 503 in the
 * record (here: 3 of 4 succeed). The prediction and its interval follow; a class the record never retried is a gap,
 * drawn from the route's tries after any failure. */
static void test_a_wider_candidate_draws_from_the_record(void **state) {
    (void)state;
    rf_policy *p = lock("\"maxAttempts\":4,\"retryable\":[\"HTTP_503\",\"HTTP_429\"]");
    rf_replay_options o = {.seed = 7, .min_samples = 30, .replicates = 50};
    rf_replay *r = replay_of(p, &o);
    int64_t ts = T0;
    for (int i = 0; i < 300; i++) { /* after a 503: 200 three times in four (the 503s of the exhausted ones too) */
        rf_ledger_record a = retried(ts += 100);
        add(r, &a);
        if (i % 10 == 0) {
            rf_ledger_record b = exhausted(ts += 100);
            add(r, &b);
        }
    }
    rf_ledger_record limited = rec(ts += 100, "terminal", "status-not-retryable", false);
    try_(&limited, "HTTP_429", 429, 5, 0, "status-not-retryable", 1000);
    add(r, &limited);
    finish(r);
    rf_replay_info info;
    rf_replay_summary(r, &info);
    assert_int_equal(info.records, 331);
    assert_int_equal(info.modelled, 31); /* the 30 exhausted ones and the 429 */
    assert_int_equal(info.exact, 300);
    assert_true(info.modelled_tries >= 31);
    rf_tally_figures got = whole(rf_replay_predicted(r));
    assert_int_equal(got.requests, 331);
    assert_true(got.successes > 300 && got.successes <= 331);
    rf_replay_interval iv;
    assert_true(rf_replay_interval_of(r, NULL, &iv));
    assert_true(iv.modelled);
    assert_true(iv.success_rate_lo <= got.success_rate && got.success_rate <= iv.success_rate_hi);
    assert_true(iv.success_rate_lo < iv.success_rate_hi);
    assert_true(rf_replay_interval_of(r, "POST /v1/jobs", &iv));
    assert_false(rf_replay_interval_of(r, "GET /nowhere", &iv));
    /* the 429: never retried in the record */
    assert_int_equal(rf_replay_gap_count(r), 1);
    rf_replay_gap g;
    assert_true(rf_replay_gap_at(r, 0, &g));
    assert_string_equal(g.route, "POST /v1/jobs");
    assert_string_equal(g.class_name, "HTTP_429");
    assert_int_equal(g.samples, 0);
    assert_int_equal(g.tries, 1);
    assert_string_equal(g.fallback, "any failure");
    /* The same seed, the same prediction. */
    rf_replay *again = replay_of(p, &o);
    ts = T0;
    for (int i = 0; i < 300; i++) {
        rf_ledger_record a = retried(ts += 100);
        add(again, &a);
        if (i % 10 == 0) {
            rf_ledger_record b = exhausted(ts += 100);
            add(again, &b);
        }
    }
    add(again, &limited);
    finish(again);
    rf_tally_figures twice = whole(rf_replay_predicted(again));
    assert_same_figures(&got, &twice);
    rf_replay_free(again);
    rf_replay_free(r);
    rf_policy_free(p);
}

/* Failures that persist per request: of 1000 recorded under 3 attempts, 200 failed all three, 100 once; replayed
 * under 5. Each further try is drawn from the record's tries at the same attempt after the same failure, and the
 * record's third tries after two 503s all failed: the 200 fail again (800 successes, 1900 attempts, as a live run
 * would give), where tries taken as independent (a 503 followed by success one time in three, whatever came before)
 * predicted about 870. Attempts 4 and 5 are beyond the record: drawn as its third, said so, and the interval spans
 * every case there, from all of them failing to all succeeding at once. */
static void test_failures_that_persist_per_request(void **state) {
    (void)state;
    rf_policy *wide = lock("\"maxAttempts\":5,\"retryable\":[\"HTTP_503\"]");
    rf_policy *same = lock("\"maxAttempts\":3,\"retryable\":[\"HTTP_503\"]");
    for (int k = 0; k < 2; k++) {
        rf_replay_options o = {.seed = 5, .replicates = 20};
        rf_replay *r = replay_of(k == 0 ? wide : same, &o);
        int64_t ts = T0;
        for (int i = 0; i < 1000; i++) {
            rf_ledger_record a = i % 10 < 2    ? exhausted(ts += 100)
                                 : i % 10 == 2 ? retried(ts += 100)
                                               : ok_first(ts += 100);
            add(r, &a);
        }
        finish(r);
        rf_tally_figures got = whole(rf_replay_predicted(r));
        rf_replay_info info;
        rf_replay_summary(r, &info);
        rf_replay_interval iv;
        assert_true(rf_replay_interval_of(r, NULL, &iv));
        assert_int_equal(got.requests, 1000);
        assert_int_equal(got.successes, 800);
        if (k == 1) { /* the record's own lock: exact, nothing beyond it */
            assert_int_equal(got.attempts, 1500);
            assert_int_equal(info.beyond_requests, 0);
            assert_int_equal(rf_replay_beyond_count(r), 0);
            assert_false(iv.beyond);
            assert_float_equal(iv.success_rate_lo, 0.8, 1e-12);
            assert_float_equal(iv.success_rate_hi, 0.8, 1e-12);
            rf_replay_free(r);
            continue;
        }
        assert_int_equal(got.attempts, 1900);
        assert_int_equal(info.beyond_requests, 200);
        assert_int_equal(info.beyond_tries, 400);
        assert_int_equal(rf_replay_beyond_count(r), 2);
        for (size_t i = 0; i < 2; i++) {
            rf_replay_beyond b;
            assert_true(rf_replay_beyond_at(r, i, &b));
            assert_string_equal(b.route, "POST /v1/jobs");
            assert_string_equal(b.class_name, "HTTP_503");
            assert_int_equal(b.attempt, 4 + (int)i);
            assert_int_equal(b.samples, 0);
            assert_int_equal(b.drawn_as, 3);
            assert_null(b.fallback);
            assert_int_equal(b.tries, 200);
        }
        assert_false(rf_replay_beyond_at(r, 2, &(rf_replay_beyond){0}));
        assert_true(iv.beyond);
        /* all 200 failing at attempts 4 and 5 (the prediction) … all succeeding at attempt 4 */
        assert_float_equal(iv.success_rate_lo, 0.8, 1e-12);
        assert_float_equal(iv.success_rate_hi, 1.0, 1e-12);
        assert_float_equal(iv.attempts_per_request_lo, 1.7, 1e-12);
        assert_float_equal(iv.attempts_per_request_hi, 1.9, 1e-12);
        /* … and all succeeding at attempt 5: the most attempts per success */
        assert_float_equal(iv.attempts_per_success_lo, 900.0 / 800.0, 1e-12);
        assert_float_equal(iv.attempts_per_success_hi, 1.9, 1e-12);
        rf_replay_free(r);
    }
    rf_policy_free(wide);
    rf_policy_free(same);
}

/* Many requests waiting for their drawn tries at once: the queue of waiting requests grows (and, with a small
 * `pending`, wraps around, drawing the oldest first), and each waiting request keeps reading its own method and path
 * (a copy that must move with it): every one is predicted on its route, none as no-route. */
static void test_many_requests_wait(void **state) {
    (void)state;
    rf_policy *p = lock("\"maxAttempts\":4,\"retryable\":[\"HTTP_503\"]");
    static const uint32_t pendings[] = {0, 7};
    for (size_t k = 0; k < sizeof pendings / sizeof pendings[0]; k++) {
        rf_replay_options o = {.seed = 3, .pending = pendings[k], .replicates = 4};
        rf_replay *r = replay_of(p, &o);
        int64_t ts = T0;
        for (int i = 0; i < 400; i++) {
            rf_ledger_record a = i % 2 ? retried(ts += 100) : exhausted(ts += 100);
            add(r, &a);
        }
        finish(r);
        rf_replay_info info;
        rf_replay_summary(r, &info);
        /* With 7 waiting at most, the first are drawn before the pools hold 30 tries: those end as recorded. */
        assert_int_equal(info.modelled + info.unmodelled, 200);
        assert_true(pendings[k] == 0 ? info.unmodelled == 0 : info.unmodelled > 0);
        assert_int_equal(info.no_route, 0);
        assert_int_equal(ended(rf_replay_predicted(r), "refused", "no-route"), 0);
        rf_tally_figures got = whole(rf_replay_predicted(r));
        assert_int_equal(got.requests, 400);
        /* the record's requests that failed twice failed a third time, every one: so do those the candidate retries
         * (with 7 waiting, the first are drawn before the record's third tries number 30: as its second, then) */
        if (pendings[k] == 0)
            assert_int_equal(got.successes, 200);
        else
            assert_true(got.successes >= 200 && got.successes < 400);
        rf_replay_free(r);
    }
    rf_policy_free(p);
}

/* The retry budget, fed in record order: gRPC A6 with 4 tokens, 1 per retryable failure, 0.5 back per success; a
 * retry is throttled at 2 tokens or fewer. */
static void test_the_retry_budget_throttles(void **state) {
    (void)state;
    const char *text = "{\"version\":1,\"defaults\":{\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":10000,"
                       "\"backoff\":{\"baseMs\":10,\"multiplier\":1,\"maxMs\":10,\"jitter\":\"none\"}},"
                       "\"routes\":[{\"endpoint\":\"POST /v1/jobs\",\"maxAttempts\":3,\"retryable\":[\"HTTP_503\"]}],"
                       "\"retryBudget\":{\"maxTokens\":4,\"tokenRatio\":0.5}}";
    rf_policy *p = NULL;
    rf_error err;
    assert_int_equal(rf_policy_load_buffer(text, strlen(text), &p, &err), RF_OK);
    rf_replay *r = replay_of(p, NULL);
    /* tokens: 4 → 503: 3 (retry) → 200: 3.5 → 503: 2.5 (retry) → 200: 3 → 503: 2 (throttled, stop) → 503: 1 (throttled)
     */
    for (int i = 0; i < 4; i++) {
        rf_ledger_record a = retried(T0 + 100 * i);
        add(r, &a);
    }
    finish(r);
    rf_replay_info info;
    rf_replay_summary(r, &info);
    assert_true(info.budget);
    assert_int_equal(info.throttled, 2);
    assert_int_equal(ended(rf_replay_predicted(r), "throttled", "retry-throttled"), 2);
    assert_int_equal(whole(rf_replay_predicted(r)).successes, 2);
    rf_replay_free(r);
    rf_policy_free(p);
}

/* A slow 200 (250 ms) on a route keyed by a success of 5 ms. */
static rf_ledger_record slow_ok(int64_t ts) {
    rf_ledger_record r = rec(ts, "success", "success", true);
    try_(&r, "HTTP_200", 200, 250, 0, "success", 1000);
    return r;
}
/* A 503 after 150 ms, then a 200 after 5 ms (10 ms of backoff). */
static rf_ledger_record slow_503(int64_t ts) {
    rf_ledger_record r = rec(ts, "success", "success", true);
    try_(&r, "HTTP_503", 503, 150, 0, "pinned-status", 1000);
    try_(&r, "HTTP_200", 200, 5, 10, "success", 1000);
    return r;
}

/* The hedging candidate of the hedging tests: hedges every 100 ms up to 3 attempts, POST only with a key. */
#define HEDGING_LOCK                                                                                 \
    "\"maxAttempts\":3,\"retryable\":[\"HTTP_503\",\"TIMEOUT\"],\"idempotencyRequired\":[\"POST\"]," \
    "\"hedging\":{\"maxAttempts\":3,\"hedgingDelayMs\":100,\"nonFatalClasses\":[\"HTTP_503\",\"TIMEOUT\"]}"

/*
 * A ledger recorded without hedging, replayed under a candidate with hedging (delay 100 ms, 3 attempts): worked out
 * by hand, each hedge one rf_hedge_decide would allow.
 *   5 ms success: answered before 100 ms, no hedge.
 *   250 ms success: hedges at 100 and 200 ms (then 3 attempts have started); the primary answers at 250.
 *   503 at 150 ms, 200 after: a hedge at 100 ms; the retry at 160 ms is the third attempt; success.
 *   keyless POST, 250 ms: not hedged (idempotencyRequired), one attempt.
 * Worst case (a hedge adds load, never wins: the point): 3 hedges, 0 wins, 1 + 3 + 3 + 1 = 8 upstream attempts.
 * Best case (a hedge answers as the route's fastest recorded success, 5 ms): the first hedge wins at 105 ms in both
 * slow requests: 2 hedges, 2 wins, 1 + 2 + 2 + 1 = 6 attempts.
 */
static void test_a_candidate_with_hedging_adds_hedges(void **state) {
    (void)state;
    rf_policy *p = lock(HEDGING_LOCK);
    rf_replay *r = replay_of(p, NULL);
    rf_ledger_record keyless = slow_ok(T0 + 3000);
    keyless.key = NULL;
    rf_ledger_record recs[] = {ok_first(T0), slow_ok(T0 + 1000), slow_503(T0 + 2000), keyless};
    for (size_t i = 0; i < 4; i++) add(r, &recs[i]);
    finish(r);
    rf_tally_figures got = whole(rf_replay_predicted(r)), was = whole(rf_replay_recorded(r));
    assert_int_equal(was.hedges, 0);
    assert_int_equal(got.requests, 4);
    assert_int_equal(got.successes, 4);
    assert_int_equal(got.hedged, 2);
    assert_int_equal(got.hedges, 3);
    assert_int_equal(got.hedge_wins, 0);
    assert_int_equal(got.attempts, 8);
    assert_true(got.hedges_per_request == 0.75);
    rf_replay_info info;
    rf_replay_summary(r, &info);
    assert_int_equal(info.hedged_requests, 3); /* the keyless POST is not hedged */
    assert_int_equal(info.hedge_keyless, 1);
    assert_int_equal(info.hedges_best, 2);
    assert_int_equal(info.hedge_wins_best, 2);
    assert_int_equal(info.attempts_best, 6);
    assert_int_equal(info.hedges_unbounded, 0);
    rf_replay_interval iv;
    assert_true(rf_replay_interval_of(r, NULL, &iv));
    assert_true(iv.hedges_modelled);
    assert_true(iv.hedges_per_request_lo == 0.5 && iv.hedges_per_request_hi == 0.75);
    assert_true(iv.hedge_win_rate_lo == 0 && iv.hedge_win_rate_hi == 0.5);
    assert_true(rf_replay_interval_of(r, "POST /v1/jobs", &iv));
    assert_true(iv.hedges_per_request_lo == 0.5 && iv.hedges_per_request_hi == 0.75);
    rf_replay_free(r);
    rf_policy_free(p);
}

/* A hedged request ends at a failure of a class its hedging does not list as non-fatal (hedge-fatal), as the client
 * ends it: the 503 at 150 ms stops the request, its hedge cancelled. */
static void test_a_fatal_class_ends_a_hedged_request(void **state) {
    (void)state;
    rf_policy *p = lock("\"maxAttempts\":3,\"retryable\":[\"HTTP_503\"],"
                        "\"hedging\":{\"maxAttempts\":3,\"hedgingDelayMs\":100}");
    rf_replay *r = replay_of(p, NULL);
    rf_ledger_record a = slow_503(T0);
    add(r, &a);
    finish(r);
    rf_tally_figures got = whole(rf_replay_predicted(r));
    assert_int_equal(got.successes, 0);
    assert_int_equal(got.hedges, 1);
    assert_int_equal(got.attempts, 2);
    assert_int_equal(ended(rf_replay_predicted(r), "terminal", "hedge-fatal"), 1);
    rf_replay_free(r);
    rf_policy_free(p);
}

/* A hedged record: its first attempt cancelled at 120 ms when its hedge (started at 100 ms) answered 200 at 120. */
static rf_ledger_record hedged_record(int64_t ts) {
    rf_ledger_record r = rec(ts, "success", "success", true);
    try_(&r, "UNKNOWN", 0, 120, 0, "success", 1000);
    r.tries[0].transport = "other";
    r.tries[0].fate = "cancelled";
    try_(&r, "HTTP_200", 200, 20, 0, "success", 1000);
    r.tries[1].hedge = true;
    r.tries[1].start_ms = 100;
    r.tries[1].fate = "winner";
    r.elapsed_ms = 120;
    return r;
}

/* A candidate without hedging, replaying a hedged ledger: no hedge at all (exact); the recorded hedges are not its
 * retries, and a cancelled attempt's answer, which the record lacks, is drawn (modelled). Under the hedging candidate
 * of the record, the recorded hedges are not replayed as attempts either: the candidate's own are simulated. */
static void test_a_candidate_without_hedging_replays_a_hedged_ledger(void **state) {
    (void)state;
    rf_policy *p = lock("\"maxAttempts\":3,\"retryable\":[\"HTTP_503\"]");
    const rf_replay_options o = {.min_samples = 1};
    rf_replay *r = replay_of(p, &o);
    rf_ledger_record recs[] = {ok_first(T0), hedged_record(T0 + 1000), ok_first(T0 + 2000)};
    for (size_t i = 0; i < 3; i++) add(r, &recs[i]);
    finish(r);
    rf_tally_figures got = whole(rf_replay_predicted(r)), was = whole(rf_replay_recorded(r));
    assert_int_equal(was.hedges, 1);
    assert_int_equal(was.hedge_wins, 1);
    assert_int_equal(got.hedges, 0);
    assert_int_equal(got.hedge_wins, 0);
    assert_int_equal(got.hedged, 0);
    assert_int_equal(got.attempts, 3); /* the cancelled attempt drawn from the first tries: a 5 ms success */
    assert_int_equal(got.successes, 3);
    rf_replay_info info;
    rf_replay_summary(r, &info);
    assert_int_equal(info.modelled, 1);
    assert_int_equal(info.hedges_best, 0);
    rf_replay_free(r);
    rf_policy_free(p);
}

/* Lines without the replay facts say what they could not support. */
static void test_older_lines_say_what_they_lack(void **state) {
    (void)state;
    rf_policy *p = lock("\"maxAttempts\":3,\"retryable\":[\"HTTP_503\",\"TIMEOUT\",\"TLS_FAILURE\"],"
                        "\"retryAfter\":{\"headers\":[\"retry-after\",\"retry-after-ms\"]}");
    rf_replay *r = replay_of(p, NULL);
    rf_ledger_record old = rec(T0, "success", "success", true);
    try_(&old, "TIMEOUT", 0, 1000, 0, "pinned-status", 0);
    try_(&old, "TLS_FAILURE", 0, 3, 10, "pinned-status", 0);
    try_(&old, "HTTP_503", 503, 3, 10, "pinned-status", 0);
    old.tries[2].retry_after = "Sun, 29 Nov 2026 17:20:01 GMT";
    try_(&old, "HTTP_200", 200, 3, 10, "success", 0);
    old.tries[0].transport = old.tries[1].transport = NULL; /* an older line has none */
    add(r, &old);
    rf_ledger_record fresh = retried(T0 + 10000);
    add(r, &fresh);
    finish(r);
    rf_replay_info info;
    rf_replay_summary(r, &info);
    assert_int_equal(info.older_records, 1);
    assert_int_equal(info.older_timeouts, 1);
    assert_int_equal(info.older_tls, 1);
    assert_int_equal(info.older_dates, 1);
    assert_int_equal(info.older_waits, 4); /* each try of the older line: retry-after-ms unknown */
    rf_replay_free(r);
    rf_policy_free(p);
}

/* A file: torn and corrupt lines as rf_ledger_tally_read treats them. */
static void test_read_a_file(void **state) {
    (void)state;
    rf_policy *p = lock("\"maxAttempts\":3,\"retryable\":[\"HTTP_503\"]");
    const char *path = tmp_file("ledger.jsonl");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    char line[4096];
    rf_error err;
    rf_ledger_record a = retried(T0);
    assert_true(rf_ledger_format(&a, line, sizeof line, &err) > 0);
    fprintf(f, "%s\nnot json\n%s\n{\"ts\":\"2026", line, line);
    fclose(f);
    rf_replay *r = replay_of(p, NULL);
    rf_tally_file file;
    assert_int_equal(rf_replay_read(r, path, false, &file, &err), RF_EINVAL);
    assert_int_equal(err.line, 2);
    rf_replay_free(r);
    r = replay_of(p, NULL);
    assert_int_equal(rf_replay_read(r, path, true, &file, &err), RF_OK);
    assert_int_equal(file.lines, 4);
    assert_int_equal(file.corrupt_lines, 1);
    assert_int_equal(file.first_torn, 4);
    finish(r);
    assert_int_equal(whole(rf_replay_predicted(r)).requests, 2);
    rf_tally_info ti;
    rf_ledger_tally_info(rf_replay_recorded(r), &ti);
    assert_int_equal(ti.lines, 4);
    assert_int_equal(ti.torn_lines, 1);
    assert_int_equal(rf_replay_add(r, &a, &err), RF_EINVAL); /* finished */
    rf_replay_free(r);
    rf_policy_free(p);
}

static void test_refused_options(void **state) {
    (void)state;
    rf_policy *p = lock("\"maxAttempts\":3,\"retryable\":[]");
    rf_replay *r = NULL;
    rf_error err;
    static const struct {
        rf_replay_options o;
        const char *path;
    } cases[] = {{{.replicates = 1}, "replicates"},
                 {{.replicates = RF_REPLAY_MAX_REPLICATES + 1}, "replicates"},
                 {{.min_samples = 1000001}, "min_samples"},
                 {{.pending = RF_REPLAY_MAX_PENDING + 1}, "pending"},
                 {{.group = (rf_tally_group)2}, "group"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(rf_replay_new(p, &cases[i].o, &r, &err), RF_EINVAL);
        assert_string_equal(err.path, cases[i].path);
        assert_null(r);
    }
    assert_int_equal(rf_replay_new(NULL, NULL, &r, &err), RF_EINVAL);
    assert_string_equal(err.path, "candidate");
    rf_policy_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_recorded_lock_predicts_the_record),
        cmocka_unit_test(test_a_narrower_candidate_is_exact),
        cmocka_unit_test(test_a_key_now_required),
        cmocka_unit_test(test_per_try_timeouts),
        cmocka_unit_test(test_no_route_and_harness),
        cmocka_unit_test(test_a_wider_candidate_draws_from_the_record),
        cmocka_unit_test(test_many_requests_wait),
        cmocka_unit_test(test_failures_that_persist_per_request),
        cmocka_unit_test(test_the_retry_budget_throttles),
        cmocka_unit_test(test_a_candidate_with_hedging_adds_hedges),
        cmocka_unit_test(test_a_fatal_class_ends_a_hedged_request),
        cmocka_unit_test(test_a_candidate_without_hedging_replays_a_hedged_ledger),
        cmocka_unit_test(test_older_lines_say_what_they_lack),
        cmocka_unit_test(test_read_a_file),
        cmocka_unit_test(test_refused_options),
    };
    return cmocka_run_group_tests(tests, tmp_files_setup, tmp_files_teardown);
}
