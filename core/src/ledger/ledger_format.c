/*
 * A ledger record as one JSON line. Fields always appear in this order, every one of them present:
 *   ts, route, method, path, key, policy, attempts, elapsed_ms, outcome, reason, ok, status, body_len, tries
 * then, only when set, host, budget, inbound_deadline_ms and inbound_attempt.
 * and in each tries entry: class, status, elapsed_ms, delay_ms, reason, retry_after (null when absent), then, only
 * when set, retry_after_header, a hedged request's start_ms, hedge and fate, and the replay facts timeout_ms,
 * transport, not_sent, wait and date, and the try's peer (ledger.h).
 * Integers are emitted as plain integer tokens: a JSON library's number printer goes through a double and
 * "%1.15g", which prints 1e15 as "1e+15" and 2^53 as "9.00719925474099e+15" (lossy).
 * The line is written straight into the caller's buffer, with no tree and no allocation (an append is on
 * the request path): strings are escaped as cJSON prints them (RFC 8259 §7: '"', '\\' and the controls
 * \b \f \n \r \t by their short escapes, the other controls as \u00xx, every other byte as is), so the
 * lines are byte for byte those of the cJSON-built writer before (spec/core/test_ledger_format.c holds them to
 * cJSON's). Each string is read once (after strlen): sixteen bytes (a vector) or eight (a word) at a time up to the
 * next byte that needs a look (an escape or a byte of a multi-byte character, validated as UTF-8 there), runs of
 * the others copied whole; spec/core/test_ledger_escape.c holds them to a byte-at-a-time reference. A record that
 * fails on the way is checked field by field (check_record) for the error message, which names the same field
 * as before whatever the order the line is written in.
 * The path is recorded with every query value replaced by REDACTED (put_redacted_path): query strings carry
 * secrets (?api_key=…), and the ledger stores none.
 */
#include "ledger_internal.h"
#include "retryfreeze/outcome.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REDACTED "REDACTED"

#if defined(__GNUC__)
#define HOT_INLINE inline __attribute__((always_inline))
#define RFI_LEDGER_NOINLINE __attribute__((noinline))
#else
#define HOT_INLINE inline
#define RFI_LEDGER_NOINLINE
#endif

static bool safe_int(int64_t v) { return v >= -RFI_LEDGER_MAX_SAFE_INT && v <= RFI_LEDGER_MAX_SAFE_INT; }

/* The JSON path of a field for an error: "$.name", or "$.tries[i].name" when i >= 0. */
static void field_path(char *out, size_t cap, long i, const char *name) {
    if (i < 0)
        snprintf(out, cap, "$.%s", name);
    else
        snprintf(out, cap, "$.tries[%ld].%s", i, name);
}

/* A required (or, with nullable, optional) string field: present and UTF-8. Adds its length to *total. */
static bool check_string(const char *s, bool nullable, long i, const char *name, size_t *total, rf_error *err) {
    char field[64];

    if (!s) {
        if (nullable) {
            return true;
        }
        field_path(field, sizeof field, i, name);
        rfi_ledger_error(err, field, 0, 0, "%s is NULL; the ledger needs a string", field);
        return false;
    }
    size_t len = strlen(s);
    if (!rfi_ledger_utf8_valid(s, len)) {
        field_path(field, sizeof field, i, name);
        rfi_ledger_error(err, field, 0, 0, "%s is not valid UTF-8, as JSON text must be", field);
        return false;
    }
    *total += len;
    return true;
}

static bool check_int(int64_t v, long i, const char *name, rf_error *err) {
    char field[64];

    if (safe_int(v)) {
        return true;
    }
    field_path(field, sizeof field, i, name);
    rfi_ledger_error(err, field, 0, 0, "%s is %" PRId64 ", outside +-2^53 (not exact as a JSON number)", field, v);
    return false;
}

/* A try's transport, when given: one of RF_TRANSPORTS (what the reader accepts back). */
static bool transport_known(const char *s) {
    rf_transport tr;
    return s == NULL || rf_transport_parse(s, strlen(s), &tr) == 0;
}

