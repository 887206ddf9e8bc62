/*
 * Private to the library: a copy of a ratio retry budget's local window, for a caller inside the library that
 * models several futures from one past (the replay: a request put aside resumes from the window it left, each
 * replicate from the same one). The budget's own code counts; this only saves and restores what it counted.
 * Prefix rfi_; never installed.
 */
#ifndef RETRYFREEZE_RETRY_BUDGET_STATE_H
#define RETRYFREEZE_RETRY_BUDGET_STATE_H

#include "retryfreeze/decide.h"

#include <stdint.h>

/* The ratio window's slots (retryBudget.ttlMs / RFI_BUDGET_SLOTS ms each). */
#define RFI_BUDGET_SLOTS 10

/* A ratio window's counts at one moment. */
typedef struct rfi_budget_state {
    int64_t newest; /* the newest slot number seen */
    int64_t slot[RFI_BUDGET_SLOTS], requests[RFI_BUDGET_SLOTS], retries[RFI_BUDGET_SLOTS];
} rfi_budget_state;

/* Copies b's local window into *out (zeroed, no slot used, for any budget that is not a ratio). Under the window's
 * lock. */
void rfi_retry_budget_save(rf_retry_budget *b, rfi_budget_state *out);
/* Sets b's local window to *in (as rfi_retry_budget_save gave it); nothing for a budget that is not a ratio. */
void rfi_retry_budget_restore(rf_retry_budget *b, const rfi_budget_state *in);

#endif
