/* retryfreeze-serve: the bounded table of sequences (one per Idempotency-Key, or per
 * method + path + script for unkeyed attempts). Not thread-safe: upstream.c holds its mutex. */
#ifndef SRV_SEQUENCES_H
#define SRV_SEQUENCES_H

#include <stddef.h>
#include <stdint.h>

struct srv_seq {
    char *id; /* owned; NULL marks an empty slot */
    uint32_t id_len;
    uint32_t keyed; /* 1 when the identity is an Idempotency-Key */
    uint64_t attempts;
    uint64_t executions;
};

struct srv_seq_table {
    struct srv_seq *slots;
    size_t cap; /* power of two */
    size_t count, keyed;
    size_t bytes; /* identity bytes held */
    size_t max_count, max_bytes;
};

/* Returns 0, or -1 when out of memory. */
int srv_seq_init(struct srv_seq_table *t, size_t max_count, size_t max_bytes);
void srv_seq_free(struct srv_seq_table *t);
/* Forgets every sequence and gives the memory back. Returns 0, or -1 when out of memory. */
int srv_seq_clear(struct srv_seq_table *t);
/* The sequence with this identity, created with zero counts if new. NULL when creating it would
 * pass max_count or max_bytes, or memory runs out: the caller refuses the attempt. */
struct srv_seq *srv_seq_get(struct srv_seq_table *t, const char *id, size_t len, int keyed);

#endif