/* The replay facts of a try (ledger.h): a timeout of 0 or more, a transport outcome's name, UTF-8 wait headers. */
static bool check_try_facts(const rf_ledger_try *t, size_t i, size_t *total, rf_error *err) {
    const long at = (long)i;
    char field[64];
    if (t->timeout_ms < 0 || t->timeout_ms > RFI_LEDGER_MAX_SAFE_INT) {
        field_path(field, sizeof field, at, "timeout_ms");
        rfi_ledger_error(err, field, 0, 0, "%s is %" PRId64 ", outside 0..2^53 (0: not recorded)", field,
                         t->timeout_ms);
        return false;
    }
    if ((unsigned)t->grpc_status > RF_GRPC_STATUS_MAX) {
        field_path(field, sizeof field, at, "grpc_status");
        rfi_ledger_error(err, field, 0, 0, "%s is %d, outside 0..%d (0: absent or OK, not recorded)", field,
                         t->grpc_status, RF_GRPC_STATUS_MAX);
        return false;
    }
    if (!check_string(t->transport, true, at, "transport", total, err)) return false;
    if (!transport_known(t->transport)) {
        field_path(field, sizeof field, at, "transport");
        rfi_ledger_error(err, field, 0, 0, "%s is \"%.40s\", not a transport outcome", field, t->transport);
        return false;
    }
    for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) {
        char name[48];
        snprintf(name, sizeof name, "wait.%s", rf_wait_header_name((rf_wait_header)h));
        if (!check_string(t->wait[h], true, at, name, total, err)) return false;
    }
    if (!check_string(t->date, true, at, "date", total, err)) return false;
    if (!check_string(t->peer, true, at, "peer", total, err)) return false;
    if (t->peer && !rfi_ledger_peer_ok(t->peer, strlen(t->peer))) {
        field_path(field, sizeof field, at, "peer");
        rfi_ledger_error(err, field, 0, 0, "%s is \"%.64s\", not \"host:port\" (port 1..65535)", field, t->peer);
        return false;
    }
    return true;
}

bool rf_ledger_peer_ok(const char *s, size_t len) { return s != NULL && rfi_ledger_peer_ok(s, len); }

bool rfi_ledger_peer_ok(const char *s, size_t len) {
    /* The port: the digits after the last ':', 1..5 of them, so the colon is among the last 6 bytes. */
    size_t colon = len;
    while (colon > 0 && len - colon <= 5 && s[colon - 1] != ':') colon--;
    if (colon < 2 || s[colon - 1] != ':' || colon - 1 > 253 || len - colon < 1 || s[colon] == '0') return false;
    long port = 0;
    for (size_t i = colon; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        port = port * 10 + (s[i] - '0');
    }
    if (port < 1 || port > 65535) return false;
    for (size_t i = 0; i + 1 < colon; i++) {
        const unsigned char b = (unsigned char)s[i];
        if (b <= ' ' || b == '"' || b == '\\' || b == 0x7f) return false;
    }
    return true;
}

bool rfi_ledger_fate_known(const char *s, size_t len) {
    for (int f = RF_FATE_NONE + 1; f < RF_TRY_FATE_COUNT; f++) {
        const char *name = rf_try_fate_name((rf_try_fate)f);
        if (strlen(name) == len && memcmp(name, s, len) == 0) return true;
    }
    return false;
}

/* A hedged request's fields of a try: a fate the vocabulary knows, a start_ms in 0..2^53; without a fate neither a
 * start_ms nor hedge (they are written with it). */
static HOT_INLINE bool hedge_fields_ok(const rf_ledger_try *t) {
    if (t->fate == NULL) return t->start_ms == 0 && !t->hedge;
    return rfi_ledger_fate_known(t->fate, strlen(t->fate)) && t->start_ms >= 0 && safe_int(t->start_ms);
}

static bool check_try(const rf_ledger_try *t, size_t i, size_t *total, rf_error *err) {
    const long at = (long)i;
    if (!(check_string(t->class_name, false, at, "class", total, err) &&
          check_string(t->reason, false, at, "reason", total, err) &&
          check_string(t->retry_after, true, at, "retry_after", total, err) &&
          check_string(t->retry_after_header, true, at, "retry_after_header", total, err) &&
          check_string(t->fate, true, at, "fate", total, err) && check_int(t->elapsed_ms, at, "elapsed_ms", err) &&
          check_int(t->delay_ms, at, "delay_ms", err) && check_try_facts(t, i, total, err)))
        return false;
    if (hedge_fields_ok(t)) return true;
    char field[64];
    field_path(field, sizeof field, at, "fate");
    if (t->fate == NULL)
        rfi_ledger_error(err, field, 0, 0,
                         "%s is NULL, but start_ms or hedge is set: they come with a hedged try's fate", field);
    else if (!rfi_ledger_fate_known(t->fate, strlen(t->fate)))
        rfi_ledger_error(err, field, 0, 0, "%s is \"%.40s\", not a fate (winner, cancelled, failed)", field, t->fate);
    else
        rfi_ledger_error(err, field, 0, 0, "%s: start_ms is %" PRId64 ", not in 0..2^53", field, t->start_ms);
    return false;
}

