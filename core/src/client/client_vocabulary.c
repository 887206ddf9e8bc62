/* Outcome names and the mapping of a stopping reason to an outcome; CURLcode → transport outcome. */
#include "client_internal.h"

#include <errno.h>

#define RF_X_STR(name, str) str,
static const char *const outcome_names[] = {RF_OUTCOMES(RF_X_STR)};

const char *rf_outcome_name(rf_outcome o) { return (unsigned)o < RF_OUTCOME_COUNT ? outcome_names[o] : "?"; }

rf_outcome rf_outcome_of(rf_reason reason) {
    switch (reason) {
    case RF_REASON_SUCCESS: return RF_OUTCOME_SUCCESS;
    case RF_REASON_MAX_ATTEMPTS:
    case RF_REASON_CLASS_LIMIT: return RF_OUTCOME_EXHAUSTED;
    case RF_REASON_DEADLINE:
    case RF_REASON_RETRY_AFTER_EXCEEDS_BUDGET: return RF_OUTCOME_DEADLINE;
    case RF_REASON_RETRY_THROTTLED: return RF_OUTCOME_THROTTLED;
    case RF_REASON_UNPINNED_SOURCE:
    case RF_REASON_NO_ROUTE:
    case RF_REASON_MUTATING_WITHOUT_IDEMPOTENCY: return RF_OUTCOME_REFUSED;
    default: return RF_OUTCOME_TERMINAL;
    }
}

rf_outcome rf_outcome_of_stop(rf_reason reason, bool class_retryable) {
    rf_outcome o = rf_outcome_of(reason);
    if (!class_retryable && (o == RF_OUTCOME_EXHAUSTED || o == RF_OUTCOME_DEADLINE || o == RF_OUTCOME_THROTTLED))
        return RF_OUTCOME_TERMINAL;
    return o;
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
