/*
 * Retry-After and HTTP-date parsing (RFC 9110 §10.2.3, §5.6.7): core/include/retryfreeze/retry_after.h.
 * Every case asserts the exact status and value, never only "it did not crash".
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "retryfreeze/retry_after.h"

/* RFC 9110's example instant, Sun, 06 Nov 1994 08:49:37 GMT. */
#define EXAMPLE_MS INT64_C(784111777000)
#define EXAMPLE_IMF "Sun, 06 Nov 1994 08:49:37 GMT"
#define EXAMPLE_850 "Sunday, 06-Nov-94 08:49:37 GMT"
#define EXAMPLE_ASC "Sun Nov  6 08:49:37 1994"

/* A sentinel that no successful parse in these tests produces, to see that failures leave outputs alone. */
#define UNTOUCHED INT64_C(-777)

/* ---- helpers: NUL-terminated convenience over the length-taking API ---- */

static rf_retry_after_status ra(const char *value, int64_t now_ms, const char *date, int64_t *delay_ms) {
    *delay_ms = UNTOUCHED;
    return rf_retry_after_parse(value, value ? strlen(value) : 0, now_ms, date, date ? strlen(date) : 0, delay_ms);
}

/* Asserts that Retry-After `value` (no Date, no clock needed) gives OK and `want_ms`. */
static void assert_ra_ok(const char *value, int64_t now_ms, const char *date, int64_t want_ms) {
    int64_t got = UNTOUCHED;
    const rf_retry_after_status st = ra(value, now_ms, date, &got);
    if (st != RF_RA_OK || got != want_ms) {
        print_error("Retry-After \"%s\" (now %lld, Date \"%s\"): status %s delay %lld, want ok %lld\n", value,
                    (long long)now_ms, date ? date : "(none)", rf_retry_after_status_name(st), (long long)got,
                    (long long)want_ms);
    }
    assert_int_equal(st, RF_RA_OK);
    assert_true(got == want_ms);
}

/* Asserts a non-OK status, and that *delay_ms was not written. */
static void assert_ra_status(const char *value, int64_t now_ms, const char *date, rf_retry_after_status want) {
    int64_t got = UNTOUCHED;
    const rf_retry_after_status st = ra(value, now_ms, date, &got);
    if (st != want) {
        print_error("Retry-After \"%s\": status %s, want %s\n", value, rf_retry_after_status_name(st),
                    rf_retry_after_status_name(want));
    }
    assert_int_equal(st, want);
    assert_true(got == UNTOUCHED);
}

static void assert_date_ms(const char *text, int64_t now_ms, int64_t want_ms) {
    int64_t got = UNTOUCHED;
    const bool ok = rf_http_date_parse(text, strlen(text), now_ms, &got);
    if (!ok || got != want_ms) {
        print_error("HTTP-date \"%s\" (now %lld): ok %d epoch %lld, want %lld\n", text, (long long)now_ms, ok,
                    (long long)got, (long long)want_ms);
    }
    assert_true(ok);
    assert_true(got == want_ms);
}

static void assert_date_invalid(const char *text, int64_t now_ms) {
    int64_t got = UNTOUCHED;
    const bool ok = rf_http_date_parse(text, strlen(text), now_ms, &got);
    if (ok) {
        print_error("HTTP-date \"%s\" parsed as %lld, want invalid\n", text, (long long)got);
    }
    assert_false(ok);
    assert_true(got == UNTOUCHED);
}

/* ---- delay-seconds ---- */

static void test_delay_seconds(void **state) {
    (void)state;
    assert_ra_ok("3", 0, NULL, 3000);
    assert_ra_ok("9999", 0, NULL, 9999000);
    assert_ra_ok("0", 0, NULL, 0);
    assert_ra_ok("007", 0, NULL, 7000);
    assert_ra_ok(" 3\t", 0, NULL, 3000);
    assert_ra_ok("\t \t120  ", 0, NULL, 120000);
    /* Seconds ignore the clock and the Date header entirely. */
    assert_ra_ok("3", INT64_C(1700000000000), EXAMPLE_IMF, 3000);
}

