/*
 * The route index: per method, a trie over the patterns' segments, with a literal edge per literal segment, one
 * {param} edge per node and a last "*" kept as a mark on the node where the pattern ends. Built once at load in the
 * policy's own memory (rfi_route_index_build, freed by rf_policy_free); the decision path only reads it.
 *
 * An all-literal route is also kept in a table keyed by its method and whole pattern: an exact literal match is
 * the most specific there can be, so one lookup answers most requests. Otherwise rfi_policy_match walks the trie
 * depth first, at each node the literal edge first, then the {param} edge, then the node's "*": the order of the
 * specificity rule (at the first segment where two matching routes differ, a literal beats a {param}, which beats
 * a last "*"; at the end of the path an exact end beats a "*" that takes no segment). So the first route the walk
 * reaches is the most specific one, and a walk touches at most the nodes a request's segments lead to, whatever
 * the number of routes. rf_policy_next_segment walks the same edges along a prefix.
 * The segment rule is the index's alone: a literal edge takes a segment of the same bytes, a {param} edge any
 * non-empty segment, a "*" everything after it (docs/lock.md, Endpoints).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Word loads in little-endian order whatever the machine's, so that byte i of a string is byte i of the word. */
static RFI_INLINE uint64_t load8(const char *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static RFI_INLINE uint32_t load4(const char *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

/* The n bytes at p (n <= 8 read, never more) in the low bytes of a word, the rest zero: overlapping loads. */
static RFI_INLINE uint64_t load_upto8(const char *p, size_t n) {
    if (n >= 8) return load8(p);
    if (n >= 4) return load4(p) | (uint64_t)load4(p + n - 4) << (8 * (n - 4));
    if (n == 0) return 0;
    return (uint64_t)(unsigned char)p[0] | (uint64_t)(unsigned char)p[n / 2] << (8 * (n / 2)) |
           (uint64_t)(unsigned char)p[n - 1] << (8 * (n - 1));
}

/* Equal bytes, for short strings (a call to memcmp costs more than these compares): whole words, the last word
 * overlapping the one before it. */
static RFI_INLINE bool same_bytes(const char *a, const char *b, size_t n) {
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8)
            if (load8(a + i) != load8(b + i)) return false;
        return load8(a + n - 8) == load8(b + n - 8);
    }
    return load_upto8(a, n) == load_upto8(b, n);
}

