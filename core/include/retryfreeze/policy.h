/*
 * The lock and the policy. A lock is a JSON file (*.lock.json); loading validates it completely and yields
 * an immutable rf_policy, or an rf_error naming the JSON path, the rule and the offending value. A bad lock
 * never becomes a policy. The schema, every default and every refusal are documented in docs/lock.md.
 * A policy is immutable after load and safe to share across threads.
 */
#ifndef RETRYFREEZE_POLICY_H
#define RETRYFREEZE_POLICY_H

#include "retryfreeze/common.h"
#include "retryfreeze/vocabulary.h"
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest lock file accepted (1 MiB); larger input is refused before parsing. */
#define RF_LOCK_MAX_BYTES (1024 * 1024)

typedef struct rf_policy rf_policy;

/*
 * Loads a lock from text[0..len) (need not be NUL-terminated). A UTF-8 BOM at the start is accepted and
 * skipped (RFC 8259 §8.1 allows a parser to ignore it). Refused (RF_EINVAL, *out untouched): empty input,
 * more than RF_LOCK_MAX_BYTES, malformed JSON (err->line/column set), trailing non-whitespace after the
 * value, duplicate keys in one object, unknown keys, wrong types, non-integers where integers are required,
 * out-of-range or non-finite numbers, unknown class tokens, a class in both lists, malformed endpoints or
 * methods, duplicate endpoints, missing required fields (endpoint, maxAttempts, perAttemptTimeoutMs,
 * totalBudgetMs, retryable — an absent number never becomes a retry count).
 * On RF_OK *out owns a new policy: free it with rf_policy_free. RF_ENOMEM: allocation failed, nothing leaked.
 */
RF_API rf_status rf_policy_load_buffer(const char *text, size_t len, rf_policy **out, rf_error *err);

/*
 * Reads the file at path (at most RF_LOCK_MAX_BYTES) and loads it as rf_policy_load_buffer does.
 * RF_EIO when the file cannot be opened or read (err->path = the file, err->message = strerror).
 */
RF_API rf_status rf_policy_load_file(const char *path, rf_policy **out, rf_error *err);

/* Length of "sha256:" + 64 lowercase hex digits, the form of a digest (without the NUL). */
#define RF_SHA256_TEXT_LEN 71

/*
 * "sha256:<64 lowercase hex>" of data[0..len) into out (libcrypto's SHA-256, the digest's hash), for the
 * pairing log's entry hashes. RF_EINVAL on a NULL out (or NULL data with len > 0), RF_ENOMEM when libcrypto
 * fails.
 */
RF_API rf_status rf_sha256(const void *data, size_t len, char out[RF_SHA256_TEXT_LEN + 1]);

/* Frees a policy and every string and view it handed out; NULL is a no-op. Only after every user (thread, client,
 * rf_step) is done: they borrow it. A retry budget copies what it needs and may outlive it. */
RF_API void rf_policy_free(rf_policy *p);

/*
 * "sha256:<64 lowercase hex>" over rf_policy_canonical_json. Whitespace, key order, $comment and alias
 * spelling do not change it; any value that changes a decision does (docs/governance.md). Owned by the policy, valid
 * until rf_policy_free; NULL for a NULL policy.
 */
RF_API const char *rf_policy_digest(const rf_policy *p);

/*
 * The effective policy (defaults applied, aliases expanded, lists sorted, routes sorted by endpoint) as
 * compact canonical JSON (the digest's input) or indented for people. Both owned by the policy, valid until
 * rf_policy_free; NULL for a NULL policy.
 */
RF_API const char *rf_policy_canonical_json(const rf_policy *p);
RF_API const char *rf_policy_pretty_json(const rf_policy *p);

