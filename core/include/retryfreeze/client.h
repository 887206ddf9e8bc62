/*
 * The HTTP client: libcurl attempts under a policy. It makes no retry decision of its own: before each
 * attempt it asks rf_budget (per-try timeout), after each attempt it asks rf_decide (retry or stop, the
 * delay), and it stops exactly when the verdict says so. A whole request never outlives totalBudgetMs
 * (CLOCK_MONOTONIC, sleeps included). Library libretryfreeze_client (libcurl, the attempt loop of
 * libretryfreeze_attempt, the engine).
 */
#ifndef RETRYFREEZE_CLIENT_H
#define RETRYFREEZE_CLIENT_H

#include "retryfreeze/attempt_step.h"
#include "retryfreeze/client_network.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rf_client_options {
    const rf_policy *policy;    /* required; borrowed: must outlive the client */
    const char *base_url;       /* required, "http://host:port" or "https://…"; request paths are appended */
    rf_ledger *ledger;          /* optional, borrowed: one record per logical request */
    const char *const *headers; /* optional "Name: value" lines sent with every request */
    size_t n_headers;
    uint64_t rng_seed;         /* jitter seed */
    bool retry_budget;         /* true: the lock must have a retryBudget (else RF_EINVAL). With or without it, a lock's
                                  retryBudget always applies: without budget the client makes its own from the lock */
    rf_retry_budget *budget;   /* optional, borrowed (must outlive the client): use this budget instead of the
                                  client's own, e.g. a shared one from rf_retry_budget_redis_new, or one several
                                  clients of the same lock share */
    bool follow_redirects;     /* default false: a 3xx is a success, returned as is. true: 301/302/303/307/308 are
                                  followed by the client, one try per hop (RFC 9110 §15.4, see client_redirect.c) */
    int max_redirects;         /* with follow_redirects: 3xx followed per attempt, 1..RF_MAX_REDIRECTS; 0 = 10. One
                                  more 3xx ends the request with class TOO_MANY_REDIRECTS (terminal) */
    size_t max_body_bytes;     /* response bodies over this fail the attempt; 0 = 16 MiB */
    rf_client_network network; /* TLS, proxy, connect timeout, user agent, HTTP version; zeroed = defaults */
} rf_client_options;

typedef struct rf_client rf_client;

/* Largest max_redirects. */
#define RF_MAX_REDIRECTS 30

/*
 * Creates a client with one reused curl easy handle (keep-alive; TLS verification on). RF_EINVAL (err->path the
 * option) names a missing or malformed option: no policy, a base_url that is not http(s)://, max_redirects out of
 * range, retry_budget true while the lock has no retryBudget, a header without ':' or with CR/LF, a network option
 * out of range or a TLS file that cannot be read. RF_ENOMEM. Free with rf_client_free. One thread at a time per
 * client; curl_global_init, which this calls, is thread-safe from libcurl 7.84.0.
 */
RF_API rf_status rf_client_new(const rf_client_options *opts, rf_client **out, rf_error *err);
/* Frees the client, its curl handles, its own retry budget and any started request not yet freed (abandoned, no
 * ledger line). Borrowed objects (policy, ledger, budget) stay the caller's. NULL is a no-op. */
RF_API void rf_client_free(rf_client *c);

/*
 * Runs one logical request to completion: attempts, sleeps, the ledger record. An HTTP or transport failure
 * is a response (RF_OK), never an error; the caller clears it with rf_response_clear. RF_EINVAL (err->path the
 * field): a bad request (missing method, a method with a lowercase letter, a path not starting with '/', spaces,
 * CR, LF or '#' in the path or query, a header with CR/LF, an Idempotency-Key given as a raw header, deadline_ms or
 * timeout_ms over the lock's) or a hook error ("on_attempt"); RF_ENOMEM. *out must be zeroed or cleared (it is
 * overwritten).
 */
RF_API rf_status rf_client_request(rf_client *c, const rf_request *req, rf_attempt_hook hook, void *hook_ud,
                                   rf_response *out, rf_error *err);

/* Most requests rf_client_all keeps in flight at once (rf_all_options.concurrency 0, and rf_client_all); the rest
 * wait for a free slot. */
#define RF_ALL_CONCURRENCY 100
/* Largest rf_all_options.concurrency: each request in flight holds a connection (a file descriptor) and an easy
 * handle, and 1024 is the usual per-process limit on open files. */
#define RF_ALL_CONCURRENCY_MAX 1024

typedef struct rf_all_options {
    size_t concurrency; /* most requests in flight at once, 1..RF_ALL_CONCURRENCY_MAX; 0 = RF_ALL_CONCURRENCY. A
                           request counts from its start to its end, its waits between attempts included; a hedged
                           request's attempts count as one */
} rf_all_options;

