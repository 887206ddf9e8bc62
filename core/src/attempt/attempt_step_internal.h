/*
 * Private to the attempt library (libretryfreeze_attempt) and its one caller outside it, the libcurl client
 * (core/src/client/client_flow.c): the attempt loop's core, which the libcurl flow and the public rf_step
 * (attempt_step.c) both run, so each rule of an attempt exists once; and the one writer of the ledger lines of
 * finished requests. No libcurl here: the flow hands over what libcurl saw, in the engine's words.
 * Prefix rfi_; never installed. The functions marked RFI_ABI are the library's internal ABI (attempt_abi.h).
 */
#ifndef RETRYFREEZE_ATTEMPT_STEP_INTERNAL_H
#define RETRYFREEZE_ATTEMPT_STEP_INTERNAL_H

#include "attempt_abi.h"
#include "retryfreeze/attempt_step.h"

/* One logical request's attempts so far. The request and the response are borrowed (they outlive it). */
typedef struct rfi_attempts {
    const rf_policy *policy;
    const rf_request *req;
    rf_response *resp;
    long route;                       /* rf_policy_match of the request's method and path, -1 for none: matched once */
    bool reads[RF_WAIT_HEADER_COUNT]; /* the wait headers the route reads (retryAfter.headers) */
    int attempts;                     /* attempts made; a followed redirect is part of its attempt, not one more */
    int requests;                     /* HTTP requests sent: attempts and followed redirects (resp->attempts) */
    size_t tries_cap;                 /* room in resp->tries (grown up to RF_MAX_TRIES as tries come) */
    int64_t delay_ms, timeout_ms;     /* the wait before, and the per-try timeout of, the attempt in flight */
    bool last_class_retryable;        /* the last failure's class is retryable (true before any failure) */
    rf_propagation prop;              /* the route's propagation (disabled: nothing sent, read or told) */
    rf_budget_request budget_request; /* the request's token for a ratio retry budget: every decision of it (hedges
                                         too) carries this one, so its window counts the request once */
} rfi_attempts;

/* Whether req on route is hedged (rf_policy_hedging), narrowed by its caller: when the route's propagation reads the
 * inbound attempt (inboundAttempt) and req's inbound_headers say attempt > 1, the request makes one attempt (a caller
 * that already retries owns the retries, docs/lock.md#propagation), so it is not hedged either: hedged false and
 * why_not RF_REASON_INBOUND_RETRY. Every sender (the client, rf_step) asks here. */
RFI_ABI void rfi_request_hedging(const rf_policy *p, long route, const rf_request *req, rf_hedging *out);

/* Starts a for request req on route (rf_policy_match, -1: none) into resp, whose tries array holds tries_cap
 * (allocated by the caller, at least 1). With the route's propagation, resp->inbound is what req's inbound_headers
 * say. */
RFI_ABI void rfi_attempts_init(rfi_attempts *a, const rf_policy *p, const rf_request *req, rf_response *resp,
                               long route, size_t tries_cap);

/* The deadline the request's caller propagated, in ms, when the route's propagation reads it (inboundDeadline);
 * -1: none. For rfi_limits_init. */
RFI_ABI int64_t rfi_step_inbound_deadline(const rfi_attempts *a);

/* Before an attempt, elapsed_ms into the request as the engine is told: true and *timeout_ms (rf_budget's per-try
 * timeout), or false and *stop (max-attempts, deadline; no-route when rf_budget refuses). */
RFI_ABI bool rfi_step_begin(const rfi_attempts *a, int64_t elapsed_ms, int64_t *timeout_ms, rf_reason *stop);

/* The propagation lines of the attempt about to start (its number: in_hop, a followed redirect's request, is part of
 * the attempt in flight; else the next), which may take timeout_ms: rf_propagation_lines. */
RFI_ABI size_t rfi_step_lines(const rfi_attempts *a, bool in_hop, int64_t timeout_ms,
                              char lines[2][RF_PROPAGATION_LINE_MAX]);

