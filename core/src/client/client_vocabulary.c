/* CURLcode → transport outcome. */
#include "client_internal.h"

#include <errno.h>

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
