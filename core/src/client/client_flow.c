/*
 * The attempt state machine of one logical request: READY → (rf_budget) → IN_FLIGHT → (rf_decide) →
 * WAITING → READY … → DONE. The same machine serves the blocking rf_client_request and curl multi.
 * Every per-attempt value (body, headers, wait headers, Date, curl options) is reset before each attempt,
 * so nothing from attempt 1 leaks into attempt 2.
 */
#define _POSIX_C_SOURCE 200809L
#include "client_internal.h"
#include "retryfreeze/attempt_step.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool buf_append(rfi_buf *b, const char *data, size_t n) {
    if (b->overflow || n > b->max - b->len) {
        b->overflow = true;
        return false;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256; /* most heads and bodies fit: a small block malloc keeps in its caches */
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->data, cap);
        if (p == NULL) {
            b->overflow = true;
            return false;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

static void buf_reset(rfi_buf *b) {
    b->len = 0;
    b->overflow = false;
    if (b->data) b->data[0] = '\0';
}

bool rfi_header_valid(const char *line, char *why, size_t why_cap) {
    const char *colon = strchr(line, ':');
    if (colon == NULL || colon == line) {
        snprintf(why, why_cap, "header \"%.40s\" must be \"Name: value\"", line);
        return false;
    }
    for (const char *p = line; p < colon; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *p))) {
            snprintf(why, why_cap, "header name \"%.*s\" is not an RFC 9110 token", (int)(colon - line), line);
            return false;
        }
    }
    if (strpbrk(line, "\r\n") != NULL) {
        snprintf(why, why_cap, "header \"%.*s\" contains CR or LF", (int)(colon - line), line);
        return false;
    }
    if ((size_t)(colon - line) == 15 && strncasecmp(line, "Idempotency-Key", 15) == 0) {
        snprintf(why, why_cap, "pass the idempotency key as idempotency_key, not as a raw header");
        return false;
    }
    return true;
}

/*
 * libcurl silently re-sends a request once when a reused keep-alive connection dies before any response
 * (its own retry, with no policy behind it). Every send passes here: a send not preceded by a response to
 * the previous one is that resend, and is aborted; the attempt ends as the connection failure it was (see
 * rfi_flow_end_attempt). A followed redirect is a send after a response, and goes ahead.
 */
static int on_prereq(void *ud, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port, int conn_local_port) {
    (void)conn_primary_ip, (void)conn_local_ip, (void)conn_primary_port, (void)conn_local_port;
    rfi_flow *f = ud;
    if (f->sends > f->responses) {
        f->resend_blocked = true;
        return CURL_PREREQFUNC_ABORT;
    }
    f->sends++;
    return CURL_PREREQFUNC_OK;
}

bool rfi_flow_overdue(const rfi_flow *f, int64_t now_ms) {
    return f->state == RFI_FLOW_IN_FLIGHT && now_ms >= f->attempt_start_ms + f->timeout_ms;
}

/* Stops reading a body once the per-try timeout has passed (issue 10: a large body at high concurrency read
 * on past the deadline, because libcurl checks its timer only between reads); 0 aborts the transfer. */
static size_t on_body(char *data, size_t size, size_t n, void *ud) {
    rfi_flow *f = ud;
    if (rfi_flow_overdue(f, rfi_mono_ms())) {
        f->timed_out = true;
        return 0;
    }
    return buf_append(&f->body, data, size * n) ? size * n : 0; /* 0 aborts: over max_body_bytes */
}

static size_t on_header(char *data, size_t size, size_t n, void *ud) {
    rfi_flow *f = ud;
    size_t len = size * n;
    if (rfi_response_head_line(&f->rh, data, len)) {
        f->responses++;
        /* A new response (after a 1xx or a followed redirect): the previous one's headers are forgotten. */
        buf_reset(&f->head);
    }
    buf_append(&f->head, data, len); /* a header block over the cap is cut; the attempt goes on */
    return len;
}

/* Appends a copy of line to *list; on failure (out of memory) *list is left whole, for the caller to free. */
static bool append_header(struct curl_slist **list, const char *line) {
    struct curl_slist *next = curl_slist_append(*list, line);
    if (next == NULL) return false;
    *list = next;
    return true;
}