static void test_delay_seconds_respects_len(void **state) {
    (void)state;
    int64_t got = UNTOUCHED;
    /* Only the first byte counts: "35" with len 1 is "3". */
    assert_int_equal(rf_retry_after_parse("35", 1, 0, NULL, 0, &got), RF_RA_OK);
    assert_true(got == 3000);
    /* An embedded NUL inside len is an invalid byte, not the end of the value. */
    got = UNTOUCHED;
    assert_int_equal(rf_retry_after_parse("3\0"
                                          "0",
                                          3, 0, NULL, 0, &got),
                     RF_RA_INVALID);
    assert_true(got == UNTOUCHED);
    /* A NULL output pointer is allowed: the status alone is computed. */
    assert_int_equal(rf_retry_after_parse("3", 1, 0, NULL, 0, NULL), RF_RA_OK);
    assert_int_equal(rf_retry_after_parse(EXAMPLE_IMF, strlen(EXAMPLE_IMF), 1, NULL, 0, NULL), RF_RA_OK);
}

static void test_absent(void **state) {
    (void)state;
    int64_t got = UNTOUCHED;
    assert_int_equal(rf_retry_after_parse(NULL, 0, 0, NULL, 0, &got), RF_RA_ABSENT);
    assert_int_equal(rf_retry_after_parse(NULL, 5, 0, NULL, 0, &got), RF_RA_ABSENT);
    assert_int_equal(rf_retry_after_parse("3", 0, 0, NULL, 0, &got), RF_RA_ABSENT);
    assert_true(got == UNTOUCHED);
    assert_ra_status("", 0, NULL, RF_RA_ABSENT);
    assert_ra_status(" \t  ", 0, NULL, RF_RA_ABSENT);
}

static void test_delay_seconds_invalid(void **state) {
    (void)state;
    static const char *const bad[] = {
        "-1",  "+3",  "1.5", "3 4", "abc", "\xef\xbc\x93" /* U+FF13 FULLWIDTH DIGIT THREE */, "0x10",
        "3s",  "3\n", "\n3", "1e3", "3,",  "\xd9\xa3" /* U+0663 ARABIC-INDIC DIGIT THREE */,  "3\xc2\xa0" /* NBSP */,
        "- 1", "\v3", "3\r",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_ra_status(bad[i], INT64_C(1700000000000), NULL, RF_RA_INVALID);
    }
}

static void test_delay_seconds_too_long(void **state) {
    (void)state;
    /* INT64_MAX is 9223372036854775807 ms: 9223372036854775 s is the largest that fits. */
    assert_ra_ok("9223372036854775", 0, NULL, INT64_C(9223372036854775000));
    assert_ra_status("9223372036854776", 0, NULL, RF_RA_TOO_LONG);
    assert_ra_status("9223372036854775807", 0, NULL, RF_RA_TOO_LONG);
    assert_ra_status("18446744073709551616", 0, NULL, RF_RA_TOO_LONG); /* 2^64: a wrap would give 0 */
    assert_ra_status("99999999999999999999", 0, NULL, RF_RA_TOO_LONG);

    char digits[401];
    memset(digits, '9', 400);
    digits[400] = '\0';
    assert_ra_status(digits, 0, NULL, RF_RA_TOO_LONG);

    /* Leading zeros never count towards the size. */
    memset(digits, '0', 400);
    digits[399] = '7';
    assert_ra_ok(digits, 0, NULL, 7000);

    /* A non-digit anywhere makes it invalid, however long. */
    memset(digits, '9', 400);
    digits[399] = 'x';
    assert_ra_status(digits, 0, NULL, RF_RA_INVALID);
}

/* ---- HTTP-date: the three formats ---- */

