/*
 * The attempt loop without a transport: what one logical request does around each attempt, whoever sends it.
 * The libcurl client (core/src/client/client_flow.c) and the Lua binding's rf.flow (a host's own I/O: nginx
 * cosockets, luv, a coroutine loop) both run these functions, so the rules exist once:
 *   before an attempt: rf_budget (the per-try timeout, or a stop: deadline, max-attempts, …);
 *   after it: facts → rf_decide → verdict (rf_step_verdict), the caller's hook may narrow it (rf_step_narrow);
 *   at the end: outcome, route and the ledger record (rf_step_finish).
 * rf_step bundles them into a step machine for hosts that bring their own transport. Library
 * libretryfreeze_attempt, which needs only libretryfreeze: no libcurl, no hiredis. Times: _ms, monotonic unless
 * named wall.
 */
#ifndef RETRYFREEZE_ATTEMPT_STEP_H
#define RETRYFREEZE_ATTEMPT_STEP_H

#include "retryfreeze/decide.h"
#include "retryfreeze/ledger.h"
#include "retryfreeze/outcome.h"
#include "retryfreeze/propagation.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- a logical request and what became of it: the client's and rf_step's alike ----------------------------- */

typedef struct rf_request {
    const char *method;         /* required, e.g. "POST" */
    const char *path;           /* required, starts with '/' */
    const char *query;          /* optional, without '?' (already encoded) */
    const char *const *headers; /* optional "Name: value" lines */
    size_t n_headers;
    const char *body; /* optional; replayed unchanged on every attempt */
    size_t body_len;
    const char *idempotency_key; /* optional; sent as Idempotency-Key, the same value on every attempt */
    int64_t deadline_ms; /* optional (0 = the lock's): this request's total budget, at most the route's totalBudgetMs
                            (larger is RF_EINVAL naming the lock's limit) */
    int64_t timeout_ms;  /* optional (0 = the lock's): its per-try timeout, at most perAttemptTimeoutMs */
    /* optional "Name: value" lines of the request this one serves (a proxy's inbound request, its caller's): with
     * the route's propagation, its deadline header narrows this request's deadline and its attempt header above 1
     * leaves one attempt (rf_inbound_line; a bad value narrows nothing, never an error). Others are ignored. */
    const char *const *inbound_headers;
    size_t n_inbound_headers;
} rf_request;

/*
 * Checks one header line a caller asks to send ("Name: value": rf_request.headers, rf_client_options.headers, the
 * Lua request.headers), as every sender of a caller's headers does before anything is sent. RF_OK, or RF_EINVAL
 * with err->path "headers" and a message naming the header: no ':' or an empty name; a name that is one of
 * RF_FRAMING_HEADERS (Content-Length, Transfer-Encoding, Host, …: rf_framing_header, any case, spaces or tabs
 * around it), which frames the message and which only the transport may write; a name that is not an RFC 9110
 * §5.1 token; a CR or LF anywhere (a second header, or a second request, smuggled in the value); Idempotency-Key
 * (pass rf_request.idempotency_key: the same key goes on every attempt). A NULL line is RF_EINVAL. Allocates
 * nothing; err may be NULL.
 */
RF_API rf_status rf_request_header_check(const char *line, rf_error *err);

