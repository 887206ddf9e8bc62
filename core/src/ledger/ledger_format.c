/*
 * A ledger record as one JSON line. Fields always appear in this order, every one of them present:
 *   ts, route, method, path, key, policy, attempts, elapsed_ms, outcome, reason, ok, status, body_len, tries
 * then, only when set, host and budget.
 * and in each tries entry: class, status, elapsed_ms, delay_ms, reason, retry_after (null when absent).
 * Integers are emitted as plain integer tokens: a JSON library's number printer goes through a double and
 * "%1.15g", which prints 1e15 as "1e+15" and 2^53 as "9.00719925474099e+15" (lossy).
 * The line is written straight into the caller's buffer, with no tree and no allocation (an append is on
 * the request path): strings are escaped as cJSON prints them (RFC 8259 §7: '"', '\\' and the controls
 * \b \f \n \r \t by their short escapes, the other controls as \u00xx, every other byte as is), so the
 * lines are byte for byte those of the cJSON-built writer before (issue 17).
 * The path is recorded with every query value replaced by REDACTED (put_redacted_path): query strings carry
 * secrets (?api_key=…), and the ledger stores none.
 */
#include "ledger_internal.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REDACTED "REDACTED"

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

static bool check_try(const rf_ledger_try *t, size_t i, size_t *total, rf_error *err) {
    const long at = (long)i;
    return check_string(t->class_name, false, at, "class", total, err) &&
           check_string(t->reason, false, at, "reason", total, err) &&
           check_string(t->retry_after, true, at, "retry_after", total, err) &&
           check_string(t->retry_after_header, true, at, "retry_after_header", total, err) &&
           check_int(t->elapsed_ms, at, "elapsed_ms", err) && check_int(t->delay_ms, at, "delay_ms", err);
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

static void put(out *o, const char *s, size_t n) {
    if (n != 0 && o->len + n <= o->cap) memcpy(o->buf + o->len, s, n); /* n == 0: buf may be NULL */
    o->len += n;
}
#define PUT(o, lit) put((o), (lit), sizeof(lit) - 1)

/* A JSON string token for s[0..n), escaped as cJSON escapes it (see the top of this file). */
/* Does any of the 8 bytes in x need an escape: below 0x20, '"' or '\\'? (The has-less and has-zero byte tests of
 * "Bit Twiddling Hacks", S. E. Anderson.) */
static bool word_needs_escape(uint64_t x) {
    const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
    const uint64_t quote = x ^ (ones * '"'), backslash = x ^ (ones * '\\');
    const uint64_t control = (x - ones * 0x20) & ~x & highs;
    const uint64_t has_quote = (quote - ones) & ~quote & highs, has_backslash = (backslash - ones) & ~backslash & highs;
    return (control | has_quote | has_backslash) != 0;
}

static void put_escaped(out *o, const char *s, size_t n) {
    size_t run = 0; /* bytes before i that need no escape, copied in one piece */
    for (size_t i = 0; i < n; i++) {
        uint64_t word;
        while (n - i >= 8 && (memcpy(&word, s + i, 8), !word_needs_escape(word))) i += 8;
        if (i >= n) break;
        const unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        put(o, s + run, i - run);
        run = i + 1;
        char esc[6] = {'\\', (char)c, 0, 0, 0, 0};
        size_t esc_len = 2;
        switch (c) {
        case '"':
        case '\\': break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default: /* \u00xx, lowercase hex */
            memcpy(esc + 1, "u00", 3);
            esc[4] = "0123456789abcdef"[c >> 4];
            esc[5] = "0123456789abcdef"[c & 15];
            esc_len = 6;
        }
        put(o, esc, esc_len);
    }
    put(o, s + run, n - run);
}

static void put_string(out *o, const char *s) {
    PUT(o, "\"");
    put_escaped(o, s, strlen(s));
    PUT(o, "\"");
}

static void put_string_or_null(out *o, const char *s) {
    if (s)
        put_string(o, s);
    else
        PUT(o, "null");
}

static void put_int(out *o, int64_t v) {
    char digits[24];
    size_t i = sizeof digits;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        digits[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0) digits[--i] = '-';
    put(o, digits + i, sizeof digits - i);
}

/*
 * path with each query value (after the first '?', the text after '=' in every '&'-separated part, or the
 * whole part when it has no '=') replaced by REDACTED; names are kept, empty parts stay empty, as a JSON
 * string. "/a?api_key=SECRET&x" → "/a?api_key=REDACTED&REDACTED". A query of many tiny parts, which this would
 * lengthen by more than 256 bytes, is recorded as one "?REDACTED".
 */
static void put_redacted_path(out *o, const char *path) {
    size_t len = strlen(path);
    const char *q = memchr(path, '?', len), *end = path + len;
    PUT(o, "\"");
    if (q == NULL) {
        put_escaped(o, path, len);
        PUT(o, "\"");
        return;
    }
    size_t grown = 0;
    for (const char *p = q + 1; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *part_end = amp ? amp : end;
        if (part_end > p) grown += sizeof REDACTED - 1;
        p = part_end + 1;
    }
    put_escaped(o, path, (size_t)(q - path) + 1);
    if (grown > 256) {
        PUT(o, REDACTED "\"");
        return;
    }
    for (const char *p = q + 1; p < end;) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *part_end = amp ? amp : end;
        if (part_end > p) {
            const char *eq = memchr(p, '=', (size_t)(part_end - p));
            if (eq != NULL) put_escaped(o, p, (size_t)(eq - p) + 1);
            PUT(o, REDACTED);
        }
        if (amp) PUT(o, "&");
        p = part_end + 1;
    }
    PUT(o, "\"");
}

