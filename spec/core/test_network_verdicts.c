/*
 * The engine's network verdicts: rf_redirect_verdict (a followed 3xx: its Retry-After, the deadline, the
 * redirect limit) and the classes of the client's network failures (PROXY_REFUSED, TOO_MANY_REDIRECTS).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_locks.h"

#include "retryfreeze/decide.h"
#include <string.h>

#define LOCK                                                                                               \
    "{\"endpoint\":\"GET /a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,"      \
    "\"minAttemptMs\":100,\"retryable\":[\"HTTP_503\",\"PROXY_REFUSED\"],\"notRetryable\":[\"HTTP_4XX\"]," \
    "\"retryAfter\":{\"honor\":true,\"maxMs\":3000}}"

static rf_facts hop(int status, const char *retry_after, int64_t elapsed_ms) {
    return (rf_facts){.method = "GET",
                      .method_len = 3,
                      .path = "/a",
                      .path_len = 2,
                      .status = status,
                      .retry_after = retry_after,
                      .retry_after_len = retry_after ? strlen(retry_after) : 0,
                      .attempts = 1,
                      .elapsed_ms = elapsed_ms};
}

/* rf_redirect_verdict for f after `hops` followed redirects of at most max_redirects; fails the test unless RF_OK. */
static rf_verdict redirected(const rf_policy *p, const rf_facts *f, int hops, int max_redirects) {
    rf_verdict v;
    rf_error err;
    assert_int_equal(RF_OK, rf_redirect_verdict(p, f, hops, max_redirects, &v, &err));
    return v;
}

static void test_redirect_follows_and_waits(void **state) {
    (void)state;
    rf_policy *p = lock_load(LOCK);
    rf_verdict v;
    rf_facts f = hop(302, NULL, 0);
    v = redirected(p, &f, 0, 10);
    assert_true(v.retry);
    assert_int_equal(RF_REASON_REDIRECT, v.reason);
    assert_string_equal("HTTP_302", v.class_name);
    assert_int_equal(0, v.delay_ms);
    assert_int_equal(1000, v.timeout_ms);
    f = hop(303, "2", 1000); /* RFC 9110 §10.2.3: the minimum wait before the redirected request */
    v = redirected(p, &f, 3, 10);
    assert_true(v.retry);
    assert_int_equal(2000, v.delay_ms);
    assert_int_equal(RF_RA_USE_HONORED, v.retry_after);
    f = hop(307, "2", 4500); /* 500 ms left: the wait does not fit */
    v = redirected(p, &f, 0, 10);
    assert_false(v.retry);
    assert_int_equal(RF_REASON_RETRY_AFTER_EXCEEDS_BUDGET, v.reason);
    f = hop(308, "4", 0); /* over retryAfter.maxMs */
    v = redirected(p, &f, 0, 10);
    assert_int_equal(RF_REASON_RETRY_AFTER_EXCEEDS_BUDGET, v.reason);
    f = hop(301, NULL, 4950); /* 50 ms left, minAttemptMs 100 */
    v = redirected(p, &f, 0, 10);
    assert_int_equal(RF_REASON_DEADLINE, v.reason);
    rf_policy_free(p);
}

static void test_redirect_limit(void **state) {
    (void)state;
    rf_policy *p = lock_load(LOCK);
    rf_verdict v;
    rf_error err;
    rf_facts f = hop(302, NULL, 0);
    v = redirected(p, &f, 9, 10);
    assert_true(v.retry);
    v = redirected(p, &f, 10, 10);
    assert_false(v.retry);
    assert_int_equal(RF_REASON_STATUS_NOT_RETRYABLE, v.reason);
    assert_string_equal("TOO_MANY_REDIRECTS", v.class_name);
    f = hop(200, NULL, 0);
    assert_int_equal(RF_EINVAL, rf_redirect_verdict(p, &f, 0, 10, &v, &err));
    assert_string_equal("status", err.path);
    rf_policy_free(p);
}

static void test_network_classes(void **state) {
    (void)state;
    rf_policy *p = lock_load(LOCK);
    char buf[RF_CLASS_NAME_MAX];
    rf_classify(0, RF_TRANSPORT_PROXY_REFUSED, buf);
    assert_string_equal("PROXY_REFUSED", buf);
    rf_classify(302, RF_TRANSPORT_TOO_MANY_REDIRECTS, buf);
    assert_string_equal("TOO_MANY_REDIRECTS", buf);
    rf_facts f = hop(0, NULL, 0);
    f.transport = RF_TRANSPORT_PROXY_REFUSED;
    rf_verdict v;
    rf_error err;
    rf_rng rng;
    rf_rng_seed(&rng, 1);
    assert_int_equal(RF_OK, rf_decide(p, &f, &rng, NULL, &v, &err));
    assert_true(v.retry);
    f.transport = RF_TRANSPORT_TOO_MANY_REDIRECTS;
    assert_int_equal(RF_OK, rf_decide(p, &f, &rng, NULL, &v, &err));
    assert_false(v.retry);
    assert_int_equal(RF_REASON_STATUS_NOT_RETRYABLE, v.reason);
    rf_policy_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redirect_follows_and_waits),
        cmocka_unit_test(test_redirect_limit),
        cmocka_unit_test(test_network_classes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
