/*
 * Endpoints: "METHOD /path" where a segment may be a literal, a {param} (one non-empty segment) or, as the
 * last segment only, "*" (any suffix, including none). Matching and the specificity order of rf_policy_match.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

bool rfi_method_valid(const char *s, size_t len) {
    if (len == 0 || len > RFI_MAX_METHOD) return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] < 'A' || s[i] > 'Z') return false;
    return true;
}

/* RFC 3986 pchar minus '%'-escapes' validation subtleties: unreserved, sub-delims but '*' (the wildcard), ':', '@',
 * '%'. Never '<' or '>': RF_OTHER_SEGMENT holds them, so it equals no literal segment of any lock (test_lock checks
 * that a lock naming it is refused). */
static bool literal_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("-._~!$&'()+,;=:@%", c) != NULL;
}

static bool param_name(const char *s, size_t len) {
    if (len == 0 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_')) return false;
    for (size_t i = 1; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return true;
}

/* The score rfi_endpoint_match gives an all-literal pattern of n segments on an exact match. */
static uint64_t exact_score(size_t n) {
    uint64_t sc = 0;
    for (size_t i = 0; i < n; i++) sc = sc << 3 | RFI_SEG_LITERAL;
    return (sc << 3 | (RFI_SEG_LITERAL + 1)) << (3 * (RFI_MAX_SEGMENTS - n));
}

bool rfi_endpoint_parse(const char *text, size_t len, rfi_endpoint *out, char *msg, size_t msg_cap) {
    memset(out, 0, sizeof *out);
    if (len == 0 || len > RFI_MAX_ENDPOINT) {
        snprintf(msg, msg_cap, "must be \"METHOD /path\" of 1..%d characters", RFI_MAX_ENDPOINT);
        return false;
    }
    const char *sp = memchr(text, ' ', len);
    if (sp == NULL) {
        snprintf(msg, msg_cap, "must be \"METHOD /path\" (one space between method and path)");
        return false;
    }
    size_t mlen = (size_t)(sp - text);
    if (!rfi_method_valid(text, mlen)) {
        snprintf(msg, msg_cap, "method must be 1..%d uppercase letters (RFC 9110 §9 method token)", RFI_MAX_METHOD);
        return false;
    }
    const char *path = sp + 1;
    size_t plen = len - mlen - 1;
    if (plen == 0 || path[0] != '/') {
        snprintf(msg, msg_cap, "path must start with '/'");
        return false;
    }
    memcpy(out->text, text, len);
    memcpy(out->method, text, mlen);
    out->method_len = (uint8_t)mlen;
    memcpy(out->pattern, path, plen);
    out->pattern_len = (uint16_t)plen;
    out->literal_only = true;
    out->literal_score = exact_score(0);
    if (plen == 1) return true; /* "/" has no segments */
    size_t i = 1;
    while (i <= plen) {
        size_t start = i;
        while (i < plen && path[i] != '/') i++;
        size_t slen = i - start;
        const char *seg = path + start;
        if (out->n_segments == RFI_MAX_SEGMENTS) {
            snprintf(msg, msg_cap, "more than %d path segments", RFI_MAX_SEGMENTS);
            return false;
        }
        if (slen == 0) {
            snprintf(msg, msg_cap, "empty path segment at character %zu (no '//' and no trailing '/')",
                     mlen + 1 + start + 1);
            return false;
        }
        uint8_t kind = RFI_SEG_LITERAL;
        if (slen == 1 && seg[0] == '*') {
            if (i != plen) {
                snprintf(msg, msg_cap, "'*' is allowed only as the last segment");
                return false;
            }
            out->wildcard = true;
            out->literal_only = false;
            return true;
        } else if (seg[0] == '{') {
            if (slen < 3 || seg[slen - 1] != '}' || !param_name(seg + 1, slen - 2)) {
                snprintf(msg, msg_cap, "segment \"%.*s\" is not a {name} parameter (letters, digits, '_')", (int)slen,
                         seg);
                return false;
            }
            kind = RFI_SEG_PARAM;
            out->literal_only = false;
        } else {
            for (size_t k = 0; k < slen; k++) {
                if (!literal_char(seg[k])) {
                    snprintf(msg, msg_cap, "segment \"%.*s\" has a character not allowed in a path ('%c')", (int)slen,
                             seg, seg[k]);
                    return false;
                }
            }
        }
        out->seg_off[out->n_segments] = (uint16_t)start;
        out->seg_len[out->n_segments] = (uint16_t)slen;
        out->seg_kind[out->n_segments] = kind;
        out->n_segments++;
        i++;
    }
    out->literal_score = exact_score(out->n_segments);
    return true;
}

static bool bytes_equal(const char *a, const char *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return false;
    return true;
}

/* Methods compare byte-exact (case-sensitive, RFC 9110 §9.1). */
static RFI_INLINE bool method_accepts(const rfi_endpoint *e, const char *method, size_t method_len) {
    return e->method_len == method_len && bytes_equal(e->method, method, method_len);
}

/* Does pattern segment i (a literal or a {param}, never the last "*") accept the request segment seg[0..len)? A
 * literal takes the same bytes, a {param} any non-empty segment. The one rule rfi_endpoint_match and
 * rfi_endpoint_next apply, so the request classes retryfreeze.diff enumerates cannot drift from routing. */
static RFI_INLINE bool segment_accepts(const rfi_endpoint *e, size_t i, const char *seg, size_t len) {
    if (len == 0) return false;
    return e->seg_kind[i] != RFI_SEG_LITERAL ||
           (e->seg_len[i] == len && bytes_equal(e->pattern + e->seg_off[i], seg, len));
}

/*
 * The specificity score packs one 3-bit rank per position (literal 3 > param 2 > wildcard 1; an exact end
 * of path ranks 4), most significant first, so comparing two scores compares routes segment by segment.
 */
bool rfi_endpoint_match(const rfi_endpoint *e, const char *method, size_t method_len, const char *path, size_t path_len,
                        uint64_t *score) {
    if (!method_accepts(e, method, method_len)) return false;
    if (e->literal_only) { /* the common case: one comparison of the whole path */
        if (path_len != e->pattern_len || memcmp(path, e->pattern, path_len) != 0) return false;
        *score = e->literal_score;
        return true;
    }
    uint64_t sc = 0;
    size_t pos = 1, seg = 0;
    if (path_len == 1) pos = 2; /* "/" has no segments */
    while (pos <= path_len) {
        size_t start = pos;
        while (pos < path_len && path[pos] != '/') pos++;
        size_t slen = pos - start;
        if (seg == e->n_segments) {
            if (!e->wildcard) return false;
            *score = (sc << 3 | RFI_SEG_WILDCARD) << (3 * (RFI_MAX_SEGMENTS - seg));
            return true;
        }
        if (!segment_accepts(e, seg, path + start, slen)) return false;
        sc = sc << 3 | e->seg_kind[seg];
        seg++;
        pos++;
    }
    if (seg != e->n_segments) return false;
    /* Exhausted path: a last "*" segment also matches no suffix; an exact end ranks above it. */
    *score = (sc << 3 | (e->wildcard ? RFI_SEG_WILDCARD : RFI_SEG_LITERAL + 1)) << (3 * (RFI_MAX_SEGMENTS - seg));
    return true;
}

int rfi_endpoint_next(const rfi_endpoint *e, const char *method, size_t method_len, const char *prefix,
                      size_t prefix_len, const char **literal, size_t *literal_len) {
    if (!method_accepts(e, method, method_len)) return -1;
    size_t seg = 0, pos = 1;
    while (pos < prefix_len) { /* every segment of the prefix ends with '/' */
        size_t start = pos;
        while (prefix[pos] != '/') pos++;
        if (seg == e->n_segments) return e->wildcard ? RF_NEXT_REST : -1;
        if (!segment_accepts(e, seg, prefix + start, pos - start)) return -1;
        seg++;
        pos++;
    }
    if (seg == e->n_segments) return e->wildcard ? RF_NEXT_REST : -1; /* without "*": exactly n segments */
    if (e->seg_kind[seg] == RFI_SEG_PARAM) return RF_NEXT_PARAM;
    *literal = e->pattern + e->seg_off[seg];
    *literal_len = e->seg_len[seg];
    return RF_NEXT_LITERAL;
}

bool rfi_endpoint_same_shape(const rfi_endpoint *a, const rfi_endpoint *b) {
    if (strcmp(a->method, b->method) != 0 || a->n_segments != b->n_segments || a->wildcard != b->wildcard) return false;
    for (size_t i = 0; i < a->n_segments; i++) {
        if (a->seg_kind[i] != b->seg_kind[i]) return false;
        if (a->seg_kind[i] == RFI_SEG_LITERAL &&
            (a->seg_len[i] != b->seg_len[i] ||
             memcmp(a->pattern + a->seg_off[i], b->pattern + b->seg_off[i], a->seg_len[i]) != 0))
            return false;
    }
    return true;
}