static void put_try(out *o, const rf_ledger_try *t) {
    PUT(o, "{\"class\":");
    put_string(o, t->class_name);
    PUT(o, ",\"status\":");
    put_int(o, t->status);
    PUT(o, ",\"elapsed_ms\":");
    put_int(o, t->elapsed_ms);
    PUT(o, ",\"delay_ms\":");
    put_int(o, t->delay_ms);
    PUT(o, ",\"reason\":");
    put_string(o, t->reason);
    PUT(o, ",\"retry_after\":");
    put_string_or_null(o, t->retry_after);
    if (t->retry_after_header) {
        PUT(o, ",\"retry_after_header\":");
        put_string(o, t->retry_after_header);
    }
    PUT(o, "}");
}

/* The line of a checked record into buf[0..cap) when it fits; returns its length either way. */
static size_t emit(const rf_ledger_record *rec, const char *host, char *buf, size_t cap) {
    out o = {buf, cap, 0};
    char ts[RFI_LEDGER_TS_LEN + 1];
    rfi_ledger_ts_format(rec->ts_ms, ts);
    PUT(&o, "{\"ts\":\"");
    put(&o, ts, RFI_LEDGER_TS_LEN);
    PUT(&o, "\",\"route\":");
    put_string(&o, rec->route);
    PUT(&o, ",\"method\":");
    put_string(&o, rec->method);
    PUT(&o, ",\"path\":");
    put_redacted_path(&o, rec->path);
    PUT(&o, ",\"key\":");
    put_string_or_null(&o, rec->key);
    PUT(&o, ",\"policy\":");
    put_string(&o, rec->policy);
    PUT(&o, ",\"attempts\":");
    put_int(&o, rec->attempts);
    PUT(&o, ",\"elapsed_ms\":");
    put_int(&o, rec->elapsed_ms);
    PUT(&o, ",\"outcome\":");
    put_string(&o, rec->outcome);
    PUT(&o, ",\"reason\":");
    put_string(&o, rec->reason);
    if (rec->ok)
        PUT(&o, ",\"ok\":true,\"status\":");
    else
        PUT(&o, ",\"ok\":false,\"status\":");
    put_int(&o, rec->status);
    PUT(&o, ",\"body_len\":");
    put_int(&o, rec->body_len);
    PUT(&o, ",\"tries\":[");
    for (size_t i = 0; i < rec->n_tries; i++) {
        if (i > 0) PUT(&o, ",");
        put_try(&o, &rec->tries[i]);
    }
    PUT(&o, "]");
    if (host) {
        PUT(&o, ",\"host\":");
        put_string(&o, host);
    }
    if (rec->budget) {
        PUT(&o, ",\"budget\":");
        put_string(&o, rec->budget);
    }
    PUT(&o, "}");
    return o.len;
}

rf_status rfi_ledger_format_into(const rf_ledger_record *rec, const char *host, char *buf, size_t cap, size_t *len,
                                 rf_error *err) {
    if (!rec) {
        rfi_ledger_error(err, "rec", 0, 0, "rec is NULL");
        return RF_EINVAL;
    }
    if (rec->host) host = rec->host;
    if (!check_record(rec, host, err)) {
        return RF_EINVAL;
    }
    *len = emit(rec, host, buf, cap);
    if (*len > RF_LEDGER_MAX_LINE) {
        rfi_ledger_error(err, "$", 0, 0, "the record is %zu bytes as JSON, more than RF_LEDGER_MAX_LINE (%d)", *len,
                         RF_LEDGER_MAX_LINE);
        return RF_EINVAL;
    }
    return RF_OK;
}

long rf_ledger_format(const rf_ledger_record *rec, char *buf, size_t cap, rf_error *err) {
    size_t len = 0;

    if (!buf) {
        rfi_ledger_error(err, "buf", 0, 0, "buf is NULL");
        return -1;
    }
    /* Measured first: buf is left untouched when the line does not fit. */
    if (rfi_ledger_format_into(rec, NULL, NULL, 0, &len, err) != RF_OK) {
        return -1;
    }
    if (len >= cap) {
        rfi_ledger_error(err, "buf", 0, 0, "the record needs %zu bytes with its NUL, buf has %zu", len + 1, cap);
        return -1;
    }
    emit(rec, rec->host, buf, cap);
    buf[len] = '\0';
    return (long)len;
}
