/*
 * The engine's vocabulary, each list defined once as an X-macro so the C names, the Lua strings and the
 * docs tables cannot drift apart: verdict reasons, transport outcomes, named failure classes, jitter kinds.
 */
#ifndef RETRYFREEZE_VOCABULARY_H
#define RETRYFREEZE_VOCABULARY_H

#include "retryfreeze/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Verdict reasons: X(C name, stable kebab-case string, retry?). Listed in the order rf_decide checks them
 * (docs/design.md); upstream-overloaded and inbound-retry are a route's propagation (retryfreeze/propagation.h);
 * stopped-by-caller is the client's (an on_attempt hook narrowed a retry, or rf_pending_stop ended a request in
 * flight because a callback of the caller failed); hedge-fatal ends a hedged request on a failure of a class its
 * hedging does not list as non-fatal (gRPC A6); pinned-status and transparent-retry are a retry verdict's
 * (transparent-retry: a keyless mutating request retried because it never left, see rf_decide), within-budget is
 * rf_budget's, and redirect is a followed 3xx (rf_redirect_verdict).
 */
#define RF_REASONS(X)                                                            \
    X(RF_REASON_UNPINNED_SOURCE, "unpinned-source", 0)                           \
    X(RF_REASON_NO_ROUTE, "no-route", 0)                                         \
    X(RF_REASON_SUCCESS, "success", 0)                                           \
    X(RF_REASON_HEDGE_FATAL, "hedge-fatal", 0)                                   \
    X(RF_REASON_MAX_ATTEMPTS, "max-attempts", 0)                                 \
    X(RF_REASON_CLASS_LIMIT, "class-limit", 0)                                   \
    X(RF_REASON_STATUS_NOT_RETRYABLE, "status-not-retryable", 0)                 \
    X(RF_REASON_UPSTREAM_OVERLOADED, "upstream-overloaded", 0)                   \
    X(RF_REASON_INBOUND_RETRY, "inbound-retry", 0)                               \
    X(RF_REASON_MUTATING_WITHOUT_IDEMPOTENCY, "mutating-without-idempotency", 0) \
    X(RF_REASON_SERVER_PUSHBACK, "server-pushback", 0)                           \
    X(RF_REASON_RETRY_AFTER_EXCEEDS_BUDGET, "retry-after-exceeds-budget", 0)     \
    X(RF_REASON_DEADLINE, "deadline", 0)                                         \
    X(RF_REASON_RETRY_THROTTLED, "retry-throttled", 0)                           \
    X(RF_REASON_STOPPED_BY_CALLER, "stopped-by-caller", 0)                       \
    X(RF_REASON_PINNED_STATUS, "pinned-status", 1)                               \
    X(RF_REASON_WITHIN_BUDGET, "within-budget", 1)                               \
    X(RF_REASON_TRANSPARENT_RETRY, "transparent-retry", 1)                       \
    X(RF_REASON_REDIRECT, "redirect", 1)

#define RF_X_ENUM(name, str, retry) name,
typedef enum rf_reason { RF_REASONS(RF_X_ENUM) RF_REASON_COUNT } rf_reason;

/* What the transport observed about one attempt, apart from the status. X(C name, string). */
#define RF_TRANSPORTS(X)                               \
    X(RF_TRANSPORT_OK, "ok")                           \
    X(RF_TRANSPORT_TIMEOUT, "timeout")                 \
    X(RF_TRANSPORT_CONNECT_RESET, "connect-reset")     \
    X(RF_TRANSPORT_CONNECT_REFUSED, "connect-refused") \
    X(RF_TRANSPORT_DNS, "dns")                         \
    X(RF_TRANSPORT_TLS, "tls")                         \
    X(RF_TRANSPORT_GOT_NOTHING, "got-nothing")         \
    X(RF_TRANSPORT_OTHER, "other")                     \
    X(RF_TRANSPORT_PROXY_REFUSED, "proxy-refused")     \
    X(RF_TRANSPORT_TOO_MANY_REDIRECTS, "too-many-redirects")

#define RF_X_ENUM2(name, str) name,
typedef enum rf_transport { RF_TRANSPORTS(RF_X_ENUM2) RF_TRANSPORT_COUNT } rf_transport;

