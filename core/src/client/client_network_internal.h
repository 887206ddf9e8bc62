/*
 * Private to the client library: a client's network settings (client_network.c), copied from its options once,
 * set on each easy handle it makes and on each attempt, and what a failed transfer's transport outcome becomes
 * once refined. Knows libcurl, not the flow. Prefix rfi_.
 */
#ifndef RETRYFREEZE_CLIENT_NETWORK_INTERNAL_H
#define RETRYFREEZE_CLIENT_NETWORK_INTERNAL_H

#include "retryfreeze/client_network.h"
#include <curl/curl.h>

/* The client's network settings, owned copies. */
typedef struct rfi_network {
    char *ca_file, *ca_path, *cert, *key, *key_password, *proxy, *user_agent;
    bool no_verify;
    int64_t connect_timeout_ms; /* 0: the per-try timeout */
    rf_http_version http_version;
} rfi_network;

/* Where libcurl last connected for an attempt (CURLOPT_OPENSOCKETFUNCTION): tells a refusing proxy from a
 * refusing origin. */
typedef struct rfi_peer {
    char ip[64];
    int port;
} rfi_peer;

/* Copies and checks the options n into *net (env CA variables resolved, the user agent built) for a client of
 * base_url (https needs readable CA paths); prints the tls_no_verify warning. RF_EINVAL names the option or
 * environment variable; RF_ENOMEM. */
rf_status rfi_network_init(rfi_network *net, const rf_client_network *n, const char *base_url, rf_error *err);
/* Frees what n owns (the key's password wiped first) and zeroes it. */
void rfi_network_free(rfi_network *n);
/* Sets the network options every request shares (TLS, proxy, User-Agent, the socket callback) on easy handle e:
 * once, when the handle is made. */
void rfi_network_handle(const rfi_network *n, CURL *e);
/* Sets the network options of one attempt to url with per-try timeout timeout_ms on e (connect timeout, HTTP
 * version), and points the socket callback at *peer (reset). */
void rfi_network_apply(const rfi_network *n, CURL *e, int64_t timeout_ms, const char *url, rfi_peer *peer);
/* Refines a failed transfer's transport outcome and error text (TLS: which verification failed, a TLS alert
 * during the exchange; a refused connection to the proxy). error (cap bytes) holds curl's message on entry; url
 * is the attempt's, peer where it connected. */
rf_transport rfi_network_refine(const rfi_network *n, CURL *e, CURLcode rc, rf_transport transport, const char *url,
                                const rfi_peer *peer, char *error, size_t cap);

#endif
