/*
 * Byte-level checks on ledger text. JSON text is UTF-8 (RFC 8259 §8.1); cJSON neither validates UTF-8 nor
 * rejects raw control characters inside strings, and it silently truncates a string at a \u0000 escape, so
 * the reader checks those before parsing and the writer refuses strings that are not UTF-8.
 */
#include "ledger_internal.h"

#include <stdint.h>
#include <string.h>

size_t rfi_ledger_utf8_sequence(const unsigned char *p, size_t n) {
    unsigned char c = p[0];

    if (c < 0x80) {
        return 1;
    }
    if (c < 0xC2) { /* a continuation byte, or an overlong 2-byte lead */
        return 0;
    }
    if (c < 0xE0) {
        return (n >= 2 && (p[1] & 0xC0) == 0x80) ? 2 : 0;
    }
    if (c < 0xF0) {
        if (n < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) {
            return 0;
        }
        if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] > 0x9F)) { /* overlong; surrogate */
            return 0;
        }
        return 3;
    }
    if (c < 0xF5) {
        if (n < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) {
            return 0;
        }
        if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F)) { /* overlong; above U+10FFFF */
            return 0;
        }
        return 4;
    }
    return 0;
}

bool rfi_ledger_utf8_valid(const char *s, size_t len) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    while (i < len) {
        uint64_t word;
        if (len - i >= 8 && (memcpy(&word, p + i, 8), (word & UINT64_C(0x8080808080808080)) == 0)) {
            i += 8; /* eight ASCII bytes at once: the common case of a ledger's strings */
            continue;
        }
        size_t n = rfi_ledger_utf8_sequence(p + i, len - i);
        if (n == 0) {
            return false;
        }
        i += n;
    }
    return true;
}

size_t rfi_ledger_text_check(const char *s, size_t len, const char **why) {
    const unsigned char *p = (const unsigned char *)s;
    bool in_string = false;
    size_t i = 0;

    while (i < len) {
        unsigned char c = p[i];
        if (c == 0) {
            *why = "a NUL byte";
            return i;
        }
        if (c >= 0x80) {
            size_t n = rfi_ledger_utf8_sequence(p + i, len - i);
            if (n == 0) {
                *why = "invalid UTF-8";
                return i;
            }
            i += n;
            continue;
        }
        if (!in_string) {
            in_string = c == '"';
            i++;
            continue;
        }
        if (c < 0x20) {
            *why = "a raw control character inside a string";
            return i;
        }
        if (c == '\\') {
            if (i + 5 < len && p[i + 1] == 'u' && memcmp(p + i + 2, "0000", 4) == 0) {
                *why = "the escape \\u0000";
                return i;
            }
            i += 2; /* the escaped character cannot end the string */
            continue;
        }
        in_string = c != '"';
        i++;
    }
    return len;
}

size_t rf_utf8_repair(const char *s, size_t len, char *out, size_t cap) {
    static const char replacement[3] = {'\xEF', '\xBF', '\xBD'}; /* U+FFFD */
    const unsigned char *p = (const unsigned char *)s;
    size_t need = 0, put = 0;
    for (size_t i = 0; i < len;) {
        size_t n = p[i] < 0x80 ? 1 : rfi_ledger_utf8_sequence(p + i, len - i);
        const char *from = n ? s + i : replacement;
        size_t w = n ? n : sizeof replacement;
        if (out && put == need && put + w < cap) {
            memcpy(out + put, from, w);
            put += w;
        }
        need += w;
        i += n ? n : 1;
    }
    if (out && cap > 0) out[put] = '\0';
    return need;
}
