/*
 * One logical request carried by libcurl (client_flow.h): READY → (rf_budget) → IN_FLIGHT → (the attempt loop)
 * → WAITING → READY … → DONE. The same flow serves the blocking rf_client_request and curl multi. Every
 * per-attempt value (body, headers, wait headers, Date, curl options) lives on the attempt's wire and is reset before
 * each attempt, so nothing from attempt 1 leaks into attempt 2. A hedged request (the lock's hedging, gRPC A6) has
 * several wires in flight at once: a hedge starts when its delay passes with no response (rf_hedge_decide), the
 * first success wins and the others are cancelled, a fatal class ends it. What libcurl saw goes down to the attempt
 * loop (attempt_step.c) in the engine's words; nothing below calls back up.
 */
#define _POSIX_C_SOURCE 200809L
#include "client_flow.h"
#include "../util/clock_ms.h"
#include "../util/report.h"

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

/* ---- libcurl's callbacks ---------------------------------------------------------------------------------- */

/*
 * libcurl silently re-sends a request once when a reused keep-alive connection dies before any response
 * (its own retry, with no policy behind it). Every send passes here: a send not preceded by a response to
 * the previous one is that resend, and is aborted; the attempt ends as the connection failure it was (see
 * observe). A followed redirect is a send after a response, and goes ahead.
 */
static int on_prereq(void *ud, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port, int conn_local_port) {
    (void)conn_primary_ip, (void)conn_local_ip, (void)conn_primary_port, (void)conn_local_port;
    rfi_wire *w = ud;
    if (w->sends > w->responses) {
        w->resend_blocked = true;
        return CURL_PREREQFUNC_ABORT;
    }
    w->sends++;
    return CURL_PREREQFUNC_OK;
}

bool rfi_wire_overdue(const rfi_wire *w, int64_t now_ms) { return w->busy && now_ms >= w->start_ms + w->timeout_ms; }

/* Stops reading a body once the per-try timeout has passed (a large body at high concurrency read on past the
 * deadline, because libcurl checks its timer only between reads); 0 aborts the transfer. Pauses the transfer once
 * the curl multi pass reading it is RFI_PASS_SLICE_MS old (libcurl keeps this chunk and gives it again when the
 * pass resumes the transfer), so that the pass ends and every other attempt's timer is looked at. */
static size_t on_body(char *data, size_t size, size_t n, void *ud) {
    rfi_wire *w = ud;
    const int64_t now = rfi_mono_ms();
    if (rfi_wire_overdue(w, now)) {
        w->timed_out = true;
        return 0;
    }
    rfi_flow_env *env = w->flow->env;
    if (env->pass_until_ms >= 0 && now >= env->pass_until_ms && !w->paused) {
        w->paused = true;
        w->next_paused = env->paused;
        env->paused = w;
        return CURL_WRITEFUNC_PAUSE;
    }
    return buf_append(&w->body, data, size * n) ? size * n : 0; /* 0 aborts: over max_body_bytes */
}

void rfi_multi_pass(CURLM *multi, rfi_flow_env *env) {
    int running = 0;
    env->pass_until_ms = rfi_mono_ms() + RFI_PASS_SLICE_MS;
    curl_multi_perform(multi, &running);
    env->pass_until_ms = -1; /* resuming gives on_body the kept chunk at once: it is taken, not paused again */
    while (env->paused != NULL) {
        rfi_wire *w = env->paused;
        env->paused = w->next_paused;
        w->paused = false;
        w->next_paused = NULL;
        /* An error (the kept chunk refused: over max_body_bytes, or past the per-try timeout) is kept: an attempt
         * libcurl would then end without one (nothing left to read) ends with it (observe). */
        CURLcode rc = curl_easy_pause(w->easy, CURLPAUSE_CONT);
        if (w->resume_rc == CURLE_OK) w->resume_rc = rc;
    }
}

static size_t on_header(char *data, size_t size, size_t n, void *ud) {
    rfi_wire *w = ud;
    size_t len = size * n;
    if (rfi_response_head_line(&w->rh, data, len)) {
        w->responses++;
        /* A new response (after a 1xx or a followed redirect): the previous one's headers are forgotten. */
        buf_reset(&w->head);
    }
    buf_append(&w->head, data, len); /* a header block over the cap is cut; the attempt goes on */
    return len;
}

/* Sets the options every request of a client shares on e: the callbacks, protocols, no signals. */
static void set_shared_options(CURL *e) {
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L); /* the flow follows redirects itself: a try per hop */
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
}

CURL *rfi_easy_new(const rfi_flow_env *env) {
    CURL *e = curl_easy_init();
    if (e == NULL) return NULL;
    set_shared_options(e);
    rfi_network_handle(&env->net, e);
    return e;
}

CURL *rfi_easy_take(rfi_flow_env *env) { return env->n_idle > 0 ? env->idle[--env->n_idle] : rfi_easy_new(env); }

