/*
 * The decision: from a policy and the transport facts of one finished attempt, retry or stop, with a stable
 * reason, the delay before the next attempt and its per-try timeout. Also the attempt budget asked before
 * each attempt, the classifier, the seeded jitter RNG and the client-wide retry budget (token bucket).
 * Nothing here allocates, reads a clock or does I/O; the policy is only read.
 */
#ifndef RETRYFREEZE_DECIDE_H
#define RETRYFREEZE_DECIDE_H

#include "retryfreeze/common.h"
#include "retryfreeze/policy.h"
#include "retryfreeze/retry_after.h"
#include "retryfreeze/vocabulary.h"
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest failure class token ("TOO_MANY_REDIRECTS") plus NUL, rounded up. */
#define RF_CLASS_NAME_MAX 24

/* A seeded pseudo-random generator for jitter (xoshiro256**, seeded through splitmix64). Caller-owned, plain
 * data: the same seed gives the same sequence on every platform. Not thread-safe: one per thread or client. */
typedef struct rf_rng {
    uint64_t s[4];
} rf_rng;

/* Seeds the caller's *rng from a 64-bit seed (splitmix64); NULL is a no-op. */
RF_API void rf_rng_seed(rf_rng *rng, uint64_t seed);
/* The next 64 random bits (xoshiro256**). rng must be seeded and not NULL. */
RF_API uint64_t rf_rng_next(rf_rng *rng);
/* A uniform integer in [lo, hi] (inclusive, unbiased: Lemire's multiply-shift with rejection); lo when hi <= lo or
 * rng is NULL. */
RF_API int64_t rf_rng_between(rf_rng *rng, int64_t lo, int64_t hi);

/*
 * Transport facts of the attempt that just finished. Strings are (pointer, length), not NUL-terminated; a NULL
 * pointer means absent. An empty string (non-NULL, length 0) fails closed: method and path are refused
 * (RF_EINVAL); a source is unpinned; an empty wait header (retry_after, hints) is present and asks for no wait,
 * except grpc-retry-pushback-ms, which stops (rf_wait_header_parse); an empty date is no reference, as an
 * unparsable one. The engine never sees a body.
 */
typedef struct rf_facts {
    const char *method; /* "POST"; required, uppercase (a lowercase letter: RF_EINVAL, RFC 9110 §9.1) */
    size_t method_len;
    const char *path; /* "/v1/jobs/7?x=1"; required; query and fragment are ignored for routing */
    size_t path_len;
    int status;              /* HTTP status 100..599, or 0 when none was received */
    rf_transport transport;  /* RF_TRANSPORT_OK when the exchange completed */
    const char *retry_after; /* raw Retry-After field value (RFC 9110 §10.2.3), optional */
    size_t retry_after_len;
    const char *date; /* raw Date field value of the response, optional; makes HTTP-date delays skew-immune */
    size_t date_len;
    int attempts;             /* attempts made so far, including this one: >= 1 */
    int64_t elapsed_ms;       /* since the first attempt started (CLOCK_MONOTONIC), >= 0 */
    bool has_idempotency_key; /* the request carries an Idempotency-Key */
    const char *source;       /* where the policy came from: NULL (absent) or exactly "pinned-map"; any other
                                 source, an empty one (length 0) included, gives unpinned-source */
    size_t source_len;
    int64_t now_ms; /* wall clock, Unix ms, for an HTTP-date Retry-After without a Date header; 0 = unknown */
    bool not_sent;  /* the transport knows no byte of the request was sent (libcurl's request size 0): makes a
                       TLS_FAILURE a failure that never left (CONNECT_REFUSED, PROXY_REFUSED and DNS_FAILURE always are)
                     */
    /* Raw values of the wait headers (RF_WAIT_HEADERS), indexed by rf_wait_header; NULL = absent, a non-NULL value of
     * length 0 = a header the server sent empty.
     * Only the headers the route lists in retryAfter.headers may be given (else RF_EINVAL, err->path "hints", or
     * "retry_after" for a retry_after the route does not read; the message names the header).
     * hints[RF_WAIT_RETRY_AFTER] is the same field as retry_after: give it in one place only. */
    const char *hints[RF_WAIT_HEADER_COUNT];
    size_t hint_lens[RF_WAIT_HEADER_COUNT];
    /* Propagation across layers (retryfreeze/propagation.h), read only by a route with propagation: */
    bool overloaded;     /* the response carried the route's propagation.overloadedHeader: never retried */
    int inbound_attempt; /* the caller's attempt number (its propagation.attemptHeader, rf_inbound), 0 when none:
                            above 1 the caller is retrying, so with propagation.inboundAttempt no retry here */
} rf_facts;

