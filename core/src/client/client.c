/*
 * The client: lifecycle, the blocking request (one reused easy handle: keep-alive) and rf_client_all
 * (curl multi, one easy handle per request, each request under its own attempt loop).
 */
#define _POSIX_C_SOURCE 200809L
#include "retryfreeze/client.h"
#include "client_flow.h"
#include "../util/clock_ms.h"
#include "../util/report.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_MAX_BODY (16u * 1024u * 1024u)

/* Most freed requests a client keeps for reuse (rf_client.spare). */
#define SPARE_PENDING 64

struct rf_client {
    rfi_flow_env env; /* the policy, the RNG, the retry budget and the options every flow reads */
    rf_ledger *ledger;
    CURL *easy;               /* reused for sequential requests: keep-alive */
    bool owns_budget;         /* false when the caller passed its own (options.budget) */
    CURLM *multi;             /* for started (asynchronous) requests; created on first use */
    CURLM *solo;              /* for a blocking request that hedges (attempts in flight at once); on first use */
    struct rf_pending *first; /* started requests not yet reported done: a doubly linked list */
    size_t n_pending;
    /* Started requests reported done whose caller has not freed them yet: a doubly linked list, so that
     * rf_client_free can tell each it has no client any more. */
    struct rf_pending *reported;
    /* Freed reported requests kept for the next rf_client_start (a singly linked list through next, at most
     * SPARE_PENDING): an rf_pending is a few kB (its response head), and malloc + free per request cost more than
     * a fast request's own work in the client. rf_client_start initializes every field. */
    struct rf_pending *spare;
    size_t n_spare;
    rfi_batch batch; /* the ledger lines of one rf_client_run's reported requests, built here and written together */
};

/* A started request: its flow (with its wires' easy handles), its place in the client's list. */
struct rf_pending {
    rfi_flow flow;
    rf_client *c; /* NULL once the client is freed (a reported request may outlive it) */
    struct rf_pending *prev, *next;
    bool reported;
    bool logged; /* its ledger line is written (or it has none to write) */
};
/* A transfer names its wire, the wire its flow: the flow is the first member, so the flow is its rf_pending. */
_Static_assert(offsetof(struct rf_pending, flow) == 0, "rf_pending starts with its flow");

rf_status rf_client_new(const rf_client_options *opts, rf_client **out, rf_error *err) {
    if (opts == NULL || out == NULL) return rfi_fail(err, "", "options and out must not be NULL");
    if (opts->policy == NULL) return rfi_fail(err, "policy", "is required");
    const char *u = opts->base_url;
    if (u == NULL || (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) || strpbrk(u, " \r\n") != NULL)
        return rfi_fail(err, "base_url", "must be an http:// or https:// URL without spaces");
    if (opts->max_redirects < 0 || opts->max_redirects > RF_MAX_REDIRECTS)
        return rfi_fail(err, "max_redirects", "must be 1..30 (0 = the default, 10)");
    /* Asked for a budget the lock does not define: refused, not silently inert (the caller would believe
     * retries are throttled when nothing throttles them). */
    if (opts->retry_budget && !rf_policy_retry_budget(opts->policy, NULL, NULL))
        return rfi_fail(err, "retry_budget", "is true, but the lock has no retryBudget to take the budget from");
    for (size_t i = 0; i < opts->n_headers; i++)
        if (rf_request_header_check(opts->headers[i], err) != RF_OK) return RF_EINVAL;
    curl_global_init(CURL_GLOBAL_DEFAULT); /* reference-counted and thread-safe in libcurl >= 7.84 */
    rf_client *c = calloc(1, sizeof *c);
    if (c == NULL) goto nomem;
    rfi_flow_env *env = &c->env;
    env->pass_until_ms = -1; /* no curl multi pass under way */
    env->policy = opts->policy;
    c->ledger = opts->ledger;
    env->follow_redirects = opts->follow_redirects;
    env->max_redirects = opts->max_redirects ? opts->max_redirects : 10;
    env->max_body_bytes = opts->max_body_bytes ? opts->max_body_bytes : DEFAULT_MAX_BODY;
    rf_rng_seed(&env->rng, opts->rng_seed);
    size_t ulen = strlen(u);
    while (ulen > 0 && u[ulen - 1] == '/') ulen--; /* paths start with '/' */
    env->base_url = malloc(ulen + 1);
    env->headers = calloc(opts->n_headers + 1, sizeof *env->headers);
    if (env->base_url == NULL || env->headers == NULL) goto nomem;
    memcpy(env->base_url, u, ulen);
    env->base_url[ulen] = '\0';
    for (size_t i = 0; i < opts->n_headers; i++) {
        env->headers[i] = strdup(opts->headers[i]);
        if (env->headers[i] == NULL) goto nomem;
        env->n_headers++;
    }
    if (opts->budget != NULL) {
        env->budget = opts->budget;
    } else if (rf_policy_retry_budget(opts->policy, NULL, NULL)) { /* the lock's budget applies without asking */
        if ((env->budget = rf_retry_budget_new(opts->policy)) == NULL) goto nomem;
        c->owns_budget = true;
    }
    rf_status nst = rfi_network_init(&env->net, &opts->network, env->base_url, err);
    if (nst != RF_OK) {
        rf_client_free(c);
        return nst;
    }
    if ((c->easy = rfi_easy_new(env)) == NULL) goto nomem; /* after the network settings it carries */
    *out = c;
    return RF_OK;
nomem:
    rf_client_free(c);
    if (c == NULL) curl_global_cleanup();
    rfi_fail(err, "client", "out of memory");
    return RF_ENOMEM;
}

