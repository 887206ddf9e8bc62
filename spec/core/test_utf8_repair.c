/*
 * Text from the wire made fit for a ledger line (rf_utf8_repair, retryfreeze/ledger.h), against a reference written
 * here from RFC 3629's definition rather than its table: a sequence is well-formed when its lead byte announces its
 * length, its continuation bytes are 10xxxxxx, and the code point it decodes to needs exactly that length (no
 * overlong form), is no surrogate (U+D800..U+DFFF) and is at most U+10FFFF. Enumerated: every string of one and two
 * bytes, every three-byte string whose bytes come from the values where the rule changes (the edges of each lead and
 * continuation range), and every four-byte one of those edges; each compared with the reference, byte for byte.
 * Then: a well-formed string comes back unchanged, the size query agrees with what is written, and a short buffer
 * never holds half a sequence.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "retryfreeze/ledger.h"
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The length of the well-formed sequence at s[0..n), or 0: RFC 3629 §3's definition, decoded. */
static size_t reference_sequence(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) {
        len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0; /* a continuation byte, or F8..FF */
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

/* The reference repair of s[0..n) into out (room for 3n + 1): each stray byte as EF BF BD. Returns its length. */
static size_t reference_repair(const unsigned char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t len = reference_sequence(s + i, n - i);
        if (len) {
            memcpy(out + o, s + i, len);
            o += len, i += len;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3, i += 1;
        }
    }
    out[o] = '\0';
    return o;
}

/* rf_utf8_repair on s[0..n) against the reference: the size query, the text, and unchanged when well-formed. */
static void compare(const unsigned char *s, size_t n) {
    char want[3 * 8 + 1], got[3 * 8 + 1];
    size_t want_len = reference_repair(s, n, want);
    size_t need = rf_utf8_repair((const char *)s, n, NULL, 0);
    memset(got, 'x', sizeof got);
    size_t len = rf_utf8_repair((const char *)s, n, got, sizeof got);
    if (need != want_len || len != want_len || memcmp(got, want, want_len + 1) != 0) {
        char hex[64] = "";
        for (size_t i = 0; i < n; i++) snprintf(hex + 3 * i, sizeof hex - 3 * i, "%02X ", s[i]);
        fail_msg("input %s: want %zu bytes, the size query said %zu, wrote %zu", hex, want_len, need, len);
    }
}

static void test_every_short_string(void **state) {
    (void)state;
    unsigned char s[2];
    for (unsigned a = 0; a < 256; a++) {
        s[0] = (unsigned char)a;
        compare(s, 1);
        for (unsigned b = 0; b < 256; b++) {
            s[1] = (unsigned char)b;
            compare(s, 2);
        }
    }
}

/* Where the rule changes: ASCII's end, each continuation range's edges, each lead range's edges, F5..FF. */
static const unsigned char EDGES[] = {0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF,
                                      0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE,
                                      0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF7, 0xF8, 0xFF};

static void test_edge_strings(void **state) {
    (void)state;
    size_t n = sizeof EDGES;
    unsigned char s[4];
    for (size_t a = 0; a < n; a++) {
        for (size_t b = 0; b < n; b++) {
            for (size_t c = 0; c < n; c++) {
                s[0] = EDGES[a], s[1] = EDGES[b], s[2] = EDGES[c];
                compare(s, 3);
                for (size_t d = 0; d < n; d++) {
                    s[3] = EDGES[d];
                    compare(s, 4);
                }
            }
        }
    }
}

static void test_well_formed_unchanged(void **state) {
    (void)state;
    const char *text = "/caf\xC3\xA9/\xE2\x82\xAC/\xF0\x9F\x98\x80/\xC2\x85/\xEF\xBF\xBD";
    char out[64];
    assert_int_equal(rf_utf8_repair(text, strlen(text), out, sizeof out), strlen(text));
    assert_string_equal(out, text);
    assert_int_equal(rf_utf8_repair("", 0, out, sizeof out), 0);
    assert_string_equal(out, "");
}

/* A buffer too short: whole sequences only, then the NUL; the return still the whole length. */
static void test_short_buffer(void **state) {
    (void)state;
    const char *text = "a\xC3(b"; /* a, U+FFFD for C3, (, b: 6 bytes */
    char out[8];
    for (size_t cap = 0; cap <= sizeof out; cap++) {
        memset(out, 'x', sizeof out);
        assert_int_equal(rf_utf8_repair(text, 4, cap ? out : NULL, cap), 6);
        if (cap == 0) continue;
        const char *want = cap <= 1   ? ""
                           : cap <= 4 ? "a"
                           : cap == 5 ? "a\xEF\xBF\xBD"
                           : cap == 6 ? "a\xEF\xBF\xBD("
                                      : "a\xEF\xBF\xBD(b";
        assert_string_equal(out, want);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_short_string),
        cmocka_unit_test(test_edge_strings),
        cmocka_unit_test(test_well_formed_unchanged),
        cmocka_unit_test(test_short_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
