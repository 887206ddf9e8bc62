/*
 * Redirects, followed by the flow itself (never by libcurl's CURLOPT_FOLLOWLOCATION), so that every hop is
 * an HTTP request of its own: a try in the response, a count in the ledger's attempts, a Retry-After the
 * engine honours (rf_redirect_verdict). What each hop sends follows RFC 9110 §15.4:
 *   303                → GET without a body (HEAD stays HEAD);
 *   301, 302 on a POST → GET without a body (as browsers and curl do); any other method is kept, body too;
 *   307, 308           → the same method and the same body.
 * When a hop drops its body, the request's Content-* header fields go with it. Authorization and Cookie are
 * sent only to the request's own origin (scheme, host and port, RFC 6454): a hop to another origin goes
 * without them (RFC 9110 §15.4: a user agent removes credentials it would not send to the new target).
 */
#define _POSIX_C_SOURCE 200809L
#include "client_redirect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool rfi_redirect_status(int status) {
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/* "scheme://host:port" of url into out (port explicit, defaults filled in); false when url does not parse. */
static bool origin_of(const char *url, char *out, size_t cap) {
    CURLU *u = curl_url();
    if (u == NULL) return false;
    char *scheme = NULL, *host = NULL, *port = NULL;
    bool ok = curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK;
    if (ok) {
        for (char *p = host; *p; p++)
            if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a'); /* host names are case-insensitive */
        ok = (size_t)snprintf(out, cap, "%s://%s:%s", scheme, host, port) < cap;
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return ok;
}

static bool header_named(const char *line, const char *name) {
    size_t n = strlen(name);
    return strncasecmp(line, name, n) == 0 && line[n] == ':';
}

bool rfi_redirect_followable(const char *location) {
    return location != NULL && (strncasecmp(location, "http://", 7) == 0 || strncasecmp(location, "https://", 8) == 0);
}

void rfi_hop_clear(rfi_hop *h) {
    free(h->url);
    curl_slist_free_all(h->headers);
    *h = (rfi_hop){0};
}

bool rfi_redirect_prepare(rfi_hop *next, const rfi_hop *from, int status, const char *location, const char *req_method,
                          const char *req_url, const struct curl_slist *req_headers) {
    const char *method = from->method ? from->method : req_method;
    bool body = !from->drop_body;
    if (status == 303) {
        if (strcmp(method, "HEAD") != 0) method = "GET";
        body = false;
    } else if ((status == 301 || status == 302) && strcmp(method, "POST") == 0) {
        method = "GET";
        body = false;
    }
    char from_origin[512], to_origin[512];
    bool same_origin = origin_of(req_url, from_origin, sizeof from_origin) &&
                       origin_of(location, to_origin, sizeof to_origin) && strcmp(from_origin, to_origin) == 0;
    char *url = strdup(location);
    struct curl_slist *headers = NULL;
    bool ok = url != NULL;
    for (const struct curl_slist *h = req_headers; ok && h != NULL; h = h->next) {
        if (!same_origin && (header_named(h->data, "Authorization") || header_named(h->data, "Cookie"))) continue;
        if (!body && strncasecmp(h->data, "Content-", 8) == 0) continue;
        struct curl_slist *more = curl_slist_append(headers, h->data);
        if (more == NULL)
            ok = false;
        else
            headers = more;
    }
    if (!ok) { /* out of memory: the 3xx is returned as it is */
        free(url);
        curl_slist_free_all(headers);
        return false;
    }
    *next = (rfi_hop){
        .url = url, .headers = headers, .method = strcmp(method, req_method) == 0 ? NULL : method, .drop_body = !body};
    return true;
}
