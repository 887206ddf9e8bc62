/*
 * The verdict on a 3xx the client follows: how long to wait before the next hop (RFC 9110 §10.2.3: on a
 * 3xx, Retry-After is the minimum time to wait before issuing the redirected request) and whether the
 * redirect limit or the deadline stops the request first. No allocation, no I/O, no clock reads.
 */
#include "internal.h"

#include <string.h>

rf_status rf_redirect_verdict(const rf_policy *p, const rf_facts *f, int hops, int max_redirects, rf_verdict *out,
                              rf_error *err) {
    if (p == NULL || f == NULL || out == NULL) return rfi_fail(err, "", "policy, facts and verdict must not be NULL");
    if (f->method == NULL || f->method_len == 0) return rfi_fail(err, "method", "is required (e.g. \"GET\")");
    if (f->path == NULL || f->path_len == 0) return rfi_fail(err, "path", "is required (e.g. \"/v1/jobs\")");
    if (f->status < 300 || f->status > 399) return rfi_fail(err, "status", "must be a 3xx, got %d", f->status);
    if (f->elapsed_ms < 0) return rfi_fail(err, "elapsed_ms", "must be >= 0, got %lld", (long long)f->elapsed_ms);
    if (hops < 0 || max_redirects < 0) return rfi_fail(err, "hops", "hops and max_redirects must be >= 0");
    memset(out, 0, sizeof *out);
    /* Only Retry-After speaks of a redirect's wait; it may come as retry_after or as hints[retry-after]. */
    const char *ra_value = f->retry_after;
    size_t ra_len = f->retry_after_len;
    if (ra_value == NULL || ra_len == 0) {
        ra_value = f->hints[RF_WAIT_RETRY_AFTER];
        ra_len = f->hint_lens[RF_WAIT_RETRY_AFTER];
    }
    bool has_ra = ra_value != NULL && ra_len > 0;
    out->retry_after = has_ra ? RF_RA_USE_NOT_NEEDED : RF_RA_USE_ABSENT;
    out->retry_after_header = has_ra ? (int)RF_WAIT_RETRY_AFTER : -1;
    out->route = rf_policy_match(p, f->method, f->method_len, f->path, f->path_len);
    if (out->route < 0) {
        rf_classify(f->status, RF_TRANSPORT_OK, out->class_name);
        rfi_stop(out, RF_REASON_NO_ROUTE);
        return RF_OK;
    }
    if (hops >= max_redirects) {
        rf_classify(0, RF_TRANSPORT_TOO_MANY_REDIRECTS, out->class_name);
        rfi_stop(out, RF_REASON_STATUS_NOT_RETRYABLE); /* TOO_MANY_REDIRECTS is never retryable */
        return RF_OK;
    }
    rf_classify(f->status, RF_TRANSPORT_OK, out->class_name);
    const rfi_route *r = &p->routes[out->route];
    int64_t left = r->total_budget_ms - f->elapsed_ms;
    int64_t delay = 0;
    if (has_ra) {
        int64_t ra_ms = 0;
        rf_retry_after_status ra = rf_retry_after_parse(ra_value, ra_len, f->now_ms, f->date, f->date_len, &ra_ms);
        if (ra == RF_RA_ABSENT) {
            out->retry_after = RF_RA_USE_ABSENT;
        } else if (ra != RF_RA_OK && ra != RF_RA_TOO_LONG) {
            out->retry_after = RF_RA_USE_IGNORED;
        } else if (!r->retry_after_honor) {
            out->retry_after = RF_RA_USE_NOT_HONORED;
        } else {
            out->retry_after = RF_RA_USE_HONORED;
            if (ra == RF_RA_TOO_LONG || ra_ms > r->retry_after_max_ms || ra_ms > left) {
                rfi_stop(out, RF_REASON_RETRY_AFTER_EXCEEDS_BUDGET);
                return RF_OK;
            }
            delay = ra_ms;
        }
    }
    if (delay + r->min_attempt_ms > left || delay >= left) { /* no time left for the next hop: as rf_budget */
        rfi_stop(out, RF_REASON_DEADLINE);
        return RF_OK;
    }
    out->retry = true;
    out->reason = RF_REASON_REDIRECT;
    out->delay_ms = delay;
    out->timeout_ms = left - delay < r->per_attempt_timeout_ms ? left - delay : r->per_attempt_timeout_ms;
    return RF_OK;
}