void rfi_easy_give(rfi_flow_env *env, CURL *easy) {
    if (easy == NULL) return;
    if (env->n_idle == env->idle_cap) {
        size_t cap = env->idle_cap ? 2 * env->idle_cap : 16;
        CURL **more = realloc(env->idle, cap * sizeof *more);
        if (more == NULL) {
            curl_easy_cleanup(easy);
            return;
        }
        env->idle = more;
        env->idle_cap = cap;
    }
    env->idle[env->n_idle++] = easy;
}

/* ---- the start of a request ---------------------------------------------------------------------------------- */

/* Checks what a request may hold before anything is sent (RF_EINVAL naming the field). */
static rf_status check_request(const rfi_flow_env *env, const rf_request *req, rf_error *err) {
    if (req->method == NULL || req->method[0] == '\0' || strpbrk(req->method, " \r\n") != NULL)
        return rfi_fail(err, "method", "is required and must be a method token");
    if (req->path == NULL || req->path[0] != '/' || strpbrk(req->path, " \r\n#") != NULL)
        return rfi_fail(err, "path", "must start with '/' and contain no spaces, CR, LF or '#'");
    /* A lowercase letter in the method can match no route (RFC 9110 §9.1): refused before any attempt in the engine's
     * words (rf_budget's check says why), never stopped as a silent no-route. Only such a method pays the call. */
    for (const char *m = req->method; *m != '\0'; m++) {
        if (*m >= 'a' && *m <= 'z') {
            rf_attempt_budget refused;
            rf_budget(env->policy, req->method, strlen(req->method), req->path, strlen(req->path), 0, 0, &refused, err);
            return RF_EINVAL;
        }
    }
    if (req->query && strpbrk(req->query, " \r\n#") != NULL)
        return rfi_fail(err, "query", "must be encoded: no spaces, CR, LF or '#'");
    if (req->idempotency_key && (req->idempotency_key[0] == '\0' || strpbrk(req->idempotency_key, "\r\n")))
        return rfi_fail(err, "idempotency_key", "must be a non-empty string without CR or LF");
    for (size_t i = 0; i < req->n_headers; i++) {
        rf_status st = rf_request_header_check(req->headers[i], err);
        if (st != RF_OK) return st;
    }
    return RF_OK;
}

/* base_url + path [+ "?" + query] into f->url, copied piece by piece (once per request: no printf). */
static bool build_url(rfi_flow *f, const rf_request *req) {
    const char *base = f->env->base_url;
    size_t base_len = strlen(base), path_len = strlen(req->path), query_len = req->query ? strlen(req->query) : 0;
    f->url = malloc(base_len + path_len + (req->query ? query_len + 1 : 0) + 1);
    if (f->url == NULL) return false;
    char *u = f->url;
    memcpy(u, base, base_len);
    memcpy(u += base_len, req->path, path_len);
    u += path_len;
    if (req->query) {
        *u++ = '?';
        memcpy(u, req->query, query_len);
        u += query_len;
    }
    *u = '\0';
    return true;
}

/* Appends a copy of line to *list; on failure (out of memory) *list is left whole, for the caller to free. */
static bool append_header(struct curl_slist **list, const char *line) {
    struct curl_slist *next = curl_slist_append(*list, line);
    if (next == NULL) return false;
    *list = next;
    return true;
}

/* Whether a header line is a gRPC Content-Type ("Content-Type: application/grpc", "…application/grpc+proto", any
 * case of the name, spaces or tabs before the value). */
static bool is_grpc_content_type(const char *line) {
    static const char name[] = "content-type:", type[] = "application/grpc";
    if (strncasecmp(line, name, sizeof name - 1) != 0) return false;
    const char *v = line + sizeof name - 1;
    while (*v == ' ' || *v == '\t') v++;
    return strncasecmp(v, type, sizeof type - 1) == 0 && (v[sizeof type - 1] == '\0' || v[sizeof type - 1] == '+' ||
                                                          v[sizeof type - 1] == ';' || v[sizeof type - 1] == ' ');
}

/* The request's header list: the client's, the request's, its Idempotency-Key, "TE: trailers" for a gRPC call, and
 * "Expect:" for a body. */
static bool build_headers(rfi_flow *f, const rf_request *req) {
    const rfi_flow_env *env = f->env;
    bool ok = true, grpc = false;
    for (size_t i = 0; ok && i < env->n_headers; i++) {
        ok = append_header(&f->headers, env->headers[i]);
        grpc |= is_grpc_content_type(env->headers[i]);
    }
    for (size_t i = 0; ok && i < req->n_headers; i++) {
        ok = append_header(&f->headers, req->headers[i]);
        grpc |= is_grpc_content_type(req->headers[i]);
    }
    /* A gRPC server refuses a call without "te: trailers" (gRPC over HTTP/2: it detects proxies that drop trailers,
     * where the status travels). TE steers the connection, so a caller may not set it (RF_FRAMING_HEADERS): the
     * transport writes it, for a gRPC Content-Type only. */
    if (ok && grpc) ok = append_header(&f->headers, "TE: trailers");
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
    return ok;
}

