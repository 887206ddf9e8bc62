/*
 * The replay's model of the tries a record never made: pools of the tries it did make. For each candidate route, the
 * route's first tries (FIRST), and for each attempt number after the first its tries after a failure of each class
 * and after any failure (ANY), each a uniform reservoir (Vitter's algorithm R) of RF_REPLAY_POOL_SAMPLES, so its
 * memory does not grow with the record. A missing try is a draw from the pool of its own attempt number after the
 * failure before it: the record's requests that failed as often and reached that attempt say how often such a
 * request failed again, so failures that persist per request (or clear after a few tries) are carried over, and the
 * tries are taken as independent only of other requests. Where the record has too few of that attempt, the deepest
 * attempt before it that it has stands in (rfi_replay_pools_draw says which: the walk then counts the try as beyond
 * the record). The upstream is taken as unchanged by the extra load (docs/evidence.md "Replay"). A replicate draws
 * from its own bootstrap resample of the pool (a sample's position mapped through a hash of the replicate), which
 * carries the pool's own uncertainty into the interval.
 */
#include "replay_internal.h"

#include <stdlib.h>
#include <string.h>

/* Bytes a sample keeps for its wait headers and Date (a header that no longer fits is left out). */
#define SAMPLE_TEXT 256

/* A sample's facts, apart from its text (a draw reads these; the text only when a header is there): a pool's
 * samples stay small enough for the cache, which the redraws of the interval hit at random. */
typedef struct sample {
    int64_t elapsed_ms, timeout_ms, wall_ms;
    int16_t status;
    uint8_t transport;
    bool not_sent, older;
    uint8_t grpc_status;
    uint16_t wait_at[RF_WAIT_HEADER_COUNT]; /* 1 + offset in its text, 0: absent */
    uint16_t date_at;
} sample;

typedef char sample_text[SAMPLE_TEXT];

typedef struct pool {
    uint64_t key; /* route << 24 | depth << 16 | class */
    int64_t seen;
    uint32_t size, cap;
    sample *samples;
    sample_text *texts; /* [i]: samples[i]'s wait headers and Date */
} pool;

struct rfi_replay_pools {
    uint64_t seed;
    rf_rng rng; /* the reservoirs' choices */
    pool *pools;
    size_t n, cap;
    size_t *slots; /* open addressing over pools: 1 + index, 0 empty; a power of two, at most half full */
    size_t n_slots;
};

/* splitmix64's finalizer: a well-mixed 64-bit hash of x. */
static uint64_t mix(uint64_t x) {
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

/* The key of the pool of route's tries at attempt depth + 1 after a failure of class_id (depth 0: FIRST). */
static uint64_t key_of(long route, int depth, uint16_t class_id) {
    return (uint64_t)route << 24 | (uint64_t)depth << 16 | class_id;
}

rfi_replay_pools *rfi_replay_pools_new(uint64_t seed) {
    rfi_replay_pools *p = calloc(1, sizeof *p);
    if (p == NULL) return NULL;
    p->seed = seed;
    rf_rng_seed(&p->rng, seed ^ UINT64_C(0x706f6f6c)); /* "pool": a stream of its own */
    return p;
}

void rfi_replay_pools_free(rfi_replay_pools *p) {
    if (p == NULL) return;
    for (size_t i = 0; i < p->n; i++) {
        free(p->pools[i].samples);
        free(p->pools[i].texts);
    }
    free(p->pools);
    free(p->slots);
    free(p);
}

/* The pool of key, or NULL. */
static pool *find(const rfi_replay_pools *p, uint64_t key) {
    if (p->n_slots == 0) return NULL;
    for (size_t i = (size_t)mix(key) & (p->n_slots - 1);; i = (i + 1) & (p->n_slots - 1)) {
        size_t at = p->slots[i];
        if (at == 0) return NULL;
        if (p->pools[at - 1].key == key) return &p->pools[at - 1];
    }
}

/* Rebuilds the index with n_slots slots. */
static bool reindex(rfi_replay_pools *p, size_t n_slots) {
    size_t *slots = calloc(n_slots, sizeof *slots);
    if (slots == NULL) return false;
    for (size_t k = 0; k < p->n; k++) {
        size_t i = (size_t)mix(p->pools[k].key) & (n_slots - 1);
        while (slots[i] != 0) i = (i + 1) & (n_slots - 1);
        slots[i] = k + 1;
    }
    free(p->slots);
    p->slots = slots;
    p->n_slots = n_slots;
    return true;
}

/* The pool of key, made empty on first use; NULL when memory ran out. */
static pool *pool_of(rfi_replay_pools *p, uint64_t key) {
    pool *found = find(p, key);
    if (found != NULL) return found;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 16;
        pool *more = realloc(p->pools, cap * sizeof *more);
        if (more == NULL) return NULL;
        p->pools = more;
        p->cap = cap;
    }
    if (2 * (p->n + 1) > p->n_slots && !reindex(p, p->n_slots ? 2 * p->n_slots : 64)) return NULL;
    p->pools[p->n] = (pool){.key = key};
    size_t i = (size_t)mix(key) & (p->n_slots - 1);
    while (p->slots[i] != 0) i = (i + 1) & (p->n_slots - 1);
    p->slots[i] = ++p->n;
    return &p->pools[p->n - 1];
}

