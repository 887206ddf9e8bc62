/*
 * rf_decide with the route's wait headers (retryAfter.headers, facts.hints) and per-class attempt limits
 * (classLimits): the first present and valid header wins, gRPC pushback stops with server-pushback, hints the
 * route does not read are refused, class-limit stops before status-not-retryable; the lock's validation of
 * both fields, and their canonical form (absent at their defaults, so old digests hold).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_locks.h"

#include "retryfreeze/decide.h"
#include "retryfreeze/lock_schema.h"
#include <stdio.h>
#include <string.h>

/* No jitter: backoff 100 ms, then 200 ms. Reads four headers, in this order. */
#define HINT_LOCK                                                                                                      \
    "{\"endpoint\":\"GET /a\",\"maxAttempts\":4,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":60000,"                 \
    "\"retryable\":[\"HTTP_429\",\"HTTP_503\",\"UNKNOWN\",\"TIMEOUT\"],\"backoff\":{\"baseMs\":100,\"multiplier\":2,"  \
    "\"maxMs\":1000,\"jitter\":\"none\"},\"retryAfter\":{\"maxMs\":30000,\"headers\":[\"grpc-retry-pushback-ms\","     \
    "\"retry-after-ms\",\"ratelimit\",\"retry-after\"]},\"classLimits\":{\"UNKNOWN\":2,\"HTTP_5XX\":3,\"HTTP_503\":4}" \
    "}"

#define PLAIN_LOCK                                                                                     \
    "{\"endpoint\":\"GET /a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":60000," \
    "\"retryable\":[\"HTTP_503\"],\"backoff\":{\"baseMs\":100,\"multiplier\":2,\"maxMs\":1000,\"jitter\":\"none\"}}"

static void set_hint(rf_facts *f, rf_wait_header h, const char *v) {
    f->hints[h] = v;
    f->hint_lens[h] = strlen(v);
}

static rf_facts facts(int status, int attempts) {
    rf_facts f = {.method = "GET",
                  .method_len = 3,
                  .path = "/a",
                  .path_len = 2,
                  .status = status,
                  .attempts = attempts,
                  .now_ms = INT64_C(1700000000000)};
    return f;
}

static rf_verdict decide_ok(const rf_policy *p, const rf_facts *f) {
    rf_verdict v;
    rf_error err;
    if (rf_decide(p, f, NULL, NULL, &v, &err) != RF_OK) fail_msg("decide: %s %s", err.path, err.message);
    return v;
}

static void test_first_present_valid_wins(void **state) {
    (void)state;
    rf_policy *p = lock_load(HINT_LOCK);
    rf_facts f = facts(429, 1);
    /* Nothing: backoff. */
    rf_verdict v = decide_ok(p, &f);
    assert_true(v.retry);
    assert_int_equal(v.delay_ms, 100);
    assert_int_equal(v.retry_after, RF_RA_USE_ABSENT);
    assert_int_equal(v.retry_after_header, -1);
    /* Retry-After alone (4th in the list). */
    set_hint(&f, RF_WAIT_RETRY_AFTER, "3");
    v = decide_ok(p, &f);
    assert_int_equal(v.delay_ms, 3000);
    assert_int_equal(v.retry_after, RF_RA_USE_HONORED);
    assert_int_equal(v.retry_after_header, RF_WAIT_RETRY_AFTER);
    /* retry-after-ms comes first in the route's list: it wins. */
    set_hint(&f, RF_WAIT_RETRY_AFTER_MS, "250");
    v = decide_ok(p, &f);
    assert_int_equal(v.delay_ms, 250);
    assert_int_equal(v.retry_after_header, RF_WAIT_RETRY_AFTER_MS);
    /* An invalid first header is skipped: the next valid one wins. */
    set_hint(&f, RF_WAIT_RETRY_AFTER_MS, "2.5");
    v = decide_ok(p, &f);
    assert_int_equal(v.delay_ms, 3000);
    assert_int_equal(v.retry_after_header, RF_WAIT_RETRY_AFTER);
    /* A RateLimit with quota left asks nothing: skipped too. */
    set_hint(&f, RF_WAIT_RATELIMIT, "\"default\";r=5;t=9");
    v = decide_ok(p, &f);
    assert_int_equal(v.delay_ms, 3000);
    set_hint(&f, RF_WAIT_RATELIMIT, "\"default\";r=0;t=9");
    v = decide_ok(p, &f);
    assert_int_equal(v.delay_ms, 9000);
    assert_int_equal(v.retry_after_header, RF_WAIT_RATELIMIT);
    /* Only invalid values: ignored-invalid, naming the first present one, and the backoff. */
    rf_facts g = facts(429, 1);
    set_hint(&g, RF_WAIT_RETRY_AFTER_MS, "soon");
    set_hint(&g, RF_WAIT_RETRY_AFTER, "later");
    v = decide_ok(p, &g);
    assert_true(v.retry);
    assert_int_equal(v.delay_ms, 100);
    assert_int_equal(v.retry_after, RF_RA_USE_IGNORED);
    assert_int_equal(v.retry_after_header, RF_WAIT_RETRY_AFTER_MS);
    rf_policy_free(p);
}

