/*
 * The client-wide retry budget: gRPC proposal A6 "retryThrottling". Tokens start at maxTokens; a retryable
 * failure takes 1 token (not below 0), a success adds tokenRatio (not above maxTokens), a non-retryable
 * failure leaves the count; retries are throttled while tokens <= maxTokens / 2. Kept in thousandths of a
 * token so tokenRatio's 3 decimal places are exact. Thread-safe through C11 atomics (compare-and-swap).
 * A budget may keep its bucket in a shared store (rf_retry_budget_set_store); the local bucket is then the
 * fallback for when the store does not answer.
 */
#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>

struct rf_retry_budget {
    bool active;
    int64_t max_milli;
    int64_t ratio_milli;
    _Atomic int64_t tokens_milli;
    bool has_store;
    rf_retry_budget_store store;
};

rf_retry_budget *rf_retry_budget_new(const rf_policy *p) {
    rf_retry_budget *b = calloc(1, sizeof *b);
    if (b == NULL) return NULL;
    b->active = rf_policy_retry_budget(p, &b->max_milli, &b->ratio_milli);
    atomic_init(&b->tokens_milli, b->active ? b->max_milli : -1);
    return b;
}

void rf_retry_budget_free(rf_retry_budget *b) {
    if (b != NULL && b->has_store && b->store.free != NULL) b->store.free(b->store.ctx);
    free(b);
}

rf_status rf_retry_budget_set_store(rf_retry_budget *b, const rf_retry_budget_store *store, rf_error *err) {
    if (b == NULL || store == NULL || store->add == NULL)
        return rfi_fail(err, "store", "budget, store and add are required");
    if (!b->active) return rfi_fail(err, "retryBudget", "is absent from the lock: there is no bucket to share");
    if (b->has_store) return rfi_fail(err, "store", "the budget already has a shared store");
    b->store = *store;
    b->has_store = true;
    return RF_OK;
}

int64_t rf_retry_budget_tokens_milli(const rf_retry_budget *b) {
    if (b == NULL || !b->active) return -1;
    return atomic_load(&((rf_retry_budget *)b)->tokens_milli);
}

/* Adds delta to the local bucket, clamped to [0, max]; returns the new count. */
static int64_t local_add(rf_retry_budget *b, int64_t delta) {
    int64_t old = atomic_load(&b->tokens_milli), next;
    do {
        next = old + delta;
        if (next < 0) next = 0;
        if (next > b->max_milli) next = b->max_milli;
    } while (!atomic_compare_exchange_weak(&b->tokens_milli, &old, next));
    return next;
}

/* Adds delta (may be negative) to the shared bucket when there is one, else (or when the store does not
 * answer) to the local one; returns the new count and says which bucket in *source. Inert budgets: -1. */
int64_t rfi_retry_budget_add(rf_retry_budget *b, int64_t delta, rf_budget_source *source) {
    if (b == NULL || !b->active) return -1;
    if (b->has_store) {
        int64_t tokens = -1;
        if (b->store.add(b->store.ctx, delta, b->max_milli, &tokens) && tokens >= 0 && tokens <= b->max_milli) {
            *source = RF_BUDGET_SHARED;
            return tokens;
        }
        *source = RF_BUDGET_LOCAL_FALLBACK;
        return local_add(b, delta);
    }
    *source = RF_BUDGET_LOCAL;
    return local_add(b, delta);
}

bool rfi_retry_budget_throttled(const rf_retry_budget *b, int64_t tokens_milli) {
    return b != NULL && b->active && tokens_milli <= b->max_milli / 2;
}

int64_t rfi_retry_budget_ratio(const rf_retry_budget *b) { return b ? b->ratio_milli : 0; }
