/*
 * Propagation across layers (retryfreeze/propagation.h, lock field propagation): the lock's object (absent: the
 * canonical form and every decision as before; present: inherited subfield by subfield, names kept lowercase, one
 * name per purpose), the two reasons in the order of RF_REASONS, the caller's headers read so that they can only
 * narrow (adversarial values drawn at random against a plain reading of the rule), the lines an attempt sends and
 * which stops are told to the caller.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_locks.h"

#include "retryfreeze/decide.h"
#include "retryfreeze/propagation.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUTE_FIELDS                                                                                       \
    "\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":60000,\"retryable\":[\"HTTP_503\"]," \
    "\"backoff\":{\"jitter\":\"none\"}"
#define PLAIN_LOCK "{\"endpoint\":\"GET /a\"," ROUTE_FIELDS "}"
#define PROPAGATING_LOCK "{\"endpoint\":\"GET /a\"," ROUTE_FIELDS ",\"propagation\":{}}"

static rf_facts facts(int status, int attempts) {
    return (rf_facts){
        .method = "GET", .method_len = 3, .path = "/a", .path_len = 2, .status = status, .attempts = attempts};
}

static rf_reason reason_of(const rf_policy *p, const rf_facts *f) {
    rf_verdict v;
    rf_error err;
    if (rf_decide(p, f, NULL, NULL, &v, &err) != RF_OK) fail_msg("%s: %s", err.path, err.message);
    return v.reason;
}

/* Absent, nothing changes: the canonical form has no propagation, and the new facts decide nothing. */
static void test_absent_changes_nothing(void **state) {
    (void)state;
    rf_policy *p = lock_load(PLAIN_LOCK);
    assert_null(strstr(rf_policy_canonical_json(p), "propagation"));
    assert_null(strstr(rf_policy_pretty_json(p), "propagation"));
    rf_facts f = facts(503, 1);
    f.overloaded = true;
    f.inbound_attempt = 7;
    assert_int_equal(reason_of(p, &f), RF_REASON_PINNED_STATUS);
    rf_propagation prop;
    assert_int_equal(rf_policy_propagation(p, 0, &prop), RF_OK);
    assert_false(prop.enabled);
    char lines[2][RF_PROPAGATION_LINE_MAX];
    assert_int_equal(rf_propagation_lines(&prop, 1, 100, lines), 0);
    rf_inbound in = {0};
    rf_inbound_line(&prop, "x-envoy-attempt-count: 2", &in);
    assert_int_equal(in.attempt, 0);
    rf_policy_free(p);
}

/* Present: every field written, the defaults Envoy's names; `{}`, the defaults spelt out and other letter cases are
 * one digest; a different name is another digest. */