void rf_client_free(rf_client *c) {
    if (c == NULL) return;
    while (c->first) rf_pending_free(c->first);                     /* abandoned started requests */
    for (rf_pending *p = c->reported, *next; p != NULL; p = next) { /* outlive the client: their caller frees them */
        next = p->next;
        p->c = NULL;
        p->prev = p->next = NULL;
    }
    while (c->spare) {
        rf_pending *p = c->spare;
        c->spare = p->next;
        free(p);
    }
    if (c->multi) curl_multi_cleanup(c->multi);
    if (c->solo) curl_multi_cleanup(c->solo);
    if (c->easy) curl_easy_cleanup(c->easy);
    for (size_t i = 0; i < c->env.n_idle; i++) curl_easy_cleanup(c->env.idle[i]);
    free(c->env.idle);
    rfi_batch_free(&c->batch);
    for (size_t i = 0; i < c->env.n_headers; i++) free(c->env.headers[i]);
    free(c->env.headers);
    free(c->env.base_url);
    rfi_network_free(&c->env.net);
    if (c->owns_budget) rf_retry_budget_free(c->env.budget);
    free(c);
    curl_global_cleanup();
}

int64_t rf_client_retry_tokens_milli(const rf_client *c) {
    return c && c->env.budget ? rf_retry_budget_tokens_milli(c->env.budget) : -1;
}

bool rf_client_budget_window(const rf_client *c, int64_t mono_ms, rf_budget_window *out) {
    return rf_retry_budget_window(c ? c->env.budget : NULL, mono_ms, out);
}

static void sleep_ms(int64_t ms) {
    if (ms <= 0) return;
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* ---- driving flows on a curl multi ----------------------------------------------------------------------- */

/* Adds to multi every transfer f has due at now (rfi_flow_start_due); true when any was added. */
static bool plug_due(CURLM *multi, rfi_flow *f, int64_t now) {
    bool added = false;
    for (rfi_wire *w; (w = rfi_flow_start_due(f, now)) != NULL; added = true) {
        curl_multi_add_handle(multi, w->easy);
        w->in_multi = true;
    }
    return added;
}

/* Takes out of multi the handles of f's wires no transfer uses any more: a hedged request's attempts cancelled when
 * another's response ended it (their transfers are aborted here). */
static void unplug_idle(CURLM *multi, rfi_flow *f) {
    rfi_wire *wires[RFI_MAX_WIRES];
    size_t n = rfi_flow_wires(f, wires);
    for (size_t i = 0; i < n; i++) {
        if (!wires[i]->in_multi || wires[i]->busy) continue;
        curl_multi_remove_handle(multi, wires[i]->easy);
        wires[i]->in_multi = false;
    }
}

/* A transfer multi reports done: its attempt ends, then the transfers that ending cancelled are taken out. */
static void end_transfer(CURLM *multi, const CURLMsg *msg) {
    rfi_wire *w = NULL;
    CURL *easy = msg->easy_handle;
    CURLcode rc = msg->data.result;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&w); /* CURLOPT_PRIVATE is the wire */
    curl_multi_remove_handle(multi, easy);
    if (w == NULL) return;
    w->in_multi = false;
    rfi_flow_end_attempt(w->flow, w, rc);
    unplug_idle(multi, w->flow);
}

