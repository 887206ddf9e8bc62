/*
 * Retry-After and HTTP-date parsing, RFC 9110 §10.2.3 (Retry-After) and §5.6.7 (Date/Time Formats).
 * Pure functions: no allocation, no I/O, no clock reads, no locale. The caller supplies "now".
 */
#ifndef RETRYFREEZE_RETRY_AFTER_H
#define RETRYFREEZE_RETRY_AFTER_H

#include "retryfreeze/common.h"
#include "retryfreeze/vocabulary.h"
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Outcome of parsing one Retry-After field value. */
typedef enum rf_retry_after_status {
    RF_RA_ABSENT = 0,   /* value was NULL or empty (after trimming spaces/tabs) */
    RF_RA_OK = 1,       /* *delay_ms holds the delay, >= 0 */
    RF_RA_INVALID = 2,  /* neither delay-seconds nor a valid HTTP-date: treat the header as absent */
    RF_RA_TOO_LONG = 3, /* delay-seconds whose value does not fit in int64 milliseconds; never wraps */
    RF_RA_NO_CLOCK = 4, /* an HTTP-date (or a Unix timestamp), but neither a valid Date nor now_ms (> 0) to subtract */
    RF_RA_STOP = 5      /* grpc-retry-pushback-ms only: negative or malformed, which gRPC A6 reads as "do not retry" */
} rf_retry_after_status;

/*
 * Parses an HTTP-date in any of the three formats a recipient must accept (RFC 9110 §5.6.7):
 *   IMF-fixdate  "Sun, 06 Nov 1994 08:49:37 GMT"
 *   RFC 850      "Sunday, 06-Nov-94 08:49:37 GMT"  (two-digit year: RFC 9110 §5.6.7 50-year rule, relative
 *                                                    to now_ms when now_ms > 0, else to the year 2000)
 *   asctime      "Sun Nov  6 08:49:37 1994"        (the day may also be written "06")
 * text/len: the value (not NUL-terminated; leading/trailing spaces and tabs are trimmed). NULL is invalid.
 * now_ms:   Unix time in ms used only for the RFC 850 two-digit-year rule; 0 (or negative) when unknown.
 *           The year is the latest one ending in the two digits whose timestamp is not more than 50
 *           calendar years after now_ms (or after 2000-01-01T00:00:00Z when unknown), skipping years in
 *           which the day does not exist (29-Feb-00 is never 2100). now_ms past year 9999 counts as 9999.
 * Returns true and sets *epoch_ms (Unix time in ms, negative before 1970) on success; false on any
 * malformed, out-of-range or inconsistent field (day 31 in a 30-day month, Feb 29 outside a leap year,
 * hour 24, an unknown weekday or month name, a zone other than "GMT", trailing text). Names and "GMT" are
 * case-sensitive, the layout (single SP, two-digit fields, four-digit years 0000-9999) is exact. The
 * weekday must be a valid name (short, or long for RFC 850) but need not match the date. Seconds may be 60
 * (leap second, RFC 9110 §5.6.7): 23:59:60 is the same instant as the next day's 00:00:00.
 * epoch_ms may be NULL to validate only; it is left untouched on failure.
 */
RF_API bool rf_http_date_parse(const char *text, size_t len, int64_t now_ms, int64_t *epoch_ms);

/*
 * Parses a Retry-After field value (RFC 9110 §10.2.3: HTTP-date / delay-seconds).
 * value/len:  the raw field value; NULL or len 0 means absent. Surrounding spaces and tabs are trimmed.
 *             delay-seconds is 1*DIGIT only: a sign, a fraction, inner spaces, letters or non-ASCII digits make
 *             it RF_RA_INVALID; a digit string too large for int64 ms is RF_RA_TOO_LONG (leading zeros do
 *             not count). A value starting with a digit is delay-seconds, anything else must be an HTTP-date.
 * now_ms:     the recipient's wall clock, Unix time in ms (0 or negative when unknown).
 * date/date_len: the response's Date header (optional: NULL or 0 when absent). When it parses, an HTTP-date
 *             delay is Retry-After minus Date, which is immune to clock skew between client and server;
 *             otherwise Retry-After minus now_ms. An unparsable Date is ignored, as if absent.
 *             The RFC 850 two-digit-year reference is now_ms when > 0, else the Date header's time.
 * delay_ms:   set only on RF_RA_OK (left untouched otherwise); a date in the past gives 0; never negative.
 *             May be NULL to get the status alone.
 * Precedence: ABSENT, then INVALID / TOO_LONG (malformed beats missing clock), then NO_CLOCK.
 * The result is uncapped: caps (retryAfter.maxMs) are policy, applied by rf_decide.
 */