static void test_pushback(void **state) {
    (void)state;
    rf_policy *p = lock_load(HINT_LOCK);
    rf_facts f = facts(503, 1);
    set_hint(&f, RF_WAIT_RETRY_AFTER, "3");
    set_hint(&f, RF_WAIT_GRPC_RETRY_PUSHBACK_MS, "40");
    rf_verdict v = decide_ok(p, &f);
    assert_true(v.retry);
    assert_int_equal(v.delay_ms, 40);
    assert_int_equal(v.retry_after_header, RF_WAIT_GRPC_RETRY_PUSHBACK_MS);
    /* gRPC A6: negative or malformed means do not retry. */
    const char *stops[] = {"-1", "abc", "1.5", "2147483648", "", " "};
    for (size_t i = 0; i < sizeof stops / sizeof *stops; i++) {
        set_hint(&f, RF_WAIT_GRPC_RETRY_PUSHBACK_MS, stops[i]);
        v = decide_ok(p, &f);
        assert_false(v.retry);
        assert_int_equal(v.reason, RF_REASON_SERVER_PUSHBACK);
        assert_int_equal(v.retry_after, RF_RA_USE_HONORED);
        assert_int_equal(v.retry_after_header, RF_WAIT_GRPC_RETRY_PUSHBACK_MS);
        assert_int_equal(v.delay_ms, 0);
    }
    /* A pushback stop does not outrank earlier checks: a non-retryable status stays status-not-retryable. */
    f.status = 400;
    v = decide_ok(p, &f);
    assert_int_equal(v.reason, RF_REASON_STATUS_NOT_RETRYABLE);
    assert_int_equal(v.retry_after, RF_RA_USE_NOT_NEEDED);
    /* A wait over retryAfter.maxMs (30 s) stops as for Retry-After. */
    f.status = 503;
    set_hint(&f, RF_WAIT_GRPC_RETRY_PUSHBACK_MS, "30001");
    v = decide_ok(p, &f);
    assert_int_equal(v.reason, RF_REASON_RETRY_AFTER_EXCEEDS_BUDGET);
    rf_policy_free(p);
}

static void test_hints_the_route_does_not_read(void **state) {
    (void)state;
    rf_policy *p = lock_load(PLAIN_LOCK), *q = lock_load(HINT_LOCK);
    rf_facts f = facts(503, 1);
    set_hint(&f, RF_WAIT_RETRY_AFTER_MS, "250");
    rf_verdict v;
    rf_error err;
    assert_int_equal(rf_decide(p, &f, NULL, NULL, &v, &err), RF_EINVAL);
    assert_string_equal(err.path, "hints");
    assert_non_null(strstr(err.message, "does not read retry-after-ms"));
    /* Retry-After twice (as retry_after and as a hint). */
    rf_facts g = facts(503, 1);
    set_hint(&g, RF_WAIT_RETRY_AFTER, "1");
    g.retry_after = "2";
    g.retry_after_len = 1;
    assert_int_equal(rf_decide(q, &g, NULL, NULL, &v, &err), RF_EINVAL);
    assert_string_equal(err.path, "hints.retry-after");
    /* The default route reads Retry-After from either place. */
    rf_facts h = facts(503, 1);
    set_hint(&h, RF_WAIT_RETRY_AFTER, "2");
    v = decide_ok(p, &h);
    assert_int_equal(v.delay_ms, 2000);
    assert_int_equal(v.retry_after_header, RF_WAIT_RETRY_AFTER);
    rf_policy_free(p);
    rf_policy_free(q);
}

