/*
 * The client: lifecycle, the blocking request (one reused easy handle: keep-alive) and rf_client_all
 * (curl multi, one easy handle per request, each request under its own attempt loop).
 */
#define _POSIX_C_SOURCE 200809L
#include "client_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_MAX_BODY (16u * 1024u * 1024u)

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
    char why[160];
    for (size_t i = 0; i < opts->n_headers; i++)
        if (!rfi_header_valid(opts->headers[i], why, sizeof why)) return rfi_fail(err, "headers", "%s", why);
    curl_global_init(CURL_GLOBAL_DEFAULT); /* reference-counted and thread-safe in libcurl >= 7.84 */
    rf_client *c = calloc(1, sizeof *c);
    if (c == NULL) goto nomem;
    c->policy = opts->policy;
    c->ledger = opts->ledger;
    c->follow_redirects = opts->follow_redirects;
    c->max_redirects = opts->max_redirects ? opts->max_redirects : 10;
    c->max_body_bytes = opts->max_body_bytes ? opts->max_body_bytes : DEFAULT_MAX_BODY;
    rf_rng_seed(&c->rng, opts->rng_seed);
    size_t ulen = strlen(u);
    while (ulen > 0 && u[ulen - 1] == '/') ulen--; /* paths start with '/' */
    c->base_url = malloc(ulen + 1);
    c->headers = calloc(opts->n_headers + 1, sizeof *c->headers);
    if (c->base_url == NULL || c->headers == NULL) goto nomem;
    memcpy(c->base_url, u, ulen);
    c->base_url[ulen] = '\0';
    for (size_t i = 0; i < opts->n_headers; i++) {
        c->headers[i] = strdup(opts->headers[i]);
        if (c->headers[i] == NULL) goto nomem;
        c->n_headers++;
    }
    if (opts->budget != NULL) {
        c->budget = opts->budget;
    } else if (opts->retry_budget) {
        if ((c->budget = rf_retry_budget_new(opts->policy)) == NULL) goto nomem;
        c->owns_budget = true;
    }
    rf_status nst = rfi_network_init(c, opts, err);
    if (nst != RF_OK) {
        rf_client_free(c);
        return nst;
    }
    if ((c->easy = rfi_easy_new(c)) == NULL) goto nomem; /* after the network settings it carries */
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
    if (c->easy) curl_easy_cleanup(c->easy);
    for (size_t i = 0; i < c->n_idle; i++) curl_easy_cleanup(c->idle[i]);
    free(c->idle);
    free(c->batch_recs);
    free(c->batch_ptrs);
    free(c->batch_status);
    free(c->batch_errs);
    for (size_t i = 0; i < c->n_headers; i++) free(c->headers[i]);
    free(c->headers);
    free(c->base_url);
    rfi_network_free(c);
    if (c->owns_budget) rf_retry_budget_free(c->budget);
    free(c);
    curl_global_cleanup();
}

int64_t rf_client_retry_tokens_milli(const rf_client *c) {
    return c && c->budget ? rf_retry_budget_tokens_milli(c->budget) : -1;
}

void rf_response_clear(rf_response *r) {
    if (r == NULL) return;
    free(r->tries);
    free(r->body);
    free(r->headers);
    memset(r, 0, sizeof *r);
}