/* Everything that can make a record unwritable, checked before any allocation. */
static bool check_record(const rf_ledger_record *rec, const char *host, rf_error *err) {
    size_t total = 0;

    if (rec->ts_ms < 0 || rec->ts_ms > RFI_LEDGER_TS_MAX_MS) {
        rfi_ledger_error(err, "$.ts", 0, 0,
                         "$.ts is %" PRId64 " ms, outside 1970-01-01T00:00:00.000Z..9999-12-31T23:59:59.999Z",
                         rec->ts_ms);
        return false;
    }
    if (!check_string(rec->route, false, -1, "route", &total, err) ||
        !check_string(rec->method, false, -1, "method", &total, err) ||
        !check_string(rec->path, false, -1, "path", &total, err) ||
        !check_string(rec->key, true, -1, "key", &total, err) ||
        !check_string(rec->policy, false, -1, "policy", &total, err) ||
        !check_string(rec->outcome, false, -1, "outcome", &total, err) ||
        !check_string(rec->reason, false, -1, "reason", &total, err) ||
        !check_string(host, true, -1, "host", &total, err) ||
        !check_string(rec->budget, true, -1, "budget", &total, err) ||
        !check_int(rec->elapsed_ms, -1, "elapsed_ms", err) || !check_int(rec->body_len, -1, "body_len", err)) {
        return false;
    }
    if (rec->has_inbound_deadline && (rec->inbound_deadline_ms < 0 || !safe_int(rec->inbound_deadline_ms))) {
        rfi_ledger_error(err, "$.inbound_deadline_ms", 0, 0, "$.inbound_deadline_ms is %" PRId64 ", outside 0..2^53",
                         rec->inbound_deadline_ms);
        return false;
    }
    if (rec->inbound_attempt < 0) {
        rfi_ledger_error(err, "$.inbound_attempt", 0, 0, "$.inbound_attempt is %d: 1 and up, or 0 for none",
                         rec->inbound_attempt);
        return false;
    }
    if (rec->n_tries > RF_LEDGER_MAX_TRIES) {
        rfi_ledger_error(err, "$.tries", 0, 0, "$.tries has %zu entries, more than RF_LEDGER_MAX_TRIES (%d)",
                         rec->n_tries, RF_LEDGER_MAX_TRIES);
        return false;
    }
    for (size_t i = 0; i < rec->n_tries; i++) {
        if (!check_try(&rec->tries[i], i, &total, err)) {
            return false;
        }
    }
    /* Escaping only makes strings longer: refuse early rather than print megabytes to throw them away. */
    if (total > RF_LEDGER_MAX_LINE) {
        rfi_ledger_error(err, "$", 0, 0, "the record's strings total %zu bytes, more than RF_LEDGER_MAX_LINE (%d)",
                         total, RF_LEDGER_MAX_LINE);
        return false;
    }
    return true;
}

/* The output: bytes go to buf while they fit in cap; len counts them all, so a second pass knows the size. */
typedef struct out {
    char *buf;
    size_t cap, len;
} out;

/* Inline, so that a literal's copy is a few moves rather than a call. roomy (a constant where it is inlined):
 * the caller knows the whole line fits, with 16 bytes to spare, so no copy needs checking. */
static HOT_INLINE void put_in(out *o, const char *s, size_t n, const bool roomy) {
    if (n != 0 && (roomy || o->len + n <= o->cap)) memcpy(o->buf + o->len, s, n); /* n == 0: buf may be NULL */
    o->len += n;
}
#define put(o, s, n) put_in((o), (s), (n), roomy)
#define PUT(o, lit) put_in((o), (lit), sizeof(lit) - 1, roomy)

/* The n (< 8) bytes at p in the low bytes of a word, the rest zero: overlapping loads, never past p + n. */
static HOT_INLINE uint64_t load_tail(const unsigned char *p, size_t n) {
    uint64_t lo = 0, hi = 0;
    if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, p, 4);
        memcpy(&b, p + n - 4, 4);
        lo = a;
        hi = (uint64_t)b << (8 * (n - 4));
    } else if (n > 0) {
        lo = (uint64_t)p[0] | (uint64_t)p[n / 2] << (8 * (n / 2));
        hi = (uint64_t)p[n - 1] << (8 * (n - 1));
    }
    return lo | hi;
}

