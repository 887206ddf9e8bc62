/*
 * The writer's string escaping against a byte-at-a-time reference written here. The writer reads a string a
 * word (8 bytes) or a vector (16) at a time and copies the runs that need nothing whole (core/src/ledger/
 * ledger_format.c); the reference reads one byte at a time: RFC 3629 UTF-8 decoded to a code point and checked
 * against its length's range, surrogates and U+10FFFF; '"' and '\\' and the controls \b \f \n \r \t by their
 * short escapes, the other controls as \u00xx (lowercase hex), every other byte as is; a string that is not
 * UTF-8 refused, naming its field. For each string one field of a fixed record holds it (a different field from
 * one string to the next, so the line's bytes before it vary); the line must be the record's line with a marker
 * in that field, the marker replaced by the reference's escape. Each line is checked from rf_ledger_format (every
 * copy bounds-checked: the buffer is the line) and from rf_ledger_append_batch (a large scratch buffer: the
 * unchecked copies), read back from the file. The strings: every byte 0x01..0xFF at every position of strings
 * of 1..40 bytes of ASCII, multi-byte sequences (valid, overlong, surrogates, past U+10FFFF, lone continuation
 * bytes, cut short) at every offset in strings of up to 40 bytes and cut short at the end, and random strings of
 * 0..40 bytes drawn from all of those; each string starts at the next offset (0..7) from an 8-byte boundary in
 * turn. A formatter whose fast path misreads one byte of a word or vector fails here (checked by breaking it).
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ledger_lines.h"
#include "ledger_sample.h"
#include "retryfreeze/ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_STR 40 /* the longest string drawn: five words, crossing the 16-byte vectors too */
#define MARK "@MARK@"

/* ---- the reference ------------------------------------------------------------------------------------------- */

