/*
 * Private to the client library: one logical request carried by libcurl (client_flow.c), the layer between the
 * client (client.c: lifecycle, the blocking request, curl multi) and the transport-free attempt loop
 * (attempt_step_internal.h), which it calls down into after each HTTP request. Prefix rfi_.
 */
#ifndef RETRYFREEZE_CLIENT_FLOW_H
#define RETRYFREEZE_CLIENT_FLOW_H

#include "attempt_step_internal.h"
#include "client_limits.h"
#include "client_network_internal.h"
#include "client_redirect.h"
#include "response_head.h"
#include <curl/curl.h>

/* What a flow takes from its client: the policy, the state all the client's requests share (the jitter RNG, the
 * retry budget) and the client's options a request reads. Owned by the client, which outlives its flows. */
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
} rfi_flow_env;

/* A growable byte buffer with a hard cap: an append past the cap fails and marks the buffer. */
typedef struct rfi_buf {
    char *data;
    size_t len, cap, max;
    bool overflow;
} rfi_buf;

typedef enum rfi_flow_state { RFI_FLOW_READY, RFI_FLOW_WAITING, RFI_FLOW_IN_FLIGHT, RFI_FLOW_DONE } rfi_flow_state;

/* One logical request moving through its attempts: READY → IN_FLIGHT → WAITING → READY … → DONE. */
typedef struct rfi_flow {
    rfi_flow_env *env;
    CURL *easy;
    rfi_attempts at; /* the request, its response and its attempts, as the attempt loop keeps them */
    rfi_limits limits;
    char *url;
    struct curl_slist *headers;
    struct curl_slist *attempt_headers; /* with the route's propagation: the list this attempt sends (the request's or
                                           the hop's, and its propagation lines), rebuilt for every attempt */
    rfi_flow_state state;
    int64_t start_ms, attempt_start_ms, wake_ms;
    rfi_buf body, head;
    rfi_response_head rh; /* the wait headers and Date of this attempt's response */
    char errbuf[CURL_ERROR_SIZE];
    rf_attempt_hook hook;
    void *hook_ud;
    bool hook_failed;
    int sends;           /* sends libcurl started in this attempt (CURLOPT_PREREQFUNCTION) */
    int responses;       /* response status lines received in this attempt */
    bool resend_blocked; /* libcurl's own resend was aborted */
    bool timed_out;      /* the client itself ended the attempt at its per-try timeout (rfi_flow_overdue) */
    rfi_hop hop;         /* the redirect being followed (zeroed: the request itself), reset when an attempt starts */
    int hops;            /* redirects followed in this attempt */
    bool in_hop;         /* the next request is a hop, not a new attempt */
    int64_t hop_timeout_ms;
    rfi_peer peer;
    int64_t done_wall_ms; /* when the flow ended: its ledger line's timestamp */
} rfi_flow;

/* Validates one "Name: value" header line (token name, no CR/LF/NUL, no raw Idempotency-Key). */
bool rfi_header_valid(const char *line, char *why, size_t why_cap);
/* A new easy handle for a client with env's options that all its requests share already set (callbacks,
 * protocols, TLS, proxy, User-Agent); NULL when memory runs out. */
CURL *rfi_easy_new(const rfi_flow_env *env);
/* Prepares a flow of req on easy (the URL, the header list, the route, the tries): RF_EINVAL (err->path the field)
 * for a bad request, RF_ENOMEM. The request and the response must outlive the flow; *resp is overwritten. */
rf_status rfi_flow_init(rfi_flow *f, rfi_flow_env *env, CURL *easy, const rf_request *req, rf_response *resp,
                        rf_attempt_hook hook, void *hook_ud, rf_error *err);
/* Asks rf_budget; when allowed, configures the easy handle for the next attempt and returns true (IN_FLIGHT);
 * otherwise the flow is DONE. */
bool rfi_flow_begin_attempt(rfi_flow *f);
/* Ends the attempt in flight with libcurl's result rc: WAITING (wake_ms) or DONE. */
void rfi_flow_end_attempt(rfi_flow *f, CURLcode rc);
/* True when an in-flight attempt has run past its per-try timeout (attempt start + timeout): the caller ends it
 * with rfi_flow_end_attempt(f, CURLE_OPERATION_TIMEDOUT) after marking it timed_out. */
bool rfi_flow_overdue(const rfi_flow *f, int64_t now_ms);
/* The finished request of a DONE flow, for the ledger writer (rfi_step_write). */
rfi_finished rfi_flow_finished(const rfi_flow *f);
/* Frees the flow's own resources (not the response). */
void rfi_flow_cleanup(rfi_flow *f);

#endif
