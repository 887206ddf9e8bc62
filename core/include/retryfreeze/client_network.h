/*
 * The client on real networks: its TLS, proxy, connect-timeout, user-agent and HTTP-version options, what libcurl
 * it runs on, and how a failed transfer's CURLcode becomes a transport outcome. Part of libretryfreeze_client;
 * client.h includes it.
 */
#ifndef RETRYFREEZE_CLIENT_NETWORK_H
#define RETRYFREEZE_CLIENT_NETWORK_H

#include "retryfreeze/vocabulary.h"
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* HTTP versions the client can ask for (option http_version). */
typedef enum rf_http_version {
    RF_HTTP_1_1 = 0, /* HTTP/1.1 (the default) */
    RF_HTTP_2 = 2    /* HTTP/2: over TLS by ALPN (falls back to 1.1 when the server does not offer h2), over
                        http:// with prior knowledge (h2c, RFC 9113 §3.3); rf_client_all multiplexes requests
                        on one connection. RF_EINVAL when libcurl was built without HTTP/2 */
} rf_http_version;

/*
 * The client's network settings. Strings are copied by rf_client_new; NULL means the default named.
 * TLS follows libcurl (CURLOPT_CAINFO, CURLOPT_CAPATH, CURLOPT_SSLCERT, CURLOPT_SSLKEY, CURLOPT_KEYPASSWD) and
 * the curl tool's environment: without tls_ca_file, $CURL_CA_BUNDLE, then $SSL_CERT_FILE; without
 * tls_ca_path, $SSL_CERT_DIR. The proxy: without `proxy`, libcurl's environment variables http_proxy,
 * HTTPS_PROXY/https_proxy, ALL_PROXY/all_proxy and NO_PROXY/no_proxy (libcurl-env(3)). rf_client_new refuses
 * (RF_EINVAL, err->path the option or the environment variable) a CA file, CA directory, certificate or key
 * that cannot be read.
 */
typedef struct rf_client_network {
    const char *tls_ca_file;      /* PEM file of trusted CAs */
    const char *tls_ca_path;      /* directory of CA certificates (c_rehash layout) */
    const char *tls_cert;         /* client certificate, PEM */
    const char *tls_key;          /* its private key, PEM; NULL: the key is in tls_cert */
    const char *tls_key_password; /* the key's password */
    bool tls_no_verify;           /* true turns certificate and host verification off: a warning goes to stderr
                                     once, when the client is created */
    const char *proxy;            /* "http://host:port" (any scheme libcurl's CURLOPT_PROXY takes); "" = no proxy,
                                     whatever the environment says */
    int64_t connect_timeout_ms;   /* 1..600000; 0 = the per-try timeout. Never longer than the per-try timeout */
    const char *user_agent;       /* NULL: "retryfreeze/<version> libcurl/<version>" */
    rf_http_version http_version;
} rf_client_network;

/* What the client runs on (curl_version_info(3)): strings owned by libcurl, valid for the process. */
typedef struct rf_client_runtime {
    const char *libcurl; /* "7.88.1" */
    const char *ssl;     /* "OpenSSL/3.0.11", NULL without TLS support */
    bool http2;          /* RF_HTTP_2 is available */
} rf_client_runtime;
/* The libcurl in use, by value; its strings stay valid for the process. Thread-safe. */
RF_API rf_client_runtime rf_client_runtime_info(void);

/* Maps a CURLcode and the OS errno of a failed transfer to a transport outcome (exposed for tests). */
RF_API rf_transport rf_transport_from_curl(int curl_code, long os_errno);

#ifdef __cplusplus
}
#endif
#endif
