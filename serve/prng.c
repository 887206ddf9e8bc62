/* retryfreeze-serve: a bounded draw from the engine's generator (rf_rng_next), as the fault picker needs it. */
#include "prng.h"

uint64_t srv_prng_below(rf_rng *p, uint64_t bound) {
    /* Reject the top partial block so every residue is equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do x = rf_rng_next(p);
    while (x >= limit);
    return x % bound;
}
