/*
 * How a logical request ended (its outcome), and the one mapping from the reason that stopped it to that outcome
 * (docs/reasons.md "Outcomes" writes it down). Part of the engine (libretryfreeze): the client, the transport-free
 * attempt loop and the ledger's tally all read this one list. Pure functions: no state, thread-safe.
 */
#ifndef RETRYFREEZE_OUTCOME_H
#define RETRYFREEZE_OUTCOME_H

#include "retryfreeze/vocabulary.h"
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What became of a logical request. X(C name, string). */
#define RF_OUTCOMES(X)                                                                                 \
    X(RF_OUTCOME_SUCCESS, "success")     /* 2xx/3xx */                                                 \
    X(RF_OUTCOME_TERMINAL, "terminal")   /* non-retryable class, hook, server-pushback, hedge-fatal */ \
    X(RF_OUTCOME_EXHAUSTED, "exhausted") /* max-attempts, class-limit */                               \
    X(RF_OUTCOME_DEADLINE, "deadline")   /* deadline, or a Retry-After beyond the budget */            \
    X(RF_OUTCOME_THROTTLED, "throttled") /* retry-throttled by the retry budget */                     \
    X(RF_OUTCOME_REFUSED, "refused")     /* no-route, unpinned-source, mutating-without-idempotency */

typedef enum rf_outcome { RF_OUTCOMES(RF_X_ENUM2) RF_OUTCOME_COUNT } rf_outcome;

/*
 * What became of one attempt of a hedged request (gRPC A6 hedging: several attempts of one request in flight at
 * once), as the ledger's tries record it ("fate"). X(C name, string). An attempt of a request that never hedged has
 * no fate (RF_FATE_NONE, written as nothing).
 */
#define RF_TRY_FATES(X)                                                                                     \
    X(RF_FATE_NONE, "none")           /* not a hedged request's attempt */                                  \
    X(RF_FATE_WINNER, "winner")       /* its response was acceptable (a success) and ended the request */   \
    X(RF_FATE_CANCELLED, "cancelled") /* aborted in flight: another attempt's response ended the request */ \
    X(RF_FATE_FAILED, "failed")       /* it ended with a failure of its own */

typedef enum rf_try_fate { RF_TRY_FATES(RF_X_ENUM2) RF_TRY_FATE_COUNT } rf_try_fate;

/* "winner", "cancelled", …; "?" when out of range. A static string. */
RF_API const char *rf_try_fate_name(rf_try_fate f);

/* "success", "terminal", …; "?" when out of range. A static string: never free it. */
RF_API const char *rf_outcome_name(rf_outcome o);
/* The outcome a stopping verdict's reason leads to (the mapping documented in RF_OUTCOMES). */
RF_API rf_outcome rf_outcome_of(rf_reason reason);
/*
 * The outcome of a request that stopped with `reason` after a last failure whose class is (or is not)
 * retryable on its route (rf_verdict.class_retryable). As rf_outcome_of, except that a request whose last
 * failure's class is not retryable ends RF_OUTCOME_TERMINAL whatever the attempt count: a 404 on the last
 * allowed attempt (reason max-attempts, which the engine checks first) is terminal, not exhausted. Success
 * and the refusals (no-route, unpinned-source, mutating-without-idempotency) are unchanged.
 * docs/reasons.md "Outcomes" is the one place the definitions are written down.
 */
RF_API rf_outcome rf_outcome_of_stop(rf_reason reason, bool class_retryable);

#ifdef __cplusplus
}
#endif
#endif
