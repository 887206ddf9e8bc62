/*
 * The ledger line's bytes for adversarial strings. The writer formats strings straight into its buffer, escaped
 * as cJSON prints them (core/src/ledger/ledger_format.c); cJSON is the oracle here: for each string, every string
 * field of a record holds it, and rf_ledger_format's line must equal, byte for byte, the line cJSON prints from
 * an object with the same fields in the writer's order (integers as raw tokens, the path without a query, so
 * unredacted). A string that is not UTF-8 (RFC 3629, checked by a validator written here from its table) must be
 * refused naming the first field in the writer's check order. Every line is also appended through
 * rf_ledger_append_batch (whose scratch buffer is large, so that most lines are written without a bound check)
 * and read back from the file, equal to the same oracle line. The strings: every byte 0x01..0xFF alone and at each
 * position of runs of 1 to 20 bytes (the 8-byte words the writer reads), every 2- and 3-byte sequence, 4-byte
 * ones over each lead byte and each second byte, overlong forms, surrogates, code points past U+10FFFF, sequences
 * cut short at the end or across a word, and long runs (of ASCII, of escapes, of 2-, 3- and 4-byte characters).
 * The timestamp is held to gmtime_r's calendar from 1970 to 9999, formatted alone and appended through a ledger
 * (which keeps its last minute's part).
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ledger_lines.h"
#include "retryfreeze/ledger.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LONG_RUN 9000 /* bytes; in every one of the 18 string fields, escaped 6 to 1: within RF_LEDGER_MAX_LINE */

/* RFC 3629 §4: UTF8-char = UTF8-1 / UTF8-2 / UTF8-3 / UTF8-4, each range of the table as written there. */
static bool in(unsigned char c, unsigned lo, unsigned hi) { return c >= lo && c <= hi; }

static bool utf8_ok(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        const unsigned char a = s[i];
        const size_t left = n - i;
        if (a <= 0x7F) {
            i += 1;
        } else if (in(a, 0xC2, 0xDF) && left >= 2 && in(s[i + 1], 0x80, 0xBF)) {
            i += 2;
        } else if (left >= 3 && in(s[i + 2], 0x80, 0xBF) &&
                   ((a == 0xE0 && in(s[i + 1], 0xA0, 0xBF)) || (in(a, 0xE1, 0xEC) && in(s[i + 1], 0x80, 0xBF)) ||
                    (a == 0xED && in(s[i + 1], 0x80, 0x9F)) || (in(a, 0xEE, 0xEF) && in(s[i + 1], 0x80, 0xBF)))) {
            i += 3;
        } else if (left >= 4 && in(s[i + 2], 0x80, 0xBF) && in(s[i + 3], 0x80, 0xBF) &&
                   ((a == 0xF0 && in(s[i + 1], 0x90, 0xBF)) || (in(a, 0xF1, 0xF3) && in(s[i + 1], 0x80, 0xBF)) ||
                    (a == 0xF4 && in(s[i + 1], 0x80, 0x8F)))) {
            i += 4;
        } else {
            return false;
        }
    }
    return true;
}

/* A record whose every string field holds s (the path as "/" + s, without '?': the query is redacted). */
typedef struct fields {
    char path[LONG_RUN + 16];
} fields;

static rf_ledger_record record_of(const char *s, fields *f) {
    snprintf(f->path, sizeof f->path, "/%s", s);
    for (char *q; (q = strchr(f->path, '?')) != NULL;) *q = '_';
    rf_ledger_record r;
    memset(&r, 0, sizeof r);
    r.ts_ms = 1795972801123;
    r.route = s;
    r.method = s;
    r.path = f->path;
    r.key = s;
    r.policy = s;
    r.attempts = 2;
    r.elapsed_ms = 1234;
    r.outcome = s;
    r.reason = s;
    r.ok = true;
    r.status = 201;
    r.body_len = -17;
    r.n_tries = 2;
    r.tries[0] = (rf_ledger_try){.class_name = s,
                                 .status = 503,
                                 .elapsed_ms = 20,
                                 .delay_ms = 0,
                                 .reason = s,
                                 .retry_after = s,
                                 .retry_after_header = s,
                                 .timeout_ms = 2000,
                                 .wait = {[RF_WAIT_RETRY_AFTER] = s, [RF_WAIT_RATELIMIT] = s},
                                 .date = s};
    r.tries[1] = (rf_ledger_try){.class_name = s,
                                 .status = 201,
                                 .elapsed_ms = 30,
                                 .delay_ms = 1000,
                                 .reason = s,
                                 .timeout_ms = 1,
                                 .transport = "tls",
                                 .not_sent = true,
                                 .peer = "[::1]:8443"};
    r.host = s;
    r.budget = s;
    return r;
}

