/* retryfreeze-serve: the X-Fault-Script request header, one step per attempt of a sequence. */
#ifndef SRV_SCRIPT_H
#define SRV_SCRIPT_H

#include <stddef.h>

#include "faults.h"

/* Longest Retry-After text a step may carry (after unquoting). */
#define SRV_RETRY_AFTER_MAX 256
/* Longest delay= a step may ask for: an hour is far past any client's patience. */
#define SRV_DELAY_MAX_MS 3600000L
/* retry-after-date=N stays within about a century either way. */
#define SRV_DATE_OFFSET_MAX 3200000000LL

enum srv_retry_after { SRV_RA_NONE, SRV_RA_TEXT, SRV_RA_DATE };

/* Most header= / header-epoch= parameters one step may carry. */
#define SRV_MAX_HEADERS 4
/* Longest header name a header= parameter may give. */
#define SRV_HEADER_NAME_MAX 64

/* One extra response header of a step: a wait signal such as retry-after-ms, ratelimit, grpc-retry-pushback-ms. */
struct srv_header {
    char name[SRV_HEADER_NAME_MAX + 1];
    char value[SRV_RETRY_AFTER_MAX + 1]; /* header=: sent verbatim */
    int epoch;                           /* header-epoch=: the value is the Unix time epoch_offset_s from now */
    long long epoch_offset_s;
};

struct srv_step {
    enum srv_fault_kind kind;
    int status;                            /* SRV_FAULT_STATUS only */
    long delay_ms;                         /* sleep before answering; 0 = none */
    long stall_ms;                         /* SRV_FAULT_TIMEOUT: its own stall (--faults slow=); 0 = --stall-ms */
    enum srv_retry_after ra;               /* which Retry-After to send, if any */
    char ra_text[SRV_RETRY_AFTER_MAX + 1]; /* SRV_RA_TEXT: sent verbatim */
    long long ra_date_offset_s;            /* SRV_RA_DATE: IMF-fixdate this many seconds from now */
    int n_headers;                         /* header= and header-epoch= parameters, in script order */
    struct srv_header headers[SRV_MAX_HEADERS];
};

/* Validates the whole script text[0..len) and returns its number of steps (>= 1), or -1 with a
 * message in err. When index < the count, *step receives step number index (0-based); pass
 * step = NULL to validate only. */
long srv_script_parse(const char *text, size_t len, size_t index, struct srv_step *step, char *err, size_t errlen);

#endif
