/*
 * Backoff with seeded jitter: cap = min(maxMs, baseMs × multiplier^(attempts-1)), saturating so any attempt
 * count gives a delay in [0, maxMs]. Jitter kinds follow the AWS Architecture Blog "Exponential Backoff
 * and Jitter" (full, equal, decorrelated) — decorrelated in a stateless form (see decide.h).
 */
#include "internal.h"

#include <math.h>

/* The window of the delay before the retry after attempt `attempts` (see rf_backoff_window). */
static void window(const rfi_route *r, int attempts, int64_t *lo, int64_t *hi) {
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
    switch (r->jitter) {
    case RF_JITTER_FULL:
        *lo = 0;
        *hi = cap;
        break;
    case RF_JITTER_EQUAL:
        *lo = cap / 2 + cap % 2;
        *hi = cap;
        break;
    case RF_JITTER_DECORRELATED:
        *lo = r->backoff_base_ms < cap ? r->backoff_base_ms : cap;
        *hi = cap <= r->backoff_max_ms / 3 ? cap * 3 : r->backoff_max_ms;
        break;
    default: *lo = *hi = cap;
    }
}

int64_t rfi_backoff(const rfi_route *r, int attempts, rf_rng *rng) {
    int64_t lo, hi;
    window(r, attempts, &lo, &hi);
    if (r->jitter == RF_JITTER_NONE) return lo;
    if (rng == NULL) return -1;
    return rf_rng_between(rng, lo, hi);
}

rf_status rf_backoff_window(const rf_policy *p, size_t route, int attempts, int64_t *lo_ms, int64_t *hi_ms) {
    if (p == NULL || lo_ms == NULL || hi_ms == NULL || route >= p->n_routes) return RF_EINVAL;
    window(&p->routes[route], attempts, lo_ms, hi_ms);
    return RF_OK;
}

int64_t rf_backoff_ms(const rf_policy *p, size_t route, int attempts, rf_rng *rng) {
    if (p == NULL || route >= p->n_routes) return -1;
    return rfi_backoff(&p->routes[route], attempts, rng);
}
