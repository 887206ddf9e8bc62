/*
 * What became of a try's wait header, told from the ledger alone (docs/evidence.md "Retry-After use from the
 * ledger"; the verdict's own word is in docs/reasons.md "Retry-After in a verdict"). The ledger keeps the raw
 * value and which header it came from (retry_after_header: Retry-After when absent), the verdict's reason and
 * the next try's delay, not the verdict's retry_after. So, with the value read by its header's own rule
 * (rf_wait_header_parse):
 *   - an invalid value (for Retry-After, RFC 9110 §10.2.3: neither delay-seconds nor an HTTP-date):
 *     ignored-invalid;
 *   - reason retry-after-exceeds-budget or server-pushback (the value stopped the request): honored;
 *   - reason pinned-status (retried): honored when the next try waited exactly the delay, or, for a date (an
 *     HTTP-date, an x-ratelimit-reset timestamp), started within 1 s of it (the try ends are rebuilt from ts and
 *     the durations; such dates have 1 s resolution); else not-honored;
 *   - any other reason (success, not retryable, deadline, …): the request stopped: not-needed.
 * The engine calls a valid value "honored" even when a later check (deadline, throttling) stops the request;
 * the ledger cannot tell whether the route honours the header then, so such tries count as not-needed.
 */
#include "ledger_internal.h"
#include "retryfreeze/retry_after.h"

#include <string.h>

/* The integer value of x-ratelimit-reset as a Unix time in ms (its "timestamp" form), or false. */
static bool reset_epoch_ms(const char *v, int64_t *out) {
    while (*v == ' ' || *v == '\t') v++;
    int64_t n = 0;
    const char *p = v;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (n > 253402300799) return false; /* past 9999-12-31 */
        n = n * 10 + (*p - '0');
    }
    while (*p == ' ' || *p == '\t') p++;
    if (p == v || *p != '\0') return false;
    *out = n * 1000;
    return true;
}

/* The start of try i + 1 (Unix ms): the record ends when its last try does, so walk back from ts. */
static int64_t next_start_ms(const rf_ledger_record *rec, size_t i) {
    int64_t start = rec->ts_ms;
    for (size_t j = rec->n_tries; j-- > i + 1;) {
        start -= rec->tries[j].elapsed_ms;
        if (j > i + 1) start -= rec->tries[j].delay_ms;
    }
    return start;
}

int rfi_ledger_wait_use(const rf_ledger_record *rec, size_t i) {
    const rf_ledger_try *t = &rec->tries[i];
    if (t->retry_after == NULL) return -1;
    rf_wait_header h = RF_WAIT_RETRY_AFTER;
    if (t->retry_after_header != NULL &&
        rf_wait_header_parse_name(t->retry_after_header, strlen(t->retry_after_header), &h) != 0)
        return -1; /* a header this build does not know: not judged */
    size_t len = strlen(t->retry_after);
    int64_t delay = 0;
    /* now_ms 0: a valid date comes back as RF_RA_NO_CLOCK, which tells it from an invalid value. */
    rf_retry_after_status st = rf_wait_header_parse(h, t->retry_after, len, 0, NULL, 0, &delay);
    if (st == RF_RA_ABSENT) return -1;
    if (st == RF_RA_INVALID) return RF_RA_USE_IGNORED;
    if (strcmp(t->reason, rf_reason_name(RF_REASON_RETRY_AFTER_EXCEEDS_BUDGET)) == 0 ||
        strcmp(t->reason, rf_reason_name(RF_REASON_SERVER_PUSHBACK)) == 0)
        return RF_RA_USE_HONORED;
    if (strcmp(t->reason, rf_reason_name(RF_REASON_PINNED_STATUS)) != 0 || i + 1 >= rec->n_tries)
        return RF_RA_USE_NOT_NEEDED;
    if (st == RF_RA_OK) return rec->tries[i + 1].delay_ms == delay ? RF_RA_USE_HONORED : RF_RA_USE_NOT_HONORED;
    if (st != RF_RA_NO_CLOCK) return RF_RA_USE_NOT_HONORED; /* too long or a stop, yet retried: not used */
    int64_t date_ms = 0;
    bool dated = h == RF_WAIT_RETRY_AFTER ? rf_http_date_parse(t->retry_after, len, rec->ts_ms, &date_ms)
                                          : reset_epoch_ms(t->retry_after, &date_ms);
    if (!dated) return RF_RA_USE_NOT_HONORED;
    int64_t off = next_start_ms(rec, i) - date_ms;
    return (off >= -1000 && off <= 1000) ? RF_RA_USE_HONORED : RF_RA_USE_NOT_HONORED;
}
