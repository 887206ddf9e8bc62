/*
 * A route's wait headers on the decision path: the facts' hints read in the order of the route's
 * retryAfter.headers, the first present and valid header wins (docs/lock.md#wait-headers). Allocates nothing
 * and touches no state; the parsers are in wait_headers.c and retry_after.c, the lock field is read in
 * lock_fields.c.
 */
#include "internal.h"

#include <stdint.h>
#include <string.h>

/* The value of header h in the facts: retry-after may come as facts.retry_after or as hints[retry-after]. A header
 * is present when its pointer is not NULL, even with length 0: an empty field is a field the server sent, which
 * each header's parser judges (an empty grpc-retry-pushback-ms stops, an empty other one asks for no wait). */
static const char *hint_value(const rf_facts *f, rf_wait_header h, size_t *len) {
    if (h == RF_WAIT_RETRY_AFTER && f->retry_after != NULL) {
        *len = f->retry_after_len;
        return f->retry_after;
    }
    *len = f->hint_lens[h];
    return f->hints[h];
}

/* One mask test in the common case (no header the route does not read); the loops run only to name a refusal
 * or the first present header. */
rf_status rfi_wait_hints_check(const rfi_route *r, const rf_facts *f, uint32_t present, int *first_present,
                               rf_error *err) {
    *first_present = -1;
    if (present == 0) return RF_OK;
    if (f->retry_after != NULL && f->hints[RF_WAIT_RETRY_AFTER] != NULL)
        return rfi_fail(err, "hints.retry-after", "is given twice (as retry_after and in hints): give it once");
    const uint32_t unread = present & ~r->wait_reads;
    if (unread != 0) {
        unsigned h = 0;
        while (!(unread & (1u << h))) h++; /* the first in rf_wait_header order */
        return rfi_fail(err, h == RF_WAIT_RETRY_AFTER && f->retry_after != NULL ? "retry_after" : "hints",
                        "the route \"%s\" does not read %s (retryAfter.headers lists the headers it reads)",
                        r->endpoint.text, rf_wait_header_name((rf_wait_header)h));
    }
    for (size_t i = 0; i < r->n_wait_headers; i++) {
        if (present & (1u << r->wait_headers[i])) {
            *first_present = (int)r->wait_headers[i];
            break;
        }
    }
    return RF_OK;
}

void rfi_wait_read(const rfi_route *r, const rf_facts *f, rfi_wait *out) {
    *out = (rfi_wait){.header = -1, .status = RF_RA_ABSENT, .delay_ms = 0};
    for (size_t i = 0; i < r->n_wait_headers; i++) {
        const rf_wait_header h = r->wait_headers[i];
        size_t len;
        const char *v = hint_value(f, h, &len);
        if (v == NULL) continue;
        int64_t ms = 0;
        const rf_retry_after_status st = rf_wait_header_parse(h, v, len, f->now_ms, f->date, f->date_len, &ms);
        if (st == RF_RA_ABSENT) continue;
        if (st == RF_RA_OK || st == RF_RA_TOO_LONG || st == RF_RA_STOP) {
            *out = (rfi_wait){.header = (int)h, .status = st, .delay_ms = st == RF_RA_OK ? ms : 0};
            return;
        }
        if (out->header < 0) *out = (rfi_wait){.header = (int)h, .status = st, .delay_ms = 0};
    }
}
