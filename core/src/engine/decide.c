/*
 * rf_decide and rf_budget: the ordered checks of docs/design.md. No allocation, no I/O, no clock reads;
 * the policy is only read, the caller's retry budget is the only state touched.
 */
#include "internal.h"

#include <string.h>

static bool str_is(const char *s, size_t len, const char *lit) {
    return s != NULL && strlen(lit) == len && memcmp(s, lit, len) == 0;
}

/* No byte of the request reached the server: the connection was refused (by the origin or the proxy), the
 * name did not resolve, or TLS failed before the request was sent (the transport says so: not_sent). */
static bool never_left(const rf_facts *f) {
    return f->transport == RF_TRANSPORT_CONNECT_REFUSED || f->transport == RF_TRANSPORT_PROXY_REFUSED ||
           f->transport == RF_TRANSPORT_DNS || (f->transport == RF_TRANSPORT_TLS && f->not_sent);
}

bool rfi_method_requires_key(const rfi_route *r, const char *method, size_t len) {
    for (size_t i = 0; i < r->n_methods; i++) {
        if (r->method_lens[i] != len) continue;
        size_t k = 0; /* a method is a few letters: a call to memcmp costs more than this loop */
        while (k < len && method[k] == r->methods[i][k]) k++;
        if (k == len) return true;
    }
    return false;
}

/* A method with a lowercase letter can match no route (a lock names methods in uppercase and methods are
 * case-sensitive, RFC 9110 §9.1): refused with that reason rather than decided as a silent no-route. */
static rf_status check_method_case(const char *m, size_t len, rf_error *err) {
    for (size_t i = 0; i < len; i++)
        if (m[i] >= 'a' && m[i] <= 'z')
            return rfi_fail(err, "method",
                            "must be uppercase, got \"%.*s\": methods are case-sensitive (RFC 9110 §9.1) and a lock's "
                            "routes name them in uppercase, so no route could match",
                            (int)(len > 16 ? 16 : len), m);
    return RF_OK;
}

/* The refusal of a grpc-status outside 0..RF_GRPC_STATUS_MAX, the facts' and rf_classify_grpc's. */
static rf_status refuse_grpc_status(int grpc_status, rf_error *err) {
    return rfi_fail(err, "grpc_status", "must be a gRPC status code 0..%d (0: absent or OK), got %d",
                    RF_GRPC_STATUS_MAX, grpc_status);
}

/* decide.h; the decision path calls rfi_classify, inline. */
rf_status rf_classify_grpc(int status, rf_transport transport, int grpc_status, char buf[RF_CLASS_NAME_MAX],
                           rf_error *err) {
    if (buf == NULL) return rfi_fail(err, "buf", "must not be NULL");
    buf[0] = '\0';
    if ((unsigned)grpc_status > RF_GRPC_STATUS_MAX) return refuse_grpc_status(grpc_status, err);
    rfi_classify(status, transport, grpc_status, buf);
    return RF_OK;
}

/* The facts' fields in the order their refusals take; the method's case is checked by the caller (rf_decide). */
static rf_status check_fields(const rf_facts *f, rf_error *err) {
    if (f->method == NULL || f->method_len == 0) return rfi_fail(err, "method", "is required (e.g. \"GET\")");
    if (f->path == NULL || f->path_len == 0) return rfi_fail(err, "path", "is required (e.g. \"/v1/jobs\")");
    if (f->status != 0 && (f->status < RF_HTTP_STATUS_MIN || f->status > RF_HTTP_STATUS_MAX))
        return rfi_fail(err, "status", "must be 0 (none received) or %d..%d, got %d", RF_HTTP_STATUS_MIN,
                        RF_HTTP_STATUS_MAX, f->status);
    if ((unsigned)f->transport >= RF_TRANSPORT_COUNT) return rfi_fail(err, "transport", "is not a transport outcome");
    if (f->attempts < 1) return rfi_fail(err, "attempts", "must be >= 1 (attempts made so far), got %d", f->attempts);
    if (f->elapsed_ms < 0) return rfi_fail(err, "elapsed_ms", "must be >= 0, got %lld", (long long)f->elapsed_ms);
    if (f->inbound_attempt < 0)
        return rfi_fail(err, "inbound_attempt", "must be >= 0 (0: none), got %d", f->inbound_attempt);
    if ((unsigned)f->grpc_status > RF_GRPC_STATUS_MAX) return refuse_grpc_status(f->grpc_status, err);
    return RF_OK;
}

/* A compare and a branch per field, each true only for bad facts (refuse_facts then names what is wrong), in one
 * expression so that the good path keeps nothing across a call. attempts < 1, elapsed_ms < 0 and inbound_attempt < 0
 * are one sign test of the three ORed. */
