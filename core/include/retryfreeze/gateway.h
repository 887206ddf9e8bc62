/*
 * What a gateway can serve: a host whose tries are started by its proxy (nginx's balancer phase, the nginx module,
 * an APISIX or Kong plugin) cannot sleep between them, so a route whose lock asks for a wait or for hedging cannot
 * be served there without widening or narrowing the lock; and a form of the gateway that reads no caller's headers
 * and tells its caller nothing cannot serve a route with propagation. The rule lives here once: the Lua gateway
 * (retryfreeze.gateway.routes), `retryfreeze check --gateway` and the nginx module (bindings/nginx) all ask it.
 * Part of the engine: no allocation, no clock, no I/O; thread-safe.
 */
#ifndef RETRYFREEZE_GATEWAY_H
#define RETRYFREEZE_GATEWAY_H

#include "retryfreeze/common.h"
#include "retryfreeze/policy.h"
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* rf_gateway_refusals flags: the gateway form runs no phase that reads a caller's propagation headers or tells it
 * the overloaded header (the Lua gateway's lean form, the nginx module), so a route with propagation is refused. */
#define RF_GATEWAY_NO_PROPAGATION 1u

/* Room for every reason rf_gateway_refusals can give for one route, joined. */
#define RF_GATEWAY_WHY_MAX 640

/*
 * Why route i of p (0-based, rf_policy_route order) cannot be served by a gateway whose tries never wait: one
 * sentence per reason, each naming the lock field (its JSON name) and how to change it, in this order and joined by
 * "; and ": propagation (only with RF_GATEWAY_NO_PROPAGATION), hedging (hedged attempts start after a delay),
 * backoff (the first retry whose backoff window rf_backoff_window reaches above 0 ms, with its attempt and ms),
 * retryAfter.honor with maxAttempts above 1 (a retry would wait as Retry-After asks). Writes the sentences into
 * why[0..cap) (cut, always NUL-terminated; "" for none; why may be NULL when cap is 0). Returns the number of
 * reasons: 0 when the route is served; -1 when p is NULL or i out of range (why "").
 */
RF_API int rf_gateway_refusals(const rf_policy *p, size_t i, unsigned flags, char *why, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