static void test_http_date_formats(void **state) {
    (void)state;
    assert_date_ms(EXAMPLE_IMF, 0, EXAMPLE_MS);
    assert_date_ms(EXAMPLE_850, 0, EXAMPLE_MS);
    assert_date_ms(EXAMPLE_850, INT64_C(1700000000000), EXAMPLE_MS);
    assert_date_ms(EXAMPLE_ASC, 0, EXAMPLE_MS);
    assert_date_ms("Sun Nov 06 08:49:37 1994", 0, EXAMPLE_MS); /* date3 also allows 2DIGIT */
    assert_date_ms("  " EXAMPLE_IMF " \t", 0, EXAMPLE_MS);
    assert_date_ms("Thu, 01 Jan 1970 00:00:00 GMT", 0, 0);
    assert_date_ms("Wed, 31 Dec 1969 23:59:59 GMT", 0, -1000);
    assert_date_ms("Sat, 01 Jan 0000 00:00:00 GMT", 0, INT64_C(-62167219200000));
    assert_date_ms("Fri, 31 Dec 9999 23:59:59 GMT", 0, INT64_C(253402300799000));
    /* The weekday must be a valid name but need not match the date. */
    assert_date_ms("Mon, 06 Nov 1994 08:49:37 GMT", 0, EXAMPLE_MS);
    assert_date_ms("Wednesday, 06-Nov-94 08:49:37 GMT", 0, EXAMPLE_MS);
    assert_date_ms("Thu Nov  6 08:49:37 1994", 0, EXAMPLE_MS);
    /* Every long weekday name is recognised. */
    static const char *const longs[] = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};
    for (size_t i = 0; i < 7; i++) {
        char buf[64];
        strcpy(buf, longs[i]);
        strcat(buf, ", 06-Nov-94 08:49:37 GMT");
        assert_date_ms(buf, 0, EXAMPLE_MS);
    }
    /* Every month name, first of the month 2001. */
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    static const int64_t month_days[] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
    for (size_t i = 0; i < 12; i++) {
        char buf[64];
        strcpy(buf, "Mon, 01 ");
        strcat(buf, months[i]);
        strcat(buf, " 2001 00:00:00 GMT");
        assert_date_ms(buf, 0, (INT64_C(978307200) + month_days[i] * 86400) * 1000);
    }
    /* A NULL output pointer only validates. */
    assert_true(rf_http_date_parse(EXAMPLE_IMF, strlen(EXAMPLE_IMF), 0, NULL));
    assert_false(rf_http_date_parse(NULL, 29, 0, NULL));
}

static void test_leap_years_and_seconds(void **state) {
    (void)state;
    assert_date_ms("Thu, 29 Feb 2024 00:00:00 GMT", 0, INT64_C(1709164800000));
    assert_date_ms("Tue, 29 Feb 2000 00:00:00 GMT", 0, INT64_C(951782400000));
    assert_date_ms("Thu Feb 29 00:00:00 2024", 0, INT64_C(1709164800000));
    assert_date_invalid("Wed, 29 Feb 1995 00:00:00 GMT", 0);
    assert_date_invalid("Thu, 29 Feb 1900 00:00:00 GMT", 0);
    assert_date_invalid("Sun, 29 Feb 2100 00:00:00 GMT", 0);
    assert_date_invalid("Wed Feb 29 00:00:00 1995", 0);
    assert_date_invalid("Thu, 30 Feb 2024 00:00:00 GMT", 0);
    /* Second 60 is a leap second: 23:59:60 is the same instant as 00:00:00 of the next day. */
    assert_date_ms("Sat, 31 Dec 2016 23:59:60 GMT", 0, INT64_C(1483228800000));
    assert_date_ms("Saturday, 31-Dec-16 23:59:60 GMT", 0, INT64_C(1483228800000));
    assert_date_ms("Sat Dec 31 23:59:60 2016", 0, INT64_C(1483228800000));
}

