/*
 * Fuzz target: the response head as the client reads it (core/src/client/response_head.c, the pure part of
 * libcurl's header callback), then every wait header it kept through its parser (rf_wait_header_parse) with
 * the Date it kept, as the client builds the facts.
 * Input: any bytes, cut into lines after each "\n" (the newline stays on its line, as libcurl hands it over).
 * Invariants:
 *   - a status line ("HTTP/…") forgets the previous response: only lines after the last one count;
 *   - each wait header keeps its first line's value after that status line, trimmed of SP/HTAB/CR/LF, or the
 *     marker for a value over 255 bytes or one holding CR, LF or NUL (RFC 9110 §5.5; never a value cut at a
 *     NUL or at the cap); ratelimit joins its lines with ", " (or is the marker); Date keeps its first line's
 *     value, or "" when over 63 bytes or with CR, LF or NUL (a value is kept whole or not at all);
 *   - every kept value is NUL-terminated within its buffer, starts and ends without SP/HTAB/CR/LF, and holds
 *     no NUL before its end;
 *   - each value parses to a known status, a delay written only on ok and then >= 0, the same twice;
 *   - overloaded says whether a line named x-envoy-overloaded (any case, any value) came after the last status
 *     line.
 */
#include "fuzz.h"

#include "../core/src/client/response_head.h"
#include "retryfreeze/retry_after.h"

#include <stdbool.h>
#include <strings.h>

#define NOW_MS INT64_C(1700000000000)
/* The propagation's overloaded header the head looks for (the lock's default, lowercase). */
static const char OVERLOADED[] = "x-envoy-overloaded";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return 0;
}