/* One attempt, as returned to the caller and written to the ledger. */
typedef struct rf_try {
    char class_name[RF_CLASS_NAME_MAX];
    int status;
    rf_transport transport;
    int64_t elapsed_ms;          /* this attempt's time on the wire */
    int64_t delay_ms;            /* slept before this attempt */
    int64_t timeout_ms;          /* the per-try timeout it ran with */
    rf_reason reason;            /* the verdict after it */
    char retry_after[256];       /* the raw value of its wait header (the one the verdict used, else the first
                                    present of the route's retryAfter.headers), "" when none */
    char retry_after_header[24]; /* that header's lowercase name ("retry-after", "retry-after-ms", …), "" when none */
    rf_budget_source budget;     /* the retry budget the verdict after it used (none, local, shared, local-fallback) */
    char error[128];             /* curl's message for a transport failure, "" otherwise */
    /* Of a request that hedged (gRPC A6 hedging: attempts overlapped), else -1, false and RF_FATE_NONE: */
    int64_t start_ms; /* when it started, ms after the request's first attempt started */
    bool hedge;       /* started by the hedging delay (hedging.hedgingDelayMs) beside attempts in flight */
    rf_try_fate fate; /* winner (its success ended the request), cancelled (aborted in flight), or failed */
    /* What a replay of the request under another lock needs (the ledger's replay facts, retryfreeze/ledger.h): */
    bool not_sent; /* no byte of the request left (a transparent retry may follow) */
    /* Every wait header (RF_WAIT_HEADERS) the response carried, whether or not the route read it: wait_at[h] is 1 + the
     * offset in wait_text of header h's value (NUL-terminated, cut at 255 bytes), 0 when absent or when it no longer
     * fitted. */
    uint16_t wait_at[RF_WAIT_HEADER_COUNT];
    char wait_text[512];
    char date[48];                 /* the response's Date header when it carried a wait header, "" otherwise */
    char peer[RF_LEDGER_PEER_MAX]; /* the "host:port" it went to (rf_ledger_peer_ok), "" when the transport did not
                                      say */
    int grpc_status; /* the response's grpc-status (a header or a trailer), 0..16; 0 when absent or OK. A value that is
                        no code 0..16 is read as 2 (UNKNOWN, as gRPC clients read it) and error says so */
} rf_try;

/* Most HTTP requests (attempts and followed redirects) one logical request sends: redirects past it end the
 * request with class TOO_MANY_REDIRECTS. */
#define RF_MAX_TRIES 32
typedef struct rf_response {
    int status; /* of the last attempt, 0 when none was received */
    bool ok;    /* outcome == success */
    rf_outcome outcome;
    rf_reason reason;
    int attempts;       /* HTTP requests sent: attempts plus followed redirects (the upstream's count) */
    int64_t elapsed_ms; /* whole request, first attempt start to the end, sleeps included */
    char *body;         /* last attempt's body, NUL-terminated; owned: freed by rf_response_clear */
    size_t body_len;
    char *headers; /* last attempt's response header block ("Name: value\r\n" lines); owned */
    size_t headers_len;
    size_t n_tries;
    rf_try *tries;     /* n_tries tries, one per HTTP request (attempts and followed redirects), at most RF_MAX_TRIES;
                          owned: freed by rf_response_clear (allocated as they come, so a response costs what it
                          used) */
    const char *route; /* endpoint of the deciding route (owned by the policy), NULL when none */
    rf_budget_source budget; /* the retry budget the request used; local-fallback if any decision fell back */
    char ledger_error[256];  /* "" or why the ledger append failed (the request itself is unaffected) */
    rf_inbound inbound;      /* what the request's inbound_headers said, as its route's propagation reads them */
    bool overloaded; /* with the route's propagation: this request stopped after retrying (exhausted, throttled) or
                        its upstream said so (rf_propagation_tells_overloaded): a proxy tells its caller with the
                        route's propagation.overloadedHeader, so the caller does not retry what was retried */
} rf_response;

/* Frees what a response owns and zeroes it; safe on a zeroed response and twice. */
RF_API void rf_response_clear(rf_response *r);

/*
 * Called after every attempt with its try and the verdict. Return 0 to go on, 1 to stop now (narrowing: a
 * retry verdict becomes a stop with reason stopped-by-caller; a stop is never turned into a retry), -1 to
 * stop and report an error in the hook (the request is cleaned up; rf_client_request returns RF_EINVAL).
 */
typedef int (*rf_attempt_hook)(void *ud, const rf_try *t, const rf_verdict *v);

/* ---- the steps ------------------------------------------------------------------------------------------ */

