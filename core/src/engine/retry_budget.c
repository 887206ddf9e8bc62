/*
 * The client-wide retry budget, in one of the lock's two forms (docs/lock.md, retryBudget):
 * - a token bucket, gRPC proposal A6 "retryThrottling": tokens start at maxTokens; a retryable failure takes 1 token
 *   (not below 0), a success adds tokenRatio (not above maxTokens), a non-retryable failure leaves the count; retries
 *   are throttled while tokens <= maxTokens / 2. Kept in thousandths of a token so tokenRatio's 3 decimal places are
 *   exact; thread-safe through C11 atomics (compare-and-swap).
 * - a ratio over a sliding window (Linkerd's, Envoy's and Finagle's retry budgets): time is cut into slots of
 *   ttlMs / 10 ms and the window is the slot of now and the 9 before it; a retry is allowed while the window's
 *   retries, this one included, are at most retryRatio × its requests + minRetriesPerSecond × ttlMs / 1000. Counted in
 *   integers (retryRatio × 1000), under a spin lock (C11 atomic_flag: a few dozen instructions are held), on the
 *   clock the deciding caller reads (rf_facts.mono_ms): the engine reads none.
 * A budget may keep its state in a shared store (rf_retry_budget_set_store); the local state is then the fallback
 * for when the store does not answer.
 */
#include "internal.h"
#include "retry_budget_state.h"

#include <stdatomic.h>
#include <stdlib.h>

/* The ratio window: RATIO_SLOTS slots of ttlMs / RATIO_SLOTS ms (retryBudget.ttlMs is a multiple of it). */
#define RATIO_SLOTS RFI_BUDGET_SLOTS
#define NO_SLOT INT64_MIN

typedef struct window_slot {
    int64_t slot; /* the slot number (time / slot_ms) whose counts these are; NO_SLOT: never used */
    int64_t requests, retries;
} window_slot;

struct rf_retry_budget {
    bool active;
    bool ratio; /* the ratio form; else the token bucket */
    /* The token bucket. */
    int64_t max_milli;
    int64_t ratio_milli;
    _Atomic int64_t tokens_milli;
    /* The ratio window: retries × 1000 <= retry_ratio_milli × requests + reserve_milli, in the window. */
    int64_t retry_ratio_milli;
    int64_t reserve_milli; /* minRetriesPerSecond × ttlMs: the retries × 1000 the window allows with no request */
    int64_t ttl_ms, slot_ms;
    atomic_flag busy; /* held while the slots are read or written */
    window_slot slots[RATIO_SLOTS];
    int64_t newest; /* the newest slot number seen: time never runs backwards in the window */
    bool has_store;
    rf_retry_budget_store store;
};

rf_retry_budget *rf_retry_budget_new(const rf_policy *p) {
    rf_retry_budget *b = calloc(1, sizeof *b);
    if (b == NULL) return NULL;
    b->active = rf_policy_retry_budget(p, &b->max_milli, &b->ratio_milli);
    int64_t min_per_second = 0;
    b->ratio = rf_policy_retry_ratio(p, &b->retry_ratio_milli, &min_per_second, &b->ttl_ms);
    if (b->ratio) {
        b->reserve_milli = min_per_second * b->ttl_ms;
        b->slot_ms = b->ttl_ms / RATIO_SLOTS;
    }
    atomic_init(&b->tokens_milli, b->active && !b->ratio ? b->max_milli : -1);
    atomic_flag_clear(&b->busy);
    for (int i = 0; i < RATIO_SLOTS; i++) b->slots[i] = (window_slot){.slot = NO_SLOT};
    b->newest = NO_SLOT;
    return b;
}

void rf_retry_budget_free(rf_retry_budget *b) {
    if (b != NULL && b->has_store && b->store.free != NULL) b->store.free(b->store.ctx);
    free(b);
}

rf_status rf_retry_budget_set_store(rf_retry_budget *b, const rf_retry_budget_store *store, rf_error *err) {
    if (b == NULL || store == NULL) return rfi_fail(err, "store", "budget and store are required");
    if (!b->active) return rfi_fail(err, "retryBudget", "is absent from the lock: there is no bucket to share");
    if (b->ratio && store->window == NULL)
        return rfi_fail(err, "store", "window is required: the lock's retryBudget is a ratio over a window");
    if (!b->ratio && store->add == NULL)
        return rfi_fail(err, "store", "add is required: the lock's retryBudget is a token bucket");
    if (b->has_store) return rfi_fail(err, "store", "the budget already has a shared store");
    b->store = *store;
    b->has_store = true;
    return RF_OK;
}

int64_t rf_retry_budget_tokens_milli(const rf_retry_budget *b) {
    if (b == NULL || !b->active || b->ratio) return -1;
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
 * answer) to the local one; returns the new count and says which bucket in *source. Inert budgets and the ratio
 * form: -1. */
