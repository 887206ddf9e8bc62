/*
 * The lock schema: one row per lock field (docs/lock.md, "Fields"), and the public reads of it. A new lock field is
 * a row here (with its id in lock_schema.h), the engine code that uses its value, and its line in docs/lock.md: the
 * loader, the defaults, the canonical form and digest, the Lua views, the CLI's threshold options, retryfreeze diff
 * and the docs check all follow the row.
 */
#include "lock_schema.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <string.h>

/* Where a value lives: a member of rfi_route (a route's field) or of rf_policy (the lock's). SPAN: the members
 * first..last, which a route inherits and compares as one value. */
#define ROUTE_AT(m) .at = offsetof(rfi_route, m), .size = sizeof(((rfi_route *)0)->m)
#define ROUTE_SPAN(first, last)       \
    .at = offsetof(rfi_route, first), \
    .size = offsetof(rfi_route, last) + sizeof(((rfi_route *)0)->last) - offsetof(rfi_route, first)
#define ROUTE_LIST(n, items) .n_at = offsetof(rfi_route, n), .items_at = offsetof(rfi_route, items)
#define ROUTE_LIST_REF(n, items) ROUTE_LIST(n, items), .items_ref = true
#define ROUTE_HAS(m) .has_at = offsetof(rfi_route, m) + 1
#define LOCK_AT(m) .at = offsetof(rf_policy, m), .size = sizeof(((rf_policy *)0)->m)
#define LOCK_HAS(m) .has_at = offsetof(rf_policy, m) + 1

/* The row's public part, in rf_lock_field's order. ROW: at the top of its place; IN(object path, key, parent id, …):
 * in an object. */
#define ROW(key_, ...) ROW_AT(key_, key_, -1, __VA_ARGS__)
#define IN(object_, key_, parent_, ...) ROW_AT(object_ "." key_, key_, parent_, __VA_ARGS__)
#define ROW_AT(path_, key_, parent_, place_, type_, min_, max_, if_absent_, default_, canonical_, widens_, view_) \
    .pub = {.path = path_,                                                                                        \
            .key = key_,                                                                                          \
            .parent = parent_,                                                                                    \
            .place = RF_PLACE_##place_,                                                                           \
            .type = RF_FIELD_##type_,                                                                             \
            .min = min_,                                                                                          \
            .max = max_,                                                                                          \
            .if_absent = RF_DEFAULT_##if_absent_,                                                                 \
            .default_json = default_,                                                                             \
            .canonical = RF_CANON_##canonical_,                                                                   \
            .widens = RF_WIDENS_##widens_,                                                                        \
            .view = view_}

/* A gate threshold: optional, not checked when absent, judged by `retryfreeze gate` and `soak`. */
#define GATE_RATIO(path_, min_, max_, widens_, view_, member, about_) \
    .pub = {.path = "gate." path_,                                    \
            .key = path_,                                             \
            .parent = RFI_F_GATE,                                     \
            .place = RF_PLACE_LOCK,                                   \
            .type = RF_FIELD_DECIMAL,                                 \
            .min = min_,                                              \
            .max = max_,                                              \
            .if_absent = RF_DEFAULT_NONE,                             \
            .canonical = RF_CANON_ALWAYS,                             \
            .widens = RF_WIDENS_##widens_,                            \
            .view = "gate." view_,                                    \
            .about = about_},                                         \
    LOCK_AT(gate.view.member##_milli), LOCK_HAS(gate.view.has_##member)

/* A field of propagation (propagation.c): a route's, with its default; header names are kept lowercase. */
#define PROPAGATION(key_, type_, min_, max_, default_, widens_, view_, member, about_) \
    .pub = {.path = "propagation." key_,                                               \
            .key = key_,                                                               \
            .parent = RFI_F_PROPAGATION,                                               \
            .place = RF_PLACE_ROUTE,                                                   \
            .type = RF_FIELD_##type_,                                                  \
            .min = min_,                                                               \
            .max = max_,                                                               \
            .if_absent = RF_DEFAULT_VALUE,                                             \
            .default_json = default_,                                                  \
            .canonical = RF_CANON_ALWAYS,                                              \
            .widens = RF_WIDENS_##widens_,                                             \
            .view = "propagation." view_,                                              \
            .about = about_},                                                          \
    ROUTE_AT(prop.member)

/* retryable: a redirect loop is never retried (the same chain would loop again). */
static bool no_redirect_loop(void *holder, const char *path, rf_error *err) {
    const rfi_route *r = holder;
    if (!(r->retryable.named & (1u << RF_CLASS_TOO_MANY_REDIRECTS))) return true;
    rfi_fail(err, path, "TOO_MANY_REDIRECTS cannot be retryable: the same redirect chain would loop again");
    return false;
}

/* The rows of each form of retryBudget: a token bucket (gRPC A6) or a ratio over a window (Linkerd, Finagle). */
static const rfi_field_id TOKEN_ROWS[] = {RFI_F_BUDGET_MAX_TOKENS, RFI_F_BUDGET_TOKEN_RATIO};
static const rfi_field_id RATIO_ROWS[] = {RFI_F_BUDGET_RETRY_RATIO, RFI_F_BUDGET_MIN_PER_SECOND, RFI_F_BUDGET_TTL};

/* The first row of rows[0..n) the lock sets, or -1. */
static long first_set(const rf_policy *p, const rfi_field_id *rows, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p->has & RFI_BIT(rows[i])) return (long)rows[i];
    return -1;
}