/* A copy of string v in text (1 + offset), 0 when v is NULL or no longer fits. */
static uint16_t keep(char *text, size_t *used, const char *v) {
    if (v == NULL) return 0;
    size_t n = strlen(v) + 1;
    if (n > SAMPLE_TEXT - *used) return 0;
    memcpy(text + *used, v, n);
    uint16_t at = (uint16_t)(*used + 1);
    *used += n;
    return at;
}

static void sample_of(const rfi_replay_facts *f, sample *s, char *text) {
    s->elapsed_ms = f->elapsed_ms;
    s->timeout_ms = f->timeout_ms;
    s->wall_ms = f->wall_ms;
    s->status = (int16_t)f->status;
    s->transport = (uint8_t)f->transport;
    s->not_sent = f->not_sent;
    s->grpc_status = (uint8_t)f->grpc_status;
    s->older = f->older;
    size_t used = 0;
    for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) s->wait_at[h] = keep(text, &used, f->wait[h]);
    s->date_at = keep(text, &used, f->date);
}

/* Offers f to the reservoir of key; false when memory ran out. */
static bool offer(rfi_replay_pools *p, uint64_t key, const rfi_replay_facts *f) {
    pool *q = pool_of(p, key);
    if (q == NULL) return false;
    q->seen++;
    uint32_t at = q->size;
    if (q->size == RF_REPLAY_POOL_SAMPLES) { /* full: keep f with probability size / seen, in a uniform place */
        int64_t j = rf_rng_between(&p->rng, 0, q->seen - 1);
        if (j >= RF_REPLAY_POOL_SAMPLES) return true;
        at = (uint32_t)j;
    } else if (q->size == q->cap) {
        uint32_t cap = q->cap ? 2 * q->cap : 4;
        if (cap > RF_REPLAY_POOL_SAMPLES) cap = RF_REPLAY_POOL_SAMPLES;
        sample *more = realloc(q->samples, cap * sizeof *more);
        if (more != NULL) q->samples = more;
        sample_text *texts = more ? realloc(q->texts, cap * sizeof *texts) : NULL;
        if (texts == NULL) {
            q->seen--;
            return false;
        }
        q->texts = texts;
        q->cap = cap;
    }
    sample_of(f, &q->samples[at], q->texts[at]);
    if (at == q->size) q->size++;
    return true;
}

bool rfi_replay_pools_offer(rfi_replay_pools *p, long route, uint16_t class_id, int depth, const rfi_replay_facts *f) {
    if (class_id == RFI_REPLAY_FIRST) return offer(p, key_of(route, 0, RFI_REPLAY_FIRST), f);
    if (depth < 1) depth = 1;
    if (depth > RFI_REPLAY_DEPTHS) depth = RFI_REPLAY_DEPTHS;
    bool ok = offer(p, key_of(route, depth, RFI_REPLAY_ANY), f);
    if (class_id != RFI_REPLAY_UNKNOWN && class_id != RFI_REPLAY_ANY)
        ok = offer(p, key_of(route, depth, class_id), f) && ok;
    return ok;
}