static void test_present_canonical(void **state) {
    (void)state;
    rf_policy *a = lock_load(PROPAGATING_LOCK);
    rf_policy *b = lock_load(
        "{\"endpoint\":\"GET /a\"," ROUTE_FIELDS ",\"propagation\":{\"attemptHeader\":\"X-Envoy-Attempt-Count\","
        "\"deadlineHeader\":\"x-envoy-expected-rq-timeout-ms\",\"overloadedHeader\":\"X-ENVOY-OVERLOADED\","
        "\"inboundDeadline\":true,\"inboundAttempt\":true}}");
    rf_policy *c =
        lock_load("{\"endpoint\":\"GET /a\"," ROUTE_FIELDS ",\"propagation\":{\"attemptHeader\":\"x-try\"}}");
    rf_policy *plain = lock_load(PLAIN_LOCK);
    assert_string_equal(rf_policy_digest(a), rf_policy_digest(b));
    assert_string_not_equal(rf_policy_digest(a), rf_policy_digest(c));
    assert_string_not_equal(rf_policy_digest(a), rf_policy_digest(plain));
    assert_non_null(strstr(rf_policy_canonical_json(a),
                           "\"propagation\":{\"attemptHeader\":\"x-envoy-attempt-count\",\"deadlineHeader\":"
                           "\"x-envoy-expected-rq-timeout-ms\",\"inboundAttempt\":true,\"inboundDeadline\":true,"
                           "\"overloadedHeader\":\"x-envoy-overloaded\"}"));
    rf_propagation prop;
    assert_int_equal(rf_policy_propagation(c, 0, &prop), RF_OK);
    assert_true(prop.enabled && prop.inbound_deadline && prop.inbound_attempt);
    assert_string_equal(prop.attempt_header, "x-try");
    assert_string_equal(prop.overloaded_header, "x-envoy-overloaded");
    assert_int_equal(rf_policy_propagation(c, -1, &prop), RF_OK);
    assert_false(prop.enabled);
    assert_int_equal(rf_policy_propagation(c, 1, &prop), RF_EINVAL);
    assert_int_equal(rf_policy_propagation(NULL, 0, &prop), RF_EINVAL);
    /* The effective policy is a lock with the same digest. */
    rf_policy *again = lock_load(rf_policy_pretty_json(c));
    assert_string_equal(rf_policy_digest(again), rf_policy_digest(c));
    rf_policy_free(again);
    rf_policy_free(a);
    rf_policy_free(b);
    rf_policy_free(c);
    rf_policy_free(plain);
}

/* A route inherits propagation from defaults subfield by subfield; a route without it in a lock without it in
 * defaults has none. */
static void test_inherited(void **state) {
    (void)state;
    rf_policy *p = lock_load("{\"version\":1,\"defaults\":{" ROUTE_FIELDS
                             ",\"propagation\":{\"attemptHeader\":\"x-try\",\"inboundAttempt\":false}},"
                             "\"routes\":[{\"endpoint\":\"GET /a\"},{\"endpoint\":\"GET /b\","
                             "\"propagation\":{\"inboundAttempt\":true,\"deadlineHeader\":\"x-left\"}}]}");
    rf_propagation a, b;
    assert_int_equal(rf_policy_propagation(p, 0, &a), RF_OK);
    assert_int_equal(rf_policy_propagation(p, 1, &b), RF_OK);
    assert_true(a.enabled && b.enabled);
    assert_string_equal(a.attempt_header, "x-try");
    assert_string_equal(b.attempt_header, "x-try");
    assert_string_equal(a.deadline_header, "x-envoy-expected-rq-timeout-ms");
    assert_string_equal(b.deadline_header, "x-left");
    assert_false(a.inbound_attempt);
    assert_true(b.inbound_attempt);
    rf_policy_free(p);
    p = lock_load("{\"version\":1,\"defaults\":{" ROUTE_FIELDS "},\"routes\":[{\"endpoint\":\"GET /a\"},"
                  "{\"endpoint\":\"GET /b\",\"propagation\":{}}]}");
    assert_int_equal(rf_policy_propagation(p, 0, &a), RF_OK);
    assert_int_equal(rf_policy_propagation(p, 1, &b), RF_OK);
    assert_false(a.enabled);
    assert_true(b.enabled);
    rf_policy_free(p);
}