/* The 8 bytes at p as a little-endian word. */
static HOT_INLINE uint64_t load_word(const unsigned char *p) {
    uint64_t x;
    memcpy(&x, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    return x;
}

/* 0x80 in the bytes of x (little-endian) that need a look: below 0x20, '"', '\\' or 0x80 and up. The lowest mark
 * is exact; a byte above a control byte, '"' or '\\' may be marked too (a borrow), which the caller never reads:
 * it handles the lowest mark and looks again after it. (The has-less and has-zero byte tests of "Bit Twiddling
 * Hacks", S. E. Anderson.) */
static HOT_INLINE uint64_t marks(uint64_t x) {
    const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
    const uint64_t quote = x ^ (ones * '"'), backslash = x ^ (ones * '\\');
    return (((x - ones * 0x20) & ~x) | x | ((quote - ones) & ~quote) | ((backslash - ones) & ~backslash)) & highs;
}

#if defined(__GNUC__)
/* Sixteen bytes at once (GCC's vector extension: SSE2 or NEON where there is one): true when none needs a look. As
 * signed bytes, the controls (0x00..0x1F) and the bytes of 0x80 and up (negative) are exactly those below 0x20: one
 * comparison for both. */
typedef signed char bytes16 __attribute__((vector_size(16)));
static HOT_INLINE bool clean16_vec(bytes16 x) {
    const bytes16 look = (x < 0x20) | (x == '"') | (x == '\\');
    uint64_t half[2];
    memcpy(half, &look, 16);
    return (half[0] | half[1]) == 0;
}
static HOT_INLINE bool clean16(const unsigned char *p) {
    bytes16 x;
    memcpy(&x, p, 16);
    return clean16_vec(x);
}
#endif

static HOT_INLINE size_t first_mark(uint64_t m) {
#if defined(__GNUC__)
    return (size_t)__builtin_ctzll(m) / 8;
#else
    size_t i = 0;
    while (!(m & 0x80)) m >>= 8, i++;
    return i;
#endif
}

/* The escape of an ASCII byte that needs one, into esc; returns its length. */
static size_t escape(unsigned char c, char esc[6]) {
    esc[0] = '\\';
    switch (c) {
    case '"':
    case '\\': esc[1] = (char)c; return 2;
    case '\b': esc[1] = 'b'; return 2;
    case '\f': esc[1] = 'f'; return 2;
    case '\n': esc[1] = 'n'; return 2;
    case '\r': esc[1] = 'r'; return 2;
    case '\t': esc[1] = 't'; return 2;
    default: /* \u00xx, lowercase hex */
        memcpy(esc + 1, "u00", 3);
        esc[4] = "0123456789abcdef"[c >> 4];
        esc[5] = "0123456789abcdef"[c & 15];
        return 6;
    }
}

/* Appends the k (<= 8) bytes of word x (little-endian): one store of all eight when the buffer has room for
 * them (the bytes past k are overwritten by what comes next, or lie past the line), else a copy of k. */
static HOT_INLINE void put_word(out *o, uint64_t x, size_t k, const bool roomy) {
    if (roomy || o->len + 8 <= o->cap) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        x = __builtin_bswap64(x);
#endif
        memcpy(o->buf + o->len, &x, 8);
        o->len += k;
        return;
    }
    char bytes[8];
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    memcpy(bytes, &x, 8);
    put(o, bytes, k);
}

/* s[0..n) escaped (see the top of this file), in one pass that copies as it reads: a word at a time up to the
 * next byte that needs a look. False when it is not UTF-8 (then what was written is not a line: the caller
 * reports the field). */
static HOT_INLINE bool put_escaped(out *o, const char *str, size_t n) {
    const bool roomy = false; /* rare enough: every copy checked */
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    /* Most strings need nothing: they are only read until a byte needs a look, then copied in one piece. */
#if defined(__GNUC__)
    while (n - i >= 16 && clean16(s + i)) i += 16;
#endif
    while (n - i >= 8 && marks(load_word(s + i)) == 0) i += 8;
    if (n - i < 8 && (marks(load_tail(s + i, n - i)) & ((UINT64_C(1) << (8 * (n - i))) - 1)) == 0) {
        put(o, str, n);
        return true;
    }
    put(o, str, i);
    while (i < n) {
        const size_t left = n - i;
        uint64_t x, m;
        if (left >= 8) {
            x = load_word(s + i);
            m = marks(x);
        } else {
            x = load_tail(s + i, left);
            m = marks(x) & ((UINT64_C(1) << (8 * left)) - 1); /* not the zero fill */
        }
        if (m == 0) {
            const size_t k = left >= 8 ? 8 : left;
            put_word(o, x, k, roomy);
            i += k;
            continue;
        }
        const size_t at = first_mark(m);
        put_word(o, x, at, roomy);
        i += at;
        const unsigned char c = s[i];
        if (c >= 0x80) {
            const size_t k = rfi_ledger_utf8_sequence(s + i, n - i);
            if (k == 0) return false;
            put(o, str + i, k);
            i += k;
            continue;
        }
        char esc[6];
        put(o, esc, escape(c, esc));
        i++;
    }
    return true;
}

/* put_escaped out of line, with the output passed by value: its new length, or SIZE_MAX when the string is not
 * UTF-8. */
static RFI_LEDGER_NOINLINE size_t escaped_at(char *buf, size_t cap, size_t len, const char *str, size_t n) {
    out o = {buf, cap, len};
    return put_escaped(&o, str, n) ? o.len : SIZE_MAX;
}

/* put_escaped, without taking the address of the caller's out: then the compiler keeps its length in a register
 * through the whole line. Once its address is passed on, a byte stored through buf could alias the length, and
 * every put of the line would load and store it again, one dependent memory round trip after the other. A string
 * that is not UTF-8 leaves the length as it was (the line is refused). */
static HOT_INLINE bool put_escaped_apart(out *o, const char *str, size_t n) {
    const size_t len = escaped_at(o->buf, o->cap, o->len, str, n);
    if (len == SIZE_MAX) return false;
    o->len = len;
    return true;
}

/* A string's escaped bytes, without its quotes: emit writes those with the keys around them. A short string that
 * needs nothing (most of a line's) is read as two words (from 8 bytes up, overlapping and checked as one vector),
 * checked and stored here; a longer one, when the line has room, sixteen bytes at a time, each stored as it was
 * checked; put_escaped does the rest. */
