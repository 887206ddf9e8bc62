/*
 * The wait headers beyond Retry-After, each parsed by its own rule (retry_after.h, rf_wait_header_parse):
 * retry-after-ms / x-ms-retry-after-ms (integer ms), ratelimit-reset (delta-seconds, IETF httpapi RateLimit
 * header fields), ratelimit (the structured-field List's t= parameter, RFC 8941 syntax, same draft),
 * x-ratelimit-reset (seconds, or a Unix timestamp over 10^9), grpc-retry-pushback-ms (gRPC A6 pushback).
 * Pure functions: no allocation, no I/O, no clock reads, no globals.
 */
#include "retryfreeze/retry_after.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MS_PER_SEC INT64_C(1000)
/* Over this an x-ratelimit-reset value is a Unix timestamp in seconds, not a number of seconds to wait. */
#define UNIX_TIMESTAMP_FLOOR INT64_C(1000000000)
/* 9999-12-31T23:59:59Z in Unix seconds: a later reset timestamp is no date this engine represents. */
#define MAX_UNIX_SECONDS INT64_C(253402300799)
/* RFC 8941 §3.3.1: an Integer has at most 15 digits. */
#define SF_INTEGER_MAX_DIGITS 15

static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static void trim_ows(const unsigned char **p, size_t *n) {
    while (*n > 0 && ((*p)[0] == ' ' || (*p)[0] == '\t')) (*p)++, (*n)--;
    while (*n > 0 && ((*p)[*n - 1] == ' ' || (*p)[*n - 1] == '\t')) (*n)--;
}

/*
 * 1*DIGIT into *v (no sign, no fraction). RF_RA_OK; RF_RA_INVALID on any other byte or no digit;
 * RF_RA_TOO_LONG when the value exceeds max (leading zeros do not count).
 */
static rf_retry_after_status parse_digits(const unsigned char *p, size_t n, int64_t max, int64_t *v) {
    if (n == 0) return RF_RA_INVALID;
    for (size_t i = 0; i < n; i++)
        if (!is_digit(p[i])) return RF_RA_INVALID;
    int64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        const int64_t d = p[i] - '0';
        if (x > (max - d) / 10) return RF_RA_TOO_LONG;
        x = x * 10 + d;
    }
    *v = x;
    return RF_RA_OK;
}

/* retry-after-ms, x-ms-retry-after-ms: integer milliseconds. */
static rf_retry_after_status parse_ms(const unsigned char *p, size_t n, int64_t *delay_ms) {
    int64_t v;
    rf_retry_after_status st = parse_digits(p, n, INT64_MAX, &v);
    if (st == RF_RA_OK && delay_ms != NULL) *delay_ms = v;
    return st;
}

/* ratelimit-reset: delta-seconds. */
static rf_retry_after_status parse_seconds(const unsigned char *p, size_t n, int64_t *delay_ms) {
    int64_t v;
    rf_retry_after_status st = parse_digits(p, n, INT64_MAX / MS_PER_SEC, &v);
    if (st == RF_RA_OK && delay_ms != NULL) *delay_ms = v * MS_PER_SEC;
    return st;
}

/*
 * x-ratelimit-reset: seconds up to 10^9, else a Unix timestamp in seconds. A timestamp is compared with the
 * response's Date when it parses (server clock against server clock: immune to skew, as for an HTTP-date
 * Retry-After), else with now_ms.
 */
static rf_retry_after_status parse_reset(const unsigned char *p, size_t n, int64_t now_ms, const char *date,
                                         size_t date_len, int64_t *delay_ms) {
    int64_t v;
    rf_retry_after_status st = parse_digits(p, n, INT64_MAX / MS_PER_SEC, &v);
    if (st != RF_RA_OK) return st;
    if (v <= UNIX_TIMESTAMP_FLOOR) {
        if (delay_ms != NULL) *delay_ms = v * MS_PER_SEC;
        return RF_RA_OK;
    }
    if (v > MAX_UNIX_SECONDS) return RF_RA_TOO_LONG;
    int64_t base_ms = 0;
    if (date == NULL || !rf_http_date_parse(date, date_len, now_ms, &base_ms)) {
        if (now_ms <= 0) return RF_RA_NO_CLOCK;
        base_ms = now_ms;
    }
    const int64_t at_ms = v * MS_PER_SEC; /* < 2^48 */
    if (delay_ms != NULL) *delay_ms = at_ms > base_ms ? at_ms - base_ms : 0;
    return RF_RA_OK;
}