/* retryBudget: one form or the other, each complete: a token bucket needs both its fields; a ratio needs retryRatio,
 * and takes its rows' defaults for the others (read as the lock's own values would be). */
static bool one_budget_form(void *holder, const char *path, rf_error *err) {
    rf_policy *p = holder;
    char sub[RFI_PATH_CAP];
    const long token = first_set(p, TOKEN_ROWS, 2), ratio = first_set(p, RATIO_ROWS, 3);
    if (token >= 0 && ratio >= 0) {
        rfi_fail(err, path,
                 "has both a token bucket (%s) and a ratio (%s): a retry budget is one or the other (maxTokens and "
                 "tokenRatio, or retryRatio, minRetriesPerSecond and ttlMs)",
                 rfi_field_key(&rfi_lock_fields[token]), rfi_field_key(&rfi_lock_fields[ratio]));
        return false;
    }
    const rfi_field_id *rows = ratio >= 0 ? RATIO_ROWS : TOKEN_ROWS;
    const size_t n = ratio >= 0 ? 3 : 2;
    for (size_t i = 0; i < n; i++) {
        const rfi_field *f = &rfi_lock_fields[rows[i]];
        if (p->has & RFI_BIT(rows[i])) continue;
        rfi_path_child(sub, path, rfi_field_key(f));
        if (f->pub.default_json == NULL) {
            rfi_fail(err, sub, "is required in a retryBudget %s (no default)",
                     ratio >= 0 ? "ratio (retryRatio, minRetriesPerSecond, ttlMs)"
                                : "token bucket (maxTokens, tokenRatio)");
            return false;
        }
        const rfi_read_ctx ctx = {.lock = p};
        if (rfi_field_default(f, sub, &ctx, err) != RF_OK) return false;
    }
    return true;
}

/* retryBudget.ttlMs: the window is 10 slots of ttlMs / 10 ms (retry_budget.c), so it divides by 10. */
static bool window_in_slots(void *holder, const char *path, rf_error *err) {
    const rf_policy *p = holder;
    if (p->budget_ttl_ms % 10 == 0) return true;
    rfi_fail(err, path, "must be a multiple of 10 (the window is 10 slots of ttlMs / 10 ms), got %lld",
             (long long)p->budget_ttl_ms);
    return false;
}

