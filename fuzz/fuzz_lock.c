/*
 * Fuzz target: the lock loader (rf_policy_load_buffer) on arbitrary bytes.
 * Invariants:
 *   - the result is RF_OK or RF_EINVAL (never a crash, hang or leak); a refusal leaves *out untouched and
 *     says why (a non-empty, NUL-terminated message);
 *   - an accepted lock's digest is "sha256:" + 64 lowercase hex;
 *   - its canonical JSON and its indented JSON both load again, to the same digest and the same canonical
 *     text (the effective policy is a fixed point of load ∘ canonical);
 *   - every route view respects the lock's ranges (maxAttempts 1..10, perAttemptTimeoutMs ≤ totalBudgetMs,
 *     minAttemptMs ≤ perAttemptTimeoutMs, backoff.baseMs ≤ backoff.maxMs, …) and a literal route's own path
 *     is routed to that route.
 */
#include "fuzz.h"

#include "retryfreeze/policy.h"

static void check_error(const rf_error *err) {
    FZ_CHECK(memchr(err->message, '\0', sizeof err->message) != NULL, "message not NUL-terminated");
    FZ_CHECK(memchr(err->path, '\0', sizeof err->path) != NULL, "path not NUL-terminated");
    FZ_CHECK(err->message[0] != '\0', "refusal without a message (path \"%s\")", err->path);
}

static void check_digest(const char *d) {
    FZ_CHECK(d != NULL && strncmp(d, "sha256:", 7) == 0 && strlen(d) == 71, "digest \"%s\"", d ? d : "(null)");
    for (size_t i = 7; i < 71; i++)
        FZ_CHECK((d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f'), "digest \"%s\"", d);
}

/* Loads text (the canonical or the indented form of `orig`) and checks it is the same policy. */
static void check_reload(const rf_policy *orig, const char *text, const char *form) {
    rf_policy *q = NULL;
    rf_error err;
    memset(&err, 0, sizeof err);
    rf_status st = rf_policy_load_buffer(text, strlen(text), &q, &err);
    FZ_CHECK(st == RF_OK, "the %s JSON of an accepted lock does not load: %s: %s\n  %s", form, err.path, err.message,
             text);
    FZ_CHECK(strcmp(rf_policy_digest(q), rf_policy_digest(orig)) == 0, "%s form reloads to %s, not %s", form,
             rf_policy_digest(q), rf_policy_digest(orig));
    FZ_CHECK(strcmp(rf_policy_canonical_json(q), rf_policy_canonical_json(orig)) == 0,
             "%s form changes the canonical text:\n  %s\n  %s", form, rf_policy_canonical_json(orig),
             rf_policy_canonical_json(q));
    rf_policy_free(q);
}

static void check_route(const rf_policy *p, size_t i) {
    rf_route_view r;
    FZ_CHECK(rf_policy_route(p, i, &r) == RF_OK, "route %zu has no view", i);
    FZ_CHECK(r.endpoint && r.method && r.pattern, "route %zu: NULL strings", i);
    FZ_CHECK(r.max_attempts >= 1 && r.max_attempts <= 10, "%s: maxAttempts %d", r.endpoint, r.max_attempts);
    FZ_CHECK(r.per_attempt_timeout_ms >= 1 && r.per_attempt_timeout_ms <= 600000, "%s: perAttemptTimeoutMs %lld",
             r.endpoint, (long long)r.per_attempt_timeout_ms);
    FZ_CHECK(r.total_budget_ms >= r.per_attempt_timeout_ms && r.total_budget_ms <= 3600000, "%s: totalBudgetMs %lld",
             r.endpoint, (long long)r.total_budget_ms);
    FZ_CHECK(r.min_attempt_ms >= 0 && r.min_attempt_ms <= r.per_attempt_timeout_ms, "%s: minAttemptMs %lld", r.endpoint,
             (long long)r.min_attempt_ms);
    FZ_CHECK(r.backoff_base_ms >= 0 && r.backoff_base_ms <= r.backoff_max_ms && r.backoff_max_ms <= 600000,
             "%s: backoff %lld..%lld", r.endpoint, (long long)r.backoff_base_ms, (long long)r.backoff_max_ms);
    FZ_CHECK(r.backoff_multiplier_milli >= 1000 && r.backoff_multiplier_milli <= 10000, "%s: multiplier %lld",
             r.endpoint, (long long)r.backoff_multiplier_milli);
    FZ_CHECK(r.retry_after_max_ms >= 0 && r.retry_after_max_ms <= 3600000, "%s: retryAfter.maxMs %lld", r.endpoint,
             (long long)r.retry_after_max_ms);
    FZ_CHECK((unsigned)r.backoff_jitter < RF_JITTER_COUNT, "%s: jitter %d", r.endpoint, (int)r.backoff_jitter);
    for (size_t k = 0; k < r.n_retryable; k++)
        for (size_t m = 0; m < r.n_not_retryable; m++)
            FZ_CHECK(strcmp(r.retryable[k], r.not_retryable[m]) != 0, "%s: %s in both lists", r.endpoint,
                     r.retryable[k]);
    /* A literal pattern, sent as a path, is routed to its own route (the most specific match). */
    if (strchr(r.pattern, '{') == NULL && strchr(r.pattern, '*') == NULL) {
        long m = rf_policy_match(p, r.method, strlen(r.method), r.pattern, strlen(r.pattern));
        FZ_CHECK(m == (long)i, "%s: its own path is routed to %ld, not %zu", r.endpoint, m, i);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rf_policy *p = NULL;
    rf_error err;
    memset(&err, 0, sizeof err);
    rf_status st = rf_policy_load_buffer((const char *)data, size, &p, &err);
    if (st != RF_OK) {
        FZ_CHECK(st == RF_EINVAL, "status %d for a refused lock (%s: %s)", (int)st, err.path, err.message);
        FZ_CHECK(p == NULL, "a refused lock set *out");
        check_error(&err);
        return 0;
    }
    FZ_CHECK(p != NULL, "RF_OK without a policy");
    check_digest(rf_policy_digest(p));
    size_t n = rf_policy_route_count(p);
    FZ_CHECK(n >= 1, "a policy without routes");
    for (size_t i = 0; i < n; i++) check_route(p, i);
    rf_route_view past;
    FZ_CHECK(rf_policy_route(p, n, &past) == RF_EINVAL, "route %zu of %zu has a view", n, n);
    check_reload(p, rf_policy_canonical_json(p), "canonical");
    check_reload(p, rf_policy_pretty_json(p), "indented");
    rf_policy_free(p);
    return 0;
}
