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

/* Builds the per-route token views (sorted canonical lists). */
static void build_views(rfi_route *r) {
    r->n_retryable_tokens = rfi_class_tokens(&r->retryable, r->retryable_tokens, RFI_MAX_CLASSES);
    r->n_not_retryable_tokens = rfi_class_tokens(&r->not_retryable, r->not_retryable_tokens, RFI_MAX_CLASSES);
    for (size_t i = 0; i < r->n_retryable_tokens; i++) r->retryable_ptrs[i] = r->retryable_tokens[i];
    for (size_t i = 0; i < r->n_not_retryable_tokens; i++) r->not_retryable_ptrs[i] = r->not_retryable_tokens[i];
    qsort(r->methods, r->n_methods, sizeof r->methods[0], compare_methods);
    for (size_t i = 0; i < r->n_methods; i++) r->method_ptrs[i] = r->methods[i];
    for (size_t i = 0; i < r->n_wait_headers; i++) r->wait_header_ptrs[i] = rf_wait_header_name(r->wait_headers[i]);
    rfi_class_limits_view(r);
}

/* What the decision path reads instead of recomputing per call: the route's wait headers as a bit mask, the
 * methods' lengths, and the compact route key rfi_policy_match scans. */
static void build_fast_fields(rf_policy *p, size_t i) {
    rfi_route *r = &p->routes[i];
    r->wait_reads = 0;
    for (size_t k = 0; k < r->n_wait_headers; k++) r->wait_reads |= 1u << r->wait_headers[k];
    for (size_t k = 0; k < r->n_methods; k++) r->method_lens[k] = (uint8_t)strlen(r->methods[k]);
    p->route_keys[i] = (rfi_route_key){.pattern_len = r->endpoint.pattern_len,
                                       .method_len = r->endpoint.method_len,
                                       .literal_only = r->endpoint.literal_only};
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

rf_status rfi_policy_finish(rf_policy *p, const struct rfi_lock_defaults *defaults, rf_error *err) {
    for (size_t i = 0; i < p->n_routes; i++) {
        build_views(&p->routes[i]);
        build_fast_fields(p, i);
    }
    qsort(p->gate.reason_ptrs, p->gate.view.n_forbid_reasons, sizeof p->gate.reason_ptrs[0], compare_strings);
    p->gate.view.forbid_reasons = p->gate.reason_ptrs;
    return rfi_policy_canonical(p, defaults, err);
}

void rf_policy_free(rf_policy *p) {
    if (p == NULL) return;
    free(p->routes);
    cJSON_free(p->canonical);
    cJSON_free(p->pretty);
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
    };
    return RF_OK;
}

static uint64_t load8(const char *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint32_t load4(const char *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Equal bytes, for the short strings of route matching (a call to memcmp costs more than these compares): whole
 * words, the last word overlapping the one before it. */
static RFI_INLINE bool same_bytes(const char *a, const char *b, size_t n) {
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8)
            if (load8(a + i) != load8(b + i)) return false;
        return load8(a + n - 8) == load8(b + n - 8);
    }
    if (n >= 4) return load4(a) == load4(b) && load4(a + n - 4) == load4(b + n - 4);
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return false;
    return true;
}

/* The length of path before any '?' or '#' (query and fragment do not route). */
static size_t routed_len(const char *path, size_t len) {
    size_t n = 0;
    while (n < len && path[n] != '?' && path[n] != '#') n++;
    return n;
}

/* Does the all-literal route i match? The path starts with its pattern and ends there or continues with '?' or '#'
 * (a pattern holds neither), so no scan of the path is needed. */
static RFI_INLINE bool literal_match(const rf_policy *p, size_t i, const char *method, size_t method_len,
                                     const char *path, size_t path_len) {
    const size_t n = p->route_keys[i].pattern_len;
    const rfi_endpoint *e = &p->routes[i].endpoint;
    return path_len >= n && (path_len == n || path[n] == '?' || path[n] == '#') && same_bytes(e->pattern, path, n) &&
           same_bytes(e->method, method, method_len);
}

/* rfi_policy_match from route `from` on, once a route with a {param} or "*" has the method's length. */
static RFI_NOINLINE long match_from(const rf_policy *p, size_t from, const char *method, size_t method_len,
                                    const char *path, size_t path_len) {
    const size_t cut = routed_len(path, path_len);
    long best = -1;
    uint64_t best_score = 0, score = 0;
    for (size_t i = from; i < p->n_routes; i++) {
        const rfi_route_key *k = &p->route_keys[i];
        if (k->method_len != method_len) continue;
        if (k->literal_only) {
            if (literal_match(p, i, method, method_len, path, path_len)) return (long)i;
            continue;
        }
        if (cut == 0 || path[0] != '/' ||
            !rfi_endpoint_match(&p->routes[i].endpoint, method, method_len, path, cut, &score))
            continue;
        if (best < 0 || score > best_score) {
            best = (long)i;
            best_score = score;
        }
    }
    return best;
}

/*
 * Each route's compact key rejects on the method length before any byte is compared. An all-literal route that
 * matches is the most specific match there can be (a literal segment outranks a {param} and a "*", and endpoints
 * of the same shape are refused at load), so it ends the search. Otherwise the highest score wins, the first route
 * on a tie. The loop here handles the all-literal routes of a lock (the common case); match_from takes over at the
 * first route with a pattern.
 */
long rfi_policy_match(const rf_policy *p, const char *method, size_t method_len, const char *path, size_t path_len) {
    for (size_t i = 0; i < p->n_routes; i++) {
        const rfi_route_key *k = &p->route_keys[i];
        if (k->method_len != method_len) continue;
        if (!k->literal_only) return match_from(p, i, method, method_len, path, path_len);
        if (literal_match(p, i, method, method_len, path, path_len)) return (long)i;
    }
    return -1;
}

long rf_policy_match(const rf_policy *p, const char *method, size_t method_len, const char *path, size_t path_len) {
    if (p == NULL || method == NULL || path == NULL) return -1;
    return rfi_policy_match(p, method, method_len, path, path_len);
}

/* A route index could answer this without visiting every route; the loop is the reference. */
int rf_policy_next_segment(const rf_policy *p, const char *method, size_t method_len, const char *prefix,
                           size_t prefix_len, size_t *cursor, rf_next_segment *out) {
    if (p == NULL || method == NULL || prefix == NULL || cursor == NULL || out == NULL) return -1;
    if (prefix_len == 0 || prefix[0] != '/' || prefix[prefix_len - 1] != '/' || memchr(prefix, '?', prefix_len) ||
        memchr(prefix, '#', prefix_len))
        return -1;
    for (size_t i = *cursor; i < p->n_routes; i++) {
        const char *literal = NULL;
        size_t literal_len = 0;
        int kind =
            rfi_endpoint_next(&p->routes[i].endpoint, method, method_len, prefix, prefix_len, &literal, &literal_len);
        if (kind < 0) continue;
        *out =
            (rf_next_segment){.route = i, .kind = (rf_next_kind)kind, .literal = literal, .literal_len = literal_len};
        *cursor = i + 1;
        return 1;
    }
    *cursor = p->n_routes;
    return 0;
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

bool rf_policy_retry_budget(const rf_policy *p, int64_t *max_tokens_milli, int64_t *token_ratio_milli) {
    if (p == NULL || !(p->has & RFI_BIT(RFI_F_RETRY_BUDGET))) return false;
    if (max_tokens_milli) *max_tokens_milli = p->budget_max_tokens * 1000;
    if (token_ratio_milli) *token_ratio_milli = p->budget_token_ratio_milli;
    return true;
}