static void test_http_date_invalid(void **state) {
    (void)state;
    static const char *const bad[] = {
        "Sun, 31 Apr 1994 08:49:37 GMT",    /* April has 30 days */
        "Sun, 31 Jun 1994 08:49:37 GMT",    /* June has 30 days */
        "Sun, 32 Jan 1994 08:49:37 GMT",    /* no month has 32 */
        "Sun, 00 Nov 1994 08:49:37 GMT",    /* day 0 */
        "Sun, 06 Nov 1994 24:00:00 GMT",    /* hour 24 */
        "Sun, 06 Nov 1994 08:60:37 GMT",    /* minute 60 */
        "Sun, 06 Nov 1994 08:49:61 GMT",    /* second 61 */
        "Sun, 06 Nov 1994 08:49:37 UTC",    /* only "GMT" */
        "Sun, 06 Nov 1994 08:49:37 +0000",  /* no numeric zones */
        "Sun, 06 Nov 1994 08:49:37 gmt",    /* case-sensitive */
        "Sun, 06 Nov 1994 08:49:37",        /* zone missing */
        "Sun, 06 nov 1994 08:49:37 GMT",    /* lowercase month */
        "Sun, 06 NOV 1994 08:49:37 GMT",    /* uppercase month */
        "sun, 06 Nov 1994 08:49:37 GMT",    /* lowercase weekday */
        "Sux, 06 Nov 1994 08:49:37 GMT",    /* unknown weekday */
        "Sun, 06 Nox 1994 08:49:37 GMT",    /* unknown month */
        "Sun 06 Nov 1994 08:49:37 GMT",     /* missing comma */
        "Sun,06 Nov 1994 08:49:37 GMT",     /* missing space */
        "Sun,  06 Nov 1994 08:49:37 GMT",   /* extra space */
        "Sun, 6 Nov 1994 08:49:37 GMT",     /* day is 2DIGIT in IMF-fixdate */
        "Sun, 06 Nov 94 08:49:37 GMT",      /* year is 4DIGIT in IMF-fixdate */
        "Sun, 06-Nov-1994 08:49:37 GMT",    /* dashes belong to RFC 850 */
        "Sun, 06 Nov 1994 8:49:37 GMT",     /* hour is 2DIGIT */
        "Sun, 06 Nov 1994 08.49.37 GMT",    /* colons */
        "Sun, 06 Nov 1994 08:49:3x GMT",    /* non-digit */
        "Sun, 06 Nov 19x4 08:49:37 GMT",    /* non-digit year */
        "Sun, 06 Nov 1994 08:49:37 GMT x",  /* trailing text */
        "Sun, 06 Nov 1994 08:49:37 GMTT",   /* trailing text */
        "Sun, 06 Nov 1994 08:49:37 GMT,",   /* trailing comma */
        "Sunday, 06 Nov 1994 08:49:37 GMT", /* long name in IMF-fixdate */
        "Sun, 06-Nov-94 08:49:37 GMT",      /* short name in RFC 850 */
        "Sundy, 06-Nov-94 08:49:37 GMT",    /* misspelt long name */
        "Sunday, 06-Nov-94 08:49:37 UTC",   /* RFC 850 zone */
        "Sunday, 06-Nov-1994 08:49:37 GMT", /* RFC 850 year is 2DIGIT */
        "Sunday, 31-Apr-94 08:49:37 GMT",   /* RFC 850 day range */
        "Sunday, 29-Feb-01 00:00:00 GMT",   /* never a leap year when it ends in 01 */
        "Sunday 06-Nov-94 08:49:37 GMT",    /* RFC 850 missing comma */
        "Sunday, 06-nov-94 08:49:37 GMT",   /* RFC 850 lowercase month */
        "Sun Nov  6 08:49:37 1994 GMT",     /* asctime has no zone */
        "Sun Nov 6 08:49:37 1994",          /* asctime day is SP DIGIT or 2DIGIT */
        "Sun Nov  0 08:49:37 1994",         /* day 0 */
        "Sun Nov 31 08:49:37 1994",         /* November has 30 days */
        "Sun Nov  6 24:49:37 1994",         /* hour 24 */
        "Sun Nov  6 08:49:37 94",           /* asctime year is 4DIGIT */
        "Sun, Nov  6 08:49:37 1994",        /* asctime has no comma */
        "Sun Nov  6 08:49:37 1994\n",       /* only SP and HTAB are trimmed */
        "Sun\xc2\xa0Nov  6 08:49:37 1994",  /* NBSP is not SP */
        "2024-06-15T12:00:00Z",             /* ISO 8601 is not an HTTP-date */
        "",
        "GMT",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_date_invalid(bad[i], 0);
        assert_date_invalid(bad[i], INT64_C(1718452800000));
        /* As a Retry-After value each one is invalid too (an empty one is absent). */
        if (bad[i][0] != '\0') {
            assert_ra_status(bad[i], INT64_C(1718452800000), NULL, RF_RA_INVALID);
        }
    }
}