/* The name of the header that says an upstream is overloaded, with the route's propagation; NULL without. */
static const char *overloaded_name(const rfi_flow *f) {
    return f->at.prop.enabled ? f->at.prop.overloaded_header : NULL;
}

/* A wire of flow f on easy, its buffers empty and capped by the client's options. */
static void wire_init(rfi_wire *w, rfi_flow *f, CURL *easy) {
    memset(w, 0, sizeof *w);
    w->flow = f;
    w->easy = easy;
    w->body.max = f->env->max_body_bytes;
    w->head.max = 256 * 1024;
}

rf_status rfi_flow_init(rfi_flow *f, rfi_flow_env *env, CURL *easy, const rf_request *req, rf_response *resp,
                        rf_attempt_hook hook, void *hook_ud, rf_error *err) {
    memset(f, 0, sizeof *f);
    f->env = env;
    wire_init(&f->wire, f, easy);
    f->hook = hook;
    f->hook_ud = hook_ud;
    f->retry_at = -1;
    f->first_start_ms = -1;
    memset(resp, 0, sizeof *resp);
    rf_status st = check_request(env, req, err);
    if (st != RF_OK) return st;
    /* A request's method and path do not change: its route is matched once, for every verdict. */
    const size_t method_len = strlen(req->method);
    long route = rf_policy_match(env->policy, req->method, method_len, req->path, strlen(req->path));
    rfi_request_hedging(env->policy, route, req, &f->hedging);
    /* Room for one try (most requests take one; a few hundred bytes, which malloc serves from its caches), grown by
     * the attempt loop up to RF_MAX_TRIES; a hedged request's tries, one per attempt started, up front. */
    size_t tries = 1;
    if (f->hedging.hedged) {
        rf_route_view rv;
        rf_policy_route(env->policy, (size_t)route, &rv);
        if (env->follow_redirects)
            return rfi_fail(err, "follow_redirects",
                            "route \"%s\" hedges its requests (hedging), whose attempts overlap and do not follow "
                            "redirects: send it with a client without follow_redirects",
                            rv.endpoint);
        tries = (size_t)rv.max_attempts;
    }
    rfi_attempts_init(&f->at, env->policy, req, resp, route, tries);
    st = rfi_limits_init(&f->limits, env->policy, route, req, rfi_step_inbound_deadline(&f->at), err);
    if (st != RF_OK) return st;
    rfi_response_head_init(&f->wire.rh, overloaded_name(f));
    if (!build_url(f, req) || !build_headers(f, req) || (resp->tries = malloc(tries * sizeof *resp->tries)) == NULL) {
        rfi_flow_cleanup(f);
        return rfi_report(err, RF_ENOMEM, "request", "out of memory");
    }
    f->start_ms = rfi_mono_ms();
    f->state = RFI_FLOW_READY;
    return RF_OK;
}

/* ---- an attempt ---------------------------------------------------------------------------------------------- */

static void flow_done(rfi_flow *f, rfi_wire *answer, rf_reason reason);

/* Whether header line `line` ("Name: value") is one of the propagation lines' names (lines[0..n), "name: value"). */
static bool propagated_name(const char *line, char lines[2][RF_PROPAGATION_LINE_MAX], size_t n) {
    const char *colon = strchr(line, ':');
    for (size_t i = 0; colon != NULL && i < n; i++) {
        const size_t len = (size_t)(colon - line);
        if (strncasecmp(line, lines[i], len) == 0 && lines[i][len] == ':') return true;
    }
    return false;
}

/* Builds the header list the attempt about to start sends on w with per-try timeout timeout_ms: with the route's
 * propagation, the request's list (a followed redirect's own) with the attempt's number (rfi_step_lines: in_hop, a
 * followed redirect's request, belongs to the attempt in flight; else the next) and the ms it may take, in a
 * list of the wire's own, where they replace any line of the same name; without, none (the request's list is sent).
 * False when memory runs out. */
static bool wire_headers(rfi_flow *f, rfi_wire *w, bool in_hop, int64_t timeout_ms) {
    struct curl_slist *base = f->hop.url ? f->hop.headers : f->headers;
    curl_slist_free_all(w->attempt_headers);
    w->attempt_headers = NULL;
    char lines[2][RF_PROPAGATION_LINE_MAX];
    const size_t n = rfi_step_lines(&f->at, in_hop, timeout_ms, lines);
    bool ok = true;
    for (const struct curl_slist *l = base; ok && n > 0 && l != NULL; l = l->next)
        if (!propagated_name(l->data, lines, n)) ok = append_header(&w->attempt_headers, l->data);
    for (size_t i = 0; ok && i < n; i++) ok = append_header(&w->attempt_headers, lines[i]);
    return ok;
}