static HOT_INLINE bool put_body(out *o, const char *str, size_t n, const bool roomy) {
#if defined(__GNUC__)
    if (roomy && n > 16) { /* sixteen bytes at a time, each stored as it was read; the last sixteen overlap */
        const unsigned char *s = (const unsigned char *)str;
        char *to = o->buf + o->len;
        bytes16 x;
        for (size_t i = 0; i < n - 16; i += 16) {
            memcpy(&x, s + i, 16);
            if (!clean16_vec(x)) return put_escaped_apart(o, str, n);
            memcpy(to + i, &x, 16);
        }
        memcpy(&x, s + n - 16, 16);
        if (!clean16_vec(x)) return put_escaped_apart(o, str, n);
        memcpy(to + n - 16, &x, 16);
        o->len += n;
        return true;
    }
#endif
    if (n <= 16 && (roomy || o->len + 16 <= o->cap)) {
        const unsigned char *s = (const unsigned char *)str;
#if defined(__GNUC__)
        if (n >= 8) { /* two overlapping words, checked as one vector and stored as they were read */
            unsigned char both[16];
            memcpy(both, s, 8);
            memcpy(both + 8, s + n - 8, 8);
            if (!clean16(both)) return put_escaped_apart(o, str, n);
            memcpy(o->buf + o->len, both, 8);
            memcpy(o->buf + o->len + n - 8, both + 8, 8);
            o->len += n;
            return true;
        }
#endif
        const uint64_t x0 = n >= 8 ? load_word(s) : load_tail(s, n), x1 = n > 8 ? load_tail(s + 8, n - 8) : 0;
        const uint64_t m0 = marks(x0) & (n >= 8 ? ~UINT64_C(0) : (UINT64_C(1) << (8 * n)) - 1);
        const uint64_t m1 = n > 8 ? marks(x1) & (n == 16 ? ~UINT64_C(0) : (UINT64_C(1) << (8 * (n - 8))) - 1) : 0;
        if ((m0 | m1) == 0) {
            put_word(o, x0, n >= 8 ? 8 : n, roomy);
            if (n > 8) put_word(o, x1, n - 8, roomy);
            return true;
        }
    }
    return put_escaped_apart(o, str, n);
}

static HOT_INLINE bool put_string_or_null(out *o, const char *s, size_t n, const bool roomy) {
    if (!s) {
        PUT(o, "null");
        return true;
    }
    PUT(o, "\"");
    const bool ok = put_body(o, s, n, roomy);
    PUT(o, "\"");
    return ok;
}

/* The digits of u into end[-digits .. 0), two at a time. */
static HOT_INLINE void digits_before(char *end, uint64_t u) {
    while (u >= 100) {
        const unsigned pair = (unsigned)(u % 100);
        u /= 100;
        end -= 2;
        memcpy(end, rfi_ledger_digit_pairs + 2 * pair, 2);
    }
    if (u >= 10)
        memcpy(end - 2, rfi_ledger_digit_pairs + 2 * u, 2);
    else
        end[-1] = (char)('0' + u);
}

static HOT_INLINE void put_int(out *o, int64_t v, const bool roomy) {
    if ((uint64_t)v < 1000 && (roomy || o->len + 3 <= o->cap)) { /* most of a line's numbers: statuses, attempts */
        const unsigned u = (unsigned)v;
        char *at = o->buf + o->len;
        if (u < 10) {
            at[0] = (char)('0' + u);
            o->len += 1;
        } else if (u < 100) {
            memcpy(at, rfi_ledger_digit_pairs + 2 * u, 2);
            o->len += 2;
        } else {
            const unsigned hundreds = u / 100;
            at[0] = (char)('0' + hundreds);
            memcpy(at + 1, rfi_ledger_digit_pairs + 2 * (u - 100 * hundreds), 2);
            o->len += 3;
        }
        return;
    }
    const uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    size_t n = 1u + (u >= 10) + (u >= 100) + (u >= 1000); /* most of a line's numbers: the loop rarely runs */
    for (uint64_t limit = 10000; n < 20 && u >= limit; limit *= 10) n++;
    n += v < 0;
    if (roomy || o->len + n <= o->cap) { /* straight into the buffer: a copy of bytes just stored would stall */
        char *at = o->buf + o->len;
        if (v < 0) at[0] = '-';
        digits_before(at + n, u);
    }
    o->len += n;
}

/*
 * path with each query value (after the first '?', the text after '=' in every '&'-separated part, or the
 * whole part when it has no '=') replaced by REDACTED; names are kept, empty parts stay empty, as the body of a
 * JSON string. "/a?api_key=SECRET&x" → "/a?api_key=REDACTED&REDACTED". A query of many tiny parts, which this
 * would lengthen by more than 256 bytes, is recorded as one "?REDACTED".
 */
