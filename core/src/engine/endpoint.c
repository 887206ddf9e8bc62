/*
 * Endpoints: "METHOD /path" where a segment may be a literal, a {param} (one non-empty segment) or, as the
 * last segment only, "*" (any suffix, including none): parsing, and the order of shapes the loader finds duplicates
 * by. Requests are matched through the route index (route_index.c).
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
            return true;
        } else if (seg[0] == '{') {
            if (slen < 3 || seg[slen - 1] != '}' || !param_name(seg + 1, slen - 2)) {
                snprintf(msg, msg_cap, "segment \"%.*s\" is not a {name} parameter (letters, digits, '_')", (int)slen,
                         seg);
                return false;
            }
            kind = RFI_SEG_PARAM;
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
    return true;
}

static int sign(long v) { return (v > 0) - (v < 0); }

int rfi_endpoint_shape_compare(const rfi_endpoint *a, const rfi_endpoint *b) {
    int c = strcmp(a->method, b->method);
    if (c != 0) return sign(c);
    for (size_t i = 0; i < a->n_segments && i < b->n_segments; i++) {
        if (a->seg_kind[i] != b->seg_kind[i]) return sign((long)a->seg_kind[i] - (long)b->seg_kind[i]);
        if (a->seg_kind[i] != RFI_SEG_LITERAL) continue; /* {x} and {y} take the same segments */
        size_t la = a->seg_len[i], lb = b->seg_len[i];
        c = memcmp(a->pattern + a->seg_off[i], b->pattern + b->seg_off[i], la < lb ? la : lb);
        if (c != 0) return sign(c);
        if (la != lb) return la < lb ? -1 : 1;
    }
    if (a->n_segments != b->n_segments) return a->n_segments < b->n_segments ? -1 : 1;
    return (int)a->wildcard - (int)b->wildcard;
}

/* FNV-1a over the method, each segment's kind and a literal's bytes, and the last "*": equal for endpoints that
 * rfi_endpoint_shape_compare calls equal (a {param}'s name is left out). */
static uint64_t fnv(uint64_t h, const void *data, size_t n) {
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3u;
    return h;
}

uint64_t rfi_endpoint_shape_hash(const rfi_endpoint *e) {
    uint64_t h = fnv(0xCBF29CE484222325u, e->method, e->method_len);
    for (size_t i = 0; i < e->n_segments; i++) {
        const unsigned char kind = e->seg_kind[i];
        h = fnv(h, &kind, 1);
        if (kind == RFI_SEG_LITERAL) h = fnv(h, e->pattern + e->seg_off[i], e->seg_len[i]);
        h = fnv(h, "/", 1);
    }
    return fnv(h, e->wildcard ? "*" : "", e->wildcard);
}