static bool is_trim(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* The value of a "Name: value" line, trimmed as response_head.h says. */
static void trimmed(const char *line, size_t len, size_t name_len, const char **v, size_t *n) {
    const char *s = line + name_len + 1, *e = line + len;
    while (s < e && (*s == ' ' || *s == '\t')) s++;
    while (e > s && is_trim(e[-1])) e--;
    *v = s;
    *n = (size_t)(e - s);
}

static void check_kept(const char *what, const char *s, size_t cap) {
    const char *end = memchr(s, '\0', cap);
    FZ_CHECK(end != NULL, "%s is not NUL-terminated", what);
    size_t n = (size_t)(end - s);
    FZ_CHECK(n == 0 || (!is_trim(s[0]) && !is_trim(s[n - 1])), "%s \"%s\" is not trimmed", what, s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    rfi_response_head h;
    memset(&h, 0xAB, sizeof h); /* garbage first: init must set everything that is read */
    rfi_response_head_init(&h, OVERLOADED);
    rfi_response_head_reset(&h); /* and reset keeps the name it looks for */
    FZ_CHECK(h.overloaded_name == OVERLOADED && !h.overloaded, "reset lost the overloaded header's name");
    bool overloaded = false; /* the reference: an x-envoy-overloaded line since the last status line */
    /* The reference: where each wait header's first line since the last status line is, and Date's. */
    const char *first[RF_WAIT_HEADER_COUNT] = {0}, *date_line = NULL;
    size_t first_len[RF_WAIT_HEADER_COUNT] = {0}, first_name[RF_WAIT_HEADER_COUNT] = {0}, date_len = 0;
    size_t ratelimit_lines = 0;
    for (size_t at = 0; at < size;) {
        const char *nl = memchr(text + at, '\n', size - at);
        size_t len = nl ? (size_t)(nl - (text + at)) + 1 : size - at;
        const char *line = text + at;
        bool status = rfi_response_head_line(&h, line, len);
        FZ_CHECK(status == (len >= 5 && memcmp(line, "HTTP/", 5) == 0), "status line not recognised");
        if (status) {
            memset(first, 0, sizeof first);
            date_line = NULL;
            ratelimit_lines = 0;
            overloaded = false;
            for (int w = 0; w < RF_WAIT_HEADER_COUNT; w++) FZ_CHECK(!h.has_hint[w], "a status line kept a header");
            FZ_CHECK(!h.has_date, "a status line kept Date");
        } else {
            const char *colon = memchr(line, ':', len);
            if (colon && (size_t)(colon - line) == sizeof OVERLOADED - 1 &&
                strncasecmp(line, OVERLOADED, sizeof OVERLOADED - 1) == 0)
                overloaded = true;
            rf_wait_header w;
            if (colon && rf_wait_header_parse_name(line, (size_t)(colon - line), &w) == 0) {
                if (first[w] == NULL) {
                    first[w] = line;
                    first_len[w] = len;
                    first_name[w] = (size_t)(colon - line);
                }
                if (w == RF_WAIT_RATELIMIT) ratelimit_lines++;
            } else if (date_line == NULL && len > 5 && strncasecmp(line, "Date:", 5) == 0) {
                date_line = line;
                date_len = len;
            }
        }
        at += len;
    }
    FZ_CHECK(h.overloaded == overloaded, "overloaded: kept %d, seen %d", h.overloaded, overloaded);
    for (int w = 0; w < RF_WAIT_HEADER_COUNT; w++) {
        FZ_CHECK(h.has_hint[w] == (first[w] != NULL), "%s: kept %d, seen %d", rf_wait_header_name((rf_wait_header)w),
                 h.has_hint[w], first[w] != NULL);
        if (!h.has_hint[w]) continue;
        check_kept(rf_wait_header_name((rf_wait_header)w), h.hint[w], sizeof h.hint[w]);
        const char *v;
        size_t n;
        trimmed(first[w], first_len[w], first_name[w], &v, &n);
        bool nul = memchr(v, '\0', n) || memchr(v, '\r', n) || memchr(v, '\n', n), too_long = n > RFI_HINT_CAP - 1;
        if (w != RF_WAIT_RATELIMIT || ratelimit_lines == 1) {
            if (nul)
                FZ_CHECK(strcmp(h.hint[w], RFI_HINT_BAD) == 0, "a value with CR, LF or NUL kept as \"%s\"", h.hint[w]);
            else if (too_long)
                FZ_CHECK(strcmp(h.hint[w], RFI_HINT_TOO_LONG) == 0, "a long value kept as \"%s\"", h.hint[w]);
            else
                FZ_CHECK(strlen(h.hint[w]) == n && memcmp(h.hint[w], v, n) == 0, "%s: kept \"%s\", not the first value",
                         rf_wait_header_name((rf_wait_header)w), h.hint[w]);
        } else if (!nul && !too_long && strcmp(h.hint[w], RFI_HINT_TOO_LONG) != 0 &&
                   strcmp(h.hint[w], RFI_HINT_BAD) != 0) {
            /* Joined lines start with the first line's value. */
            FZ_CHECK(strncmp(h.hint[w], v, n) == 0, "ratelimit \"%s\" does not start with its first line", h.hint[w]);
        }
    }
    FZ_CHECK(h.has_date == (date_line != NULL), "Date kept %d, seen %d", h.has_date, date_line != NULL);
    if (h.has_date) {
        check_kept("Date", h.date, sizeof h.date);
        const char *v;
        size_t n;
        trimmed(date_line, date_len, 4, &v, &n);
        if (memchr(v, '\0', n) || memchr(v, '\r', n) || memchr(v, '\n', n) || n > sizeof h.date - 1)
            FZ_CHECK(h.date[0] == '\0', "a Date with CR, LF or NUL, or too long, kept as \"%s\"", h.date);
        else
            FZ_CHECK(strlen(h.date) == n && memcmp(h.date, v, n) == 0, "Date \"%s\" is not the first value", h.date);
    }
    /* The parsers, as the client hands the values to the engine (C strings: their strlen is the length). */
    const char *date = h.has_date ? h.date : NULL;
    size_t dlen = date ? strlen(date) : 0;
    for (int w = 0; w < RF_WAIT_HEADER_COUNT; w++) {
        if (!h.has_hint[w]) continue;
        int64_t a = -777, b = -777;
        rf_retry_after_status s1 =
            rf_wait_header_parse((rf_wait_header)w, h.hint[w], strlen(h.hint[w]), NOW_MS, date, dlen, &a);
        rf_retry_after_status s2 =
            rf_wait_header_parse((rf_wait_header)w, h.hint[w], strlen(h.hint[w]), NOW_MS, date, dlen, &b);
        FZ_CHECK(s1 == s2 && a == b, "%s: not deterministic", rf_wait_header_name((rf_wait_header)w));
        FZ_CHECK(strcmp(rf_retry_after_status_name(s1), "unknown") != 0, "status %d", (int)s1);
        if (s1 == RF_RA_OK)
            FZ_CHECK(a >= 0, "%s \"%s\": delay %lld", rf_wait_header_name((rf_wait_header)w), h.hint[w], (long long)a);
        else
            FZ_CHECK(a == -777, "%s: delay written on status %d", rf_wait_header_name((rf_wait_header)w), (int)s1);
    }
    return 0;
}
