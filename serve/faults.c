/* retryfreeze-serve: the --faults grammar. Fail closed: any token we do not understand stops the
 * server from starting, because a typo silently meaning "no faults" would make a soak test lie. */
#include "faults.h"

#include <stdio.h>
#include <string.h>

int srv_parse_uint(const char *s, size_t len, uint64_t max, uint64_t *out) {
    uint64_t v = 0;
    if (len == 0) return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (d > max || v > (max - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* "0", "1", "0.25", "1.000": at most 9 decimals, at most 1. No exponents, signs, nan or locale. */
static int parse_probability(const char *s, size_t len, uint64_t *ppb) {
    size_t dot = len;
    for (size_t i = 0; i < len; i++)
        if (s[i] == '.') {
            dot = i;
            break;
        }
    uint64_t whole;
    if (srv_parse_uint(s, dot, 1, &whole) != 0) return -1;
    uint64_t frac = 0, scale = SRV_PPB;
    if (dot < len) {
        size_t digits = len - dot - 1;
        if (digits == 0 || digits > 9 || srv_parse_uint(s + dot + 1, digits, SRV_PPB, &frac) != 0) return -1;
        for (size_t i = 0; i < digits; i++) scale /= 10;
        frac *= scale;
    }
    uint64_t v = whole * SRV_PPB + frac;
    if (v > SRV_PPB) return -1;
    *ppb = v;
    return 0;
}

static int fail(char *err, size_t errlen, const char *what, const char *tok, size_t toklen) {
    int n = toklen > 200 ? 200 : (int)toklen;
    snprintf(err, errlen, "%s in token '%.*s'", what, n, tok);
    return -1;
}

static int has_rule(const struct srv_fault_spec *spec, const struct srv_fault_rule *r) {
    for (size_t i = 0; i < spec->count; i++)
        if (spec->rules[i].kind == r->kind && spec->rules[i].status == r->status &&
            (spec->rules[i].stall_ms > 0) == (r->stall_ms > 0))
            return 1;
    return 0;
}

/* slow=P:MS or P:MSms: the probability, and into *stall_ms the stall, 1..3600000 ms; *plen the probability's length. */
static int parse_slow(const char *val, size_t vlen, size_t *plen, long *stall_ms) {
    const char *colon = memchr(val, ':', vlen);
    if (colon == NULL) return -1;
    *plen = (size_t)(colon - val);
    const char *ms = colon + 1;
    size_t mlen = vlen - *plen - 1;
    if (mlen >= 2 && memcmp(ms + mlen - 2, "ms", 2) == 0) mlen -= 2;
    uint64_t v;
    if (srv_parse_uint(ms, mlen, 3600000, &v) != 0 || v == 0) return -1;
    *stall_ms = (long)v;
    return 0;
}

static int parse_token(const char *tok, size_t len, struct srv_fault_spec *spec, char *err, size_t errlen) {
    const char *eq = memchr(tok, '=', len);
    if (eq == NULL) return fail(err, errlen, "expected NAME=VALUE", tok, len);
    size_t nlen = (size_t)(eq - tok);
    const char *val = eq + 1;
    size_t vlen = len - nlen - 1;

    if (nlen == 2 && memcmp(tok, "ra", 2) == 0) {
        uint64_t ra;
        if (spec->retry_after_s >= 0) return fail(err, errlen, "repeated ra", tok, len);
        if (srv_parse_uint(val, vlen, 1000000000, &ra) != 0)
            return fail(err, errlen, "bad seconds (integer 0..1000000000)", tok, len);
        spec->retry_after_s = (long)ra;
        return 0;
    }

    struct srv_fault_rule rule = {SRV_FAULT_STATUS, 0, 0, 0};
    uint64_t status;
    if (nlen == 7 && memcmp(tok, "timeout", 7) == 0) {
        rule.kind = SRV_FAULT_TIMEOUT;
    } else if (nlen == 4 && memcmp(tok, "slow", 4) == 0) { /* a stall of its own before the work: a slow tail */
        rule.kind = SRV_FAULT_TIMEOUT;
        if (parse_slow(val, vlen, &vlen, &rule.stall_ms) != 0)
            return fail(err, errlen, "bad slow (want slow=P:MS, MS 1..3600000, e.g. slow=0.05:800ms)", tok, len);
    } else if (nlen == 5 && memcmp(tok, "reset", 5) == 0)
        rule.kind = SRV_FAULT_RESET;
    else if (nlen == 5 && memcmp(tok, "empty", 5) == 0)
        rule.kind = SRV_FAULT_EMPTY;
    else if (nlen == 3 && srv_parse_uint(tok, 3, 599, &status) == 0 && status >= 200)
        rule.status = (int)status; /* no 1xx: an interim response cannot be the answer */
    else
        return fail(err, errlen, "unknown fault (want 200..599, timeout, slow, reset, empty or ra)", tok, len);

    if (has_rule(spec, &rule)) return fail(err, errlen, "repeated fault", tok, len);
    if (parse_probability(val, vlen, &rule.ppb) != 0)
        return fail(err, errlen, "bad probability (decimal 0..1, at most 9 decimals)", tok, len);
    if (spec->count == SRV_FAULT_RULES_MAX) return fail(err, errlen, "too many faults", tok, len);
    spec->total_ppb += rule.ppb;
    if (spec->total_ppb > SRV_PPB) return fail(err, errlen, "probabilities sum to more than 1", tok, len);
    spec->rules[spec->count++] = rule;
    return 0;
}

int srv_faults_parse(const char *text, struct srv_fault_spec *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->retry_after_s = -1;
    size_t len = strlen(text);
    if (len == 0) return 0;
    size_t start = 0;
    while (start <= len) {
        const char *comma = memchr(text + start, ',', len - start);
        size_t end = comma ? (size_t)(comma - text) : len;
        size_t a = start, b = end;
        while (a < b && text[a] == ' ') a++;
        while (b > a && text[b - 1] == ' ') b--;
        if (a == b) return fail(err, errlen, "empty token", text, len);
        if (parse_token(text + a, b - a, out, err, errlen) != 0) return -1;
        start = end + 1;
    }
    return 0;
}

const struct srv_fault_rule *srv_faults_pick(const struct srv_fault_spec *spec, uint64_t draw) {
    uint64_t edge = 0;
    for (size_t i = 0; i < spec->count; i++) {
        edge += spec->rules[i].ppb;
        if (draw < edge) return &spec->rules[i];
    }
    return NULL;
}
