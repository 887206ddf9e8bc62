/* Private structures and cross-file helpers of the engine (prefix rfi_). Never installed. */
#ifndef RETRYFREEZE_INTERNAL_H
#define RETRYFREEZE_INTERNAL_H

#include "retryfreeze/decide.h"
#include "retryfreeze/policy.h"
#include <stdarg.h>

#define RFI_MAX_ENDPOINT 256
#define RFI_MAX_METHOD 16
#define RFI_MAX_SEGMENTS 20 /* 21 positions × 3 bits fit a uint64 specificity score */
#define RFI_MAX_METHODS 16
#define RFI_MAX_CLASSES 128
#define RFI_MAX_ROUTES 256

/* A set of failure classes: specific HTTP statuses, the 4XX/5XX families and the named classes. */
typedef struct rfi_class_set {
    uint64_t status[10]; /* bit s for status s, 0..639 */
    bool family4xx;
    bool family5xx;
    uint32_t named; /* bit per rf_named_class */
} rfi_class_set;

enum rfi_segment_kind { RFI_SEG_LITERAL = 3, RFI_SEG_PARAM = 2, RFI_SEG_WILDCARD = 1 };

/* A parsed endpoint "METHOD /a/{id}" with an optional last "*" segment. Segment texts point into pattern. */
typedef struct rfi_endpoint {
    char text[RFI_MAX_ENDPOINT + 1];
    char method[RFI_MAX_METHOD + 1];
    uint8_t method_len;
    char pattern[RFI_MAX_ENDPOINT + 1];
    uint16_t pattern_len;
    bool literal_only;      /* no {param} and no "*": matched by one comparison */
    uint64_t literal_score; /* its specificity score on an exact match */
    size_t n_segments;
    uint16_t seg_off[RFI_MAX_SEGMENTS];
    uint16_t seg_len[RFI_MAX_SEGMENTS];
    uint8_t seg_kind[RFI_MAX_SEGMENTS];
    bool wildcard; /* last segment is "*" */
} rfi_endpoint;

typedef struct rfi_route {
    rfi_endpoint endpoint;
    int max_attempts;
    int64_t per_attempt_timeout_ms;
    int64_t total_budget_ms;
    int64_t min_attempt_ms;
    rfi_class_set retryable;
    rfi_class_set not_retryable;
    size_t n_methods;
    char methods[RFI_MAX_METHODS][RFI_MAX_METHOD + 1];
    int64_t backoff_base_ms;
    int64_t backoff_multiplier_milli;
    int64_t backoff_max_ms;
    rf_jitter jitter;
    bool retry_after_honor;
    int64_t retry_after_max_ms;
    /* Views for rf_route_view, built at load. */
    size_t n_retryable_tokens, n_not_retryable_tokens;
    char retryable_tokens[RFI_MAX_CLASSES][RF_CLASS_NAME_MAX];
    char not_retryable_tokens[RFI_MAX_CLASSES][RF_CLASS_NAME_MAX];
    const char *retryable_ptrs[RFI_MAX_CLASSES];
    const char *not_retryable_ptrs[RFI_MAX_CLASSES];
    const char *method_ptrs[RFI_MAX_METHODS];
} rfi_route;

typedef struct rfi_gate {
    bool present;
    rf_gate_view view; /* forbid_reasons points at reason_ptrs */
    const char *reason_ptrs[RF_REASON_COUNT];
} rfi_gate;

struct rf_policy {
    rfi_gate gate;
    size_t n_routes;
    rfi_route *routes; /* sorted by endpoint text */
    bool has_retry_budget;
    int64_t budget_max_tokens_milli;
    int64_t budget_token_ratio_milli;
    char *canonical;
    char *pretty;
    char digest[7 + 64 + 1];
};

/* Writes "path: message" style errors into err (NULL-safe). Returns RF_EINVAL for convenience. */
rf_status rfi_fail(rf_error *err, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Failure classes (failure_class.c). */
/* Parses one class token (aliases expanded) and adds it to set. Returns false for an unknown token. */
bool rfi_class_add_token(rfi_class_set *set, const char *token, size_t len);
/* True when a and b share a member at the same level (a status in both, a family in both, a name in both). */
bool rfi_class_overlap(const rfi_class_set *a, const rfi_class_set *b, char first[RF_CLASS_NAME_MAX]);
/* Writes the set's canonical tokens (sorted: statuses, families, names) into tokens; returns the count. */
size_t rfi_class_tokens(const rfi_class_set *set, char tokens[][RF_CLASS_NAME_MAX], size_t cap);
/* Is (status, transport) retryable under the route's lists: a specific status in either list beats a family. */
bool rfi_class_retryable(const rfi_route *r, int status, rf_transport transport);

/* Endpoints (endpoint.c). */
/* Parses "METHOD /pattern"; on failure writes why into msg. */
bool rfi_endpoint_parse(const char *text, size_t len, rfi_endpoint *out, char *msg, size_t msg_cap);
/* Valid HTTP method token as this project accepts it: 1..16 uppercase ASCII letters. */
bool rfi_method_valid(const char *s, size_t len);
/* Does the endpoint match method+path? On a match, sets *score: higher is more specific (rf_policy_match). */
bool rfi_endpoint_match(const rfi_endpoint *e, const char *method, size_t method_len, const char *path, size_t path_len,
                        uint64_t *score);
/* Two endpoints that match exactly the same requests ("/a/{x}" and "/a/{y}"). */
bool rfi_endpoint_same_shape(const rfi_endpoint *a, const rfi_endpoint *b);

/* Backoff (backoff.c): the delay before the retry after attempt `attempts`; -1 when rng is needed but NULL. */
int64_t rfi_backoff(const rfi_route *r, int attempts, rf_rng *rng);

/* Retry budget internals (retry_budget.c). */
int64_t rfi_retry_budget_add(rf_retry_budget *b, int64_t delta_milli);
bool rfi_retry_budget_throttled(const rf_retry_budget *b, int64_t tokens_milli);
int64_t rfi_retry_budget_ratio(const rf_retry_budget *b);

/* Canonical form and digest (policy.c). */
rf_status rfi_policy_finish(rf_policy *p, rf_error *err);

#endif
