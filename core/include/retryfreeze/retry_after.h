/*
 * Retry-After and HTTP-date parsing, RFC 9110 §10.2.3 (Retry-After) and §5.6.7 (Date/Time Formats).
 * Pure functions: no allocation, no I/O, no clock reads, no locale. The caller supplies "now".
 */
#ifndef RETRYFREEZE_RETRY_AFTER_H
#define RETRYFREEZE_RETRY_AFTER_H

#include "retryfreeze/common.h"
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
    RF_RA_NO_CLOCK = 4  /* an HTTP-date, but neither a valid Date header nor now_ms (> 0) to subtract */
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

/* The stable name of a status: "absent", "ok", "invalid", "too-long", "no-clock"; "unknown" for any other
 * value. The string is static: never free it. */
RF_API const char *rf_retry_after_status_name(rf_retry_after_status s);

#ifdef __cplusplus
}
#endif
#endif