static bool put_redacted_path(out *o, const char *path, size_t len) {
    const bool roomy = false;
    const char *q = memchr(path, '?', len), *end = path + len;
    if (q == NULL) return put_body(o, path, len, roomy); /* most paths: short and without a query */
    /* The values are not written, but the whole path must be UTF-8 all the same. */
    bool ok = rfi_ledger_utf8_valid(q, (size_t)(end - q));
    size_t grown = 0;
    for (const char *p = q + 1; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *part_end = amp ? amp : end;
        if (part_end > p) grown += sizeof REDACTED - 1;
        p = part_end + 1;
    }
    ok = put_escaped_apart(o, path, (size_t)(q - path) + 1) && ok;
    if (grown > 256) {
        PUT(o, REDACTED);
        return ok;
    }
    for (const char *p = q + 1; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *part_end = amp ? amp : end;
        if (part_end > p) {
            const char *eq = memchr(p, '=', (size_t)(part_end - p));
            if (eq != NULL) ok = put_escaped_apart(o, p, (size_t)(eq - p) + 1) && ok;
            PUT(o, REDACTED);
        }
        if (amp) PUT(o, "&");
        p = part_end + 1;
    }
    return ok;
}

/* put_redacted_path as put_escaped_apart puts put_escaped: out of line, the caller's out passed by value. */
static RFI_LEDGER_NOINLINE size_t redacted_path_at(char *buf, size_t cap, size_t len, const char *path, size_t n) {
    out o = {buf, cap, len};
    return put_redacted_path(&o, path, n) ? o.len : SIZE_MAX;
}

static HOT_INLINE bool put_redacted_path_apart(out *o, const char *path, size_t n, const bool roomy) {
    if (memchr(path, '?', n) == NULL) return put_body(o, path, n, roomy); /* most paths: no query, nothing redacted */
    const size_t len = redacted_path_at(o->buf, o->cap, o->len, path, n);
    if (len == SIZE_MAX) return false;
    o->len = len;
    return true;
}

/* The strings of a try in the order it writes them: class, reason, retry_after, retry_after_header, fate, transport,
 * the wait headers, date, peer. */
#define TRY_STRINGS (8 + RF_WAIT_HEADER_COUNT)
/* The strings of a line in the order it writes them, and their lengths (SIZE_MAX for NULL). */
#define LINE_STRINGS (8 + TRY_STRINGS * RF_LEDGER_MAX_TRIES + 2)

/* Whether a try records any wait header: one test for the common none (the pointers ORed, unrolled). */
static HOT_INLINE bool any_wait(const rf_ledger_try *t) {
    uintptr_t any = 0;
    for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) any |= (uintptr_t)t->wait[h];
    return any != 0;
}

/* In a try's first wait header length: the try has no wait header (emit looks once, put_try_facts reads it). */
#define NO_WAIT SIZE_MAX

/* A try's replay facts (ledger.h), each only when set: timeout_ms, transport, not_sent, grpc_status, wait, date; then
 * its peer. lens: the try's transport, wait headers (NO_WAIT first when none), date and peer. */
static HOT_INLINE bool put_try_facts(out *o, const rf_ledger_try *t, const size_t *lens, const bool roomy) {
    bool ok = true;
    if (t->timeout_ms > 0) {
        PUT(o, ",\"timeout_ms\":");
        put_int(o, t->timeout_ms, roomy);
    }
    if (t->transport) {
        PUT(o, ",\"transport\":\"");
        ok &= put_body(o, t->transport, lens[0], roomy);
        PUT(o, "\"");
    }
    if (t->not_sent) PUT(o, ",\"not_sent\":true");
    if (t->grpc_status > 0) {
        PUT(o, ",\"grpc_status\":");
        put_int(o, t->grpc_status, roomy);
    }
    if (lens[1] != NO_WAIT) {
        bool waits = false;
        for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) {
            if (!t->wait[h]) continue;
            if (waits)
                PUT(o, ",\"");
            else
                PUT(o, ",\"wait\":{\"");
            waits = true;
            const char *name = rf_wait_header_name((rf_wait_header)h);
            put(o, name, strlen(name));
            PUT(o, "\":\"");
            ok &= put_body(o, t->wait[h], lens[1 + h], roomy);
            PUT(o, "\"");
        }
        PUT(o, "}");
    }
    if (t->date) {
        PUT(o, ",\"date\":\"");
        ok &= put_body(o, t->date, lens[1 + RF_WAIT_HEADER_COUNT], roomy);
        PUT(o, "\"");
    }
    if (t->peer) {
        PUT(o, ",\"peer\":\"");
        ok &= put_body(o, t->peer, lens[2 + RF_WAIT_HEADER_COUNT], roomy);
        PUT(o, "\"");
    }
    return ok;
}

