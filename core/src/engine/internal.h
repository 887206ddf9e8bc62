/* Private structures and cross-file helpers of the engine (prefix rfi_). Never installed. */

#ifndef RETRYFREEZE_INTERNAL_H
#define RETRYFREEZE_INTERNAL_H

#include "retryfreeze/decide.h"
#include "retryfreeze/policy.h"
#include "retryfreeze/propagation.h"
#include "../util/json_path.h"
#include "../util/json_text.h"
#include "../util/report.h"
#include "../util/suggest.h"
#include "route_index.h"
#include <stdarg.h>
#include <sys/types.h>
#include <string.h>

/* For the decision path: keep a rare branch's code out of its caller (a smaller prologue for the common case),
 * inline a small helper the compiler would call, or lay out the common case of a test first. */
#if defined(__GNUC__)
#define RFI_NOINLINE __attribute__((noinline))
#define RFI_INLINE inline __attribute__((always_inline))
#define RFI_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define RFI_NOINLINE
#define RFI_INLINE inline
#define RFI_UNLIKELY(x) (x)
#endif

struct cJSON; /* lock parsing helpers take cJSON nodes; the decision path never sees them */

#define RFI_MAX_ENDPOINT 256
#define RFI_MAX_METHOD 16
#define RFI_MAX_SEGMENTS 20 /* a pattern's segments: the route index is at most this deep */
#define RFI_MAX_METHODS 16
#define RFI_MAX_CLASSES 128
#define RFI_MAX_ROUTES 10000 /* matched through the route index (route_index.c), whatever their number */

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
    size_t n_segments;
    uint16_t seg_off[RFI_MAX_SEGMENTS];
    uint16_t seg_len[RFI_MAX_SEGMENTS];
    uint8_t seg_kind[RFI_MAX_SEGMENTS];
    bool wildcard; /* last segment is "*" */
} rfi_endpoint;

/* A route's propagation (lock field propagation, propagation.c): `on` is set by the loader with the object (or
 * inherited from defaults'), the rest are its subfields, defaults applied; header names are kept lowercase. */
typedef struct rfi_propagation {
    bool on;
    char attempt_header[RF_PROPAGATION_HEADER_MAX + 1];
    char deadline_header[RF_PROPAGATION_HEADER_MAX + 1];
    char overloaded_header[RF_PROPAGATION_HEADER_MAX + 1];
    bool inbound_deadline;
    bool inbound_attempt;
} rfi_propagation;

typedef struct rfi_route {
    rfi_endpoint endpoint;
    int64_t max_attempts;
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
    /* retryAfter.headers: the wait headers read, in order (wait_hints.c). */
    size_t n_wait_headers;
    rf_wait_header wait_headers[RF_WAIT_HEADER_COUNT];
    /* Derived at load for the decision path (policy.c): bit h set when the route reads wait header h, and the
     * length of each idempotencyRequired method. */
    uint32_t wait_reads;
    uint8_t method_lens[RFI_MAX_METHODS];
    /* And the retryable lists as rfi_class_retryable reads them (rfi_class_retry_masks): bit s for a status s of
     * 100..599 whose failure is retryable (a specific status in either list beats its family), and the named classes
     * that are (never TOO_MANY_REDIRECTS). */
    uint64_t retry_status[10];
    uint32_t retry_named;
    /* classLimits (class_limits.c): attempts after which a failure of the class stops; 0 = no limit. */
    bool has_class_limits;
    uint8_t class_limit_status[600];
    uint8_t class_limit_4xx, class_limit_5xx;
    uint8_t class_limit_named[RF_NAMED_CLASS_COUNT];
    /* hedging (gRPC A6 hedgingPolicy, hedge.c): these members, in this order, are the object's value (lock_schema.c);
     * has_hedging is false when the route does not hedge. */
    bool has_hedging;
    int64_t hedge_max_attempts;
    int64_t hedge_delay_ms;
    rfi_class_set hedge_non_fatal;
    rfi_propagation prop;
    /* Views for rf_route_view, built at load (policy.c). The class lists lie in the policy's view block (sized to
     * fit: a lock may hold RFI_MAX_ROUTES routes) and name static strings (rfi_class_tokens). */
    size_t n_retryable_tokens, n_not_retryable_tokens, n_class_limit_tokens, n_hedge_non_fatal_tokens;
    const char **retryable_ptrs;
    const char **not_retryable_ptrs;
    const char **hedge_non_fatal_ptrs;
    const char **class_limit_ptrs; /* sorted by strcmp */
    int *class_limit_values;       /* class_limit_values[i]: the limit of class_limit_ptrs[i] */
    const char *method_ptrs[RFI_MAX_METHODS];
    const char *wait_header_ptrs[RF_WAIT_HEADER_COUNT];
} rfi_route;

