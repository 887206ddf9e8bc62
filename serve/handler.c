/* retryfreeze-serve: one call per request once its body has been read (and thrown away), then
 * either a control path (/__stats, /__reset) or an attempt played out as its step says. Runs in
 * the connection's own thread, so sleeping here stalls that connection only. */
#define _POSIX_C_SOURCE 200809L
#include "handler.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "httpdate.h"

/* Longest sequence identity: Idempotency-Key, or method + path + script. */
#define IDENTITY_MAX 4096

/* Marks a request whose headers we have seen; the per-request pointer needs no allocation. */
static int request_seen;

/* 204 and 304 responses carry no content (RFC 9110 §15.3.5, §15.4.5). */
static int bodiless(unsigned status) { return status == 204 || status == 304; }

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, const char *type, const char *body,
                               const char *header, const char *value) {
    size_t len = bodiless(status) ? 0 : strlen(body);
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)(uintptr_t)body, MHD_RESPMEM_MUST_COPY);
    if (r == NULL) return MHD_NO;
    if ((len > 0 && MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type) != MHD_YES) ||
        (header != NULL && MHD_add_response_header(r, header, value) != MHD_YES)) {
        /* Say so rather than close silently, which a test would read as an "empty" fault. */
        MHD_destroy_response(r);
        fprintf(stderr, "retryfreeze-serve: libmicrohttpd refused header %s: '%s'\n", header ? header : "Content-Type",
                header ? value : type);
        return respond(conn, 500, "text/plain", "libmicrohttpd refused a header\n", NULL, NULL);
    }
    enum MHD_Result ok = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result refuse(struct srv_handler *h, struct MHD_Connection *conn, unsigned status, const char *why,
                              const char *detail) {
    char body[512];
    /* One fprintf per line so lines from concurrent connections never interleave. */
    fprintf(stderr, "retryfreeze-serve: refused with %u: %s%s\n", status, why, detail);
    snprintf(body, sizeof body, "%s%s\n", why, detail);
    srv_upstream_count_refusal(h->up, (int)status);
    return respond(conn, status, "text/plain", body, NULL, NULL);
}

static enum MHD_Result control(struct srv_handler *h, struct MHD_Connection *conn, const char *url,
                               const char *method) {
    int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    int post = strcmp(method, "POST") == 0;
    if (strcmp(url, "/__stats") == 0) {
        char json[SRV_STATS_JSON_MAX];
        if (!get) return respond(conn, 405, "text/plain", "use GET\n", MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
        if (srv_upstream_stats_json(h->up, json, sizeof json) < 0)
            return respond(conn, 500, "text/plain", "stats too large\n", NULL, NULL);
        return respond(conn, 200, "application/json", json, NULL, NULL);
    }
    if (!post) return respond(conn, 405, "text/plain", "use POST\n", MHD_HTTP_HEADER_ALLOW, "POST");
    if (srv_upstream_reset(h->up) != 0) return respond(conn, 500, "text/plain", "out of memory\n", NULL, NULL);
    return respond(conn, 200, "application/json", "{\"ok\":true}", NULL, NULL);
}

/* Abort with a TCP RST. libmicrohttpd calls shutdown(SHUT_WR) before closing after MHD_NO, and
 * that FIN would reach the client first, so "reset" would look like "empty". Instead disconnect
 * the socket here: on Linux connect(AF_UNSPEC) on a TCP socket sends the RST at once and leaves
 * the descriptor for libmicrohttpd to close. Linger {1, 0} is the fallback elsewhere: the close
 * then resets whatever is left. */
static enum MHD_Result reset_connection(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci != NULL) {
        struct linger lg = {1, 0};
        struct sockaddr unspec;
        memset(&unspec, 0, sizeof unspec);
        unspec.sa_family = AF_UNSPEC;
        (void)setsockopt(ci->connect_fd, SOL_SOCKET, SO_LINGER, &lg, (socklen_t)sizeof lg);
        (void)connect(ci->connect_fd, &unspec, (socklen_t)sizeof unspec);
    }
    return MHD_NO;
}

/* The body of a "cut" step: 100 of the 1000 bytes its Content-Length announces, then an error, on which
 * libmicrohttpd closes the connection: the client sees a 200 that ends mid-body. */
static ssize_t cut_body(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)cls;
    if (pos >= 100) return MHD_CONTENT_READER_END_WITH_ERROR;
    size_t n = (size_t)(100 - pos) < max ? (size_t)(100 - pos) : max;
    memset(buf, 'x', n);
    return (ssize_t)n;
}

