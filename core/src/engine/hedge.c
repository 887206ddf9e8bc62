/*
 * Hedging (the lock's hedging, gRPC proposal A6 hedgingPolicy): which requests are hedged, and whether one more
 * attempt may start while the others are still in flight. A hedge is a retry for every limit the lock sets: the
 * attempts cap, the idempotency key, the deadline and the retry budget; only its start does not wait for a failure.
 * No allocation, no clock: the caller says when (rf_hedge_facts).
 */
#include "internal.h"

rf_status rf_policy_hedging(const rf_policy *p, long route, const char *method, size_t method_len, bool has_key,
                            rf_hedging *out) {
    if (p == NULL || method == NULL || out == NULL) return RF_EINVAL;
    if (route < -1 || route >= (long)p->n_routes) return RF_EINVAL;
    *out = (rf_hedging){.hedged = false, .why_not = RF_REASON_NO_ROUTE};
    if (route < 0) return RF_OK;
    const rfi_route *r = &p->routes[route];
    if (!r->has_hedging) {
        out->why_not = RF_REASON_MAX_ATTEMPTS; /* one attempt at a time: no hedge ever starts */
        return RF_OK;
    }
    out->max_attempts = (int)r->hedge_max_attempts;
    out->delay_ms = r->hedge_delay_ms;
    /* Safety first: a method that needs a key to be retried is hedged only with one (the same on every attempt). */
    if (!has_key && rfi_method_requires_key(r, method, method_len)) {
        out->why_not = RF_REASON_MUTATING_WITHOUT_IDEMPOTENCY;
        return RF_OK;
    }
    out->hedged = true;
    out->why_not = RF_REASON_WITHIN_BUDGET;
    return RF_OK;
}

/* The retry budget's part of a hedge: a token bucket's token, or a ratio window's retry. */
static bool budget_allows(rf_retry_budget *budget, rf_budget_request *request, int64_t mono_ms,
                          rf_budget_source *source) {
    if (rfi_retry_budget_is_ratio(budget)) return rfi_retry_budget_window_take(budget, request, true, mono_ms, source);
    int64_t tokens = rfi_retry_budget_add(budget, -1000, source);
    return !rfi_retry_budget_throttled(budget, tokens);
}

rf_status rf_hedge_decide(const rf_policy *p, long route, const rf_hedge_facts *h, rf_retry_budget *budget,
                          rf_verdict *out, rf_error *err) {
    if (p == NULL || h == NULL || out == NULL) return rfi_fail(err, "", "policy, facts and verdict must not be NULL");
    if (route < -1 || route >= (long)p->n_routes)
        return rfi_fail(err, "route", "must be -1 or a route index below %zu, got %ld", p->n_routes, route);
    if (h->method == NULL || h->method_len == 0) return rfi_fail(err, "method", "is required (e.g. \"GET\")");
    if (h->started < 1) return rfi_fail(err, "started", "must be >= 1 (attempts started so far), got %d", h->started);
    if (h->elapsed_ms < 0) return rfi_fail(err, "elapsed_ms", "must be >= 0, got %lld", (long long)h->elapsed_ms);
    if (h->budget_request == NULL && rfi_retry_budget_is_ratio(budget))
        return rfi_fail(err, "budget_request",
                        "is required with a ratio retry budget (retryBudget.retryRatio): the request's token, the "
                        "same its attempts' decisions carry, so the window counts it once");
    *out = (rf_verdict){.route = route, .retry_after_header = -1, .retry_after = RF_RA_USE_ABSENT};
    if (route < 0) {
        rfi_stop(out, RF_REASON_NO_ROUTE);
        return RF_OK;
    }
    const rfi_route *r = &p->routes[route];
    if (!r->has_hedging || h->started >= r->hedge_max_attempts || h->started >= r->max_attempts) {
        rfi_stop(out, RF_REASON_MAX_ATTEMPTS);
        return RF_OK;
    }
    if (!h->has_idempotency_key && rfi_method_requires_key(r, h->method, h->method_len)) {
        rfi_stop(out, RF_REASON_MUTATING_WITHOUT_IDEMPOTENCY);
        return RF_OK;
    }
    const int64_t left = r->total_budget_ms - h->elapsed_ms;
    if (left < r->min_attempt_ms || left <= 0) { /* as rf_budget */
        rfi_stop(out, RF_REASON_DEADLINE);
        return RF_OK;
    }
    if (!budget_allows(budget, h->budget_request, h->mono_ms, &out->budget)) {
        rfi_stop(out, RF_REASON_RETRY_THROTTLED);
        return RF_OK;
    }
    out->retry = true;
    out->reason = RF_REASON_WITHIN_BUDGET;
    out->timeout_ms = left < r->per_attempt_timeout_ms ? left : r->per_attempt_timeout_ms;
    return RF_OK;
}
