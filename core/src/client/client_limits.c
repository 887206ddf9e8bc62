/*
 * Per-request limits (rf_request.deadline_ms, .timeout_ms): a request may narrow its route's totalBudgetMs
 * and perAttemptTimeoutMs, never widen them (only a new lock widens). Narrowing the deadline is done by
 * shifting the elapsed time the engine is told: with shift = totalBudgetMs - deadline_ms, the engine's
 * "time left" (totalBudgetMs - elapsed') is exactly deadline_ms - elapsed, so rf_budget, rf_decide and
 * rf_redirect_verdict apply the narrower deadline with their own rules (minAttemptMs, Retry-After beyond
 * the time left, …) and nothing is re-decided here.
 */
#define _POSIX_C_SOURCE 200809L
#include "client_internal.h"

#include <stdio.h>
#include <string.h>

rf_status rfi_limits_init(rfi_flow *f, rf_error *err) {
    const rf_request *req = f->req;
    f->elapsed_shift_ms = 0;
    f->req_timeout_ms = 0;
    if (req->deadline_ms < 0 || req->timeout_ms < 0) {
        return rfi_fail(err, req->deadline_ms < 0 ? "deadline_ms" : "timeout_ms",
                        "must be a positive number of milliseconds");
    }
    if (req->deadline_ms == 0 && req->timeout_ms == 0) return RF_OK;
    long i = rf_policy_match(f->c->policy, req->method, strlen(req->method), req->path, strlen(req->path));
    rf_route_view rv;
    if (i < 0 || rf_policy_route(f->c->policy, (size_t)i, &rv) != RF_OK) return RF_OK; /* no-route: nothing sent */
    if (req->deadline_ms > rv.total_budget_ms) {
        return rfi_fail(err, "deadline_ms",
                        "%lld is over the lock's totalBudgetMs %lld for route \"%.80s\": a request may only narrow it",
                        (long long)req->deadline_ms, (long long)rv.total_budget_ms, rv.endpoint);
    }
    if (req->timeout_ms > rv.per_attempt_timeout_ms) {
        return rfi_fail(err, "timeout_ms",
                        "%lld is over the lock's perAttemptTimeoutMs %lld for route \"%.80s\": a request may only "
                        "narrow it",
                        (long long)req->timeout_ms, (long long)rv.per_attempt_timeout_ms, rv.endpoint);
    }
    if (req->deadline_ms > 0) f->elapsed_shift_ms = rv.total_budget_ms - req->deadline_ms;
    f->req_timeout_ms = req->timeout_ms;
    return RF_OK;
}

int64_t rfi_limits_elapsed(const rfi_flow *f, int64_t elapsed_ms) { return elapsed_ms + f->elapsed_shift_ms; }

int64_t rfi_limits_timeout(const rfi_flow *f, int64_t timeout_ms) {
    return f->req_timeout_ms > 0 && f->req_timeout_ms < timeout_ms ? f->req_timeout_ms : timeout_ms;
}