/* Drains multi's finished transfers (end_transfer); true when any. A handle taken out on the way (a cancelled
 * attempt) has its message taken out with it by libcurl. */
static bool end_finished(CURLM *multi) {
    CURLMsg *msg;
    int left;
    bool any = false;
    while ((msg = curl_multi_info_read(multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE) continue;
        end_transfer(multi, msg);
        any = true;
    }
    return any;
}

/* libcurl checks a transfer's timer only when driven, and from when it first drove it: an attempt of f still in
 * flight past its own per-try timeout (the caller was busy between calls) ends here, as a timeout. Called after the
 * messages are drained, so no message can name a handle removed here. True when any ended. */
static bool end_overdue(CURLM *multi, rfi_flow *f, int64_t now) {
    rfi_wire *wires[RFI_MAX_WIRES];
    size_t n = rfi_flow_wires(f, wires);
    bool ended = false;
    for (size_t i = 0; i < n; i++) {
        rfi_wire *w = wires[i];
        if (!w->in_multi || !rfi_wire_overdue(w, now)) continue;
        curl_multi_remove_handle(multi, w->easy);
        w->in_multi = false;
        w->timed_out = true;
        rfi_flow_end_attempt(f, w, CURLE_OPERATION_TIMEDOUT);
        unplug_idle(multi, f);
        ended = true;
    }
    return ended;
}

/* A blocking request that hedges: its attempts overlap, so it runs on the client's own multi until it is DONE; then
 * its other wires' handles go back to the client. */
static void run_hedged(CURLM *multi, rfi_flow *f) {
    while (f->state != RFI_FLOW_DONE) {
        plug_due(multi, f, rfi_mono_ms());
        if (f->state == RFI_FLOW_DONE) break;
        rfi_multi_pass(multi, f->env);
        bool progressed = end_finished(multi);
        progressed = end_overdue(multi, f, rfi_mono_ms()) || progressed;
        if (progressed) continue;
        int64_t next = rfi_flow_next_ms(f), wait = next < 0 ? 100 : next - rfi_mono_ms();
        curl_multi_poll(multi, NULL, 0, (int)(wait < 0 ? 0 : wait > 100 ? 100 : wait), NULL);
    }
    rfi_flow_release_wires(f);
}

rf_status rf_client_request(rf_client *c, const rf_request *req, rf_attempt_hook hook, void *hook_ud, rf_response *out,
                            rf_error *err) {
    if (c == NULL || req == NULL || out == NULL)
        return rfi_fail(err, "", "client, request and response must not be NULL");
    rf_error local;
    if (err == NULL) err = &local;
    rfi_flow f;
    rf_status st = rfi_flow_init(&f, &c->env, c->easy, req, out, hook, hook_ud, err);
    if (st != RF_OK) return st;
    if (f.hedging.hedged) {
        if (c->solo == NULL && (c->solo = curl_multi_init()) == NULL) {
            free(out->tries);
            out->tries = NULL;
            rfi_flow_cleanup(&f);
            return rfi_report(err, RF_ENOMEM, "client", "out of memory");
        }
        run_hedged(c->solo, &f);
    }
    while (f.state != RFI_FLOW_DONE) {
        if (f.state == RFI_FLOW_WAITING) sleep_ms(f.wake_ms - rfi_mono_ms());
        rfi_wire *w = rfi_flow_start_due(&f, rfi_mono_ms());
        if (w != NULL) rfi_flow_end_attempt(&f, w, curl_easy_perform(w->easy));
    }
    if (c->ledger != NULL) {
        rfi_finished done = rfi_flow_finished(&f);
        rfi_step_write(c->ledger, c->env.policy, &done, 1, NULL);
    }
    bool hook_failed = f.hook_failed;
    rfi_flow_cleanup(&f);
    if (hook_failed) return rfi_fail(err, "on_attempt", "the attempt hook failed");
    return RF_OK;
}

rf_status rf_client_start(rf_client *c, const rf_request *req, rf_attempt_hook hook, void *hook_ud, rf_response *out,
                          rf_pending **pending, rf_error *err) {
    if (c == NULL || req == NULL || out == NULL || pending == NULL)
        return rfi_fail(err, "", "client, request, response and pending must not be NULL");
    rf_error local;
    if (err == NULL) err = &local;
    if (c->multi == NULL && (c->multi = curl_multi_init()) == NULL) goto nomem;
    rf_pending *p = c->spare; /* a freed one, or a new one: rfi_flow_init and the lines below set every field */
    if (p != NULL) {
        c->spare = p->next;
        c->n_spare--;
    } else {
        p = malloc(sizeof *p);
    }
    CURL *easy = p == NULL ? NULL : rfi_easy_take(&c->env);
    if (easy == NULL) {
        free(p);
        goto nomem;
    }
    rf_status st = rfi_flow_init(&p->flow, &c->env, easy, req, out, hook, hook_ud, err);
    if (st != RF_OK) {
        rfi_easy_give(&c->env, easy);
        free(p);
        return st;
    }
    p->c = c;
    p->reported = false;
    p->logged = c->ledger == NULL; /* without a ledger there is no line to write */
    p->prev = NULL;
    p->next = c->first;
    if (c->first) c->first->prev = p;
    c->first = p;
    c->n_pending++;
    *pending = p;
    return RF_OK;
nomem:
    rfi_fail(err, "client", "out of memory");
    return RF_ENOMEM;
}

/* Takes p out of its client's list of unreported (or, once reported, of reported) requests. */
static void unlink_pending(rf_pending *p) {
    rf_client *c = p->c;
    rf_pending **head = p->reported ? &c->reported : &c->first;
    if (p->prev)
        p->prev->next = p->next;
    else if (*head == p)
        *head = p->next;
    if (p->next) p->next->prev = p->prev;
    p->prev = p->next = NULL;
    if (!p->reported) c->n_pending--;
}

/* Writes the ledger lines of the ended requests done[0..n) whose lines are still due, together (rfi_step_write,
 * in few write(2)s with a batch): just before rf_client_run reports them, so a request's line is in the file
 * before anyone can see its response. */
static void write_lines(rf_client *c, rf_pending **done, size_t n, rfi_batch *batch) {
    rfi_finished due[64]; /* a chunk of them at a time: the writer batches 64 lines per write anyway */
    for (size_t from = 0; from < n; from += 64) {
        size_t m = 0;
        for (size_t i = from; i < n && i < from + 64; i++) {
            if (done[i]->logged) continue;
            done[i]->logged = true;
            due[m++] = rfi_flow_finished(&done[i]->flow);
        }
        rfi_step_write(c->ledger, c->env.policy, due, m, batch);
    }
}

/* Reports p, whose flow is DONE: off the started list onto the reported one, until the caller frees it. Its
 * transfers are over (its handles out of the multi): the handles go back to the client now, so a reported request
 * never needs its client again (it may be freed after the client, rf_pending_free). */
static void report(rf_client *c, rf_pending *p) {
    unlink_pending(p);
    p->reported = true;
    p->next = c->reported;
    if (c->reported) c->reported->prev = p;
    c->reported = p;
    rfi_easy_give(&c->env, p->flow.wire.easy);
    p->flow.wire.easy = NULL;
    rfi_flow_release_wires(&p->flow);
}

size_t rf_client_run(rf_client *c, int timeout_ms, rf_pending **done, size_t cap) {
    if (c == NULL || c->first == NULL || done == NULL || cap == 0) return 0;
    int64_t until = rfi_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    size_t n_done = 0;
    for (;;) {
        int64_t now = rfi_mono_ms(), next_wake = -1;
        bool added = false;
        for (rf_pending *p = c->first, *next; p != NULL; p = next) {
            next = p->next;
            rfi_flow *f = &p->flow;
            added = plug_due(c->multi, f, now) || added;
            int64_t wake = rfi_flow_next_ms(f);
            if (wake >= 0 && (next_wake < 0 || wake < next_wake)) next_wake = wake;
            if (f->state == RFI_FLOW_DONE && !p->reported && n_done < cap) {
                report(c, p);
                done[n_done++] = p;
            }
        }
        if (n_done > 0 || c->first == NULL) {
            if (added) rfi_multi_pass(c->multi, &c->env); /* start them now: their timers run from here */
            write_lines(c, done, n_done, &c->batch);      /* their lines, before the caller sees them */
            break;
        }
        rfi_multi_pass(c->multi, &c->env);
        bool progressed = end_finished(c->multi);
        now = rfi_mono_ms();
        for (rf_pending *p = c->first; p != NULL; p = p->next)
            progressed = end_overdue(c->multi, &p->flow, now) || progressed;
        if (progressed) continue;
        if (now >= until) break;
        int64_t wait = until - now;
        if (next_wake >= 0 && next_wake - now < wait) wait = next_wake - now < 0 ? 0 : next_wake - now;
        curl_multi_poll(c->multi, NULL, 0, (int)(wait < 100 ? wait : 100), NULL);
    }
    return n_done;
}

size_t rf_client_pending(const rf_client *c) { return c ? c->n_pending : 0; }

bool rf_pending_done(const rf_pending *p) { return p && p->reported; }

bool rf_pending_hook_failed(const rf_pending *p) { return p && p->flow.hook_failed; }

rf_response *rf_pending_response(const rf_pending *p) { return p ? p->flow.at.resp : NULL; }

void rf_pending_stop(rf_pending *p, const char *why) {
    if (p == NULL || p->c == NULL || p->reported) return;
    rfi_flow_stop(&p->flow, RF_REASON_STOPPED_BY_CALLER, why);
    unplug_idle(p->c->multi, &p->flow); /* its aborted transfers */
}

void rf_pending_free(rf_pending *p) {
    if (p == NULL) return;
    rf_client *c = p->c; /* NULL: reported, and the client is gone */
    if (c != NULL) unlink_pending(p);
    rfi_wire *wires[RFI_MAX_WIRES]; /* none once reported: the handles went back to the client then */
    size_t n = rfi_flow_wires(&p->flow, wires);
    for (size_t i = 0; i < n; i++) {
        if (wires[i]->in_multi) curl_multi_remove_handle(c->multi, wires[i]->easy);
        curl_easy_cleanup(wires[i]->easy);
        wires[i]->easy = NULL;
    }
    if (c != NULL && p->flow.state == RFI_FLOW_DONE && !p->logged) /* ended but never reported: its line goes out */
        write_lines(c, &p, 1, NULL);
    if (p->flow.state != RFI_FLOW_DONE) { /* abandoned: its response is left as it was given, owning nothing */
        free(p->flow.at.resp->tries);
        p->flow.at.resp->tries = NULL;
        p->flow.at.resp->n_tries = 0;
    }
    rfi_flow_cleanup(&p->flow);
    if (c != NULL && p->reported && c->n_spare < SPARE_PENDING) { /* kept for the client's next start */
        p->next = c->spare;
        c->spare = p;
        c->n_spare++;
        return;
    }
    free(p);
}

/* ---- rf_client_all: a window of requests on the client's multi ---------------------------------------------- */

/* Ended requests whose ledger lines are written together (at most this many at a time). */
#define ALL_BATCH 64

/* One rf_client_all: its ended requests whose ledger lines are still to be written, and when a timer (a wait
 * between attempts, a hedge, a per-try timeout) next needs a pass over the requests in flight. */
typedef struct all_run {
    rf_client *c;
    rf_pending *ended[ALL_BATCH];
    size_t n_ended;
    size_t n_done;     /* requests ended and freed */
    bool hook_failed;  /* a hook failed: no further request starts */
    int64_t next_wake; /* -1: none known */
} all_run;

/* Writes the ended requests' ledger lines together, then frees each (its rf_pending kept for the next start). */
static void flush_ended(all_run *r) {
    if (r->n_ended == 0) return;
    write_lines(r->c, r->ended, r->n_ended, &r->c->batch);
    for (size_t i = 0; i < r->n_ended; i++) rf_pending_free(r->ended[i]);
    r->n_done += r->n_ended;
    r->n_ended = 0;
}

/* After something happened to p's flow (it started, an attempt ended, a timer passed): what is due starts; a DONE
 * flow is reported and queued for its ledger line, freeing its slot; any other counts its next timer. */
static void settle_flow(all_run *r, rf_pending *p, int64_t now) {
    rfi_flow *f = &p->flow;
    plug_due(r->c->multi, f, now);
    if (f->state != RFI_FLOW_DONE) {
        r->next_wake = rfi_earlier(r->next_wake, rfi_flow_next_ms(f));
        return;
    }
    if (f->hook_failed) r->hook_failed = true;
    report(r->c, p);
    r->ended[r->n_ended++] = p;
    if (r->n_ended == ALL_BATCH) flush_ended(r);
}

/* Ends the transfers multi reports finished and settles their flows. The flow is the first member of its
 * rf_pending. */
static void settle_finished(all_run *r, int64_t now) {
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(r->c->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE) continue;
        rfi_wire *w = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&w);
        end_transfer(r->c->multi, msg);
        if (w != NULL) settle_flow(r, (rf_pending *)(void *)w->flow, now);
    }
}

