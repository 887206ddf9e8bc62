/*
 * The client on real networks: TLS trust and client certificates, the proxy, the connect timeout, the
 * User-Agent and the HTTP version, all through libcurl's own options (libcurl's CURLOPT_* manual pages);
 * what a failed transfer's CURLcode means as a transport outcome, and its refinement: which TLS check failed,
 * and whether the connection the server refused was the proxy's.
 */
#define _POSIX_C_SOURCE 200809L
#include "client_network_internal.h"
#include "../util/report.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* A copy of s (NULL stays NULL); *ok turns false when memory runs out. */
static char *dup_or_null(const char *s, bool *ok) {
    if (s == NULL) return NULL;
    char *d = strdup(s);
    if (d == NULL) *ok = false;
    return d;
}

/* The environment variable's value when set and not empty, else NULL. */
static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

static bool has_ctl(const char *s) {
    for (; s && *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return true;
    return false;
}

/* RF_EINVAL naming `what` when path (if given) is not a readable file (or directory, for dir). */
static rf_status check_file(rf_error *err, const char *what, const char *path, bool dir) {
    if (path == NULL) return RF_OK;
    struct stat st;
    char msg[sizeof err->message];
    if (stat(path, &st) != 0 || access(path, R_OK) != 0) {
        snprintf(msg, sizeof msg, "%.200s: %s", path, strerror(errno));
        return rfi_fail(err, what, "%s", msg);
    }
    if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
        snprintf(msg, sizeof msg, "%.200s: not a %s", path, dir ? "directory" : "regular file");
        return rfi_fail(err, what, "%s", msg);
    }
    return RF_OK;
}

rf_status rfi_network_init(rfi_network *net, const rf_client_network *n, const char *base_url, rf_error *err) {
    if (n->connect_timeout_ms < 0 || n->connect_timeout_ms > 600000)
        return rfi_fail(err, "connect_timeout_ms", "must be 1..600000 (0 = the per-try timeout)");
    if (n->http_version != RF_HTTP_1_1 && n->http_version != RF_HTTP_2)
        return rfi_fail(err, "http_version", "must be \"1.1\" or \"2\"");
    const curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
    if (n->http_version == RF_HTTP_2 && !(cv->features & CURL_VERSION_HTTP2))
        return rfi_fail(err, "http_version", "\"2\" needs a libcurl built with HTTP/2 (nghttp2); this one has none");
    if (has_ctl(n->user_agent)) return rfi_fail(err, "user_agent", "must not contain control characters (CR, LF, …)");
    if (has_ctl(n->proxy)) return rfi_fail(err, "proxy", "must not contain control characters");
    if ((n->tls_key || n->tls_key_password) && n->tls_cert == NULL)
        return rfi_fail(err, "tls.key", "needs tls.cert (the client certificate it belongs to)");
    bool ok = true;
    /* The curl tool's order: an explicit option, then $CURL_CA_BUNDLE, then $SSL_CERT_FILE / $SSL_CERT_DIR. */
    const char *ca_file_from = n->tls_ca_file          ? "tls.ca_file"
                               : env("CURL_CA_BUNDLE") ? "CURL_CA_BUNDLE"
                                                       : "SSL_CERT_FILE";
    const char *ca_file = n->tls_ca_file ? n->tls_ca_file : env("CURL_CA_BUNDLE");
    if (ca_file == NULL) ca_file = env("SSL_CERT_FILE");
    const char *ca_path = n->tls_ca_path ? n->tls_ca_path : env("SSL_CERT_DIR");
    /* A path that cannot be read is a configuration error now, not a TLS_FAILURE on every request later. */
    /* The environment's paths only matter to an https client: an http one is not refused for them. */
    bool https = strncasecmp(base_url, "https://", 8) == 0;
    rf_status st = n->tls_ca_file || https ? check_file(err, ca_file_from, ca_file, false) : RF_OK;
    if (st == RF_OK && (n->tls_ca_path || https))
        st = check_file(err, n->tls_ca_path ? "tls.ca_path" : "SSL_CERT_DIR", ca_path, true);
    if (st == RF_OK) st = check_file(err, "tls.cert", n->tls_cert, false);
    if (st == RF_OK) st = check_file(err, "tls.key", n->tls_key, false);
    if (st != RF_OK) return st;
    net->ca_file = dup_or_null(ca_file, &ok);
    net->ca_path = dup_or_null(ca_path, &ok);
    net->cert = dup_or_null(n->tls_cert, &ok);
    net->key = dup_or_null(n->tls_key, &ok);
    net->key_password = dup_or_null(n->tls_key_password, &ok);
    net->proxy = dup_or_null(n->proxy, &ok);
    net->no_verify = n->tls_no_verify;
    net->connect_timeout_ms = n->connect_timeout_ms;
    net->http_version = n->http_version;
    if (n->user_agent) {
        net->user_agent = dup_or_null(n->user_agent, &ok);
    } else {
        char ua[128];
        snprintf(ua, sizeof ua, "retryfreeze/%s libcurl/%s", rf_version(), cv->version);
        net->user_agent = dup_or_null(ua, &ok);
    }
    if (!ok) return rfi_report(err, RF_ENOMEM, "client", "out of memory");
    if (net->no_verify)
        fprintf(stderr,
                "retryfreeze: warning: TLS verification is off for the client of %s (tls.verify = false): "
                "any certificate for any host is accepted\n",
                base_url);
    return RF_OK;
}