typedef struct rfi_gate {
    rf_gate_view view; /* forbid_reasons points at reason_ptrs */
    const char *reason_ptrs[RF_REASON_COUNT];
} rfi_gate;

/* The lock's own fields (lock_schema.c says which member holds which field). */
struct rf_policy {
    uint64_t has; /* the lock's fields it sets (or defaults): bit per rfi_field_id (lock_schema.h) */
    rfi_gate gate;
    size_t n_routes;
    rfi_route *routes;        /* sorted by endpoint text */
    rfi_route_index index;    /* built from routes at load (route_index.c) */
    const char **view_tokens; /* the routes' class lists (rfi_route's *_ptrs point into it) */
    int *view_values;         /* the routes' class limits' values */
    int64_t version;
    bool transparent_retry; /* transparentRetry */
    int64_t budget_max_tokens;
    int64_t budget_token_ratio_milli;
    /* retryBudget's ratio form (retry_budget.c): retryRatio × 1000, minRetriesPerSecond, ttlMs. */
    int64_t budget_retry_ratio_milli;
    int64_t budget_min_per_second;
    int64_t budget_ttl_ms;
    char budget_shared_name[RF_SHARED_BUDGET_NAME_MAX + 1]; /* retryBudget.shared.name, "" when absent */
    char *canonical;
    char *pretty;
    char digest[7 + 64 + 1];
    rf_retry_budget
        *budget; /* the lock's budget for loops given none (rf_policy_default_budget); NULL: no retryBudget */
};

/* A verdict that stops: no retry, no wait, no next attempt (rf_decide, rf_redirect_verdict). Returns v. */
static inline rf_verdict *rfi_stop(rf_verdict *v, rf_reason reason) {
    v->retry = false;
    v->reason = reason;
    v->delay_ms = 0;
    v->timeout_ms = 0;
    return v;
}

/* "a FIFO", "a directory", "a character device", …: what a file that is not regular is, in words, for the
 * refusals of input and output files (input_file.c, output_file.c). */
const char *rfi_file_kind(mode_t mode);

/* The names of an X-macro list of vocabulary.h joined by ", ", as the refusals that name them list them
 * (vocabulary.c): "none, full, equal, decorrelated". */
#define RFI_NAMES_TEXT_MAX 200
void rfi_jitter_names_text(char *buf, size_t cap);
void rfi_wait_header_names_text(char *buf, size_t cap);

/* Failure classes (failure_class.c). */
/* Parses one class token (aliases expanded) and adds it to set. Returns false for an unknown token. */
bool rfi_class_add_token(rfi_class_set *set, const char *token, size_t len);
/* The class tokens a lock may write, as refusals list them: "HTTP_<100..599>, HTTP_4XX, HTTP_5XX, TIMEOUT, …, or the
 * aliases GATEWAY_TIMEOUT, HANDLER_5XX" (from RF_NAMED_CLASSES and RF_CLASS_ALIASES). */
#define RFI_CLASS_LIST_TEXT_MAX 800
void rfi_class_list_text(char *buf, size_t cap);
/* Refuses token at path as an unknown failure class: the closest class, if any, and the list of them all. */
void rfi_class_unknown(rf_error *err, const char *path, const char *token);
/* True when a and b share a member at the same level (a status in both, a family in both, a name in both). */
bool rfi_class_overlap(const rfi_class_set *a, const rfi_class_set *b, char first[RF_CLASS_NAME_MAX]);
/* How many tokens the set has (what rfi_class_tokens returns), counted without listing them. */
size_t rfi_class_count(const rfi_class_set *set);
/* Points tokens[0..cap) at the set's canonical tokens (sorted: statuses, families, names), static strings; returns
 * how many the set has (more than cap: the rest are left out). */
size_t rfi_class_tokens(const rfi_class_set *set, const char **tokens, size_t cap);
/* The canonical token of status 100..599 ("HTTP_503") and of named class i ("TIMEOUT"): static strings. */
const char *rfi_status_token(int status);
const char *rfi_named_token(unsigned named);

/* Each transport outcome's named class index, RF_NAMED_CLASS_COUNT for ok (failure_class.c), and the named
 * classes' tokens padded to RF_CLASS_NAME_MAX, so that a copy is of a constant size. */
extern const unsigned char rfi_transport_classes[RF_TRANSPORT_COUNT];
extern const char rfi_named_padded[RF_NAMED_CLASS_COUNT][RF_CLASS_NAME_MAX];
/* The canonical token of each status 100..599 ("HTTP_503", 8 bytes and a NUL), at [status - 100]. */
extern const char *const rfi_status_tokens[500];

