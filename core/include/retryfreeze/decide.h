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

/* Longest failure class token ("GRPC_FAILED_PRECONDITION") plus NUL, rounded up. */
#define RF_CLASS_NAME_MAX 32

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
/*
 * One logical request's place in a ratio retry budget's window (docs/lock.md, retryBudget): the budget counts the
 * request at the first decision that carries this token (rf_decide's facts or rf_hedge_decide's) and marks it
 * counted, so no later decision on the same token counts it again, whichever path decides (plain attempts, hedges, a
 * step, a flow). One per request, set to RF_BUDGET_REQUEST_INIT when the request starts and kept by its attempt loop
 * until it ends; never shared between requests, nor between threads at once. A token bucket counts attempts, not
 * requests: it ignores the token.
 */
typedef struct rf_budget_request {
    bool counted; /* the budget has counted this request (set by the budget; never by the caller) */
} rf_budget_request;
#define RF_BUDGET_REQUEST_INIT ((rf_budget_request){.counted = false})

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
    int64_t mono_ms; /* the caller's monotonic clock in ms (CLOCK_MONOTONIC), for a ratio retry budget's window; 0 =
                        unknown (the window's newest slot). Every user of one budget must read the same clock */
    rf_budget_request *budget_request; /* the request's token (rf_budget_request): required with a ratio retry budget
                                          (else RF_EINVAL, err->path "budget_request"); the same on every decision of
                                          the request; NULL without a budget or with a token bucket */
    bool hedged; /* the attempt is one of a hedged request's (rf_policy_hedging: hedged): a failure of a class not
                    in its route's hedging.nonFatalClasses ends the request (hedge-fatal, gRPC A6) */
    /* Propagation across layers (retryfreeze/propagation.h), read only by a route with propagation: */
    bool overloaded;     /* the response carried the route's propagation.overloadedHeader: never retried */
    int inbound_attempt; /* the caller's attempt number (its propagation.attemptHeader, rf_inbound), 0 when none:
                            above 1 the caller is retrying, so with propagation.inboundAttempt no retry here */
    int grpc_status;     /* the response's grpc-status (a header or a trailer), 0..RF_GRPC_STATUS_MAX; 0 when absent or
                            OK (the HTTP status then decides). 1..16 with transport ok: class GRPC_<name>
                            (RF_GRPC_CLASSES) whatever the HTTP status; any other value is refused (RF_EINVAL) */
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
    long route;                     /* index of the route the facts matched, -1 when none: the deciding route,
                                       or for unpinned-source the one that matched but did not decide */
    bool class_retryable;           /* the failure class is retryable on the deciding route (its retryable list
                                       wins over notRetryable as in the lock); false for success and no route */
    rf_budget_source budget;        /* which retry budget this verdict used: none, local, shared, local-fallback */
} rf_verdict;

typedef struct rf_retry_budget rf_retry_budget;

/*
 * Decides retry or stop. Checks, in this order, each giving its reason (docs/reasons.md):
 *   unpinned-source, no-route, success (2xx/3xx with grpc_status 0), hedge-fatal (f->hedged, and the class is not in
 * the route's hedging.nonFatalClasses), max-attempts, class-limit (classLimits: the failure's class has a limit and
 * attempts
 *   >= it), status-not-retryable, upstream-overloaded (the route has propagation and the facts say overloaded),
 *   inbound-retry (the route has propagation.inboundAttempt and inbound_attempt > 1), mutating-without-idempotency,
 *   server-pushback (grpc-retry-pushback-ms says stop), retry-after-exceeds-budget, deadline, retry-throttled, else
 *   pinned-status.
 * The wait: the route's retryAfter.headers are read in order and the first present and valid one wins
 * (rf_wait_header_parse). delay_ms is that wait when valid (never retry sooner than the server asked), else
 * the backoff for this attempt count; a wait over retryAfter.maxMs or over the time left stops the request. rng
 * supplies jitter and may be NULL only when the route's jitter is "none" (else RF_EINVAL). budget (may be NULL) is the
 * client's retry budget: when the lock has retryBudget, this call records the attempt's effect on it: for a token
 * bucket (gRPC A6) a retryable failure takes 1 token, a success adds tokenRatio, a non-retryable failure leaves it,
 * and a retry is throttled while tokens <= maxTokens / 2; for a ratio (retryBudget.retryRatio) the request's first
 * decision of any kind (its token f->budget_request not yet counted: rf_budget_request) counts the request in the
 * window at f->mono_ms, once, and a retry verdict counts a retry, throttled when the window's retries would pass
 * retryRatio × requests + minRetriesPerSecond × ttlMs / 1000. Returns RF_OK and
 * fills *out, or RF_EINVAL (*out unspecified, err->path names the field): p, f or out NULL; method missing or with a
 * lowercase letter (RFC 9110 §9.1: no route could match); path missing; status not 0 or 100..599; transport out of
 * range; attempts < 1; elapsed_ms < 0; inbound_attempt < 0; grpc_status outside 0..16; a hint the route does not read;
 * rng NULL for a jittered route that needs a backoff; a ratio budget without f->budget_request. A refusal has no
 * effect: the budget is charged only when the call returns RF_OK. Allocates nothing and reads no clock; p and budget
 * may be shared between threads, rng may not.
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
 * rf_budget with the route matched once per request, as rf_decide_on_route takes it: route is rf_policy_match(p,
 * method, …, path, …) (-1: no route, refused with no-route). The same answer as rf_budget; RF_EINVAL (err->path the
 * argument) for p or out NULL, a route outside -1..rf_policy_route_count(p) - 1, a negative count or elapsed. The
 * client asks it before every attempt of a request it has matched. No allocation.
 */
