/* Private to the client files (core/src/client*.c): the per-request attempt state machine. */
#ifndef RETRYFREEZE_CLIENT_INTERNAL_H
#define RETRYFREEZE_CLIENT_INTERNAL_H

#include "retryfreeze/client.h"
#include "response_head.h"
#include "../util/clock_ms.h"
#include <curl/curl.h>

/* A growable byte buffer with a hard cap: an append past the cap fails and marks the buffer. */
typedef struct rfi_buf {
    char *data;
    size_t len, cap, max;
    bool overflow;
} rfi_buf;

/* The client's network settings, owned copies (client_network.c). */
typedef struct rfi_network {
    char *ca_file, *ca_path, *cert, *key, *key_password, *proxy, *user_agent;
    bool no_verify;
    int64_t connect_timeout_ms; /* 0: the per-try timeout */
    rf_http_version http_version;
} rfi_network;

struct rf_client {
    const rf_policy *policy;
    char *base_url;
    rf_ledger *ledger;
    char **headers; /* validated "Name: value" copies */
    size_t n_headers;
    CURL *easy; /* reused for sequential requests: keep-alive */
    rf_rng rng;
    rf_retry_budget *budget; /* NULL without retry_budget */
    bool owns_budget;        /* false when the caller passed its own (options.budget) */
    bool follow_redirects;
    int max_redirects; /* followed 3xx per attempt, 1..RF_MAX_REDIRECTS */
    size_t max_body_bytes;
    rfi_network net;
    CURLM *multi;             /* for started (asynchronous) requests; created on first use */
    struct rf_pending *first; /* started requests not yet reported done: a doubly linked list */
    size_t n_pending;
    /* Easy handles of finished started requests, reused by the next rf_client_start: curl_easy_init and
     * curl_easy_cleanup per request cost more than the request itself on a fast upstream. A handle is this
     * client's only: the options all its requests share are set once (rfi_easy_new), and every attempt sets
     * every other option it or any request could have set (rfi_flow_begin_attempt), so nothing carries over. */
    CURL **idle;
    size_t n_idle, idle_cap;
    /* Started requests reported done whose caller has not freed them yet: a doubly linked list, so that
     * rf_client_free can tell each it has no client any more (client.c). */
    struct rf_pending *reported;
    /* Freed reported requests kept for the next rf_client_start (a singly linked list through next, at most
     * RFI_SPARE_PENDING): an rf_pending is a few kB (its response head), and malloc + free per request cost
     * more than a fast request's own work in the client. rf_client_start initializes every field. */
    struct rf_pending *spare;
    size_t n_spare;
    /* The ledger lines of one rf_client_run's reported requests, built here and appended in one batch
     * (rfi_client_write_ledger): arrays of batch_cap, at most 64 (BATCH_RECORDS, client.c). */
    rf_ledger_record *batch_recs;
    const rf_ledger_record **batch_ptrs;
    rf_status *batch_status;
    rf_error *batch_errs;
    size_t batch_cap;
};

typedef enum rfi_flow_state { RFI_FLOW_READY, RFI_FLOW_WAITING, RFI_FLOW_IN_FLIGHT, RFI_FLOW_DONE } rfi_flow_state;

