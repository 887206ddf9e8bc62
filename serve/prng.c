/* retryfreeze-serve: xoshiro256** seeded through splitmix64 (as its authors recommend, so that
 * nearby seeds such as 1 and 2 still give unrelated streams). */
#include "prng.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void srv_prng_seed(struct srv_prng *p, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) p->s[i] = splitmix64(&x);
}

uint64_t srv_prng_next(struct srv_prng *p) {
    uint64_t *s = p->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t srv_prng_below(struct srv_prng *p, uint64_t bound) {
    /* Reject the top partial block so every residue is equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do x = srv_prng_next(p);
    while (x >= limit);
    return x % bound;
}
