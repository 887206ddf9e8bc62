/*
 * The response head as the client reads it, one header line at a time (libcurl's CURLOPT_HEADERFUNCTION hands
 * over each line with its CRLF): the status line of each response, the wait headers (RF_WAIT_HEADERS:
 * Retry-After and its siblings) and Date. Pure: no libcurl, no allocation, no I/O, so the fuzz build compiles
 * it alone (fuzz/fuzz_response_head.c). Private to the client (prefix rfi_).
 */
#ifndef RETRYFREEZE_RESPONSE_HEAD_H
#define RETRYFREEZE_RESPONSE_HEAD_H

#include "retryfreeze/vocabulary.h"
#include <stdbool.h>
#include <stddef.h>

/* The most bytes a wait header value keeps (NUL included); a longer value reads as RFI_HINT_TOO_LONG. */
#define RFI_HINT_CAP 256
/* A wait header value that does not fit: invalid for every parser (and a stop for gRPC pushback, which A6
 * gives to anything unparsable), never a truncated number. */
#define RFI_HINT_TOO_LONG "(value over 255 bytes)"
/* A value holding CR, LF or NUL, which a field value never holds (RFC 9110 §5.5: reject it or replace them):
 * kept as this marker (invalid for every parser), never cut at the NUL, since the value is later read as a C
 * string ("Retry-After: 5\0…" must not read as 5). */
#define RFI_HINT_BAD "(value holds CR, LF or NUL)"

/* What one response's head said: the first line of each wait header (ratelimit's lines joined with ", ",
 * RFC 9110 §5.3, as one RFC 8941 List), and the first Date, each trimmed of spaces, tabs and the line end; and
 * whether it carried the overloaded header of the route's propagation (any value, as Envoy reads it). */
typedef struct rfi_response_head {
    char hint[RF_WAIT_HEADER_COUNT][RFI_HINT_CAP];
    bool has_hint[RF_WAIT_HEADER_COUNT];
    char date[64];
    bool has_date;
    const char *overloaded_name; /* the lowercase name to look for, NULL: none (rfi_response_head_init); kept by
                                    rfi_response_head_reset */
    bool overloaded;
    /* The response's grpc-status, a header or (HTTP/2, after the body) a trailer, the first line of it: 0 when absent
     * or OK; a value that is no gRPC status code 0..16 (not digits, or over 16) reads as 2, UNKNOWN, as gRPC
     * clients read an unknown code, with grpc_bad set so that the try says why. */
    int grpc_status;
    bool has_grpc_status;
    bool grpc_bad;
} rfi_response_head;

/* Sets every field: nothing seen, and overloaded_name (NULL: none; a lowercase field name that outlives h, the
 * route's propagation.overloadedHeader) as the header whose presence sets overloaded. */
void rfi_response_head_init(rfi_response_head *h, const char *overloaded_name);

/* Forgets what the responses said, keeping overloaded_name (a new attempt, or a new response after a 1xx or a
 * followed redirect). */
void rfi_response_head_reset(rfi_response_head *h);

/*
 * Reads one header line (len bytes, not NUL-terminated, CRLF or LF included or not). A status line ("HTTP/…")
 * starts a new response: the head is reset first, and true is returned. A "Name: value" line of a wait header
 * (names case-insensitive, rf_wait_header_parse_name) or of Date is recorded; any other line is ignored. A
 * value holding CR, LF or NUL (once trimmed) is recorded as RFI_HINT_BAD, one over 255 bytes as
 * RFI_HINT_TOO_LONG; such a Date, or one over 63 bytes, as "" (which no parser accepts): never a cut value. A
 * line of overloaded_name (case-insensitive) sets overloaded. A grpc-status line (a header or a trailer: libcurl
 * hands both to CURLOPT_HEADERFUNCTION) sets grpc_status, the first one only.
 */
bool rfi_response_head_line(rfi_response_head *h, const char *line, size_t len);

#endif