RF_API rf_retry_after_status rf_retry_after_parse(const char *value, size_t len, int64_t now_ms, const char *date,
                                                  size_t date_len, int64_t *delay_ms);

/*
 * Parses the value of one wait header (RF_WAIT_HEADERS in vocabulary.h), each by its own rule. Common to all:
 * value/len is the raw field value (NULL: the field is absent, RF_RA_ABSENT); surrounding spaces and tabs are
 * trimmed, and an empty or only-whitespace value asks for no wait, RF_RA_ABSENT (except a pushback: see below);
 * *delay_ms is set only on RF_RA_OK (>= 0, uncapped), untouched otherwise;
 * "integer" means 1*DIGIT (no sign, fraction, inner space or exponent). Per header:
 *   RF_WAIT_RETRY_AFTER     exactly rf_retry_after_parse (RFC 9110 §10.2.3).
 *   RF_WAIT_RETRY_AFTER_MS, RF_WAIT_X_MS_RETRY_AFTER_MS
 *                           integer milliseconds; past INT64_MAX is RF_RA_TOO_LONG; anything else INVALID
 *                           (a fraction "1.5" too: the rule is integer ms, fail closed).
 *   RF_WAIT_RATELIMIT_RESET integer delta-seconds (IETF httpapi RateLimit header fields, RateLimit-Reset),
 *                           × 1000; past int64 ms is RF_RA_TOO_LONG.
 *   RF_WAIT_RATELIMIT       an RFC 8941 structured-field List of service-limit Items (draft-ietf-httpapi-
 *                           ratelimit-headers §4: `"default";r=0;t=30`). Every member needs r (non-negative
 *                           Integer); t is optional (non-negative Integer, seconds). The delay is the largest t
 *                           of the members with r=0 (an exhausted quota); when no exhausted member has a t the
 *                           field asks for no wait: RF_RA_ABSENT. Malformed SF syntax, an inner list, a member
 *                           without r, a negative or non-integer r or t: RF_RA_INVALID (the draft: "Malformed
 *                           RateLimit header fields MUST be ignored"). A repeated parameter: the last wins (RFC
 *                           8941 §4.2.3.2). Split fields arrive combined with ", " (RFC 9110 §5.3).
 *   RF_WAIT_X_RATELIMIT_RESET
 *                           integer; at most 10^9 it is seconds to wait (× 1000); over 10^9 it is a Unix
 *                           timestamp in seconds (GitHub-style), and the delay is max(0, reset − Date) when the
 *                           date parses (skew-immune, as for HTTP-dates), else max(0, reset − now_ms) when
 *                           now_ms > 0, else RF_RA_NO_CLOCK. A timestamp past 9999-12-31 is RF_RA_TOO_LONG.
 *   RF_WAIT_GRPC_RETRY_PUSHBACK_MS
 *                           gRPC A6 pushback: a non-negative integer up to INT32_MAX (A6 carries it as an
 *                           int32) is the delay in ms; a negative value or anything unparsable (a fraction,
 *                           a sign "+", an overflow, letters, an empty value) is RF_RA_STOP: the server asks
 *                           not to retry. Only an absent field (value NULL) is RF_RA_ABSENT.
 * now_ms, date, date_len: as for rf_retry_after_parse (read by retry-after and x-ratelimit-reset only).
 * An out-of-range h gives RF_RA_INVALID.
 */
RF_API rf_retry_after_status rf_wait_header_parse(rf_wait_header h, const char *value, size_t len, int64_t now_ms,
                                                  const char *date, size_t date_len, int64_t *delay_ms);

/* The stable name of a status: "absent", "ok", "invalid", "too-long", "no-clock", "stop"; "unknown" for any other
 * value. The string is static: never free it. */
RF_API const char *rf_retry_after_status_name(rf_retry_after_status s);

#ifdef __cplusplus
}
#endif
#endif