/* Every strict prefix of a valid date is invalid; each one is copied to a buffer of exactly its length
 * so that AddressSanitizer catches any read past len. Also every prefix with one byte changed to NUL. */
static void check_prefixes(const char *full, int64_t want_ms) {
    const size_t n = strlen(full);
    for (size_t k = 0; k <= n; k++) {
        char *buf = malloc(k ? k : 1);
        assert_non_null(buf);
        memcpy(buf, full, k);
        int64_t got = UNTOUCHED;
        const bool ok = rf_http_date_parse(buf, k, 0, &got);
        int64_t delay = UNTOUCHED;
        const rf_retry_after_status st = rf_retry_after_parse(buf, k, INT64_C(700000000000), NULL, 0, &delay);
        if (k == n) {
            assert_true(ok);
            assert_true(got == want_ms);
            assert_int_equal(st, RF_RA_OK);
            assert_true(delay == want_ms - INT64_C(700000000000));
        } else {
            if (ok) {
                print_error("prefix %zu of \"%s\" parsed\n", k, full);
            }
            assert_false(ok);
            assert_true(got == UNTOUCHED);
            assert_int_equal(st, k == 0 ? RF_RA_ABSENT : RF_RA_INVALID);
        }
        free(buf);
    }
    /* The full length with any single byte replaced by NUL never parses. */
    char *buf = malloc(n);
    assert_non_null(buf);
    for (size_t i = 0; i < n; i++) {
        memcpy(buf, full, n);
        buf[i] = '\0';
        assert_false(rf_http_date_parse(buf, n, 0, NULL));
    }
    free(buf);
}

static void test_truncated(void **state) {
    (void)state;
    check_prefixes(EXAMPLE_IMF, EXAMPLE_MS);
    check_prefixes(EXAMPLE_850, EXAMPLE_MS);
    check_prefixes("Wednesday, 09-Nov-94 08:49:37 GMT", EXAMPLE_MS + 3 * INT64_C(86400000));
    check_prefixes(EXAMPLE_ASC, EXAMPLE_MS);
}

/* ---- RFC 850 two-digit years (RFC 9110 §5.6.7) ---- */

static void test_rfc850_fifty_year_rule(void **state) {
    (void)state;
    const int64_t now = INT64_C(1718452800000); /* 2024-06-15T12:00:00Z: the limit is 2074-06-15T12:00:00Z */
    assert_date_ms("Friday, 15-Jun-74 12:00:00 GMT", now, INT64_C(3296289600000));   /* exactly 50 y: 2074 */
    assert_date_ms("Saturday, 15-Jun-74 12:00:01 GMT", now, INT64_C(140529601000));  /* 1 s more: 1974 */
    assert_date_ms("Thursday, 15-Jun-73 12:00:00 GMT", now, INT64_C(3264753600000)); /* 2073 */
    assert_date_ms("Sunday, 15-Jun-75 12:00:00 GMT", now, INT64_C(172065600000));    /* 1975 */
    assert_date_ms("Saturday, 15-Jun-24 12:00:00 GMT", now, INT64_C(1718452800000)); /* 2024 */
    assert_date_ms(EXAMPLE_850, now, EXAMPLE_MS);                                    /* 1994 */

    /* Without a clock the reference is 2000-01-01T00:00:00Z: the limit is 2050-01-01T00:00:00Z. */
    assert_date_ms("Saturday, 01-Jan-50 00:00:00 GMT", 0, INT64_C(2524608000000));
    assert_date_ms("Sunday, 01-Jan-50 00:00:01 GMT", 0, INT64_C(-631151999000));
    assert_date_ms("Friday, 31-Dec-49 23:59:59 GMT", 0, INT64_C(2524607999000));
    assert_date_ms("Saturday, 01-Jan-00 00:00:00 GMT", 0, INT64_C(946684800000));
    assert_date_ms("Friday, 01-Jan-99 00:00:00 GMT", 0, INT64_C(915148800000));
    /* A negative now_ms is "unknown" too. */
    assert_date_ms("Friday, 01-Jan-99 00:00:00 GMT", -5, INT64_C(915148800000));

    /* Feb 29 resolves to a year that has one. */
    assert_date_ms("Tuesday, 29-Feb-00 00:00:00 GMT", now, INT64_C(951782400000));
    /* Reference 2350-01-01: 29 Feb 2400 is past the limit and 2300, 2200, 2100 are not leap: 2000. */
    assert_date_ms("Tuesday, 29-Feb-00 00:00:00 GMT", INT64_C(11991628800000), INT64_C(951782400000));
    /* A clock past year 9999 is clamped there instead of overflowing: 94 is then 9994. */
    assert_date_ms(EXAMPLE_850, INT64_MAX, INT64_C(253239727777000));
}