static void add_raw_int(cJSON *o, const char *name, long long v) {
    char digits[32];
    snprintf(digits, sizeof digits, "%lld", v);
    cJSON_AddItemToObject(o, name, cJSON_CreateRaw(digits));
}

static void add_string_or_null(cJSON *o, const char *name, const char *s) {
    if (s)
        cJSON_AddStringToObject(o, name, s);
    else
        cJSON_AddNullToObject(o, name);
}

/* The line cJSON prints for r (the caller frees it). */
static char *oracle_line(const rf_ledger_record *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "ts", "2026-11-29T17:20:01.123Z");
    cJSON_AddStringToObject(o, "route", r->route);
    cJSON_AddStringToObject(o, "method", r->method);
    cJSON_AddStringToObject(o, "path", r->path);
    add_string_or_null(o, "key", r->key);
    cJSON_AddStringToObject(o, "policy", r->policy);
    add_raw_int(o, "attempts", r->attempts);
    add_raw_int(o, "elapsed_ms", r->elapsed_ms);
    cJSON_AddStringToObject(o, "outcome", r->outcome);
    cJSON_AddStringToObject(o, "reason", r->reason);
    cJSON_AddBoolToObject(o, "ok", r->ok);
    add_raw_int(o, "status", r->status);
    add_raw_int(o, "body_len", r->body_len);
    cJSON *tries = cJSON_AddArrayToObject(o, "tries");
    for (size_t i = 0; i < r->n_tries; i++) {
        const rf_ledger_try *t = &r->tries[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "class", t->class_name);
        add_raw_int(e, "status", t->status);
        add_raw_int(e, "elapsed_ms", t->elapsed_ms);
        add_raw_int(e, "delay_ms", t->delay_ms);
        cJSON_AddStringToObject(e, "reason", t->reason);
        add_string_or_null(e, "retry_after", t->retry_after);
        if (t->retry_after_header) cJSON_AddStringToObject(e, "retry_after_header", t->retry_after_header);
        if (t->timeout_ms > 0) add_raw_int(e, "timeout_ms", t->timeout_ms);
        if (t->transport) cJSON_AddStringToObject(e, "transport", t->transport);
        if (t->not_sent) cJSON_AddTrueToObject(e, "not_sent");
        cJSON *wait = NULL;
        for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) {
            if (!t->wait[h]) continue;
            if (!wait) wait = cJSON_AddObjectToObject(e, "wait");
            cJSON_AddStringToObject(wait, rf_wait_header_name((rf_wait_header)h), t->wait[h]);
        }
        if (t->date) cJSON_AddStringToObject(e, "date", t->date);
        if (t->peer) cJSON_AddStringToObject(e, "peer", t->peer);
        cJSON_AddItemToArray(tries, e);
    }
    if (r->host) cJSON_AddStringToObject(o, "host", r->host);
    if (r->budget) cJSON_AddStringToObject(o, "budget", r->budget);
    char *line = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    assert_non_null(line);
    return line;
}

static long checked, refused, appended;

/* Lines waiting to be appended as one batch, each with its own copy of the record's strings and its oracle line. */
#define PENDING 64
typedef struct pending {
    char str[64];
    fields f;
    rf_ledger_record rec;
    char *want;
} pending;
static pending queue[PENDING];
static size_t queued;

/* Appends the queued records in one batch, reads the file back and compares each line with its oracle line. */
static void flush(void) {
    if (queued == 0) return;
    const rf_ledger_record *recs[PENDING];
    rf_status status[PENDING];
    for (size_t i = 0; i < queued; i++) recs[i] = &queue[i].rec;
    assert_int_equal(rf_ledger_append_batch(ledger, recs, queued, status, NULL), queued);
    FILE *f = fopen(ledger_path, "rb");
    assert_non_null(f);
    for (size_t i = 0; i < queued; i++) {
        size_t len = strlen(queue[i].want);
        if (fread(line_buf, 1, len + 1, f) != len + 1 || memcmp(line_buf, queue[i].want, len) != 0 ||
            line_buf[len] != '\n')
            fail_msg("the appended line of \"%.40s\" differs from cJSON's:\n  got  %.120s\n  want %.120s", queue[i].str,
                     line_buf, queue[i].want);
        cJSON_free(queue[i].want);
    }
    assert_int_equal(fgetc(f), EOF);
    fclose(f);
    assert_int_equal(truncate(ledger_path, 0), 0);
    appended += (long)queued;
    queued = 0;
}