static void test_class_limits(void **state) {
    (void)state;
    rf_policy *p = lock_load(HINT_LOCK);
    /* UNKNOWN: 2 — seed 004's "once, then stop". */
    rf_facts f = facts(0, 1);
    f.transport = RF_TRANSPORT_OTHER;
    rf_verdict v = decide_ok(p, &f);
    assert_true(v.retry);
    f.attempts = 2;
    v = decide_ok(p, &f);
    assert_false(v.retry);
    assert_int_equal(v.reason, RF_REASON_CLASS_LIMIT);
    assert_string_equal(v.class_name, "UNKNOWN");
    /* A specific status beats its family: HTTP_503 has 4 (= maxAttempts), other 5xx have 3. */
    f = facts(503, 3);
    v = decide_ok(p, &f);
    assert_true(v.retry);
    f.attempts = 4;
    v = decide_ok(p, &f);
    assert_int_equal(v.reason, RF_REASON_MAX_ATTEMPTS); /* max-attempts comes first */
    f = facts(502, 3);
    v = decide_ok(p, &f);
    assert_int_equal(v.reason, RF_REASON_CLASS_LIMIT); /* before status-not-retryable */
    /* rf_policy_class_attempts: min(maxAttempts, limit), a specific status beating its family. */
    assert_int_equal(rf_policy_class_attempts(p, 0, 0, RF_TRANSPORT_OTHER), 2);
    assert_int_equal(rf_policy_class_attempts(p, 0, 503, RF_TRANSPORT_OK), 4);
    assert_int_equal(rf_policy_class_attempts(p, 0, 502, RF_TRANSPORT_OK), 3);
    assert_int_equal(rf_policy_class_attempts(p, 0, 0, RF_TRANSPORT_TIMEOUT), 4);
    assert_int_equal(rf_policy_class_attempts(p, 0, 429, RF_TRANSPORT_OK), 4);
    assert_int_equal(rf_policy_class_attempts(p, 1, 503, RF_TRANSPORT_OK), 0); /* no route 1 */
    assert_int_equal(rf_policy_class_attempts(NULL, 0, 503, RF_TRANSPORT_OK), 0);
    /* No limit for TIMEOUT: maxAttempts only. */
    f = facts(0, 3);
    f.transport = RF_TRANSPORT_TIMEOUT;
    v = decide_ok(p, &f);
    assert_true(v.retry);
    rf_policy_free(p);
}

static void test_lock_validation(void **state) {
    (void)state;
#define L(x)                                                                                          \
    "{\"endpoint\":\"GET /a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":9000," \
    "\"retryable\":[\"HTTP_503\"]," x "}"
    lock_refused(L("\"retryAfter\":{\"headers\":[]}"), "$.retryAfter.headers", "non-empty array");
    lock_refused(L("\"retryAfter\":{\"headers\":[\"x-retry-after\"]}"), "$.retryAfter.headers[0]",
                 "unknown wait header");
    lock_refused(L("\"retryAfter\":{\"headers\":[\"retry-after\",\"Retry-After\"]}"), "$.retryAfter.headers[1]",
                 "listed twice");
    lock_refused(L("\"retryAfter\":{\"headers\":\"retry-after\"}"), "$.retryAfter.headers", "non-empty array");
    lock_refused(L("\"retryAfter\":{\"headers\":[5]}"), "$.retryAfter.headers[0]", "header name string");
    lock_refused(L("\"classLimits\":{\"UNKNOWN\":4}"), "$.classLimits.UNKNOWN", "at most maxAttempts (3)");
    lock_refused(L("\"classLimits\":{\"UNKNOWN\":0}"), "$.classLimits.UNKNOWN", "from 1 to maxAttempts");
    lock_refused(L("\"classLimits\":{\"UNKNOWN\":1.5}"), "$.classLimits.UNKNOWN", "from 1 to maxAttempts");
    lock_refused(L("\"classLimits\":{\"UNKNWN\":2}"), "$.classLimits.UNKNWN", "unknown failure class");
    lock_refused(L("\"classLimits\":{\"TIMEOUT\":2,\"GATEWAY_TIMEOUT\":3}"), "$.classLimits.GATEWAY_TIMEOUT",
                 "two limits");
    lock_refused(L("\"classLimits\":[2]"), "$.classLimits", "must be an object");
    /* Inherited from defaults, checked against the route's own maxAttempts. */
    lock_refused("{\"version\":1,\"defaults\":{\"classLimits\":{\"TIMEOUT\":3}},\"routes\":[{\"endpoint\":\"GET /a\","
                 "\"maxAttempts\":2,\"perAttemptTimeoutMs\":10,\"totalBudgetMs\":10,\"retryable\":[\"TIMEOUT\"]}]}",
                 "$.routes[0].classLimits.TIMEOUT", "at most maxAttempts (2)");
#undef L
}

