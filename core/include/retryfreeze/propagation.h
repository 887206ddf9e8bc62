/*
 * Propagation across layers (lock field `propagation`, docs/lock.md): what a route sends on each attempt, reads
 * from its caller's request and tells its caller, in the headers Envoy speaks, so that a request crossing several
 * retrying layers is retried at one layer only and no layer works past its caller's deadline:
 *   x-envoy-attempt-count          sent: this attempt's number (1, 2, 3…), as Envoy's include_attempt_count_in_request;
 *                                  read: above 1 the caller is already retrying, so this layer makes one attempt
 *                                  (reason inbound-retry, when propagation.inboundAttempt)
 *   x-envoy-expected-rq-timeout-ms sent: the ms this attempt may take (its per-try timeout: min(perAttemptTimeoutMs,
 *                                  the time left)); read: the caller's time left narrows this request's deadline
 *                                  (when propagation.inboundDeadline)
 *   x-envoy-overloaded             read on a response: not retried (reason upstream-overloaded, as Envoy refuses to
 *                                  retry it); told to the caller when this layer stops after retrying
 * A caller's header can only narrow: a value that is not 1*DIGIT is ignored, repeated values (or a comma-joined
 * list, RFC 9110 §5.3) count by the narrowest, a deadline past the route's own changes nothing. Part of the engine:
 * no allocation, no clock, no I/O; thread-safe.
 */
#ifndef RETRYFREEZE_PROPAGATION_H
#define RETRYFREEZE_PROPAGATION_H

#include "retryfreeze/common.h"
#include "retryfreeze/outcome.h"
#include "retryfreeze/policy.h"
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest header name a lock's propagation may name (propagation.attemptHeader, …). */
#define RF_PROPAGATION_HEADER_MAX 64

/* A route's propagation (the lock's `propagation` object, defaults applied). Strings are the policy's. */
typedef struct rf_propagation {
    bool enabled;               /* the route has propagation; false: nothing is sent, read or told */
    const char *attempt_header; /* lowercase field names */
    const char *deadline_header;
    const char *overloaded_header;
    bool inbound_deadline; /* a caller's deadline header narrows this request's deadline */
    bool inbound_attempt;  /* a caller's attempt number above 1 leaves this layer one attempt */
} rf_propagation;

/*
 * Fills *out with route `route`'s propagation (rf_policy_route's order); route -1 (no route) gives a disabled one.
 * RF_EINVAL (no rf_error) for a NULL argument or a route out of range. No allocation; thread-safe.
 */
RF_API rf_status rf_policy_propagation(const rf_policy *p, long route, rf_propagation *out);

/* The largest deadline a caller's header may give: 2^53 - 1 ms (exact in a JSON number; 285 000 years). A larger
 * one narrows nothing, and is ignored. */
#define RF_INBOUND_DEADLINE_MAX INT64_C(9007199254740991)

/* What a caller's request said, read header by header (rf_inbound_header). Zeroed: nothing. */
typedef struct rf_inbound {
    bool has_deadline;   /* a valid deadline header came */
    int64_t deadline_ms; /* the smallest valid one: the ms the caller has left, 0..RF_INBOUND_DEADLINE_MAX */
    int attempt;         /* the largest valid attempt number, 1..INT_MAX (a larger value counts INT_MAX); 0: none */
} rf_inbound;

/*
 * Reads one header field of a caller's request into *in when prop is enabled and name (name_len bytes, compared
 * case-insensitively, RFC 9110 §5.1) is its deadline or attempt header; any other field is ignored. The value
 * (value_len bytes) is a comma-separated list of elements, each trimmed of spaces and tabs: an element of 1*DIGIT
 * counts (for the attempt, 1 and more), anything else (a sign, a fraction, letters, an empty element) is ignored.
 * Repeated fields and elements fold by the narrowest: the smallest deadline, the largest attempt. A deadline too
 * large (over RF_INBOUND_DEADLINE_MAX) is ignored: it narrows nothing. Never fails: a bad value only fails to narrow.
 * NULL prop, name, value or in: nothing happens.
 */
RF_API void rf_inbound_header(const rf_propagation *prop, const char *name, size_t name_len, const char *value,
                              size_t value_len, rf_inbound *in);

/* rf_inbound_header on a "Name: value" line (NUL-terminated; a line without ':' is ignored). */
RF_API void rf_inbound_line(const rf_propagation *prop, const char *line, rf_inbound *in);

/* Longest line rf_propagation_lines writes, NUL included: a name, ": " and an int64. */
#define RF_PROPAGATION_LINE_MAX (RF_PROPAGATION_HEADER_MAX + 2 + 20 + 1)

/*
 * The header lines an attempt sends ("x-envoy-attempt-count: 2"), into lines[0..2): attempt is its number (>= 1),
 * deadline_ms the ms it may take (its per-try timeout, after any narrowing). Returns how many were written: 2 when
 * prop is enabled, else 0 (also for a NULL argument).
 */
RF_API size_t rf_propagation_lines(const rf_propagation *prop, int attempt, int64_t deadline_ms,
                                   char lines[2][RF_PROPAGATION_LINE_MAX]);

/*
 * The numbers those lines say, without the lines (a host that sets the headers' values itself, the nginx gateway):
 * *attempt_out the attempt's number (attempt, at least 1), *deadline_out its ms (deadline_ms, at least 0). Returns
 * true when prop is enabled; false, writing nothing, without it or for a NULL argument.
 */
RF_API bool rf_propagation_values(const rf_propagation *prop, int attempt, int64_t deadline_ms, int *attempt_out,
                                  int64_t *deadline_out);

/*
 * Whether a request that stopped with `reason` and `outcome` (rf_outcome_of_stop) tells its caller it is overloaded
 * (prop's overloaded header, value "true"): it retried to exhaustion (exhausted), its retry budget throttled it
 * (throttled), or its own upstream said so (upstream-overloaded); so the caller does not retry what was already
 * retried. False when prop is NULL or disabled.
 */
RF_API bool rf_propagation_tells_overloaded(const rf_propagation *prop, rf_reason reason, rf_outcome outcome);

#ifdef __cplusplus
}
#endif
#endif
