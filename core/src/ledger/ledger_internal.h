/*
 * Private to the ledger files (core/src/ledger_*.c): helpers shared by the writer and the reader.
 * Nothing here is exported; every name carries the rfi_ledger_ prefix.
 */
#ifndef RETRYFREEZE_LEDGER_INTERNAL_H
#define RETRYFREEZE_LEDGER_INTERNAL_H

#include "retryfreeze/ledger.h"
#include "../util/report.h"
#include <cjson/cJSON.h>
#include <stdbool.h>

/* 2^53: the largest magnitude a JSON number (an IEEE double for most readers) holds exactly. */
#define RFI_LEDGER_MAX_SAFE_INT ((int64_t)1 << 53)

/* "YYYY-MM-DDTHH:MM:SS.mmmZ": 24 characters. */
#define RFI_LEDGER_TS_LEN 24
/* 9999-12-31T23:59:59.999Z, the last instant with a four-digit year. */
#define RFI_LEDGER_TS_MAX_MS ((int64_t)253402300799999)

/* ---- ledger_error.c ---- */

/* Fills err (if not NULL): path (a file, a field or an argument name), line (0: none), column, message. */
void rfi_ledger_error(rf_error *err, const char *path, long line, int column, const char *fmt, ...) RFI_PRINTF(5, 6);

/* Fills err with "<what> <path>: <strerror(errnum)>" and err->path = path. */
void rfi_ledger_errno_error(rf_error *err, const char *path, int errnum, const char *what);

/* ---- ledger_text.c ---- */

/* Length of the well-formed UTF-8 sequence at p (n >= 1 bytes available), or 0 when it is malformed (RFC 3629: no
 * overlong form, no surrogate, nothing above U+10FFFF). */
size_t rfi_ledger_utf8_sequence(const unsigned char *p, size_t n);

/* True when s[0..len) is well-formed UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF). */
bool rfi_ledger_utf8_valid(const char *s, size_t len);

/*
 * Checks the bytes of one ledger line before it is handed to cJSON, which is lenient where JSON is not:
 * well-formed UTF-8, no NUL byte, no raw control character inside a string, no \u0000 escape (cJSON would
 * silently cut the string there). Returns len when the line is acceptable, otherwise the 0-based offset
 * of the first offending byte and *why (a static phrase such as "invalid UTF-8").
 */
size_t rfi_ledger_text_check(const char *s, size_t len, const char **why);

/* ---- ledger_ts.c ---- */

/* "00" "01" .. "99": the two digits of 0..99 at 2 v, for writing numbers a pair of digits at a time. */
extern const char rfi_ledger_digit_pairs[201];

/* Formats ts_ms (0..RFI_LEDGER_TS_MAX_MS, checked by the caller) as RFC 3339 UTC with ms into out. */
void rfi_ledger_ts_format(int64_t ts_ms, char out[RFI_LEDGER_TS_LEN + 1]);

/* "YYYY-MM-DDTHH:MM:", the part of a timestamp one minute shares. */
#define RFI_LEDGER_TS_MINUTE_LEN 17

/* A writer's last minute: its lines mostly fall in one, whose calendar date and time of day need working out once
 * (the calendar is a tenth of a line's formatting). minute: ts_ms / 60000 of prefix, -1 before the first. */
typedef struct rfi_ledger_ts_cache {
    int64_t minute;
    char prefix[RFI_LEDGER_TS_MINUTE_LEN];
} rfi_ledger_ts_cache;

/* An empty cache (no minute yet). */
#define RFI_LEDGER_TS_CACHE_INIT \
    { .minute = -1 }

/* rfi_ledger_ts_format, the minute's part from cache when ts_ms falls in its minute, else worked out and kept there;
 * the same bytes either way. cache may be NULL (nothing kept). */
void rfi_ledger_ts_format_cached(int64_t ts_ms, rfi_ledger_ts_cache *cache, char out[RFI_LEDGER_TS_LEN + 1]);

/* Parses exactly "YYYY-MM-DDTHH:MM:SS.mmmZ" (a real calendar date, 1970..9999); false otherwise. */
bool rfi_ledger_ts_parse(const char *s, size_t len, int64_t *ts_ms);

/* ---- ledger_format.c ---- */

/*
 * Validates rec and formats it as one JSON object (no newline, no NUL) into buf[0..cap) when it fits; *len is
 * the line's length whether it fits or not (call again with a larger buffer). host (may be NULL) is written
 * when rec->host is NULL. ts (may be NULL): the writer's timestamp cache. Allocates nothing. RF_EINVAL naming the field
 * in err->path as "$.field" (or a line over RF_LEDGER_MAX_LINE) with err filled.
 */