/* Sets every option of this attempt's request on w's easy handle. The handle is the client's, with the options all
 * its requests share (rfi_easy_new); every other option any attempt sets is set here, to this attempt's value or
 * back to libcurl's default, so nothing of an earlier attempt or request carries over (spec/core/test_client_flow.c:
 * a POST's body, headers and method on a reused handle): a curl_easy_reset and the shared options again cost more
 * than the rest of the attempt's setup. */
static void set_attempt_options(rfi_flow *f, rfi_wire *w) {
    const rf_request *req = f->at.req;
    const char *method = f->hop.method ? f->hop.method : req->method;
    const char *body = f->hop.drop_body ? NULL : req->body;
    CURL *e = w->easy;
    curl_easy_setopt(e, CURLOPT_URL, f->hop.url ? f->hop.url : f->url);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)w->timeout_ms);
    rfi_network_apply(&f->env->net, e, w->timeout_ms, f->url, &w->peer); /* connect timeout, HTTP version */
    /* A hop sends its own list, even an empty one (every header dropped for another origin): never the request's. */
    curl_easy_setopt(e, CURLOPT_HTTPHEADER,
                     w->attempt_headers != NULL ? w->attempt_headers
                     : f->hop.url               ? f->hop.headers
                                                : f->headers);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, w);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, w->errbuf);
    curl_easy_setopt(e, CURLOPT_PRIVATE, w);
    curl_easy_setopt(e, CURLOPT_PREREQDATA, w);
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
}

/* Starts an attempt on w (idle) with per-try timeout timeout_ms after a wait of delay_ms; hedge: the hedging delay
 * started it beside others. */
static void wire_start(rfi_flow *f, rfi_wire *w, int64_t timeout_ms, int64_t delay_ms, bool hedge) {
    buf_reset(&w->body);
    buf_reset(&w->head);
    rfi_response_head_reset(&w->rh);
    w->errbuf[0] = '\0';
    w->timeout_ms = timeout_ms;
    w->delay_ms = delay_ms;
    w->hedge = hedge;
    set_attempt_options(f, w);
    w->sends = w->responses = 0;
    w->resend_blocked = false;
    w->timed_out = false;
    w->resume_rc = CURLE_OK;
    w->busy = true;
    w->start_ms = rfi_mono_ms();
    if (f->first_start_ms < 0) f->first_start_ms = w->start_ms;
    f->in_flight++;
    f->state = RFI_FLOW_IN_FLIGHT;
}

/* The next attempt (or followed redirect) of a request that is not hedged, on its one wire; NULL when rf_budget
 * refuses it (the flow is then DONE). */
static rfi_wire *begin_attempt(rfi_flow *f) {
    if (f->in_hop) { /* a followed redirect: rf_redirect_verdict gave its timeout */
        f->at.timeout_ms = rfi_limits_timeout(&f->limits, f->hop_timeout_ms);
    } else {
        int64_t timeout;
        rf_reason stop;
        if (!rfi_step_begin(&f->at, rfi_limits_elapsed(&f->limits, rfi_mono_ms() - f->start_ms), &timeout, &stop)) {
            flow_done(f, &f->wire, stop);
            return NULL;
        }
        f->at.timeout_ms = rfi_limits_timeout(&f->limits, timeout);
        rfi_hop_clear(&f->hop); /* a new attempt starts from the request itself */
        f->hops = 0;
    }
    if (!wire_headers(f, &f->wire, f->in_hop, f->at.timeout_ms)) {
        flow_done(f, &f->wire, RF_REASON_MAX_ATTEMPTS); /* out of memory: no attempt without its propagation */
        return NULL;
    }
    wire_start(f, &f->wire, f->at.timeout_ms, f->at.delay_ms, false);
    return &f->wire;
}

/* An idle wire of a hedged request: its first if free, else another (made, with a handle of the client's, the first
 * time it is needed); NULL when all are busy or memory runs out. */
static rfi_wire *idle_wire(rfi_flow *f) {
    if (!f->wire.busy && !f->wire.in_multi) return &f->wire;
    for (size_t i = 0; i < RFI_MAX_WIRES - 1; i++) {
        rfi_wire *w = f->more[i];
        if (w == NULL) {
            CURL *easy = rfi_easy_take(f->env);
            w = easy ? malloc(sizeof *w) : NULL;
            if (w == NULL) {
                rfi_easy_give(f->env, easy);
                return NULL;
            }
            wire_init(w, f, easy);
            rfi_response_head_init(&w->rh, overloaded_name(f));
            f->more[i] = w;
            return w;
        }
        if (!w->busy && !w->in_multi) return w;
    }
    return NULL;
}