/* Queues the line of s (n < 64 bytes) for flush, with want (taken over). */
static void queue_append(const char *s, size_t n, char *want) {
    if (n >= sizeof queue[0].str) {
        cJSON_free(want);
        return;
    }
    pending *q = &queue[queued++];
    memcpy(q->str, s, n + 1);
    q->rec = record_of(q->str, &q->f);
    q->want = want;
    if (queued == PENDING) flush();
}

/* Formats the record of s[0..n) (n == strlen(s)) and compares with the oracle, or checks the refusal. */
static void check(const char *s, size_t n, const char *what) {
    static fields f;
    rf_ledger_record r = record_of(s, &f);
    rf_error err;
    memset(&err, 0, sizeof err);
    long len = rf_ledger_format(&r, line_buf, RF_LEDGER_MAX_LINE + 1, &err);
    if (!utf8_ok((const unsigned char *)s, n)) {
        if (len != -1 || strcmp(err.path, "$.route") != 0 || strstr(err.message, "not valid UTF-8") == NULL)
            fail_msg("%s: invalid UTF-8 gave %ld (%s: %s)", what, len, err.path, err.message);
        refused++;
        return;
    }
    char *want = oracle_line(&r);
    if (len < 0) fail_msg("%s: refused: %s: %s", what, err.path, err.message);
    if ((size_t)len != strlen(want) || memcmp(line_buf, want, (size_t)len) != 0) {
        size_t at = 0;
        while (at < (size_t)len && line_buf[at] == want[at]) at++;
        fail_msg("%s: the line differs from cJSON's at byte %zu of %ld:\n  got  ...%.60s\n  want ...%.60s", what, at,
                 len, line_buf + (at > 20 ? at - 20 : 0), want + (at > 20 ? at - 20 : 0));
    }
    queue_append(s, n, want);
    checked++;
}

static void check_bytes(const unsigned char *b, size_t n, const char *what) {
    char s[64];
    assert_true(n < sizeof s);
    memcpy(s, b, n);
    s[n] = '\0';
    check(s, n, what);
}

/* Every byte, alone and at every position of runs of 1..20 bytes of 'a', 'é' or '\n'. */
static void test_every_byte_at_every_position(void **state) {
    (void)state;
    static const char *const fill[] = {"a", "\xc3\xa9", "\n"};
    for (unsigned b = 1; b <= 0xFF; b++) {
        char what[64];
        snprintf(what, sizeof what, "byte 0x%02x", b);
        unsigned char one = (unsigned char)b;
        check_bytes(&one, 1, what);
        for (size_t k = 0; k < 3; k++) {
            for (size_t len = 1; len <= 20; len++) {
                for (size_t pos = 0; pos < len; pos++) {
                    unsigned char s[64];
                    size_t n = 0;
                    for (size_t i = 0; i < len; i++) {
                        if (i == pos) {
                            s[n++] = one;
                        } else {
                            memcpy(s + n, fill[k], strlen(fill[k]));
                            n += strlen(fill[k]);
                        }
                    }
                    snprintf(what, sizeof what, "byte 0x%02x at %zu of %zu (fill %zu)", b, pos, len, k);
                    check_bytes(s, n, what);
                }
            }
        }
    }
    print_message("%ld lines equal to cJSON's, %ld refused as invalid UTF-8\n", checked, refused);
}

/* Every byte after every lead byte; third and fourth bytes at the edges of the continuation range (0x7F, 0x80, 0xBF,
 * 0xC0) for every second byte, and every third byte for second bytes at the edges; then RFC 3629's edges after 0..9
 * bytes of ASCII (so that they cross a word) and cut short at every length. */
