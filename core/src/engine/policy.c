/*
 * The loaded policy: the views and derived fields built once it is loaded, its read-only accessors and route
 * matching. Immutable after rf_policy_load_*; its canonical JSON and digest are lock_canonical.c's.
 */
#include "lock_schema.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compare_methods(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* Builds the per-route views rf_policy_route hands out (sorted canonical lists). The class lists go into one block
 * owned by the policy, sized by a first pass that only counts. */
static rf_status build_views(rf_policy *p, rf_error *err) {
    const char *tokens[RFI_MAX_CLASSES];
    int values[RFI_MAX_CLASSES];
    size_t n_tokens = 0, n_values = 0;
    for (size_t i = 0; i < p->n_routes; i++) {
        rfi_route *r = &p->routes[i];
        r->n_retryable_tokens = rfi_class_tokens(&r->retryable, tokens, RFI_MAX_CLASSES);
        r->n_not_retryable_tokens = rfi_class_tokens(&r->not_retryable, tokens, RFI_MAX_CLASSES);
        r->n_class_limit_tokens = rfi_class_limits_view(r, tokens, values);
        r->n_hedge_non_fatal_tokens = rfi_class_tokens(&r->hedge_non_fatal, tokens, RFI_MAX_CLASSES);
        n_tokens +=
            r->n_retryable_tokens + r->n_not_retryable_tokens + r->n_class_limit_tokens + r->n_hedge_non_fatal_tokens;
        n_values += r->n_class_limit_tokens;
    }
    p->view_tokens = malloc((n_tokens > 0 ? n_tokens : 1) * sizeof *p->view_tokens);
    p->view_values = malloc((n_values > 0 ? n_values : 1) * sizeof *p->view_values);
    if (p->view_tokens == NULL || p->view_values == NULL) {
        rfi_fail(err, "$", "out of memory while building the route views");
        return RF_ENOMEM;
    }
    const char **t = p->view_tokens;
    int *v = p->view_values;
    for (size_t i = 0; i < p->n_routes; i++) {
        rfi_route *r = &p->routes[i];
        r->retryable_ptrs = t;
        t += rfi_class_tokens(&r->retryable, r->retryable_ptrs, r->n_retryable_tokens);
        r->not_retryable_ptrs = t;
        t += rfi_class_tokens(&r->not_retryable, r->not_retryable_ptrs, r->n_not_retryable_tokens);
        r->hedge_non_fatal_ptrs = t;
        t += rfi_class_tokens(&r->hedge_non_fatal, r->hedge_non_fatal_ptrs, r->n_hedge_non_fatal_tokens);
        r->class_limit_ptrs = t;
        r->class_limit_values = v;
        t += r->n_class_limit_tokens;
        v += r->n_class_limit_tokens;
        rfi_class_limits_view(r, tokens, values);
        memcpy(r->class_limit_ptrs, tokens, r->n_class_limit_tokens * sizeof *tokens);
        memcpy(r->class_limit_values, values, r->n_class_limit_tokens * sizeof *values);
        qsort(r->methods, r->n_methods, sizeof r->methods[0], compare_methods);
        for (size_t k = 0; k < r->n_methods; k++) r->method_ptrs[k] = r->methods[k];
        for (size_t k = 0; k < r->n_wait_headers; k++) r->wait_header_ptrs[k] = rf_wait_header_name(r->wait_headers[k]);
    }
    return RF_OK;
}

/* What the decision path reads instead of recomputing per call: the route's wait headers as a bit mask, the
 * methods' lengths and the retryable classes as masks. */