/* One logical request moving through its attempts. */
typedef struct rfi_flow {
    rf_client *c;
    CURL *easy;
    const rf_request *req;
    rf_response *resp;
    char *url;
    struct curl_slist *headers;
    rfi_flow_state state;
    int64_t start_ms, attempt_start_ms, wake_ms, delay_ms, timeout_ms;
    int attempts;
    rfi_buf body, head;
    /* The wait headers and Date of this attempt's response (response_head.h), and which wait headers the
     * route reads (retryAfter.headers): only those become facts.hints. */
    rfi_response_head rh;
    bool reads[RF_WAIT_HEADER_COUNT];
    char errbuf[CURL_ERROR_SIZE];
    rf_attempt_hook hook;
    void *hook_ud;
    bool hook_failed;
    int sends;           /* sends libcurl started in this attempt (CURLOPT_PREREQFUNCTION) */
    int responses;       /* response status lines received in this attempt */
    bool resend_blocked; /* libcurl's own resend was aborted */
    bool timed_out;      /* the client itself ended the attempt at its per-try timeout (rfi_flow_overdue) */
    size_t tries_cap;    /* room in resp->tries */
    int requests;        /* HTTP requests sent so far (attempts + followed hops): the response's attempts */
    /* The redirect being followed (client_redirect.c); all reset when an attempt starts from the top. */
    char *hop_url;                  /* NULL: the request's own URL (and headers): not a hop */
    struct curl_slist *hop_headers; /* a hop's headers (NULL: none, when every one was dropped for another origin) */
    const char *hop_method;         /* NULL: the request's own method; else "GET" or "HEAD" (a literal) */
    bool hop_body;                  /* the hop sends the request's body (if it has one) */
    int hops;                       /* redirects followed in this attempt */
    bool in_hop;                    /* the next request is a hop, not a new attempt */
    int64_t hop_timeout_ms;         /* its per-try timeout, from rf_redirect_verdict */
    bool last_class_retryable;      /* the last attempt's failure class is retryable (true before any failure) */
    int64_t elapsed_shift_ms;       /* totalBudgetMs - the request's deadline_ms (client_limits.c); 0: none */
    int64_t req_timeout_ms;         /* the request's timeout_ms; 0: the lock's */
    char connected_ip[64];          /* the address of the last connection libcurl tried (CURLOPT_OPENSOCKETFUNCTION) */
    int connected_port;
    /* Set when the flow ends with a ledger: its line is written when it is reported (rf_client_run batches the
     * lines of the requests it reports into few write(2)s), or when it is freed unreported. */
    long route; /* rf_policy_match of the request's method and path (-1: none), matched once in rfi_flow_init */
    bool ledger_due;
    int64_t done_wall_ms; /* the line's timestamp: when the flow ended */
} rfi_flow;

/* A started request: its flow, its own easy handle, its place in the client's list. */
/* Most freed requests a client keeps for reuse (rf_client.spare). */
#define RFI_SPARE_PENDING 64

struct rf_pending {
    rfi_flow flow;
    rf_client *c; /* NULL once the client is freed (a reported request may outlive it) */
    struct rf_pending *prev, *next;
    bool in_multi, reported;
};

/* Validates one "Name: value" header line (token name, no CR/LF/NUL). */
bool rfi_header_valid(const char *line, char *why, size_t why_cap);
/* Prepares a flow (URL, header list); the request and response must outlive it. */
rf_status rfi_flow_init(rfi_flow *f, rf_client *c, CURL *easy, const rf_request *req, rf_response *resp,
                        rf_attempt_hook hook, void *hook_ud, rf_error *err);
/* Asks rf_budget; when allowed, configures the easy handle for the next attempt and returns true (IN_FLIGHT);
 * otherwise the flow is DONE. */
bool rfi_flow_begin_attempt(rfi_flow *f);
/* Records the finished attempt, asks rf_decide, and moves to WAITING (wake_ms) or DONE. */
void rfi_flow_end_attempt(rfi_flow *f, CURLcode rc);
/* Copies and checks opts->network into c->net (env CA variables resolved, the user agent built); prints the
 * tls_no_verify warning. RF_EINVAL names the option; RF_ENOMEM. */
rf_status rfi_network_init(rf_client *c, const rf_client_options *opts, rf_error *err);
void rfi_network_free(rf_client *c);
/* Sets the network options that are the same for every request of client c (TLS, proxy, User-Agent, the socket
 * callback) on easy handle e: once, when the handle is made (rfi_easy_new). */
void rfi_network_handle(const rf_client *c, CURL *e);
/* Sets the network options of one request of flow f with per-try timeout timeout_ms (connect timeout, HTTP
 * version, the socket callback's data). */
