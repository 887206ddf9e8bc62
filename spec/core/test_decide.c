/*
 * rf_decide (and rf_decide_on_route), rf_budget, rf_classify, backoff and the retry budget: the original desk's checks
 * and decision table, the pinned classifier's cases, the order of the checks, saturation and determinism.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_locks.h"

#include "retryfreeze/decide.h"
#include <limits.h>
#include <stdio.h>
#include <string.h>

#define DESK_LOCK                                                                                             \
    "{\"$comment\": \"retry-budget.lock.json — bump only with pairing sign-off\", \"endpoint\": \"POST "    \
    "/v1/jobs\", \"perAttemptTimeoutMs\": 2000, \"maxAttempts\": 2, \"totalBudgetMs\": 2500, \"retryable\": " \
    "[\"GATEWAY_TIMEOUT\", \"HTTP_429\", \"CONNECT_RESET\"], \"notRetryable\": [\"HTTP_400\", \"HTTP_401\", " \
    "\"HTTP_403\", \"HTTP_404\", \"HTTP_422\", \"HANDLER_5XX\"]}"

/* The pinned classifier's lock: 3 attempts, 503/502/504/429 and timeouts retryable, no jitter. */
#define PINNED_LOCK                                                                                                   \
    "{\"endpoint\":\"POST /v1/orders\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":10000,"       \
    "\"retryable\":[\"HTTP_429\",\"HTTP_502\",\"HTTP_503\",\"HTTP_504\",\"TIMEOUT\"],\"notRetryable\":[\"HTTP_4XX\"," \
    "\"HTTP_500\"],\"backoff\":{\"baseMs\":100,\"multiplier\":2,\"maxMs\":1000,\"jitter\":\"none\"}}"

typedef struct fact_spec {
    const char *method, *path;
    int status;
    rf_transport transport;
    const char *retry_after, *date;
    int attempts;
    int64_t elapsed_ms;
    bool key;
    const char *source;
    int64_t now_ms;
} fact_spec;

static rf_verdict decide_with(const rf_policy *p, fact_spec s, rf_rng *rng, rf_retry_budget *budget) {
    rf_facts f = {.method = s.method ? s.method : "POST",
                  .path = s.path ? s.path : "/v1/jobs",
                  .status = s.status,
                  .transport = s.transport,
                  .retry_after = s.retry_after,
                  .date = s.date,
                  .attempts = s.attempts ? s.attempts : 1,
                  .elapsed_ms = s.elapsed_ms,
                  .has_idempotency_key = s.key,
                  .source = s.source,
                  .now_ms = s.now_ms};
    f.method_len = strlen(f.method);
    f.path_len = strlen(f.path);
    f.retry_after_len = s.retry_after ? strlen(s.retry_after) : 0;
    f.date_len = s.date ? strlen(s.date) : 0;
    f.source_len = s.source ? strlen(s.source) : 0;
    rf_verdict v;
    rf_error err;
    if (rf_decide(p, &f, rng, budget, &v, &err) != RF_OK) fail_msg("decide failed: %s %s", err.path, err.message);
    return v;
}

static rf_verdict decide(const rf_policy *p, fact_spec s) {
    rf_rng rng;
    rf_rng_seed(&rng, 42);
    return decide_with(p, s, &rng, NULL);
}

#define assert_verdict(v, want_retry, want_reason, want_class)          \
    do {                                                                \
        assert_int_equal((v).retry, (want_retry));                      \
        assert_string_equal(rf_reason_name((v).reason), (want_reason)); \
        assert_string_equal((v).class_name, (want_class));              \
    } while (0)

/* The original desk's freeze checks. */
static void test_desk_checks(void **state) {
    (void)state;
    rf_policy *p = lock_load(DESK_LOCK);
    /* Client abort at 2 s (timeout), keyed POST: one retry fits in the remaining 500 ms. */
    rf_verdict v = decide(p, (fact_spec){.transport = RF_TRANSPORT_TIMEOUT, .elapsed_ms = 2000, .key = true});
    assert_verdict(v, true, "pinned-status", "TIMEOUT");
    assert_true(v.delay_ms >= 0 && v.delay_ms <= 100); /* first retry: full jitter over baseMs 100 */
    assert_int_equal(v.timeout_ms, 500 - v.delay_ms);
    /* Gateway 504 then one retry; the second 504 stops on max-attempts. */
    v = decide(p, (fact_spec){.status = 504, .elapsed_ms = 300, .key = true});
    assert_verdict(v, true, "pinned-status", "HTTP_504");
    assert_int_equal(v.timeout_ms, 2000);
    v = decide(p, (fact_spec){.status = 504, .attempts = 2, .elapsed_ms = 700, .key = true});
    assert_verdict(v, false, "max-attempts", "HTTP_504");
    /* Handler 500 never; 400 never. */
    v = decide(p, (fact_spec){.status = 500, .key = true});
    assert_verdict(v, false, "status-not-retryable", "HTTP_500");
    v = decide(p, (fact_spec){.status = 400, .key = true});
    assert_verdict(v, false, "status-not-retryable", "HTTP_400");
    /* A family in one list loses to a specific status in the other: 504 retries although HANDLER_5XX stops. */
    v = decide(p, (fact_spec){.status = 503, .key = true});
    assert_verdict(v, false, "status-not-retryable", "HTTP_503");
    /* 429 with Retry-After honored. */
    v = decide(p, (fact_spec){.status = 429, .retry_after = "1", .elapsed_ms = 100, .key = true});
    assert_verdict(v, true, "pinned-status", "HTTP_429");
    assert_int_equal(v.delay_ms, 1000);
    assert_int_equal(v.timeout_ms, 1400);
    assert_int_equal(v.retry_after, RF_RA_USE_HONORED);
    /* The default idempotencyRequired applies to the desk's lock: a POST without a key stops. */
    v = decide(p, (fact_spec){.status = 504});
    assert_verdict(v, false, "mutating-without-idempotency", "HTTP_504");
    rf_policy_free(p);
}

