/*
 * What a gateway can serve (retryfreeze/gateway.h, rf_gateway_refusals): one lock whose routes each ask for one of
 * the things a gateway whose tries never wait cannot give (propagation only without the phases that read it,
 * hedging, a backoff window above 0 ms, an honoured Retry-After), one route asking for all of them, and one asking
 * for none: every reason alone and together, in their order, with and without RF_GATEWAY_NO_PROPAGATION; a backoff
 * that starts only after a later attempt; the bounds of why (cut, always terminated) and of the arguments.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "retryfreeze/gateway.h"
#include <stdio.h>
#include <string.h>

/* Every route waits nothing unless it says so: backoff 0 ms, Retry-After not honoured. */
static const char LOCK[] =
    "{\"version\":1,\"defaults\":{\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,"
    "\"retryable\":[\"HTTP_503\"],\"backoff\":{\"baseMs\":0,\"maxMs\":0,\"jitter\":\"none\"},"
    "\"retryAfter\":{\"honor\":false}},\"routes\":["
    "{\"endpoint\":\"GET /a-plain\"},"
    "{\"endpoint\":\"GET /b-propagation\",\"propagation\":{}},"
    "{\"endpoint\":\"GET /c-hedging\",\"hedging\":{\"maxAttempts\":2,\"hedgingDelayMs\":50}},"
    "{\"endpoint\":\"GET /d-backoff\",\"backoff\":{\"baseMs\":10,\"maxMs\":40,\"multiplier\":2,\"jitter\":\"none\"}},"
    "{\"endpoint\":\"GET /e-retry-after\",\"retryAfter\":{\"honor\":true,\"maxMs\":1000}},"
    "{\"endpoint\":\"GET /f-one-attempt\",\"maxAttempts\":1,\"retryAfter\":{\"honor\":true,\"maxMs\":1000}},"
    "{\"endpoint\":\"GET /g-all\",\"propagation\":{},\"hedging\":{\"maxAttempts\":2,\"hedgingDelayMs\":50},"
    "\"backoff\":{\"baseMs\":10,\"maxMs\":40,\"jitter\":\"none\"},\"retryAfter\":{\"honor\":true,\"maxMs\":1000}}"
    "]}";

static const char PROPAGATION[] =
    "propagation: a caller's headers are read, and the overloaded header told, only by the Lua gateway's full form "
    "(its access and header_filter phases), which this gateway is not (remove propagation, or serve the route from "
    "that form)";
static const char HEDGING[] =
    "hedging: hedged attempts overlap and start after a delay, and a gateway's tries never wait";
static const char BACKOFF_AFTER_1[] = "backoff: the retry after attempt 1 waits up to 10 ms, and a gateway's tries "
                                      "never wait (set backoff.baseMs and backoff.maxMs to 0)";
static const char RETRY_AFTER[] = "retryAfter.honor is true: a retry would wait as long as Retry-After asks, and a "
                                  "gateway's tries never wait (set it to false)";

static rf_policy *load(const char *text) {
    rf_policy *p = NULL;
    rf_error err;
    if (rf_policy_load_buffer(text, strlen(text), &p, &err) != RF_OK) fail_msg("%s: %s", err.path, err.message);
    return p;
}

/* The index of endpoint in p (routes are sorted by endpoint). */
static size_t route_of(const rf_policy *p, const char *endpoint) {
    for (size_t i = 0; i < rf_policy_route_count(p); i++) {
        rf_route_view r;
        assert_int_equal(rf_policy_route(p, i, &r), RF_OK);
        if (strcmp(r.endpoint, endpoint) == 0) return i;
    }
    fail_msg("no route %s", endpoint);
    return 0;
}

/* Asks for endpoint's reasons and checks their count and text. */
static void expect(const rf_policy *p, const char *endpoint, unsigned flags, int n, const char *want) {
    char why[RF_GATEWAY_WHY_MAX];
    memset(why, 'x', sizeof why);
    assert_int_equal(rf_gateway_refusals(p, route_of(p, endpoint), flags, why, sizeof why), n);
    assert_string_equal(why, want);
}