static void build_fast_fields(rfi_route *r) {
    rfi_class_retry_masks(r);
    r->wait_reads = 0;
    for (size_t k = 0; k < r->n_wait_headers; k++) r->wait_reads |= 1u << r->wait_headers[k];
    for (size_t k = 0; k < r->n_methods; k++) r->method_lens[k] = (uint8_t)strlen(r->methods[k]);
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

rf_status rfi_policy_finish(rf_policy *p, const struct rfi_lock_defaults *defaults, rf_error *err) {
    rf_status st = build_views(p, err);
    if (st != RF_OK) return st;
    for (size_t i = 0; i < p->n_routes; i++) build_fast_fields(&p->routes[i]);
    st = rfi_route_index_build(p, err);
    if (st != RF_OK) return st;
    qsort(p->gate.reason_ptrs, p->gate.view.n_forbid_reasons, sizeof p->gate.reason_ptrs[0], compare_strings);
    p->gate.view.forbid_reasons = p->gate.reason_ptrs;
    st = rfi_policy_canonical(p, defaults, err);
    if (st != RF_OK) return st;
    if (rf_policy_retry_budget(p, NULL, NULL) && (p->budget = rf_retry_budget_new(p)) == NULL)
        return rfi_report(err, RF_ENOMEM, "$.retryBudget", "out of memory while making the lock's retry budget");
    return RF_OK;
}

rf_retry_budget *rf_policy_default_budget(const rf_policy *p) { return p ? p->budget : NULL; }

void rf_policy_free(rf_policy *p) {
    if (p == NULL) return;
    free(p->routes);
    rfi_route_index_free(&p->index);
    free(p->view_tokens);
    free(p->view_values);
    cJSON_free(p->canonical);
    cJSON_free(p->pretty);
    rf_retry_budget_free(p->budget);
    free(p);
}

const char *rf_policy_digest(const rf_policy *p) { return p ? p->digest : NULL; }

bool rf_policy_transparent_retry(const rf_policy *p) { return p != NULL && p->transparent_retry; }
const char *rf_policy_canonical_json(const rf_policy *p) { return p ? p->canonical : NULL; }
const char *rf_policy_pretty_json(const rf_policy *p) { return p ? p->pretty : NULL; }
size_t rf_policy_route_count(const rf_policy *p) { return p ? p->n_routes : 0; }

rf_status rf_policy_route(const rf_policy *p, size_t i, rf_route_view *out) {
    if (p == NULL || out == NULL || i >= p->n_routes) return RF_EINVAL;
    const rfi_route *r = &p->routes[i];
    *out = (rf_route_view){
        .endpoint = r->endpoint.text,
        .method = r->endpoint.method,
        .pattern = r->endpoint.pattern,
        .max_attempts = (int)r->max_attempts,
        .per_attempt_timeout_ms = r->per_attempt_timeout_ms,
        .total_budget_ms = r->total_budget_ms,
        .min_attempt_ms = r->min_attempt_ms,
        .n_retryable = r->n_retryable_tokens,
        .retryable = r->retryable_ptrs,
        .n_not_retryable = r->n_not_retryable_tokens,
        .not_retryable = r->not_retryable_ptrs,
        .n_idempotency_required = r->n_methods,
        .idempotency_required = r->method_ptrs,
        .backoff_base_ms = r->backoff_base_ms,
        .backoff_multiplier_milli = r->backoff_multiplier_milli,
        .backoff_max_ms = r->backoff_max_ms,
        .backoff_jitter = r->jitter,
        .retry_after_honor = r->retry_after_honor,
        .retry_after_max_ms = r->retry_after_max_ms,
        .n_retry_after_headers = r->n_wait_headers,
        .retry_after_headers = r->wait_header_ptrs,
        .n_class_limits = r->n_class_limit_tokens,
        .class_limit_classes = r->class_limit_ptrs,
        .class_limit_values = r->class_limit_values,
        .hedging = r->has_hedging,
        .hedging_max_attempts = r->has_hedging ? (int)r->hedge_max_attempts : 0,
        .hedging_delay_ms = r->has_hedging ? r->hedge_delay_ms : 0,
        .n_hedging_non_fatal = r->has_hedging ? r->n_hedge_non_fatal_tokens : 0,
        .hedging_non_fatal = r->hedge_non_fatal_ptrs,
    };
    return RF_OK;
}

long rf_policy_match(const rf_policy *p, const char *method, size_t method_len, const char *path, size_t path_len) {
    if (p == NULL || method == NULL || path == NULL) return -1;
    return rfi_policy_match(p, method, method_len, path, path_len);
}

/* The route index finds the routes in play (rfi_route_index_next); what each does next is read off its pattern. */
int rf_policy_next_segment(const rf_policy *p, const char *method, size_t method_len, const char *prefix,
                           size_t prefix_len, size_t *cursor, rf_next_segment *out) {
    if (p == NULL || method == NULL || prefix == NULL || cursor == NULL || out == NULL) return -1;
    if (prefix_len == 0 || prefix[0] != '/' || prefix[prefix_len - 1] != '/' || memchr(prefix, '?', prefix_len) ||
        memchr(prefix, '#', prefix_len))
        return -1;
    size_t depth = 0;
    long i =
        *cursor < p->n_routes ? rfi_route_index_next(p, method, method_len, prefix, prefix_len, *cursor, &depth) : -1;
    if (i < 0) {
        *cursor = p->n_routes;
        return 0;
    }
    const rfi_endpoint *e = &p->routes[i].endpoint;
    *out = (rf_next_segment){.route = (size_t)i, .kind = RF_NEXT_REST, .literal = NULL, .literal_len = 0};
    if (depth < e->n_segments && e->seg_kind[depth] == RFI_SEG_PARAM) {
        out->kind = RF_NEXT_PARAM;
    } else if (depth < e->n_segments) {
        out->kind = RF_NEXT_LITERAL;
        out->literal = e->pattern + e->seg_off[depth];
        out->literal_len = e->seg_len[depth];
    } /* else its last "*" was reached on the way: it takes every longer path */
    *cursor = (size_t)i + 1;
    return 1;
}

bool rf_policy_gate(const rf_policy *p, rf_gate_view *out) {
    if (out == NULL) return false;
    if (p == NULL || !(p->has & RFI_BIT(RFI_F_GATE))) {
        memset(out, 0, sizeof *out);
        return false;
    }
    *out = p->gate.view;
    return true;
}

const char *rf_policy_retry_budget_shared(const rf_policy *p) {
    return p != NULL && (p->has & RFI_BIT(RFI_F_BUDGET_SHARED)) ? p->budget_shared_name : NULL;
}

bool rf_policy_retry_ratio(const rf_policy *p, int64_t *retry_ratio_milli, int64_t *min_retries_per_second,
                           int64_t *ttl_ms) {
    if (p == NULL || !(p->has & RFI_BIT(RFI_F_BUDGET_RETRY_RATIO))) return false;
    if (retry_ratio_milli) *retry_ratio_milli = p->budget_retry_ratio_milli;
    if (min_retries_per_second) *min_retries_per_second = p->budget_min_per_second;
    if (ttl_ms) *ttl_ms = p->budget_ttl_ms;
    return true;
}

bool rf_policy_retry_budget(const rf_policy *p, int64_t *max_tokens_milli, int64_t *token_ratio_milli) {
    if (p == NULL || !(p->has & RFI_BIT(RFI_F_RETRY_BUDGET))) return false;
    if (!(p->has & RFI_BIT(RFI_F_BUDGET_MAX_TOKENS))) { /* the ratio form (rf_policy_retry_ratio) */
        if (max_tokens_milli) *max_tokens_milli = 0;
        if (token_ratio_milli) *token_ratio_milli = 0;
        return true;
    }
    if (max_tokens_milli) *max_tokens_milli = p->budget_max_tokens * 1000;
    if (token_ratio_milli) *token_ratio_milli = p->budget_token_ratio_milli;
    return true;
}
