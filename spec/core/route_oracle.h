/*
 * A TEST ORACLE, not part of retryfreeze: the routing rules of docs/lock.md ("Endpoints", "Which route decides")
 * as a plain scan over every route, and a generator of adversarial locks and requests. The engine matches through
 * its route index (core/src/engine/route_index.c); spec/core/test_route_index.c and fuzz/fuzz_route_index.c check
 * that rf_policy_match and rf_policy_next_segment answer exactly what this scan answers. Header-only, public API
 * only, written from the documentation rather than from the engine's code.
 *
 * The rules: a method compares byte for byte. The routed path is the path before its first '?' or '#'; it must
 * start with '/'; "/" has no segment, any other path has the segments between its slashes (possibly empty). A
 * literal segment takes a segment of the same bytes, a {param} any non-empty segment, a last "*" the rest of the
 * path, whatever it holds, including nothing. Of the matching routes, the most specific decides: compared position
 * by position, a literal beats a {param}, which beats a "*"; where the path ends, a pattern that ends there beats a
 * "*" that takes nothing. Two routes of the same shape are refused by the loader, which names the first route that
 * repeats an earlier one's shape.
 */
#ifndef RETRYFREEZE_SPEC_ROUTE_ORACLE_H
#define RETRYFREEZE_SPEC_ROUTE_ORACLE_H

#include "retryfreeze/policy.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define RO_MAX_SEGMENTS 20 /* a pattern's segments at most, a last "*" included (docs/lock.md) */

enum { RO_LITERAL, RO_PARAM };

typedef struct ro_route {
    const char *method;
    size_t n;
    int kind[RO_MAX_SEGMENTS];
    const char *text[RO_MAX_SEGMENTS]; /* a literal's bytes, into the pattern */
    size_t len[RO_MAX_SEGMENTS];
    bool wild; /* a last "*" */
} ro_route;

/* Splits a pattern such as "/a/{id}" (with a last "*" or not) into r (text points into pattern, which must outlive r).
 */
static inline void ro_parse(const char *method, const char *pattern, ro_route *r) {
    memset(r, 0, sizeof *r);
    r->method = method;
    const char *s = pattern + 1;
    while (*s != '\0') {
        const char *e = strchr(s, '/');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 1 && s[0] == '*') {
            r->wild = true;
            break;
        }
        r->kind[r->n] = s[0] == '{' ? RO_PARAM : RO_LITERAL;
        r->text[r->n] = s;
        r->len[r->n] = len;
        r->n++;
        if (e == NULL) break;
        s = e + 1;
    }
}

/* The routes of a loaded policy, in its order. */
static inline size_t ro_load(const rf_policy *p, ro_route *routes, size_t cap) {
    size_t n = rf_policy_route_count(p);
    for (size_t i = 0; i < n && i < cap; i++) {
        rf_route_view v;
        rf_policy_route(p, i, &v);
        ro_parse(v.method, v.pattern, &routes[i]);
    }
    return n < cap ? n : cap;
}

/* A path's segments: the routed part cut at slashes. Returns false for a path that routes nowhere. */
typedef struct ro_segments {
    size_t n;
    const char *text[64];
    size_t len[64];
    bool more; /* more than 64 segments: the rest is not kept (no pattern reaches that far) */
} ro_segments;

static inline bool ro_split(const char *path, size_t path_len, ro_segments *out) {
    size_t routed = 0;
    while (routed < path_len && path[routed] != '?' && path[routed] != '#') routed++;
    out->n = 0;
    out->more = false;
    if (routed == 0 || path[0] != '/') return false;
    if (routed == 1) return true; /* "/" */
    size_t start = 1;
    for (;;) {
        size_t end = start;
        while (end < routed && path[end] != '/') end++;
        if (out->n == 64) {
            out->more = true;
            return true;
        }
        out->text[out->n] = path + start;
        out->len[out->n] = end - start;
        out->n++;
        if (end == routed) return true;
        start = end + 1;
    }
}

static inline bool ro_segment_takes(const ro_route *r, size_t i, const char *seg, size_t len) {
    if (len == 0) return false;
    return r->kind[i] == RO_PARAM || (r->len[i] == len && memcmp(r->text[i], seg, len) == 0);
}

