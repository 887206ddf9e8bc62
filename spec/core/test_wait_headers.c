/*
 * The wait headers beyond Retry-After (rf_wait_header_parse, retry_after.h), one group per header, with the
 * vectors of each source: RFC 9110 §10.2.3 (Retry-After), the IETF httpapi RateLimit header fields draft
 * (RateLimit-Reset, RateLimit), gRPC proposal A6 (grpc-retry-pushback-ms), and for each: overflow, negative,
 * fractional, whitespace, duplicates (two field lines combined with ", ", RFC 9110 §5.3), and for
 * x-ratelimit-reset a Unix timestamp in the past. Every case asserts the exact status and delay.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "retryfreeze/retry_after.h"

#define UNTOUCHED INT64_C(-777)
/* 2023-11-14T22:13:20Z = Unix 1700000000, a Tuesday. */
#define NOW_MS INT64_C(1700000000000)
#define NOW_IMF "Tue, 14 Nov 2023 22:13:20 GMT"

static rf_retry_after_status parse(rf_wait_header h, const char *v, int64_t now_ms, const char *date, int64_t *ms) {
    *ms = UNTOUCHED;
    return rf_wait_header_parse(h, v, v ? strlen(v) : 0, now_ms, date, date ? strlen(date) : 0, ms);
}

static void ok_at(rf_wait_header h, const char *v, int64_t now_ms, const char *date, int64_t want) {
    int64_t got;
    rf_retry_after_status st = parse(h, v, now_ms, date, &got);
    if (st != RF_RA_OK || got != want)
        print_error("%s: \"%s\" → %s %lld, want ok %lld\n", rf_wait_header_name(h), v, rf_retry_after_status_name(st),
                    (long long)got, (long long)want);
    assert_int_equal(st, RF_RA_OK);
    assert_true(got == want);
}

static void ok(rf_wait_header h, const char *v, int64_t want) { ok_at(h, v, 0, NULL, want); }

static void status_at(rf_wait_header h, const char *v, int64_t now_ms, const char *date, rf_retry_after_status want) {
    int64_t got;
    rf_retry_after_status st = parse(h, v, now_ms, date, &got);
    if (st != want)
        print_error("%s: \"%s\" → %s, want %s\n", rf_wait_header_name(h), v ? v : "(null)",
                    rf_retry_after_status_name(st), rf_retry_after_status_name(want));
    assert_int_equal(st, want);
    assert_true(got == UNTOUCHED); /* never written unless ok */
}

static void status(rf_wait_header h, const char *v, rf_retry_after_status want) { status_at(h, v, 0, NULL, want); }

/* ---- retry-after: the RFC 9110 parser, reached through the same entry point ---- */

static void test_retry_after(void **state) {
    (void)state;
    ok(RF_WAIT_RETRY_AFTER, "120", 120000); /* RFC 9110 §10.2.3: Retry-After: 120 */
    /* RFC 9110 §10.2.3: Retry-After: Fri, 31 Dec 1999 23:59:59 GMT, against a Date one minute earlier. */
    ok_at(RF_WAIT_RETRY_AFTER, "Fri, 31 Dec 1999 23:59:59 GMT", NOW_MS, "Fri, 31 Dec 1999 23:58:59 GMT", 60000);
    status(RF_WAIT_RETRY_AFTER, "1.5", RF_RA_INVALID);
    status(RF_WAIT_RETRY_AFTER, "-1", RF_RA_INVALID);
    status(RF_WAIT_RETRY_AFTER, "1, 2", RF_RA_INVALID); /* duplicates combined */
    status(RF_WAIT_RETRY_AFTER, "99999999999999999999", RF_RA_TOO_LONG);
    status(RF_WAIT_RETRY_AFTER, " \t", RF_RA_ABSENT);
}

/* ---- retry-after-ms, x-ms-retry-after-ms: integer milliseconds ---- */

static void ms_vectors(rf_wait_header h) {
    ok(h, "250", 250);
    ok(h, "0", 0);
    ok(h, " 250\t", 250); /* surrounding whitespace is not part of a field value (RFC 9110 §5.5) */
    ok(h, "0010", 10);
    ok(h, "9223372036854775807", INT64_MAX);
    status(h, "9223372036854775808", RF_RA_TOO_LONG);
    status(h, "99999999999999999999999", RF_RA_TOO_LONG);
    status(h, "-1", RF_RA_INVALID);
    status(h, "+5", RF_RA_INVALID);
    status(h, "1.5", RF_RA_INVALID);
    status(h, "1e3", RF_RA_INVALID);
    status(h, "1 0", RF_RA_INVALID);
    status(h, "250ms", RF_RA_INVALID);
    status(h, "250, 300", RF_RA_INVALID); /* two field lines combined: no single value */
    status(h, "", RF_RA_ABSENT);
    status(h, "   ", RF_RA_ABSENT);
    status(h, NULL, RF_RA_ABSENT);
}

