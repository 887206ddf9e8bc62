/*
 * Backoff with seeded jitter: cap = min(maxMs, baseMs × multiplier^(attempts-1)), saturating so any attempt
 * count gives a delay in [0, maxMs]. Jitter kinds follow the AWS Architecture Blog "Exponential Backoff
 * and Jitter" (full, equal, decorrelated) — decorrelated in a stateless form (see decide.h).
 */
#include "internal.h"

#include <math.h>

int64_t rfi_backoff(const rfi_route *r, int attempts, rf_rng *rng) {
    if (attempts < 1) attempts = 1;
    double mult = (double)r->backoff_multiplier_milli / 1000.0; /* >= 1 by the lock schema */
    double exact = (double)r->backoff_base_ms;
    if (attempts <= 32) { /* the common case (maxAttempts <= 10): a few multiplications, no pow() */
        for (int i = 1; i < attempts && exact < (double)r->backoff_max_ms; i++) exact *= mult;
    } else {
        exact *= pow(mult, (double)(attempts - 1));
    }
    int64_t cap = r->backoff_max_ms;
    if (isfinite(exact) && exact < (double)cap) cap = (int64_t)exact; /* inf or huge saturates at maxMs */
    if (r->jitter != RF_JITTER_NONE && rng == NULL) return -1;
    switch (r->jitter) {
    case RF_JITTER_FULL: return rf_rng_between(rng, 0, cap);
    case RF_JITTER_EQUAL: return rf_rng_between(rng, cap / 2 + cap % 2, cap);
    case RF_JITTER_DECORRELATED: {
        int64_t lo = r->backoff_base_ms < cap ? r->backoff_base_ms : cap;
        int64_t hi = cap <= r->backoff_max_ms / 3 ? cap * 3 : r->backoff_max_ms;
        return rf_rng_between(rng, lo, hi);
    }
    default: return cap;
    }
}

int64_t rf_backoff_ms(const rf_policy *p, size_t route, int attempts, rf_rng *rng) {
    if (p == NULL || route >= p->n_routes) return -1;
    return rfi_backoff(&p->routes[route], attempts, rng);
}
