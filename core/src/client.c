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

static rf_status fail(rf_error *err, const char *path, const char *msg) {
    if (err) {
        memset(err, 0, sizeof *err);
        snprintf(err->path, sizeof err->path, "%s", path);
        snprintf(err->message, sizeof err->message, "%s", msg);
    }
    return RF_EINVAL;
}

rf_status rf_client_new(const rf_client_options *opts, rf_client **out, rf_error *err) {
    if (opts == NULL || out == NULL) return fail(err, "", "options and out must not be NULL");
    if (opts->policy == NULL) return fail(err, "policy", "is required");
    const char *u = opts->base_url;
    if (u == NULL || (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) || strpbrk(u, " \r\n") != NULL)
        return fail(err, "base_url", "must be an http:// or https:// URL without spaces");
    char why[160];
    for (size_t i = 0; i < opts->n_headers; i++)
        if (!rfi_header_valid(opts->headers[i], why, sizeof why)) return fail(err, "headers", why);
    curl_global_init(CURL_GLOBAL_DEFAULT); /* reference-counted and thread-safe in libcurl >= 7.84 */
    rf_client *c = calloc(1, sizeof *c);
    if (c == NULL) goto nomem;
    c->policy = opts->policy;
    c->ledger = opts->ledger;
    c->follow_redirects = opts->follow_redirects;
    c->max_body_bytes = opts->max_body_bytes ? opts->max_body_bytes : DEFAULT_MAX_BODY;
    rf_rng_seed(&c->rng, opts->rng_seed);
    size_t ulen = strlen(u);
    while (ulen > 0 && u[ulen - 1] == '/') ulen--; /* paths start with '/' */
    c->base_url = malloc(ulen + 1);
    c->easy = curl_easy_init();
    c->headers = calloc(opts->n_headers + 1, sizeof *c->headers);
    if (c->base_url == NULL || c->easy == NULL || c->headers == NULL) goto nomem;
    memcpy(c->base_url, u, ulen);
    c->base_url[ulen] = '\0';
    for (size_t i = 0; i < opts->n_headers; i++) {
        c->headers[i] = strdup(opts->headers[i]);
        if (c->headers[i] == NULL) goto nomem;
        c->n_headers++;
    }
    if (opts->retry_budget && (c->budget = rf_retry_budget_new(opts->policy)) == NULL) goto nomem;
    *out = c;
    return RF_OK;
nomem:
    rf_client_free(c);
    if (c == NULL) curl_global_cleanup();
    fail(err, "client", "out of memory");
    return RF_ENOMEM;
}

void rf_client_free(rf_client *c) {
    if (c == NULL) return;
    if (c->easy) curl_easy_cleanup(c->easy);
    for (size_t i = 0; i < c->n_headers; i++) free(c->headers[i]);
    free(c->headers);
    free(c->base_url);
    rf_retry_budget_free(c->budget);
    free(c);
    curl_global_cleanup();
}

int64_t rf_client_retry_tokens_milli(const rf_client *c) {
    return c && c->budget ? rf_retry_budget_tokens_milli(c->budget) : -1;
}

void rf_response_clear(rf_response *r) {
    if (r == NULL) return;
    free(r->body);
    free(r->headers);
    memset(r, 0, sizeof *r);
}

static void sleep_ms(int64_t ms) {
    if (ms <= 0) return;
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

rf_status rf_client_request(rf_client *c, const rf_request *req, rf_attempt_hook hook, void *hook_ud,
                            rf_response *out, rf_error *err) {
    if (c == NULL || req == NULL || out == NULL) return fail(err, "", "client, request and response must not be NULL");
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
    bool hook_failed = f.hook_failed;
    rfi_flow_cleanup(&f);
    if (hook_failed) return fail(err, "on_attempt", "the attempt hook failed");
    return RF_OK;
}

rf_status rf_client_all(rf_client *c, const rf_request *reqs, size_t n, rf_attempt_hook hook, void *hook_ud,
                        rf_response *out, rf_error *err) {
    if (c == NULL || (n > 0 && (reqs == NULL || out == NULL)))
        return fail(err, "", "client, requests and responses must not be NULL");
    rf_error local;
    if (err == NULL) err = &local;
    rf_status st = RF_OK;
    CURLM *multi = curl_multi_init();
    rfi_flow *flows = calloc(n ? n : 1, sizeof *flows);
    size_t ready = 0;
    if (multi == NULL || flows == NULL) {
        st = RF_ENOMEM;
        fail(err, "client", "out of memory");
        goto out;
    }
    for (; ready < n; ready++) {
        CURL *easy = curl_easy_init();
        if (easy == NULL) {
            st = RF_ENOMEM;
            fail(err, "client", "out of memory");
            goto out;
        }
        st = rfi_flow_init(&flows[ready], c, easy, &reqs[ready], &out[ready], hook, hook_ud, err);
        if (st != RF_OK) {
            curl_easy_cleanup(easy);
            snprintf(err->path, sizeof err->path, "[%zu].%.200s", ready + 1, flows[ready].req ? "request" : "");
            goto out;
        }
    }
    for (;;) {
        size_t done = 0;
        int64_t now = rfi_mono_ms(), next_wake = -1;
        for (size_t i = 0; i < n; i++) {
            rfi_flow *f = &flows[i];
            if (f->state == RFI_FLOW_WAITING && f->wake_ms <= now) f->state = RFI_FLOW_READY;
            if (f->state == RFI_FLOW_READY && rfi_flow_begin_attempt(f)) curl_multi_add_handle(multi, f->easy);
            if (f->state == RFI_FLOW_DONE) done++;
            if (f->state == RFI_FLOW_WAITING && (next_wake < 0 || f->wake_ms < next_wake)) next_wake = f->wake_ms;
        }
        if (done == n) break;
        int running = 0;
        curl_multi_perform(multi, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(multi, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE) continue;
            rfi_flow *f = NULL;
            CURL *easy = msg->easy_handle;
            CURLcode rc = msg->data.result;
            curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&f);
            curl_multi_remove_handle(multi, easy);
            if (f) rfi_flow_end_attempt(f, rc);
        }
        int timeout = 100;
        if (next_wake >= 0) {
            int64_t wait = next_wake - rfi_mono_ms();
            timeout = wait < 0 ? 0 : (wait < 100 ? (int)wait : 100);
        }
        curl_multi_poll(multi, NULL, 0, timeout, NULL);
    }
    for (size_t i = 0; i < n; i++)
        if (flows[i].hook_failed) st = fail(err, "on_attempt", "the attempt hook failed");
out:
    for (size_t i = 0; i < ready; i++) {
        if (flows[i].state == RFI_FLOW_IN_FLIGHT) curl_multi_remove_handle(multi, flows[i].easy);
        curl_easy_cleanup(flows[i].easy);
        rfi_flow_cleanup(&flows[i]);
    }
    free(flows);
    if (multi) curl_multi_cleanup(multi);
    return st;
}