static void test_retry_after_ms(void **state) {
    (void)state;
    ms_vectors(RF_WAIT_RETRY_AFTER_MS);
    ms_vectors(RF_WAIT_X_MS_RETRY_AFTER_MS);
    /* The clock and Date never matter for milliseconds. */
    ok_at(RF_WAIT_RETRY_AFTER_MS, "250", NOW_MS, NOW_IMF, 250);
}

/* ---- ratelimit-reset: delta-seconds ---- */

static void test_ratelimit_reset(void **state) {
    (void)state;
    ok(RF_WAIT_RATELIMIT_RESET, "50", 50000); /* the draft's example: RateLimit-Reset: 50 */
    ok(RF_WAIT_RATELIMIT_RESET, "0", 0);
    ok(RF_WAIT_RATELIMIT_RESET, "\t7 ", 7000);
    ok(RF_WAIT_RATELIMIT_RESET, "9223372036854775", INT64_C(9223372036854775000));
    status(RF_WAIT_RATELIMIT_RESET, "9223372036854776", RF_RA_TOO_LONG);
    status(RF_WAIT_RATELIMIT_RESET, "-50", RF_RA_INVALID);
    status(RF_WAIT_RATELIMIT_RESET, "1.5", RF_RA_INVALID);
    status(RF_WAIT_RATELIMIT_RESET, "50, 60", RF_RA_INVALID);
    status(RF_WAIT_RATELIMIT_RESET, "Tue, 14 Nov 2023 22:13:20 GMT", RF_RA_INVALID); /* seconds only, no date */
    status(RF_WAIT_RATELIMIT_RESET, " ", RF_RA_ABSENT);
}

/* ---- ratelimit: the structured-field List's t= of exhausted policies ---- */

static void test_ratelimit_draft_examples(void **state) {
    (void)state;
    /* draft-ietf-httpapi-ratelimit-headers §4.2 and §6 examples. */
    status(RF_WAIT_RATELIMIT, "\"default\";r=50;t=30", RF_RA_ABSENT); /* quota left: no wait asked */
    status(RF_WAIT_RATELIMIT, "\"default\";r=999;pk=:dHJpYWwxMjEzMjM=:", RF_RA_ABSENT);
    status(RF_WAIT_RATELIMIT, "\"default\";r=300000000;t=60;pk=:QXBwLTk5OQ==:", RF_RA_ABSENT);
    ok(RF_WAIT_RATELIMIT, "\"problemPolicy\";r=0;t=10", 10000);
    ok(RF_WAIT_RATELIMIT, "\"default\";r=0;t=30", 30000);
    status(RF_WAIT_RATELIMIT, "\"default\";r=1;t=7", RF_RA_ABSENT); /* §7: one request left */
}

static void test_ratelimit_lists(void **state) {
    (void)state;
    /* Several policies: the longest reset among the exhausted ones. */
    ok(RF_WAIT_RATELIMIT, "\"burst\";r=0;t=5, \"daily\";r=0;t=3600", 3600000);
    ok(RF_WAIT_RATELIMIT, "\"burst\";r=0;t=5, \"daily\";r=10;t=3600", 5000);
    ok(RF_WAIT_RATELIMIT, "\"burst\";r=0;t=5,\"daily\";r=0;t=9", 9000);
    /* Duplicates: two RateLimit field lines arrive combined with ", " and are one List (RFC 8941 §3.1). */
    ok(RF_WAIT_RATELIMIT, "\"a\";r=0;t=5, \"a\";r=0;t=7", 7000);
    /* A repeated parameter: the last value wins (RFC 8941 §4.2.3.2). */
    ok(RF_WAIT_RATELIMIT, "\"a\";r=0;t=5;t=9", 9000);
    ok(RF_WAIT_RATELIMIT, "\"a\";r=3;r=0;t=2", 2000);
    /* Token and other item kinds, spaces after ";", unknown parameters (comments, per the draft). */
    ok(RF_WAIT_RATELIMIT, "default;r=0;t=2", 2000);
    ok(RF_WAIT_RATELIMIT, "\"a\";  r=0;  t=4;acme-burst=?1;x", 4000);
    ok(RF_WAIT_RATELIMIT, "  \"a\";r=0;t=4\t", 4000);
    ok(RF_WAIT_RATELIMIT, "\"a\";r=0;t=0", 0);
    ok(RF_WAIT_RATELIMIT, "\"a\";r=0;t=999999999999999", INT64_C(999999999999999000));
    status(RF_WAIT_RATELIMIT, "\"a\";r=0", RF_RA_ABSENT); /* exhausted, but no reset time */
    status(RF_WAIT_RATELIMIT, "   ", RF_RA_ABSENT);
}