/* The verdict after one attempt. */
typedef struct rf_verdict {
    bool retry;
    rf_reason reason;
    char class_name[RF_CLASS_NAME_MAX]; /* the failure class, e.g. "HTTP_503", "TIMEOUT", "HTTP_200" */
    int64_t delay_ms;                   /* wait before the next attempt (0 when stopping) */
    int64_t timeout_ms;             /* per-try timeout of the next attempt: min(perAttemptTimeoutMs, time left after the
                                       delay); 0 when stopping */
    rf_retry_after_use retry_after; /* what happened to the route's wait header (Retry-After by default) */
    int retry_after_header;         /* the rf_wait_header retry_after speaks of: the one used, else the first
                                       present (invalid or not needed); -1 when none was present */
    long route;                     /* index of the deciding route, -1 when none */
    bool class_retryable;           /* the failure class is retryable on the deciding route (its retryable list
                                       wins over notRetryable as in the lock); false for success and no route */
    rf_budget_source budget;        /* which retry budget this verdict used: none, local, shared, local-fallback */
} rf_verdict;

typedef struct rf_retry_budget rf_retry_budget;

/*
 * Decides retry or stop. Checks, in this order, each giving its reason (docs/reasons.md):
 *   unpinned-source, no-route, success (2xx/3xx), max-attempts, class-limit (classLimits: the failure's class
 *   has a limit and attempts >= it), status-not-retryable, upstream-overloaded (the route has propagation and the
 *   facts say overloaded), inbound-retry (the route has propagation.inboundAttempt and inbound_attempt > 1),
 *   mutating-without-idempotency, server-pushback
 *   (grpc-retry-pushback-ms says stop), retry-after-exceeds-budget, deadline, retry-throttled, else
 *   pinned-status.
 * The wait: the route's retryAfter.headers are read in order and the first present and valid one wins
 * (rf_wait_header_parse). delay_ms is that wait when valid (never retry sooner than the server asked), else
 * the backoff for this attempt count; a wait over retryAfter.maxMs or over the time left stops the request. rng
 * supplies jitter and may be NULL only when the route's jitter is "none" (else RF_EINVAL). budget (may be NULL) is the
 * client's retry budget: when the lock has retryBudget, this call records the attempt's effect on it (gRPC A6: a
 * retryable failure takes 1 token, a success adds tokenRatio, a non-retryable failure leaves it) and a retry is
 * throttled while tokens <= maxTokens / 2. Returns RF_OK and fills *out, or RF_EINVAL (*out unspecified, err->path
 * names the field): p, f or out NULL; method missing or with a lowercase letter (RFC 9110 §9.1: no route could
 * match); path missing; status not 0 or 100..599; transport out of range; attempts < 1; elapsed_ms < 0;
 * inbound_attempt < 0; a hint the route does not read; rng NULL for a jittered route that needs a backoff. A
 * refusal has no effect: the budget is charged only when the call returns RF_OK.
 * Allocates nothing and reads no clock; p and budget may be shared between threads, rng may not.
 */
RF_API rf_status rf_decide(const rf_policy *p, const rf_facts *f, rf_rng *rng, rf_retry_budget *budget, rf_verdict *out,
                           rf_error *err);