static void test_multibyte_sequences(void **state) {
    (void)state;
    checked = refused = 0;
    char what[64];
    static const unsigned char edge[] = {0x7F, 0x80, 0x9F, 0xA0, 0xBF, 0xC0};
    for (unsigned a = 0x80; a <= 0xFF; a++) {
        for (unsigned b = 0x01; b <= 0xFF; b++) {
            const unsigned char two[2] = {(unsigned char)a, (unsigned char)b};
            snprintf(what, sizeof what, "%02x %02x", a, b);
            check_bytes(two, 2, what);
            if (a < 0xE0) continue;
            bool b_edge = memchr(edge, (int)b, sizeof edge) != NULL;
            for (unsigned c = 0x01; c <= 0xFF; c++) {
                if (!b_edge && memchr(edge, (int)c, sizeof edge) == NULL) continue;
                const unsigned char three[3] = {(unsigned char)a, (unsigned char)b, (unsigned char)c};
                snprintf(what, sizeof what, "%02x %02x %02x", a, b, c);
                check_bytes(three, 3, what);
                if (a < 0xF0) continue;
                for (size_t d = 0; d < sizeof edge; d++) {
                    const unsigned char four[4] = {(unsigned char)a, (unsigned char)b, (unsigned char)c, edge[d]};
                    snprintf(what, sizeof what, "%02x %02x %02x %02x", a, b, c, edge[d]);
                    check_bytes(four, 4, what);
                }
            }
        }
    }
    /* The edges of RFC 3629's table, after 0..9 ASCII bytes and cut short at every length. */
    static const char *const edges[] = {"\xc2\x80",
                                        "\xdf\xbf",
                                        "\xc0\x80",
                                        "\xc1\xbf",
                                        "\xe0\xa0\x80",
                                        "\xe0\x9f\xbf",
                                        "\xed\x9f\xbf",
                                        "\xed\xa0\x80",
                                        "\xed\xbf\xbf",
                                        "\xee\x80\x80",
                                        "\xef\xbf\xbf",
                                        "\xf0\x90\x80\x80",
                                        "\xf0\x8f\xbf\xbf",
                                        "\xf4\x8f\xbf\xbf",
                                        "\xf4\x90\x80\x80",
                                        "\xf5\x80\x80\x80",
                                        "\xff",
                                        "\xfe",
                                        "\x80",
                                        "\xbf"};
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
        for (size_t lead = 0; lead <= 9; lead++) {
            for (size_t cut = 1; cut <= strlen(edges[e]); cut++) {
                unsigned char s[32];
                memset(s, 'x', lead);
                memcpy(s + lead, edges[e], cut);
                snprintf(what, sizeof what, "edge %zu after %zu, %zu bytes", e, lead, cut);
                check_bytes(s, lead + cut, what);
                memcpy(s + lead + cut, "yz", 2);
                check_bytes(s, lead + cut + 2, what);
            }
        }
    }
    print_message("%ld lines equal to cJSON's, %ld refused as invalid UTF-8\n", checked, refused);
    assert_true(checked > 1000 && refused > 10000);
}

/* Long runs: ASCII, bytes that all need an escape, and characters of 2, 3 and 4 bytes; then one bad byte at the
 * end of each. */
static void test_long_runs(void **state) {
    (void)state;
    static const char *const units[] = {"a",
                                        "\"",
                                        "\\",
                                        "\x01",
                                        "\x1f",
                                        "\x7f",
                                        "\xc3\xa9",
                                        "\xe2\x82\xac",
                                        "\xf0\x9f\x98\x80",
                                        "ab\"cdefgh\\ij\tklmnopq"};
    static char s[LONG_RUN + 2];
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        size_t ul = strlen(units[u]), n = 0;
        while (n + ul <= LONG_RUN) {
            memcpy(s + n, units[u], ul);
            n += ul;
        }
        s[n] = '\0';
        char what[64];
        snprintf(what, sizeof what, "a run of unit %zu, %zu bytes", u, n);
        check(s, n, what);
        s[n] = '\xff';
        s[n + 1] = '\0';
        check(s, n + 1, what);
    }
}

/* A NUL ends a C string: the bytes after it are not part of the field. */
static void test_nul_ends_the_string(void **state) {
    (void)state;
    static const char s[] = "ab\0\xff";
    check(s, 2, "a NUL then an invalid byte");
    check("", 0, "the empty string");
}

/* The timestamp: "YYYY-MM-DDTHH:MM:SS.mmmZ" as gmtime_r and strftime give it, for every 13th day from 1970 to
 * 9999 (each at another time of day) and every day of the years around the leap rules (1970, 2000, 2100, 9999). */
static void check_ts(int64_t ts_ms) {
    static fields f;
    rf_ledger_record r = record_of("x", &f);
    r.ts_ms = ts_ms;
    rf_error err;
    long len = rf_ledger_format(&r, line_buf, RF_LEDGER_MAX_LINE + 1, &err);
    assert_true(len > 0);
    time_t seconds = (time_t)(ts_ms / 1000);
    struct tm tm;
    assert_non_null(gmtime_r(&seconds, &tm));
    char want[40];
    size_t n = strftime(want, sizeof want, "{\"ts\":\"%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(want + n, sizeof want - n, ".%03dZ\"", (int)(ts_ms % 1000));
    if (strncmp(line_buf, want, strlen(want)) != 0)
        fail_msg("ts %lld: got %.34s, want %s", (long long)ts_ms, line_buf, want);
}

