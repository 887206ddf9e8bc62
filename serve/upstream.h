/* retryfreeze-serve: the server's shared state — sequences, stats, the fault seed — behind
 * one mutex, so the outcome of an attempt and its counting happen as one step. */
#ifndef SRV_UPSTREAM_H
#define SRV_UPSTREAM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "faults.h"
#include "prng.h"
#include "script.h"
#include "sequences.h"
#include "stats.h"

struct srv_upstream {
    pthread_mutex_t lock;
    struct srv_fault_spec faults; /* read-only after init */
    uint64_t seed;                /* read-only after init */
    struct srv_seq_table seqs;
    struct srv_stats stats;
    uint64_t in_flight; /* attempts admitted whose answer is not yet queued (srv_upstream_answered) */
};

/* Returns 0, or -1 when out of memory. The caller ends it with srv_upstream_free. */
int srv_upstream_init(struct srv_upstream *u, const struct srv_fault_spec *faults, uint64_t seed, size_t max_keys,
                      size_t max_key_bytes);
void srv_upstream_free(struct srv_upstream *u);

enum srv_admit {
    SRV_ADMITTED, /* *out holds the step to play and *n the attempt number in its sequence */
    SRV_FULL      /* the sequence table is full: nothing counted; refuse with 503 */
};

/* One attempt of the sequence id[0..len). script (NUL-terminated, already validated with
 * srv_script_parse) or, when NULL, one draw chooses the step: a generator seeded from the server's seed,
 * the identity and the attempt number in its sequence, so the same requests get the same faults in any
 * arrival order. The attempt, its
 * outcome and any execution are counted before returning, so a stalled or delayed answer has
 * already "executed" when a client gives up on it. */
enum srv_admit srv_upstream_attempt(struct srv_upstream *u, const char *id, size_t len, int keyed, const char *script,
                                    struct srv_step *out, uint64_t *n);

/* An admitted attempt's answer is queued (or its connection dropped): it is in flight no more. A client sees an
 * answer only after this, so a client that waits for each answer before the next attempt never has two in flight. */
void srv_upstream_answered(struct srv_upstream *u);

/* Counts an attempt refused instead of admitted (400 for a bad script, 503 when full). */
void srv_upstream_count_refusal(struct srv_upstream *u, int status);

/* The /__stats JSON into out; returns its length or -1. */
int srv_upstream_stats_json(struct srv_upstream *u, char *out, size_t cap);

/* POST /__reset: forget sequences and stats, so a run after a reset replays the same random faults as a
 * fresh server (the draws depend only on the seed, the identity and the attempt number). Returns 0, or -1 when out of
 * memory. */
int srv_upstream_reset(struct srv_upstream *u);

#endif
