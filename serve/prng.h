/* retryfreeze-serve: the seeded generator behind random faults. */
#ifndef SRV_PRNG_H
#define SRV_PRNG_H

#include <stdint.h>

/* xoshiro256**: small, fast, and the same sequence on every platform for a seed. Not thread-safe:
 * the caller (upstream.c) guards it with its mutex. */
struct srv_prng {
    uint64_t s[4];
};

void srv_prng_seed(struct srv_prng *p, uint64_t seed);
uint64_t srv_prng_next(struct srv_prng *p);
/* Uniform in [0, bound), bound > 0, without modulo bias. */
uint64_t srv_prng_below(struct srv_prng *p, uint64_t bound);

#endif
