/* The response head, line by line (response_head.h): status lines, the wait headers and Date. */
#include "response_head.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

void rfi_response_head_init(rfi_response_head *h, const char *overloaded_name) {
    memset(h, 0, sizeof *h);
    h->overloaded_name = overloaded_name;
}

void rfi_response_head_reset(rfi_response_head *h) {
    memset(h->has_hint, 0, sizeof h->has_hint);
    h->has_date = false;
    h->overloaded = false;
    h->date[0] = '\0';
    h->grpc_status = 0;
    h->has_grpc_status = false;
    h->grpc_bad = false;
}

enum value_fit { VALUE_OK, VALUE_TOO_LONG, VALUE_BAD };

/* Copies a header's value (after "Name:"), trimmed of spaces/tabs and the line end, into out (cap bytes with
 * its NUL). VALUE_BAD: it holds CR, LF or NUL (checked over its length: a C string would end at the NUL);
 * VALUE_TOO_LONG: it does not fit. Either way out is "": a value is kept whole or not at all, never cut. */
static enum value_fit header_value(const char *line, size_t len, size_t name_len, char *out, size_t cap) {
    const char *v = line + name_len + 1, *end = line + len;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t')) end--;
    out[0] = '\0';
    for (const char *p = v; p < end; p++)
        if (*p == '\0' || *p == '\r' || *p == '\n') return VALUE_BAD;
    size_t n = (size_t)(end - v);
    if (n > cap - 1) return VALUE_TOO_LONG;
    memcpy(out, v, n);
    out[n] = '\0';
    return VALUE_OK;
}

static void mark(char *dst, size_t cap, enum value_fit fit) {
    if (fit != VALUE_OK) snprintf(dst, cap, "%s", fit == VALUE_BAD ? RFI_HINT_BAD : RFI_HINT_TOO_LONG);
}

/* A grpc-status value: 0..RF_GRPC_STATUS_MAX in decimal digits, spaces and tabs around it; anything else is bad and
 * reads as UNKNOWN (2), as gRPC clients read a code they do not know. */
static void record_grpc_status(rfi_response_head *h, const char *line, size_t len, size_t name_len) {
    char v[8];
    int code = 0;
    bool ok = header_value(line, len, name_len, v, sizeof v) == VALUE_OK && v[0] != '\0' && strlen(v) <= 2;
    for (const char *p = v; ok && *p; p++) {
        if (*p < '0' || *p > '9')
            ok = false;
        else
            code = code * 10 + (*p - '0');
    }
    ok = ok && code <= RF_GRPC_STATUS_MAX;
    h->has_grpc_status = true;
    h->grpc_bad = !ok;
    h->grpc_status = ok ? code : 2;
}

/* Records a wait header line: the first line of each header wins, except ratelimit, an RFC 8941 List whose
 * lines are one list joined with ", " (RFC 9110 §5.3). */
static void record_hint(rfi_response_head *rh, rf_wait_header h, const char *line, size_t len, size_t name_len) {
    char *dst = rh->hint[h];
    const size_t cap = sizeof rh->hint[h];
    if (!rh->has_hint[h]) {
        mark(dst, cap, header_value(line, len, name_len, dst, cap));
        rh->has_hint[h] = true;
        return;
    }
    if (h != RF_WAIT_RATELIMIT || strcmp(dst, RFI_HINT_TOO_LONG) == 0 || strcmp(dst, RFI_HINT_BAD) == 0) return;
    char more[RFI_HINT_CAP];
    enum value_fit fit = header_value(line, len, name_len, more, sizeof more);
    size_t used = strlen(dst), add = strlen(more);
    if (fit != VALUE_OK)
        mark(dst, cap, fit);
    else if (used + 2 + add >= cap)
        mark(dst, cap, VALUE_TOO_LONG);
    else if (add > 0)
        snprintf(dst + used, cap - used, "%s%s", used > 0 ? ", " : "", more);
}

bool rfi_response_head_line(rfi_response_head *h, const char *line, size_t len) {
    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        rfi_response_head_reset(h);
        return true;
    }
    const char *colon = memchr(line, ':', len);
    rf_wait_header w;
    if (colon != NULL && rf_wait_header_parse_name(line, (size_t)(colon - line), &w) == 0) {
        record_hint(h, w, line, len, (size_t)(colon - line));
    } else if (!h->has_date && len > 5 && strncasecmp(line, "Date:", 5) == 0) {
        header_value(line, len, 4, h->date, sizeof h->date); /* "" unless it fits whole and clean */
        h->has_date = true;
    }
    if (!h->has_grpc_status && colon != NULL && colon - line == 11 && strncasecmp(line, "grpc-status", 11) == 0)
        record_grpc_status(h, line, len, 11);
    /* whatever else the line is (a lock may name any header, a wait header or Date too) */
    if (colon != NULL && h->overloaded_name != NULL && strlen(h->overloaded_name) == (size_t)(colon - line) &&
        strncasecmp(line, h->overloaded_name, (size_t)(colon - line)) == 0)
        h->overloaded = true;
    return false;
}