void rfi_network_free(rfi_network *n) {
    free(n->ca_file);
    free(n->ca_path);
    free(n->cert);
    free(n->key);
    if (n->key_password) memset(n->key_password, 0, strlen(n->key_password)); /* a secret: not left in the heap */
    free(n->key_password);
    free(n->proxy);
    free(n->user_agent);
    memset(n, 0, sizeof *n);
}

/* Records where libcurl connects (for telling a refusing proxy from a refusing origin), then opens the socket
 * as libcurl would have (CURLOPT_OPENSOCKETFUNCTION). */
static curl_socket_t on_open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *a) {
    rfi_peer *peer = ud;
    (void)purpose;
    peer->ip[0] = '\0';
    peer->port = 0;
    if (a->family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)&a->addr;
        inet_ntop(AF_INET, &in->sin_addr, peer->ip, sizeof peer->ip);
        peer->port = ntohs(in->sin_port);
    } else if (a->family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)&a->addr;
        inet_ntop(AF_INET6, &in6->sin6_addr, peer->ip, sizeof peer->ip);
        peer->port = ntohs(in6->sin6_port);
    }
#ifdef SOCK_CLOEXEC
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol); /* not inherited by a host's children */
#else
    return socket(a->family, a->socktype, a->protocol);
#endif
}

void rfi_network_handle(const rfi_network *n, CURL *e) {
    curl_easy_setopt(e, CURLOPT_USERAGENT, n->user_agent);
    if (n->ca_file) curl_easy_setopt(e, CURLOPT_CAINFO, n->ca_file);
    if (n->ca_path) curl_easy_setopt(e, CURLOPT_CAPATH, n->ca_path);
    if (n->cert) curl_easy_setopt(e, CURLOPT_SSLCERT, n->cert);
    if (n->key) curl_easy_setopt(e, CURLOPT_SSLKEY, n->key);
    if (n->key_password) curl_easy_setopt(e, CURLOPT_KEYPASSWD, n->key_password);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, n->no_verify ? 0L : 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, n->no_verify ? 0L : 2L);
    if (n->proxy) curl_easy_setopt(e, CURLOPT_PROXY, n->proxy); /* else libcurl reads the environment */
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
}

void rfi_network_apply(const rfi_network *n, CURL *e, int64_t timeout_ms, const char *url, rfi_peer *peer) {
    int64_t connect =
        n->connect_timeout_ms > 0 && n->connect_timeout_ms < timeout_ms ? n->connect_timeout_ms : timeout_ms;
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)connect);
    if (n->http_version == RF_HTTP_2) {
        bool tls = strncasecmp(url, "https://", 8) == 0;
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                         tls ? (long)CURL_HTTP_VERSION_2TLS : (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
        curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L); /* wait for a connection to multiplex on, not a new one */
    } else {
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    }
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, peer);
    *peer = (rfi_peer){0};
}

/* The proxy that applies to url's scheme: the option, else the environment as libcurl reads it
 * (http_proxy in lower case only, https_proxy/HTTPS_PROXY, all_proxy/ALL_PROXY). NULL: none. */
static const char *proxy_for(const rfi_network *n, const char *url) {
    if (n->proxy) return n->proxy[0] ? n->proxy : NULL;
    const char *p = strncasecmp(url, "https://", 8) == 0
                        ? (env("https_proxy") ? env("https_proxy") : env("HTTPS_PROXY"))
                        : env("http_proxy");
    if (p == NULL) p = env("all_proxy") ? env("all_proxy") : env("ALL_PROXY");
    return p;
}