RF_API rf_status rf_budget_on_route(const rf_policy *p, long route, int attempts, int64_t elapsed_ms,
                                    rf_attempt_budget *out, rf_error *err);

/*
 * The failure class token of (status, transport) into buf (RF_CLASS_NAME_MAX bytes): a transport outcome
 * other than ok wins (see RF_NAMED_CLASSES); else HTTP_<status> for 100..599; else UNKNOWN.
 */
RF_API void rf_classify(int status, rf_transport transport, char buf[RF_CLASS_NAME_MAX]);

/*
 * rf_classify with the response's grpc-status (0..RF_GRPC_STATUS_MAX, 0: absent or OK): a transport outcome other
 * than ok wins; else grpc_status 1..16 gives GRPC_<name> (RF_GRPC_CLASSES); else rf_classify's class. Returns RF_OK,
 * or RF_EINVAL (err->path "grpc_status", buf set to "") for a grpc_status outside 0..16 or a NULL buf.
 */
RF_API rf_status rf_classify_grpc(int status, rf_transport transport, int grpc_status, char buf[RF_CLASS_NAME_MAX],
                                  rf_error *err);

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
 * The hedging a request gets (the lock's hedging, gRPC A6 hedgingPolicy): on a route with hedging, a request is
 * hedged unless its method needs an idempotency key for retries (idempotencyRequired) and it has none, so that a
 * keyless POST is sent once. Then its attempts may overlap: the first starts; while no acceptable response has come,
 * another may start every hedgingDelayMs (rf_hedge_decide says whether), up to hedging.maxAttempts started; the first
 * success wins and the others are cancelled; a failure of a class not in nonFatalClasses ends it (hedge-fatal).
 */
typedef struct rf_hedging {
    bool hedged;       /* the request is hedged (else it is sent one attempt at a time, as on any route) */
    int max_attempts;  /* hedging.maxAttempts: most attempts the hedging delay starts, the first included */
    int64_t delay_ms;  /* hedging.hedgingDelayMs: the wait after an attempt starts before the next may */
    rf_reason why_not; /* not hedged: no-route, max-attempts (the route has no hedging), mutating-without-idempotency */
} rf_hedging;

/*
 * Fills *out for a request of method (method_len bytes; has_key: it carries an idempotency key) on route (an
 * rf_policy_match answer, -1 for none). RF_EINVAL for NULL p, method or out, or a route out of range. No allocation.
 */
RF_API rf_status rf_policy_hedging(const rf_policy *p, long route, const char *method, size_t method_len, bool has_key,
                                   rf_hedging *out);

/* What a hedged request knows when its hedging delay has passed with its attempts still in flight. */
typedef struct rf_hedge_facts {
    const char *method; /* required, as in rf_facts */
    size_t method_len;
    int started;                       /* attempts started so far (hedges and retries), >= 1 */
    int64_t elapsed_ms;                /* since the first attempt started, as rf_decide is told, >= 0 */
    bool has_idempotency_key;          /* the request carries an Idempotency-Key (the same on every attempt) */
    int64_t mono_ms;                   /* as rf_facts.mono_ms: for a ratio retry budget */
    rf_budget_request *budget_request; /* as rf_facts.budget_request: the request's token, the one its attempts'
                                          decisions carry; required with a ratio retry budget */
} rf_hedge_facts;

/*
 * May a hedge (one more attempt, started while the others are still in flight) start now? A hedge is a retry for
 * every limit: checks, in this order, no-route (route -1), max-attempts (the route has no hedging, or started >=
 * hedging.maxAttempts or >= maxAttempts), mutating-without-idempotency, deadline (less than minAttemptMs left), then
 * the retry budget: a hedge takes 1 token from a token bucket and is refused while tokens <= maxTokens / 2 after it
 * (retry-throttled); of a ratio it is one retry of the window (and counts the request when its token h->budget_request
 * is not yet counted: rf_budget_request), refused past the window's allowance. Allowed: retry true, reason
 * within-budget, timeout_ms the hedge's per-try timeout (min(perAttemptTimeoutMs, time left)), delay_ms 0, budget the
 * source it used. The budget is touched only when every other check passed. RF_EINVAL (err->path the field): NULL p, h
 * or out; route out of range; no method; started < 1; elapsed_ms < 0; a ratio budget without h->budget_request.
 * Allocates nothing and reads no clock.
 */
RF_API rf_status rf_hedge_decide(const rf_policy *p, long route, const rf_hedge_facts *h, rf_retry_budget *budget,
                                 rf_verdict *out, rf_error *err);

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
/* Current tokens × 1000 (0..maxTokens × 1000) of the local bucket, read atomically; -1 for an inert or NULL budget
 * and for the ratio form. With a shared store this is the fallback bucket, not the fleet's. */
RF_API int64_t rf_retry_budget_tokens_milli(const rf_retry_budget *b);

/* A ratio budget's window as it stands (docs/lock.md, retryBudget): the requests and retries it counts, and how many
 * retries × 1000 it allows (retryRatio × requests + minRetriesPerSecond × ttlMs / 1000, × 1000). */
typedef struct rf_budget_window {
    int64_t ttl_ms;          /* retryBudget.ttlMs: the window's length */
    int64_t requests;        /* requests counted in the window */
    int64_t retries;         /* retries (and hedges) counted in the window */
    int64_t allowance_milli; /* retries × 1000 the window allows; a retry is allowed while (retries + 1) × 1000 fits */
} rf_budget_window;

/* Fills *out with the local window of ratio budget b at mono_ms (as rf_facts.mono_ms; 0: its newest slot) and returns
 * true; false (*out zeroed) for a token bucket, an inert or NULL budget. With a shared store this is the fallback
 * window, not the fleet's. Counts nothing; thread-safe. */
RF_API bool rf_retry_budget_window(const rf_retry_budget *b, int64_t mono_ms, rf_budget_window *out);

/*
 * A shared store: the same budget held for a whole fleet by a server such as Redis (retryfreeze/retry_budget_redis.h).
 * For a token bucket (gRPC A6 semantics), add applies delta_milli to the shared bucket, clamped to [0, max_milli] (a
 * bucket the store has not seen starts full, at max_milli), and sets *tokens_milli to the new count. For a ratio,
 * window applies one decision to the shared window on the store's own clock: request counts a request, retry asks for
 * a retry, allowed when (retries + 1) × 1000 <= ratio_milli × requests + reserve_milli over the last ttl_ms (then it
 * is counted), and sets *allowed. Each returns false when the store could not answer (down, slow), and must then have
 * waited no longer than its own timeout. free releases ctx (may be NULL). All must be thread-safe when the budget is
 * shared between threads. A store needs the op of its budget's form (the other may be NULL).
 */
typedef struct rf_retry_budget_store {
    bool (*add)(void *ctx, int64_t delta_milli, int64_t max_milli, int64_t *tokens_milli);
    void (*free)(void *ctx);
    void *ctx;
    bool (*window)(void *ctx, bool request, bool retry, int64_t ratio_milli, int64_t reserve_milli, int64_t ttl_ms,
                   bool *allowed);
} rf_retry_budget_store;

/*
 * Puts the budget's bucket in a shared store: from now on rf_decide applies each attempt's effect there
 * (verdict budget "shared"). When store->add fails, the decision uses and updates this budget's local
 * bucket instead (verdict budget "local-fallback"): a store outage never means unlimited retries. The budget
 * takes ownership of store->ctx (freed by rf_retry_budget_free; on an error the caller keeps it); *store is copied.
 * RF_EINVAL when the budget is inert (the lock has no retryBudget), already has a store, b or store is NULL, or
 * the op of the budget's form (add for a token bucket, window for a ratio) is NULL.
 * Not thread-safe: set the store before the budget is shared.
 */
RF_API rf_status rf_retry_budget_set_store(rf_retry_budget *b, const rf_retry_budget_store *store, rf_error *err);

#ifdef __cplusplus
}
#endif
#endif
