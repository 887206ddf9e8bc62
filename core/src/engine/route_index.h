/* The route index's layout (route_index.c), embedded in struct rf_policy (internal.h). Private to the engine. */

#ifndef RETRYFREEZE_ROUTE_INDEX_H
#define RETRYFREEZE_ROUTE_INDEX_H

#include <stddef.h>
#include <stdint.h>

/* Up to this many methods, a request's method is found by comparing it with each; past it, through the edge table. */
#define RFI_INDEX_METHODS 8

/*
 * One node of the trie: the requests that took the same edges so far. Node 0 is the root; its literal edges are
 * the methods, and a method's node stands for the path "/" (no segment). A node at depth d has taken d segments.
 */
typedef struct rfi_index_node {
    uint32_t param;    /* the child through a {param} edge; 0 for none (the root is nobody's child) */
    uint32_t literals; /* how many literal edges leave the node (0: no lookup needed) */
    int32_t exact;     /* the route whose pattern ends here without "*", or -1 */
    int32_t wild;      /* the route whose pattern ends here with a last "*", or -1 */
    uint32_t below;    /* below[below .. below + n_below) of the index: the routes that continue past this node or */
    uint32_t n_below;  /* end here with "*", in ascending order (rf_policy_next_segment's answers at this node) */
    uint32_t patterns; /* on a method's node: its routes with a {param} or a "*" (0: the literal table answers all) */
} rfi_index_node;

/* A literal edge, in an open-addressing table (linear probing, at most half full) keyed by (parent, text). */
typedef struct rfi_index_edge {
    const char *text; /* the segment (from the root: the method), pointing into the route's endpoint */
    uint32_t parent;
    uint32_t child; /* 0: an empty slot */
    uint32_t hash;  /* segment_hash of text */
    uint32_t len;
} rfi_index_edge;

/* An all-literal route, in an open-addressing table keyed by (its method's node, its whole pattern): one lookup
 * routes a request to it (nothing is more specific than an exact literal match). */
typedef struct rfi_index_literal {
    const char *pattern;
    uint32_t method_node; /* 0: an empty slot */
    uint32_t hash;        /* path_hash of pattern */
    uint32_t len;
    int32_t route;
} rfi_index_literal;

typedef struct rfi_index_method {
    const char *text;
    uint64_t word; /* a method of up to 8 bytes as one little-endian word, the rest zero (else 0) */
    uint32_t len;
    uint32_t node;
} rfi_index_method;

typedef struct rfi_route_index {
    rfi_index_node *nodes;
    size_t n_nodes;
    rfi_index_edge *edges;
    unsigned edge_bits; /* the table has 1 << edge_bits slots */
    rfi_index_literal *literals;
    unsigned literal_bits;
    uint32_t *below;
    size_t n_methods;
    rfi_index_method methods[RFI_INDEX_METHODS]; /* when n_methods <= RFI_INDEX_METHODS */
} rfi_route_index;

#endif