rf_status rfi_ledger_format_into(const rf_ledger_record *rec, const char *host, rfi_ledger_ts_cache *ts, char *buf,
                                 size_t cap, size_t *len, rf_error *err);

/* ---- ledger_fast.c ---- */

/*
 * Parses a line in exactly the writer's form, without allocating; on success rec's strings point into line,
 * NUL-terminated in place. False (line untouched) for anything else: the strict parser then decides.
 */
bool rfi_ledger_parse_fast(char *line, size_t len, rf_ledger_record *rec);

/* Whether s[0..len) is a try's fate (RF_TRY_FATES: winner, cancelled, failed; "none" is never written). */
bool rfi_ledger_fate_known(const char *s, size_t len);
/* Whether s[0..len) is a try's peer (ledger.h): "host:port", a host of 1..253 bytes without a control byte, space or
 * quote, a ':' and a port 1..65535 in decimal without a leading zero. */
bool rfi_ledger_peer_ok(const char *s, size_t len);

/* ---- ledger_parse.c ---- */

/* Empties rec: every field zero and n_tries 0, without clearing its tries array (RF_LEDGER_MAX_TRIES of them, most of
 * the record's bytes, which a parser fills try by try as it reads them). */
void rfi_ledger_record_clear(rf_ledger_record *rec);

typedef enum rfi_ledger_parse_result {
    RFI_LEDGER_PARSED = 0,   /* *rec is filled; its strings point into *tree */
    RFI_LEDGER_NOT_JSON = 1, /* the bytes are not one JSON value: what a torn write looks like */
    RFI_LEDGER_BAD_FIELD = 2 /* valid JSON, but not a ledger record (missing, unknown or ill-typed field) */
} rfi_ledger_parse_result;

/*
 * Parses one line (newline excluded) into rec. On RFI_LEDGER_PARSED the caller owns *tree and frees it
 * with cJSON_Delete once rec's strings are no longer needed; otherwise *tree is NULL, why (a buffer of
 * why_cap bytes) says what is wrong, naming the field, and *column is the 1-based byte column of a JSON
 * syntax error (0 when not about one position).
 */
rfi_ledger_parse_result rfi_ledger_parse_line(const char *line, size_t len, rf_ledger_record *rec, cJSON **tree,
                                              char *why, size_t why_cap, int *column);

/* ---- ledger_tally.c ---- */

struct rf_ledger_tally;
struct rf_tally_file;

/* Counts rec (its line carries host, NULL for none) into the tally, without counting a line; false when memory ran
 * out (the tally is then marked incomplete). rec's strings must all be set (a record the reader returned). */
bool rfi_ledger_tally_record(struct rf_ledger_tally *t, const rf_ledger_record *rec, const char *host);
/* Adds the lines, torn and corrupt lines of one file read whole to the tally's totals. */
void rfi_ledger_tally_lines(struct rf_ledger_tally *t, const struct rf_tally_file *f);
/* NULL when rec holds every string the tally reads (route, outcome, reason, each try's class and reason, at most
 * RF_LEDGER_MAX_TRIES tries), else the first missing one's JSON path. */
const char *rfi_ledger_tally_missing(const rf_ledger_record *rec);
/* RF_OK when missing is NULL; else RF_EINVAL with err naming missing, the JSON path of the first string a record
 * lacks (rfi_ledger_tally_missing's answer, or a reader's wider one), and the reader ("tally", "replay"). */
rf_status rfi_ledger_refuse_missing(const char *missing, const char *reader, rf_error *err);

/* ---- ledger_tally_read.c ---- */

/* What a file reader does with one record: RF_OK reads on, anything else stops the read with that status (err
 * set by the callback). The record and its strings live until the next line is read. */
typedef rf_status (*rfi_ledger_record_fn)(void *ctx, const rf_ledger_record *rec, rf_error *err);

/* Reads the ledger at path whole, calling each(ctx, record) for every record after line after_line (0: all);
 * lines up to after_line are read but neither passed on nor judged. Counts into *file (zeroed first) the lines,
 * the torn lines (a write cut short: the reader reads on) and the corrupt ones. A corrupt line stops the read
 * with RF_EINVAL and its error unless skip_corrupt; RF_EIO when the file cannot be read; err from the open. */
rf_status rfi_ledger_read_each(const char *path, long after_line, bool skip_corrupt, struct rf_tally_file *file,
                               rfi_ledger_record_fn each, void *ctx, rf_error *err);

/* ---- ledger_wait_use.c ---- */

/* What became of try i's wait header (an rf_retry_after_use), told from the record alone (ledger_wait_use.c says
 * how), or -1 when the try had none, or one of a header this build does not know. i < rec->n_tries. */
int rfi_ledger_wait_use(const rf_ledger_record *rec, size_t i);

#endif