static void test_refusals(void **state) {
    (void)state;
    lock_refused(
        "{\"endpoint\":\"GET /a\"," ROUTE_FIELDS ",\"propagation\":true}", "$.propagation",
        "must be an object {attemptHeader, deadlineHeader, overloadedHeader, inboundDeadline, inboundAttempt}");
    lock_refused("{\"endpoint\":\"GET /a\"," ROUTE_FIELDS ",\"propagation\":{\"attemptHeader\":\"x:y\"}}",
                 "$.propagation.attemptHeader", "must be an HTTP header name of 1..64 characters");
    lock_refused("{\"endpoint\":\"GET /a\"," ROUTE_FIELDS ",\"propagation\":{\"attemptHeader\":\"\"}}",
                 "$.propagation.attemptHeader", "must be an HTTP header name");
    lock_refused(
        "{\"endpoint\":\"GET /a\"," ROUTE_FIELDS
        ",\"propagation\":{\"attemptHeader\":\"x123456789x123456789x123456789x123456789x123456789x123456789x1234\"}}",
        "$.propagation.attemptHeader", "of 1..64 characters");
    lock_refused("{\"endpoint\":\"GET /a\"," ROUTE_FIELDS ",\"propagation\":{\"deadlineHeader\":\"Host\"}}",
                 "$.propagation.deadlineHeader", "\"host\" is a header the client writes itself");
    lock_refused("{\"endpoint\":\"GET /a\"," ROUTE_FIELDS
                 ",\"propagation\":{\"overloadedHeader\":\"X-Envoy-Attempt-Count\"}}",
                 "$.propagation.overloadedHeader", "\"x-envoy-attempt-count\" is already propagation.attemptHeader");
    /* Once inherited: the route's own name repeats one it takes from defaults. */
    lock_refused("{\"version\":1,\"defaults\":{" ROUTE_FIELDS ",\"propagation\":{\"attemptHeader\":\"x-a\"}},"
                 "\"routes\":[{\"endpoint\":\"GET /a\",\"propagation\":{\"deadlineHeader\":\"x-a\"}}]}",
                 "$.routes[0].propagation.deadlineHeader", "is already propagation.attemptHeader");
    lock_refused("{\"endpoint\":\"GET /a\"," ROUTE_FIELDS ",\"propagation\":{\"inboundRetry\":false}}",
                 "$.propagation.inboundRetry", "unknown key \"inboundRetry\"");
    lock_refused("{\"endpoint\":\"GET /a\"," ROUTE_FIELDS ",\"propagation\":{\"inboundAttempt\":\"no\"}}",
                 "$.propagation.inboundAttempt", "must be true or false");
}

/* The two reasons in RF_REASONS' order: after status-not-retryable (a class the route does not retry keeps its own
 * reason), before everything that may still let a retry through; each switch turns its own off. */
static void test_reasons_in_order(void **state) {
    (void)state;
    rf_policy *p = lock_load(PROPAGATING_LOCK);
    rf_facts f = facts(503, 1);
    f.overloaded = true;
    assert_int_equal(reason_of(p, &f), RF_REASON_UPSTREAM_OVERLOADED);
    f.status = 500; /* not retryable: its own reason first */
    assert_int_equal(reason_of(p, &f), RF_REASON_STATUS_NOT_RETRYABLE);
    f.status = 503;
    f.attempts = 3; /* the last attempt: max-attempts first */
    assert_int_equal(reason_of(p, &f), RF_REASON_MAX_ATTEMPTS);
    f = facts(503, 1);
    f.inbound_attempt = 2;
    assert_int_equal(reason_of(p, &f), RF_REASON_INBOUND_RETRY);
    f.overloaded = true; /* both: upstream-overloaded is checked first */
    assert_int_equal(reason_of(p, &f), RF_REASON_UPSTREAM_OVERLOADED);
    f = facts(503, 1);
    f.inbound_attempt = 1; /* the caller's first attempt: this layer may retry */
    assert_int_equal(reason_of(p, &f), RF_REASON_PINNED_STATUS);
    f = facts(200, 1);
    f.overloaded = true;
    f.inbound_attempt = 3;
    assert_int_equal(reason_of(p, &f), RF_REASON_SUCCESS);
    f = facts(503, 1);
    f.inbound_attempt = -1;
    rf_verdict v;
    rf_error err;
    assert_int_equal(rf_decide(p, &f, NULL, NULL, &v, &err), RF_EINVAL);
    assert_string_equal(err.path, "inbound_attempt");
    rf_policy_free(p);
    p = lock_load("{\"endpoint\":\"GET /a\"," ROUTE_FIELDS ",\"propagation\":{\"inboundAttempt\":false}}");
    f = facts(503, 1);
    f.inbound_attempt = 9;
    assert_int_equal(reason_of(p, &f), RF_REASON_PINNED_STATUS);
    rf_policy_free(p);
    const char *order[] = {"status-not-retryable", "upstream-overloaded", "inbound-retry",
                           "mutating-without-idempotency"};
    for (int i = 0; i < 4; i++)
        assert_string_equal(rf_reason_name((rf_reason)(RF_REASON_STATUS_NOT_RETRYABLE + i)), order[i]);
}