/*
 * Runs n requests concurrently with curl multi (one easy handle each, at most RF_ALL_CONCURRENCY in flight),
 * each under its own attempt loop (its deadline counts from its own start), and fills out[0..n) in order; each
 * response is the caller's to clear. The hook (may be NULL) is called as for rf_client_request; once a hook fails
 * (or a request cannot start) no further request starts, and every request still in flight or waiting between
 * attempts ends at once as stopped-by-caller (rf_pending_stop), each with its ledger line; requests not yet started
 * are never sent and have none. RF_EINVAL as rf_client_request (err->path prefixed by the request's 1-based index,
 * "[3].path"), and when requests started with rf_client_start are in flight on this client. RF_ENOMEM.
 * Equivalent to rf_client_all_with(c, reqs, n, NULL, hook, hook_ud, out, err).
 */
RF_API rf_status rf_client_all(rf_client *c, const rf_request *reqs, size_t n, rf_attempt_hook hook, void *hook_ud,
                               rf_response *out, rf_error *err);

/*
 * rf_client_all with options (NULL: the defaults): at most opts->concurrency requests in flight, a new one started
 * as soon as one ends. RF_EINVAL (err->path "concurrency") for a concurrency over RF_ALL_CONCURRENCY_MAX; otherwise
 * as rf_client_all.
 */
RF_API rf_status rf_client_all_with(rf_client *c, const rf_request *reqs, size_t n, const rf_all_options *opts,
                                    rf_attempt_hook hook, void *hook_ud, rf_response *out, rf_error *err);

/*
 * Asynchronous requests, for driving many flows from one thread (curl multi): rf_client_start begins a
 * request without blocking; rf_client_run drives every started request for at most timeout_ms and reports
 * the ones that finished; their responses are then complete. The request (and its strings) and the response
 * must stay valid until the request is reported done (or freed). One thread at a time per client.
 */
typedef struct rf_pending rf_pending;

/* Starts req. *out is filled when it is reported done. RF_EINVAL for a bad request (as rf_client_request). */
RF_API rf_status rf_client_start(rf_client *c, const rf_request *req, rf_attempt_hook hook, void *hook_ud,
                                 rf_response *out, rf_pending **pending, rf_error *err);

/*
 * Drives the started requests for at most timeout_ms (0: one non-blocking pass), sleeping in curl_multi_poll
 * while nothing is due. Writes up to cap finished requests into done[] and returns how many; each is reported
 * once; its curl handle goes back to the client for reuse, its rf_pending stays the caller's to free. Returns 0 at
 * once when nothing is started. With a ledger, the reported requests' lines are appended together just before it
 * returns (rf_ledger_append_batch), so a request's line is in the file before its caller sees it; one that ended
 * but is freed unreported gets its line then.
 */
RF_API size_t rf_client_run(rf_client *c, int timeout_ms, rf_pending **done, size_t cap);

/* Requests started and not yet reported done. */
RF_API size_t rf_client_pending(const rf_client *c);

/* True once rf_client_run has reported the pending request done (its response is then complete). */
RF_API bool rf_pending_done(const rf_pending *p);

/* True when the pending request's hook reported an error. */
RF_API bool rf_pending_hook_failed(const rf_pending *p);

/* The response p fills: the `out` given to rf_client_start (a caller that keeps per-request state beside the
 * response finds it from a reported request without a lookup table). NULL for NULL. */
RF_API rf_response *rf_pending_response(const rf_pending *p);

/* Stops a started request not yet reported done, now, as reason stopped-by-caller: no further attempt starts and no
 * hook runs; an attempt in flight is aborted and recorded as a try with no status and error `why` (copied, cut to
 * the try's error field). It is then done: the next rf_client_run reports it, and rf_pending_free writes its ledger
 * line if it is freed unreported. For a caller that must give up its requests (a callback of its own failed) and
 * still owes each its ledger line. A request already done, or NULL, is left as it is. */
RF_API void rf_pending_stop(rf_pending *p, const char *why);

/* Frees a pending request; if it has not been reported done it is abandoned (its transfer is removed, no ledger
 * line: rf_pending_stop first keeps its line) and must be freed before rf_client_free (which abandons every
 * unreported one). One reported done no longer
 * needs its client: the caller frees it, before or after rf_client_free. NULL is a no-op. */
RF_API void rf_pending_free(rf_pending *p);

/* The client's retry budget tokens × 1000, or -1 when it has none or its budget is a ratio (rf_client_budget_window).
 */
RF_API int64_t rf_client_retry_tokens_milli(const rf_client *c);

/* The client's ratio retry budget's window (rf_retry_budget_window at mono_ms, the monotonic clock the client decides
 * with; 0: its newest slot): true and *out filled; false (*out zeroed) when it has no budget or a token bucket. With
 * a shared store this is the fallback window. */
RF_API bool rf_client_budget_window(const rf_client *c, int64_t mono_ms, rf_budget_window *out);

#ifdef __cplusplus
}
#endif
#endif