static RFI_INLINE bool facts_bad(const rf_facts *f) {
    return f->method == NULL || f->method_len == 0 || f->path == NULL || f->path_len == 0 ||
           (f->status != 0 && (unsigned)f->status - 100u > 499u) || (unsigned)f->transport >= RF_TRANSPORT_COUNT ||
           (unsigned)f->grpc_status > RF_GRPC_STATUS_MAX ||
           (((int64_t)f->attempts - 1) | f->elapsed_ms | (int64_t)f->inbound_attempt) < 0;
}

/*
 * The refusal of facts that facts_bad found bad: check_fields, then the method's case, refused before any other
 * field. The case costs a loop over the method, so rf_decide runs it only where nothing proves it: a matched route
 * does (a lock's methods are uppercase letters, rfi_method_valid, and the match compares every byte), so only a
 * refusal here, an unpinned source and no route need it, before the verdict is written. Never RF_OK: facts_bad and
 * check_fields test the same fields, and were they ever to disagree the facts are still refused.
 */
static RFI_NOINLINE rf_status refuse_facts(const rf_facts *f, rf_error *err) {
    rf_status st = check_fields(f, err);
    if (st != RF_OK && f->method != NULL && f->method_len > 0 &&
        check_method_case(f->method, f->method_len, err) != RF_OK)
        return RF_EINVAL;
    return st != RF_OK ? st : rfi_fail(err, "", "facts refused without a field named (an internal error)");
}

/* The verdict on a failure of a matched route, in the documented order, without touching the retry budget
 * (rf_decide charges it once this has not refused). RF_EINVAL only for a missing rng on a jittered backoff. */
static rf_status decide_failure(const rf_policy *p, const rfi_route *r, const rf_facts *f, rf_rng *rng, bool retryable,
                                rf_verdict *out, rf_error *err) {
    out->class_retryable = retryable;
    if (f->attempts >= r->max_attempts) {
        rfi_stop(out, RF_REASON_MAX_ATTEMPTS);
        return RF_OK;
    }
    int class_limit = r->has_class_limits ? rfi_class_limit(r, f->status, f->transport, f->grpc_status) : 0;
    if (class_limit > 0 && f->attempts >= class_limit) {
        rfi_stop(out, RF_REASON_CLASS_LIMIT);
        return RF_OK;
    }
    if (!retryable) {
        rfi_stop(out, RF_REASON_STATUS_NOT_RETRYABLE);
        return RF_OK;
    }
    /* Propagation: the upstream says it is overloaded (Envoy never retries that), or the caller is retrying
     * already, so this layer makes one attempt: a request is retried at one layer only. */
    if (r->prop.on && f->overloaded) {
        rfi_stop(out, RF_REASON_UPSTREAM_OVERLOADED);
        return RF_OK;
    }
    if (r->prop.on && r->prop.inbound_attempt && f->inbound_attempt > 1) {
        rfi_stop(out, RF_REASON_INBOUND_RETRY);
        return RF_OK;
    }
    /* A request that never left cannot have been acted on: its retry needs no key (transparentRetry). */
    bool needs_key = !f->has_idempotency_key && rfi_method_requires_key(r, f->method, f->method_len);
    bool transparent = needs_key && p->transparent_retry && never_left(f);
    if (needs_key && !transparent) {
        rfi_stop(out, RF_REASON_MUTATING_WITHOUT_IDEMPOTENCY);
        return RF_OK;
    }
    int64_t left = r->total_budget_ms - f->elapsed_ms;
    int64_t delay = -1;
    if (out->retry_after_header >= 0) {
        rfi_wait w;
        rfi_wait_read(r, f, &w);
        if (w.header >= 0) out->retry_after_header = w.header;
        if (w.status == RF_RA_ABSENT) {
            out->retry_after = RF_RA_USE_ABSENT; /* only spaces, or a RateLimit with no exhausted quota */
        } else if (w.status != RF_RA_OK && w.status != RF_RA_TOO_LONG && w.status != RF_RA_STOP) {
            out->retry_after = RF_RA_USE_IGNORED;
        } else if (!r->retry_after_honor) {
            out->retry_after = RF_RA_USE_NOT_HONORED;
        } else {
            out->retry_after = RF_RA_USE_HONORED;
            if (w.status == RF_RA_STOP) { /* gRPC A6: a negative or malformed pushback means do not retry */
                rfi_stop(out, RF_REASON_SERVER_PUSHBACK);
                return RF_OK;
            }
            if (w.status == RF_RA_TOO_LONG || w.delay_ms > r->retry_after_max_ms || w.delay_ms > left) {
                rfi_stop(out, RF_REASON_RETRY_AFTER_EXCEEDS_BUDGET);
                return RF_OK;
            }
            delay = w.delay_ms;
        }
    }
    if (delay < 0) {
        delay = rfi_backoff(r, f->attempts, rng);
        if (delay < 0) return rfi_fail(err, "rng", "is required: the route's backoff uses jitter");
    }
    if (delay + r->min_attempt_ms > left || delay >= left) { /* no time left for the attempt: as rf_budget */
        rfi_stop(out, RF_REASON_DEADLINE);
        return RF_OK;
    }
    out->retry = true;
    out->reason = transparent ? RF_REASON_TRANSPARENT_RETRY : RF_REASON_PINNED_STATUS;
    out->delay_ms = delay;
    out->timeout_ms = left - delay < r->per_attempt_timeout_ms ? left - delay : r->per_attempt_timeout_ms;
    return RF_OK;
}

