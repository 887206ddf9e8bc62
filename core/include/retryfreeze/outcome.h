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
#define RF_OUTCOMES(X)                                                                                    \
    X(RF_OUTCOME_SUCCESS, "success")     /* 2xx/3xx */                                                    \
    X(RF_OUTCOME_TERMINAL, "terminal")   /* non-retryable class, the caller's hook, or server-pushback */ \
    X(RF_OUTCOME_EXHAUSTED, "exhausted") /* max-attempts, class-limit */                                  \
    X(RF_OUTCOME_DEADLINE, "deadline")   /* deadline, or a Retry-After beyond the budget */               \
    X(RF_OUTCOME_THROTTLED, "throttled") /* retry-throttled by the retry budget */                        \
    X(RF_OUTCOME_REFUSED, "refused")     /* no-route, unpinned-source, mutating-without-idempotency */

typedef enum rf_outcome { RF_OUTCOMES(RF_X_ENUM2) RF_OUTCOME_COUNT } rf_outcome;

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