/* A timer is due: a pass over every request in flight (an attempt past its per-try timeout ends, a wait or a hedge
 * that is over starts), which also finds the next timer. */
static void settle_timers(all_run *r, int64_t now) {
    r->next_wake = -1;
    for (rf_pending *p = r->c->first, *next; p != NULL; p = next) {
        next = p->next;
        end_overdue(r->c->multi, &p->flow, now);
        settle_flow(r, p, now);
    }
}

/* rf_client_all stops early (a hook failed, a request could not start): every request still in flight or waiting
 * between attempts ends now as stopped-by-caller (rf_pending_stop: no further attempt, no hook; an attempt in
 * flight is cancelled with error why and its transfer aborted), and is reported and queued for its ledger line like
 * any request that ends. Fail closed, and no logical request that was started goes without its line. */
static void stop_in_flight(all_run *r, const char *why) {
    const int64_t now = rfi_mono_ms();
    for (rf_pending *p = r->c->first, *next; p != NULL; p = next) {
        next = p->next; /* settle_flow takes p off the list */
        rf_pending_stop(p, why);
        settle_flow(r, p, now);
    }
}

rf_status rf_client_all(rf_client *c, const rf_request *reqs, size_t n, rf_attempt_hook hook, void *hook_ud,
                        rf_response *out, rf_error *err) {
    return rf_client_all_with(c, reqs, n, NULL, hook, hook_ud, out, err);
}