static void test_desk_budget(void **state) {
    (void)state;
    rf_policy *p = lock_load(DESK_LOCK);
    rf_attempt_budget b;
    rf_error err;
    assert_int_equal(rf_budget(p, "POST", 4, "/v1/jobs", 8, 0, 0, &b, &err), RF_OK);
    assert_true(b.allowed);
    assert_int_equal(b.timeout_ms, 2000);
    assert_string_equal(rf_reason_name(b.reason), "within-budget");
    assert_int_equal(rf_budget(p, "POST", 4, "/v1/jobs", 8, 1, 2000, &b, &err), RF_OK);
    assert_true(b.allowed);
    assert_int_equal(b.timeout_ms, 500);
    assert_int_equal(rf_budget(p, "POST", 4, "/v1/jobs", 8, 2, 2100, &b, &err), RF_OK);
    assert_false(b.allowed);
    assert_string_equal(rf_reason_name(b.reason), "max-attempts");
    assert_int_equal(b.timeout_ms, 0);
    assert_int_equal(rf_budget(p, "POST", 4, "/v1/jobs", 8, 1, 2400, &b, &err), RF_OK);
    assert_false(b.allowed);
    assert_string_equal(rf_reason_name(b.reason), "deadline");
    assert_int_equal(rf_budget(p, "GET", 3, "/v1/jobs", 8, 0, 0, &b, &err), RF_OK);
    assert_string_equal(rf_reason_name(b.reason), "no-route");
    assert_int_equal(rf_budget(p, "POST", 4, "/v1/jobs", 8, -1, 0, &b, &err), RF_EINVAL);
    assert_string_equal(err.path, "attempts");
    rf_policy_free(p);
}

/* rf_budget_on_route answers as rf_budget does for the route rf_policy_match gives, and checks the route instead of
 * the method and path. */
static void test_budget_on_route(void **state) {
    (void)state;
    rf_policy *p = lock_load(DESK_LOCK);
    const long route = rf_policy_match(p, "POST", 4, "/v1/jobs", 8);
    assert_true(route >= 0);
    const struct {
        int attempts;
        int64_t elapsed_ms;
    } cases[] = {{0, 0}, {1, 2000}, {2, 2100}, {1, 2400}, {0, 9999}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rf_attempt_budget want, got;
        rf_error err;
        assert_int_equal(rf_budget(p, "POST", 4, "/v1/jobs", 8, cases[i].attempts, cases[i].elapsed_ms, &want, &err),
                         RF_OK);
        assert_int_equal(rf_budget_on_route(p, route, cases[i].attempts, cases[i].elapsed_ms, &got, &err), RF_OK);
        assert_int_equal(got.allowed, want.allowed);
        assert_int_equal(got.timeout_ms, want.timeout_ms);
        assert_string_equal(rf_reason_name(got.reason), rf_reason_name(want.reason));
        assert_int_equal(got.route, route);
    }
    rf_attempt_budget b;
    rf_error err;
    assert_int_equal(rf_budget_on_route(p, -1, 0, 0, &b, &err), RF_OK);
    assert_false(b.allowed);
    assert_string_equal(rf_reason_name(b.reason), "no-route");
    assert_int_equal(b.route, -1);
    assert_int_equal(rf_budget_on_route(p, (long)rf_policy_route_count(p), 0, 0, &b, &err), RF_EINVAL);
    assert_string_equal(err.path, "route");
    assert_int_equal(rf_budget_on_route(p, -2, 0, 0, &b, &err), RF_EINVAL);
    assert_int_equal(rf_budget_on_route(p, route, -1, 0, &b, &err), RF_EINVAL);
    assert_string_equal(err.path, "attempts");
    assert_int_equal(rf_budget_on_route(p, route, 0, -1, &b, &err), RF_EINVAL);
    assert_string_equal(err.path, "elapsed_ms");
    assert_int_equal(rf_budget_on_route(NULL, route, 0, 0, &b, &err), RF_EINVAL);
    rf_policy_free(p);
}

/* The pinned classifier's cases. */
static void test_pinned_classifier(void **state) {
    (void)state;
    rf_policy *p = lock_load(PINNED_LOCK);
    const char *path = "/v1/orders";
    rf_verdict v = decide(p, (fact_spec){.path = path, .status = 503, .key = true});
    assert_verdict(v, true, "pinned-status", "HTTP_503");
    assert_int_equal(v.delay_ms, 100);
    v = decide(p, (fact_spec){.path = path, .status = 503});
    assert_verdict(v, false, "mutating-without-idempotency", "HTTP_503");
    v = decide(p, (fact_spec){.path = path, .status = 404, .key = true});
    assert_verdict(v, false, "status-not-retryable", "HTTP_404");
    v = decide(p, (fact_spec){.path = path, .status = 409, .key = true});
    assert_verdict(v, false, "status-not-retryable", "HTTP_409");
    v = decide(p, (fact_spec){.path = path, .status = 500});
    assert_verdict(v, false, "status-not-retryable", "HTTP_500");
    v = decide(p, (fact_spec){.path = path, .status = 503, .key = true, .source = "llm-guess"});
    assert_verdict(v, false, "unpinned-source", "HTTP_503");
    v = decide(p, (fact_spec){.path = path, .status = 503, .key = true, .source = "pinned-map"});
    assert_verdict(v, true, "pinned-status", "HTTP_503");
    v = decide(p, (fact_spec){.path = path, .status = 429, .retry_after = "3", .key = true});
    assert_verdict(v, true, "pinned-status", "HTTP_429");
    assert_int_equal(v.delay_ms, 3000);
    v = decide(p, (fact_spec){.path = path, .status = 429, .retry_after = "9999", .key = true});
    assert_verdict(v, false, "retry-after-exceeds-budget", "HTTP_429");
    v = decide(p, (fact_spec){.path = path, .transport = RF_TRANSPORT_TIMEOUT, .key = true});
    assert_verdict(v, true, "pinned-status", "TIMEOUT");
    v = decide(p, (fact_spec){.path = path, .status = 201});
    assert_verdict(v, false, "success", "HTTP_201");
    v = decide(p, (fact_spec){.path = "/v1/other", .status = 503, .key = true});
    assert_verdict(v, false, "no-route", "HTTP_503");
    assert_int_equal(v.route, -1);
    rf_policy_free(p);
}

