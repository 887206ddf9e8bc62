/*
 * The loaded policy: its canonical JSON (the effective policy, defaults applied), its sha256 digest through
 * OpenSSL's EVP API, and read-only accessors. Immutable after rf_policy_load_*.
 */
#include "internal.h"

#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cJSON *string_array(const char *const *items, size_t n) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a != NULL && i < n; i++) {
        cJSON *s = cJSON_CreateString(items[i]);
        if (s == NULL || !cJSON_AddItemToArray(a, s)) {
            cJSON_Delete(s);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

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
        n_tokens += r->n_retryable_tokens + r->n_not_retryable_tokens + r->n_class_limit_tokens;
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

/* What the decision path reads instead of recomputing per call: the route's wait headers as a bit mask and the
 * methods' lengths. */
static void build_fast_fields(rfi_route *r) {
    r->wait_reads = 0;
    for (size_t k = 0; k < r->n_wait_headers; k++) r->wait_reads |= 1u << r->wait_headers[k];
    for (size_t k = 0; k < r->n_methods; k++) r->method_lens[k] = (uint8_t)strlen(r->methods[k]);
}

/* retryAfter.headers and classLimits are left out of the canonical form (the digest's input) at their defaults,
 * so a lock written before they existed keeps its digest and its sign-offs; the pretty form shows them. */
static bool add_wait_headers(cJSON *ra, const rfi_route *r, bool full) {
    if (!full && rfi_wait_headers_is_default(r)) return true;
    cJSON *h = string_array(r->wait_header_ptrs, r->n_wait_headers);
    if (h != NULL && cJSON_AddItemToObject(ra, "headers", h)) return true;
    cJSON_Delete(h);
    return false;
}

static bool add_class_limits(cJSON *o, const rfi_route *r, bool full) {
    if (!full && r->n_class_limit_tokens == 0) return true;
    cJSON *limits = cJSON_AddObjectToObject(o, "classLimits");
    if (limits == NULL) return false;
    for (size_t i = 0; i < r->n_class_limit_tokens; i++)
        if (!cJSON_AddNumberToObject(limits, r->class_limit_ptrs[i], r->class_limit_values[i])) return false;
    return true;
}

/* Keys in sorted order so the canonical text does not depend on the lock's key order. */
static cJSON *route_json(const rfi_route *r, bool full) {
    cJSON *o = cJSON_CreateObject(), *backoff = cJSON_CreateObject(), *ra = cJSON_CreateObject();
    cJSON *idem = string_array(r->method_ptrs, r->n_methods);
    cJSON *not_retryable = string_array(r->not_retryable_ptrs, r->n_not_retryable_tokens);
    cJSON *retryable = string_array(r->retryable_ptrs, r->n_retryable_tokens);
    if (!o || !backoff || !ra || !idem || !not_retryable || !retryable) goto fail;
    if (!cJSON_AddNumberToObject(backoff, "baseMs", (double)r->backoff_base_ms) ||
        !cJSON_AddStringToObject(backoff, "jitter", rf_jitter_name(r->jitter)) ||
        !cJSON_AddNumberToObject(backoff, "maxMs", (double)r->backoff_max_ms) ||
        !cJSON_AddNumberToObject(backoff, "multiplier", (double)r->backoff_multiplier_milli / 1000.0) ||
        !add_wait_headers(ra, r, full) || !cJSON_AddBoolToObject(ra, "honor", r->retry_after_honor) ||
        !cJSON_AddNumberToObject(ra, "maxMs", (double)r->retry_after_max_ms))
        goto fail;
    if (!cJSON_AddItemToObject(o, "backoff", backoff)) goto fail;
    backoff = NULL;
    if (!add_class_limits(o, r, full)) goto fail;
    if (!cJSON_AddStringToObject(o, "endpoint", r->endpoint.text) ||
        !cJSON_AddItemToObject(o, "idempotencyRequired", idem))
        goto fail;
    idem = NULL;
    if (!cJSON_AddNumberToObject(o, "maxAttempts", r->max_attempts) ||
        !cJSON_AddNumberToObject(o, "minAttemptMs", (double)r->min_attempt_ms) ||
        !cJSON_AddItemToObject(o, "notRetryable", not_retryable))
        goto fail;
    not_retryable = NULL;
    if (!cJSON_AddNumberToObject(o, "perAttemptTimeoutMs", (double)r->per_attempt_timeout_ms)) goto fail;
    if (!cJSON_AddItemToObject(o, "retryAfter", ra)) goto fail;
    ra = NULL;
    if (!cJSON_AddItemToObject(o, "retryable", retryable)) goto fail;
    retryable = NULL;
    if (!cJSON_AddNumberToObject(o, "totalBudgetMs", (double)r->total_budget_ms)) goto fail;
    return o;
fail:
    cJSON_Delete(o);
    cJSON_Delete(backoff);
    cJSON_Delete(ra);
    cJSON_Delete(idem);
    cJSON_Delete(not_retryable);
    cJSON_Delete(retryable);
    return NULL;
}

static bool add_milli(cJSON *o, const char *key, bool has, int64_t milli) {
    return !has || cJSON_AddNumberToObject(o, key, (double)milli / 1000.0) != NULL;
}

/* The gate object in canonical form (sorted keys), or JSON null. */
static bool add_gate(cJSON *root, const rfi_gate *g) {
    if (!g->present) return cJSON_AddNullToObject(root, "gate") != NULL;
    const rf_gate_view *v = &g->view;
    cJSON *o = cJSON_AddObjectToObject(root, "gate");
    if (o == NULL) return false;
    cJSON *reasons = string_array(g->reason_ptrs, v->n_forbid_reasons);
    if (reasons == NULL || !cJSON_AddItemToObject(o, "forbidReasons", reasons)) {
        cJSON_Delete(reasons);
        return false;
    }
    return add_milli(o, "maxAttemptsPerSuccess", v->has_max_attempts_per_success, v->max_attempts_per_success_milli) &&
           add_milli(o, "maxRetriedSuccess", v->has_max_retried_success, v->max_retried_success_milli) &&
           add_milli(o, "maxRetryRatio", v->has_max_retry_ratio, v->max_retry_ratio_milli) &&
           add_milli(o, "maxTerminalRate", v->has_max_terminal_rate, v->max_terminal_rate_milli) &&
           add_milli(o, "minSuccessRate", v->has_min_success_rate, v->min_success_rate_milli) &&
           (!v->has_min_successes || cJSON_AddNumberToObject(o, "minSuccesses", (double)v->min_successes) != NULL);
}

static cJSON *policy_json(const rf_policy *p, bool full) {
    cJSON *root = cJSON_CreateObject(), *routes = cJSON_CreateArray();
    if (root == NULL || routes == NULL) goto fail;
    if (!add_gate(root, &p->gate)) goto fail;
    if (p->has_retry_budget) {
        cJSON *b = cJSON_AddObjectToObject(root, "retryBudget");
        if (b == NULL || !cJSON_AddNumberToObject(b, "maxTokens", (double)(p->budget_max_tokens_milli / 1000)) ||
            !cJSON_AddNumberToObject(b, "tokenRatio", (double)p->budget_token_ratio_milli / 1000.0))
            goto fail;
        if (p->budget_shared_name[0] != '\0') {
            cJSON *s = cJSON_AddObjectToObject(b, "shared");
            if (s == NULL || !cJSON_AddStringToObject(s, "name", p->budget_shared_name)) goto fail;
        }
    } else if (!cJSON_AddNullToObject(root, "retryBudget")) {
        goto fail;
    }
    for (size_t i = 0; i < p->n_routes; i++) {
        cJSON *r = route_json(&p->routes[i], full);
        if (r == NULL || !cJSON_AddItemToArray(routes, r)) {
            cJSON_Delete(r);
            goto fail;
        }
    }
    if (!cJSON_AddItemToObject(root, "routes", routes)) goto fail;
    routes = NULL;
    /* transparentRetry: left out of the canonical form at its default (true), so locks written before the field
     * keep their digest; the full (pretty) form always shows it. */
    if ((full || p->transparent_retry_off) &&
        !cJSON_AddBoolToObject(root, "transparentRetry", !p->transparent_retry_off))
        goto fail;
    if (!cJSON_AddNumberToObject(root, "version", 1)) goto fail;
    return root;
fail:
    cJSON_Delete(routes);
    cJSON_Delete(root);
    return NULL;
}

static bool sha256_hex_len(const void *data, size_t len, char out[65]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    if (!EVP_Digest(data, len, md, &md_len, EVP_sha256(), NULL) || md_len != 32) return false;
    for (unsigned i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
    return true;
}

static bool sha256_hex(const char *text, char out[65]) { return sha256_hex_len(text, strlen(text), out); }

rf_status rf_sha256(const void *data, size_t len, char out[RF_SHA256_TEXT_LEN + 1]) {
    char hex[65];
    if ((data == NULL && len > 0) || out == NULL) return RF_EINVAL;
    if (!sha256_hex_len(data == NULL ? "" : data, len, hex)) return RF_ENOMEM;
    snprintf(out, RF_SHA256_TEXT_LEN + 1, "sha256:%s", hex);
    return RF_OK;
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

rf_status rfi_policy_finish(rf_policy *p, rf_error *err) {
    rf_status st = build_views(p, err);
    if (st != RF_OK) return st;
    for (size_t i = 0; i < p->n_routes; i++) build_fast_fields(&p->routes[i]);
    st = rfi_route_index_build(p, err);
    if (st != RF_OK) return st;
    qsort(p->gate.reason_ptrs, p->gate.view.n_forbid_reasons, sizeof p->gate.reason_ptrs[0], compare_strings);
    cJSON *doc = policy_json(p, false);
    if (doc != NULL) {
        p->canonical = cJSON_PrintUnformatted(doc);
        cJSON_Delete(doc);
    }
    doc = policy_json(p, true);
    if (doc != NULL) {
        p->pretty = cJSON_Print(doc);
        cJSON_Delete(doc);
    }
    if (p->canonical == NULL || p->pretty == NULL) {
        rfi_fail(err, "$", "out of memory while building the canonical policy");
        return RF_ENOMEM;
    }
    char hex[65];
    if (!sha256_hex(p->canonical, hex)) {
        rfi_fail(err, "$", "SHA-256 failed (libcrypto)");
        return RF_ENOMEM;
    }
    snprintf(p->digest, sizeof p->digest, "sha256:%s", hex);
    return RF_OK;
}

void rf_policy_free(rf_policy *p) {
    if (p == NULL) return;
    free(p->routes);
    rfi_route_index_free(&p->index);
    free(p->view_tokens);
    free(p->view_values);
    cJSON_free(p->canonical);
    cJSON_free(p->pretty);
    free(p);
}

const char *rf_policy_digest(const rf_policy *p) { return p ? p->digest : NULL; }

bool rf_policy_transparent_retry(const rf_policy *p) { return p != NULL && !p->transparent_retry_off; }
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
        .max_attempts = r->max_attempts,
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
    if (p == NULL || !p->gate.present) {
        memset(out, 0, sizeof *out);
        return false;
    }
    *out = p->gate.view;
    return true;
}

const char *rf_policy_retry_budget_shared(const rf_policy *p) {
    return p != NULL && p->has_retry_budget && p->budget_shared_name[0] != '\0' ? p->budget_shared_name : NULL;
}

bool rf_policy_retry_budget(const rf_policy *p, int64_t *max_tokens_milli, int64_t *token_ratio_milli) {
    if (p == NULL || !p->has_retry_budget) return false;
    if (max_tokens_milli) *max_tokens_milli = p->budget_max_tokens_milli;
    if (token_ratio_milli) *token_ratio_milli = p->budget_token_ratio_milli;
    return true;
}