/* ---- Retry-After as an HTTP-date ---- */

static void test_retry_after_date(void **state) {
    (void)state;
    const int64_t ten_s_before = EXAMPLE_MS - 10000;
    /* Against the local clock, in all three formats. */
    assert_ra_ok(EXAMPLE_IMF, ten_s_before, NULL, 10000);
    assert_ra_ok(EXAMPLE_850, ten_s_before, NULL, 10000);
    assert_ra_ok(EXAMPLE_ASC, ten_s_before, NULL, 10000);
    assert_ra_ok(" " EXAMPLE_IMF "\t", ten_s_before, NULL, 10000);
    assert_ra_ok(EXAMPLE_IMF, ten_s_before + 1, NULL, 9999); /* now_ms keeps its milliseconds */

    /* Against the Date header: the local clock is ignored (skew immune), even when it is far off. */
    const char *date = "Sun, 06 Nov 1994 08:49:07 GMT"; /* 30 s before */
    assert_ra_ok(EXAMPLE_IMF, 0, date, 30000);
    assert_ra_ok(EXAMPLE_IMF, ten_s_before, date, 30000);
    assert_ra_ok(EXAMPLE_IMF, INT64_C(1718452800000), date, 30000); /* client clock 30 years ahead */
    assert_ra_ok(EXAMPLE_850, INT64_C(1718452800000), date, 30000);
    assert_ra_ok(EXAMPLE_ASC, 1, date, 30000);
    assert_ra_ok(EXAMPLE_IMF, 0, "Sunday, 06-Nov-94 08:49:07 GMT", 30000);
    assert_ra_ok(EXAMPLE_IMF, 0, "Sun Nov  6 08:49:07 1994", 30000);
    /* An RFC 850 Retry-After without a clock uses the Date header as its reference year. */
    assert_ra_ok("Friday, 15-Jun-74 12:00:00 GMT", 0, "Sat, 15 Jun 2024 12:00:00 GMT",
                 INT64_C(3296289600000) - INT64_C(1718452800000));

    /* An invalid Date header falls back to the clock. */
    assert_ra_ok(EXAMPLE_IMF, ten_s_before, "yesterday", 10000);
    assert_ra_ok(EXAMPLE_IMF, ten_s_before, "Sun, 06 Nov 1994 08:49:07 UTC", 10000);
    int64_t got = UNTOUCHED;
    assert_int_equal(rf_retry_after_parse(EXAMPLE_IMF, strlen(EXAMPLE_IMF), ten_s_before, NULL, 29, &got), RF_RA_OK);
    assert_true(got == 10000);
    /* date_len bounds the Date header: a truncated one does not parse, so the clock is used. */
    got = UNTOUCHED;
    assert_int_equal(rf_retry_after_parse(EXAMPLE_IMF, strlen(EXAMPLE_IMF), ten_s_before, date, 28, &got), RF_RA_OK);
    assert_true(got == 10000);
}

