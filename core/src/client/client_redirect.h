/*
 * Private to the client library: the next request of a followed redirect (client_redirect.c), built by RFC 9110
 * §15.4 from the 3xx's status and Location and the request it answered. Knows URLs and header lists (libcurl's),
 * not the flow that sends them. Prefix rfi_.
 */
#ifndef RETRYFREEZE_CLIENT_REDIRECT_H
#define RETRYFREEZE_CLIENT_REDIRECT_H

#include <curl/curl.h>
#include <stdbool.h>

/* A followed redirect's request. Zeroed: none (the request itself is sent). */
typedef struct rfi_hop {
    char *url;                  /* absolute, owned */
    struct curl_slist *headers; /* owned; NULL: none (every one was dropped for another origin) */
    const char *method;         /* NULL: the request's own method; else "GET" or "HEAD" (a literal) */
    bool drop_body;             /* the hop sends no body (303, or 301/302 after a POST) */
} rfi_hop;

/* A status the client follows when follow_redirects is on: 301, 302, 303, 307, 308 (RFC 9110 §15.4). */
bool rfi_redirect_status(int status);

/* Whether location (CURLINFO_REDIRECT_URL: absolute) can be followed: http or https only, as before libcurl's
 * CURLOPT_REDIR_PROTOCOLS_STR. A 3xx with any other Location is the response. */
bool rfi_redirect_followable(const char *location);

/*
 * Builds into *next the request that follows a 3xx with this status to location (rfi_redirect_followable), after
 * the request `from` (the hop just answered; a zeroed one for the request itself, whose method, URL and header list
 * are req_method, req_url and req_headers): the method and body by RFC 9110 §15.4 (303 → GET without a body, HEAD
 * stays HEAD; 301 and 302 turn a POST into a GET without a body; 307 and 308 keep both), the request's header
 * fields without Content-* when the body goes, and without Authorization and Cookie toward another origin. False
 * (next untouched) when memory ran out.
 */
bool rfi_redirect_prepare(rfi_hop *next, const rfi_hop *from, int status, const char *location, const char *req_method,
                          const char *req_url, const struct curl_slist *req_headers);

/* Frees what h owns and zeroes it (the request itself again). */
void rfi_hop_clear(rfi_hop *h);

#endif