/* A read-only view of one route of the effective policy; all pointers are owned by the policy. */
typedef struct rf_route_view {
    const char *endpoint; /* "METHOD /pattern" */
    const char *method;
    const char *pattern;
    int max_attempts;               /* counting the first attempt, 1..10 */
    int64_t per_attempt_timeout_ms; /* 1..600000 */
    int64_t total_budget_ms;        /* per_attempt_timeout_ms..3600000 */
    int64_t min_attempt_ms;         /* never start an attempt with less time left */
    size_t n_retryable;
    const char *const *retryable; /* canonical class tokens, aliases expanded, sorted */
    size_t n_not_retryable;
    const char *const *not_retryable;
    size_t n_idempotency_required;
    const char *const *idempotency_required; /* methods whose retries need an idempotency key */
    int64_t backoff_base_ms;
    int64_t backoff_multiplier_milli; /* multiplier × 1000 (at most 3 decimal places in the lock) */
    int64_t backoff_max_ms;
    rf_jitter backoff_jitter;
    bool retry_after_honor;
    int64_t retry_after_max_ms;
    size_t n_retry_after_headers;
    const char *const *retry_after_headers; /* retryAfter.headers: lowercase names, in the route's order */
    size_t n_class_limits;
    const char *const *class_limit_classes; /* classLimits: canonical class tokens, sorted */
    const int *class_limit_values;          /* the limit of class_limit_classes[i], 1..max_attempts */
    bool hedging;                           /* the route hedges (lock field hedging, gRPC A6 hedgingPolicy) */
    int hedging_max_attempts;               /* hedging.maxAttempts, 2..max_attempts; 0 without hedging */
    int64_t hedging_delay_ms;               /* hedging.hedgingDelayMs, 1..600000; 0 without hedging */
    size_t n_hedging_non_fatal;
    const char *const *hedging_non_fatal; /* hedging.nonFatalClasses: canonical class tokens, sorted */
} rf_route_view;

/*
 * The lock's transparentRetry (default true): a retry of a request that never left (CONNECT_REFUSED,
 * PROXY_REFUSED, DNS_FAILURE, a TLS failure before any byte of the request) needs no idempotency key (see
 * rf_decide). False for NULL.
 */
RF_API bool rf_policy_transparent_retry(const rf_policy *p);

/* Number of routes (1 for a flat lock); 0 for NULL. */
RF_API size_t rf_policy_route_count(const rf_policy *p);

/* Fills the caller's *out for route i (0-based, in canonical order: sorted by endpoint). Every pointer in *out is
 * owned by the policy and valid until rf_policy_free. RF_EINVAL (no rf_error) when p or out is NULL or i is out of
 * range. */
RF_API rf_status rf_policy_route(const rf_policy *p, size_t i, rf_route_view *out);

/*
 * The route that decides method + path (path's query "?…" and fragment are ignored): the most specific
 * matching route — at the first differing segment a literal beats a {param}, a {param} beats a trailing
 * "*" segment (docs/lock.md). Methods compare exactly (case-sensitive, RFC 9110 §9.1). Returns its index, or -1
 * when no route matches (the decision is then "no-route") or an argument is NULL. No allocation.
 */
RF_API long rf_policy_match(const rf_policy *p, const char *method, size_t method_len, const char *path,
                            size_t path_len);

/*
 * The request space, for tools that reason over every request a lock can tell apart (retryfreeze.diff,
 * docs/governance.md "Request classes"). RF_OTHER_SEGMENT is a path segment no lock can name: it holds '<' and
 * '>', which a literal segment may not hold (docs/lock.md, Endpoints), and no '/', '?' or '#'; rf_policy_match
 * routes it where every non-empty segment that no route names at its position goes. RF_OTHER_METHOD is a method no
 * lock can name (a lock's methods are 1..16 uppercase letters): no route takes it.
 */
#define RF_OTHER_SEGMENT "<other>"
#define RF_OTHER_METHOD "<other>"

/* What a route does with the segment after a path prefix (rf_policy_next_segment). */
typedef enum rf_next_kind {
    RF_NEXT_LITERAL = 0, /* names a literal segment there */
    RF_NEXT_PARAM = 1,   /* a {param} there: any non-empty segment */
    RF_NEXT_REST = 2     /* its last "*" already takes every longer path, whatever its segments */
} rf_next_kind;

typedef struct rf_next_segment {
    size_t route;        /* the route's index (rf_policy_route) */
    rf_next_kind kind;   /* see above */
    const char *literal; /* RF_NEXT_LITERAL: the segment, literal_len bytes, not NUL-terminated, owned by the
                            policy; NULL otherwise */
    size_t literal_len;
} rf_next_segment;