/*
 * The verdict after one attempt: rf_decide on facts (fail closed: a decide error is a stop with
 * status-not-retryable), and the try's class, reason and wait header (the one the verdict used) filled in.
 * Returns whether the failure class is retryable on its route (or the attempt succeeded): what
 * rf_outcome_of_stop needs at the end. p, facts, t and v must not be NULL; rng and budget as for rf_decide.
 */
RF_API bool rf_step_verdict(const rf_policy *p, const rf_facts *facts, rf_rng *rng, rf_retry_budget *budget, rf_try *t,
                            rf_verdict *v);

/*
 * Calls hook (may be NULL) with the try and the verdict; a hook that returns non-zero turns a retry into a stop
 * with reason stopped-by-caller (narrowing only: a stop never becomes a retry). Returns the hook's value (0 when
 * there is none; < 0: the hook failed).
 */
RF_API int rf_step_narrow(rf_attempt_hook hook, void *hook_ud, rf_try *t, rf_verdict *v);

/*
 * Ends request req: r->reason, outcome (rf_outcome_of_stop), ok, elapsed_ms and route; then, with a ledger,
 * appends its record (wall_ms its Unix-ms timestamp; r->status, body_len and tries as they are), a failure going
 * to r->ledger_error (never to the caller). r->body_len must be set before. ledger may be NULL.
 */
RF_API void rf_step_finish(const rf_policy *p, const rf_request *req, rf_reason reason, bool last_class_retryable,
                           int64_t elapsed_ms, int64_t wall_ms, rf_ledger *ledger, rf_response *r);

/* What the host's transport observed for one attempt. Strings are borrowed for the call. */
typedef struct rf_step_result {
    int status;                              /* 100..599, or 0 when no response came */
    rf_transport transport;                  /* RF_TRANSPORT_OK when a response came */
    const char *hints[RF_WAIT_HEADER_COUNT]; /* raw wait header values (NULL: absent); only those the route
                                                reads (retryAfter.headers) are used */
    const char *date;                        /* the Date header, or NULL */
    bool not_sent;                           /* no byte of the request left (a transparent retry may follow) */
    const char *error;                       /* the transport's message, or NULL */
    const char *peer; /* the "host:port" the attempt went to, or NULL; recorded in its try when rf_ledger_peer_ok */
    int64_t now_ms;   /* monotonic time at the attempt's end (also a ratio retry budget's clock: rf_facts.mono_ms) */
    int64_t wall_ms;  /* Unix time in ms (for HTTP-date Retry-After) */
    bool overloaded;  /* the response carried the route's propagation.overloadedHeader (rf_step.prop) */
    int grpc_status;  /* the response's grpc-status (a header or a trailer), 0..16 (rf_facts.grpc_status); 0: absent */
} rf_step_result;

/* One logical request driven by a host. Fill with rf_step_init; the request and response outlive it. */
typedef struct rf_step {
    const rf_policy *policy;
    const rf_request *req;
    /* resp's tries array is allocated by rf_step_init, grown by rf_step_after, freed by rf_response_clear */
    rf_response *resp;
    long route;                       /* req's route (rf_policy_match), matched once by rf_step_init */
    size_t tries_cap;                 /* room in resp->tries: from 1 up to RF_MAX_TRIES */
    bool reads[RF_WAIT_HEADER_COUNT]; /* the wait headers the route reads */
    int64_t start_ms, attempt_start_ms, delay_ms, timeout_ms;
    int attempts;
    bool last_class_retryable, done;
    rf_propagation prop; /* the route's propagation: the headers an attempt sends and the response's overloaded one */
    int64_t elapsed_shift_ms, timeout_cap_ms; /* the request's own limits: its deadline_ms, its inbound deadline and
                                                 its timeout_ms, as rf_client_request applies them */
    rf_budget_request budget_request;         /* the request's token for a ratio retry budget (rf_budget_request): its
                                                 decisions carry it, so the window counts the request once */
} rf_step;