/* Transport outcome → named class index; RF_NAMED_CLASS_COUNT for ok (then the status decides). */
static inline unsigned rfi_transport_class(rf_transport t) {
    return (unsigned)t < RF_TRANSPORT_COUNT ? rfi_transport_classes[t] : RF_CLASS_UNKNOWN;
}

/* The named class of the facts (transport, grpc_status 0..RF_GRPC_STATUS_MAX): the transport's, else GRPC_<name> for
 * a grpc-status 1..16, else RF_NAMED_CLASS_COUNT (the HTTP status decides). */
static inline unsigned rfi_fact_class(rf_transport t, int grpc_status) {
    unsigned named = rfi_transport_class(t);
    if (named == RF_NAMED_CLASS_COUNT && grpc_status > 0 && grpc_status <= RF_GRPC_STATUS_MAX)
        named = RF_CLASS_GRPC_CANCELLED + (unsigned)grpc_status - 1u;
    return named;
}

/* rf_classify_grpc, inline for the decision path (decide.c): copied from the tokens, since snprintf costs more than
 * the whole decision. */
static inline void rfi_classify(int status, rf_transport transport, int grpc_status, char buf[RF_CLASS_NAME_MAX]) {
    unsigned named = rfi_fact_class(transport, grpc_status);
    if (named == RF_NAMED_CLASS_COUNT && status >= 100 && status <= 599) {
        memcpy(buf, rfi_status_tokens[status - 100], sizeof "HTTP_503");
        return;
    }
    if (named == RF_NAMED_CLASS_COUNT) named = RF_CLASS_UNKNOWN;
    memcpy(buf, rfi_named_padded[named], RF_CLASS_NAME_MAX);
}

/* Fills r's retry_status and retry_named from its retryable and notRetryable lists (at load, policy.c). */
void rfi_class_retry_masks(rfi_route *r);

/* Is (status, transport) retryable under the route's lists: a specific status in either list beats a family; a
 * redirect loop never is (the same chain again would loop again). Two table reads (rfi_class_retry_masks). */
static inline bool rfi_class_retryable(const rfi_route *r, int status, rf_transport transport, int grpc_status) {
    unsigned named = rfi_fact_class(transport, grpc_status);
    if (named == RF_NAMED_CLASS_COUNT) {
        if ((unsigned)status - 100u <= 499u) return (r->retry_status[status / 64] >> (status % 64)) & 1u;
        named = RF_CLASS_UNKNOWN;
    }
    return (r->retry_named >> named) & 1u;
}

/* Class limits (class_limits.c). */
/* Parses the lock's classLimits object at path into r; each limit in f's range (its schema row's min..max; maxAttempts
 * is checked by rfi_class_limits_check). */
struct rfi_field;
bool rfi_class_limits_parse(const struct cJSON *obj, const char *path, const struct rfi_field *f, rfi_route *r,
                            rf_error *err);
/* Refuses a limit over the route's maxAttempts; where is the route's JSON path. */
bool rfi_class_limits_check(const rfi_route *r, const char *where, rf_error *err);
/* The route's limits as tokens (static strings, sorted by strcmp) and values, into arrays of RFI_MAX_CLASSES;
 * returns the count. */
size_t rfi_class_limits_view(const rfi_route *r, const char **tokens, int *values);
/* The limit for (status, transport) on route r, 0 when none: a specific status beats its family. */
int rfi_class_limit(const rfi_route *r, int status, rf_transport transport, int grpc_status);

/* Wait headers on the decision path (wait_hints.c). */
/*
 * Refuses a hint the route does not read (err names "hints.<name>"), and a Retry-After given both as
 * facts.retry_after and as hints[retry-after]. present is rfi_wait_hints_present(f). Sets *first_present to the
 * first listed header with a value, or -1 (present 0: nothing to check, so the decision path does not call it).
 */
rf_status rfi_wait_hints_check(const rfi_route *r, const rf_facts *f, uint32_t present, int *first_present,
                               rf_error *err);
/* Bit h set when the facts carry a value for wait header h (retry_after counts as RF_WAIT_RETRY_AFTER). Inline for
 * the decision path: the common case, no hints at all, costs one OR per header and one branch (unrolled). */
static inline uint32_t rfi_wait_hints_present(const rf_facts *f) {
    uint32_t present = f->retry_after != NULL ? 1u << RF_WAIT_RETRY_AFTER : 0;
    uintptr_t any = 0;
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 8
#endif
    for (unsigned h = 0; h < RF_WAIT_HEADER_COUNT; h++) any |= (uintptr_t)f->hints[h];
    if (any == 0) return present;
    for (unsigned h = 0; h < RF_WAIT_HEADER_COUNT; h++)
        if (f->hints[h] != NULL) present |= 1u << h;
    return present;
}
/* What the route's wait headers say: the first present and valid one wins. */
typedef struct rfi_wait {
    int header;                   /* rf_wait_header that decided, or -1 when none was present */
    rf_retry_after_status status; /* ABSENT (none present), OK, TOO_LONG, STOP, or INVALID/NO_CLOCK of the first */
    int64_t delay_ms;             /* on OK */
} rfi_wait;
void rfi_wait_read(const rfi_route *r, const rf_facts *f, rfi_wait *out);