static void test_ratelimit_malformed(void **state) {
    (void)state;
    /* "Malformed RateLimit header fields MUST be ignored" (draft §7). */
    status(RF_WAIT_RATELIMIT, "\"a\";r=0;t=-1", RF_RA_INVALID); /* negative */
    status(RF_WAIT_RATELIMIT, "\"a\";r=-1;t=5", RF_RA_INVALID);
    status(RF_WAIT_RATELIMIT, "\"a\";r=0;t=1.5", RF_RA_INVALID);                /* fractional */
    status(RF_WAIT_RATELIMIT, "\"a\";r=0;t=1234567890123456", RF_RA_INVALID);   /* 16 digits: over an SF Integer */
    status(RF_WAIT_RATELIMIT, "\"a\";t=5", RF_RA_INVALID);                      /* r is required */
    status(RF_WAIT_RATELIMIT, "\"a\";r=0;t=\"5\"", RF_RA_INVALID);              /* t must be an Integer */
    status(RF_WAIT_RATELIMIT, "\"a\";R=0;t=5", RF_RA_INVALID);                  /* keys are lowercase */
    status(RF_WAIT_RATELIMIT, "\"a\" ;r=0;t=5", RF_RA_INVALID);                 /* no space before ";" */
    status(RF_WAIT_RATELIMIT, "\"a\";r=0;t=5,", RF_RA_INVALID);                 /* trailing comma */
    status(RF_WAIT_RATELIMIT, "(\"a\" \"b\");r=0;t=5", RF_RA_INVALID);          /* an Inner List */
    status(RF_WAIT_RATELIMIT, "\"a;r=0;t=5", RF_RA_INVALID);                    /* unterminated string */
    status(RF_WAIT_RATELIMIT, "limit=10, remaining=0, reset=7", RF_RA_INVALID); /* the old dictionary form */
    status(RF_WAIT_RATELIMIT, "30", RF_RA_INVALID);                             /* a bare number has no r */
}

/* ---- x-ratelimit-reset: seconds, or a Unix timestamp over 10^9 ---- */

static void test_x_ratelimit_reset(void **state) {
    (void)state;
    ok(RF_WAIT_X_RATELIMIT_RESET, "60", 60000);
    ok(RF_WAIT_X_RATELIMIT_RESET, " 0 ", 0);
    ok(RF_WAIT_X_RATELIMIT_RESET, "1000000000", INT64_C(1000000000000)); /* 10^9 itself is seconds */
    /* A timestamp against now_ms (no Date). */
    ok_at(RF_WAIT_X_RATELIMIT_RESET, "1700000060", NOW_MS, NULL, 60000);
    ok_at(RF_WAIT_X_RATELIMIT_RESET, "1000000001", NOW_MS, NULL, 0); /* in the past: no wait */
    ok_at(RF_WAIT_X_RATELIMIT_RESET, "1600000000", NOW_MS, NULL, 0);
    /* Against the response's Date: our clock 5 minutes fast changes nothing (skew-immune). */
    ok_at(RF_WAIT_X_RATELIMIT_RESET, "1700000060", NOW_MS + 300000, NOW_IMF, 60000);
    ok_at(RF_WAIT_X_RATELIMIT_RESET, "1700000060", 0, NOW_IMF, 60000); /* Date alone suffices */
    ok_at(RF_WAIT_X_RATELIMIT_RESET, "1699999999", NOW_MS - 999999, NOW_IMF, 0);
    ok_at(RF_WAIT_X_RATELIMIT_RESET, "1700000060", NOW_MS, "not a date", 60000); /* bad Date: now_ms */
    status(RF_WAIT_X_RATELIMIT_RESET, "1700000060", RF_RA_NO_CLOCK);
    status_at(RF_WAIT_X_RATELIMIT_RESET, "1700000060", 0, "garbage", RF_RA_NO_CLOCK);
    ok_at(RF_WAIT_X_RATELIMIT_RESET, "253402300799", NOW_MS, NULL, INT64_C(253402300799000) - NOW_MS);
    status_at(RF_WAIT_X_RATELIMIT_RESET, "253402300800", NOW_MS, NULL, RF_RA_TOO_LONG);
    status(RF_WAIT_X_RATELIMIT_RESET, "99999999999999999999", RF_RA_TOO_LONG);
    status(RF_WAIT_X_RATELIMIT_RESET, "-60", RF_RA_INVALID);
    status(RF_WAIT_X_RATELIMIT_RESET, "1.5", RF_RA_INVALID);
    status(RF_WAIT_X_RATELIMIT_RESET, "1700000060.5", RF_RA_INVALID);
    status(RF_WAIT_X_RATELIMIT_RESET, "60, 60", RF_RA_INVALID);
    status(RF_WAIT_X_RATELIMIT_RESET, "", RF_RA_ABSENT);
}