/* The source rule: a policy is pinned when the facts carry no source (a NULL pointer) or exactly the 10 bytes
 * "pinned-map"; every other source is unpinned-source, the empty one included (a non-NULL pointer with length 0
 * is a source that names nothing, not an absent one). The cases: the empty source, every proper prefix, every
 * one-byte extension (NUL, space, each letter's neighbours), every one-byte change and every single-letter case
 * change of "pinned-map": each differs from it in length or in one byte, which is where a looser comparison
 * (a prefix, a case-folding or a NUL-terminated compare) would let it through. */
static void test_source_fail_closed(void **state) {
    (void)state;
    rf_policy *p = lock_load(PINNED_LOCK);
    static const char pinned[] = "pinned-map";
    const size_t n = sizeof pinned - 1;
    rf_facts f = {.method = "POST",
                  .method_len = 4,
                  .path = "/v1/orders",
                  .path_len = 10,
                  .status = 503,
                  .attempts = 1,
                  .has_idempotency_key = true};
    rf_verdict v;
    rf_error err;
    rf_rng rng;
    rf_rng_seed(&rng, 1);
    /* absent: retried */
    assert_int_equal(rf_decide(p, &f, &rng, NULL, &v, &err), RF_OK);
    assert_string_equal(rf_reason_name(v.reason), "pinned-status");
    /* exactly "pinned-map": retried */
    f.source = pinned;
    f.source_len = n;
    assert_int_equal(rf_decide(p, &f, &rng, NULL, &v, &err), RF_OK);
    assert_string_equal(rf_reason_name(v.reason), "pinned-status");
    char buf[32];
    size_t cases = 0;
#define EXPECT_UNPINNED(ptr, len)                                                                \
    do {                                                                                         \
        f.source = (ptr);                                                                        \
        f.source_len = (len);                                                                    \
        assert_int_equal(rf_decide(p, &f, &rng, NULL, &v, &err), RF_OK);                         \
        if (v.reason != RF_REASON_UNPINNED_SOURCE)                                               \
            fail_msg("source \"%.*s\" (%zu bytes) decided %s", (int)(len), (ptr), (size_t)(len), \
                     rf_reason_name(v.reason));                                                  \
        assert_false(v.retry);                                                                   \
        cases++;                                                                                 \
    } while (0)
    EXPECT_UNPINNED("", 0);
    EXPECT_UNPINNED(pinned, 0); /* the right bytes behind it, but the source is empty */
    for (size_t len = 1; len < n; len++) EXPECT_UNPINNED(pinned, len);
    static const char extra[] = {'\0', ' ', '\t', 'p', '-', 'x'};
    for (size_t i = 0; i < sizeof extra; i++) {
        memcpy(buf, pinned, n);
        buf[n] = extra[i];
        EXPECT_UNPINNED(buf, n + 1);
    }
    for (size_t at = 0; at < n; at++) {
        memcpy(buf, pinned, n);
        buf[at] = (char)(buf[at] + 1);
        EXPECT_UNPINNED(buf, n);
        memcpy(buf, pinned, n);
        if (buf[at] >= 'a' && buf[at] <= 'z') {
            buf[at] = (char)(buf[at] - 'a' + 'A');
            EXPECT_UNPINNED(buf, n);
        }
    }
#undef EXPECT_UNPINNED
    assert_int_equal(cases, 2 + (n - 1) + sizeof extra + n + 9); /* 9 letters in "pinned-map" */
    rf_policy_free(p);
}

/* Each check wins over every later one. */
static void test_check_order(void **state) {
    (void)state;
    rf_policy *p = lock_load(PINNED_LOCK);
    const char *path = "/v1/orders";
    /* unpinned-source before no-route */
    rf_verdict v = decide(p, (fact_spec){.path = "/nowhere", .status = 503, .source = "x"});
    assert_string_equal(rf_reason_name(v.reason), "unpinned-source");
    /* success before max-attempts */
    v = decide(p, (fact_spec){.path = path, .status = 200, .attempts = 9});
    assert_string_equal(rf_reason_name(v.reason), "success");
    /* max-attempts before status-not-retryable */
    v = decide(p, (fact_spec){.path = path, .status = 404, .attempts = 3});
    assert_string_equal(rf_reason_name(v.reason), "max-attempts");
    /* status-not-retryable before mutating-without-idempotency */
    v = decide(p, (fact_spec){.path = path, .status = 404});
    assert_string_equal(rf_reason_name(v.reason), "status-not-retryable");
    /* mutating-without-idempotency before retry-after-exceeds-budget */
    v = decide(p, (fact_spec){.path = path, .status = 429, .retry_after = "9999"});
    assert_string_equal(rf_reason_name(v.reason), "mutating-without-idempotency");
    /* retry-after-exceeds-budget: longer than the time left (10000 - 9000 = 1000 < 2000) */
    v = decide(p, (fact_spec){.path = path, .status = 429, .retry_after = "2", .elapsed_ms = 9000, .key = true});
    assert_string_equal(rf_reason_name(v.reason), "retry-after-exceeds-budget");
    /* deadline: backoff 100 + minAttemptMs 200 does not fit in 250 ms */
    v = decide(p, (fact_spec){.path = path, .status = 503, .elapsed_ms = 9750, .key = true});
    assert_string_equal(rf_reason_name(v.reason), "deadline");
    /* exactly fits: 100 + 200 = 300 left */
    v = decide(p, (fact_spec){.path = path, .status = 503, .elapsed_ms = 9700, .key = true});
    assert_verdict(v, true, "pinned-status", "HTTP_503");
    assert_int_equal(v.timeout_ms, 200);
    rf_policy_free(p);
}

