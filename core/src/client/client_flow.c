/*
 * One logical request carried by libcurl (client_flow.h): READY → (rf_budget) → IN_FLIGHT → (the attempt loop)
 * → WAITING → READY … → DONE. The same flow serves the blocking rf_client_request and curl multi. Every
 * per-attempt value (body, headers, wait headers, Date, curl options) is reset before each attempt, so nothing
 * from attempt 1 leaks into attempt 2. What libcurl saw goes down to the attempt loop (attempt_step.c) in the
 * engine's words; nothing below calls back up.
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

/* ---- libcurl's callbacks ---------------------------------------------------------------------------------- */

/*
 * libcurl silently re-sends a request once when a reused keep-alive connection dies before any response
 * (its own retry, with no policy behind it). Every send passes here: a send not preceded by a response to
 * the previous one is that resend, and is aborted; the attempt ends as the connection failure it was (see
 * observe). A followed redirect is a send after a response, and goes ahead.
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
    return f->state == RFI_FLOW_IN_FLIGHT && now_ms >= f->attempt_start_ms + f->at.timeout_ms;
}

/* Stops reading a body once the per-try timeout has passed (a large body at high concurrency read on past the
 * deadline, because libcurl checks its timer only between reads); 0 aborts the transfer. */
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
    char why[160];
    for (size_t i = 0; i < req->n_headers; i++)
        if (!rfi_header_valid(req->headers[i], why, sizeof why)) return rfi_fail(err, "headers", "%s", why);
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

/* The request's header list: the client's, the request's, its Idempotency-Key, and "Expect:" for a body. */
static bool build_headers(rfi_flow *f, const rf_request *req) {
    const rfi_flow_env *env = f->env;
    bool ok = true;
    for (size_t i = 0; ok && i < env->n_headers; i++) ok = append_header(&f->headers, env->headers[i]);
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
    return ok;
}

rf_status rfi_flow_init(rfi_flow *f, rfi_flow_env *env, CURL *easy, const rf_request *req, rf_response *resp,
                        rf_attempt_hook hook, void *hook_ud, rf_error *err) {
    memset(f, 0, sizeof *f);
    f->env = env;
    f->easy = easy;
    f->hook = hook;
    f->hook_ud = hook_ud;
    f->body.max = env->max_body_bytes;
    f->head.max = 256 * 1024;
    memset(resp, 0, sizeof *resp);
    rf_status st = check_request(env, req, err);
    if (st != RF_OK) return st;
    /* A request's method and path do not change: its route is matched once, for every verdict. Room for one try (most
     * requests take one; a few hundred bytes, which malloc serves from its caches), grown by the attempt loop up to
     * RF_MAX_TRIES. */
    long route = rf_policy_match(env->policy, req->method, strlen(req->method), req->path, strlen(req->path));
    rfi_attempts_init(&f->at, env->policy, req, resp, route, 1);
    st = rfi_limits_init(&f->limits, env->policy, route, req, rfi_step_inbound_deadline(&f->at), err);
    if (st != RF_OK) return st;
    rfi_response_head_init(&f->rh, f->at.prop.enabled ? f->at.prop.overloaded_header : NULL);
    if (!build_url(f, req) || !build_headers(f, req) || (resp->tries = malloc(sizeof *resp->tries)) == NULL) {
        rfi_flow_cleanup(f);
        return rfi_report(err, RF_ENOMEM, "request", "out of memory");
    }
    f->start_ms = rfi_mono_ms();
    f->state = RFI_FLOW_READY;
    return RF_OK;
}

/* ---- an attempt ---------------------------------------------------------------------------------------------- */

static void flow_done(rfi_flow *f, rf_reason reason);

/* Whether header line `line` ("Name: value") is one of the propagation lines' names (lines[0..n), "name: value"). */
static bool propagated_name(const char *line, char lines[2][RF_PROPAGATION_LINE_MAX], size_t n) {
    const char *colon = strchr(line, ':');
    for (size_t i = 0; colon != NULL && i < n; i++) {
        const size_t len = (size_t)(colon - line);
        if (strncasecmp(line, lines[i], len) == 0 && lines[i][len] == ':') return true;
    }
    return false;
}

/* The header list this attempt sends: the request's (a followed redirect's own), and with the route's propagation
 * its attempt number and the ms it may take, in a list of its own built for the attempt, where they replace any
 * line of the same name. False when memory runs out. */
