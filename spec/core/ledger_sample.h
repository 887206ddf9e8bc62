/*
 * The ledger tests' sample record: POST /v1/jobs with a key, a 503 with Retry-After 1 then a 201 after 1 s; every
 * string a writer needs is set. test_ledger pins its line byte for byte; the other tests start from it and change
 * what they are about. Header-only.
 */
#ifndef RF_SPEC_LEDGER_SAMPLE_H
#define RF_SPEC_LEDGER_SAMPLE_H

#include "retryfreeze/ledger.h"
#include <string.h>

static inline rf_ledger_record ledger_sample(void) {
    rf_ledger_record r;
    memset(&r, 0, sizeof r);
    r.ts_ms = 1795972801123; /* 2026-11-29T17:20:01.123Z */
    r.route = "POST /v1/jobs";
    r.method = "POST";
    r.path = "/v1/jobs";
    r.key = "k-1";
    r.policy = "sha256:0123abcd";
    r.attempts = 2;
    r.elapsed_ms = 1234;
    r.outcome = "success";
    r.reason = "success";
    r.ok = true;
    r.status = 201;
    r.body_len = 17;
    r.n_tries = 2;
    r.tries[0] = (rf_ledger_try){.class_name = "HTTP_503",
                                 .status = 503,
                                 .elapsed_ms = 20,
                                 .delay_ms = 0,
                                 .reason = "pinned-status",
                                 .retry_after = "1"};
    r.tries[1] = (rf_ledger_try){
        .class_name = "SUCCESS", .status = 201, .elapsed_ms = 30, .delay_ms = 1000, .reason = "success"};
    return r;
}

#endif