/* The port of url (its scheme's default when none is written); 0 when it does not parse. */
static int port_of(const char *url, const char *default_scheme) {
    CURLU *u = curl_url();
    char *port = NULL;
    int n = 0;
    if (u && curl_url_set(u, CURLUPART_URL, url, default_scheme ? CURLU_GUESS_SCHEME : 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK)
        n = atoi(port);
    curl_free(port);
    curl_url_cleanup(u);
    return n;
}

/* X.509 verification results (OpenSSL's X509_V_ERR_* numbers, from x509_vfy.h) the message names. */
enum {
    V_UNABLE_TO_GET_ISSUER = 2,
    V_NOT_YET_VALID = 9,
    V_EXPIRED = 10,
    V_SELF_SIGNED = 18,
    V_SELF_SIGNED_IN_CHAIN = 19,
    V_UNABLE_TO_GET_ISSUER_LOCALLY = 20,
    V_UNABLE_TO_VERIFY_LEAF = 21,
    V_HOSTNAME_MISMATCH = 62,
    V_IP_MISMATCH = 64
};

rf_transport rfi_network_refine(const rfi_network *n, CURL *e, CURLcode rc, rf_transport transport, const char *url,
                                const rfi_peer *peer, char *error, size_t cap) {
    char curl_msg[128];
    snprintf(curl_msg, sizeof curl_msg, "%s", error);
    if (transport == RF_TRANSPORT_TLS) {
        long verify = 0;
        curl_easy_getinfo(e, CURLINFO_SSL_VERIFYRESULT, &verify);
        const char *which = NULL;
        if (verify == V_EXPIRED)
            which = "certificate expired";
        else if (verify == V_NOT_YET_VALID)
            which = "certificate not yet valid";
        else if (verify == V_UNABLE_TO_GET_ISSUER || verify == V_SELF_SIGNED || verify == V_SELF_SIGNED_IN_CHAIN ||
                 verify == V_UNABLE_TO_GET_ISSUER_LOCALLY || verify == V_UNABLE_TO_VERIFY_LEAF)
            which = "unknown CA (the issuer is not trusted: set tls.ca_file)";
        else if (verify == V_HOSTNAME_MISMATCH || verify == V_IP_MISMATCH ||
                 (rc == CURLE_PEER_FAILED_VERIFICATION &&
                  (strstr(curl_msg, "subject name") || strstr(curl_msg, "host"))))
            which = "hostname mismatch (the certificate does not name this host)";
        else if (rc == CURLE_SSL_CERTPROBLEM)
            which = "client certificate or key unusable";
        else if (strstr(curl_msg, "alert"))
            which = "the server refused the handshake (a TLS alert)";
        if (which) snprintf(error, cap, "TLS: %s: %s", which, curl_msg);
        return transport;
    }
    if ((rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR) && strstr(curl_msg, "SSL") && strstr(curl_msg, "alert")) {
        /* TLS 1.3 sends a server's rejection of the client certificate after the handshake, as an alert on
         * the first read: a TLS failure, not a reset. */
        const char *which = strstr(curl_msg, "certificate required") || strstr(curl_msg, "certificate")
                                ? "client certificate required or rejected by the server"
                                : "the server ended the session with a TLS alert";
        snprintf(error, cap, "TLS: %s: %s", which, curl_msg);
        return RF_TRANSPORT_TLS;
    }
    if (transport == RF_TRANSPORT_CONNECT_REFUSED) {
        const char *proxy = proxy_for(n, url);
        if (proxy && peer->port > 0 && (peer->port != port_of(url, NULL) || peer->port == port_of(proxy, "http"))) {
            snprintf(error, cap, "proxy refused the connection: %s", curl_msg);
            return RF_TRANSPORT_PROXY_REFUSED;
        }
    }
    return transport;
}

/* libcurl's error codes (libcurl-errors(3)) and the socket errno behind them. */
rf_transport rf_transport_from_curl(int curl_code, long os_errno) {
    switch ((CURLcode)curl_code) {
    case CURLE_OK: return RF_TRANSPORT_OK;
    case CURLE_OPERATION_TIMEDOUT: return RF_TRANSPORT_TIMEOUT;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY: return RF_TRANSPORT_DNS;
    case CURLE_COULDNT_CONNECT:
        if (os_errno == ECONNRESET) return RF_TRANSPORT_CONNECT_RESET;
        if (os_errno == ETIMEDOUT) return RF_TRANSPORT_TIMEOUT;
        return RF_TRANSPORT_CONNECT_REFUSED;
    case CURLE_GOT_NOTHING: return RF_TRANSPORT_GOT_NOTHING;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
        if (os_errno == ECONNRESET || os_errno == EPIPE || os_errno == 0) return RF_TRANSPORT_CONNECT_RESET;
        return RF_TRANSPORT_OTHER;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS: return RF_TRANSPORT_TLS;
    default: return RF_TRANSPORT_OTHER;
    }
}

rf_client_runtime rf_client_runtime_info(void) {
    const curl_version_info_data *cv = curl_version_info(CURLVERSION_NOW);
    return (rf_client_runtime){
        .libcurl = cv->version, .ssl = cv->ssl_version, .http2 = (cv->features & CURL_VERSION_HTTP2) != 0};
}