rf_status rfi_flow_init(rfi_flow *f, rf_client *c, CURL *easy, const rf_request *req, rf_response *resp,
                        rf_attempt_hook hook, void *hook_ud, rf_error *err) {
    memset(f, 0, sizeof *f);
    f->c = c;
    f->easy = easy;
    f->req = req;
    f->resp = resp;
    f->hook = hook;
    f->hook_ud = hook_ud;
    f->body.max = c->max_body_bytes;
    f->head.max = 256 * 1024;
    memset(resp, 0, sizeof *resp);
    char why[160];
    if (req->method == NULL || req->method[0] == '\0' || strpbrk(req->method, " \r\n") != NULL) {
        snprintf(err->path, sizeof err->path, "method");
        snprintf(err->message, sizeof err->message, "is required and must be a method token");
        return RF_EINVAL;
    }
    if (req->path == NULL || req->path[0] != '/' || strpbrk(req->path, " \r\n#") != NULL) {
        snprintf(err->path, sizeof err->path, "path");
        snprintf(err->message, sizeof err->message, "must start with '/' and contain no spaces, CR, LF or '#'");
        return RF_EINVAL;
    }
    /* A lowercase letter in the method can match no route (RFC 9110 §9.1): refused before any attempt in the engine's
     * words (rf_budget's check says why), never stopped as a silent no-route. Only such a method pays the call. */
    for (const char *m = req->method; *m != '\0'; m++) {
        if (*m >= 'a' && *m <= 'z') {
            rf_attempt_budget refused;
            rf_budget(c->policy, req->method, strlen(req->method), req->path, strlen(req->path), 0, 0, &refused, err);
            return RF_EINVAL;
        }
    }
    if (req->query && strpbrk(req->query, " \r\n#") != NULL) {
        snprintf(err->path, sizeof err->path, "query");
        snprintf(err->message, sizeof err->message, "must be encoded: no spaces, CR, LF or '#'");
        return RF_EINVAL;
    }
    if (req->idempotency_key && (req->idempotency_key[0] == '\0' || strpbrk(req->idempotency_key, "\r\n"))) {
        snprintf(err->path, sizeof err->path, "idempotency_key");
        snprintf(err->message, sizeof err->message, "must be a non-empty string without CR or LF");
        return RF_EINVAL;
    }
    for (size_t i = 0; i < req->n_headers; i++) {
        if (!rfi_header_valid(req->headers[i], why, sizeof why)) {
            snprintf(err->path, sizeof err->path, "headers");
            snprintf(err->message, sizeof err->message, "%s", why);
            return RF_EINVAL;
        }
    }
    rf_status lst = rfi_limits_init(f, err);
    if (lst != RF_OK) return lst;
    /* base_url + path [+ "?" + query], copied piece by piece (this runs once per request: no printf). */
    size_t base_len = strlen(c->base_url), path_len = strlen(req->path),
           query_len = req->query ? strlen(req->query) : 0;
    f->url = malloc(base_len + path_len + (req->query ? query_len + 1 : 0) + 1);
    bool ok = f->url != NULL;
    if (ok) {
        char *u = f->url;
        memcpy(u, c->base_url, base_len);
        memcpy(u += base_len, req->path, path_len);
        u += path_len;
        if (req->query) {
            *u++ = '?';
            memcpy(u, req->query, query_len);
            u += query_len;
        }
        *u = '\0';
    }
    for (size_t i = 0; ok && i < c->n_headers; i++) ok = append_header(&f->headers, c->headers[i]);
    for (size_t i = 0; ok && i < req->n_headers; i++) ok = append_header(&f->headers, req->headers[i]);
    if (ok && req->idempotency_key) {
        static const char name[] = "Idempotency-Key: ";
        size_t key_len = strlen(req->idempotency_key), n = sizeof name + key_len; /* sizeof counts the NUL */
        char small[256], *line = n <= sizeof small ? small : malloc(n);           /* curl_slist_append copies it */
        ok = line != NULL;
        if (ok) {
            memcpy(line, name, sizeof name - 1);
            memcpy(line + sizeof name - 1, req->idempotency_key, key_len + 1);
            ok = append_header(&f->headers, line);
            if (line != small) free(line);
        }
    }
    /* No 100-continue round trip: libcurl adds "Expect: 100-continue" only to a request that sends a body (a
     * large or unknown-sized upload), so only such a request needs the blank header that turns it off. */
    if (ok && req->body != NULL) ok = append_header(&f->headers, "Expect:");
    if (!ok) {
        snprintf(err->path, sizeof err->path, "request");
        snprintf(err->message, sizeof err->message, "out of memory");
        rfi_flow_cleanup(f);
        return RF_ENOMEM;
    }
    long route = rf_policy_match(c->policy, req->method, strlen(req->method), req->path, strlen(req->path));
    f->route = route; /* a request's method and path do not change: matched once, for every verdict */
    rf_route_view rv;
    if (route >= 0 && rf_policy_route(c->policy, (size_t)route, &rv) == RF_OK) {
        for (size_t i = 0; i < rv.n_retry_after_headers; i++) {
            rf_wait_header h;
            if (rf_wait_header_parse_name(rv.retry_after_headers[i], strlen(rv.retry_after_headers[i]), &h) == 0)
                f->reads[h] = true;
        }
    }
    /* Room for one try (most requests take one; a few hundred bytes, which malloc serves from its caches), grown by
     * room_for_another_try up to RF_MAX_TRIES. */
    resp->tries = malloc(sizeof *resp->tries);
    if (resp->tries == NULL) {
        snprintf(err->path, sizeof err->path, "request");
        snprintf(err->message, sizeof err->message, "out of memory");
        rfi_flow_cleanup(f);
        return RF_ENOMEM;
    }
    f->tries_cap = 1;
    f->start_ms = rfi_mono_ms();
    f->last_class_retryable = true; /* no failure yet: nothing to blame on a class */
    f->state = RFI_FLOW_READY;
    return RF_OK;
}