static rf_propagation defaults(void) {
    return (rf_propagation){.enabled = true,
                            .attempt_header = "x-envoy-attempt-count",
                            .deadline_header = "x-envoy-expected-rq-timeout-ms",
                            .overloaded_header = "x-envoy-overloaded",
                            .inbound_deadline = true,
                            .inbound_attempt = true};
}

static rf_inbound read_value(const char *name, const char *value) {
    rf_propagation prop = defaults();
    rf_inbound in = {0};
    rf_inbound_header(&prop, name, strlen(name), value, strlen(value), &in);
    return in;
}

/* The examples of each kind: what counts and what is ignored. */
static void test_inbound_examples(void **state) {
    (void)state;
    const char *D = "x-envoy-expected-rq-timeout-ms", *A = "x-envoy-attempt-count";
    static const struct {
        const char *value;
        bool has;
        int64_t deadline;
        int attempt;
    } cases[] = {
        {"300", true, 300, 300},
        {"  300\t", true, 300, 300},
        {"0", true, 0, 0},   /* no time left; attempt 0 is no attempt number */
        {"-5", false, 0, 0}, /* a sign */
        {"+5", false, 0, 0},
        {"5.0", false, 0, 0}, /* a fraction */
        {"1e3", false, 0, 0},
        {"0x10", false, 0, 0},
        {"", false, 0, 0},
        {" ", false, 0, 0},
        {"abc", false, 0, 0},
        {"3 00", false, 0, 0},        /* an inner space */
        {"300, 200", true, 200, 300}, /* a joined repeat: the narrowest of each */
        {"300,abc", true, 300, 300},  /* a bad element narrows nothing, the good one still counts */
        {",,7,", true, 7, 7},
        {"99999999999999999999999", false, 0, INT_MAX}, /* past int64: no deadline; an attempt still narrows */
        {"9007199254740991", true, INT64_C(9007199254740991), INT_MAX},
        {"9007199254740992", false, 0, INT_MAX}, /* past RF_INBOUND_DEADLINE_MAX: narrows nothing */
        {"9223372036854775808", false, 0, INT_MAX},
        {"\xd9\xa3", false, 0, 0}, /* ARABIC-INDIC DIGIT THREE: not an ASCII digit */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        rf_inbound d = read_value(D, cases[i].value), a = read_value(A, cases[i].value);
        if (d.has_deadline != cases[i].has || d.deadline_ms != cases[i].deadline || d.attempt != 0)
            fail_msg("deadline \"%s\": has %d %lld", cases[i].value, d.has_deadline, (long long)d.deadline_ms);
        if (a.attempt != cases[i].attempt || a.has_deadline)
            fail_msg("attempt \"%s\": %d, want %d", cases[i].value, a.attempt, cases[i].attempt);
    }
    /* Names are case-insensitive; other names, and a disabled propagation, read nothing. */
    assert_int_equal(read_value("X-Envoy-Attempt-Count", "2").attempt, 2);
    assert_int_equal(read_value("x-envoy-attempt-counts", "2").attempt, 0);
    assert_false(read_value("x-envoy-expected-rq-timeout", "2").has_deadline);
    rf_propagation prop = defaults();
    rf_inbound in = {0};
    rf_inbound_line(&prop, "X-Envoy-Expected-Rq-Timeout-Ms: 250", &in);
    rf_inbound_line(&prop, "x-envoy-expected-rq-timeout-ms:400", &in);
    rf_inbound_line(&prop, "no colon here", &in);
    rf_inbound_line(&prop, NULL, &in);
    assert_true(in.has_deadline);
    assert_int_equal(in.deadline_ms, 250);
    prop.enabled = false;
    rf_inbound_line(&prop, "x-envoy-expected-rq-timeout-ms: 5", &in);
    assert_int_equal(in.deadline_ms, 250);
    rf_inbound_header(NULL, "a", 1, "1", 1, &in);
    rf_inbound_header(&prop, NULL, 0, "1", 1, &in);
}

