/*
 * Private to the client library: one logical request carried by libcurl (client_flow.c), the layer between the
 * client (client.c: lifecycle, the blocking request, curl multi) and the transport-free attempt loop
 * (attempt_step_internal.h), which it calls down into after each HTTP request. Prefix rfi_.
 */
#ifndef RETRYFREEZE_CLIENT_FLOW_H
#define RETRYFREEZE_CLIENT_FLOW_H

#include "../attempt/attempt_step_internal.h"
#include "../attempt/request_limits.h"
#include "client_network_internal.h"
#include "client_redirect.h"
#include "response_head.h"
#include <curl/curl.h>

/* What a flow takes from its client: the policy, the state all the client's requests share (the jitter RNG, the
 * retry budget, its spare easy handles) and the client's options a request reads. Owned by the client, which
 * outlives its flows. */
typedef struct rfi_flow_env {
    const rf_policy *policy;
    rf_rng rng;
    rf_retry_budget *budget; /* NULL without retry_budget */
    char *base_url;          /* without a trailing '/' */
    char **headers;          /* validated "Name: value" copies, sent with every request */
    size_t n_headers;
    bool follow_redirects;
    int max_redirects; /* followed 3xx per attempt, 1..RF_MAX_REDIRECTS */
    size_t max_body_bytes;
    rfi_network net;
    /* Easy handles no transfer uses, for the next request or hedge (rfi_easy_take): curl_easy_init and
     * curl_easy_cleanup per request cost more than the request itself on a fast upstream. A handle is this client's
     * only: the options all its requests share are set once (rfi_easy_new), and every attempt sets every other
     * option it or any request could have set (set_attempt_options), so nothing carries over. */
    CURL **idle;
    size_t n_idle, idle_cap;
    /* A curl multi pass under way (rfi_multi_pass): on_body pauses a transfer once the clock reaches pass_until_ms,
     * and links it on paused for the pass to resume. -1 outside a pass (curl_easy_perform is never paused). */
    int64_t pass_until_ms;
    struct rfi_wire *paused;
} rfi_flow_env;

/* How long one curl multi pass may read bodies before on_body pauses the transfers it is reading: libcurl reads a
 * readable transfer on and on within a pass (up to a hundred buffers each), so a pass over a hundred large bodies
 * took hundreds of ms, and an attempt past its per-try timeout that was not reading was only ended after it. */
#define RFI_PASS_SLICE_MS 5

/* A growable byte buffer with a hard cap: an append past the cap fails and marks the buffer. */
typedef struct rfi_buf {
    char *data;
    size_t len, cap, max;
    bool overflow;
} rfi_buf;

typedef enum rfi_flow_state { RFI_FLOW_READY, RFI_FLOW_WAITING, RFI_FLOW_IN_FLIGHT, RFI_FLOW_DONE } rfi_flow_state;

struct rfi_flow;

/* One attempt on the wire: its easy handle and what it has read. A flow's first wire is its own; a hedged request
 * (several attempts in flight at once, gRPC A6 hedging) takes more from its client's spare handles as it hedges. */
typedef struct rfi_wire {
    struct rfi_flow *flow;
    CURL *easy;
    rfi_buf body, head;
    rfi_response_head rh; /* the wait headers and Date of this attempt's response */
    struct curl_slist
        *attempt_headers; /* with the route's propagation: the list this attempt sends (the request's or
                             the hop's, and its propagation lines), rebuilt for every attempt; else NULL */
    char errbuf[CURL_ERROR_SIZE];
    int sends;                    /* sends libcurl started in this attempt (CURLOPT_PREREQFUNCTION) */
    int responses;                /* response status lines received in this attempt */
    bool resend_blocked;          /* libcurl's own resend was aborted */
    bool timed_out;               /* the client itself ended the attempt at its per-try timeout (rfi_wire_overdue) */
    bool busy;                    /* a transfer is in flight on it */
    bool in_multi;                /* its handle is in the client's curl multi (client.c sets and clears it) */
    bool hedge;                   /* started by the hedging delay, beside attempts still in flight */
    bool paused;                  /* on_body paused it to end a long pass; on the env's paused list */
    struct rfi_wire *next_paused; /* the next on that list */
    CURLcode resume_rc;           /* what curl_easy_pause said when the pass resumed it: not OK ends the attempt so */
    int64_t start_ms;             /* when its transfer started (CLOCK_MONOTONIC) */
    int64_t delay_ms, timeout_ms; /* the wait before it, and its per-try timeout */
    rfi_peer peer;
} rfi_wire;

/* Most attempts one request has on the wire at once: a route's maxAttempts at most (hedging.maxAttempts). */
#define RFI_MAX_WIRES 10

/* One logical request moving through its attempts: READY → IN_FLIGHT → WAITING → READY … → DONE. A hedged request
 * may have several wires IN_FLIGHT, and start one more while it is (rfi_flow_start_due). */