static void test_retry_after_forms(void **state) {
    (void)state;
    rf_policy *p = lock_load(PINNED_LOCK);
    const char *path = "/v1/orders";
    /* HTTP-date minus the Date header: 2 s, whatever now_ms says (skew-immune). */
    rf_verdict v = decide(p, (fact_spec){.path = path,
                                         .status = 503,
                                         .key = true,
                                         .retry_after = "Sun, 06 Nov 1994 08:49:39 GMT",
                                         .date = "Sun, 06 Nov 1994 08:49:37 GMT",
                                         .now_ms = 1});
    assert_verdict(v, true, "pinned-status", "HTTP_503");
    assert_int_equal(v.delay_ms, 2000);
    /* HTTP-date minus now when there is no Date. */
    v = decide(p, (fact_spec){.path = path,
                              .status = 503,
                              .key = true,
                              .retry_after = "Sun, 06 Nov 1994 08:49:40 GMT",
                              .now_ms = 784111777000});
    assert_int_equal(v.delay_ms, 3000);
    /* A date in the past means 0. */
    v = decide(p, (fact_spec){.path = path,
                              .status = 503,
                              .key = true,
                              .retry_after = "Sun, 06 Nov 1994 08:49:40 GMT",
                              .now_ms = 784111999000});
    assert_true(v.retry);
    assert_int_equal(v.delay_ms, 0);
    /* Invalid values are ignored (treated as absent: backoff) and the verdict says so. */
    static const char *invalid[] = {"-1", "1.5", "3 4", "soon", "+3", "Sun, 06 Nov 1994 25:00:00 GMT"};
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        v = decide(p, (fact_spec){.path = path, .status = 503, .key = true, .retry_after = invalid[i], .now_ms = 1});
        assert_true(v.retry);
        assert_int_equal(v.delay_ms, 100);
        assert_int_equal(v.retry_after, RF_RA_USE_IGNORED);
    }
    /* A value too large for the integer type is too long, never a wrap. */
    v = decide(p, (fact_spec){.path = path, .status = 503, .key = true, .retry_after = "99999999999999999999999"});
    assert_string_equal(rf_reason_name(v.reason), "retry-after-exceeds-budget");
    /* retryAfter.honor = false: the header is not used, backoff is. */
    rf_policy *q =
        lock_load("{\"endpoint\":\"GET /a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,"
                  "\"retryable\":[\"HTTP_503\"],\"retryAfter\":{\"honor\":false},\"backoff\":{\"jitter\":\"none\"}}");
    v = decide(q, (fact_spec){.method = "GET", .path = "/a", .status = 503, .retry_after = "9999"});
    assert_true(v.retry);
    assert_int_equal(v.delay_ms, 100);
    assert_int_equal(v.retry_after, RF_RA_USE_NOT_HONORED);
    rf_policy_free(q);
    /* retryAfter.maxMs caps what is honored. */
    q = lock_load("{\"endpoint\":\"GET /a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":60000,"
                  "\"retryable\":[\"HTTP_503\"],\"retryAfter\":{\"maxMs\":2000}}");
    v = decide(q, (fact_spec){.method = "GET", .path = "/a", .status = 503, .retry_after = "2"});
    assert_true(v.retry);
    v = decide(q, (fact_spec){.method = "GET", .path = "/a", .status = 503, .retry_after = "3"});
    assert_string_equal(rf_reason_name(v.reason), "retry-after-exceeds-budget");
    rf_policy_free(q);
    rf_policy_free(p);
}

static void test_classify(void **state) {
    (void)state;
    char buf[RF_CLASS_NAME_MAX];
    struct {
        int status;
        rf_transport t;
        const char *want;
    } cases[] = {{503, RF_TRANSPORT_OK, "HTTP_503"},
                 {0, RF_TRANSPORT_TIMEOUT, "TIMEOUT"},
                 {200, RF_TRANSPORT_TIMEOUT, "TIMEOUT"},
                 {0, RF_TRANSPORT_CONNECT_RESET, "CONNECT_RESET"},
                 {0, RF_TRANSPORT_GOT_NOTHING, "CONNECT_RESET"},
                 {0, RF_TRANSPORT_CONNECT_REFUSED, "CONNECT_REFUSED"},
                 {0, RF_TRANSPORT_DNS, "DNS_FAILURE"},
                 {0, RF_TRANSPORT_TLS, "TLS_FAILURE"},
                 {0, RF_TRANSPORT_OTHER, "UNKNOWN"},
                 {0, RF_TRANSPORT_PROXY_REFUSED, "PROXY_REFUSED"},
                 {302, RF_TRANSPORT_TOO_MANY_REDIRECTS, "TOO_MANY_REDIRECTS"},
                 {0, RF_TRANSPORT_OK, "UNKNOWN"},
                 {100, RF_TRANSPORT_OK, "HTTP_100"},
                 {599, RF_TRANSPORT_OK, "HTTP_599"},
                 {600, RF_TRANSPORT_OK, "UNKNOWN"},
                 {99, RF_TRANSPORT_OK, "UNKNOWN"},
                 {503, (rf_transport)RF_TRANSPORT_COUNT, "UNKNOWN"}}; /* out of range: no table read past its end */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rf_classify(cases[i].status, cases[i].t, buf);
        assert_string_equal(buf, cases[i].want);
    }
}

/* rf_classify_grpc and rf_decide's grpc_status: 1..16 is GRPC_<name> whatever the HTTP status, 0 leaves the class
 * to the status (a 200 is a success), a transport outcome wins, anything else is refused naming grpc_status. */