/* The route argument of decide_on that asks it to match f's method and path itself (rf_decide): the match then
 * happens inside decide_on's frame, so rf_decide keeps nothing across a call. */
#define MATCH_ROUTE (-2L)

/* rf_decide once the route is known: route is rfi_policy_match's answer for f (-1: none), checked by the caller, or
 * MATCH_ROUTE. */
static rf_status decide_on(const rf_policy *p, long route, const rf_facts *f, rf_rng *rng, rf_retry_budget *budget,
                           rf_verdict *out, rf_error *err) {
    rf_status st;
    if (route == MATCH_ROUTE) route = rfi_policy_match(p, f->method, f->method_len, f->path, f->path_len);
    /* Only an absent source (NULL) or exactly "pinned-map" is pinned: an empty one names no pinned map. */
    const bool unpinned = f->source != NULL && !str_is(f->source, f->source_len, "pinned-map");
    const long matched = route; /* an unpinned source still names the route it matched, which does not decide */
    if (unpinned) route = -1;
    if (route < 0 && check_method_case(f->method, f->method_len, err) != RF_OK) return RF_EINVAL;
    memset(out, 0, sizeof *out);
    rfi_classify(f->status, f->transport, f->grpc_status, out->class_name);
    out->route = -1;
    const uint32_t present = rfi_wait_hints_present(f);
    out->retry_after = present != 0 ? RF_RA_USE_NOT_NEEDED : RF_RA_USE_ABSENT;
    out->retry_after_header = -1;

    if (unpinned) {
        out->route = matched;
        rfi_stop(out, RF_REASON_UNPINNED_SOURCE);
        return RF_OK;
    }
    out->route = route;
    if (out->route < 0) {
        rfi_stop(out, RF_REASON_NO_ROUTE);
        return RF_OK;
    }
    const rfi_route *r = &p->routes[out->route];
    if (present != 0) {
        st = rfi_wait_hints_check(r, f, present, &out->retry_after_header, err);
        if (st != RF_OK) return st;
        out->retry_after = out->retry_after_header >= 0 ? RF_RA_USE_NOT_NEEDED : RF_RA_USE_ABSENT;
    }
    /* Without a budget (NULL) none of the budget's calls has an effect: they are not made. A ratio budget counts the
     * request by its token (rf_budget_request): once, at whichever decision of the request comes first. */
    const bool ratio = budget != NULL && rfi_retry_budget_is_ratio(budget);
    if (ratio && f->budget_request == NULL)
        return rfi_fail(err, "budget_request",
                        "is required with a ratio retry budget (retryBudget.retryRatio): the request's token, the "
                        "same on every decision of the request, so the window counts it once");
    if (f->transport == RF_TRANSPORT_OK && f->status >= RF_SUCCESS_STATUS_MIN && f->status <= RF_SUCCESS_STATUS_MAX &&
        f->grpc_status == 0) {
        if (ratio)
            rfi_retry_budget_window_take(budget, f->budget_request, false, f->mono_ms, &out->budget);
        else if (budget != NULL)
            rfi_retry_budget_add(budget, rfi_retry_budget_ratio(budget), &out->budget);
        rfi_stop(out, RF_REASON_SUCCESS);
        return RF_OK;
    }
    const bool retryable = rfi_class_retryable(r, f->status, f->transport, f->grpc_status);
    if (f->hedged && r->has_hedging && !rfi_hedge_non_fatal(r, f->status, f->transport, f->grpc_status)) {
        out->class_retryable = retryable; /* gRPC A6: a fatal class ends a hedged request at once */
        rfi_stop(out, RF_REASON_HEDGE_FATAL);
    } else {
        st = decide_failure(p, r, f, rng, retryable, out, err);
        if (st != RF_OK) return st; /* refused: no effect, the budget is not charged */
    }
    if (ratio) { /* a retry is one of the window's; the request counts at its first decision */
        if (!rfi_retry_budget_window_take(budget, f->budget_request, out->retry, f->mono_ms, &out->budget))
            rfi_stop(out, RF_REASON_RETRY_THROTTLED);
    } else if (retryable && budget != NULL) { /* gRPC A6: every retryable failure takes a token, whatever the verdict */
        int64_t tokens = rfi_retry_budget_add(budget, -1000, &out->budget);
        if (out->retry && rfi_retry_budget_throttled(budget, tokens)) rfi_stop(out, RF_REASON_RETRY_THROTTLED);
    }
    return RF_OK;
}