static void flow_done(rfi_flow *f, rf_reason reason);

void rfi_flow_handle(const rf_client *c, CURL *e) {
    (void)c;
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L); /* the flow follows redirects itself: a try per hop */
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
}

CURL *rfi_easy_new(const rf_client *c) {
    CURL *e = curl_easy_init();
    if (e == NULL) return NULL;
    rfi_flow_handle(c, e);
    rfi_network_handle(c, e);
    return e;
}

bool rfi_flow_begin_attempt(rfi_flow *f) {
    const rf_request *req = f->req;
    if (f->in_hop) { /* a followed redirect: rf_redirect_verdict gave its timeout */
        f->timeout_ms = rfi_limits_timeout(f, f->hop_timeout_ms);
    } else {
        rf_attempt_budget b = {.reason = RF_REASON_NO_ROUTE}; /* fail closed should rf_budget ever refuse */
        rf_error err;
        int64_t elapsed = rfi_limits_elapsed(f, rfi_mono_ms() - f->start_ms);
        if (rf_budget(f->c->policy, req->method, strlen(req->method), req->path, strlen(req->path), f->attempts,
                      elapsed, &b, &err) != RF_OK ||
            !b.allowed) {
            flow_done(f, b.reason);
            return false;
        }
        f->timeout_ms = rfi_limits_timeout(f, b.timeout_ms);
        rfi_redirect_reset(f); /* a new attempt starts from the request itself */
    }
    const char *method = f->hop_method ? f->hop_method : req->method;
    const char *body = f->hop_body ? req->body : NULL;
    buf_reset(&f->body);
    buf_reset(&f->head);
    rfi_response_head_reset(&f->rh);
    f->errbuf[0] = '\0';
    /* The handle is this client's, with the options all its requests share (rfi_easy_new). Every other option
     * any attempt sets is set here on every attempt, to this attempt's value or back to libcurl's default, so
     * nothing of an earlier attempt or request carries over (spec/core/test_client_flow.c: a POST's body,
     * headers and method on a reused handle); a curl_easy_reset and the shared options again cost more than
     * the rest of the attempt's setup (issue 17). */
    CURL *e = f->easy;
    curl_easy_setopt(e, CURLOPT_URL, f->hop_url ? f->hop_url : f->url);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)f->timeout_ms);
    rfi_network_apply(f, e, f->timeout_ms); /* connect timeout, HTTP version */
    /* A hop sends its own list, even an empty one (every header dropped for another origin): never the request's. */
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, f->hop_url ? f->hop_headers : f->headers);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, f);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, f->errbuf);
    curl_easy_setopt(e, CURLOPT_PRIVATE, f);
    curl_easy_setopt(e, CURLOPT_PREREQDATA, f);
    f->sends = f->responses = 0;
    f->resend_blocked = false;
    f->timed_out = false;
    /* The method, from libcurl's defaults: no body, no custom method; HTTPGET makes it a GET again and clears
     * NOBODY and UPLOAD (CURLOPT_HTTPGET(3)), after POSTFIELDS (which makes it a POST) is unset. */
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, (char *)NULL);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)-1);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, (char *)NULL);
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    if (strcmp(method, "GET") == 0 && body == NULL) {
        /* HTTPGET above */
    } else if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else {
        if (body != NULL || strcmp(method, "POST") == 0) {
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? req->body_len : 0));
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? body : "");
        }
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    }
    f->attempt_start_ms = rfi_mono_ms();
    f->state = RFI_FLOW_IN_FLIGHT;
    return true;
}

/* Makes room in the response for the try of one more request; false at RF_MAX_TRIES or when memory runs out.
 * Called after the hook, so no try pointer is held across the realloc. */