int64_t rfi_retry_budget_add(rf_retry_budget *b, int64_t delta, rf_budget_source *source) {
    if (b == NULL || !b->active || b->ratio) return -1;
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
    return b != NULL && b->active && !b->ratio && tokens_milli <= b->max_milli / 2;
}

int64_t rfi_retry_budget_ratio(const rf_retry_budget *b) { return b ? b->ratio_milli : 0; }

bool rfi_retry_budget_is_ratio(const rf_retry_budget *b) { return b != NULL && b->active && b->ratio; }

static void window_lock(rf_retry_budget *b) {
    while (atomic_flag_test_and_set_explicit(&b->busy, memory_order_acquire)) {}
}

static void window_unlock(rf_retry_budget *b) { atomic_flag_clear_explicit(&b->busy, memory_order_release); }

/* The slot number of mono_ms (0: unknown, the newest seen), never before the newest seen. Under the lock. */
static int64_t slot_of(const rf_retry_budget *b, int64_t mono_ms) {
    int64_t k = mono_ms > 0 ? mono_ms / b->slot_ms : b->newest;
    if (k == NO_SLOT) k = 0;
    return k < b->newest ? b->newest : k;
}

/* The window's counts ending at slot k. Under the lock. */
static void window_sums(const rf_retry_budget *b, int64_t k, int64_t *requests, int64_t *retries) {
    *requests = *retries = 0;
    for (int i = 0; i < RATIO_SLOTS; i++) {
        const window_slot *s = &b->slots[i];
        if (s->slot != NO_SLOT && s->slot <= k && s->slot > k - RATIO_SLOTS) {
            *requests += s->requests;
            *retries += s->retries;
        }
    }
}

static bool local_window_take(rf_retry_budget *b, bool request, bool retry, int64_t mono_ms) {
    window_lock(b);
    const int64_t k = slot_of(b, mono_ms);
    b->newest = k;
    window_slot *s = &b->slots[(k % RATIO_SLOTS + RATIO_SLOTS) % RATIO_SLOTS];
    if (s->slot != k) *s = (window_slot){.slot = k};
    if (request) s->requests++;
    bool allowed = true;
    if (retry) {
        int64_t requests, retries;
        window_sums(b, k, &requests, &retries);
        allowed = (retries + 1) * 1000 <= b->retry_ratio_milli * requests + b->reserve_milli;
        if (allowed) s->retries++;
    }
    window_unlock(b);
    return allowed;
}

bool rfi_retry_budget_window_take(rf_retry_budget *b, rf_budget_request *request, bool retry, int64_t mono_ms,
                                  rf_budget_source *source) {
    if (!rfi_retry_budget_is_ratio(b)) return true;
    /* The request counts at the first decision its token carries, and never again: whichever path asks. */
    const bool count = request != NULL && !request->counted;
    if (!count && !retry) return true;
    if (request != NULL) request->counted = true;
    if (b->has_store) {
        bool allowed = false;
        if (b->store.window(b->store.ctx, count, retry, b->retry_ratio_milli, b->reserve_milli, b->ttl_ms, &allowed)) {
            *source = RF_BUDGET_SHARED;
            return allowed || !retry;
        }
        *source = RF_BUDGET_LOCAL_FALLBACK;
        return local_window_take(b, count, retry, mono_ms);
    }
    *source = RF_BUDGET_LOCAL;
    return local_window_take(b, count, retry, mono_ms);
}

bool rf_retry_budget_window(const rf_retry_budget *b, int64_t mono_ms, rf_budget_window *out) {
    if (out == NULL) return false;
    *out = (rf_budget_window){0};
    if (!rfi_retry_budget_is_ratio(b)) return false;
    rf_retry_budget *w = (rf_retry_budget *)b; /* the lock only: nothing is counted */
    window_lock(w);
    window_sums(w, slot_of(w, mono_ms), &out->requests, &out->retries);
    window_unlock(w);
    out->ttl_ms = b->ttl_ms;
    out->allowance_milli = b->retry_ratio_milli * out->requests + b->reserve_milli;
    return true;
}

void rfi_retry_budget_save(rf_retry_budget *b, rfi_budget_state *out) {
    *out = (rfi_budget_state){.newest = NO_SLOT};
    for (int i = 0; i < RATIO_SLOTS; i++) out->slot[i] = NO_SLOT;
    if (!rfi_retry_budget_is_ratio(b)) return;
    window_lock(b);
    out->newest = b->newest;
    for (int i = 0; i < RATIO_SLOTS; i++) {
        out->slot[i] = b->slots[i].slot;
        out->requests[i] = b->slots[i].requests;
        out->retries[i] = b->slots[i].retries;
    }
    window_unlock(b);
}

void rfi_retry_budget_restore(rf_retry_budget *b, const rfi_budget_state *in) {
    if (!rfi_retry_budget_is_ratio(b)) return;
    window_lock(b);
    b->newest = in->newest;
    for (int i = 0; i < RATIO_SLOTS; i++)
        b->slots[i] = (window_slot){.slot = in->slot[i], .requests = in->requests[i], .retries = in->retries[i]};
    window_unlock(b);
}