/* Starts an attempt of a hedged request on an idle wire: hedge (the hedging delay passed with attempts in flight:
 * rf_hedge_decide) or not (its first attempt, or a retry a verdict allowed: rf_budget). NULL when refused: a refused
 * hedge ends the hedging; a refused attempt with nothing in flight ends the request. */
static rfi_wire *begin_hedged(rfi_flow *f, int64_t now, bool hedge) {
    const rf_request *req = f->at.req;
    const int64_t elapsed = rfi_limits_elapsed(&f->limits, now - f->start_ms);
    int64_t timeout, delay = hedge ? 0 : f->at.delay_ms;
    if (hedge) {
        const rf_hedge_facts h = {.method = req->method,
                                  .method_len = strlen(req->method),
                                  .started = f->at.attempts,
                                  .elapsed_ms = elapsed,
                                  .has_idempotency_key = req->idempotency_key != NULL,
                                  .mono_ms = now,
                                  .budget_request = &f->at.budget_request};
        rf_verdict v;
        rf_error err;
        if (rf_hedge_decide(f->env->policy, f->at.route, &h, f->env->budget, &v, &err) != RF_OK || !v.retry) {
            f->hedge_stopped = true;
            return NULL;
        }
        if (v.budget > f->at.resp->budget) f->at.resp->budget = v.budget;
        timeout = v.timeout_ms;
    } else {
        rf_reason stop;
        if (!rfi_step_begin(&f->at, elapsed, &timeout, &stop)) {
            if (f->in_flight == 0) flow_done(f, f->last ? f->last : &f->wire, stop);
            return NULL;
        }
    }
    const int64_t per_try_ms = rfi_limits_timeout(&f->limits, timeout);
    rfi_wire *w = idle_wire(f);
    if (w != NULL && !wire_headers(f, w, false, per_try_ms)) w = NULL; /* never a hop: a new attempt */
    if (w == NULL) { /* out of memory: no more hedges; with nothing in flight the request ends (fail closed) */
        f->hedge_stopped = true;
        if (f->in_flight == 0) flow_done(f, f->last ? f->last : &f->wire, RF_REASON_MAX_ATTEMPTS);
        return NULL;
    }
    rfi_step_started(&f->at);
    if (hedge) f->hedges++;
    wire_start(f, w, per_try_ms, delay, hedge);
    /* The next hedge: hedgingDelayMs after this start, and never before a wait a server asked for. */
    if (now + f->hedging.delay_ms > f->hedge_at) f->hedge_at = now + f->hedging.delay_ms;
    return w;
}

rfi_wire *rfi_flow_start_due(rfi_flow *f, int64_t now) {
    if (f->state == RFI_FLOW_WAITING && now >= f->wake_ms) f->state = RFI_FLOW_READY;
    if (!f->hedging.hedged) return f->state == RFI_FLOW_READY ? begin_attempt(f) : NULL;
    if (f->state == RFI_FLOW_READY) return begin_hedged(f, now, false);
    if (f->state != RFI_FLOW_IN_FLIGHT) return NULL;
    if (f->retry_at >= 0 && now >= f->retry_at) {
        f->retry_at = -1;
        rfi_wire *w = begin_hedged(f, now, false);
        if (w != NULL) return w;
    }
    if (!f->hedge_stopped && now >= f->hedge_at) return begin_hedged(f, now, true);
    return NULL;
}

int64_t rfi_earlier(int64_t a, int64_t b) { return a < 0 ? b : b < 0 ? a : a < b ? a : b; }

int64_t rfi_flow_next_ms(const rfi_flow *f) {
    switch (f->state) {
    case RFI_FLOW_DONE: return -1;
    case RFI_FLOW_READY: return 0;
    case RFI_FLOW_WAITING: return f->wake_ms;
    case RFI_FLOW_IN_FLIGHT: break;
    }
    int64_t next = -1;
    if (f->wire.busy) next = f->wire.start_ms + f->wire.timeout_ms;
    for (size_t i = 0; i < RFI_MAX_WIRES - 1 && f->more[i] != NULL; i++)
        if (f->more[i]->busy) next = rfi_earlier(next, f->more[i]->start_ms + f->more[i]->timeout_ms);
    if (f->hedging.hedged) {
        next = rfi_earlier(next, f->retry_at);
        if (!f->hedge_stopped && f->at.attempts < f->hedging.max_attempts) next = rfi_earlier(next, f->hedge_at);
    }
    return next;
}

/* What libcurl saw of the request that just ended, in the engine's words (end's strings point into it and w). */
typedef struct observed {
    rfi_attempt_end end;
    char error[128];               /* the size of rf_try.error */
    char peer[RF_LEDGER_PEER_MAX]; /* the connection's "host:port" (libcurl's primary IP and port), "" when none */
} observed;