static void test_grpc_status_classes(void **state) {
    (void)state;
    char buf[RF_CLASS_NAME_MAX];
    rf_error err = {0};
    assert_int_equal(rf_classify_grpc(200, RF_TRANSPORT_OK, 14, buf, &err), RF_OK);
    assert_string_equal(buf, "GRPC_UNAVAILABLE");
    assert_int_equal(rf_classify_grpc(503, RF_TRANSPORT_OK, 9, buf, &err), RF_OK);
    assert_string_equal(buf, "GRPC_FAILED_PRECONDITION"); /* the longest token: RF_CLASS_NAME_MAX holds it */
    assert_int_equal(rf_classify_grpc(200, RF_TRANSPORT_OK, 1, buf, &err), RF_OK);
    assert_string_equal(buf, "GRPC_CANCELLED");
    assert_int_equal(rf_classify_grpc(200, RF_TRANSPORT_OK, 16, buf, &err), RF_OK);
    assert_string_equal(buf, "GRPC_UNAUTHENTICATED");
    assert_int_equal(rf_classify_grpc(200, RF_TRANSPORT_OK, 0, buf, &err), RF_OK);
    assert_string_equal(buf, "HTTP_200");
    assert_int_equal(rf_classify_grpc(0, RF_TRANSPORT_TIMEOUT, 14, buf, &err), RF_OK);
    assert_string_equal(buf, "TIMEOUT");
    assert_int_equal(rf_classify_grpc(200, RF_TRANSPORT_OK, 17, buf, &err), RF_EINVAL);
    assert_string_equal(err.path, "grpc_status");
    assert_string_equal(buf, "");
    assert_int_equal(rf_classify_grpc(200, RF_TRANSPORT_OK, -1, buf, &err), RF_EINVAL);
    rf_policy *p =
        lock_load("{\"endpoint\": \"POST /pkg.Svc/*\", \"maxAttempts\": 3, \"perAttemptTimeoutMs\": 100, "
                  "\"totalBudgetMs\": 1000, \"idempotencyRequired\": [], \"retryable\": [\"GRPC_UNAVAILABLE\"], "
                  "\"backoff\": {\"baseMs\": 10, \"maxMs\": 10, \"multiplier\": 1, \"jitter\": \"none\"}}");
    rf_facts f = {.method = "POST",
                  .method_len = 4,
                  .path = "/pkg.Svc/Get",
                  .path_len = 12,
                  .status = 200,
                  .attempts = 1,
                  .grpc_status = 14};
    rf_verdict v;
    assert_int_equal(rf_decide(p, &f, NULL, NULL, &v, &err), RF_OK);
    assert_verdict(v, true, "pinned-status", "GRPC_UNAVAILABLE");
    assert_int_equal(v.delay_ms, 10);
    f.grpc_status = 13;
    assert_int_equal(rf_decide(p, &f, NULL, NULL, &v, &err), RF_OK);
    assert_verdict(v, false, "status-not-retryable", "GRPC_INTERNAL");
    f.grpc_status = 0;
    assert_int_equal(rf_decide(p, &f, NULL, NULL, &v, &err), RF_OK);
    assert_verdict(v, false, "success", "HTTP_200");
    f.grpc_status = 17;
    assert_int_equal(rf_decide(p, &f, NULL, NULL, &v, &err), RF_EINVAL);
    assert_string_equal(err.path, "grpc_status");
    f.grpc_status = -3;
    assert_int_equal(rf_decide_on_route(p, 0, &f, NULL, NULL, &v, &err), RF_EINVAL);
    assert_string_equal(err.path, "grpc_status");
    rf_policy_free(p);
}

static void test_backoff_saturates_and_jitter_is_seeded(void **state) {
    (void)state;
    static const char *jitters[] = {"none", "full", "equal", "decorrelated"};
    for (size_t j = 0; j < 4; j++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"endpoint\":\"GET /a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,"
                 "\"retryable\":[],\"backoff\":{\"baseMs\":100,\"multiplier\":3,\"maxMs\":5000,\"jitter\":\"%s\"}}",
                 jitters[j]);
        rf_policy *p = lock_load(text);
        rf_rng rng;
        rf_rng_seed(&rng, 7);
        int attempts[] = {1, 2, 35, 1025, INT_MAX};
        for (size_t i = 0; i < 5; i++) {
            for (int k = 0; k < 200; k++) {
                int64_t d = rf_backoff_ms(p, 0, attempts[i], &rng);
                if (d < 0 || d > 5000)
                    fail_msg("jitter %s attempts %d gave %lld", jitters[j], attempts[i], (long long)d);
            }
        }
        if (j == 0) {
            assert_int_equal(rf_backoff_ms(p, 0, 1, NULL), 100);
            assert_int_equal(rf_backoff_ms(p, 0, 2, NULL), 300);
            assert_int_equal(rf_backoff_ms(p, 0, 4, NULL), 2700);
            assert_int_equal(rf_backoff_ms(p, 0, 5, NULL), 5000);
            assert_int_equal(rf_backoff_ms(p, 0, INT_MAX, NULL), 5000);
        } else {
            assert_int_equal(rf_backoff_ms(p, 0, 1, NULL), -1); /* jitter needs an rng */
            rf_rng a, b;
            rf_rng_seed(&a, 99);
            rf_rng_seed(&b, 99);
            for (int k = 0; k < 50; k++) assert_int_equal(rf_backoff_ms(p, 0, 3, &a), rf_backoff_ms(p, 0, 3, &b));
            /* equal jitter keeps at least half the cap */
            if (j == 2) {
                for (int k = 0; k < 100; k++) assert_true(rf_backoff_ms(p, 0, 2, &a) >= 150);
            }
        }
        rf_policy_free(p);
    }
    /* Full jitter spreads over the whole range (not a constant). */
    rf_policy *p =
        lock_load("{\"endpoint\":\"GET /a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,"
                  "\"retryable\":[],\"backoff\":{\"baseMs\":1000,\"maxMs\":1000}}");
    rf_rng rng;
    rf_rng_seed(&rng, 1);
    int64_t lo = 1000, hi = 0;
    for (int k = 0; k < 1000; k++) {
        int64_t d = rf_backoff_ms(p, 0, 1, &rng);
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    assert_true(lo < 50);
    assert_true(hi > 950);
    rf_policy_free(p);
}