/* A hash of s[0..n): whole words, so a segment costs a few instructions. */
static RFI_INLINE uint32_t segment_hash(const char *s, size_t n) {
    uint64_t h = (uint64_t)n * 0x9E3779B97F4A7C15u;
    while (n > 8) {
        h = (h ^ load8(s)) * 0xBF58476D1CE4E5B9u;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    h = (h ^ load_upto8(s, n)) * 0x94D049BB133111EBu;
    return (uint32_t)(h >> 32) ^ (uint32_t)h;
}

/* Byte searches a word at a time: 0x80 in each byte of v that is zero, exactly (no borrow crosses a byte). */
#define BYTES_01 0x0101010101010101u
#define BYTES_7F 0x7F7F7F7F7F7F7F7Fu
static RFI_INLINE uint64_t zero_bytes(uint64_t v) { return ~(((v & BYTES_7F) + BYTES_7F) | v | BYTES_7F); }

static RFI_INLINE size_t first_byte(uint64_t marks) {
#if defined(__GNUC__)
    return (size_t)__builtin_ctzll(marks) / 8;
#else
    size_t i = 0;
    while (!(marks & 0x80)) marks >>= 8, i++;
    return i;
#endif
}

/* The literal table's hash of a path: its whole words, then its last 0..7 bytes with its length (path_hash at load,
 * routed_hash on a request). */
static RFI_INLINE uint64_t hash_word(uint64_t h, uint64_t w) {
    h = (h ^ w) * 0xBF58476D1CE4E5B9u;
    return h ^ (h >> 31);
}

static RFI_INLINE uint32_t hash_end(uint64_t h, uint64_t tail, size_t n) {
    h = (h ^ tail ^ (uint64_t)n << 56) * 0x94D049BB133111EBu;
    return (uint32_t)(h >> 32) ^ (uint32_t)h;
}

static uint32_t path_hash(const char *s, size_t n) {
    uint64_t h = 0;
    size_t i = 0;
    for (; n - i >= 8; i += 8) h = hash_word(h, load8(s + i));
    return hash_end(h, load_upto8(s + i, n - i), n);
}

/* Where the routed path ends (at the first '?' or '#': query and fragment do not route, else at len), and its
 * path_hash, in one pass over its words. */
static RFI_INLINE size_t routed_hash(const char *path, size_t len, uint32_t *hash) {
    uint64_t h = 0;
    for (size_t i = 0;; i += 8) {
        const size_t left = len - i;
        const uint64_t v = left >= 8 ? load8(path + i) : load_upto8(path + i, left); /* zero bytes past len: no mark */
        const uint64_t marks = zero_bytes(v ^ (BYTES_01 * '?')) | zero_bytes(v ^ (BYTES_01 * '#'));
        if (marks != 0) {
            const size_t k = first_byte(marks);
            *hash = hash_end(h, k == 0 ? 0 : v & (~UINT64_C(0) >> (64 - 8 * k)), i + k);
            return i + k;
        }
        if (left < 8) {
            *hash = hash_end(h, v, len);
            return len;
        }
        h = hash_word(h, v);
    }
}

/* The first '/' of p[from..len), or len. */
static RFI_INLINE size_t next_slash(const char *p, size_t from, size_t len) {
    for (size_t i = from; i < len; i += 8) {
        const uint64_t marks = zero_bytes(load_upto8(p + i, len - i) ^ (BYTES_01 * '/'));
        if (marks != 0) return i + first_byte(marks);
    }
    return len;
}

/* The first slot to probe for the key (parent, hash) in a table of 1 << bits slots: the top bits of a
 * multiplicative mix of both. */
static RFI_INLINE size_t first_slot(unsigned bits, uint32_t parent, uint32_t hash) {
    uint64_t k = ((uint64_t)parent << 32 | hash) * 0x9E3779B97F4A7C15u;
    return (size_t)(k >> (64 - bits));
}
/* The child of parent through the literal edge s[0..len) (hash = segment_hash(s, len)), or 0 when there is none. */
static RFI_INLINE uint32_t edge_find(const rfi_route_index *ix, uint32_t parent, uint32_t hash, const char *s,
                                     size_t len) {
    const size_t mask = ((size_t)1 << ix->edge_bits) - 1;
    for (size_t i = first_slot(ix->edge_bits, parent, hash);; i = (i + 1) & mask) {
        const rfi_index_edge *e = &ix->edges[i];
        if (e->child == 0) return 0;
        if (e->hash == hash && e->parent == parent && e->len == len && same_bytes(e->text, s, len)) return e->child;
    }
}

/* ---- building ---- */

static uint32_t new_node(rfi_route_index *ix) {
    rfi_index_node *n = &ix->nodes[ix->n_nodes];
    *n = (rfi_index_node){.param = 0, .literals = 0, .exact = -1, .wild = -1, .below = 0, .n_below = 0};
    return (uint32_t)ix->n_nodes++;
}

/* The child of parent through the literal edge text[0..len), made when missing (the table has room: it is sized
 * for every literal segment of every route). */
static uint32_t literal_child(rfi_route_index *ix, uint32_t parent, const char *text, size_t len) {
    const uint32_t hash = segment_hash(text, len);
    const size_t mask = ((size_t)1 << ix->edge_bits) - 1;
    size_t i = first_slot(ix->edge_bits, parent, hash);
    for (; ix->edges[i].child != 0; i = (i + 1) & mask) {
        const rfi_index_edge *e = &ix->edges[i];
        if (e->hash == hash && e->parent == parent && e->len == len && same_bytes(e->text, text, len)) return e->child;
    }
    ix->edges[i] =
        (rfi_index_edge){.text = text, .parent = parent, .child = new_node(ix), .hash = hash, .len = (uint32_t)len};
    ix->nodes[parent].literals++;
    return ix->edges[i].child;
}

/* The node where e's pattern ends, the nodes on the way made when missing; path[d] receives the node at depth d
 * (d = 0: the method's), n_segments + 1 of them. */
static uint32_t route_nodes(rfi_route_index *ix, const rfi_endpoint *e, uint32_t path[RFI_MAX_SEGMENTS + 1]) {
    uint32_t node = literal_child(ix, 0, e->method, e->method_len);
    path[0] = node;
    for (size_t s = 0; s < e->n_segments; s++) {
        if (e->seg_kind[s] == RFI_SEG_LITERAL) {
            node = literal_child(ix, node, e->pattern + e->seg_off[s], e->seg_len[s]);
        } else {
            if (ix->nodes[node].param == 0) {
                uint32_t child = new_node(ix);
                ix->nodes[node].param = child;
            }
            node = ix->nodes[node].param;
        }
        path[s + 1] = node;
    }
    return node;
}

void rfi_route_index_free(rfi_route_index *ix) {
    free(ix->nodes);
    free(ix->edges);
    free(ix->literals);
    free(ix->below);
    memset(ix, 0, sizeof *ix);
}

static bool has_pattern(const rfi_endpoint *e) {
    if (e->wildcard) return true;
    for (size_t s = 0; s < e->n_segments; s++)
        if (e->seg_kind[s] != RFI_SEG_LITERAL) return true;
    return false;
}

/* The smallest table of at least twice n slots (at most half full: short probe sequences). */
static unsigned table_bits(size_t n) {
    unsigned bits = 3;
    while (((size_t)1 << bits) < 2 * n) bits++;
    return bits;
}

/* Adds the all-literal route i under its method's node (a second one of the same pattern is refused by the loader;
 * were one here, the first would keep it). */
static void add_literal(rfi_route_index *ix, uint32_t method_node, const rfi_endpoint *e, size_t i) {
    const uint32_t hash = path_hash(e->pattern, e->pattern_len);
    const size_t mask = ((size_t)1 << ix->literal_bits) - 1;
    size_t at = first_slot(ix->literal_bits, method_node, hash);
    for (; ix->literals[at].method_node != 0; at = (at + 1) & mask)
        if (ix->literals[at].method_node == method_node && ix->literals[at].len == e->pattern_len &&
            same_bytes(ix->literals[at].pattern, e->pattern, e->pattern_len))
            return;
    ix->literals[at] = (rfi_index_literal){
        .pattern = e->pattern, .method_node = method_node, .hash = hash, .len = e->pattern_len, .route = (int32_t)i};
}

rf_status rfi_route_index_build(rf_policy *p, rf_error *err) {
    rfi_route_index *ix = &p->index;
    size_t max_nodes = 1, max_edges = 0, n_literal = 0;
    for (size_t i = 0; i < p->n_routes; i++) {
        const rfi_endpoint *e = &p->routes[i].endpoint;
        max_nodes += 1 + e->n_segments;
        max_edges += 1;
        for (size_t s = 0; s < e->n_segments; s++) max_edges += e->seg_kind[s] == RFI_SEG_LITERAL;
        n_literal += !has_pattern(e);
    }
    ix->edge_bits = table_bits(max_edges);
    ix->literal_bits = table_bits(n_literal);
    ix->nodes = malloc(max_nodes * sizeof *ix->nodes);
    ix->edges = calloc((size_t)1 << ix->edge_bits, sizeof *ix->edges);
    ix->literals = calloc((size_t)1 << ix->literal_bits, sizeof *ix->literals);
    ix->n_nodes = 0;
    if (ix->nodes == NULL || ix->edges == NULL || ix->literals == NULL) goto nomem;
    new_node(ix); /* the root */
    uint32_t path[RFI_MAX_SEGMENTS + 1];
    size_t n_below = 0;
    for (size_t i = 0; i < p->n_routes; i++) {
        const rfi_endpoint *e = &p->routes[i].endpoint;
        const size_t methods_before = ix->nodes[0].literals;
        rfi_index_node *end = &ix->nodes[route_nodes(ix, e, path)];
        if (ix->nodes[0].literals > methods_before && ix->n_methods++ < RFI_INDEX_METHODS)
            ix->methods[ix->n_methods - 1] =
                (rfi_index_method){.text = e->method,
                                   .word = e->method_len <= 8 ? load_upto8(e->method, e->method_len) : 0,
                                   .len = e->method_len,
                                   .node = path[0]};
        /* A second route of the same shape is refused by the loader; were one here, the first would keep it. */
        int32_t *mark = e->wildcard ? &end->wild : &end->exact;
        if (*mark < 0) *mark = (int32_t)i;
        if (has_pattern(e))
            ix->nodes[path[0]].patterns++;
        else
            add_literal(ix, path[0], e, i);
        for (size_t d = 0; d < e->n_segments; d++) ix->nodes[path[d]].n_below++;
        if (e->wildcard) end->n_below++;
        n_below += e->n_segments + e->wildcard;
    }
    ix->below = malloc((n_below > 0 ? n_below : 1) * sizeof *ix->below);
    if (ix->below == NULL) goto nomem;
    uint32_t at = 0;
    for (size_t k = 0; k < ix->n_nodes; k++) {
        ix->nodes[k].below = at;
        at += ix->nodes[k].n_below;
        ix->nodes[k].n_below = 0; /* counted again as the lists fill */
    }
    for (size_t i = 0; i < p->n_routes; i++) { /* in route order: each list ascends */
        const rfi_endpoint *e = &p->routes[i].endpoint;
        uint32_t end = route_nodes(ix, e, path);
        for (size_t d = 0; d < e->n_segments; d++) {
            rfi_index_node *n = &ix->nodes[path[d]];
            ix->below[n->below + n->n_below++] = (uint32_t)i;
        }
        if (e->wildcard) {
            rfi_index_node *n = &ix->nodes[end];
            ix->below[n->below + n->n_below++] = (uint32_t)i;
        }
    }
    return RF_OK;
nomem:
    rfi_route_index_free(ix);
    rfi_fail(err, "$", "out of memory while building the route index");
    return RF_ENOMEM;
}

/* ---- the walks ---- */

/* The node of a request's method, or 0: compared with each of a few methods, else looked up. */
static RFI_INLINE uint32_t method_node(const rfi_route_index *ix, const char *method, size_t len) {
    if (ix->n_methods <= RFI_INDEX_METHODS) {
        if (len <= 8) { /* one word against each method's */
            const uint64_t word = load_upto8(method, len);
            for (size_t i = 0; i < ix->n_methods; i++)
                if (ix->methods[i].word == word && ix->methods[i].len == len) return ix->methods[i].node;
            return 0;
        }
        for (size_t i = 0; i < ix->n_methods; i++)
            if (ix->methods[i].len == len && same_bytes(ix->methods[i].text, method, len)) return ix->methods[i].node;
        return 0;
    }
    return edge_find(ix, 0, segment_hash(method, len), method, len);
}

/* The all-literal route of the method's node whose pattern is path[0..len) (hash: its path_hash), or -1. */
static RFI_INLINE long literal_find(const rfi_route_index *ix, uint32_t method, uint32_t hash, const char *path,
                                    size_t len) {
    const size_t mask = ((size_t)1 << ix->literal_bits) - 1;
    for (size_t i = first_slot(ix->literal_bits, method, hash);; i = (i + 1) & mask) {
        const rfi_index_literal *l = &ix->literals[i];
        if (l->method_node == 0) return -1;
        if (l->hash == hash && l->method_node == method && l->len == len && same_bytes(l->pattern, path, len))
            return l->route;
    }
}

/* Where the segment after a request's prefix of d segments lies: each walk cuts the path once, segment by
 * segment, as deep as it goes. */
typedef struct cut_path {
    const char *path;
    size_t len; /* of the routed part (or the prefix without its last '/') */
    size_t pos; /* where the next segment to cut starts */
    bool more;  /* a segment follows the last one cut */
    size_t n;   /* segments cut so far */
    size_t off[RFI_MAX_SEGMENTS + 1], seg_len[RFI_MAX_SEGMENTS + 1];
    bool has[RFI_MAX_SEGMENTS + 1]; /* has[d]: a segment follows the first d */
} cut_path;

static RFI_INLINE void cut_start(cut_path *c, const char *path, size_t len) {
    c->path = path;
    c->len = len;
    c->pos = 1;
    c->more = len > 1; /* "/" has no segment */
    c->n = 0;
}

/* Cuts segment n (when one follows) up to the next '/' or the end. */
static RFI_INLINE void cut_next(cut_path *c) {
    const size_t d = c->n++;
    c->has[d] = c->more;
    if (!c->more) return;
    const size_t end = next_slash(c->path, c->pos, c->len);
    c->off[d] = c->pos;
    c->seg_len[d] = end - c->pos;
    c->more = end < c->len;
    c->pos = end + 1;
}

/* The routes with a {param} or "*": depth first from the method's node, the most specific edge first, so the first
 * route reached wins. */
static RFI_NOINLINE long walk_patterns(const rfi_route_index *ix, uint32_t method, const char *path, size_t len) {
    cut_path c;
    cut_start(&c, path, len);
    uint32_t nodes[RFI_MAX_SEGMENTS + 1];
    uint8_t next_edge[RFI_MAX_SEGMENTS + 1]; /* at each depth: 0 literal, 1 {param}, 2 the node's own "*" */
    size_t d = 0;
    nodes[0] = method;
    next_edge[0] = 0;
    cut_next(&c);
    for (;;) {
        const rfi_index_node *n = &ix->nodes[nodes[d]];
        uint32_t child = 0;
        if (!c.has[d]) { /* the path ends here: an exact end, else a "*" that takes no segment */
            if (n->exact >= 0) return n->exact;
            if (n->wild >= 0) return n->wild;
        } else {
            const size_t seg_len = c.seg_len[d];
            if (next_edge[d] == 0) {
                next_edge[d] = 1;
                if (n->literals > 0 && seg_len > 0) {
                    const char *seg = path + c.off[d];
                    child = edge_find(ix, nodes[d], segment_hash(seg, seg_len), seg, seg_len);
                }
            }
            if (child == 0 && next_edge[d] == 1) {
                next_edge[d] = 2;
                if (seg_len > 0) child = n->param;
            }
            if (child == 0 && n->wild >= 0) return n->wild;
        }
        if (child != 0) { /* a node below depth RFI_MAX_SEGMENTS has no child: d + 1 stays in range */
            nodes[++d] = child;
            next_edge[d] = 0;
            if (d == c.n) cut_next(&c);
            continue;
        }
        if (d == 0) return -1;
        d--;
    }
}

/*
 * rf_policy_match's answer through the index. The routed path ends at the first '?' or '#' and must start with '/'
 * ("/" alone has no segment). An all-literal route that takes it is the most specific match there can be (a
 * literal outranks a {param} and a "*", and no two routes have one shape); only without one are the routes with
 * patterns walked.
 */
long rfi_policy_match(const rf_policy *p, const char *method, size_t method_len, const char *path, size_t path_len) {
    const rfi_route_index *ix = &p->index;
    if (path_len == 0 || path[0] != '/') return -1;
    const uint32_t m = method_node(ix, method, method_len);
    if (m == 0) return -1;
    uint32_t hash;
    const size_t len = routed_hash(path, path_len, &hash);
    const long literal = literal_find(ix, m, hash, path, len);
    if (literal >= 0 || ix->nodes[m].patterns == 0) return literal;
    return walk_patterns(ix, m, path, len);
}

/* The first entry of list[0..n) (ascending) that is >= from, or UINT32_MAX. */
static uint32_t first_from(const uint32_t *list, size_t n, size_t from) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (list[mid] < from)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n ? list[lo] : UINT32_MAX;
}