/* Does r match? On a match, rank[0..*n_rank) says what took each position: 3 a literal, 2 a {param}, 1 the "*",
 * 4 the pattern's end where the path ends. */
static inline bool ro_matches(const ro_route *r, const char *method, size_t method_len, const ro_segments *segs,
                              int rank[RO_MAX_SEGMENTS + 1], size_t *n_rank) {
    if (strlen(r->method) != method_len || memcmp(r->method, method, method_len) != 0) return false;
    size_t have = segs->more ? (size_t)-1 : segs->n;
    size_t i = 0;
    for (; i < r->n; i++) {
        if (i >= have || !ro_segment_takes(r, i, segs->text[i], segs->len[i])) return false;
        rank[i] = r->kind[i] == RO_LITERAL ? 3 : 2;
    }
    if (have == r->n && !r->wild) {
        rank[i] = 4;
    } else if (r->wild) {
        rank[i] = 1;
    } else {
        return false; /* the path goes on and the pattern has no "*" */
    }
    *n_rank = i + 1;
    return true;
}

/* rf_policy_match by scanning every route: the most specific match, the first one on a tie; -1 when none. */
static inline long ro_match(const ro_route *routes, size_t n, const char *method, size_t method_len, const char *path,
                            size_t path_len) {
    ro_segments segs;
    if (!ro_split(path, path_len, &segs)) return -1;
    long best = -1;
    int best_rank[RO_MAX_SEGMENTS + 1], rank[RO_MAX_SEGMENTS + 1];
    size_t best_n = 0, n_rank = 0;
    for (size_t i = 0; i < n; i++) {
        if (!ro_matches(&routes[i], method, method_len, &segs, rank, &n_rank)) continue;
        bool better = best < 0;
        for (size_t k = 0; !better && k < n_rank && k < best_n; k++) {
            if (rank[k] != best_rank[k]) {
                better = rank[k] > best_rank[k];
                break;
            }
        }
        if (better) {
            best = (long)i;
            memcpy(best_rank, rank, sizeof rank);
            best_n = n_rank;
        }
    }
    return best;
}

/* rf_policy_next_segment by scanning every route from *cursor: the next route of method that can match a path of
 * more than k segments beginning with prefix's k segments, and what it takes at segment k + 1. */
static inline int ro_next(const ro_route *routes, size_t n, const char *method, size_t method_len, const char *prefix,
                          size_t prefix_len, size_t *cursor, rf_next_segment *out) {
    ro_segments segs = {.n = 0, .more = false}; /* the k segments, each ended by a '/' ("//": one empty segment) */
    for (size_t i = 1, start = 1; i < prefix_len && segs.n < 64; i++) {
        if (prefix[i] != '/') continue;
        segs.text[segs.n] = prefix + start;
        segs.len[segs.n++] = i - start;
        start = i + 1;
    }
    for (size_t i = *cursor; i < n; i++) {
        const ro_route *r = &routes[i];
        if (strlen(r->method) != method_len || memcmp(r->method, method, method_len) != 0) continue;
        size_t k = 0;
        bool takes = true;
        for (; k < segs.n && k < r->n; k++) {
            if (!ro_segment_takes(r, k, segs.text[k], segs.len[k])) {
                takes = false;
                break;
            }
        }
        if (!takes) continue;
        if (k < segs.n || r->n == segs.n) { /* the pattern ended within the prefix, or right after it */
            if (!r->wild) continue;
            *out = (rf_next_segment){.route = i, .kind = RF_NEXT_REST, .literal = NULL, .literal_len = 0};
        } else if (r->kind[k] == RO_PARAM) {
            *out = (rf_next_segment){.route = i, .kind = RF_NEXT_PARAM, .literal = NULL, .literal_len = 0};
        } else {
            *out =
                (rf_next_segment){.route = i, .kind = RF_NEXT_LITERAL, .literal = r->text[k], .literal_len = r->len[k]};
        }
        *cursor = i + 1;
        return 1;
    }
    *cursor = n;
    return 0;
}

/* Same shape: the same method, the same literals at the same positions, {param}s at the same positions (whatever
 * their names), the same last "*". */
static inline bool ro_same_shape(const ro_route *a, const ro_route *b) {
    if (strcmp(a->method, b->method) != 0 || a->n != b->n || a->wild != b->wild) return false;
    for (size_t i = 0; i < a->n; i++) {
        if (a->kind[i] != b->kind[i]) return false;
        if (a->kind[i] == RO_LITERAL && (a->len[i] != b->len[i] || memcmp(a->text[i], b->text[i], a->len[i]) != 0))
            return false;
    }
    return true;
}