/* The "host:port" of the connection libcurl used (CURLINFO_PRIMARY_IP, CURLINFO_PRIMARY_PORT; through a proxy, the
 * proxy's), an IPv6 address in brackets; "" when no connection was made. */
static void observe_peer(CURL *easy, char peer[RF_LEDGER_PEER_MAX]) {
    char *ip = NULL;
    long port = 0;
    peer[0] = '\0';
    if (curl_easy_getinfo(easy, CURLINFO_PRIMARY_IP, &ip) != CURLE_OK || ip == NULL || ip[0] == '\0' ||
        curl_easy_getinfo(easy, CURLINFO_PRIMARY_PORT, &port) != CURLE_OK || port < 1 || port > 65535)
        return;
    const bool v6 = strchr(ip, ':') != NULL;
    int n = snprintf(peer, RF_LEDGER_PEER_MAX, v6 ? "[%s]:%ld" : "%s:%ld", ip, port);
    if (n < 0 || n >= RF_LEDGER_PEER_MAX) peer[0] = '\0';
}

/* The end of an attempt, phase 1: libcurl's result and the response head become the attempt loop's facts. */
static void observe(rfi_flow *f, rfi_wire *w, CURLcode rc, int64_t now, observed *o) {
    long status = 0, os_errno = 0, request_size = 0; /* request_size: bytes sent (reset at every transfer's start) */
    curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(w->easy, CURLINFO_OS_ERRNO, &os_errno);
    curl_easy_getinfo(w->easy, CURLINFO_REQUEST_SIZE, &request_size);
    observe_peer(w->easy, o->peer);
    rf_transport transport = rf_transport_from_curl((int)rc, os_errno);
    if (rc == CURLE_WRITE_ERROR && w->body.overflow) transport = RF_TRANSPORT_OTHER;
    if (w->timed_out) transport = RF_TRANSPORT_TIMEOUT; /* cut by the client at its per-try timeout */
    bool resend_blocked = rc == CURLE_ABORTED_BY_CALLBACK && w->resend_blocked;
    if (resend_blocked) transport = RF_TRANSPORT_CONNECT_RESET; /* the reused connection died unanswered */
    o->error[0] = '\0';
    if (rc != CURLE_OK) {
        if (w->timed_out)
            snprintf(o->error, sizeof o->error, "per-try timeout of %" PRId64 " ms passed", w->timeout_ms);
        else if (w->body.overflow)
            snprintf(o->error, sizeof o->error, "response body over max_body_bytes (%zu)", w->body.max);
        else if (resend_blocked)
            snprintf(o->error, sizeof o->error, "connection closed before a response (libcurl's own resend blocked)");
        else {
            snprintf(o->error, sizeof o->error, "%.127s", w->errbuf[0] ? w->errbuf : curl_easy_strerror(rc));
            transport = rfi_network_refine(&f->env->net, w->easy, rc, transport, f->hop.url ? f->hop.url : f->url,
                                           &w->peer, o->error, sizeof o->error);
        }
    }
    o->end = (rfi_attempt_end){.status = status >= RF_HTTP_STATUS_MIN && status <= RF_HTTP_STATUS_MAX ? (int)status : 0,
                               .transport = transport,
                               .error = o->error[0] ? o->error : NULL,
                               .date = w->rh.has_date ? w->rh.date : NULL,
                               .not_sent = rc != CURLE_OK && request_size == 0, /* no byte of the request went out */
                               .peer = o->peer[0] ? o->peer : NULL,
                               .hop = f->in_hop,
                               .overloaded = w->rh.overloaded,
                               .grpc_status = w->rh.grpc_status,
                               .grpc_bad = w->rh.grpc_bad,
                               .elapsed_ms = now - w->start_ms,
                               .request_elapsed_ms = rfi_limits_elapsed(&f->limits, now - f->start_ms),
                               .wall_ms = rfi_wall_ms(),
                               .mono_ms = now,
                               .hedged = f->hedging.hedged,
                               .counted = f->hedging.hedged,
                               .hedge = w->hedge,
                               .start_ms = w->start_ms - f->first_start_ms};
    for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) o->end.hints[h] = w->rh.has_hint[h] ? w->rh.hint[h] : NULL;
}

/* Phase 2: whether the request that just ended is a 3xx for the redirect verdict (follow_redirects on, a Location);
 * then its next request is made ready in *next when it can be followed (an http or https Location, and memory):
 * ask->next_ready. */
static bool redirect_to_ask(rfi_flow *f, rfi_wire *w, CURLcode rc, const rfi_attempt_end *end, rfi_redirect_ask *ask,
                            rfi_hop *next) {
    char *location = NULL;
    if (!f->env->follow_redirects || rc != CURLE_OK || end->transport != RF_TRANSPORT_OK ||
        !rfi_redirect_status(end->status) || curl_easy_getinfo(w->easy, CURLINFO_REDIRECT_URL, &location) != CURLE_OK ||
        location == NULL)
        return false;
    *ask = (rfi_redirect_ask){.hops = f->hops, .max_redirects = f->env->max_redirects};
    ask->next_ready = rfi_redirect_followable(location) &&
                      rfi_redirect_prepare(next, &f->hop, end->status, location, f->at.req->method, f->url, f->headers);
    return true;
}

