/* retryfreeze-serve: open addressing with linear probing; the table doubles at half load and
 * never past what max_count needs, so memory stays bounded however many keys clients invent. */
#include "sequences.h"

#include <stdlib.h>
#include <string.h>

#define INITIAL_CAP 1024

/* FNV-1a: the identities come from our own tests, not an adversary. The keyed flag is mixed in
 * so a key and a method+path with the same bytes never meet. */
static uint64_t hash(const char *s, size_t len, int keyed) {
    uint64_t h = UINT64_C(0xcbf29ce484222325) ^ (uint64_t)keyed;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

static int alloc_slots(struct srv_seq_table *t, size_t cap) {
    struct srv_seq *slots = calloc(cap, sizeof *slots);
    if (slots == NULL) return -1;
    t->slots = slots;
    t->cap = cap;
    return 0;
}

int srv_seq_init(struct srv_seq_table *t, size_t max_count, size_t max_bytes) {
    memset(t, 0, sizeof *t);
    t->max_count = max_count;
    t->max_bytes = max_bytes;
    return alloc_slots(t, INITIAL_CAP);
}

void srv_seq_free(struct srv_seq_table *t) {
    for (size_t i = 0; t->slots != NULL && i < t->cap; i++) free(t->slots[i].id);
    free(t->slots);
    t->slots = NULL;
    t->cap = t->count = t->keyed = t->bytes = 0;
}

int srv_seq_clear(struct srv_seq_table *t) {
    size_t max_count = t->max_count, max_bytes = t->max_bytes;
    srv_seq_free(t);
    return srv_seq_init(t, max_count, max_bytes);
}

static struct srv_seq *probe(struct srv_seq *slots, size_t cap, const char *id, size_t len, int keyed) {
    size_t i = (size_t)hash(id, len, keyed) & (cap - 1);
    for (;;) {
        struct srv_seq *s = &slots[i];
        if (s->id == NULL || (s->id_len == len && s->keyed == (uint32_t)keyed && memcmp(s->id, id, len) == 0)) return s;
        i = (i + 1) & (cap - 1);
    }
}

static int grow(struct srv_seq_table *t) {
    struct srv_seq *old = t->slots;
    size_t old_cap = t->cap;
    if (alloc_slots(t, old_cap * 2) != 0) return -1;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].id != NULL) *probe(t->slots, t->cap, old[i].id, old[i].id_len, (int)old[i].keyed) = old[i];
    free(old);
    return 0;
}

struct srv_seq *srv_seq_get(struct srv_seq_table *t, const char *id, size_t len, int keyed) {
    if (len > UINT32_MAX || (t->slots == NULL && alloc_slots(t, INITIAL_CAP) != 0))
        return NULL; /* the NULL slots: a clear that ran out of memory */
    struct srv_seq *s = probe(t->slots, t->cap, id, len, keyed);
    if (s->id != NULL) return s;
    if (t->count >= t->max_count || len + 1 > t->max_bytes - t->bytes) return NULL;
    if ((t->count + 1) * 2 > t->cap) {
        if (grow(t) != 0) return NULL;
        s = probe(t->slots, t->cap, id, len, keyed);
    }
    char *copy = malloc(len + 1);
    if (copy == NULL) return NULL;
    memcpy(copy, id, len);
    copy[len] = '\0';
    s->id = copy;
    s->id_len = (uint32_t)len;
    s->keyed = keyed ? 1u : 0u;
    s->attempts = s->executions = 0;
    t->count++;
    t->bytes += len + 1;
    if (keyed) t->keyed++;
    return s;
}