static bool room_for_another_try(rfi_flow *f) {
    rf_response *r = f->resp;
    if (f->requests >= RF_MAX_TRIES) return false;
    if (r->n_tries < f->tries_cap) return true;
    size_t cap = f->tries_cap * 2 < RF_MAX_TRIES ? f->tries_cap * 2 : RF_MAX_TRIES;
    rf_try *more = realloc(r->tries, cap * sizeof *more);
    if (more == NULL) return false;
    r->tries = more;
    f->tries_cap = cap;
    return true;
}

void rfi_flow_end_attempt(rfi_flow *f, CURLcode rc) {
    rf_client *c = f->c;
    rf_response *r = f->resp;
    long status = 0, os_errno = 0;
    curl_easy_getinfo(f->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(f->easy, CURLINFO_OS_ERRNO, &os_errno);
    rf_transport transport = rf_transport_from_curl((int)rc, os_errno);
    if (rc == CURLE_WRITE_ERROR && f->body.overflow) transport = RF_TRANSPORT_OTHER;
    if (f->timed_out) transport = RF_TRANSPORT_TIMEOUT; /* cut by the client at its per-try timeout */
    bool resend_blocked = rc == CURLE_ABORTED_BY_CALLBACK && f->resend_blocked;
    if (resend_blocked) transport = RF_TRANSPORT_CONNECT_RESET; /* the reused connection died unanswered */
    if (status < 100 || status > 599) status = 0;
    int64_t now = rfi_mono_ms();
    long request_size = 0; /* bytes of the request libcurl sent (reset at every transfer's start) */
    curl_easy_getinfo(f->easy, CURLINFO_REQUEST_SIZE, &request_size);
    bool hop = f->in_hop; /* this request was a followed redirect, part of the current attempt */
    f->in_hop = false;
    if (!hop) f->attempts++;
    f->requests++;
    rf_try *t = &r->tries[r->n_tries < f->tries_cap ? r->n_tries : f->tries_cap - 1]; /* room is made before */
    memset(t, 0, sizeof *t);
    t->status = (int)status;
    t->transport = transport;
    t->elapsed_ms = now - f->attempt_start_ms;
    t->delay_ms = f->delay_ms;
    t->timeout_ms = f->timeout_ms;
    if (rc != CURLE_OK) {
        if (f->timed_out)
            snprintf(t->error, sizeof t->error, "per-try timeout of %" PRId64 " ms passed", f->timeout_ms);
        else if (f->body.overflow)
            snprintf(t->error, sizeof t->error, "response body over max_body_bytes (%zu)", f->body.max);
        else if (resend_blocked)
            snprintf(t->error, sizeof t->error, "connection closed before a response (libcurl's own resend blocked)");
        else {
            snprintf(t->error, sizeof t->error, "%.127s", f->errbuf[0] ? f->errbuf : curl_easy_strerror(rc));
            transport = t->transport = rfi_network_refine(f, rc, transport, t->error, sizeof t->error);
        }
    }
    if (r->n_tries < f->tries_cap) r->n_tries++;
    r->status = (int)status;
    r->attempts = f->requests;

    const rf_request *req = f->req;
    rf_facts facts = {.method = req->method,
                      .method_len = strlen(req->method),
                      .path = req->path,
                      .path_len = strlen(req->path),
                      .status = (int)status,
                      .transport = transport,
                      .date = f->rh.has_date ? f->rh.date : NULL,
                      .date_len = f->rh.has_date ? strlen(f->rh.date) : 0,
                      .attempts = f->attempts,
                      .elapsed_ms = rfi_limits_elapsed(f, now - f->start_ms),
                      .not_sent = rc != CURLE_OK && request_size == 0, /* no byte of the request went out */
                      .has_idempotency_key = req->idempotency_key != NULL,
                      .now_ms = rfi_wall_ms()};
    for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) {
        if (f->reads[h] && f->rh.has_hint[h]) {
            facts.hints[h] = f->rh.hint[h];
            facts.hint_lens[h] = strlen(f->rh.hint[h]);
        }
    }
    rf_verdict v;
    rf_error err;
    char *location = NULL;
    bool follow = c->follow_redirects && rc == CURLE_OK && transport == RF_TRANSPORT_OK &&
                  rfi_redirect_status((int)status) &&
                  curl_easy_getinfo(f->easy, CURLINFO_REDIRECT_URL, &location) == CURLE_OK && location != NULL;
    if (follow) {
        /* Hops stop at max_redirects, and where the tries array ends (RF_MAX_TRIES requests in all). */
        int room = f->hops + (RF_MAX_TRIES - f->requests);
        int max = c->max_redirects < room ? c->max_redirects : room;
        rf_facts hop_facts = facts; /* a 3xx's Retry-After counts whatever the route's wait headers are */
        if (f->rh.has_hint[RF_WAIT_RETRY_AFTER]) {
            hop_facts.hints[RF_WAIT_RETRY_AFTER] = f->rh.hint[RF_WAIT_RETRY_AFTER];
            hop_facts.hint_lens[RF_WAIT_RETRY_AFTER] = strlen(f->rh.hint[RF_WAIT_RETRY_AFTER]);
        }
        if (rf_redirect_verdict(c->policy, &hop_facts, f->hops, max, &v, &err) != RF_OK) {
            v = (rf_verdict){
                .retry = false, .reason = RF_REASON_STATUS_NOT_RETRYABLE, .retry_after_header = -1}; /* fail closed */
            rf_classify((int)status, transport, v.class_name);
        } else if (v.retry && !rfi_redirect_prepare(f, (int)status, location)) {
            follow = false; /* not followable (not http/https): the 3xx is the answer */
        } else if (strcmp(v.class_name, "TOO_MANY_REDIRECTS") == 0) {
            t->transport = RF_TRANSPORT_TOO_MANY_REDIRECTS;
            snprintf(t->error, sizeof t->error, "more than %d redirects (max_redirects)", max);
        }
    }
    if (!follow) {
        f->last_class_retryable = rfi_step_verdict_on_route(c->policy, f->route, &facts, &c->rng, c->budget, t, &v);
    } else { /* a followed redirect is no failure: its stops keep their own outcome (deadline, …) */
        memcpy(t->class_name, v.class_name, sizeof t->class_name);
        t->reason = v.reason;
        f->last_class_retryable = true;
        if (v.retry_after_header >= 0 && v.retry_after_header < RF_WAIT_HEADER_COUNT) {
            snprintf(t->retry_after, sizeof t->retry_after, "%s", f->rh.hint[v.retry_after_header]);
            snprintf(t->retry_after_header, sizeof t->retry_after_header, "%s",
                     rf_wait_header_name((rf_wait_header)v.retry_after_header));
        }
    }
    if (rf_step_narrow(f->hook, f->hook_ud, t, &v) < 0) f->hook_failed = true;
    if (v.retry && !room_for_another_try(f)) { /* RF_MAX_TRIES reached, or out of memory: fail closed */
        v.retry = false;
        v.reason = RF_REASON_MAX_ATTEMPTS;
        t->reason = v.reason;
    }
    if (!v.retry) {
        flow_done(f, v.reason);
        return;
    }
    f->hop_timeout_ms = v.timeout_ms;
    f->delay_ms = v.delay_ms;
    f->wake_ms = now + v.delay_ms;
    f->state = RFI_FLOW_WAITING;
}

