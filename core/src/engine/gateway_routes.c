/*
 * What a gateway can serve (retryfreeze/gateway.h): the reasons a route needs a host that can wait between tries,
 * or one that reads its caller's headers.
 */
#include "retryfreeze/gateway.h"
#include "retryfreeze/decide.h"
#include "retryfreeze/propagation.h"

#include <stdarg.h>
#include <stdio.h>

/* Appends one reason to why[0..cap), after "; and " when one came before. */
static void add_reason(char *why, size_t cap, size_t *used, int n, const char *fmt, ...) {
    if (*used >= cap) return;
    if (n > 0) {
        int w = snprintf(why + *used, cap - *used, "; and ");
        *used = w < 0 ? cap : (size_t)w >= cap - *used ? cap : *used + (size_t)w;
        if (*used >= cap) return;
    }
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(why + *used, cap - *used, fmt, ap);
    va_end(ap);
    *used = w < 0 ? cap : (size_t)w >= cap - *used ? cap : *used + (size_t)w;
}

int rf_gateway_refusals(const rf_policy *p, size_t i, unsigned flags, char *why, size_t cap) {
    if (why && cap > 0) why[0] = '\0';
    rf_route_view r;
    if (!p || rf_policy_route(p, i, &r) != RF_OK) return -1;
    if (!why) cap = 0;
    size_t used = 0;
    int n = 0;
    rf_propagation prop;
    if ((flags & RF_GATEWAY_NO_PROPAGATION) && rf_policy_propagation(p, (long)i, &prop) == RF_OK && prop.enabled) {
        add_reason(why, cap, &used, n++,
                   "propagation: a caller's headers are read, and the overloaded header told, only by the Lua "
                   "gateway's full form (its access and header_filter phases), which this gateway is not (remove "
                   "propagation, or serve the route from that form)");
    }
    if (r.hedging) {
        add_reason(why, cap, &used, n++,
                   "hedging: hedged attempts overlap and start after a delay, and a gateway's tries never wait");
    }
    for (int attempts = 1; attempts < r.max_attempts; attempts++) {
        int64_t lo = 0, hi = 0;
        if (rf_backoff_window(p, i, attempts, &lo, &hi) != RF_OK || hi <= 0) continue;
        add_reason(why, cap, &used, n++,
                   "backoff: the retry after attempt %d waits up to %lld ms, and a gateway's tries never wait (set "
                   "backoff.baseMs and backoff.maxMs to 0)",
                   attempts, (long long)hi);
        break;
    }
    if (r.max_attempts > 1 && r.retry_after_honor) {
        add_reason(why, cap, &used, n++,
                   "retryAfter.honor is true: a retry would wait as long as Retry-After asks, and a gateway's tries "
                   "never wait (set it to false)");
    }
    return n;
}