static HOT_INLINE bool put_try(out *o, const rf_ledger_try *t, const size_t *lens, const bool roomy) {
    bool ok = true;
    PUT(o, "{\"class\":\"");
    ok &= put_body(o, t->class_name, lens[0], roomy);
    PUT(o, "\",\"status\":");
    put_int(o, t->status, roomy);
    PUT(o, ",\"elapsed_ms\":");
    put_int(o, t->elapsed_ms, roomy);
    PUT(o, ",\"delay_ms\":");
    put_int(o, t->delay_ms, roomy);
    PUT(o, ",\"reason\":\"");
    ok &= put_body(o, t->reason, lens[1], roomy);
    PUT(o, "\",\"retry_after\":");
    ok &= put_string_or_null(o, t->retry_after, lens[2], roomy);
    if (t->retry_after_header) {
        PUT(o, ",\"retry_after_header\":\"");
        ok &= put_body(o, t->retry_after_header, lens[3], roomy);
        PUT(o, "\"");
    }
    if (t->fate) { /* a hedged request's try: when it started, whether the hedging delay started it, its fate */
        PUT(o, ",\"start_ms\":");
        put_int(o, t->start_ms, roomy);
        if (t->hedge) PUT(o, ",\"hedge\":true");
        PUT(o, ",\"fate\":\"");
        ok &= put_body(o, t->fate, lens[4], roomy);
        PUT(o, "\"");
    }
    ok &= put_try_facts(o, t, lens + 5, roomy);
    PUT(o, "}");
    return ok;
}

/* The line, once with every copy checked against the buffer's end and once (roomy) without: the same code. */
static HOT_INLINE bool emit_line(const rf_ledger_record *rec, const char *host, rfi_ledger_ts_cache *ts, out *o,
                                 const size_t *lens, const bool roomy) {
    bool ok = true;
    PUT(o, "{\"ts\":\"");
    if (roomy || o->len + RFI_LEDGER_TS_LEN + 1 <= o->cap) { /* in place: a copy of bytes just stored would stall */
        rfi_ledger_ts_format_cached(rec->ts_ms, ts, o->buf + o->len);
        o->len += RFI_LEDGER_TS_LEN;
    } else {
        char stamp[RFI_LEDGER_TS_LEN + 1];
        rfi_ledger_ts_format_cached(rec->ts_ms, ts, stamp);
        put(o, stamp, RFI_LEDGER_TS_LEN);
    }
    PUT(o, "\",\"route\":\"");
    ok &= put_body(o, rec->route, lens[0], roomy);
    PUT(o, "\",\"method\":\"");
    ok &= put_body(o, rec->method, lens[1], roomy);
    PUT(o, "\",\"path\":\"");
    ok &= put_redacted_path_apart(o, rec->path, lens[2], roomy);
    PUT(o, "\",\"key\":");
    ok &= put_string_or_null(o, rec->key, lens[3], roomy);
    PUT(o, ",\"policy\":\"");
    ok &= put_body(o, rec->policy, lens[4], roomy);
    PUT(o, "\",\"attempts\":");
    put_int(o, rec->attempts, roomy);
    PUT(o, ",\"elapsed_ms\":");
    put_int(o, rec->elapsed_ms, roomy);
    PUT(o, ",\"outcome\":\"");
    ok &= put_body(o, rec->outcome, lens[5], roomy);
    PUT(o, "\",\"reason\":\"");
    ok &= put_body(o, rec->reason, lens[6], roomy);
    if (rec->ok)
        PUT(o, "\",\"ok\":true,\"status\":");
    else
        PUT(o, "\",\"ok\":false,\"status\":");
    put_int(o, rec->status, roomy);
    PUT(o, ",\"body_len\":");
    put_int(o, rec->body_len, roomy);
    PUT(o, ",\"tries\":[");
    for (size_t i = 0; i < rec->n_tries; i++) {
        if (i > 0) PUT(o, ",");
        ok &= put_try(o, &rec->tries[i], lens + 7 + TRY_STRINGS * i, roomy);
    }
    PUT(o, "]");
    if (host) {
        PUT(o, ",\"host\":\"");
        ok &= put_body(o, host, lens[7 + TRY_STRINGS * rec->n_tries], roomy);
        PUT(o, "\"");
    }
    if (rec->budget) {
        PUT(o, ",\"budget\":\"");
        ok &= put_body(o, rec->budget, lens[8 + TRY_STRINGS * rec->n_tries], roomy);
        PUT(o, "\"");
    }
    if (rec->has_inbound_deadline) {
        PUT(o, ",\"inbound_deadline_ms\":");
        put_int(o, rec->inbound_deadline_ms, roomy);
    }
    if (rec->inbound_attempt > 0) {
        PUT(o, ",\"inbound_attempt\":");
        put_int(o, rec->inbound_attempt, roomy);
    }
    PUT(o, "}");
    return ok;
}

/* The length of s (0 for NULL), added to *total. */
static HOT_INLINE size_t length_of(const char *s, size_t *total) {
    const size_t n = s ? strlen(s) : 0;
    *total += n;
    return n;
}

/* The line of rec into buf[0..cap) when it fits; *len is its length either way. False when a string is not UTF-8.
 * The caller checked what needs no reading of the strings (quick_check). A string's quotes go out with the keys
 * around it. When an upper bound of the line (each string escaped 6 to 1, each number 20 digits and a sign, a
 * redacted query 256 bytes longer) fits with 16 bytes to spare, no copy is checked. */