/* The code point of the UTF-8 sequence at s (left >= 1 bytes), its length in *len; -1 when malformed. */
static long decode(const unsigned char *s, size_t left, size_t *len) {
    static const long min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    const unsigned char a = s[0];
    size_t n;
    long cp;
    if (a < 0x80) {
        *len = 1;
        return a;
    }
    if ((a & 0xE0) == 0xC0) {
        n = 2;
        cp = a & 0x1F;
    } else if ((a & 0xF0) == 0xE0) {
        n = 3;
        cp = a & 0x0F;
    } else if ((a & 0xF8) == 0xF0) {
        n = 4;
        cp = a & 0x07;
    } else {
        return -1; /* a continuation byte, or 0xF8..0xFF */
    }
    if (left < n) return -1;
    for (size_t k = 1; k < n; k++) {
        if ((s[k] & 0xC0) != 0x80) return -1;
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    if (cp < min_of[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
    *len = n;
    return cp;
}

/* s[0..n) escaped into out (room for 6 n bytes), its length in *out_len; false when s is not UTF-8. */
static bool reference(const unsigned char *s, size_t n, char *out, size_t *out_len) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t len;
        const long cp = decode(s + i, n - i, &len);
        if (cp < 0) return false;
        if (cp == '"' || cp == '\\') {
            out[o++] = '\\';
            out[o++] = (char)cp;
        } else if (cp < 0x20) {
            static const char shorts[] = {['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't'};
            if ((size_t)cp < sizeof shorts && shorts[cp] != 0) {
                out[o++] = '\\';
                out[o++] = shorts[cp];
            } else {
                o += (size_t)sprintf(out + o, "\\u%04lx", cp);
            }
        } else {
            memcpy(out + o, s + i, len);
            o += len;
        }
        i += len;
    }
    *out_len = o;
    return true;
}

/* ---- the fields ---------------------------------------------------------------------------------------------- */

/* The fields a string goes into; the path three ways: alone, as a query name, as a query value (redacted). */
typedef enum field {
    F_ROUTE,
    F_METHOD,
    F_PATH,
    F_QUERY_NAME,
    F_QUERY_VALUE,
    F_KEY,
    F_POLICY,
    F_OUTCOME,
    F_REASON,
    F_CLASS0,
    F_REASON1,
    F_RETRY_AFTER0,
    F_RETRY_AFTER_HEADER0,
    F_WAIT0,
    F_DATE0,
    F_HOST,
    F_BUDGET,
    FIELDS
} field;

/* The JSON path rf_ledger_format names when the field is not UTF-8. */
static const char *const field_path[FIELDS] = {"$.route",
                                               "$.method",
                                               "$.path",
                                               "$.path",
                                               "$.path",
                                               "$.key",
                                               "$.policy",
                                               "$.outcome",
                                               "$.reason",
                                               "$.tries[0].class",
                                               "$.tries[1].reason",
                                               "$.tries[0].retry_after",
                                               "$.tries[0].retry_after_header",
                                               "$.tries[0].wait.ratelimit",
                                               "$.tries[0].date",
                                               "$.host",
                                               "$.budget"};

/* The record every line starts from: the ledger tests' sample (ledger_sample.h) with every string field set,
 * its first try's wait fields too. */
static rf_ledger_record base_record(void) {
    rf_ledger_record r = ledger_sample();
    r.tries[0].retry_after_header = "retry-after";
    r.tries[0].timeout_ms = 2000;
    r.tries[0].wait[RF_WAIT_RATELIMIT] = "t=1";
    r.tries[0].date = "Sun, 29 Nov 2026 17:20:01 GMT";
    r.host = "web-3";
    r.budget = "route";
    return r;
}

/* Puts value into field f of r; the path kinds wrap it ("/p?" value "=v", "/p?x=" value) in buf. */
static void set_field(rf_ledger_record *r, field f, const char *value, char *buf, size_t cap) {
    switch (f) {
    case F_ROUTE: r->route = value; return;
    case F_METHOD: r->method = value; return;
    case F_PATH: r->path = value; return;
    case F_QUERY_NAME:
        snprintf(buf, cap, "/p?%s=v", value);
        r->path = buf;
        return;
    case F_QUERY_VALUE:
        snprintf(buf, cap, "/p?x=%s", value);
        r->path = buf;
        return;
    case F_KEY: r->key = value; return;
    case F_POLICY: r->policy = value; return;
    case F_OUTCOME: r->outcome = value; return;
    case F_REASON: r->reason = value; return;
    case F_CLASS0: r->tries[0].class_name = value; return;
    case F_REASON1: r->tries[1].reason = value; return;
    case F_RETRY_AFTER0: r->tries[0].retry_after = value; return;
    case F_RETRY_AFTER_HEADER0: r->tries[0].retry_after_header = value; return;
    case F_WAIT0: r->tries[0].wait[RF_WAIT_RATELIMIT] = value; return;
    case F_DATE0: r->tries[0].date = value; return;
    case F_HOST: r->host = value; return;
    case F_BUDGET: r->budget = value; return;
    case FIELDS: break;
    }
    fail_msg("no field %d", (int)f);
}

/* Per field: the record's line with MARK in the field, split around where the field's escaped bytes go. */
typedef struct frame {
    char *before, *after;
    size_t before_len, after_len;
} frame;
static frame frames[FIELDS];

static void build_frames(void) {
    for (int f = 0; f < FIELDS; f++) {
        char path[64];
        rf_ledger_record r = base_record();
        set_field(&r, (field)f, MARK, path, sizeof path);
        rf_error err;
        long len = rf_ledger_format(&r, line_buf, RF_LEDGER_MAX_LINE + 1, &err);
        assert_true(len > 0);
        /* The query value is redacted: its marker is not in the line, the value's place is "REDACTED" */
        const char *mark = f == F_QUERY_VALUE ? "/p?x=REDACTED" : MARK;
        char *at = strstr(line_buf, mark);
        assert_non_null(at);
        if (f == F_QUERY_VALUE) at += strlen(mark); /* the value adds nothing: an empty insertion after it */
        frame *fr = &frames[f];
        fr->before_len = (size_t)(at - line_buf);
        fr->before = malloc(fr->before_len + 1);
        const char *rest = f == F_QUERY_VALUE ? at : at + strlen(MARK);
        fr->after_len = strlen(rest);
        fr->after = malloc(fr->after_len + 1);
        assert_true(fr->before != NULL && fr->after != NULL);
        memcpy(fr->before, line_buf, fr->before_len);
        memcpy(fr->after, rest, fr->after_len + 1);
    }
}

/* The characters the path kinds cannot hold as themselves ('?' starts the query, '&' and '=' split it). */
static void fit_path(field f, unsigned char *s, size_t n) {
    if (f != F_PATH && f != F_QUERY_NAME && f != F_QUERY_VALUE) return;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '?' || s[i] == '&' || s[i] == '=') s[i] = '_';
}

/* The line the reference expects for s[0..n) in field f into want (NUL-terminated); false when s is refused. */
static bool expected_line(field f, const unsigned char *s, size_t n, char *want) {
    size_t esc_len = 0;
    char esc[6 * MAX_STR + 8];
    if (!reference(s, n, esc, &esc_len)) return false;
    if (f == F_QUERY_VALUE) esc_len = 0; /* redacted: only its being UTF-8 counts */
    memcpy(want, frames[f].before, frames[f].before_len);
    memcpy(want + frames[f].before_len, esc, esc_len);
    memcpy(want + frames[f].before_len + esc_len, frames[f].after, frames[f].after_len + 1);
    return true;
}

/* ---- the checks ---------------------------------------------------------------------------------------------- */

static long checked, refused, appended;

/* Records waiting for one batch: each owns its string (at an offset from an 8-byte boundary) and its line. */
#define PENDING 64
typedef struct pending {
    _Alignas(8) char str[MAX_STR + 16];
    char path[MAX_STR + 16];
    rf_ledger_record rec;
    bool ok;
    char want[1024];
} pending;
static pending queue[PENDING];
static size_t queued;

/* Appends the queued records as one batch and compares the file's lines with the reference's. */
static void flush(void) {
    if (queued == 0) return;
    const rf_ledger_record *recs[PENDING];
    rf_status status[PENDING];
    size_t oks = 0;
    for (size_t i = 0; i < queued; i++) {
        recs[i] = &queue[i].rec;
        oks += queue[i].ok;
    }
    assert_int_equal(rf_ledger_append_batch(ledger, recs, queued, status, NULL), oks);
    FILE *file = fopen(ledger_path, "rb");
    assert_non_null(file);
    for (size_t i = 0; i < queued; i++) {
        if (!queue[i].ok) {
            assert_int_equal(status[i], RF_EINVAL);
            continue;
        }
        assert_int_equal(status[i], RF_OK);
        size_t len = strlen(queue[i].want);
        if (fread(line_buf, 1, len + 1, file) != len + 1 || memcmp(line_buf, queue[i].want, len) != 0 ||
            line_buf[len] != '\n')
            fail_msg("appended in a batch, the line differs from the reference's:\n  got  %.*s\n  want %s", (int)len,
                     line_buf, queue[i].want);
        appended++;
    }
    assert_int_equal(fgetc(file), EOF);
    fclose(file);
    assert_int_equal(truncate(ledger_path, 0), 0);
    queued = 0;
}

/* Formats the record with s[0..n) (no NUL inside) in field f, the string starting `offset` bytes past an 8-byte
 * boundary, and compares with the reference; then queues it for a batch. */
static void check(const unsigned char *bytes, size_t n, field f, size_t offset, const char *what) {
    assert_true(n <= MAX_STR && offset < 8);
    pending *q = &queue[queued++];
    char *s = q->str + offset;
    memcpy(s, bytes, n);
    s[n] = '\0';
    fit_path(f, (unsigned char *)s, n);
    q->rec = base_record();
    set_field(&q->rec, f, s, q->path, sizeof q->path);
    q->ok = expected_line(f, (const unsigned char *)s, n, q->want);
    rf_error err;
    memset(&err, 0, sizeof err);
    long len = rf_ledger_format(&q->rec, line_buf, RF_LEDGER_MAX_LINE + 1, &err);
    if (!q->ok) {
        if (len != -1 || strcmp(err.path, field_path[f]) != 0 || strstr(err.message, "not valid UTF-8") == NULL)
            fail_msg("%s in %s: not UTF-8, yet gave %ld (%s: %s)", what, field_path[f], len, err.path, err.message);
        refused++;
    } else {
        if (len < 0) fail_msg("%s in %s: refused: %s: %s", what, field_path[f], err.path, err.message);
        if ((size_t)len != strlen(q->want) || memcmp(line_buf, q->want, (size_t)len) != 0) {
            size_t at = 0;
            while (at < (size_t)len && line_buf[at] == q->want[at]) at++;
            fail_msg("%s in %s: the line differs from the reference's at byte %zu:\n  got  ...%.60s\n  want ...%.60s",
                     what, field_path[f], at, line_buf + (at > 20 ? at - 20 : 0), q->want + (at > 20 ? at - 20 : 0));
        }
        checked++;
    }
    if (queued == PENDING) flush();
}

static unsigned case_no; /* picks the field and the offset of each string in turn */

static void check_next(const unsigned char *s, size_t n, const char *what) {
    case_no++;
    check(s, n, (field)(case_no % FIELDS), (case_no / FIELDS) % 8, what);
}

/* Every byte 0x01..0xFF at every position of 1..MAX_STR bytes of ASCII. */
static void test_every_byte_at_every_position(void **state) {
    (void)state;
    checked = refused = 0;
    for (unsigned b = 1; b <= 0xFF; b++) {
        for (size_t len = 1; len <= MAX_STR; len++) {
            for (size_t pos = 0; pos < len; pos++) {
                unsigned char s[MAX_STR];
                for (size_t i = 0; i < len; i++) s[i] = (unsigned char)('a' + i % 26);
                s[pos] = (unsigned char)b;
                char what[64];
                snprintf(what, sizeof what, "byte 0x%02x at %zu of %zu", b, pos, len);
                check_next(s, len, what);
            }
        }
    }
    print_message("%ld lines equal to the reference's, %ld refused as not UTF-8\n", checked, refused);
    assert_true(checked > 100000 && refused > 100000);
}

/* Multi-byte sequences, valid and not, at every offset of strings of up to MAX_STR bytes, whole and cut short (the
 * string ending inside the sequence), between ASCII or between escapes. */
static const char *const sequences[] = {"\xc2\x80",
                                        "\xdf\xbf",
                                        "\xc3\xa9",
                                        "\xc0\x80",
                                        "\xc1\xbf",
                                        "\xe0\xa0\x80",
                                        "\xe0\x9f\xbf",
                                        "\xe2\x82\xac",
                                        "\xe2\x80\xa8",
                                        "\xed\x9f\xbf",
                                        "\xed\xa0\x80",
                                        "\xed\xbf\xbf",
                                        "\xee\x80\x80",
                                        "\xef\xbf\xbf",
                                        "\xf0\x90\x80\x80",
                                        "\xf0\x8f\xbf\xbf",
                                        "\xf0\x9f\x98\x80",
                                        "\xf4\x8f\xbf\xbf",
                                        "\xf4\x90\x80\x80",
                                        "\xf5\x80\x80\x80",
                                        "\xf8\x88\x80\x80",
                                        "\xff",
                                        "\xfe",
                                        "\x80",
                                        "\xbf",
                                        "\xc3\xa9\xa9",
                                        "\xe2\x82",
                                        "\xf0\x9f\x98",
                                        "\xe2\x28\xa1",
                                        "\xc3\x28"};

static void test_sequences_across_words(void **state) {
    (void)state;
    checked = refused = 0;
    static const unsigned char fills[] = {'x', '\n', '"'};
    for (size_t q = 0; q < sizeof sequences / sizeof sequences[0]; q++) {
        const size_t ql = strlen(sequences[q]);
        for (size_t k = 0; k < sizeof fills; k++) {
            for (size_t at = 0; at + ql <= MAX_STR; at++) {
                for (size_t cut = 1; cut <= ql; cut++) {
                    unsigned char s[MAX_STR];
                    memset(s, fills[k], at);
                    memcpy(s + at, sequences[q], cut);
                    char what[64];
                    snprintf(what, sizeof what, "sequence %zu cut to %zu at %zu, fill 0x%02x", q, cut, at, fills[k]);
                    check_next(s, at + cut, what); /* ending inside or right after it */
                    const size_t tail = MAX_STR - at - cut < 9 ? MAX_STR - at - cut : 9;
                    memset(s + at + cut, fills[k], tail);
                    check_next(s, at + cut + tail, what); /* followed by more */
                }
            }
        }
    }
    print_message("%ld lines equal to the reference's, %ld refused as not UTF-8\n", checked, refused);
    assert_true(checked > 1000 && refused > 1000);
}

/* Random strings of 0..MAX_STR bytes: ASCII mostly, controls, well-formed characters, now and then a sequence of
 * the list above or any byte (which a string cut at MAX_STR may also end inside). */
static void test_random_strings(void **state) {
    (void)state;
    static const size_t valid[] = {0, 1, 2, 5, 7, 8, 9, 12, 13, 14, 16, 17}; /* the well-formed ones of sequences */
    checked = refused = 0;
    uint64_t x = 0x9E3779B97F4A7C15u; /* xorshift64, fixed seed: the same strings every run */
    for (int round = 0; round < 60000; round++) {
        unsigned char s[MAX_STR + 4];
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const size_t len = (size_t)(x % (MAX_STR + 1));
        size_t n = 0;
        while (n < len) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const unsigned kind = (unsigned)(x >> 58), pick = (unsigned)(x >> 8); /* kind: 0..63 */
            if (kind < 40) {
                s[n++] = (unsigned char)(0x20 + pick % 0x5F); /* printable ASCII, '"' and '\\' among them */
            } else if (kind < 48) {
                s[n++] = (unsigned char)(1 + pick % 0x1F); /* a control */
            } else if (kind < 62) {
                const char *seq = sequences[valid[pick % (sizeof valid / sizeof valid[0])]];
                for (size_t k = 0; seq[k] && n < len; k++) s[n++] = (unsigned char)seq[k];
            } else if (kind < 63) {
                const char *seq = sequences[pick % (sizeof sequences / sizeof sequences[0])];
                for (size_t k = 0; seq[k] && n < len; k++) s[n++] = (unsigned char)seq[k];
            } else {
                s[n++] = (unsigned char)(1 + pick % 0xFF); /* any byte but NUL */
            }
        }
        char what[64];
        snprintf(what, sizeof what, "random string %d (%zu bytes)", round, n);
        check_next(s, n, what);
    }
    print_message("%ld lines equal to the reference's, %ld refused as not UTF-8\n", checked, refused);
    assert_true(checked > 10000 && refused > 10000);
}

static int setup(void **state) {
    (void)state;
    /* One long line first: the scratch buffer grows to hold it, so a batch's lines are written unchecked. */
    static char big[100000];
    memset(big, 'b', sizeof big - 1);
    rf_ledger_record r = base_record();
    r.policy = big;
    if (ledger_lines_setup("ledger-escape", &r) != 0) return -1;
    build_frames();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    flush();
    print_message("%ld lines appended in batches and read back equal to the reference's\n", appended);
    ledger_lines_teardown();
    for (int f = 0; f < FIELDS; f++) {
        free(frames[f].before);
        free(frames[f].after);
    }
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_byte_at_every_position),
        cmocka_unit_test(test_sequences_across_words),
        cmocka_unit_test(test_random_strings),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