/* ---- the adversary: random locks and requests ---- */

/* A source of choices: a number in [0, n). */
typedef unsigned (*ro_pick)(void *src, unsigned n);

/* Literals a matcher could confuse: case variants, escapes of '*', placeholder-like strings, shared prefixes,
 * lengths around the 4- and 8-byte words a comparison or a hash may read. */
static const char *const ro_literals[] = {"a",
                                          "A",
                                          "b",
                                          "rf~",
                                          "~",
                                          "_",
                                          "%2A",
                                          "%2a",
                                          "items",
                                          "Items",
                                          "item",
                                          "items2",
                                          "v1",
                                          "v2",
                                          "x.json",
                                          "abcdefgh",
                                          "abcdefgi",
                                          "abcdefghi",
                                          "abcdefghijklmnop",
                                          "abcdefghijklmnoq",
                                          "a-b",
                                          "@",
                                          "=;",
                                          "id",
                                          "other"};
#define RO_N_LITERALS (sizeof ro_literals / sizeof ro_literals[0])
/* More methods than the index compares one by one (RFI_INDEX_METHODS, 8), so that both of its ways are taken. */
static const char *const ro_methods[] = {"GET",  "PUT",  "POST",    "DELETE", "A",     "GE",
                                         "GETS", "HEAD", "OPTIONS", "PATCH",  "TRACE", "ABCDEFGHIJKLMNOP"};
#define RO_N_METHODS (sizeof ro_methods / sizeof ro_methods[0])
static const char *const ro_params[] = {"{id}", "{x}", "{kind}", "{_}"};

#define RO_MAX_ENDPOINT 256 /* an endpoint's characters at most (docs/lock.md) */

/* One endpoint "METHOD /pattern" of at most RO_MAX_ENDPOINT characters into buf (cap > RO_MAX_ENDPOINT). */
static inline void ro_random_endpoint(char *buf, size_t cap, ro_pick pick, void *src) {
    size_t len = (size_t)snprintf(buf, cap, "%s ", ro_methods[pick(src, RO_N_METHODS)]);
    unsigned n = pick(src, 16) == 0 ? pick(src, RO_MAX_SEGMENTS + 1) : pick(src, 5);
    bool wild = pick(src, 4) == 0;
    if (wild && n == RO_MAX_SEGMENTS) n--; /* the "*" counts among the 20 */
    for (unsigned i = 0; i < n; i++) {
        const char *seg = pick(src, 3) == 0 ? ro_params[pick(src, 4)] : ro_literals[pick(src, RO_N_LITERALS)];
        if (len + 1 + strlen(seg) + 2 > RO_MAX_ENDPOINT) seg = "a"; /* room for a last "*" */
        if (len + 1 + strlen(seg) + 2 > RO_MAX_ENDPOINT) break;
        len += (size_t)snprintf(buf + len, cap - len, "/%s", seg);
    }
    if (wild) len += (size_t)snprintf(buf + len, cap - len, "/*");
    if (n == 0 && !wild) snprintf(buf + len, cap - len, "/");
}

/* A request method: one a lock may name, a lowercase one, RF_OTHER_METHOD or a longer one. */
static inline const char *ro_random_method(ro_pick pick, void *src) {
    static const char *const others[] = {"get", RF_OTHER_METHOD, "GETX", "POS"};
    return pick(src, 6) == 0 ? others[pick(src, 4)] : ro_methods[pick(src, RO_N_METHODS)];
}

/* A segment of a request: a lock's literal, an empty one, RF_OTHER_SEGMENT, a "*" or a {param} sent as text, … */
static inline const char *ro_random_segment(ro_pick pick, void *src) {
    static const char *const others[] = {"",   "",      RF_OTHER_SEGMENT,    "*",      "{id}",
                                         "zz", "ITEMS", "abcdefghijklmnopq", "abcdefg"};
    return pick(src, 4) == 0 ? others[pick(src, 9)] : ro_literals[pick(src, RO_N_LITERALS)];
}

/* A request path into buf: segments (sometimes past the deepest pattern), a trailing '/', a query or fragment that
 * may hold '/', sometimes no leading '/' or nothing at all. */