static bool attempt_header_list(rfi_flow *f, struct curl_slist **out) {
    struct curl_slist *base = f->hop.url ? f->hop.headers : f->headers;
    curl_slist_free_all(f->attempt_headers);
    f->attempt_headers = NULL;
    char lines[2][RF_PROPAGATION_LINE_MAX];
    const size_t n = rfi_step_lines(&f->at, f->in_hop, f->at.timeout_ms, lines);
    *out = base;
    if (n == 0) return true;
    bool ok = true;
    for (const struct curl_slist *l = base; ok && l != NULL; l = l->next)
        if (!propagated_name(l->data, lines, n)) ok = append_header(&f->attempt_headers, l->data);
    for (size_t i = 0; ok && i < n; i++) ok = append_header(&f->attempt_headers, lines[i]);
    *out = f->attempt_headers;
    return ok;
}

/* Sets every option of this attempt's request on the flow's easy handle. The handle is the client's, with the
 * options all its requests share (rfi_easy_new); every other option any attempt sets is set here, to this
 * attempt's value or back to libcurl's default, so nothing of an earlier attempt or request carries over
 * (spec/core/test_client_flow.c: a POST's body, headers and method on a reused handle): a curl_easy_reset and the
 * shared options again cost more than the rest of the attempt's setup. headers: attempt_header_list's. */
static void set_attempt_options(rfi_flow *f, struct curl_slist *headers) {
    const rf_request *req = f->at.req;
    const char *method = f->hop.method ? f->hop.method : req->method;
    const char *body = f->hop.drop_body ? NULL : req->body;
    CURL *e = f->easy;
    curl_easy_setopt(e, CURLOPT_URL, f->hop.url ? f->hop.url : f->url);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)f->at.timeout_ms);
    rfi_network_apply(&f->env->net, e, f->at.timeout_ms, f->url, &f->peer); /* connect timeout, HTTP version */
    /* A hop sends its own list, even an empty one (every header dropped for another origin): never the request's. */
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, f);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, f->errbuf);
    curl_easy_setopt(e, CURLOPT_PRIVATE, f);
    curl_easy_setopt(e, CURLOPT_PREREQDATA, f);
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

bool rfi_flow_begin_attempt(rfi_flow *f) {
    if (f->in_hop) { /* a followed redirect: rf_redirect_verdict gave its timeout */
        f->at.timeout_ms = rfi_limits_timeout(&f->limits, f->hop_timeout_ms);
    } else {
        int64_t timeout;
        rf_reason stop;
        if (!rfi_step_begin(&f->at, rfi_limits_elapsed(&f->limits, rfi_mono_ms() - f->start_ms), &timeout, &stop)) {
            flow_done(f, stop);
            return false;
        }
        f->at.timeout_ms = rfi_limits_timeout(&f->limits, timeout);
        rfi_hop_clear(&f->hop); /* a new attempt starts from the request itself */
        f->hops = 0;
    }
    struct curl_slist *headers;
    if (!attempt_header_list(f, &headers)) { /* out of memory: no attempt without its propagation, fail closed */
        flow_done(f, RF_REASON_MAX_ATTEMPTS);
        return false;
    }
    buf_reset(&f->body);
    buf_reset(&f->head);
    rfi_response_head_reset(&f->rh);
    f->errbuf[0] = '\0';
    set_attempt_options(f, headers);
    f->sends = f->responses = 0;
    f->resend_blocked = false;
    f->timed_out = false;
    f->attempt_start_ms = rfi_mono_ms();
    f->state = RFI_FLOW_IN_FLIGHT;
    return true;
}

/* What libcurl saw of the request that just ended, in the engine's words (end's strings point into it and f). */
typedef struct observed {
    rfi_attempt_end end;
    char error[128]; /* the size of rf_try.error */
} observed;