/* A class limit's range is its schema row's (min..max of "classLimits"), in the refusal and in what loads: the
 * row's max loads under a maxAttempts as high, one past either bound is refused naming the row's range. */
static void test_class_limit_range_is_the_rows(void **state) {
    (void)state;
    const rf_lock_field *row = rf_lock_schema_field((size_t)rf_lock_schema_find("classLimits"));
    const rf_lock_field *max_attempts = rf_lock_schema_field((size_t)rf_lock_schema_find("maxAttempts"));
    assert_non_null(row);
    assert_non_null(max_attempts);
    assert_true(row->max <= max_attempts->max);
    char lock[512], range[96];
    snprintf(range, sizeof range, "must be an integer from %lld to maxAttempts (at most %lld)", (long long)row->min,
             (long long)row->max);
    const long long values[] = {row->min - 1, row->min, row->max, row->max + 1};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        snprintf(lock, sizeof lock,
                 "{\"endpoint\":\"GET /a\",\"maxAttempts\":%lld,\"perAttemptTimeoutMs\":1000,"
                 "\"totalBudgetMs\":9000,\"retryable\":[\"HTTP_503\"],\"classLimits\":{\"UNKNOWN\":%lld}}",
                 (long long)max_attempts->max, values[i]);
        if (values[i] < row->min || values[i] > row->max) {
            lock_refused(lock, "$.classLimits.UNKNOWN", range);
        } else {
            rf_policy *p = lock_load(lock);
            assert_int_equal(rf_policy_class_attempts(p, 0, 0, RF_TRANSPORT_OK), (int)values[i]);
            rf_policy_free(p);
        }
    }
}

static void test_views_and_canonical(void **state) {
    (void)state;
    rf_policy *p = lock_load(HINT_LOCK), *plain = lock_load(PLAIN_LOCK);
    rf_route_view r;
    assert_int_equal(rf_policy_route(p, 0, &r), RF_OK);
    assert_int_equal(r.n_retry_after_headers, 4);
    assert_string_equal(r.retry_after_headers[0], "grpc-retry-pushback-ms");
    assert_string_equal(r.retry_after_headers[3], "retry-after");
    assert_int_equal(r.n_class_limits, 3);
    assert_string_equal(r.class_limit_classes[0], "HTTP_503");
    assert_int_equal(r.class_limit_values[0], 4);
    assert_string_equal(r.class_limit_classes[1], "HTTP_5XX");
    assert_string_equal(r.class_limit_classes[2], "UNKNOWN");
    assert_int_equal(r.class_limit_values[2], 2);
    assert_non_null(strstr(rf_policy_canonical_json(p),
                           "\"classLimits\":{\"HTTP_503\":4,\"HTTP_5XX\":3,\"UNKNOWN\":2},\"endpoint\""));
    assert_non_null(strstr(rf_policy_canonical_json(p), "\"retryAfter\":{\"headers\":[\"grpc-retry-pushback-ms\","));
    /* Defaults stay out of the canonical form (old digests hold) but show in the pretty one. */
    assert_null(strstr(rf_policy_canonical_json(plain), "headers"));
    assert_null(strstr(rf_policy_canonical_json(plain), "classLimits"));
    assert_non_null(strstr(rf_policy_pretty_json(plain), "\"headers\":\t[\"retry-after\"]"));
    assert_int_equal(rf_policy_route(plain, 0, &r), RF_OK);
    assert_int_equal(r.n_retry_after_headers, 1);
    assert_int_equal(r.n_class_limits, 0);
    /* The canonical form loads back to the same digest. */
    rf_policy *again = lock_load(rf_policy_canonical_json(p));
    assert_string_equal(rf_policy_digest(again), rf_policy_digest(p));
    rf_policy_free(again);
    rf_policy_free(p);
    rf_policy_free(plain);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_present_valid_wins),
        cmocka_unit_test(test_pushback),
        cmocka_unit_test(test_hints_the_route_does_not_read),
        cmocka_unit_test(test_class_limits),
        cmocka_unit_test(test_lock_validation),
        cmocka_unit_test(test_class_limit_range_is_the_rows),
        cmocka_unit_test(test_views_and_canonical),
    };
    return cmocka_run_group_tests_name("wait_decide", tests, NULL, NULL);
}