/*
 * The gRPC status codes other than OK (grpc/doc/statuscodes.md), in code order 1..16: a response whose grpc-status
 * (a header or a trailer) is N in 1..16 is of class GRPC_<name of N>, whatever its HTTP status; grpc-status 0 (OK)
 * leaves the class to the HTTP status (a 200 is a success). X(C name, token); the code of each is its place in this
 * list plus 1 (RF_GRPC_STATUS_MAX is the last). Part of RF_NAMED_CLASSES.
 */
#define RF_GRPC_CLASSES(X)                                           \
    X(RF_CLASS_GRPC_CANCELLED, "GRPC_CANCELLED")                     \
    X(RF_CLASS_GRPC_UNKNOWN, "GRPC_UNKNOWN")                         \
    X(RF_CLASS_GRPC_INVALID_ARGUMENT, "GRPC_INVALID_ARGUMENT")       \
    X(RF_CLASS_GRPC_DEADLINE_EXCEEDED, "GRPC_DEADLINE_EXCEEDED")     \
    X(RF_CLASS_GRPC_NOT_FOUND, "GRPC_NOT_FOUND")                     \
    X(RF_CLASS_GRPC_ALREADY_EXISTS, "GRPC_ALREADY_EXISTS")           \
    X(RF_CLASS_GRPC_PERMISSION_DENIED, "GRPC_PERMISSION_DENIED")     \
    X(RF_CLASS_GRPC_RESOURCE_EXHAUSTED, "GRPC_RESOURCE_EXHAUSTED")   \
    X(RF_CLASS_GRPC_FAILED_PRECONDITION, "GRPC_FAILED_PRECONDITION") \
    X(RF_CLASS_GRPC_ABORTED, "GRPC_ABORTED")                         \
    X(RF_CLASS_GRPC_OUT_OF_RANGE, "GRPC_OUT_OF_RANGE")               \
    X(RF_CLASS_GRPC_UNIMPLEMENTED, "GRPC_UNIMPLEMENTED")             \
    X(RF_CLASS_GRPC_INTERNAL, "GRPC_INTERNAL")                       \
    X(RF_CLASS_GRPC_UNAVAILABLE, "GRPC_UNAVAILABLE")                 \
    X(RF_CLASS_GRPC_DATA_LOSS, "GRPC_DATA_LOSS")                     \
    X(RF_CLASS_GRPC_UNAUTHENTICATED, "GRPC_UNAUTHENTICATED")

/* The highest gRPC status code (UNAUTHENTICATED): a grpc-status outside 0..RF_GRPC_STATUS_MAX is refused. */
#define RF_GRPC_STATUS_MAX 16

/* The HTTP statuses (RFC 9110 §15: three digits, 100..599); a status outside them is no HTTP status: a fact refuses
 * it, and a transport's result without one has status 0. */
#define RF_HTTP_STATUS_MIN 100
#define RF_HTTP_STATUS_MAX 599

/* The statuses of a success: a response (transport ok) without a grpc-status whose status is in
 * RF_SUCCESS_STATUS_MIN..RF_SUCCESS_STATUS_MAX is no failure, whatever the lock's classes: rf_decide stops on it with
 * reason success before any other check, and no class of it is retryable (rf_policy_class_retryable). */
#define RF_SUCCESS_STATUS_MIN 200
#define RF_SUCCESS_STATUS_MAX 399

/*
 * Named (non-HTTP) failure classes. HTTP classes are HTTP_<nnn> (100..599) and the families HTTP_4XX,
 * HTTP_5XX. X(C name, token). Transport outcome → class: timeout → TIMEOUT, connect-reset and
 * got-nothing → CONNECT_RESET (a connection closed before a response, Envoy's "reset"), connect-refused →
 * CONNECT_REFUSED, dns → DNS_FAILURE, tls → TLS_FAILURE, other (or ok without a status) → UNKNOWN,
 * proxy-refused → PROXY_REFUSED (the configured proxy refused the connection: nothing reached the origin),
 * too-many-redirects → TOO_MANY_REDIRECTS (the client's max_redirects was reached; never retryable); with transport
 * ok, a grpc-status 1..16 → its RF_GRPC_CLASSES class.
 */