static inline void ro_random_path(char *buf, size_t cap, ro_pick pick, void *src) {
    size_t len = 0;
    buf[0] = '\0';
    unsigned n = pick(src, 12) == 0 ? pick(src, RO_MAX_SEGMENTS + 4) : pick(src, 6);
    bool lead = pick(src, 10) != 0;
    for (unsigned i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i > 0 || lead ? "/" : "", ro_random_segment(pick, src));
    if (n == 0 && lead) len += (size_t)snprintf(buf + len, cap - len, "/");
    if (pick(src, 6) == 0) len += (size_t)snprintf(buf + len, cap - len, "/");
    static const char *const tails[] = {"?q=1", "#f", "?", "#", "?a/b", "#/x/y", "?x#y"};
    if (pick(src, 5) == 0) snprintf(buf + len, cap - len, "%s", tails[pick(src, 7)]);
}

/* A random lock: up to RO_MAX_ROUTES endpoints, and its text. */
#define RO_MAX_ROUTES 200
typedef struct ro_lock {
    size_t n;
    char endpoints[RO_MAX_ROUTES][RO_MAX_ENDPOINT + 8];
    char text[RO_MAX_ROUTES * (RO_MAX_ENDPOINT + 24) + 512];
} ro_lock;

/* n random endpoints (1..max). */
static inline void ro_random_lock(ro_lock *g, size_t max, ro_pick pick, void *src) {
    if (max > RO_MAX_ROUTES) max = RO_MAX_ROUTES;
    g->n = 1 + pick(src, (unsigned)max);
    for (size_t i = 0; i < g->n; i++) ro_random_endpoint(g->endpoints[i], sizeof g->endpoints[i], pick, src);
}

/* g->text from g->endpoints: a multi-route lock whose other fields need no rng (jitter "none"). */
static inline void ro_lock_text(ro_lock *g) {
    size_t len =
        (size_t)snprintf(g->text, sizeof g->text,
                         "{\"version\":1,\"defaults\":{\"maxAttempts\":2,\"perAttemptTimeoutMs\":100,"
                         "\"totalBudgetMs\":1000,\"retryable\":[\"HTTP_503\"],\"backoff\":{\"jitter\":\"none\"}},"
                         "\"routes\":[");
    for (size_t i = 0; i < g->n; i++)
        len += (size_t)snprintf(g->text + len, sizeof g->text - len, "%s{\"endpoint\":\"%s\"}", i ? "," : "",
                                g->endpoints[i]);
    snprintf(g->text + len, sizeof g->text - len, "]}");
}

/* The duplicate the loader must name: the first endpoint (in the lock's order) with the shape of an earlier one,
 * and that one. */
static inline bool ro_first_duplicate(const ro_lock *g, size_t *i_out, size_t *k_out) {
    static ro_route parsed[RO_MAX_ROUTES];
    static char methods[RO_MAX_ROUTES][20];
    for (size_t i = 0; i < g->n; i++) {
        const char *sp = strchr(g->endpoints[i], ' ');
        snprintf(methods[i], sizeof methods[i], "%.*s", (int)(sp - g->endpoints[i]), g->endpoints[i]);
        ro_parse(methods[i], sp + 1, &parsed[i]);
        for (size_t k = 0; k < i; k++) {
            if (ro_same_shape(&parsed[k], &parsed[i])) {
                *i_out = i;
                *k_out = k;
                return true;
            }
        }
    }
    return false;
}

/* Drops endpoint i. */
static inline void ro_drop(ro_lock *g, size_t i) {
    memmove(g->endpoints[i], g->endpoints[i + 1], (g->n - i - 1) * sizeof g->endpoints[0]);
    g->n--;
}

/* A prefix for rf_policy_next_segment: k segments each followed by '/' ("/" for none). */
static inline void ro_random_prefix(char *buf, size_t cap, ro_pick pick, void *src) {
    size_t len = (size_t)snprintf(buf, cap, "/");
    unsigned k = pick(src, 8) == 0 ? pick(src, RO_MAX_SEGMENTS + 3) : pick(src, 5);
    for (unsigned i = 0; i < k; i++) len += (size_t)snprintf(buf + len, cap - len, "%s/", ro_random_segment(pick, src));
}

#endif