int64_t rfi_replay_pools_seen(const rfi_replay_pools *p, long route, uint16_t class_id, int depth) {
    if (class_id == RFI_REPLAY_FIRST) depth = 0;
    int64_t most = 0;
    for (int d = class_id == RFI_REPLAY_FIRST ? 0 : 1; d <= depth && d <= RFI_REPLAY_DEPTHS; d++) {
        const pool *q = find(p, key_of(route, d, class_id));
        if (q != NULL && q->seen > most) most = q->seen;
    }
    return most;
}

int64_t rfi_replay_pools_seen_at(const rfi_replay_pools *p, long route, uint16_t class_id, int depth) {
    const pool *q = find(p, key_of(route, class_id == RFI_REPLAY_FIRST ? 0 : depth, class_id));
    return q ? q->seen : 0;
}

/* Sample j of q (replicate >= 0: the sample replicate's resample puts at position j) as facts. */
static void facts_of(const rfi_replay_pools *p, const pool *q, uint32_t j, int replicate, rfi_replay_drawn *out) {
    if (replicate >= 0) { /* the top 32 bits of a hash scaled to 0..size-1 (multiply and shift: no division) */
        const uint64_t h = mix(p->seed ^ mix(q->key * UINT64_C(0x9e3779b97f4a7c15) + (uint64_t)replicate) ^ j);
        j = (uint32_t)(((h >> 32) * q->size) >> 32);
    }
    const sample *s = &q->samples[j];
    const char *text = q->texts[j];
    rfi_replay_facts *f = &out->facts;
    *f = (rfi_replay_facts){.status = s->status,
                            .transport = (rf_transport)s->transport,
                            .not_sent = s->not_sent,
                            .grpc_status = s->grpc_status,
                            .elapsed_ms = s->elapsed_ms,
                            .timeout_ms = s->timeout_ms,
                            .wall_ms = s->wall_ms,
                            .date = s->date_at ? text + s->date_at - 1 : NULL,
                            .older = s->older};
    for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) f->wait[h] = s->wait_at[h] ? text + s->wait_at[h] - 1 : NULL;
    out->class_id = (uint16_t)(q->key & 0xffff);
}

/* The pool of route's tries after class_id at the deepest attempt depth + 1 at or before the one asked (depth >= 1)
 * that has seen min_samples and holds a sample, its depth in *at; NULL when none has. */
static const pool *deepest(const rfi_replay_pools *p, long route, uint16_t class_id, int depth, int64_t min_samples,
                           int *at) {
    if (depth > RFI_REPLAY_DEPTHS) depth = RFI_REPLAY_DEPTHS;
    for (int d = depth; d >= 1; d--) {
        const pool *q = find(p, key_of(route, d, class_id));
        if (q != NULL && q->seen >= min_samples && q->size > 0) {
            *at = d;
            return q;
        }
    }
    return NULL;
}

bool rfi_replay_pools_draw(const rfi_replay_pools *p, long route, uint16_t class_id, int depth, int64_t min_samples,
                           rf_rng *rng, int replicate, rfi_replay_drawn *out, const char **fallback) {
    *fallback = NULL;
    out->depth = 0;
    const pool *q = NULL;
    if (class_id != RFI_REPLAY_FIRST) {
        /* The class's own tries at this attempt or the deepest before it, then the route's tries after any failure,
         * then its first tries. */
        if (class_id != RFI_REPLAY_ANY && class_id != RFI_REPLAY_UNKNOWN)
            q = deepest(p, route, class_id, depth, min_samples, &out->depth);
        if (q == NULL) {
            q = deepest(p, route, RFI_REPLAY_ANY, depth, min_samples, &out->depth);
            if (q != NULL && class_id != RFI_REPLAY_ANY) *fallback = "any failure";
        }
        if (q == NULL) {
            out->depth = 0;
            *fallback = "first tries";
        }
    }
    if (q == NULL) {
        q = find(p, key_of(route, 0, RFI_REPLAY_FIRST));
        if (q == NULL || q->seen < min_samples || q->size == 0) {
            *fallback = NULL;
            return false;
        }
    }
    facts_of(p, q, (uint32_t)rf_rng_between(rng, 0, (int64_t)q->size - 1), replicate, out);
    return true;
}
