/* retryfreeze-serve: what an attempt can be answered with, and the --faults random spec. */
#ifndef SRV_FAULTS_H
#define SRV_FAULTS_H

#include <stddef.h>
#include <stdint.h>

enum srv_fault_kind {
    SRV_FAULT_STATUS,  /* an HTTP response with a status (ok = 200) */
    SRV_FAULT_TIMEOUT, /* stall for --stall-ms, then 200 */
    SRV_FAULT_RESET,   /* abort the connection with a TCP RST */
    SRV_FAULT_EMPTY,   /* close the connection without a response */
    SRV_FAULT_CUT      /* 200 announcing a 1000-byte body, then close after 100 bytes (scripts only) */
};

/* Probabilities are fixed point in parts per billion, so "0.1" is exact and sums are exact. */
#define SRV_PPB UINT64_C(1000000000)
#define SRV_FAULT_RULES_MAX 64

struct srv_fault_rule {
    enum srv_fault_kind kind;
    int status;    /* SRV_FAULT_STATUS only */
    long stall_ms; /* SRV_FAULT_TIMEOUT from slow=P:MS: its own stall; 0 = --stall-ms */
    uint64_t ppb;
};

struct srv_fault_spec {
    struct srv_fault_rule rules[SRV_FAULT_RULES_MAX];
    size_t count;
    uint64_t total_ppb;
    long retry_after_s; /* ra=N for 503 and 429; -1 when absent */
};

/* Parses "503=0.2,429=0.05,timeout=0.02,reset=0.01,empty=0.01,slow=0.05:800ms,ra=1" (empty text = no faults;
 * statuses 200..599; slow=P:MS[ms] stalls MS ms, 1..3600000, before the work, then 200: a slow tail).
 * Returns 0, or -1 with a message naming the offending token in err. */
int srv_faults_parse(const char *text, struct srv_fault_spec *out, char *err, size_t errlen);

/* The rule that a uniform draw in [0, SRV_PPB) lands on, in spec order; NULL means no fault. */
const struct srv_fault_rule *srv_faults_pick(const struct srv_fault_spec *spec, uint64_t draw);

/* Strict non-negative decimal integer of the whole [s, s+len), at most max. Returns 0 or -1. */
int srv_parse_uint(const char *s, size_t len, uint64_t max, uint64_t *out);

#endif
