/* Seeded jitter RNG: xoshiro256** (Blackman & Vigna), seeded with splitmix64. Plain caller-owned data. */
#include "retryfreeze/decide.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void rf_rng_seed(rf_rng *rng, uint64_t seed) {
    if (rng == NULL) return;
    for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&seed);
}

uint64_t rf_rng_next(rf_rng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

#if defined(__SIZEOF_INT128__)
__extension__ typedef unsigned __int128 u128;
#endif

int64_t rf_rng_between(rf_rng *rng, int64_t lo, int64_t hi) {
    if (rng == NULL || hi <= lo) return lo;
    uint64_t span = (uint64_t)hi - (uint64_t)lo + 1u; /* hi - lo < 2^63 here: both are delays in ms */
#if defined(__SIZEOF_INT128__)
    /* Lemire's multiply-shift with rejection ("Fast Random Integer Generation in an Interval", 2019): unbiased,
     * and the division runs only in the rare rejection branch. */
    u128 m = (u128)rf_rng_next(rng) * span;
    uint64_t low = (uint64_t)m;
    if (low < span) {
        uint64_t threshold = (0 - span) % span;
        while (low < threshold) {
            m = (u128)rf_rng_next(rng) * span;
            low = (uint64_t)m;
        }
    }
    return lo + (int64_t)(m >> 64);
#else
    /* Rejection sampling: draws below `limit` map uniformly onto [0, span). */
    uint64_t limit = UINT64_MAX - (UINT64_MAX % span);
    uint64_t x;
    do x = rf_rng_next(rng);
    while (x >= limit);
    return lo + (int64_t)(x % span);
#endif
}