const rfi_field rfi_lock_fields[RFI_FIELD_COUNT] = {
    /* The top level of a multi-route lock. */
    [RFI_F_VERSION] = {ROW("version", MULTI, INTEGER, 1, 1, REQUIRED, NULL, ALWAYS, NEVER, NULL), LOCK_AT(version)},
    [RFI_F_DEFAULTS] = {ROW("defaults", MULTI, OBJECT, 0, 0, NONE, NULL, NEVER, FIELDS, NULL),
                        .shape = "of route fields"},
    [RFI_F_ROUTES] = {ROW("routes", MULTI, ROUTES, 1, RFI_MAX_ROUTES, REQUIRED, NULL, ALWAYS, REQUESTS, NULL)},
    /* The lock's top level, in both forms. */
    [RFI_F_RETRY_BUDGET] = {ROW("retryBudget", LOCK, OBJECT, 0, 0, NONE, NULL, NULL_WHEN_NONE, REMOVED, "retry_budget"),
                            .in_route = "retryBudget is client-wide (gRPC retryThrottling): set it at the top level",
                            .shape = "{maxTokens, tokenRatio} or {retryRatio, minRetriesPerSecond, ttlMs}",
                            .check = one_budget_form},
    /* The token bucket (gRPC A6 retryThrottling). Required in that form (one_budget_form). */
    [RFI_F_BUDGET_MAX_TOKENS] = {IN("retryBudget", "maxTokens", RFI_F_RETRY_BUDGET, LOCK, INTEGER, 1, 1000, NONE, NULL,
                                    ALWAYS, GROWS, "retry_budget.max_tokens"),
                                 LOCK_AT(budget_max_tokens)},
    [RFI_F_BUDGET_TOKEN_RATIO] = {IN("retryBudget", "tokenRatio", RFI_F_RETRY_BUDGET, LOCK, DECIMAL, 1, 1000000, NONE,
                                     NULL, ALWAYS, GROWS, "retry_budget.token_ratio"),
                                  LOCK_AT(budget_token_ratio_milli)},
    /* The ratio over a sliding window (Linkerd, Envoy, Finagle): retries <= retryRatio × requests +
     * minRetriesPerSecond × ttlMs / 1000 in the last ttlMs. Absent from a token bucket's canonical form. */
    [RFI_F_BUDGET_RETRY_RATIO] = {IN("retryBudget", "retryRatio", RFI_F_RETRY_BUDGET, LOCK, DECIMAL, 0, 1000000, NONE,
                                     NULL, ALWAYS, GROWS, "retry_budget.retry_ratio"),
                                  LOCK_AT(budget_retry_ratio_milli)},
    [RFI_F_BUDGET_MIN_PER_SECOND] = {IN("retryBudget", "minRetriesPerSecond", RFI_F_RETRY_BUDGET, LOCK, INTEGER, 0,
                                        100000, NONE, "0", ALWAYS, GROWS, "retry_budget.min_retries_per_second"),
                                     LOCK_AT(budget_min_per_second)},
    [RFI_F_BUDGET_TTL] = {IN("retryBudget", "ttlMs", RFI_F_RETRY_BUDGET, LOCK, INTEGER, 100, 3600000, NONE, "10000",
                             ALWAYS, ANY_CHANGE, "retry_budget.ttl_ms"),
                          LOCK_AT(budget_ttl_ms), .check = window_in_slots},
    [RFI_F_BUDGET_SHARED] = {IN("retryBudget", "shared", RFI_F_RETRY_BUDGET, LOCK, OBJECT, 0, 0, NONE, NULL, ALWAYS,
                                REMOVED, NULL),
                             .canonical_last = true},
    [RFI_F_BUDGET_SHARED_NAME] = {IN("retryBudget.shared", "name", RFI_F_BUDGET_SHARED, LOCK, NAME, 1,
                                     RF_SHARED_BUDGET_NAME_MAX, REQUIRED, NULL, ALWAYS, ANY_CHANGE,
                                     "retry_budget.shared"),
                                  LOCK_AT(budget_shared_name)},
    [RFI_F_GATE] = {ROW("gate", LOCK, OBJECT, 0, 0, NONE, NULL, NULL_WHEN_NONE, REMOVED, "gate"),
                    .shape = "of gate thresholds"},
    [RFI_F_GATE_MAX_RETRIED_SUCCESS] = {GATE_RATIO("maxRetriedSuccess", 0, 1000, GROWS, "max_retried_success",
                                                   max_retried_success,
                                                   "most retried successes / successes, a fraction: 0.05 = 5 %")},
    [RFI_F_GATE_MAX_ATTEMPTS_PER_SUCCESS] = {GATE_RATIO("maxAttemptsPerSuccess", 1000, 10000, GROWS,
                                                        "max_attempts_per_success", max_attempts_per_success,
                                                        "most attempts of the successful requests / successes")},
    [RFI_F_GATE_MAX_TERMINAL_RATE] = {GATE_RATIO("maxTerminalRate", 0, 1000, GROWS, "max_terminal_rate",
                                                 max_terminal_rate,
                                                 "most requests ending terminal (a non-retryable class) / requests")},
    [RFI_F_GATE_MAX_RETRY_RATIO] = {GATE_RATIO("maxRetryRatio", 0, 10000, GROWS, "max_retry_ratio", max_retry_ratio,
                                               "most retries (attempts after the first) / requests")},
    [RFI_F_GATE_MIN_SUCCESS_RATE] = {GATE_RATIO("minSuccessRate", 0, 1000, SHRINKS, "min_success_rate",
                                                min_success_rate, "fewest successes / requests: below it is a breach")},
    [RFI_F_GATE_MIN_SUCCESSES] = {.pub = {.path = "gate.minSuccesses",
                                          .key = "minSuccesses",
                                          .parent = RFI_F_GATE,
                                          .place = RF_PLACE_LOCK,
                                          .type = RF_FIELD_INTEGER,
                                          .min = 0,
                                          .max = 1000000000,
                                          .if_absent = RF_DEFAULT_NONE,
                                          .default_json = "0",
                                          .canonical = RF_CANON_ALWAYS,
                                          .widens = RF_WIDENS_GROWS,
                                          .view = "gate.min_successes",
                                          .about = "with fewer successes, say 'skip' and judge no per-success ratio"},
                                  LOCK_AT(gate.view.min_successes),
                                  LOCK_HAS(gate.view.has_min_successes)},
    [RFI_F_GATE_FORBID_REASONS] = {IN("gate", "forbidReasons", RFI_F_GATE, LOCK, REASONS, 0, RF_REASON_COUNT, VALUE,
                                      "[]", ALWAYS, ITEM_REMOVED, "gate.forbid_reasons"),
                                   LOCK_AT(gate.reason_ptrs), .n_at = offsetof(rf_policy, gate.view.n_forbid_reasons),
                                   .items_at = offsetof(rf_policy, gate.reason_ptrs)},
    [RFI_F_TRANSPARENT_RETRY] = {ROW("transparentRetry", LOCK, BOOLEAN, 0, 1, VALUE, "true", UNLESS_DEFAULT,
                                     FALSE_TO_TRUE, NULL),
                                 LOCK_AT(transparent_retry)},
    /* A route's fields: a flat lock's top level, each of routes, and defaults. */
    [RFI_F_ENDPOINT] = {ROW("endpoint", ROUTE, ENDPOINT, 1, RFI_MAX_ENDPOINT, REQUIRED, NULL, ALWAYS, NEVER,
                            "endpoint"),
                        ROUTE_AT(endpoint)},
    [RFI_F_MAX_ATTEMPTS] = {ROW("maxAttempts", ROUTE, INTEGER, 1, 10, REQUIRED, NULL, ALWAYS, GROWS, "max_attempts"),
                            ROUTE_AT(max_attempts)},
    [RFI_F_PER_ATTEMPT_TIMEOUT] = {ROW("perAttemptTimeoutMs", ROUTE, INTEGER, 1, 600000, REQUIRED, NULL, ALWAYS, GROWS,
                                       "per_attempt_timeout_ms"),
                                   ROUTE_AT(per_attempt_timeout_ms)},
    [RFI_F_TOTAL_BUDGET] = {ROW("totalBudgetMs", ROUTE, INTEGER, 1, 3600000, REQUIRED, NULL, ALWAYS, GROWS,
                                "total_budget_ms"),
                            ROUTE_AT(total_budget_ms)},
    [RFI_F_MIN_ATTEMPT] = {ROW("minAttemptMs", ROUTE, INTEGER, 0, 600000, VALUE, "200", ALWAYS, SHRINKS,
                               "min_attempt_ms"),
                           ROUTE_AT(min_attempt_ms)},
    [RFI_F_RETRYABLE] = {ROW("retryable", ROUTE, CLASSES, 0, RFI_MAX_CLASSES, REQUIRED, NULL, ALWAYS, RETRYABLE,
                             "retryable"),
                         ROUTE_AT(retryable), ROUTE_LIST_REF(n_retryable_tokens, retryable_ptrs),
                         .check = no_redirect_loop},
    [RFI_F_NOT_RETRYABLE] = {ROW("notRetryable", ROUTE, CLASSES, 0, RFI_MAX_CLASSES, VALUE, "[]", ALWAYS, RETRYABLE,
                                 "not_retryable"),
                             ROUTE_AT(not_retryable), ROUTE_LIST_REF(n_not_retryable_tokens, not_retryable_ptrs)},
    [RFI_F_IDEMPOTENCY_REQUIRED] = {ROW("idempotencyRequired", ROUTE, METHODS, 0, RFI_MAX_METHODS, VALUE,
                                        "[\"POST\", \"PATCH\", \"DELETE\"]", ALWAYS, OWN_METHOD,
                                        "idempotency_required"),
                                    ROUTE_SPAN(n_methods, methods), ROUTE_LIST(n_methods, method_ptrs)},
    [RFI_F_BACKOFF] = {ROW("backoff", ROUTE, OBJECT, 0, 0, VALUE, "{}", ALWAYS, FIELDS, "backoff")},
    [RFI_F_BACKOFF_BASE] = {IN("backoff", "baseMs", RFI_F_BACKOFF, ROUTE, INTEGER, 0, 600000, VALUE, "100", ALWAYS,
                               DELAY_WINDOW, "backoff.base_ms"),
                            ROUTE_AT(backoff_base_ms)},
    [RFI_F_BACKOFF_MULTIPLIER] = {IN("backoff", "multiplier", RFI_F_BACKOFF, ROUTE, DECIMAL, 1000, 10000, VALUE, "2",
                                     ALWAYS, DELAY_WINDOW, "backoff.multiplier"),
                                  ROUTE_AT(backoff_multiplier_milli)},
    [RFI_F_BACKOFF_MAX] = {IN("backoff", "maxMs", RFI_F_BACKOFF, ROUTE, INTEGER, 0, 600000, VALUE, "10000", ALWAYS,
                              DELAY_WINDOW, "backoff.max_ms"),
                           ROUTE_AT(backoff_max_ms)},
    [RFI_F_BACKOFF_JITTER] = {IN("backoff", "jitter", RFI_F_BACKOFF, ROUTE, JITTER, 0, 0, VALUE, "\"full\"", ALWAYS,
                                 DELAY_WINDOW, "backoff.jitter"),
                              ROUTE_AT(jitter)},
    [RFI_F_RETRY_AFTER] = {ROW("retryAfter", ROUTE, OBJECT, 0, 0, VALUE, "{}", ALWAYS, FIELDS, "retry_after")},
    [RFI_F_RETRY_AFTER_HONOR] = {IN("retryAfter", "honor", RFI_F_RETRY_AFTER, ROUTE, BOOLEAN, 0, 1, VALUE, "true",
                                    ALWAYS, TRUE_TO_FALSE, "retry_after.honor"),
                                 ROUTE_AT(retry_after_honor)},
    [RFI_F_RETRY_AFTER_MAX] = {IN("retryAfter", "maxMs", RFI_F_RETRY_AFTER, ROUTE, INTEGER, 0, 3600000, VALUE, "120000",
                                  ALWAYS, GROWS, "retry_after.max_ms"),
                               ROUTE_AT(retry_after_max_ms)},
    [RFI_F_RETRY_AFTER_HEADERS] = {IN("retryAfter", "headers", RFI_F_RETRY_AFTER, ROUTE, WAIT_HEADERS, 1,
                                      RF_WAIT_HEADER_COUNT, VALUE, "[\"retry-after\"]", UNLESS_DEFAULT, ANY_CHANGE,
                                      "retry_after.headers"),
                                   ROUTE_SPAN(n_wait_headers, wait_headers),
                                   ROUTE_LIST(n_wait_headers, wait_header_ptrs)},
    [RFI_F_CLASS_LIMITS] = {ROW("classLimits", ROUTE, CLASS_LIMITS, 1, 10, VALUE, "{}", UNLESS_DEFAULT, CLASS_ATTEMPTS,
                                "class_limits"),
                            ROUTE_SPAN(has_class_limits, class_limit_named),
                            ROUTE_LIST_REF(n_class_limit_tokens, class_limit_ptrs)},
    /* Hedging (gRPC A6 hedgingPolicy): left out of the canonical form when absent, so older locks keep their digest. */
    [RFI_F_HEDGING] = {ROW("hedging", ROUTE, OBJECT, 0, 0, NONE, NULL, UNLESS_DEFAULT, HEDGES, "hedging"),
                       ROUTE_SPAN(has_hedging, hedge_non_fatal), ROUTE_HAS(has_hedging)},
    [RFI_F_HEDGING_MAX_ATTEMPTS] = {IN("hedging", "maxAttempts", RFI_F_HEDGING, ROUTE, INTEGER, 2, 10, REQUIRED, NULL,
                                       ALWAYS, HEDGES, "hedging.max_attempts"),
                                    ROUTE_AT(hedge_max_attempts)},
    [RFI_F_HEDGING_DELAY] = {IN("hedging", "hedgingDelayMs", RFI_F_HEDGING, ROUTE, INTEGER, 1, 600000, REQUIRED, NULL,
                                ALWAYS, HEDGES, "hedging.hedging_delay_ms"),
                             ROUTE_AT(hedge_delay_ms)},
    [RFI_F_HEDGING_NON_FATAL] = {IN("hedging", "nonFatalClasses", RFI_F_HEDGING, ROUTE, CLASSES, 0, RFI_MAX_CLASSES,
                                    VALUE, "[]", ALWAYS, HEDGES, "hedging.non_fatal_classes"),
                                 ROUTE_AT(hedge_non_fatal),
                                 ROUTE_LIST_REF(n_hedge_non_fatal_tokens, hedge_non_fatal_ptrs)},
    /* Propagation across layers: absent, the route sends, reads and tells nothing (and the canonical form leaves it
     * out, so a lock written before it keeps its digest); present, its fields are all written. */
    [RFI_F_PROPAGATION] = {ROW("propagation", ROUTE, OBJECT, 0, 0, NONE, NULL, ALWAYS, REMOVED, "propagation"),
                           ROUTE_AT(prop.on), ROUTE_HAS(prop.on)},
    [RFI_F_PROPAGATION_ATTEMPT_HEADER] = {PROPAGATION(
        "attemptHeader", HEADER, 1, RF_PROPAGATION_HEADER_MAX, "\"x-envoy-attempt-count\"", ANY_CHANGE,
        "attempt_header", attempt_header,
        "sent on every attempt: its number (1, 2, 3…); a caller's above 1 is a retry")},
    [RFI_F_PROPAGATION_DEADLINE_HEADER] = {PROPAGATION(
        "deadlineHeader", HEADER, 1, RF_PROPAGATION_HEADER_MAX, "\"x-envoy-expected-rq-timeout-ms\"", ANY_CHANGE,
        "deadline_header", deadline_header,
        "sent on every attempt: the ms it may take (its per-try timeout); a caller's is the time it has left")},
    [RFI_F_PROPAGATION_OVERLOADED_HEADER] = {PROPAGATION(
        "overloadedHeader", HEADER, 1, RF_PROPAGATION_HEADER_MAX, "\"x-envoy-overloaded\"", ANY_CHANGE,
        "overloaded_header", overloaded_header,
        "a response with it is not retried; told to the caller when this layer stops after retrying")},
    [RFI_F_PROPAGATION_INBOUND_DEADLINE] = {PROPAGATION("inboundDeadline", BOOLEAN, 0, 1, "true", TRUE_TO_FALSE,
                                                        "inbound_deadline", inbound_deadline,
                                                        "a caller's deadline header narrows this request's deadline")},
    [RFI_F_PROPAGATION_INBOUND_ATTEMPT] = {PROPAGATION(
        "inboundAttempt", BOOLEAN, 0, 1, "true", TRUE_TO_FALSE, "inbound_attempt", inbound_attempt,
        "a caller's attempt number above 1 leaves this layer one attempt")},
};