/*
 * rf_decide with the route already matched: route is rf_policy_match(p, f->method, f->method_len, f->path,
 * f->path_len) (-1: no route), computed once per request, since a policy is immutable and a request's method
 * and path do not change between its attempts (as Envoy keeps a retry state per request). Everything else is
 * rf_decide's: the same checks, verdict, budget effect and errors, plus RF_EINVAL (err->path "route") for a
 * route outside -1..rf_policy_route_count(p) - 1. A route that is not f's match decides by the wrong route: the
 * caller owns that pairing. Allocates nothing and reads no clock.
 */
RF_API rf_status rf_decide_on_route(const rf_policy *p, long route, const rf_facts *f, rf_rng *rng,
                                    rf_retry_budget *budget, rf_verdict *out, rf_error *err);

/*
 * The verdict on a 3xx response the client is about to follow (RFC 9110 §15.4). f holds the facts of the
 * request that got the 3xx (status 300..399, its Retry-After and Date, elapsed_ms; attempts is not read);
 * hops = redirects already followed in this attempt; max_redirects = the client's limit.
 * - hops >= max_redirects: stop, class TOO_MANY_REDIRECTS, reason status-not-retryable (never retryable:
 *   the same chain would loop again);
 * - a valid Retry-After (RFC 9110 §10.2.3: on a 3xx, the minimum wait before the redirected request) is the
 *   delay when the route honours it; over retryAfter.maxMs or the time left: retry-after-exceeds-budget;
 * - less than minAttemptMs left after the delay: deadline;
 * - else retry = true, reason redirect, delay_ms (0 without Retry-After) and the next hop's timeout_ms.
 * An unknown route stops with no-route. RF_EINVAL for a non-3xx status or missing facts.
 */
RF_API rf_status rf_redirect_verdict(const rf_policy *p, const rf_facts *f, int hops, int max_redirects,
                                     rf_verdict *out, rf_error *err);

/* Budget for the next attempt, asked before starting it. */
typedef struct rf_attempt_budget {
    bool allowed;
    int64_t timeout_ms; /* per-try timeout: min(perAttemptTimeoutMs, totalBudgetMs - elapsed_ms); 0 if refused */
    rf_reason reason;   /* within-budget, or no-route, max-attempts, deadline */
    long route;
} rf_attempt_budget;

/*
 * May another attempt start? attempts = attempts made so far (0 before the first); elapsed_ms since the first
 * attempt started. Refused with max-attempts when attempts >= maxAttempts, with deadline when less than
 * minAttemptMs is left before totalBudgetMs. Example (the desk's flat lock): attempts 0 → 2000 ms;
 * attempts 1 at 2000 ms → 500 ms; attempts 2 → max-attempts. RF_EINVAL (err->path the argument): p or out NULL,
 * a missing method or one with a lowercase letter (RFC 9110 §9.1), a missing path, a negative count or elapsed.
 */
RF_API rf_status rf_budget(const rf_policy *p, const char *method, size_t method_len, const char *path, size_t path_len,
                           int attempts, int64_t elapsed_ms, rf_attempt_budget *out, rf_error *err);

/*
 * The failure class token of (status, transport) into buf (RF_CLASS_NAME_MAX bytes): a transport outcome
 * other than ok wins (see RF_NAMED_CLASSES); else HTTP_<status> for 100..599; else UNKNOWN.
 */
RF_API void rf_classify(int status, rf_transport transport, char buf[RF_CLASS_NAME_MAX]);

/*
 * The backoff delay before the retry that follows attempt number `attempts` (>= 1) on route i:
 * cap = min(maxMs, baseMs × multiplier^(attempts-1)), saturating (any attempts count up to INT_MAX gives a
 * value in [0, maxMs], never NaN or negative); jitter none → cap, full → [0, cap], equal → [cap/2, cap],
 * decorrelated → [min(baseMs, cap), min(maxMs, 3 × cap)] (stateless variant of AWS "decorrelated jitter").
 * rng may be NULL only for jitter none. Returns -1 on a bad route index or missing rng.
 */