/*
 * The smallest route index >= from of method that can match a path of more than k segments beginning with the k
 * segments of prefix (each followed by '/'; checked by the caller), or -1; *depth receives k. Every node the
 * prefix's segments lead to is visited (literal and {param} edges alike): a "*" on the way takes every longer path,
 * and at depth k every route continuing past the node, or ending there with "*", can.
 */
long rfi_route_index_next(const rf_policy *p, const char *method, size_t method_len, const char *prefix,
                          size_t prefix_len, size_t from, size_t *depth) {
    const rfi_route_index *ix = &p->index;
    size_t k = 0;
    for (size_t i = 1; i < prefix_len; i++) k += prefix[i] == '/';
    *depth = k;
    const uint32_t node = method_node(ix, method, method_len);
    if (node == 0) return -1;
    cut_path c;
    cut_start(&c, prefix, prefix_len - 1); /* without the last '/': segment k then ends the prefix */
    c.more = k > 0;                        /* "//": one empty segment */
    uint32_t nodes[RFI_MAX_SEGMENTS + 1];
    uint8_t next_edge[RFI_MAX_SEGMENTS + 1];
    uint32_t best = UINT32_MAX;
    size_t d = 0;
    nodes[0] = node;
    next_edge[0] = 0;
    cut_next(&c);
    for (;;) {
        const rfi_index_node *n = &ix->nodes[nodes[d]];
        uint32_t child = 0;
        if (next_edge[d] == 0) { /* the first visit */
            if (n->wild >= 0 && (size_t)n->wild >= from && (uint32_t)n->wild < best) best = (uint32_t)n->wild;
            if (!c.has[d]) {
                uint32_t first = first_from(ix->below + n->below, n->n_below, from);
                if (first < best) best = first;
            }
        }
        if (best == from) break; /* nothing can come before it */
        if (c.has[d] && c.seg_len[d] > 0) {
            if (next_edge[d] == 0) {
                next_edge[d] = 1;
                if (n->literals > 0) {
                    const char *seg = prefix + c.off[d];
                    child = edge_find(ix, nodes[d], segment_hash(seg, c.seg_len[d]), seg, c.seg_len[d]);
                }
            }
            if (child == 0 && next_edge[d] == 1) {
                next_edge[d] = 2;
                child = n->param;
            }
        }
        if (child != 0) {
            nodes[++d] = child;
            next_edge[d] = 0;
            if (d == c.n) cut_next(&c);
            continue;
        }
        if (d == 0) break;
        d--;
    }
    return best == UINT32_MAX ? -1 : (long)best;
}