/* A plain reading of the rule for one element: 1*DIGIT, as a value saturated at UINT64_MAX. */
static bool oracle_digits(const char *s, size_t n, unsigned long long *v, bool *fits_int64) {
    while (n > 0 && (*s == ' ' || *s == '\t')) s++, n--;
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    char buf[64];
    size_t k = 0, i = 0;
    while (i < n - 1 && s[i] == '0') i++; /* leading zeros */
    if (n - i > 40) {
        *v = ULLONG_MAX;
        *fits_int64 = false;
        return true;
    }
    for (; i < n; i++) buf[k++] = s[i];
    buf[k] = '\0';
    *v = strtoull(buf, NULL, 10); /* ULLONG_MAX when out of range */
    *fits_int64 = k < 19 || (k == 19 && strcmp(buf, "9223372036854775807") <= 0);
    return true;
}

/* Random values from an alphabet of digits, signs, separators, spaces, letters and high bytes, several headers per
 * request: the fold equals the plain reading (the smallest valid deadline, the largest valid attempt), and no
 * header read later ever widens what an earlier one narrowed. */
static void test_inbound_property(void **state) {
    (void)state;
    static const char alphabet[] = "01234567890009999999999 ,\t-+.eExX\xd9\xa3"
                                   "a";
    unsigned seed = 12345;
    for (int round = 0; round < 20000; round++) {
        rf_propagation prop = defaults();
        rf_inbound in = {0};
        bool want_has = false;
        int64_t want_deadline = 0;
        int want_attempt = 0;
        const int headers = 1 + (int)(rand_r(&seed) % 3);
        for (int h = 0; h < headers; h++) {
            char value[48];
            const size_t len = (size_t)(rand_r(&seed) % 40);
            for (size_t i = 0; i < len; i++) value[i] = alphabet[(size_t)rand_r(&seed) % (sizeof alphabet - 1)];
            value[len] = '\0';
            const bool deadline = rand_r(&seed) % 2 == 0;
            const char *name = deadline ? "X-Envoy-Expected-Rq-Timeout-Ms" : "x-envoy-attempt-count";
            const rf_inbound before = in;
            rf_inbound_header(&prop, name, strlen(name), value, len, &in);
            /* never wider than before */
            if (before.has_deadline && (!in.has_deadline || in.deadline_ms > before.deadline_ms))
                fail_msg("round %d: \"%s\" widened the deadline", round, value);
            if (in.attempt < before.attempt) fail_msg("round %d: \"%s\" lowered the attempt", round, value);
            for (const char *s = value;;) {
                const char *comma = memchr(s, ',', (size_t)(value + len - s));
                const size_t n = (size_t)((comma ? comma : value + len) - s);
                unsigned long long v;
                bool fits;
                if (oracle_digits(s, n, &v, &fits)) {
                    if (deadline && fits && v <= 9007199254740991ULL && (!want_has || (int64_t)v < want_deadline)) {
                        want_has = true;
                        want_deadline = (int64_t)v;
                    } else if (!deadline && v >= 1) {
                        const int a = v > INT_MAX ? INT_MAX : (int)v;
                        if (a > want_attempt) want_attempt = a;
                    }
                }
                if (!comma) break;
                s = comma + 1;
            }
        }
        if (in.has_deadline != want_has || (want_has && in.deadline_ms != want_deadline) || in.attempt != want_attempt)
            fail_msg("round %d: got has=%d deadline=%lld attempt=%d, want has=%d deadline=%lld attempt=%d", round,
                     in.has_deadline, (long long)in.deadline_ms, in.attempt, want_has, (long long)want_deadline,
                     want_attempt);
    }
}