static void test_timestamps(void **state) {
    (void)state;
    const int64_t day = 86400000, last = INT64_C(253402300799999);
    for (int64_t d = 0, k = 0; d * day <= last; d += 13, k++) check_ts(d * day + (k * 7919 * 1000 + k % 1000) % day);
    static const int64_t years[][2] = {{0, 3 * 366}, {10957 - 366, 10957 + 800}, {47482 - 400, 47482 + 400}};
    for (size_t y = 0; y < sizeof years / sizeof years[0]; y++)
        for (int64_t d = years[y][0]; d <= years[y][1]; d++) check_ts(d * day + d % day);
    for (int64_t t = last - 3 * day; t <= last; t += 999983) check_ts(t);
    check_ts(last);
    check_ts(0);
}

/* The same timestamps appended through one ledger, which keeps the minute of its last line: runs within a minute,
 * the ms either side of minute, hour, day and year boundaries, times going back, the same minute after another,
 * each line's ts as gmtime_r gives it. */
static void test_timestamps_appended(void **state) {
    (void)state;
    flush();
    const int64_t minute = 60000, day = 86400000, last = INT64_C(253402300799999);
    static const int64_t starts[] = {0, 1795886400000, 1795886459999, 946684799990, 951782399999, 4102444799998};
    int64_t ts[512];
    size_t n = 0;
    for (size_t k = 0; k < sizeof starts / sizeof starts[0]; k++) {
        for (int64_t d = 0; d < 24; d++) ts[n++] = starts[k] + d * 997; /* a run in one minute, then across one */
        ts[n++] = starts[k] + minute;
        ts[n++] = starts[k] + day;
        ts[n++] = starts[k] + 3; /* back to the minute before: the cache holds only the last */
        ts[n++] = starts[k] + 1 - (starts[k] > 0 ? 2 : 0);
    }
    for (int64_t t = last - 2 * minute; t <= last; t += 7919) ts[n++] = t;
    ts[n++] = last;
    ts[n++] = 0;
    assert_true(n <= sizeof ts / sizeof ts[0]);
    static fields f;
    rf_ledger_record r = record_of("x", &f);
    rf_error err;
    for (size_t i = 0; i < n; i++) {
        r.ts_ms = ts[i];
        assert_int_equal(rf_ledger_append(ledger, &r, &err), RF_OK);
    }
    FILE *file = fopen(ledger_path, "rb");
    assert_non_null(file);
    for (size_t i = 0; i < n; i++) {
        assert_non_null(fgets(line_buf, RF_LEDGER_MAX_LINE, file));
        time_t seconds = (time_t)(ts[i] / 1000);
        struct tm tm;
        assert_non_null(gmtime_r(&seconds, &tm));
        char want[40];
        size_t w = strftime(want, sizeof want, "{\"ts\":\"%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(want + w, sizeof want - w, ".%03dZ\"", (int)(ts[i] % 1000));
        if (strncmp(line_buf, want, strlen(want)) != 0)
            fail_msg("appended ts %lld (line %zu): got %.34s, want %s", (long long)ts[i], i + 1, line_buf, want);
    }
    fclose(file);
    assert_int_equal(truncate(ledger_path, 0), 0);
}

static int setup(void **state) {
    (void)state;
    /* One long line first: the scratch buffer grows to hold it, so the batches' lines mostly fit unchecked. */
    static char big[RF_LEDGER_MAX_LINE / 24]; /* one for each of the record's 17 strings, escaped: under the limit */
    memset(big, 'b', sizeof big - 1);
    static fields f;
    rf_ledger_record r = record_of(big, &f);
    r.path = "/";
    return ledger_lines_setup("ledger-format", &r);
}

static int teardown(void **state) {
    (void)state;
    flush();
    print_message("%ld lines appended in batches and read back equal to cJSON's\n", appended);
    ledger_lines_teardown();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_byte_at_every_position),
        cmocka_unit_test(test_multibyte_sequences),
        cmocka_unit_test(test_long_runs),
        cmocka_unit_test(test_nul_ends_the_string),
        cmocka_unit_test(test_timestamps),
        cmocka_unit_test(test_timestamps_appended),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