/* grpc-retry-pushback-ms: gRPC A6. Only a non-negative int32 is a delay; anything else says "do not retry". */
static rf_retry_after_status parse_pushback(const unsigned char *p, size_t n, int64_t *delay_ms) {
    int64_t v;
    if (parse_digits(p, n, INT32_MAX, &v) != RF_RA_OK) return RF_RA_STOP;
    if (delay_ms != NULL) *delay_ms = v;
    return RF_RA_OK;
}

/* ---- ratelimit: an RFC 8941 List, read without allocation ---- */

typedef struct sf_cursor {
    const unsigned char *p, *end;
} sf_cursor;

static bool sf_lcalpha(unsigned char c) { return c >= 'a' && c <= 'z'; }
static bool sf_alpha(unsigned char c) { return sf_lcalpha(c) || (c >= 'A' && c <= 'Z'); }

/* tchar of RFC 9110 §5.6.2. */
static bool sf_tchar(unsigned char c) {
    return sf_alpha(c) || is_digit(c) || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool sf_base64(unsigned char c) { return sf_alpha(c) || is_digit(c) || c == '+' || c == '/' || c == '='; }

/* An Integer or Decimal (RFC 8941 §4.2.4). *is_int and *value are set for an Integer only. */
static bool sf_number(sf_cursor *c, bool *is_int, int64_t *value) {
    bool negative = false;
    if (c->p < c->end && *c->p == '-') {
        negative = true;
        c->p++;
    }
    size_t digits = 0, frac = 0;
    int64_t v = 0;
    bool decimal = false;
    if (c->p == c->end || !is_digit(*c->p)) return false;
    while (c->p < c->end) {
        unsigned char ch = *c->p;
        if (is_digit(ch)) {
            if (decimal) {
                if (++frac > 3) return false;
            } else {
                if (++digits > (size_t)SF_INTEGER_MAX_DIGITS) return false;
                v = v * 10 + (ch - '0');
            }
            c->p++;
        } else if (ch == '.' && !decimal) {
            if (digits > 12) return false;
            decimal = true;
            c->p++;
        } else {
            break;
        }
    }
    if (decimal && frac == 0) return false;
    *is_int = !decimal;
    *value = negative ? -v : v;
    return true;
}

/* A Bare Item (RFC 8941 §4.2.3.1): String, Token, Integer/Decimal, Byte Sequence or Boolean. */
static bool sf_bare_item(sf_cursor *c, bool *is_int, int64_t *value) {
    *is_int = false;
    if (c->p == c->end) return false;
    unsigned char ch = *c->p;
    if (ch == '-' || is_digit(ch)) return sf_number(c, is_int, value);
    if (ch == '"') {
        for (c->p++; c->p < c->end; c->p++) {
            unsigned char s = *c->p;
            if (s == '\\') {
                if (++c->p == c->end || (*c->p != '"' && *c->p != '\\')) return false;
            } else if (s == '"') {
                c->p++;
                return true;
            } else if (s < 0x20 || s > 0x7e) {
                return false;
            }
        }
        return false;
    }
    if (sf_alpha(ch) || ch == '*') {
        while (c->p < c->end && (sf_tchar(*c->p) || *c->p == ':' || *c->p == '/')) c->p++;
        return true;
    }
    if (ch == ':') {
        for (c->p++; c->p < c->end && *c->p != ':'; c->p++)
            if (!sf_base64(*c->p)) return false;
        if (c->p == c->end) return false;
        c->p++;
        return true;
    }
    if (ch == '?') {
        if (c->end - c->p < 2 || (c->p[1] != '0' && c->p[1] != '1')) return false;
        c->p += 2;
        return true;
    }
    return false;
}

/* One member's parameters: sets r and t (-1 when absent; the last of a repeated key wins). */
static bool sf_parameters(sf_cursor *c, int64_t *r, int64_t *t) {
    while (c->p < c->end && *c->p == ';') {
        c->p++;
        while (c->p < c->end && *c->p == ' ') c->p++;
        const unsigned char *key = c->p;
        if (c->p == c->end || !(sf_lcalpha(*c->p) || *c->p == '*')) return false;
        while (c->p < c->end &&
               (sf_lcalpha(*c->p) || is_digit(*c->p) || *c->p == '_' || *c->p == '-' || *c->p == '.' || *c->p == '*'))
            c->p++;
        const size_t key_len = (size_t)(c->p - key);
        bool is_int = false;
        int64_t v = 0;
        if (c->p < c->end && *c->p == '=') {
            c->p++;
            if (!sf_bare_item(c, &is_int, &v)) return false;
        }
        if (key_len == 1 && (key[0] == 'r' || key[0] == 't')) {
            if (!is_int || v < 0) return false; /* r and t are non-negative Integers (draft §4.1.1, §4.1.2) */
            *(key[0] == 'r' ? r : t) = v;
        }
    }
    return true;
}

static rf_retry_after_status parse_ratelimit(const unsigned char *p, size_t n, int64_t *delay_ms) {
    sf_cursor c = {p, p + n};
    int64_t wait_s = -1;
    for (;;) {
        bool is_int;
        int64_t ignored, r = -1, t = -1;
        if (c.p < c.end && *c.p == '(') return RF_RA_INVALID; /* an Inner List is no service-limit Item */
        if (!sf_bare_item(&c, &is_int, &ignored) || !sf_parameters(&c, &r, &t)) return RF_RA_INVALID;
        if (r < 0) return RF_RA_INVALID; /* r is REQUIRED */
        if (r == 0 && t > wait_s) wait_s = t;
        while (c.p < c.end && (*c.p == ' ' || *c.p == '\t')) c.p++;
        if (c.p == c.end) break;
        if (*c.p != ',') return RF_RA_INVALID;
        c.p++;
        while (c.p < c.end && (*c.p == ' ' || *c.p == '\t')) c.p++;
        if (c.p == c.end) return RF_RA_INVALID; /* a trailing comma */
    }
    if (wait_s < 0) return RF_RA_ABSENT;                   /* no exhausted quota with a reset time: no wait asked */
    if (delay_ms != NULL) *delay_ms = wait_s * MS_PER_SEC; /* <= 10^15 s × 1000 fits */
    return RF_RA_OK;
}

rf_retry_after_status rf_wait_header_parse(rf_wait_header h, const char *value, size_t len, int64_t now_ms,
                                           const char *date, size_t date_len, int64_t *delay_ms) {
    if ((unsigned)h >= RF_WAIT_HEADER_COUNT) return RF_RA_INVALID;
    if (h == RF_WAIT_RETRY_AFTER) return rf_retry_after_parse(value, len, now_ms, date, date_len, delay_ms);
    if (value == NULL) return RF_RA_ABSENT;
    const unsigned char *p = (const unsigned char *)value;
    size_t n = len;
    trim_ows(&p, &n);
    /* Present but empty: no wait asked, except a pushback, where anything but an integer means do not retry
     * (gRPC A6; grpc-go aborts on strconv.Atoi("")'s error too). */
    if (n == 0) return h == RF_WAIT_GRPC_RETRY_PUSHBACK_MS ? RF_RA_STOP : RF_RA_ABSENT;
    switch (h) {
    case RF_WAIT_RETRY_AFTER_MS:
    case RF_WAIT_X_MS_RETRY_AFTER_MS: return parse_ms(p, n, delay_ms);
    case RF_WAIT_RATELIMIT_RESET: return parse_seconds(p, n, delay_ms);
    case RF_WAIT_RATELIMIT: return parse_ratelimit(p, n, delay_ms);
    case RF_WAIT_X_RATELIMIT_RESET: return parse_reset(p, n, now_ms, date, date_len, delay_ms);
    case RF_WAIT_GRPC_RETRY_PUSHBACK_MS: return parse_pushback(p, n, delay_ms);
    default: return RF_RA_INVALID;
    }
}