static void test_lines(void **state) {
    (void)state;
    rf_propagation prop = defaults();
    char lines[2][RF_PROPAGATION_LINE_MAX];
    assert_int_equal(rf_propagation_lines(&prop, 3, 1234, lines), 2);
    assert_string_equal(lines[0], "x-envoy-attempt-count: 3");
    assert_string_equal(lines[1], "x-envoy-expected-rq-timeout-ms: 1234");
    assert_int_equal(rf_propagation_lines(&prop, 1, -5, lines), 2);
    assert_string_equal(lines[1], "x-envoy-expected-rq-timeout-ms: 0");
    assert_int_equal(rf_propagation_lines(&prop, 1, INT64_MAX, lines), 2);
    assert_string_equal(lines[1], "x-envoy-expected-rq-timeout-ms: 9223372036854775807");
    assert_int_equal(rf_propagation_lines(NULL, 1, 1, lines), 0);
    /* The values are the lines' numbers, clamped alike; nothing without propagation. */
    int attempt = -1;
    int64_t deadline = -1;
    assert_true(rf_propagation_values(&prop, 3, 1234, &attempt, &deadline));
    assert_int_equal(attempt, 3);
    assert_int_equal(deadline, 1234);
    assert_true(rf_propagation_values(&prop, 0, -5, &attempt, &deadline));
    assert_int_equal(attempt, 1);
    assert_int_equal(deadline, 0);
    assert_true(rf_propagation_values(&prop, 1, INT64_MAX, &attempt, &deadline));
    assert_true(deadline == INT64_MAX);
    rf_propagation off = prop;
    off.enabled = false;
    attempt = -1;
    assert_false(rf_propagation_values(&off, 2, 10, &attempt, &deadline));
    assert_false(rf_propagation_values(NULL, 2, 10, &attempt, &deadline));
    assert_int_equal(attempt, -1);
    /* Sent lines read back as what they say. */
    rf_inbound in = {0};
    rf_propagation_lines(&prop, 2, 480, lines);
    rf_inbound_line(&prop, lines[0], &in);
    rf_inbound_line(&prop, lines[1], &in);
    assert_int_equal(in.attempt, 2);
    assert_int_equal(in.deadline_ms, 480);
}

/* Every reason with every outcome: told exactly when the layer retried to exhaustion, was throttled, or was told. */
static void test_tells_overloaded(void **state) {
    (void)state;
    rf_propagation on = defaults(), off = defaults();
    off.enabled = false;
    for (int r = 0; r < RF_REASON_COUNT; r++) {
        for (int o = 0; o < RF_OUTCOME_COUNT; o++) {
            const bool want =
                o == RF_OUTCOME_EXHAUSTED || o == RF_OUTCOME_THROTTLED || r == RF_REASON_UPSTREAM_OVERLOADED;
            assert_int_equal(rf_propagation_tells_overloaded(&on, (rf_reason)r, (rf_outcome)o), want);
            assert_false(rf_propagation_tells_overloaded(&off, (rf_reason)r, (rf_outcome)o));
        }
    }
    assert_false(rf_propagation_tells_overloaded(NULL, RF_REASON_UPSTREAM_OVERLOADED, RF_OUTCOME_TERMINAL));
    /* The reasons' own outcomes: neither new reason is a refusal or a success. */
    assert_int_equal(rf_outcome_of(RF_REASON_UPSTREAM_OVERLOADED), RF_OUTCOME_TERMINAL);
    assert_int_equal(rf_outcome_of(RF_REASON_INBOUND_RETRY), RF_OUTCOME_TERMINAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_absent_changes_nothing),
        cmocka_unit_test(test_present_canonical),
        cmocka_unit_test(test_inherited),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_reasons_in_order),
        cmocka_unit_test(test_inbound_examples),
        cmocka_unit_test(test_inbound_property),
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_tells_overloaded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