static bool emit(const rf_ledger_record *rec, const char *host, rfi_ledger_ts_cache *ts, char *buf, size_t cap,
                 size_t *len) {
    size_t lens[LINE_STRINGS], n = 0, total = 0;
    lens[n++] = length_of(rec->route, &total);
    lens[n++] = length_of(rec->method, &total);
    lens[n++] = length_of(rec->path, &total);
    lens[n++] = length_of(rec->key, &total);
    lens[n++] = length_of(rec->policy, &total);
    lens[n++] = length_of(rec->outcome, &total);
    lens[n++] = length_of(rec->reason, &total);
    for (size_t i = 0; i < rec->n_tries; i++) {
        const rf_ledger_try *t = &rec->tries[i];
        lens[n++] = length_of(t->class_name, &total);
        lens[n++] = length_of(t->reason, &total);
        lens[n++] = length_of(t->retry_after, &total);
        lens[n++] = length_of(t->retry_after_header, &total);
        lens[n++] = length_of(t->fate, &total);
        lens[n++] = length_of(t->transport, &total);
        if (any_wait(t)) {
            for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) lens[n++] = length_of(t->wait[h], &total);
        } else {
            lens[n] = NO_WAIT; /* put_try_facts reads none of them */
            n += RF_WAIT_HEADER_COUNT;
        }
        lens[n++] = length_of(t->date, &total);
        lens[n++] = length_of(t->peer, &total);
    }
    lens[n++] = length_of(host, &total);
    lens[n] = length_of(rec->budget, &total);
    /* the keys and punctuation (a try's hedge fields, replay facts and wait header names included), generously; the
     * redacted query; the strings escaped */
    const size_t bound = 512 + 576 * rec->n_tries + 256 + 64 + 6 * total;
    out o = {buf, cap, 0};
    const bool ok =
        bound + 16 <= cap ? emit_line(rec, host, ts, &o, lens, true) : emit_line(rec, host, ts, &o, lens, false);
    *len = o.len;
    return ok;
}

/* What check_record checks without reading a string's bytes: the timestamp, the required strings, the integers'
 * range, the number of tries. Everything else is read once, as the line is written. */
static bool quick_check(const rf_ledger_record *rec) {
    bool ok = rec->ts_ms >= 0 && rec->ts_ms <= RFI_LEDGER_TS_MAX_MS && rec->route && rec->method && rec->path &&
              rec->policy && rec->outcome && rec->reason && safe_int(rec->elapsed_ms) && safe_int(rec->body_len) &&
              rec->n_tries <= RF_LEDGER_MAX_TRIES && rec->inbound_attempt >= 0 &&
              (!rec->has_inbound_deadline || (rec->inbound_deadline_ms >= 0 && safe_int(rec->inbound_deadline_ms)));
    for (size_t i = 0; ok && i < rec->n_tries; i++) {
        const rf_ledger_try *t = &rec->tries[i];
        ok = t->class_name && t->reason && safe_int(t->elapsed_ms) && safe_int(t->delay_ms) && t->timeout_ms >= 0 &&
             safe_int(t->timeout_ms) && transport_known(t->transport) && hedge_fields_ok(t) &&
             (unsigned)t->grpc_status <= RF_GRPC_STATUS_MAX &&
             (!t->peer || rfi_ledger_peer_ok(t->peer, strlen(t->peer)));
    }
    return ok;
}

rf_status rfi_ledger_format_into(const rf_ledger_record *rec, const char *host, rfi_ledger_ts_cache *ts, char *buf,
                                 size_t cap, size_t *len, rf_error *err) {
    if (!rec) {
        rfi_ledger_error(err, "rec", 0, 0, "rec is NULL");
        return RF_EINVAL;
    }
    if (rec->host) host = rec->host;
    if (quick_check(rec) && emit(rec, host, ts, buf, cap, len) && *len <= RF_LEDGER_MAX_LINE) return RF_OK;
    /* Refused: field by field, in check_record's order, for the message (the same as when it ran first). */
    if (!check_record(rec, host, err)) return RF_EINVAL;
    if (*len > RF_LEDGER_MAX_LINE) {
        rfi_ledger_error(err, "$", 0, 0, "the record is %zu bytes as JSON, more than RF_LEDGER_MAX_LINE (%d)", *len,
                         RF_LEDGER_MAX_LINE);
        return RF_EINVAL;
    }
    rfi_ledger_error(err, "$", 0, 0, "a string of the record is not valid UTF-8"); /* check_record finds it first */
    return RF_EINVAL;
}

long rf_ledger_format(const rf_ledger_record *rec, char *buf, size_t cap, rf_error *err) {
    size_t len = 0;

    if (!buf) {
        rfi_ledger_error(err, "buf", 0, 0, "buf is NULL");
        return -1;
    }
    /* Measured first: buf is left untouched when the line does not fit. */
    if (rfi_ledger_format_into(rec, NULL, NULL, NULL, 0, &len, err) != RF_OK) {
        return -1;
    }
    if (len >= cap) {
        rfi_ledger_error(err, "buf", 0, 0, "the record needs %zu bytes with its NUL, buf has %zu", len + 1, cap);
        return -1;
    }
    emit(rec, rec->host, NULL, buf, len, &len); /* cap = the line: nothing past it is written, not even scratch */
    buf[len] = '\0';
    return (long)len;
}