static enum MHD_Result respond_cut(struct MHD_Connection *conn) {
    struct MHD_Response *r = MHD_create_response_from_callback(1000, 100, cut_body, NULL, NULL);
    if (r == NULL) return MHD_NO;
    enum MHD_Result ret = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* A step's answer: respond() plus the step's header= and header-epoch= lines, in script order. */
static enum MHD_Result respond_step(struct MHD_Connection *conn, unsigned status, const char *body, const char *ra,
                                    const struct srv_step *step) {
    size_t len = bodiless(status) ? 0 : strlen(body);
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)(uintptr_t)body, MHD_RESPMEM_MUST_COPY);
    if (r == NULL) return MHD_NO;
    const char *bad = NULL;
    if (len > 0 && MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json") != MHD_YES)
        bad = MHD_HTTP_HEADER_CONTENT_TYPE;
    if (bad == NULL && ra != NULL && MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, ra) != MHD_YES)
        bad = MHD_HTTP_HEADER_RETRY_AFTER;
    for (int i = 0; bad == NULL && i < step->n_headers; i++) {
        const struct srv_header *hd = &step->headers[i];
        char epoch[32];
        if (hd->epoch) snprintf(epoch, sizeof epoch, "%lld", (long long)time(NULL) + hd->epoch_offset_s);
        if (MHD_add_response_header(r, hd->name, hd->epoch ? epoch : hd->value) != MHD_YES) bad = hd->name;
    }
    if (bad != NULL) {
        MHD_destroy_response(r);
        fprintf(stderr, "retryfreeze-serve: libmicrohttpd refused header %s\n", bad);
        return respond(conn, 500, "text/plain", "libmicrohttpd refused a header\n", NULL, NULL);
    }
    enum MHD_Result ok = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ok;
}

/* The waits of a step: its delay, then a timeout's stall. False when the server is stopping. */
static bool wait_step(struct srv_handler *h, const struct srv_step *step) {
    if (step->delay_ms > 0 && srv_stop_sleep_ms(h->stop, step->delay_ms) != 0) return false;
    if (step->kind == SRV_FAULT_TIMEOUT &&
        srv_stop_sleep_ms(h->stop, step->stall_ms > 0 ? step->stall_ms : h->stall_ms) != 0)
        return false;
    return true;
}

/* Sends a step's answer (its waits are over: wait_step). */
static enum MHD_Result play(struct MHD_Connection *conn, const struct srv_step *step, uint64_t n) {
    char body[64], date[SRV_HTTPDATE_LEN + 1];
    const char *ra = NULL;
    unsigned status = step->kind == SRV_FAULT_STATUS ? (unsigned)step->status : 200;

    switch (step->kind) {
    case SRV_FAULT_RESET: return reset_connection(conn);
    case SRV_FAULT_EMPTY: return MHD_NO;
    case SRV_FAULT_CUT: return respond_cut(conn);
    case SRV_FAULT_TIMEOUT:
    case SRV_FAULT_STATUS: break;
    }
    if (step->ra == SRV_RA_TEXT) {
        ra = step->ra_text;
    } else if (step->ra == SRV_RA_DATE) {
        if (srv_httpdate(time(NULL) + (time_t)step->ra_date_offset_s, date, sizeof date) != 0)
            return respond(conn, 500, "text/plain", "retry-after-date out of range\n", NULL, NULL);
        ra = date;
    }
    if (status >= 200 && status <= 299)
        snprintf(body, sizeof body, "{\"ok\":true,\"n\":%" PRIu64 "}", n);
    else
        snprintf(body, sizeof body, "{\"ok\":false,\"status\":%u,\"n\":%" PRIu64 "}", status, n);
    if (step->n_headers > 0) return respond_step(conn, status, body, ra, step);
    return respond(conn, status, "application/json", body, ra ? MHD_HTTP_HEADER_RETRY_AFTER : NULL, ra);
}

static enum MHD_Result attempt(struct srv_handler *h, struct MHD_Connection *conn, const char *url,
                               const char *method) {
    const char *key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Idempotency-Key");
    const char *script = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Fault-Script");
    char err[128], id[IDENTITY_MAX];
    int len;

    if (script != NULL && srv_script_parse(script, strlen(script), 0, NULL, err, sizeof err) < 0)
        return refuse(h, conn, 400, "bad X-Fault-Script: ", err);
    if (key != NULL)
        len = snprintf(id, sizeof id, "%s", key);
    else
        len = snprintf(id, sizeof id, "%s %s\n%s", method, url, script ? script : "");
    if (len < 0 || (size_t)len >= sizeof id) return refuse(h, conn, 400, "sequence identity too long", "");

    struct srv_step step;
    uint64_t n;
    if (srv_upstream_attempt(h->up, id, (size_t)len, key != NULL, script, &step, &n) == SRV_FULL)
        return refuse(h, conn, 503, "too many sequences tracked (--max-keys); POST /__reset", "");
    bool stopping = !wait_step(h, &step);
    /* Out of flight before the answer is queued, not after: a client that has its answer may send its next
     * attempt at once, and that one must not find this one still counted (max_in_flight 2 for sequential tries). */
    srv_upstream_answered(h->up);
    return stopping ? MHD_NO : play(conn, &step, n);
}

enum MHD_Result srv_handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                           const char *version, const char *upload_data, size_t *upload_data_size, void **req_cls) {
    (void)version;
    (void)upload_data;
    if (*req_cls == NULL) {
        *req_cls = &request_seen;
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        *upload_data_size = 0; /* the body is read in full and dropped: only its arrival matters */
        return MHD_YES;
    }
    struct srv_handler *h = cls;
    if (strcmp(url, "/__stats") == 0 || strcmp(url, "/__reset") == 0) return control(h, conn, url, method);
    return attempt(h, conn, url, method);
}