static void test_retry_budget_tokens(void **state) {
    (void)state;
    rf_policy *p =
        lock_load("{\"endpoint\":\"GET /a\",\"maxAttempts\":5,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":60000,"
                  "\"retryable\":[\"HTTP_503\"],\"backoff\":{\"jitter\":\"none\"},"
                  "\"retryBudget\":{\"maxTokens\":4,\"tokenRatio\":0.5}}");
    rf_retry_budget *b = rf_retry_budget_new(p);
    assert_non_null(b);
    assert_int_equal(rf_retry_budget_tokens_milli(b), 4000);
    fact_spec fail503 = {.method = "GET", .path = "/a", .status = 503};
    /* 4 → 3: still above half (2): retry */
    rf_verdict v = decide_with(p, fail503, NULL, b);
    assert_true(v.retry);
    assert_int_equal(rf_retry_budget_tokens_milli(b), 3000);
    /* 3 → 2: at half: throttled */
    v = decide_with(p, fail503, NULL, b);
    assert_string_equal(rf_reason_name(v.reason), "retry-throttled");
    assert_int_equal(rf_retry_budget_tokens_milli(b), 2000);
    /* A non-retryable failure leaves the count. */
    v = decide_with(p, (fact_spec){.method = "GET", .path = "/a", .status = 404}, NULL, b);
    assert_int_equal(rf_retry_budget_tokens_milli(b), 2000);
    /* Successes add tokenRatio, capped at maxTokens. */
    for (int i = 0; i < 3; i++) decide_with(p, (fact_spec){.method = "GET", .path = "/a", .status = 200}, NULL, b);
    assert_int_equal(rf_retry_budget_tokens_milli(b), 3500);
    for (int i = 0; i < 10; i++) decide_with(p, (fact_spec){.method = "GET", .path = "/a", .status = 200}, NULL, b);
    assert_int_equal(rf_retry_budget_tokens_milli(b), 4000);
    /* Failures never take it below 0. */
    for (int i = 0; i < 10; i++) decide_with(p, fail503, NULL, b);
    assert_int_equal(rf_retry_budget_tokens_milli(b), 0);
    /* Without a budget object, never throttled. */
    v = decide_with(p, fail503, NULL, NULL);
    assert_true(v.retry);
    rf_retry_budget_free(b);
    /* A lock without retryBudget gives an inert budget. */
    rf_policy *q = lock_load(PINNED_LOCK);
    b = rf_retry_budget_new(q);
    assert_int_equal(rf_retry_budget_tokens_milli(b), -1);
    for (int i = 0; i < 10; i++) {
        v = decide_with(q, (fact_spec){.path = "/v1/orders", .status = 503, .key = true}, NULL, b);
        assert_true(v.retry);
    }
    rf_retry_budget_free(b);
    rf_policy_free(q);
    rf_policy_free(p);
}

/* A refused call has no effect: rng NULL on a jittered route is RF_EINVAL, and the retry budget is not charged
 * for an attempt the caller will decide again (it was charged before the rng check). */
static void test_refusal_leaves_budget(void **state) {
    (void)state;
    rf_policy *p =
        lock_load("{\"endpoint\":\"GET /a\",\"maxAttempts\":5,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":60000,"
                  "\"retryable\":[\"HTTP_503\"],\"backoff\":{\"jitter\":\"full\"},"
                  "\"retryBudget\":{\"maxTokens\":4,\"tokenRatio\":0.5}}");
    rf_retry_budget *b = rf_retry_budget_new(p);
    assert_non_null(b);
    rf_facts f = {.method = "GET", .method_len = 3, .path = "/a", .path_len = 2, .status = 503, .attempts = 1};
    rf_verdict v;
    rf_error err;
    assert_int_equal(rf_decide(p, &f, NULL, b, &v, &err), RF_EINVAL);
    assert_string_equal(err.path, "rng");
    assert_int_equal(rf_retry_budget_tokens_milli(b), 4000);
    /* The same attempt decided again with an rng is charged once. */
    rf_rng rng;
    rf_rng_seed(&rng, 7);
    assert_int_equal(rf_decide(p, &f, &rng, b, &v, &err), RF_OK);
    assert_true(v.retry);
    assert_int_equal(rf_retry_budget_tokens_milli(b), 3000);
    /* A stop needs no rng and is charged: max-attempts on a retryable failure takes its token. */
    f.attempts = 5;
    assert_int_equal(rf_decide(p, &f, NULL, b, &v, &err), RF_OK);
    assert_string_equal(rf_reason_name(v.reason), "max-attempts");
    assert_int_equal(rf_retry_budget_tokens_milli(b), 2000);
    rf_retry_budget_free(b);
    rf_policy_free(p);
}

static void test_invalid_facts_are_refused(void **state) {
    (void)state;
    rf_policy *p = lock_load(PINNED_LOCK);
    rf_facts f = {.method = "POST", .method_len = 4, .path = "/v1/orders", .path_len = 10, .attempts = 0};
    rf_verdict v;
    rf_error err;
    assert_int_equal(rf_decide(p, &f, NULL, NULL, &v, &err), RF_EINVAL);
    assert_string_equal(err.path, "attempts");
    f.attempts = 1;
    f.status = 700;
    assert_int_equal(rf_decide(p, &f, NULL, NULL, &v, &err), RF_EINVAL);
    assert_string_equal(err.path, "status");
    f.status = 503;
    f.elapsed_ms = -5;
    assert_int_equal(rf_decide(p, &f, NULL, NULL, &v, &err), RF_EINVAL);
    assert_string_equal(err.path, "elapsed_ms");
    f.elapsed_ms = 0;
    f.method = NULL;
    assert_int_equal(rf_decide(p, &f, NULL, NULL, &v, &err), RF_EINVAL);
    assert_string_equal(err.path, "method");
    assert_int_equal(rf_decide(NULL, &f, NULL, NULL, &v, &err), RF_EINVAL);
    /* jitter without an rng is an error, not a silent default */
    rf_policy *q = lock_load(DESK_LOCK);
    rf_facts g = {.method = "POST",
                  .method_len = 4,
                  .path = "/v1/jobs",
                  .path_len = 8,
                  .status = 504,
                  .attempts = 1,
                  .has_idempotency_key = true};
    assert_int_equal(rf_decide(q, &g, NULL, NULL, &v, &err), RF_EINVAL);
    assert_string_equal(err.path, "rng");
    rf_policy_free(q);
    rf_policy_free(p);
}