size_t rf_lock_schema_count(void) { return RFI_FIELD_COUNT; }

const rf_lock_field *rf_lock_schema_field(size_t i) { return i < RFI_FIELD_COUNT ? &rfi_lock_fields[i].pub : NULL; }

long rf_lock_schema_find(const char *path) {
    if (path == NULL) return -1;
    for (size_t i = 0; i < RFI_FIELD_COUNT; i++)
        if (strcmp(rfi_lock_fields[i].pub.path, path) == 0) return (long)i;
    return -1;
}

rf_status rf_lock_field_check(size_t i, double value, rf_error *err) {
    if (i >= RFI_FIELD_COUNT) return RF_EINVAL;
    const rfi_field *f = &rfi_lock_fields[i];
    if (f->pub.type != RF_FIELD_INTEGER && f->pub.type != RF_FIELD_DECIMAL) return RF_EINVAL;
    /* The loader's own reader, on a number node as cJSON would have parsed it, into a scratch holder. */
    cJSON item;
    memset(&item, 0, sizeof item);
    item.type = cJSON_Number;
    item.valuedouble = value;
    char path[RFI_PATH_CAP];
    rfi_path_child(path, "$", f->pub.path);
    rfi_route route; /* only the value is written, at the row's place */
    rfi_field_set has = 0;
    rf_policy lock;
    memset(&lock, 0, sizeof lock);
    const rfi_read_ctx ctx = {.route = &route, .route_has = &has, .lock = &lock};
    return rfi_field_read(f, &item, path, &ctx, err) ? RF_OK : RF_EINVAL;
}