typedef struct rfi_flow {
    rfi_flow_env *env;
    rfi_wire wire;                     /* its first wire: the only one of a request that is not hedged */
    rfi_wire *more[RFI_MAX_WIRES - 1]; /* a hedged request's other wires, made as it hedges */
    rfi_attempts at;                   /* the request, its response and its attempts, as the attempt loop keeps them */
    rfi_limits limits;
    char *url;
    struct curl_slist *headers;
    rfi_flow_state state;
    int64_t start_ms, wake_ms;
    int64_t first_start_ms; /* when its first attempt started (a try's start_ms counts from it); -1 before */
    rf_attempt_hook hook;
    void *hook_ud;
    bool hook_failed;
    rfi_hop hop; /* the redirect being followed (zeroed: the request itself), reset when an attempt starts */
    int hops;    /* redirects followed in this attempt */
    bool in_hop; /* the next request is a hop, not a new attempt */
    int64_t hop_timeout_ms;
    int64_t done_wall_ms; /* when the flow ended: its ledger line's timestamp */
    /* Hedging (rf_policy_hedging): */
    rf_hedging hedging;
    int in_flight;      /* wires busy */
    int hedges;         /* hedges started */
    bool hedge_stopped; /* no more hedges: refused (throttled, the deadline, …) or the server said stop */
    int64_t hedge_at;   /* when the next hedge may start: the last start + hedgingDelayMs, or a wait a server asked */
    int64_t retry_at;   /* a retry a verdict allowed while others were in flight: when it starts; -1 none */
    rfi_wire *last;     /* the wire whose response came last: the answer when the request ends without a winner */
} rfi_flow;

/* A new easy handle for a client with env's options that all its requests share already set (callbacks,
 * protocols, TLS, proxy, User-Agent); NULL when memory runs out. */
CURL *rfi_easy_new(const rfi_flow_env *env);
/* A spare easy handle of env's, or a new one (NULL when memory runs out). */
CURL *rfi_easy_take(rfi_flow_env *env);
/* Keeps easy (no transfer uses it) for the next request, or frees it when memory runs out. */
void rfi_easy_give(rfi_flow_env *env, CURL *easy);
/* Prepares a flow of req on easy (the URL, the header list, the route, the tries, its hedging): RF_EINVAL
 * (err->path the field) for a bad request, RF_ENOMEM. The request and the response must outlive the flow; *resp is
 * overwritten. */
rf_status rfi_flow_init(rfi_flow *f, rfi_flow_env *env, CURL *easy, const rf_request *req, rf_response *resp,
                        rf_attempt_hook hook, void *hook_ud, rf_error *err);
/*
 * What is due at now: a READY flow's next attempt (rf_budget; refused: the flow is DONE), or, in a hedged request
 * with attempts in flight, a retry a verdict allowed or a hedge its delay allows (rf_hedge_decide; refused: no more
 * hedges). Returns the wire that started (its easy handle is to be performed: configured for this attempt), or NULL
 * when nothing started. Call again until NULL: a hedged request may start more than one.
 */
rfi_wire *rfi_flow_start_due(rfi_flow *f, int64_t now);
/* When the flow next needs rfi_flow_start_due or its per-try timeouts checked: a WAITING flow's wake, a hedged
 * request's next hedge or retry, the earliest per-try timeout in flight; -1 when DONE. */
int64_t rfi_flow_next_ms(const rfi_flow *f);
/* Ends the attempt in flight on w with libcurl's result rc: the flow is then WAITING (wake_ms), DONE, or, hedged,
 * still IN_FLIGHT on its other wires. A response that ends a hedged request cancels its other attempts: their tries
 * are recorded as cancelled and their wires left busy no more, for the caller to take their handles out of the multi
 * (in_multi and not busy: the transfer is aborted). */
void rfi_flow_end_attempt(rfi_flow *f, rfi_wire *w, CURLcode rc);
/* Ends f now, with reason, whatever it was doing (a flow already DONE stays as it is): no further attempt starts and
 * no hook runs; an attempt in flight is recorded as a try cancelled with error why (a string that outlives the call:
 * the try copies it), its wire left idle for the caller to take its handle out of the multi (the transfer is
 * aborted, as rfi_flow_end_attempt's cancelled hedges are); a request waiting between attempts keeps its last try.
 * For a caller that must stop its requests (a hook failed) and still owes each its ledger line. */
void rfi_flow_stop(rfi_flow *f, rf_reason reason, const char *why);
/* True when w's attempt has run past its per-try timeout (start + timeout): the caller ends it with
 * rfi_flow_end_attempt(f, w, CURLE_OPERATION_TIMEDOUT) after marking it timed_out. */
bool rfi_wire_overdue(const rfi_wire *w, int64_t now_ms);
/* One curl_multi_perform on multi, whose transfers are env's, bounded by RFI_PASS_SLICE_MS (on_body pauses what it
 * is reading after that); then the transfers paused in it resume, their kept chunk taken. Every driver of a multi
 * calls this instead of curl_multi_perform. */
void rfi_multi_pass(CURLM *multi, rfi_flow_env *env);
/* The flow's wires that have an easy handle, into out[] (at most RFI_MAX_WIRES); returns how many. */
size_t rfi_flow_wires(rfi_flow *f, rfi_wire **out);
/* The earlier of two times a and b (ms), -1 standing for none. */
int64_t rfi_earlier(int64_t a, int64_t b);
/* The finished request of a DONE flow, for the ledger writer (rfi_step_write). */
rfi_finished rfi_flow_finished(const rfi_flow *f);
/* Gives the easy handles of a hedged request's other wires back to env (its first wire's handle stays the
 * caller's). */
void rfi_flow_release_wires(rfi_flow *f);
/* Frees the flow's own resources (not the response, not its wires' easy handles). */
void rfi_flow_cleanup(rfi_flow *f);

#endif