/* rf_backoff_window: the exact windows of the lock schema, every draw inside them (the lock diff's input). */
static void test_backoff_window(void **state) {
    (void)state;
    static const struct {
        const char *jitter;
        int64_t lo[4], hi[4]; /* attempts 1..4: caps 100, 200, 400 (capped from 800 at maxMs 400)... */
    } want[] = {
        {"none", {100, 200, 400, 400}, {100, 200, 400, 400}},
        {"full", {0, 0, 0, 0}, {100, 200, 400, 400}},
        {"equal", {50, 100, 200, 200}, {100, 200, 400, 400}},
        {"decorrelated", {100, 100, 100, 100}, {300, 400, 400, 400}},
    };
    for (size_t j = 0; j < 4; j++) {
        char text[512];
        snprintf(text, sizeof text,
                 "{\"endpoint\":\"GET /a\",\"maxAttempts\":5,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,"
                 "\"retryable\":[],\"backoff\":{\"baseMs\":100,\"multiplier\":2,\"maxMs\":400,\"jitter\":\"%s\"}}",
                 want[j].jitter);
        rf_policy *p = lock_load(text);
        rf_rng rng;
        rf_rng_seed(&rng, 3);
        for (int a = 1; a <= 4; a++) {
            int64_t lo = -1, hi = -1;
            assert_int_equal(rf_backoff_window(p, 0, a, &lo, &hi), RF_OK);
            assert_int_equal(lo, want[j].lo[a - 1]);
            assert_int_equal(hi, want[j].hi[a - 1]);
            for (int k = 0; k < 200; k++) {
                int64_t d = rf_backoff_ms(p, 0, a, &rng);
                if (d < lo || d > hi)
                    fail_msg("%s attempts %d: %lld outside [%lld, %lld]", want[j].jitter, a, (long long)d,
                             (long long)lo, (long long)hi);
            }
        }
        int64_t lo, hi;
        assert_int_equal(rf_backoff_window(p, 1, 1, &lo, &hi), RF_EINVAL);
        assert_int_equal(rf_backoff_window(p, 0, 1, NULL, &hi), RF_EINVAL);
        rf_policy_free(p);
    }
}

/* rf_policy_class_retryable: the class check alone, specific beating family, without attempts or keys. */
static void test_class_retryable(void **state) {
    (void)state;
    rf_policy *p =
        lock_load(DESK_LOCK); /* retryable: GATEWAY_TIMEOUT, 429, CONNECT_RESET; notRetryable: 4xx list, 5XX */
    assert_true(rf_policy_class_retryable(p, 0, 504, RF_TRANSPORT_OK));
    assert_true(rf_policy_class_retryable(p, 0, 429, RF_TRANSPORT_OK));
    assert_true(rf_policy_class_retryable(p, 0, 0, RF_TRANSPORT_TIMEOUT));
    assert_true(rf_policy_class_retryable(p, 0, 0, RF_TRANSPORT_GOT_NOTHING));
    assert_false(rf_policy_class_retryable(p, 0, 500, RF_TRANSPORT_OK));
    assert_false(rf_policy_class_retryable(p, 0, 503, RF_TRANSPORT_OK));
    assert_false(rf_policy_class_retryable(p, 0, 404, RF_TRANSPORT_OK));
    assert_false(rf_policy_class_retryable(p, 0, 200, RF_TRANSPORT_OK)); /* a success is no failure class */
    assert_false(rf_policy_class_retryable(p, 0, 0, RF_TRANSPORT_DNS));
    assert_false(rf_policy_class_retryable(p, 1, 504, RF_TRANSPORT_OK)); /* no route 1 */
    assert_false(rf_policy_class_retryable(NULL, 0, 504, RF_TRANSPORT_OK));
    /* The verdict says the same about its own class. */
    rf_verdict v = decide(p, (fact_spec){.status = 404, .attempts = 2, .key = true});
    assert_verdict(v, false, "max-attempts", "HTTP_404");
    assert_false(v.class_retryable);
    v = decide(p, (fact_spec){.status = 504, .attempts = 2, .key = true});
    assert_verdict(v, false, "max-attempts", "HTTP_504");
    assert_true(v.class_retryable);
    rf_policy_free(p);
}