/* The end of an attempt, phase 1: libcurl's result and the response head become the attempt loop's facts. */
static void observe(rfi_flow *f, CURLcode rc, int64_t now, observed *o) {
    long status = 0, os_errno = 0, request_size = 0; /* request_size: bytes sent (reset at every transfer's start) */
    curl_easy_getinfo(f->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(f->easy, CURLINFO_OS_ERRNO, &os_errno);
    curl_easy_getinfo(f->easy, CURLINFO_REQUEST_SIZE, &request_size);
    rf_transport transport = rf_transport_from_curl((int)rc, os_errno);
    if (rc == CURLE_WRITE_ERROR && f->body.overflow) transport = RF_TRANSPORT_OTHER;
    if (f->timed_out) transport = RF_TRANSPORT_TIMEOUT; /* cut by the client at its per-try timeout */
    bool resend_blocked = rc == CURLE_ABORTED_BY_CALLBACK && f->resend_blocked;
    if (resend_blocked) transport = RF_TRANSPORT_CONNECT_RESET; /* the reused connection died unanswered */
    o->error[0] = '\0';
    if (rc != CURLE_OK) {
        if (f->timed_out)
            snprintf(o->error, sizeof o->error, "per-try timeout of %" PRId64 " ms passed", f->at.timeout_ms);
        else if (f->body.overflow)
            snprintf(o->error, sizeof o->error, "response body over max_body_bytes (%zu)", f->body.max);
        else if (resend_blocked)
            snprintf(o->error, sizeof o->error, "connection closed before a response (libcurl's own resend blocked)");
        else {
            snprintf(o->error, sizeof o->error, "%.127s", f->errbuf[0] ? f->errbuf : curl_easy_strerror(rc));
            transport = rfi_network_refine(&f->env->net, f->easy, rc, transport, f->hop.url ? f->hop.url : f->url,
                                           &f->peer, o->error, sizeof o->error);
        }
    }
    o->end = (rfi_attempt_end){.status = status >= 100 && status <= 599 ? (int)status : 0,
                               .transport = transport,
                               .error = o->error[0] ? o->error : NULL,
                               .date = f->rh.has_date ? f->rh.date : NULL,
                               .not_sent = rc != CURLE_OK && request_size == 0, /* no byte of the request went out */
                               .hop = f->in_hop,
                               .overloaded = f->rh.overloaded,
                               .elapsed_ms = now - f->attempt_start_ms,
                               .request_elapsed_ms = rfi_limits_elapsed(&f->limits, now - f->start_ms),
                               .wall_ms = rfi_wall_ms()};
    for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) o->end.hints[h] = f->rh.has_hint[h] ? f->rh.hint[h] : NULL;
}

/* Phase 2: whether the request that just ended is a 3xx for the redirect verdict (follow_redirects on, a Location);
 * then its next request is made ready in *next when it can be followed (an http or https Location, and memory):
 * ask->next_ready. */
static bool redirect_to_ask(rfi_flow *f, CURLcode rc, const rfi_attempt_end *end, rfi_redirect_ask *ask,
                            rfi_hop *next) {
    char *location = NULL;
    if (!f->env->follow_redirects || rc != CURLE_OK || end->transport != RF_TRANSPORT_OK ||
        !rfi_redirect_status(end->status) || curl_easy_getinfo(f->easy, CURLINFO_REDIRECT_URL, &location) != CURLE_OK ||
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
        flow_done(f, v->reason);
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

void rfi_flow_end_attempt(rfi_flow *f, CURLcode rc) {
    int64_t now = rfi_mono_ms();
    observed o;
    observe(f, rc, now, &o);
    rfi_hop next = {0};
    rfi_redirect_ask ask = {0};
    bool redirect = redirect_to_ask(f, rc, &o.end, &ask, &next);
    f->in_hop = false;
    /* Phase 3: the attempt loop records the try, decides, lets the hook narrow and makes room for the next. */
    rf_verdict v;
    int hook_rc = 0;
    bool retry = rfi_step_after(&f->at, &o.end, redirect ? &ask : NULL, &f->env->rng, f->env->budget, f->hook,
                                f->hook_ud, &hook_rc, &v);
    if (hook_rc < 0) f->hook_failed = true;
    settle(f, retry, ask.followed, &next, &v, now);
}

/* ---- the end of a request ------------------------------------------------------------------------------------ */

/* Moves the body and headers into the response, and the attempt loop sets the outcome. The ledger line is the
 * client's to write (client.c), in a batch with the others it reports. */
static void flow_done(rfi_flow *f, rf_reason reason) {
    rf_response *r = f->at.resp;
    r->body = f->body.data ? f->body.data : calloc(1, 1);
    r->body_len = f->body.data ? f->body.len : 0;
    r->headers = f->head.data ? f->head.data : calloc(1, 1);
    r->headers_len = f->head.data ? f->head.len : 0;
    f->body = (rfi_buf){0};
    f->head = (rfi_buf){0};
    f->state = RFI_FLOW_DONE;
    f->done_wall_ms = rfi_wall_ms();
    rfi_step_end(&f->at, reason, rfi_mono_ms() - f->start_ms);
}

rfi_finished rfi_flow_finished(const rfi_flow *f) {
    return (rfi_finished){.req = f->at.req, .resp = f->at.resp, .wall_ms = f->done_wall_ms};
}

void rfi_flow_cleanup(rfi_flow *f) {
    rfi_hop_clear(&f->hop);
    free(f->url);
    f->url = NULL;
    curl_slist_free_all(f->headers);
    f->headers = NULL;
    curl_slist_free_all(f->attempt_headers);
    f->attempt_headers = NULL;
    free(f->body.data);
    free(f->head.data);
    f->body = (rfi_buf){0};
    f->head = (rfi_buf){0};
}