rf_status rf_policy_field(const rf_policy *p, size_t route, size_t i, rf_field_value *out) {
    if (p == NULL || out == NULL || i >= RFI_FIELD_COUNT) return RF_EINVAL;
    const rfi_field *f = &rfi_lock_fields[i];
    const char *h;
    if (f->pub.place == RF_PLACE_ROUTE) {
        if (route >= p->n_routes) return RF_EINVAL;
        h = (const char *)&p->routes[route];
    } else {
        h = (const char *)p;
    }
    *out = (rf_field_value){.present = rfi_field_present(p, h, i)};
    if (!out->present) return RF_OK;
    switch (f->pub.type) {
    case RF_FIELD_INTEGER:
    case RF_FIELD_DECIMAL: memcpy(&out->number, h + f->at, sizeof out->number); break;
    case RF_FIELD_BOOLEAN: out->number = *(const bool *)(const void *)(h + f->at); break;
    case RF_FIELD_ENDPOINT: out->text = ((const rfi_endpoint *)(const void *)(h + f->at))->text; break;
    case RF_FIELD_JITTER: out->text = rf_jitter_name(*(const rf_jitter *)(const void *)(h + f->at)); break;
    case RF_FIELD_NAME:
    case RF_FIELD_HEADER: out->text = h + f->at; break;
    case RF_FIELD_ROUTES:
        out->n = p->n_routes;
        out->number = (int64_t)p->n_routes;
        break;
    case RF_FIELD_CLASS_LIMITS: /* its classes are a list, with a limit each */
    case RF_FIELD_CLASSES:
    case RF_FIELD_METHODS:
    case RF_FIELD_WAIT_HEADERS:
    case RF_FIELD_REASONS:
        out->items = rfi_field_items(h, f, &out->n);
        out->number = (int64_t)out->n;
        if (f->pub.type == RF_FIELD_CLASS_LIMITS)
            out->limits = ((const rfi_route *)(const void *)h)->class_limit_values;
        break;
    case RF_FIELD_OBJECT:
    case RF_FIELD_TYPE_COUNT: break;
    }
    return RF_OK;
}