/* rf_sha256: the pairing log's entry hash (FIPS 180-2 test vectors). */
static void test_sha256(void **state) {
    (void)state;
    char out[RF_SHA256_TEXT_LEN + 1];
    assert_int_equal(rf_sha256("abc", 3, out), RF_OK);
    assert_string_equal(out, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_int_equal(rf_sha256(NULL, 0, out), RF_OK);
    assert_string_equal(out, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_int_equal(rf_sha256("a\0b", 3, out), RF_OK); /* every byte counts, NUL included */
    assert_string_not_equal(out, "sha256:ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb");
    assert_int_equal(rf_sha256(NULL, 1, out), RF_EINVAL);
    assert_int_equal(rf_sha256("x", 1, NULL), RF_EINVAL);
}

/* rf_decide_on_route with rf_policy_match's route decides exactly as rf_decide: verdict, jitter and budget effect. */
static void test_decide_on_route_matches_decide(void **state) {
    (void)state;
    const char *locks[] = {DESK_LOCK, PINNED_LOCK};
    const fact_spec cases[] = {
        {.path = "/v1/orders", .status = 503, .key = true},
        {.path = "/v1/orders", .status = 503, .elapsed_ms = 9750, .key = true},
        {.path = "/v1/orders", .status = 429, .retry_after = "2", .elapsed_ms = 9000, .key = true},
        {.path = "/v1/orders", .status = 429, .retry_after = "1", .key = true},
        {.path = "/v1/orders", .status = 404},
        {.path = "/v1/orders", .status = 200, .attempts = 9},
        {.path = "/v1/orders", .transport = RF_TRANSPORT_TIMEOUT, .attempts = 2},
        {.path = "/v1/jobs", .status = 504, .key = true},
        {.path = "/v1/jobs", .transport = RF_TRANSPORT_CONNECT_RESET, .key = true},
        {.path = "/v1/jobs", .status = 500},
        {.path = "/v1/jobs", .status = 503, .source = "x"},
        {.method = "GET", .path = "/v1/jobs", .status = 503},
        {.path = "/nowhere", .status = 503},
    };
    for (size_t l = 0; l < sizeof locks / sizeof *locks; l++) {
        rf_policy *p = lock_load(locks[l]);
        rf_retry_budget *b1 = rf_retry_budget_new(p), *b2 = rf_retry_budget_new(p);
        rf_rng r1, r2;
        rf_rng_seed(&r1, 7);
        rf_rng_seed(&r2, 7);
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            fact_spec c = cases[i];
            rf_verdict want = decide_with(p, c, &r1, b1);
            const char *method = c.method ? c.method : "POST";
            rf_facts f = {.method = method,
                          .method_len = strlen(method),
                          .path = c.path,
                          .path_len = strlen(c.path),
                          .status = c.status,
                          .transport = c.transport,
                          .retry_after = c.retry_after,
                          .retry_after_len = c.retry_after ? strlen(c.retry_after) : 0,
                          .attempts = c.attempts ? c.attempts : 1,
                          .elapsed_ms = c.elapsed_ms,
                          .has_idempotency_key = c.key,
                          .source = c.source,
                          .source_len = c.source ? strlen(c.source) : 0};
            long route = rf_policy_match(p, f.method, f.method_len, f.path, f.path_len);
            rf_verdict got;
            rf_error err;
            assert_int_equal(rf_decide_on_route(p, route, &f, &r2, b2, &got, &err), RF_OK);
            assert_int_equal(got.retry, want.retry);
            assert_string_equal(rf_reason_name(got.reason), rf_reason_name(want.reason));
            assert_string_equal(got.class_name, want.class_name);
            assert_int_equal(got.delay_ms, want.delay_ms);
            assert_int_equal(got.timeout_ms, want.timeout_ms);
            assert_int_equal(got.retry_after, want.retry_after);
            assert_int_equal(got.route, want.route);
            assert_int_equal(got.class_retryable, want.class_retryable);
            assert_int_equal(rf_retry_budget_tokens_milli(b2), rf_retry_budget_tokens_milli(b1));
        }
        assert_int_equal(rf_rng_next(&r1), rf_rng_next(&r2)); /* the same jitter draws were taken */
        rf_retry_budget_free(b1);
        rf_retry_budget_free(b2);
        rf_policy_free(p);
    }
}

/* rf_decide_on_route refuses a route outside -1..count-1, NULLs, and a lowercase method as rf_decide does. */
static void test_decide_on_route_refusals(void **state) {
    (void)state;
    rf_policy *p = lock_load(PINNED_LOCK);
    rf_facts f = {
        .method = "POST", .method_len = 4, .path = "/v1/orders", .path_len = 10, .status = 503, .attempts = 1};
    rf_verdict v;
    rf_error err;
    assert_int_equal(rf_decide_on_route(p, -2, &f, NULL, NULL, &v, &err), RF_EINVAL);
    assert_string_equal(err.path, "route");
    assert_int_equal(rf_decide_on_route(p, 1, &f, NULL, NULL, &v, &err), RF_EINVAL); /* the lock has one route */
    assert_string_equal(err.path, "route");
    assert_int_equal(rf_decide_on_route(NULL, 0, &f, NULL, NULL, &v, &err), RF_EINVAL);
    assert_int_equal(rf_decide_on_route(p, 0, NULL, NULL, NULL, &v, &err), RF_EINVAL);
    assert_int_equal(rf_decide_on_route(p, 0, &f, NULL, NULL, NULL, &err), RF_EINVAL);
    f.attempts = 0;
    assert_int_equal(rf_decide_on_route(p, 0, &f, NULL, NULL, &v, &err), RF_EINVAL);
    assert_string_equal(err.path, "attempts");
    f.attempts = 1;
    f.method = "post";
    assert_int_equal(rf_decide_on_route(p, -1, &f, NULL, NULL, &v, &err), RF_EINVAL);
    assert_string_equal(err.path, "method");
    rf_policy_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_desk_checks),
        cmocka_unit_test(test_desk_budget),
        cmocka_unit_test(test_budget_on_route),
        cmocka_unit_test(test_pinned_classifier),
        cmocka_unit_test(test_source_fail_closed),
        cmocka_unit_test(test_check_order),
        cmocka_unit_test(test_retry_after_forms),
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_backoff_saturates_and_jitter_is_seeded),
        cmocka_unit_test(test_retry_budget_tokens),
        cmocka_unit_test(test_refusal_leaves_budget),
        cmocka_unit_test(test_invalid_facts_are_refused),
        cmocka_unit_test(test_backoff_window),
        cmocka_unit_test(test_class_retryable),
        cmocka_unit_test(test_grpc_status_classes),
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_decide_on_route_matches_decide),
        cmocka_unit_test(test_decide_on_route_refusals),
    };
    return cmocka_run_group_tests_name("decide", tests, NULL, NULL);
}