static void sleep_ms(int64_t ms) {
    if (ms <= 0) return;
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

rf_status rf_client_request(rf_client *c, const rf_request *req, rf_attempt_hook hook, void *hook_ud, rf_response *out,
                            rf_error *err) {
    if (c == NULL || req == NULL || out == NULL)
        return rfi_fail(err, "", "client, request and response must not be NULL");
    rf_error local;
    if (err == NULL) err = &local;
    rfi_flow f;
    rf_status st = rfi_flow_init(&f, c, c->easy, req, out, hook, hook_ud, err);
    if (st != RF_OK) return st;
    while (f.state != RFI_FLOW_DONE) {
        if (f.state == RFI_FLOW_WAITING) {
            sleep_ms(f.wake_ms - rfi_mono_ms());
            f.state = RFI_FLOW_READY;
        }
        if (rfi_flow_begin_attempt(&f)) rfi_flow_end_attempt(&f, curl_easy_perform(c->easy));
    }
    rfi_flow_write_ledger(&f);
    bool hook_failed = f.hook_failed;
    rfi_flow_cleanup(&f);
    if (hook_failed) return rfi_fail(err, "on_attempt", "the attempt hook failed");
    return RF_OK;
}

/* Keeps an easy handle no transfer uses for the next started request (or frees it when memory runs out). */
static void release_easy(rf_client *c, CURL *easy) {
    if (c->n_idle == c->idle_cap) {
        size_t cap = c->idle_cap ? 2 * c->idle_cap : 16;
        CURL **more = realloc(c->idle, cap * sizeof *more);
        if (more == NULL) {
            curl_easy_cleanup(easy);
            return;
        }
        c->idle = more;
        c->idle_cap = cap;
    }
    c->idle[c->n_idle++] = easy;
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
    CURL *easy = p == NULL ? NULL : c->n_idle > 0 ? c->idle[--c->n_idle] : rfi_easy_new(c);
    if (easy == NULL) {
        free(p);
        goto nomem;
    }
    rf_status st = rfi_flow_init(&p->flow, c, easy, req, out, hook, hook_ud, err);
    if (st != RF_OK) {
        release_easy(c, easy);
        free(p);
        return st;
    }
    p->c = c;
    p->in_multi = p->reported = false;
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

/* Makes the batch arrays hold n records; false when memory runs out. */
static bool batch_reserve(rf_client *c, size_t n) {
    if (n <= c->batch_cap) return true;
    rf_ledger_record *recs = realloc(c->batch_recs, n * sizeof *recs);
    if (recs != NULL) c->batch_recs = recs;
    const rf_ledger_record **ptrs = realloc(c->batch_ptrs, n * sizeof *ptrs);
    if (ptrs != NULL) c->batch_ptrs = ptrs;
    rf_status *status = realloc(c->batch_status, n * sizeof *status);
    if (status != NULL) c->batch_status = status;
    rf_error *errs = realloc(c->batch_errs, n * sizeof *errs);
    if (errs != NULL) c->batch_errs = errs;
    if (recs == NULL || ptrs == NULL || status == NULL || errs == NULL) return false;
    c->batch_cap = n;
    return true;
}

/* Records built per rf_ledger_append_batch call: bounds the batch arrays (a record with its tries is ~2 kB). */
#define BATCH_RECORDS 64

void rfi_client_write_ledger(rf_client *c, rf_pending **done, size_t n) {
    if (c->ledger == NULL) return;
    for (size_t from = 0; from < n; from += BATCH_RECORDS) {
        size_t count = n - from < BATCH_RECORDS ? n - from : BATCH_RECORDS;
        rf_pending **slice = done + from;
        if (!batch_reserve(c, count)) { /* out of memory: one line at a time, as before batching */
            for (size_t i = 0; i < count; i++) rfi_flow_write_ledger(&slice[i]->flow);
            continue;
        }
        size_t m = 0;
        for (size_t i = 0; i < count; i++) {
            rfi_flow *f = &slice[i]->flow;
            if (!f->ledger_due) continue;
            rfi_step_record(c->policy, f->req, f->resp, f->done_wall_ms, &c->batch_recs[m]);
            c->batch_ptrs[m] = &c->batch_recs[m];
            m++;
        }
        rf_ledger_append_batch(c->ledger, c->batch_ptrs, m, c->batch_status, c->batch_errs);
        m = 0;
        for (size_t i = 0; i < count; i++) {
            rfi_flow *f = &slice[i]->flow;
            if (!f->ledger_due) continue;
            f->ledger_due = false;
            if (c->batch_status[m] != RF_OK) rfi_step_ledger_error(f->resp, &c->batch_errs[m]);
            m++;
        }
    }
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
            if (f->state == RFI_FLOW_WAITING && f->wake_ms <= now) f->state = RFI_FLOW_READY;
            if (f->state == RFI_FLOW_READY && rfi_flow_begin_attempt(f)) {
                curl_multi_add_handle(c->multi, f->easy);
                p->in_multi = added = true;
            }
            int64_t wake = f->state == RFI_FLOW_WAITING     ? f->wake_ms
                           : f->state == RFI_FLOW_IN_FLIGHT ? f->attempt_start_ms + f->timeout_ms
                                                            : -1;
            if (wake >= 0 && (next_wake < 0 || wake < next_wake)) next_wake = wake;
            if (f->state == RFI_FLOW_DONE && !p->reported && n_done < cap) {
                unlink_pending(p);
                p->reported = true; /* now on the reported list, until the caller frees it */
                p->next = c->reported;
                if (c->reported) c->reported->prev = p;
                c->reported = p;
                /* Its transfers are over (the flow is DONE, its handle out of the multi): the handle goes back
                 * to the client now, so a reported request never needs its client again (it may be freed
                 * after the client, rf_pending_free). */
                release_easy(c, f->easy);
                f->easy = NULL;
                done[n_done++] = p;
            }
        }
        int running = 0;
        if (n_done > 0 || c->first == NULL) {
            if (added) curl_multi_perform(c->multi, &running); /* start them now: their timers run from here */
            rfi_client_write_ledger(c, done, n_done);          /* their lines, before the caller sees them */
            break;
        }
        curl_multi_perform(c->multi, &running);
        CURLMsg *msg;
        int left;
        bool progressed = false;
        while ((msg = curl_multi_info_read(c->multi, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE) continue;
            rf_pending *p = NULL;
            CURL *easy = msg->easy_handle;
            CURLcode rc = msg->data.result;
            curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&p); /* CURLOPT_PRIVATE is the flow, first member */
            curl_multi_remove_handle(c->multi, easy);
            if (p) {
                p->in_multi = false;
                rfi_flow_end_attempt(&p->flow, rc);
                progressed = true;
            }
        }
        /* libcurl checks a transfer's timer only when driven, and from when it first drove it: an attempt still
         * in flight past its own per-try timeout (the caller was busy between calls) ends here, as a timeout.
         * After the messages are drained, so no message can name a handle removed here. */
        now = rfi_mono_ms();
        for (rf_pending *p = c->first; p != NULL; p = p->next) {
            if (!p->in_multi || !rfi_flow_overdue(&p->flow, now)) continue;
            curl_multi_remove_handle(c->multi, p->flow.easy);
            p->in_multi = false;
            p->flow.timed_out = true;
            rfi_flow_end_attempt(&p->flow, CURLE_OPERATION_TIMEDOUT);
            progressed = true;
        }
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

rf_response *rf_pending_response(const rf_pending *p) { return p ? p->flow.resp : NULL; }

void rf_pending_free(rf_pending *p) {
    if (p == NULL) return;
    rf_client *c = p->c; /* NULL: reported, and the client is gone */
    if (c != NULL) unlink_pending(p);
    if (p->in_multi) curl_multi_remove_handle(c->multi, p->flow.easy);
    curl_easy_cleanup(p->flow.easy);                /* NULL once reported: the handle went back to the client then */
    if (c != NULL) rfi_flow_write_ledger(&p->flow); /* ended but never reported: its line still goes out */
    if (p->flow.state != RFI_FLOW_DONE) { /* abandoned: its response is left as it was given, owning nothing */
        free(p->flow.resp->tries);
        p->flow.resp->tries = NULL;
        p->flow.resp->n_tries = 0;
    }
    rfi_flow_cleanup(&p->flow);
    if (c != NULL && p->reported && c->n_spare < RFI_SPARE_PENDING) { /* kept for the client's next start */
        p->next = c->spare;
        c->spare = p;
        c->n_spare++;
        return;
    }
    free(p);
}

rf_status rf_client_all(rf_client *c, const rf_request *reqs, size_t n, rf_attempt_hook hook, void *hook_ud,
                        rf_response *out, rf_error *err) {
    if (c == NULL || (n > 0 && (reqs == NULL || out == NULL)))
        return rfi_fail(err, "", "client, requests and responses must not be NULL");
    rf_error local;
    if (err == NULL) err = &local;
    /* rf_client_run reports every started request: requests started by the caller would be lost here. */
    if (c->n_pending > 0) return rfi_fail(err, "client", "has started requests in flight (rf_client_start)");
    rf_pending **started = calloc(n ? n : 1, sizeof *started), *done[64];
    if (started == NULL) {
        rfi_fail(err, "client", "out of memory");
        return RF_ENOMEM;
    }
    rf_status st = RF_OK;
    size_t n_started = 0, n_done = 0;
    bool hook_failed = false;
    while (st == RF_OK && !hook_failed && n_done < n) {
        /* A window of RF_ALL_CONCURRENCY requests in flight: an upstream's connection limit is not a failure
         * class, and each request's deadline counts from its own start. */
        while (n_started < n && n_started - n_done < RF_ALL_CONCURRENCY) {
            st = rf_client_start(c, &reqs[n_started], hook, hook_ud, &out[n_started], &started[n_started], err);
            if (st != RF_OK) {
                char where[32];
                snprintf(where, sizeof where, "[%zu].", n_started + 1);
                memmove(err->path + strlen(where), err->path, sizeof err->path - strlen(where) - 1);
                memcpy(err->path, where, strlen(where));
                break;
            }
            n_started++;
        }
        if (st != RF_OK) break;
        size_t k = rf_client_run(c, 1000, done, 64);
        for (size_t i = 0; i < k; i++) hook_failed = hook_failed || rf_pending_hook_failed(done[i]);
        n_done += k;
    }
    for (size_t i = 0; i < n_started; i++) {
        if (st == RF_OK && rf_pending_hook_failed(started[i]))
            st = rfi_fail(err, "on_attempt", "the attempt hook failed");
        rf_pending_free(started[i]);
    }
    if (st == RF_OK && hook_failed) st = rfi_fail(err, "on_attempt", "the attempt hook failed");
    free(started);
    return st;
}