/* Phase 4: after the verdict, the next request (the hop of a followed redirect), a wait before the next attempt, or
 * the end. A hop made ready but not followed is dropped. */
static void settle(rfi_flow *f, bool retry, bool followed, rfi_hop *next, const rf_verdict *v, int64_t now) {
    if (!retry || !followed) rfi_hop_clear(next);
    if (!retry) {
        flow_done(f, &f->wire, v->reason);
        return;
    }
    if (followed) {
        rfi_hop_clear(&f->hop);
        f->hop = *next;
        f->hops++;
        f->in_hop = true;
    }
    f->hop_timeout_ms = v->timeout_ms;
    f->at.delay_ms = v->delay_ms;
    f->wake_ms = now + v->delay_ms;
    f->state = RFI_FLOW_WAITING;
}

/* Cancels every attempt of f still in flight, because reason ended the request (why: the try's error): each try
 * recorded as cancelled, each wire idle and emptied of what it read (its handle, still in the multi, is taken out by
 * the caller: the transfer is aborted). */
static void cancel_in_flight(rfi_flow *f, rf_reason reason, const char *why, int64_t now) {
    rfi_wire *wires[RFI_MAX_WIRES];
    size_t n = rfi_flow_wires(f, wires);
    for (size_t i = 0; i < n; i++) {
        rfi_wire *w = wires[i];
        if (!w->busy) continue;
        w->busy = false;
        f->in_flight--;
        buf_reset(&w->body); /* a part of a response: never the request's answer */
        buf_reset(&w->head);
        const bool hedged = f->hedging.hedged;
        const rfi_attempt_end e = {.transport = RF_TRANSPORT_OTHER,
                                   .error = why,
                                   .elapsed_ms = now - w->start_ms,
                                   .request_elapsed_ms = rfi_limits_elapsed(&f->limits, now - f->start_ms),
                                   .wall_ms = rfi_wall_ms(),
                                   .mono_ms = now,
                                   .hop = f->in_hop,
                                   .counted = hedged,
                                   .hedged = hedged,
                                   .hedge = w->hedge,
                                   .start_ms = w->start_ms - f->first_start_ms};
        f->at.delay_ms = w->delay_ms;
        f->at.timeout_ms = w->timeout_ms;
        rfi_step_cancelled(&f->at, &e, reason);
    }
}

/* Phase 3 and 4 of a hedged request: the verdict on w's response, then the request's course. A success wins, and a
 * fatal class (hedge-fatal), the hook's stop or its failure end the request at once: the other attempts are
 * cancelled. Any other failure ends only its own attempt: a retry it allows starts after its wait (and the next hedge
 * waits as long: a server's Retry-After or pushback delays the hedging too), a server's stop or a throttled budget
 * ends the hedging; once nothing is in flight or due, the last verdict ends the request. */
static void hedged_end(rfi_flow *f, rfi_wire *w, observed *o, int64_t now) {
    w->busy = false;
    f->in_flight--;
    f->last = w;
    f->at.delay_ms = w->delay_ms;
    f->at.timeout_ms = w->timeout_ms;
    rf_verdict v;
    int hook_rc = 0;
    bool retry = rfi_step_after(&f->at, &o->end, NULL, &f->env->rng, f->env->budget, f->hook, f->hook_ud, &hook_rc, &v);
    if (hook_rc < 0) f->hook_failed = true;
    if (v.reason == RF_REASON_SUCCESS || v.reason == RF_REASON_HEDGE_FATAL || v.reason == RF_REASON_STOPPED_BY_CALLER ||
        hook_rc < 0) {
        cancel_in_flight(f, v.reason, "cancelled: another attempt's response ended the request", now);
        flow_done(f, w, v.reason);
        return;
    }
    if (retry) {
        const int64_t at = now + v.delay_ms;
        f->retry_at = rfi_earlier(f->retry_at, at);
        if (at > f->hedge_at) f->hedge_at = at; /* the wait asked for (or the backoff) holds the hedging too */
        f->at.delay_ms = v.delay_ms;
    } else if (v.reason == RF_REASON_SERVER_PUSHBACK || v.reason == RF_REASON_RETRY_THROTTLED) {
        f->hedge_stopped = true;
    }
    if (f->in_flight > 0) return; /* the others go on */
    if (f->retry_at >= 0) {
        f->wake_ms = f->retry_at;
        f->retry_at = -1;
        f->state = RFI_FLOW_WAITING;
        return;
    }
    flow_done(f, w, v.reason);
}