/* ---- grpc-retry-pushback-ms: gRPC A6 ---- */

static void test_grpc_pushback(void **state) {
    (void)state;
    const rf_wait_header h = RF_WAIT_GRPC_RETRY_PUSHBACK_MS;
    /* A6: "If the value is a non-negative integer, the next retry attempt will be issued after that delay". */
    ok(h, "0", 0);
    ok(h, "100", 100);
    ok(h, " 100\t", 100);
    ok(h, "2147483647", INT32_MAX);
    /* A6: a negative or unparsable value means the server asks the client not to retry at all. */
    status(h, "-1", RF_RA_STOP);
    status(h, "-0", RF_RA_STOP);
    status(h, "+5", RF_RA_STOP);
    status(h, "1.5", RF_RA_STOP);
    status(h, "abc", RF_RA_STOP);
    status(h, "1 0", RF_RA_STOP);
    status(h, "2147483648", RF_RA_STOP); /* over an int32: unparsable as A6's integer */
    status(h, "99999999999999999999999", RF_RA_STOP);
    status(h, "100, 200", RF_RA_STOP); /* duplicates combined: no single integer */
    /* A field that is present but empty (only OWS, which is not part of a value: RFC 9110 §5.5) is no integer
     * either: the server sent a pushback that says nothing, read as "do not retry" (A6; grpc-go's
     * strconv.Atoi("") fails and aborts too). Only an absent field (NULL) asks for no wait. */
    status(h, "", RF_RA_STOP);
    status(h, "  ", RF_RA_STOP);
    status(h, " \t", RF_RA_STOP);
    status(h, NULL, RF_RA_ABSENT);
}

static void test_names_and_bounds(void **state) {
    (void)state;
    static const char *const names[] = {"retry-after", "retry-after-ms",    "x-ms-retry-after-ms",   "ratelimit-reset",
                                        "ratelimit",   "x-ratelimit-reset", "grpc-retry-pushback-ms"};
    assert_int_equal(RF_WAIT_HEADER_COUNT, 7);
    for (int i = 0; i < RF_WAIT_HEADER_COUNT; i++) {
        rf_wait_header h;
        assert_string_equal(rf_wait_header_name((rf_wait_header)i), names[i]);
        assert_int_equal(rf_wait_header_parse_name(names[i], strlen(names[i]), &h), 0);
        assert_int_equal(h, i);
    }
    rf_wait_header h = RF_WAIT_RETRY_AFTER;
    assert_int_equal(rf_wait_header_parse_name("Retry-After-Ms", 14, &h), 0);
    assert_int_equal(h, RF_WAIT_RETRY_AFTER_MS);
    assert_int_equal(rf_wait_header_parse_name("x-retry-after", 13, &h), -1);
    assert_int_equal(rf_wait_header_parse_name("retry-after", 5, &h), -1);
    assert_string_equal(rf_wait_header_name((rf_wait_header)99), "?");
    assert_string_equal(rf_retry_after_status_name(RF_RA_STOP), "stop");
    int64_t ms = UNTOUCHED;
    assert_int_equal(rf_wait_header_parse((rf_wait_header)99, "5", 1, 0, NULL, 0, &ms), RF_RA_INVALID);
    /* len bounds the value: "250" with len 2 is "25"; a NULL output computes the status alone. */
    assert_int_equal(rf_wait_header_parse(RF_WAIT_RETRY_AFTER_MS, "250", 2, 0, NULL, 0, &ms), RF_RA_OK);
    assert_true(ms == 25);
    assert_int_equal(rf_wait_header_parse(RF_WAIT_RATELIMIT, "a;r=0;t=1", 9, 0, NULL, 0, NULL), RF_RA_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retry_after),       cmocka_unit_test(test_retry_after_ms),
        cmocka_unit_test(test_ratelimit_reset),   cmocka_unit_test(test_ratelimit_draft_examples),
        cmocka_unit_test(test_ratelimit_lists),   cmocka_unit_test(test_ratelimit_malformed),
        cmocka_unit_test(test_x_ratelimit_reset), cmocka_unit_test(test_grpc_pushback),
        cmocka_unit_test(test_names_and_bounds),
    };
    return cmocka_run_group_tests_name("wait_headers", tests, NULL, NULL);
}