void rfi_network_apply(rfi_flow *f, CURL *e, int64_t timeout_ms);
/* A new easy handle for client c with the options every request of c shares already set (rfi_flow_handle and
 * rfi_network_handle); NULL when memory runs out. */
CURL *rfi_easy_new(const rf_client *c);
/* Sets the options every request of c shares on e (client_flow.c): the callbacks, protocols, no signals. */
void rfi_flow_handle(const rf_client *c, CURL *e);
/* Refines a failed request's transport outcome and error text (TLS: which verification failed, a TLS alert
 * during the exchange; a refused connection to the proxy); error holds curl's message on entry. */
rf_transport rfi_network_refine(rfi_flow *f, CURLcode rc, rf_transport transport, char *error, size_t cap);
/* Per-request limits (client_limits.c): checks deadline_ms and timeout_ms against the route (RF_EINVAL names
 * the lock's limit when one is wider); the elapsed time the engine is told; the per-try timeout narrowed. */
rf_status rfi_limits_init(rfi_flow *f, rf_error *err);
int64_t rfi_limits_elapsed(const rfi_flow *f, int64_t elapsed_ms);
int64_t rfi_limits_timeout(const rfi_flow *f, int64_t timeout_ms);
/* A status the flow follows when follow_redirects is on: 301, 302, 303, 307, 308 (RFC 9110 §15.4). */
bool rfi_redirect_status(int status);
/* Prepares the next hop to location (absolute, from CURLINFO_REDIRECT_URL) after a 3xx with this status:
 * method, body, headers by RFC 9110 §15.4. False (nothing changed) when location is absent, not http(s), or
 * memory ran out: the 3xx is then the response. */
bool rfi_redirect_prepare(rfi_flow *f, int status, const char *location);
/* Forgets the hop state: the next request is the request itself. */
void rfi_redirect_reset(rfi_flow *f);
/* True when an in-flight attempt has run past its per-try timeout (attempt start + timeout_ms): the caller
 * ends it with rfi_flow_end_attempt(f, CURLE_OPERATION_TIMEDOUT) after marking it timed_out. */
bool rfi_flow_overdue(const rfi_flow *f, int64_t now_ms);
/* Frees the flow's own resources (not the response). */
void rfi_flow_cleanup(rfi_flow *f);
/* rf_step_verdict and rf_step_finish with the request's route already matched (rf_policy_match of its method
 * and path, -1 for none): the client matches it once per request (rfi_flow.route), not once per call
 * (rf_decide_on_route). */
bool rfi_step_verdict_on_route(const rf_policy *p, long route, const rf_facts *facts, rf_rng *rng,
                               rf_retry_budget *budget, rf_try *t, rf_verdict *v);
void rfi_step_finish_on_route(const rf_policy *p, long route, const rf_request *req, rf_reason reason,
                              bool last_class_retryable, int64_t elapsed_ms, int64_t wall_ms, rf_ledger *ledger,
                              rf_response *r);
/* The ledger record of finished request req with response r (rf_step_finish's), stamped wall_ms; its strings are
 * those of p, req and r (attempt_step.c). */
void rfi_step_record(const rf_policy *p, const rf_request *req, const rf_response *r, int64_t wall_ms,
                     rf_ledger_record *rec);
/* Puts a failed append's error into r->ledger_error. */
void rfi_step_ledger_error(rf_response *r, const rf_error *err);
/* Appends the ledger line of a finished flow whose line is still due (f->ledger_due), alone. */
void rfi_flow_write_ledger(rfi_flow *f);
/* Appends the due ledger lines of the finished requests done[0..n) with as few write(2) as the ledger can
 * (rf_ledger_append_batch): called just before rf_client_run reports them, so a request's line is in the
 * file before anyone can see its response. */
void rfi_client_write_ledger(rf_client *c, rf_pending **done, size_t n);

#endif