#define RF_NAMED_CLASSES(X)                              \
    X(RF_CLASS_TIMEOUT, "TIMEOUT")                       \
    X(RF_CLASS_CONNECT_RESET, "CONNECT_RESET")           \
    X(RF_CLASS_CONNECT_REFUSED, "CONNECT_REFUSED")       \
    X(RF_CLASS_DNS_FAILURE, "DNS_FAILURE")               \
    X(RF_CLASS_TLS_FAILURE, "TLS_FAILURE")               \
    X(RF_CLASS_UNKNOWN, "UNKNOWN")                       \
    X(RF_CLASS_PROXY_REFUSED, "PROXY_REFUSED")           \
    X(RF_CLASS_TOO_MANY_REDIRECTS, "TOO_MANY_REDIRECTS") \
    RF_GRPC_CLASSES(X)

typedef enum rf_named_class { RF_NAMED_CLASSES(RF_X_ENUM2) RF_NAMED_CLASS_COUNT } rf_named_class;

/*
 * Aliases a lock may write for a set of classes, from the original pairing lock: X(token, the tokens it stands
 * for, joined by " + "). An alias is expanded when the lock is loaded: the policy, its digest and its views name
 * the expansion only.
 */
#define RF_CLASS_ALIASES(X)                    \
    X("GATEWAY_TIMEOUT", "TIMEOUT + HTTP_504") \
    X("HANDLER_5XX", "HTTP_5XX")

/* Backoff jitter kinds (lock field backoff.jitter). */
#define RF_JITTERS(X)           \
    X(RF_JITTER_NONE, "none")   \
    X(RF_JITTER_FULL, "full")   \
    X(RF_JITTER_EQUAL, "equal") \
    X(RF_JITTER_DECORRELATED, "decorrelated")

typedef enum rf_jitter { RF_JITTERS(RF_X_ENUM2) RF_JITTER_COUNT } rf_jitter;

/* What happened to a Retry-After header in a verdict. */
#define RF_RETRY_AFTER_USES(X)                                                                                 \
    X(RF_RA_USE_ABSENT, "absent")           /* no header */                                                    \
    X(RF_RA_USE_HONORED, "honored")         /* valid and used as the delay */                                  \
    X(RF_RA_USE_IGNORED, "ignored-invalid") /* malformed (or an HTTP-date with no clock): treated as absent */ \
    X(RF_RA_USE_NOT_HONORED, "not-honored") /* valid, but the route says retryAfter.honor = false */           \
    X(RF_RA_USE_NOT_NEEDED, "not-needed")   /* present, but the verdict stopped before it mattered */

typedef enum rf_retry_after_use { RF_RETRY_AFTER_USES(RF_X_ENUM2) RF_RA_USE_COUNT } rf_retry_after_use;

/*
 * Response headers a route may read for a server-requested wait (lock field retryAfter.headers, in the
 * route's order: the first present and valid one wins). X(C name, lowercase field name). Each has its own
 * parser (rf_wait_header_parse, retry_after.h; rules in docs/lock.md):
 *   retry-after             RFC 9110 §10.2.3: delay-seconds or an HTTP-date
 *   retry-after-ms          non-negative integer milliseconds (Azure, OpenAI-style APIs)
 *   x-ms-retry-after-ms     the same, Azure's x-ms- spelling
 *   ratelimit-reset         delta-seconds (IETF httpapi RateLimit header fields, drafts up to -06)
 *   ratelimit               the structured-field List's t= parameter of exhausted (r=0) policies (same draft, -07+)
 *   x-ratelimit-reset       seconds, or a Unix timestamp in seconds when the value is over 10^9 (GitHub-style)
 *   grpc-retry-pushback-ms  gRPC A6 pushback: a non-negative integer is the delay, anything else means stop
 */
#define RF_WAIT_HEADERS(X)                                \
    X(RF_WAIT_RETRY_AFTER, "retry-after")                 \
    X(RF_WAIT_RETRY_AFTER_MS, "retry-after-ms")           \
    X(RF_WAIT_X_MS_RETRY_AFTER_MS, "x-ms-retry-after-ms") \
    X(RF_WAIT_RATELIMIT_RESET, "ratelimit-reset")         \
    X(RF_WAIT_RATELIMIT, "ratelimit")                     \
    X(RF_WAIT_X_RATELIMIT_RESET, "x-ratelimit-reset")     \
    X(RF_WAIT_GRPC_RETRY_PUSHBACK_MS, "grpc-retry-pushback-ms")