void rfi_flow_end_attempt(rfi_flow *f, rfi_wire *w, CURLcode rc) {
    if (rc == CURLE_OK) rc = w->resume_rc; /* the chunk a resumed transfer handed back was refused */
    int64_t now = rfi_mono_ms();
    observed o;
    observe(f, w, rc, now, &o);
    if (f->hedging.hedged) {
        hedged_end(f, w, &o, now);
        return;
    }
    w->busy = false;
    f->in_flight--;
    rfi_hop next = {0};
    rfi_redirect_ask ask = {0};
    bool redirect = redirect_to_ask(f, w, rc, &o.end, &ask, &next);
    f->in_hop = false;
    /* Phase 3: the attempt loop records the try, decides, lets the hook narrow and makes room for the next. */
    rf_verdict v;
    int hook_rc = 0;
    bool retry = rfi_step_after(&f->at, &o.end, redirect ? &ask : NULL, &f->env->rng, f->env->budget, f->hook,
                                f->hook_ud, &hook_rc, &v);
    if (hook_rc < 0) f->hook_failed = true;
    settle(f, retry, ask.followed, &next, &v, now);
}

void rfi_flow_stop(rfi_flow *f, rf_reason reason, const char *why) {
    if (f->state == RFI_FLOW_DONE) return;
    cancel_in_flight(f, reason, why, rfi_mono_ms());
    f->in_hop = false;
    f->retry_at = -1;
    /* The answer: the last response a hedged request read, else the one wire's (emptied when its attempt was cut). */
    flow_done(f, f->hedging.hedged && f->last != NULL ? f->last : &f->wire, reason);
}

/* ---- the end of a request ------------------------------------------------------------------------------------ */

/* Moves the answer's body and headers into the response (answer: the wire whose response ended the request), and
 * the attempt loop sets the outcome. A hedged request that never hedged keeps no hedging fields in its tries (its
 * ledger line is any request's). The ledger line is the client's to write (client.c), in a batch with the others
 * it reports. */
static void flow_done(rfi_flow *f, rfi_wire *answer, rf_reason reason) {
    rf_response *r = f->at.resp;
    r->body = answer->body.data ? answer->body.data : calloc(1, 1);
    r->body_len = answer->body.data ? answer->body.len : 0;
    r->headers = answer->head.data ? answer->head.data : calloc(1, 1);
    r->headers_len = answer->head.data ? answer->head.len : 0;
    answer->body = (rfi_buf){0};
    answer->head = (rfi_buf){0};
    f->state = RFI_FLOW_DONE;
    f->done_wall_ms = rfi_wall_ms();
    if (f->hedging.hedged && f->hedges == 0) {
        for (size_t i = 0; i < r->n_tries; i++) {
            r->tries[i].start_ms = -1;
            r->tries[i].fate = RF_FATE_NONE;
        }
    }
    const rf_budget_source hedges_budget = r->budget; /* what the hedges' decisions used, kept over finish */
    rfi_step_end(&f->at, reason, rfi_mono_ms() - f->start_ms);
    if (hedges_budget > r->budget) r->budget = hedges_budget;
}

rfi_finished rfi_flow_finished(const rfi_flow *f) {
    return (rfi_finished){.req = f->at.req, .resp = f->at.resp, .wall_ms = f->done_wall_ms};
}

size_t rfi_flow_wires(rfi_flow *f, rfi_wire **out) {
    size_t n = 0;
    if (f->wire.easy != NULL) out[n++] = &f->wire;
    for (size_t i = 0; i < RFI_MAX_WIRES - 1 && f->more[i] != NULL; i++)
        if (f->more[i]->easy != NULL) out[n++] = f->more[i];
    return n;
}

void rfi_flow_release_wires(rfi_flow *f) {
    for (size_t i = 0; i < RFI_MAX_WIRES - 1 && f->more[i] != NULL; i++) {
        rfi_easy_give(f->env, f->more[i]->easy);
        f->more[i]->easy = NULL;
    }
}

/* Frees what a wire's buffers hold. */
static void wire_free_buffers(rfi_wire *w) {
    curl_slist_free_all(w->attempt_headers);
    w->attempt_headers = NULL;
    free(w->body.data);
    free(w->head.data);
    w->body = (rfi_buf){0};
    w->head = (rfi_buf){0};
}

void rfi_flow_cleanup(rfi_flow *f) {
    rfi_hop_clear(&f->hop);
    free(f->url);
    f->url = NULL;
    curl_slist_free_all(f->headers);
    f->headers = NULL;
    wire_free_buffers(&f->wire);
    for (size_t i = 0; i < RFI_MAX_WIRES - 1 && f->more[i] != NULL; i++) {
        wire_free_buffers(f->more[i]);
        free(f->more[i]);
        f->more[i] = NULL;
    }
}