/* Driven as a plain curl multi loop is (poll, perform, read the messages): a request that ends frees its slot for the
 * next one at once, and only a due timer costs a pass over the requests in flight. */
rf_status rf_client_all_with(rf_client *c, const rf_request *reqs, size_t n, const rf_all_options *opts,
                             rf_attempt_hook hook, void *hook_ud, rf_response *out, rf_error *err) {
    if (c == NULL || (n > 0 && (reqs == NULL || out == NULL)))
        return rfi_fail(err, "", "client, requests and responses must not be NULL");
    rf_error local;
    if (err == NULL) err = &local;
    /* An upstream's connection limit is not a failure class: a window of requests in flight keeps under it, and each
     * request's deadline counts from its own start. */
    size_t window = opts != NULL && opts->concurrency > 0 ? opts->concurrency : RF_ALL_CONCURRENCY;
    if (window > RF_ALL_CONCURRENCY_MAX)
        return rfi_fail(err, "concurrency", "must be 1..%d (0 = the default, %d), got %zu", RF_ALL_CONCURRENCY_MAX,
                        RF_ALL_CONCURRENCY, window);
    /* Every started request is reported here: requests started by the caller would be lost. */
    if (c->n_pending > 0) return rfi_fail(err, "client", "has started requests in flight (rf_client_start)");
    if (n == 0) return RF_OK;
    if (c->multi == NULL && (c->multi = curl_multi_init()) == NULL) {
        rfi_fail(err, "client", "out of memory");
        return RF_ENOMEM;
    }
    all_run r = {.c = c, .next_wake = -1};
    rf_status st = RF_OK;
    size_t n_started = 0;
    for (;;) {
        while (!r.hook_failed && n_started < n && c->n_pending < window) {
            rf_pending *p = NULL;
            st = rf_client_start(c, &reqs[n_started], hook, hook_ud, &out[n_started], &p, err);
            if (st != RF_OK) {
                char where[32];
                snprintf(where, sizeof where, "[%zu].", n_started + 1);
                memmove(err->path + strlen(where), err->path, sizeof err->path - strlen(where) - 1);
                memcpy(err->path, where, strlen(where));
                break;
            }
            n_started++;
            settle_flow(&r, p, rfi_mono_ms()); /* a request refused at once (no route) frees its slot again */
        }
        flush_ended(&r);
        if (st != RF_OK || r.hook_failed || c->n_pending == 0) break;
        int64_t now = rfi_mono_ms();
        int64_t wait = r.next_wake < 0 ? 100 : r.next_wake - now;
        curl_multi_poll(c->multi, NULL, 0, (int)(wait < 0 ? 0 : wait > 100 ? 100 : wait), NULL);
        rfi_multi_pass(c->multi, &c->env);
        now = rfi_mono_ms();
        settle_finished(&r, now);
        if (r.next_wake >= 0 && now >= r.next_wake) settle_timers(&r, now);
    }
    stop_in_flight(&r, st != RF_OK ? "cancelled: client:all stopped, a request could not start"
                                   : "cancelled: client:all stopped, an on_attempt hook failed");
    flush_ended(&r);
    if (st == RF_OK && r.hook_failed) st = rfi_fail(err, "on_attempt", "the attempt hook failed");
    return st;
}