/* Propagation (propagation.c). */
/* Refuses a route whose propagation names one header for two purposes (once inherited); where is its JSON path. */
bool rfi_propagation_check(const rfi_route *r, const char *where, rf_error *err);

/* Endpoints (endpoint.c). */
/* Parses "METHOD /pattern"; on failure writes why into msg. */
bool rfi_endpoint_parse(const char *text, size_t len, rfi_endpoint *out, char *msg, size_t msg_cap);
/* Valid HTTP method token as this project accepts it: 1..16 uppercase ASCII letters (so never RF_OTHER_METHOD). */
bool rfi_method_valid(const char *s, size_t len);
/* The order of endpoint shapes: 0 for two endpoints that match exactly the same requests ("/a/{x}" and "/a/{y}"),
 * else the sign of a total order (method, then segments, then a last "*"), so that sorting finds every pair. */
int rfi_endpoint_shape_compare(const rfi_endpoint *a, const rfi_endpoint *b);
/* A hash of the shape: equal for endpoints rfi_endpoint_shape_compare calls equal. */
uint64_t rfi_endpoint_shape_hash(const rfi_endpoint *e);

/* Backoff (backoff.c): the delay before the retry after attempt `attempts`; -1 when rng is needed but NULL. */
int64_t rfi_backoff(const rfi_route *r, int attempts, rf_rng *rng);

/* Retry budget internals (retry_budget.c). */
int64_t rfi_retry_budget_add(rf_retry_budget *b, int64_t delta_milli, rf_budget_source *source);
bool rfi_retry_budget_throttled(const rf_retry_budget *b, int64_t tokens_milli);
int64_t rfi_retry_budget_ratio(const rf_retry_budget *b);
/* Whether b is a ratio budget (retryBudget's ratio form); false for a token bucket, an inert or NULL budget. */
bool rfi_retry_budget_is_ratio(const rf_retry_budget *b);
/*
 * A ratio budget's part of one decision of a request, at mono_ms (0: unknown, the newest slot seen): the request is
 * counted in the window when its token is not yet counted (then it is marked: a request counts once, whichever
 * decision comes first), retry asks for one retry. Returns whether the retry is allowed (true when none was asked); a
 * refused retry is not counted. The shared store decides when there is one, else (or when it does not answer) the
 * local window; *source says which. The callers check that request is not NULL (RF_EINVAL before any effect).
 */
bool rfi_retry_budget_window_take(rf_retry_budget *b, rf_budget_request *request, bool retry, int64_t mono_ms,
                                  rf_budget_source *source);
/* Whether the class of (status, transport) is one of route r's hedging.nonFatalClasses (a specific status beats
 * its family, as in the retryable lists). */
bool rfi_hedge_non_fatal(const rfi_route *r, int status, rf_transport transport, int grpc_status);
/* Whether method (len bytes) is in route r's idempotencyRequired. */
bool rfi_method_requires_key(const rfi_route *r, const char *method, size_t len);

/* The route index (route_index.c). */
/* Builds p->index from p->routes (sorted, shapes distinct) in the policy's memory; RF_ENOMEM with err set. */
rf_status rfi_route_index_build(rf_policy *p, rf_error *err);
/* Frees what rfi_route_index_build allocated; the index is left empty. */
void rfi_route_index_free(rfi_route_index *ix);
/* rf_policy_match without the NULL checks, for rf_decide and rf_budget (p, method and path are not NULL). */
long rfi_policy_match(const rf_policy *p, const char *method, size_t method_len, const char *path, size_t path_len);
/* rf_policy_next_segment's next route: the smallest index >= from of a route of method that can match a path of
 * more than k segments beginning with the k segments of prefix (a prefix rf_policy_next_segment checked), or -1;
 * *depth receives k. */
long rfi_route_index_next(const rf_policy *p, const char *method, size_t method_len, const char *prefix,
                          size_t prefix_len, size_t from, size_t *depth);

/* The views, the decision path's derived fields (policy.c), then the canonical form and the digest
 * (lock_canonical.c); defaults: the lock's defaults it was loaded with (struct rfi_lock_defaults, lock_schema.h). */
struct rfi_lock_defaults;
rf_status rfi_policy_finish(rf_policy *p, const struct rfi_lock_defaults *defaults, rf_error *err);

#endif