/* What one HTTP request of an attempt ended with, in the engine's words (the transport's part is done). */
typedef struct rfi_attempt_end {
    int status;                              /* the response's status; anything outside 100..599 counts as none */
    rf_transport transport;                  /* RF_TRANSPORT_OK when a response came */
    const char *error;                       /* the transport's message, or NULL */
    const char *hints[RF_WAIT_HEADER_COUNT]; /* the wait headers the response carried (NULL: absent), all of them */
    const char *date;                        /* its Date header, or NULL */
    bool not_sent;                           /* no byte of the request left (a transparent retry may follow) */
    const char *peer;                        /* the "host:port" it went to, or NULL (rf_try.peer) */
    bool hop;                                /* a followed redirect's request: part of the attempt in flight */
    bool overloaded;                         /* the response carried the route's propagation.overloadedHeader */
    int grpc_status;                         /* its grpc-status (header or trailer), 0..16; 0: absent or OK */
    bool grpc_bad;                           /* it carried a grpc-status that is no code 0..16 (read as UNKNOWN) */
    int64_t elapsed_ms;                      /* this request's time on the wire */
    int64_t request_elapsed_ms;              /* since the request started, as the engine is told */
    int64_t wall_ms;                         /* Unix time in ms (for an HTTP-date) */
    int64_t mono_ms;                         /* monotonic ms (a ratio retry budget's window), 0: unknown */
    bool counted;     /* the attempt was counted when it started (rfi_step_started: a hedged request's) */
    bool hedged;      /* one of a hedged request's attempts: facts.hedged, and its try gets a fate */
    bool hedge;       /* started by the hedging delay beside others (rf_try.hedge) */
    int64_t start_ms; /* when it started, ms after the request's first attempt (rf_try.start_ms); -1: not kept */
} rfi_attempt_end;

/* A 3xx the client follows itself (client_redirect.c): rf_redirect_verdict decides it in rf_decide's place. */
typedef struct rfi_redirect_ask {
    int hops;          /* redirects followed so far in this attempt */
    int max_redirects; /* the client's max_redirects, narrowed here to the room RF_MAX_TRIES leaves */
    bool next_ready;   /* the next request could be made (an http or https Location, memory): without it a retry
                          gives way to rf_decide, which decides the 3xx as any response */
    bool followed;     /* set by rfi_step_after: the redirect's verdict stood (a retry then sends the next request) */
} rfi_redirect_ask;

/*
 * After one HTTP request: records its try in the response, decides (rf_redirect_verdict for a 3xx to follow, whose
 * Retry-After counts whatever the route reads; else, or when that retry cannot be followed, rf_decide on the route,
 * failing closed, with the wait headers the route reads), lets hook narrow the verdict (*hook_rc its value, < 0: it
 * failed) and makes room for another try (RF_MAX_TRIES, or memory: else the retry becomes a stop, max-attempts).
 * Returns v->retry. redirect may be NULL (no 3xx to follow); hook may be NULL; rng and budget as for rf_decide.
 */
RFI_ABI bool rfi_step_after(rfi_attempts *a, const rfi_attempt_end *e, rfi_redirect_ask *redirect, rf_rng *rng,
                            rf_retry_budget *budget, rf_attempt_hook hook, void *hook_ud, int *hook_rc, rf_verdict *v);

/* A hedged request's attempt starts: it counts now, as an attempt and a request sent (its try is recorded when it
 * ends, rfi_step_after with e->counted, or when it is cancelled). */
RFI_ABI void rfi_step_started(rfi_attempts *a);

/* Records the try of an attempt cancelled in flight because reason ended the request (another attempt's response, or
 * the caller stopping it): no status, class UNKNOWN, the reason, e's times. A hedged request's attempt (e->hedged,
 * counted at its start) gets fate cancelled, and the response's status and attempts stay; any other (not e->counted)
 * counts now, as rfi_step_after's would, and the response's status becomes 0 (no response to it). */
RFI_ABI void rfi_step_cancelled(rfi_attempts *a, const rfi_attempt_end *e, rf_reason reason);

/* Ends the request with reason after elapsed_ms: the response's reason, outcome, ok, elapsed_ms, route and budget
 * (what rf_step_finish does before its ledger line). */
RFI_ABI void rfi_step_end(const rfi_attempts *a, rf_reason reason, int64_t elapsed_ms);

/* A finished request whose ledger line is to be written: its request, its complete response, its timestamp. */
typedef struct rfi_finished {
    const rf_request *req;
    rf_response *resp;
    int64_t wall_ms;
} rfi_finished;

/* The arrays of a batch of ledger lines, kept by their writer between batches (a client's); zeroed: none yet. */
typedef struct rfi_batch {
    rf_ledger_record *recs;
    const rf_ledger_record **ptrs;
    rf_status *status;
    rf_error *errs;
    size_t cap;
} rfi_batch;

/* Frees the batch's arrays and zeroes it. */
RFI_ABI void rfi_batch_free(rfi_batch *b);

/*
 * The one writer of the ledger lines of finished requests: the records of done[0..n), in order. With batch, as
 * few write(2)s as the ledger can (rf_ledger_append_batch, at most 64 records a call, built in batch's arrays);
 * without batch, or when its arrays cannot grow, one rf_ledger_append per line. A line that fails goes to its
 * response's ledger_error, never to the caller.
 */
RFI_ABI void rfi_step_write(rf_ledger *l, const rf_policy *p, const rfi_finished *done, size_t n, rfi_batch *batch);

#endif
