/*
 * The client-wide retry budget: gRPC proposal A6 "retryThrottling". Tokens start at maxTokens; a retryable
 * failure takes 1 token (not below 0), a success adds tokenRatio (not above maxTokens), a non-retryable
 * failure leaves the count; retries are throttled while tokens <= maxTokens / 2. Kept in thousandths of a
 * token so tokenRatio's 3 decimal places are exact. Thread-safe through C11 atomics (compare-and-swap).
 */
#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>

struct rf_retry_budget {
    bool active;
    int64_t max_milli;
    int64_t ratio_milli;
    _Atomic int64_t tokens_milli;
};

rf_retry_budget *rf_retry_budget_new(const rf_policy *p) {
    rf_retry_budget *b = calloc(1, sizeof *b);
    if (b == NULL) return NULL;
    b->active = rf_policy_retry_budget(p, &b->max_milli, &b->ratio_milli);
    atomic_init(&b->tokens_milli, b->active ? b->max_milli : -1);
    return b;
}

void rf_retry_budget_free(rf_retry_budget *b) { free(b); }

int64_t rf_retry_budget_tokens_milli(const rf_retry_budget *b) {
    if (b == NULL || !b->active) return -1;
    return atomic_load(&((rf_retry_budget *)b)->tokens_milli);
}

/* Adds delta (may be negative), clamped to [0, max]; returns the new count. Inert budgets return -1. */
int64_t rfi_retry_budget_add(rf_retry_budget *b, int64_t delta) {
    if (b == NULL || !b->active) return -1;
    int64_t old = atomic_load(&b->tokens_milli), next;
    do {
        next = old + delta;
        if (next < 0) next = 0;
        if (next > b->max_milli) next = b->max_milli;
    } while (!atomic_compare_exchange_weak(&b->tokens_milli, &old, next));
    return next;
}

bool rfi_retry_budget_throttled(const rf_retry_budget *b, int64_t tokens_milli) {
    return b != NULL && b->active && tokens_milli <= b->max_milli / 2;
}

int64_t rfi_retry_budget_ratio(const rf_retry_budget *b) { return b ? b->ratio_milli : 0; }
