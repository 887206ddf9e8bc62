/*
 * Per-request limits (rf_request.deadline_ms, .timeout_ms, and the deadline its caller propagated): a request may
 * narrow its route's totalBudgetMs and perAttemptTimeoutMs, never widen them (only a new lock widens). A caller's
 * deadline past the route's narrows nothing; deadline_ms past it is the programmer's error. Narrowing the deadline
 * is done by
 * shifting the elapsed time the engine is told: with shift = totalBudgetMs - deadline_ms, the engine's
 * "time left" (totalBudgetMs - elapsed') is exactly deadline_ms - elapsed, so rf_budget, rf_decide and
 * rf_redirect_verdict apply the narrower deadline with their own rules (minAttemptMs, Retry-After beyond
 * the time left, …) and nothing is re-decided here.
 */
#define _POSIX_C_SOURCE 200809L
#include "request_limits.h"
#include "../util/report.h"

#include <stdio.h>
#include <string.h>

/* RF_EINVAL: the request's limit field (value) is over the lock's (name, limit) for route endpoint. */
static rf_status wider(rf_error *err, const char *field, int64_t value, const char *name, int64_t limit,
                       const char *endpoint) {
    return rfi_fail(err, field, "%lld is over the lock's %s %lld for route \"%.80s\": a request may only narrow it",
                    (long long)value, name, (long long)limit, endpoint);
}

rf_status rfi_limits_init(rfi_limits *l, const rf_policy *p, long route, const rf_request *req,
                          int64_t inbound_deadline_ms, rf_error *err) {
    *l = (rfi_limits){0};
    if (req->deadline_ms < 0 || req->timeout_ms < 0)
        return rfi_fail(err, req->deadline_ms < 0 ? "deadline_ms" : "timeout_ms",
                        "must be a positive number of milliseconds");
    if (req->deadline_ms == 0 && req->timeout_ms == 0 && inbound_deadline_ms < 0) return RF_OK;
    rf_route_view rv;
    if (route < 0 || rf_policy_route(p, (size_t)route, &rv) != RF_OK) return RF_OK; /* no-route: nothing sent */
    if (req->deadline_ms > rv.total_budget_ms)
        return wider(err, "deadline_ms", req->deadline_ms, "totalBudgetMs", rv.total_budget_ms, rv.endpoint);
    if (req->timeout_ms > rv.per_attempt_timeout_ms)
        return wider(err, "timeout_ms", req->timeout_ms, "perAttemptTimeoutMs", rv.per_attempt_timeout_ms, rv.endpoint);
    int64_t deadline = req->deadline_ms > 0 ? req->deadline_ms : rv.total_budget_ms;
    if (inbound_deadline_ms >= 0 && inbound_deadline_ms < deadline) deadline = inbound_deadline_ms;
    l->elapsed_shift_ms = rv.total_budget_ms - deadline;
    l->timeout_ms = req->timeout_ms;
    return RF_OK;
}

int64_t rfi_limits_elapsed(const rfi_limits *l, int64_t elapsed_ms) {
    /* saturated: a host's clock (rf_step) may give any int64 */
    return elapsed_ms > INT64_MAX - l->elapsed_shift_ms ? INT64_MAX : elapsed_ms + l->elapsed_shift_ms;
}

int64_t rfi_limits_timeout(const rfi_limits *l, int64_t timeout_ms) {
    return l->timeout_ms > 0 && l->timeout_ms < timeout_ms ? l->timeout_ms : timeout_ms;
}