/* Moves the body and headers into the response; rf_step_finish sets the outcome. The ledger line is written when
 * the request is reported (rfi_client_write_ledger) or freed unreported: a batch of lines per write(2). */
static void flow_done(rfi_flow *f, rf_reason reason) {
    rf_response *r = f->resp;
    r->body = f->body.data ? f->body.data : calloc(1, 1);
    r->body_len = f->body.data ? f->body.len : 0;
    r->headers = f->head.data ? f->head.data : calloc(1, 1);
    r->headers_len = f->head.data ? f->head.len : 0;
    f->body = (rfi_buf){0};
    f->head = (rfi_buf){0};
    f->state = RFI_FLOW_DONE;
    f->done_wall_ms = rfi_wall_ms();
    rfi_step_finish_on_route(f->c->policy, f->route, f->req, reason, f->last_class_retryable,
                             rfi_mono_ms() - f->start_ms, f->done_wall_ms, NULL, r);
    f->ledger_due = f->c->ledger != NULL;
}

void rfi_flow_write_ledger(rfi_flow *f) {
    if (!f->ledger_due) return;
    f->ledger_due = false;
    rf_ledger_record rec;
    rfi_step_record(f->c->policy, f->req, f->resp, f->done_wall_ms, &rec);
    rf_error err;
    if (rf_ledger_append(f->c->ledger, &rec, &err) != RF_OK) rfi_step_ledger_error(f->resp, &err);
}

void rfi_flow_cleanup(rfi_flow *f) {
    rfi_redirect_reset(f);
    free(f->url);
    f->url = NULL;
    curl_slist_free_all(f->headers);
    f->headers = NULL;
    free(f->body.data);
    free(f->head.data);
    f->body = (rfi_buf){0};
    f->head = (rfi_buf){0};
}