static void test_retry_after_date_past(void **state) {
    (void)state;
    assert_ra_ok(EXAMPLE_IMF, EXAMPLE_MS, NULL, 0);
    assert_ra_ok(EXAMPLE_IMF, EXAMPLE_MS + 1, NULL, 0);
    assert_ra_ok(EXAMPLE_IMF, INT64_C(1718452800000), NULL, 0);
    assert_ra_ok(EXAMPLE_IMF, 0, "Mon, 07 Nov 1994 08:49:37 GMT", 0);
    assert_ra_ok("Sat, 01 Jan 0000 00:00:00 GMT", INT64_C(1718452800000), NULL, 0);
    /* Extremes stay in range: no overflow, never negative. */
    assert_ra_ok(EXAMPLE_IMF, INT64_MAX, NULL, 0);
    assert_ra_ok("Sat, 01 Jan 0000 00:00:00 GMT", INT64_MAX, NULL, 0);
    assert_ra_ok("Fri, 31 Dec 9999 23:59:59 GMT", 1, NULL, INT64_C(253402300799000) - 1);
    assert_ra_ok("Fri, 31 Dec 9999 23:59:59 GMT", 0, "Sat, 01 Jan 0000 00:00:00 GMT",
                 INT64_C(253402300799000) + INT64_C(62167219200000));
}

static void test_no_clock(void **state) {
    (void)state;
    assert_ra_status(EXAMPLE_IMF, 0, NULL, RF_RA_NO_CLOCK);
    assert_ra_status(EXAMPLE_850, 0, NULL, RF_RA_NO_CLOCK);
    assert_ra_status(EXAMPLE_ASC, 0, NULL, RF_RA_NO_CLOCK);
    assert_ra_status(EXAMPLE_IMF, -1, NULL, RF_RA_NO_CLOCK);
    assert_ra_status(EXAMPLE_IMF, INT64_MIN, NULL, RF_RA_NO_CLOCK);
    assert_ra_status(EXAMPLE_IMF, 0, "", RF_RA_NO_CLOCK);
    assert_ra_status(EXAMPLE_IMF, 0, "not a date", RF_RA_NO_CLOCK);
    /* Malformed beats missing clock; seconds never need one. */
    assert_ra_status("Sun, 31 Apr 1994 08:49:37 GMT", 0, NULL, RF_RA_INVALID);
    assert_ra_ok("3", 0, NULL, 3000);
}

static void test_status_names(void **state) {
    (void)state;
    assert_string_equal(rf_retry_after_status_name(RF_RA_ABSENT), "absent");
    assert_string_equal(rf_retry_after_status_name(RF_RA_OK), "ok");
    assert_string_equal(rf_retry_after_status_name(RF_RA_INVALID), "invalid");
    assert_string_equal(rf_retry_after_status_name(RF_RA_TOO_LONG), "too-long");
    assert_string_equal(rf_retry_after_status_name(RF_RA_NO_CLOCK), "no-clock");
    assert_string_equal(rf_retry_after_status_name((rf_retry_after_status)99), "unknown");
    assert_int_equal(RF_RA_ABSENT, 0);
    assert_int_equal(RF_RA_OK, 1);
    assert_int_equal(RF_RA_INVALID, 2);
    assert_int_equal(RF_RA_TOO_LONG, 3);
    assert_int_equal(RF_RA_NO_CLOCK, 4);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delay_seconds),
        cmocka_unit_test(test_delay_seconds_respects_len),
        cmocka_unit_test(test_absent),
        cmocka_unit_test(test_delay_seconds_invalid),
        cmocka_unit_test(test_delay_seconds_too_long),
        cmocka_unit_test(test_http_date_formats),
        cmocka_unit_test(test_leap_years_and_seconds),
        cmocka_unit_test(test_http_date_invalid),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_rfc850_fifty_year_rule),
        cmocka_unit_test(test_retry_after_date),
        cmocka_unit_test(test_retry_after_date_past),
        cmocka_unit_test(test_no_clock),
        cmocka_unit_test(test_status_names),
    };
    return cmocka_run_group_tests_name("retry_after", tests, NULL, NULL);
}