rf_status rf_decide(const rf_policy *p, const rf_facts *f, rf_rng *rng, rf_retry_budget *budget, rf_verdict *out,
                    rf_error *err) {
    if (p == NULL || f == NULL || out == NULL) return rfi_fail(err, "", "policy, facts and verdict must not be NULL");
    if (RFI_UNLIKELY(facts_bad(f))) return refuse_facts(f, err);
    return decide_on(p, MATCH_ROUTE, f, rng, budget, out, err);
}

/* Whether a route index a caller matched (rf_policy_match) is neither -1 (none) nor one of p's. */
static RFI_INLINE bool route_bad(const rf_policy *p, long route) { return route < -1 || route >= (long)p->n_routes; }

/* The refusal of a route_bad index: a tail call, so that the good path keeps nothing across a call. */
static RFI_NOINLINE rf_status refuse_route(const rf_policy *p, long route, rf_error *err) {
    return rfi_fail(err, "route", "must be -1 or a route index below %zu, got %ld", p->n_routes, route);
}

rf_status rf_decide_on_route(const rf_policy *p, long route, const rf_facts *f, rf_rng *rng, rf_retry_budget *budget,
                             rf_verdict *out, rf_error *err) {
    if (p == NULL || f == NULL || out == NULL) return rfi_fail(err, "", "policy, facts and verdict must not be NULL");
    if (RFI_UNLIKELY(route_bad(p, route))) return refuse_route(p, route, err);
    if (RFI_UNLIKELY(facts_bad(f))) return refuse_facts(f, err);
    return decide_on(p, route, f, rng, budget, out, err);
}

/* rf_budget's answer for route (-1 or a valid index) into *out, the arguments checked. */
static void budget_on(const rf_policy *p, long route, int attempts, int64_t elapsed_ms, rf_attempt_budget *out) {
    *out = (rf_attempt_budget){.allowed = false, .timeout_ms = 0, .reason = RF_REASON_NO_ROUTE, .route = route};
    if (route < 0) return;
    const rfi_route *r = &p->routes[route];
    int64_t left = r->total_budget_ms - elapsed_ms;
    if (attempts >= r->max_attempts) {
        out->reason = RF_REASON_MAX_ATTEMPTS;
    } else if (left < r->min_attempt_ms || left <= 0) {
        out->reason = RF_REASON_DEADLINE;
    } else {
        out->allowed = true;
        out->reason = RF_REASON_WITHIN_BUDGET;
        out->timeout_ms = left < r->per_attempt_timeout_ms ? left : r->per_attempt_timeout_ms;
    }
}

/* The checks rf_budget and rf_budget_on_route share: the count and the time so far. */
static rf_status check_budget_facts(int attempts, int64_t elapsed_ms, rf_error *err) {
    if (attempts < 0) return rfi_fail(err, "attempts", "must be >= 0 (attempts made so far), got %d", attempts);
    if (elapsed_ms < 0) return rfi_fail(err, "elapsed_ms", "must be >= 0, got %lld", (long long)elapsed_ms);
    return RF_OK;
}

rf_status rf_budget(const rf_policy *p, const char *method, size_t method_len, const char *path, size_t path_len,
                    int attempts, int64_t elapsed_ms, rf_attempt_budget *out, rf_error *err) {
    if (p == NULL || out == NULL) return rfi_fail(err, "", "policy and out must not be NULL");
    if (method == NULL || method_len == 0) return rfi_fail(err, "method", "is required (e.g. \"GET\")");
    if (check_method_case(method, method_len, err) != RF_OK) return RF_EINVAL;
    if (path == NULL || path_len == 0) return rfi_fail(err, "path", "is required (e.g. \"/v1/jobs\")");
    if (check_budget_facts(attempts, elapsed_ms, err) != RF_OK) return RF_EINVAL;
    budget_on(p, rfi_policy_match(p, method, method_len, path, path_len), attempts, elapsed_ms, out);
    return RF_OK;
}

rf_status rf_budget_on_route(const rf_policy *p, long route, int attempts, int64_t elapsed_ms, rf_attempt_budget *out,
                             rf_error *err) {
    if (p == NULL || out == NULL) return rfi_fail(err, "", "policy and out must not be NULL");
    if (route_bad(p, route)) return refuse_route(p, route, err);
    if (check_budget_facts(attempts, elapsed_ms, err) != RF_OK) return RF_EINVAL;
    budget_on(p, route, attempts, elapsed_ms, out);
    return RF_OK;
}