/*
 * Iterates the routes of method that can match some path of more than k segments beginning with the k segments of
 * prefix, written each followed by '/' ("/" for none, "/a/" for "a", "//" for one empty segment; no '?' or '#').
 * A route's segments take the prefix's by the rule rf_policy_match applies (literal: the same bytes, {param}: any
 * non-empty segment, past a last "*": anything), so enumerating the literals these routes name next, plus
 * RF_OTHER_SEGMENT and the empty segment, partitions the paths by how every route treats them. *cursor is 0 on the
 * first call; each call advances it past the route it reports. Returns 1 with *out filled, 0 when no route is left,
 * -1 when an argument is NULL or prefix is malformed (it must start and end with '/' and hold no '?' or '#'). No
 * allocation.
 */
RF_API int rf_policy_next_segment(const rf_policy *p, const char *method, size_t method_len, const char *prefix,
                                  size_t prefix_len, size_t *cursor, rf_next_segment *out);

/*
 * The client-wide retry budget of the lock, if it has one (either form): true and, for a token bucket (gRPC A6
 * retryThrottling), its configuration in thousandths of a token into the out pointers that are not NULL (both 0 for
 * the ratio form: rf_policy_retry_ratio); false when the lock sets none (retries are then never throttled) or p is
 * NULL.
 */
RF_API bool rf_policy_retry_budget(const rf_policy *p, int64_t *max_tokens_milli, int64_t *token_ratio_milli);

/*
 * The lock's retry budget in its ratio form (retryBudget {retryRatio, minRetriesPerSecond, ttlMs}, docs/lock.md: in
 * the last ttl_ms, retries <= retryRatio × requests + minRetriesPerSecond × ttlMs / 1000): true and its retryRatio ×
 * 1000, minRetriesPerSecond and ttlMs into the out pointers that are not NULL; false for a token bucket, no budget, or
 * NULL.
 */
RF_API bool rf_policy_retry_ratio(const rf_policy *p, int64_t *retry_ratio_milli, int64_t *min_retries_per_second,
                                  int64_t *ttl_ms);

/*
 * The lock's retry budget as this policy keeps it (docs/lock.md, retryBudget): made when the policy is loaded, in this
 * process (a token bucket full, a ratio window empty), shared by every attempt loop of this policy that is given no
 * budget of its own (rf_step_after, rf_step_verdict; a client without rf_client_options.budget has one of its own), so
 * the lock's budget applies without asking. Thread-safe as any budget; NULL when the lock has no retryBudget (or p is
 * NULL). Owned by p: never freed by the caller; valid while p lives.
 */
typedef struct rf_retry_budget rf_retry_budget; /* retryfreeze/decide.h */
RF_API rf_retry_budget *rf_policy_default_budget(const rf_policy *p);

/* Longest retryBudget.shared.name. */
#define RF_SHARED_BUDGET_NAME_MAX 64

/*
 * The name of the fleet-wide bucket the lock's retry budget lives in (lock field retryBudget.shared.name,
 * docs/lock.md), or NULL when the budget is the process's own (or the lock has none). Valid while p lives.
 */
RF_API const char *rf_policy_retry_budget_shared(const rf_policy *p);

/*
 * The lock's optional "gate" object: thresholds `retryfreeze gate` and `soak` apply to ledger stats, kept in
 * the reviewed file beside the budget they judge. Ratios are × 1000 (3 decimal places in the lock); a
 * has_* flag is false for a threshold the lock does not set.
 */
typedef struct rf_gate_view {
    bool has_max_retried_success;
    int64_t max_retried_success_milli; /* maxRetriedSuccess 0..1: retried successes / successes */
    bool has_max_attempts_per_success;
    int64_t max_attempts_per_success_milli; /* maxAttemptsPerSuccess 1..10 */
    bool has_max_terminal_rate;
    int64_t max_terminal_rate_milli; /* maxTerminalRate 0..1: terminal outcomes / requests */
    bool has_max_retry_ratio;
    int64_t max_retry_ratio_milli; /* maxRetryRatio 0..10: retries / requests */
    bool has_min_success_rate;
    int64_t min_success_rate_milli; /* minSuccessRate 0..1: successes / requests below it is a breach */
    bool has_min_successes;
    int64_t min_successes; /* minSuccesses 0..1000000000: below it the gate is skipped */
    size_t n_forbid_reasons;
    const char *const *forbid_reasons; /* forbidReasons: verdict reasons no request may end with */
} rf_gate_view;

/* Fills *out and returns true when the lock has a gate object; false (and *out zeroed) otherwise. */
RF_API bool rf_policy_gate(const rf_policy *p, rf_gate_view *out);

#ifdef __cplusplus
}
#endif
#endif
