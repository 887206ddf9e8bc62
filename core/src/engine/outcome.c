/* Outcome names and the mapping of a stopping reason to an outcome (retryfreeze/outcome.h). */
#include "retryfreeze/outcome.h"

#define RF_X_STR(name, str) str,
static const char *const outcome_names[] = {RF_OUTCOMES(RF_X_STR)};

const char *rf_outcome_name(rf_outcome o) { return (unsigned)o < RF_OUTCOME_COUNT ? outcome_names[o] : "?"; }

static const char *const fate_names[] = {RF_TRY_FATES(RF_X_STR)};

const char *rf_try_fate_name(rf_try_fate f) { return (unsigned)f < RF_TRY_FATE_COUNT ? fate_names[f] : "?"; }

rf_outcome rf_outcome_of(rf_reason reason) {
    switch (reason) {
    case RF_REASON_SUCCESS: return RF_OUTCOME_SUCCESS;
    case RF_REASON_MAX_ATTEMPTS:
    case RF_REASON_CLASS_LIMIT: return RF_OUTCOME_EXHAUSTED;
    case RF_REASON_DEADLINE:
    case RF_REASON_RETRY_AFTER_EXCEEDS_BUDGET: return RF_OUTCOME_DEADLINE;
    case RF_REASON_RETRY_THROTTLED: return RF_OUTCOME_THROTTLED;
    case RF_REASON_UNPINNED_SOURCE:
    case RF_REASON_NO_ROUTE:
    case RF_REASON_MUTATING_WITHOUT_IDEMPOTENCY: return RF_OUTCOME_REFUSED;
    default: return RF_OUTCOME_TERMINAL;
    }
}

rf_outcome rf_outcome_of_stop(rf_reason reason, bool class_retryable) {
    rf_outcome o = rf_outcome_of(reason);
    if (!class_retryable && (o == RF_OUTCOME_EXHAUSTED || o == RF_OUTCOME_DEADLINE || o == RF_OUTCOME_THROTTLED))
        return RF_OUTCOME_TERMINAL;
    return o;
}