static void test_each_reason(void **state) {
    (void)state;
    rf_policy *p = load(LOCK);
    for (unsigned flags = 0; flags <= RF_GATEWAY_NO_PROPAGATION; flags += RF_GATEWAY_NO_PROPAGATION) {
        expect(p, "GET /a-plain", flags, 0, "");
        expect(p, "GET /c-hedging", flags, 1, HEDGING);
        expect(p, "GET /d-backoff", flags, 1, BACKOFF_AFTER_1);
        expect(p, "GET /e-retry-after", flags, 1, RETRY_AFTER);
        /* one attempt: no retry waits for Retry-After */
        expect(p, "GET /f-one-attempt", flags, 0, "");
    }
    /* propagation only matters to a form without the phases that read it */
    expect(p, "GET /b-propagation", 0, 0, "");
    expect(p, "GET /b-propagation", RF_GATEWAY_NO_PROPAGATION, 1, PROPAGATION);
    rf_policy_free(p);
}

static void test_all_reasons_in_order(void **state) {
    (void)state;
    rf_policy *p = load(LOCK);
    char want[2048];
    snprintf(want, sizeof want, "%s; and %s; and %s", HEDGING, BACKOFF_AFTER_1, RETRY_AFTER);
    expect(p, "GET /g-all", 0, 3, want);
    snprintf(want, sizeof want, "%s; and %s; and %s; and %s", PROPAGATION, HEDGING, BACKOFF_AFTER_1, RETRY_AFTER);
    assert_true(strlen(want) < RF_GATEWAY_WHY_MAX); /* RF_GATEWAY_WHY_MAX holds every reason at once */
    expect(p, "GET /g-all", RF_GATEWAY_NO_PROPAGATION, 4, want);
    rf_policy_free(p);
}

/* A backoff whose window is 0 ms after the first attempt and opens only after the second is named with that one. */
static void test_backoff_after_a_later_attempt(void **state) {
    (void)state;
    rf_policy *p = load("{\"endpoint\":\"GET /x\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":"
                        "5000,\"retryable\":[\"HTTP_503\"],\"retryAfter\":{\"honor\":false},\"backoff\":{\"baseMs\":0,"
                        "\"maxMs\":0,\"jitter\":\"none\"}}");
    expect(p, "GET /x", 0, 0, "");
    rf_policy_free(p);
    /* baseMs 1 doubled and capped at 3: 1 ms after attempt 1 */
    p = load("{\"endpoint\":\"GET /x\",\"maxAttempts\":2,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,"
             "\"retryable\":[\"HTTP_503\"],\"retryAfter\":{\"honor\":false},\"backoff\":{\"baseMs\":1,\"maxMs\":3,"
             "\"jitter\":\"none\"}}");
    expect(p, "GET /x", 0, 1,
           "backoff: the retry after attempt 1 waits up to 1 ms, and a gateway's tries never wait (set "
           "backoff.baseMs and backoff.maxMs to 0)");
    rf_policy_free(p);
}

static void test_bounds(void **state) {
    (void)state;
    rf_policy *p = load(LOCK);
    size_t all = route_of(p, "GET /g-all");
    /* a short why is cut, and terminated */
    char small[16];
    assert_int_equal(rf_gateway_refusals(p, all, 0, small, sizeof small), 3);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_memory_equal(small, HEDGING, sizeof small - 1);
    /* no room: the count alone */
    assert_int_equal(rf_gateway_refusals(p, all, RF_GATEWAY_NO_PROPAGATION, NULL, 0), 4);
    char one[1] = {'x'};
    assert_int_equal(rf_gateway_refusals(p, all, 0, one, 1), 3);
    assert_int_equal(one[0], '\0');
    /* no policy, a route out of range */
    char why[8] = "x";
    assert_int_equal(rf_gateway_refusals(NULL, 0, 0, why, sizeof why), -1);
    assert_string_equal(why, "");
    assert_int_equal(rf_gateway_refusals(p, rf_policy_route_count(p), 0, why, sizeof why), -1);
    rf_policy_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_reason),
        cmocka_unit_test(test_all_reasons_in_order),
        cmocka_unit_test(test_backoff_after_a_later_attempt),
        cmocka_unit_test(test_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