typedef enum rf_wait_header { RF_WAIT_HEADERS(RF_X_ENUM2) RF_WAIT_HEADER_COUNT } rf_wait_header;
/* Which retry budget a verdict used (verdict field budget, ledger field "budget"). */
#define RF_BUDGET_SOURCES(X)                                                                            \
    X(RF_BUDGET_NONE, "none")     /* no budget, or the verdict did not touch it (no route, unpinned) */ \
    X(RF_BUDGET_LOCAL, "local")   /* the process's own token bucket */                                  \
    X(RF_BUDGET_SHARED, "shared") /* the fleet's bucket in a shared store (Redis) */                    \
    X(RF_BUDGET_LOCAL_FALLBACK, "local-fallback") /* the shared store did not answer in time */

typedef enum rf_budget_source { RF_BUDGET_SOURCES(RF_X_ENUM2) RF_BUDGET_SOURCE_COUNT } rf_budget_source;

/*
 * Request header fields that frame an HTTP message or steer its connection, which a caller may never set: the
 * transport writes them itself, and a caller's value would change where the message ends or what the connection
 * carries (a "Content-Length: 0" before a body that is a second request makes the upstream execute two). X(C name,
 * lowercase field name), each with the section that defines it; Keep-Alive and Proxy-Connection are the obsolete
 * hop-by-hop fields RFC 9110 §7.6.1 names.
 * The lock refuses them as propagation headers (docs/lock.md), and every sender of a caller's headers (the client,
 * rf_step, rf.flow) refuses them in a request (rf_request_header_check): this list is the one both read.
 */
#define RF_FRAMING_HEADERS(X)                                                    \
    X(RF_FRAMING_HOST, "host")                           /* RFC 9110 §7.2 */    \
    X(RF_FRAMING_CONTENT_LENGTH, "content-length")       /* RFC 9110 §8.6 */    \
    X(RF_FRAMING_TRANSFER_ENCODING, "transfer-encoding") /* RFC 9112 §6.1 */    \
    X(RF_FRAMING_CONNECTION, "connection")               /* RFC 9110 §7.6.1 */  \
    X(RF_FRAMING_KEEP_ALIVE, "keep-alive")               /* RFC 9110 §7.6.1 */  \
    X(RF_FRAMING_PROXY_CONNECTION, "proxy-connection")   /* RFC 9110 §7.6.1 */  \
    X(RF_FRAMING_TE, "te")                               /* RFC 9110 §10.1.4 */ \
    X(RF_FRAMING_TRAILER, "trailer")                     /* RFC 9110 §6.6.2 */  \
    X(RF_FRAMING_UPGRADE, "upgrade")                     /* RFC 9110 §7.8 */    \
    X(RF_FRAMING_EXPECT, "expect")                       /* RFC 9110 §10.1.1 */

/* The stable strings of the enums above (the X-macro lists); "?" for an out-of-range value. Static strings: never
 * free them. Thread-safe. */
RF_API const char *rf_reason_name(rf_reason r);
RF_API const char *rf_transport_name(rf_transport t);
RF_API const char *rf_jitter_name(rf_jitter j);
RF_API const char *rf_retry_after_use_name(rf_retry_after_use u);
RF_API const char *rf_wait_header_name(rf_wait_header h);
RF_API const char *rf_budget_source_name(rf_budget_source s);

/*
 * Parses a transport outcome string ("ok", "timeout", …; exact, case-sensitive) of length len.
 * Returns 0 and sets *out, or -1 (*out untouched) when the string is not one of RF_TRANSPORTS or s/out is NULL.
 */
RF_API int rf_transport_parse(const char *s, size_t len, rf_transport *out);

/*
 * Parses a wait header name of length len, case-insensitively (field names are case-insensitive, RFC 9110
 * §5.1): "Retry-After-Ms" → RF_WAIT_RETRY_AFTER_MS. Returns 0 and sets *out, or -1 when the name is not one of
 * RF_WAIT_HEADERS or s/out is NULL.
 */
RF_API int rf_wait_header_parse_name(const char *s, size_t len, rf_wait_header *out);

/*
 * Whether the field name s (len bytes) is one of RF_FRAMING_HEADERS, compared case-insensitively (RFC 9110 §5.1)
 * after trimming spaces and tabs from both ends (" Content-Length" and "Content-Length\t" are it too). Returns the
 * list's lowercase name (a static string), or NULL when it is not one, or s is NULL. Allocates nothing.
 */
RF_API const char *rf_framing_header(const char *s, size_t len);

#ifdef __cplusplus
}
#endif
#endif
