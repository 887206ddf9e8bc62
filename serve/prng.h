/* retryfreeze-serve: the seeded draws behind random faults. The generator is the engine's (rf_rng: xoshiro256**
 * seeded with splitmix64, core/src/engine/rng.c compiled into the server, which does not link libretryfreeze), so
 * a seed gives the same sequence on every platform. Not thread-safe: each draw seeds a generator of its own. */
#ifndef SRV_PRNG_H
#define SRV_PRNG_H

#include "retryfreeze/decide.h"

#include <stdint.h>

/* Uniform in [0, bound), bound > 0, without modulo bias (the top partial block of draws is rejected). */
uint64_t srv_prng_below(rf_rng *p, uint64_t bound);

#endif