RF_API int64_t rf_backoff_ms(const rf_policy *p, size_t route, int attempts, rf_rng *rng);

/*
 * The window rf_backoff_ms draws from for the same route and attempts: every delay it can return lies in
 * [*lo_ms, *hi_ms] (lo = hi for jitter none). The lock diff compares these windows per retry number
 * (docs/governance.md). RF_EINVAL on a NULL argument or a bad route index.
 */
RF_API rf_status rf_backoff_window(const rf_policy *p, size_t route, int attempts, int64_t *lo_ms, int64_t *hi_ms);

/*
 * Whether route i retries the failure class of (status, transport) — the class check of rf_decide alone
 * (retryable vs notRetryable, a specific status beating a family, aliases expanded), without the attempt
 * count, the key or the time. False for a bad route index and for a success (2xx/3xx with transport ok).
 */
RF_API bool rf_policy_class_retryable(const rf_policy *p, size_t route, int status, rf_transport transport);

/*
 * The most attempts route i gives a request whose failures are all of the class of (status, transport):
 * min(maxAttempts, its classLimits entry), a specific status's limit beating its family's (docs/lock.md).
 * Whether the class is retryable at all is rf_policy_class_retryable's question, not this one's. 0 for a bad
 * route index or transport.
 */
RF_API int rf_policy_class_attempts(const rf_policy *p, size_t route, int status, rf_transport transport);

/*
 * Creates the client-wide retry budget (gRPC A6 retryThrottling) for policy p, full (tokens = maxTokens). It copies
 * the configuration, so p may be freed before it. Thread-safe: any number of threads may pass it to rf_decide
 * concurrently (C11 atomics). When the lock has no retryBudget (or p is NULL) the object is inert: rf_decide never
 * throttles with it. Free with rf_retry_budget_free. Returns NULL when allocation fails.
 */
RF_API rf_retry_budget *rf_retry_budget_new(const rf_policy *p);
/* Frees b and, when it has a shared store, the store's ctx (store->free). NULL is a no-op. Only once no thread,
 * client or rf_step uses it. */
RF_API void rf_retry_budget_free(rf_retry_budget *b);
/* Current tokens × 1000 (0..maxTokens × 1000) of the local bucket, read atomically; -1 for an inert or NULL budget.
 * With a shared store this is the fallback bucket, not the fleet's. */
RF_API int64_t rf_retry_budget_tokens_milli(const rf_retry_budget *b);

/*
 * A shared token store: the same token bucket held for a whole fleet (gRPC A6 semantics, kept by a server
 * such as Redis: see retryfreeze/retry_budget_redis.h). add applies delta_milli to the shared bucket,
 * clamped to [0, max_milli] (a bucket the store has not seen starts full, at max_milli), and sets
 * *tokens_milli to the new count; it returns false when the store could not answer (down, slow), and must
 * then have waited no longer than its own timeout. free releases ctx (may be NULL). Both must be
 * thread-safe when the budget is shared between threads.
 */
typedef struct rf_retry_budget_store {
    bool (*add)(void *ctx, int64_t delta_milli, int64_t max_milli, int64_t *tokens_milli);
    void (*free)(void *ctx);
    void *ctx;
} rf_retry_budget_store;

/*
 * Puts the budget's bucket in a shared store: from now on rf_decide applies each attempt's effect there
 * (verdict budget "shared"). When store->add fails, the decision uses and updates this budget's local
 * bucket instead (verdict budget "local-fallback"): a store outage never means unlimited retries. The budget
 * takes ownership of store->ctx (freed by rf_retry_budget_free; on an error the caller keeps it); *store is copied.
 * RF_EINVAL when the budget is inert (the lock has no retryBudget), already has a store, or b/store/add is NULL.
 * Not thread-safe: set the store before the budget is shared.
 */
RF_API rf_status rf_retry_budget_set_store(rf_retry_budget *b, const rf_retry_budget_store *store, rf_error *err);

#ifdef __cplusplus
}
#endif
#endif