/* Elapsed times are differences of the host's now_ms readings, computed without overflow: a reading earlier
 * than the start counts 0 ms, a difference beyond INT64_MAX counts INT64_MAX. */
/* Starts request req at now_ms (the host's monotonic clock). p, req and resp are borrowed and must outlive the step;
 * *resp is overwritten (zeroed or cleared before) and owns its tries until rf_response_clear. The request's own
 * limits narrow the route's as for rf_client_request: deadline_ms, timeout_ms and, with the route's propagation,
 * the inbound_headers' deadline (resp->inbound says what they said). RF_EINVAL (err->path "method", "path",
 * "deadline_ms" or "timeout_ms"): a missing method or one with a lowercase letter (RFC 9110 §9.1, as rf_budget), a
 * path not starting with '/', a limit that is negative or wider than the lock's; (err->path "headers") a header
 * line rf_request_header_check refuses (the step sends nothing, but the host sends req->headers); (err->path
 * "hedging") a request its route hedges (rf_policy_hedging: hedged) and whose inbound attempt does not leave it one
 * attempt (rf_request_hedging), whose attempts overlap, which a step of one attempt at a time cannot send.
 * RF_ENOMEM. err may be NULL. One thread at a time per step. */
RF_API rf_status rf_step_init(rf_step *s, const rf_policy *p, const rf_request *req, rf_response *resp, int64_t now_ms,
                              rf_error *err);
/* Before an attempt at now_ms: true and *timeout_ms (the per-try timeout, rf_budget), or false and *stop (the
 * request ends: call rf_step_end_request). */
RF_API bool rf_step_begin(rf_step *s, int64_t now_ms, int64_t *timeout_ms, rf_reason *stop);
/* The header lines the attempt rf_step_begin just allowed sends (its number, the ms it may take), into
 * lines[0..2): rf_propagation_lines for the route's propagation; 0 (none) without it. */
RF_API size_t rf_step_propagation_lines(const rf_step *s, char lines[2][RF_PROPAGATION_LINE_MAX]);
/* The numbers of those lines (rf_propagation_values): true and *attempt, *deadline_ms with the route's propagation;
 * false, writing nothing, without it. attempt and deadline_ms must not be NULL. */
RF_API bool rf_step_propagation_values(const rf_step *s, int *attempt, int64_t *deadline_ms);
/* After the attempt: records its try, decides (rf_step_verdict; only the wait headers the route reads are passed
 * on), lets the hook narrow (rf_step_narrow). true and *delay_ms: wait that long, then rf_step_begin again; false
 * and *stop: the request ends. *hook_rc is the hook's value (< 0: it failed). hook_rc, delay_ms and stop must not
 * be NULL. budget NULL: the lock's own (rf_policy_default_budget, shared by every step of the policy given none), so
 * a lock's retryBudget applies without asking; the step carries the request's token (rf_budget_request). */
RF_API bool rf_step_after(rf_step *s, const rf_step_result *res, rf_rng *rng, rf_retry_budget *budget,
                          rf_attempt_hook hook, void *hook_ud, int *hook_rc, int64_t *delay_ms, rf_reason *stop);
/* Records the attempt rf_step_begin allowed and no rf_step_after ended, which the host gave up at now_ms (its
 * transport raised, or it stops the request), as a try: status 0, class UNKNOWN, reason stopped-by-caller, error why
 * (copied, cut to the try's error field), its elapsed from the attempt's start; the attempt counts. Call it only
 * between those two, then end the request (rf_step_end_request, reason stopped-by-caller). A step already ended is
 * left as it is. */
RF_API void rf_step_cancel(rf_step *s, int64_t now_ms, const char *why);
/* Ends the request with reason stop at now_ms (monotonic) and wall_ms: rf_step_finish with the tries so far, on the
 * route rf_step_init matched (not matched again). */
RF_API void rf_step_end_request(rf_step *s, rf_reason stop, int64_t now_ms, int64_t wall_ms, rf_ledger *ledger);

#ifdef __cplusplus
}
#endif

#endif
