/*
 * What a shared retry budget adds to a decision: rf_decide with the budget in Redis (one EVALSHA round
 * trip on loopback) against the same decision with the process's own budget, in the same run; and, given a
 * rediss:// URL of the same server's TLS port and its CA file, the same decisions over TLS.
 * usage: bench_budget_redis redis://127.0.0.1:PORT/0 [DECISIONS [rediss://127.0.0.1:TLS_PORT/0 CA_FILE]]
 * (bench/run starts the redis-server, with both ports). Prints p50 and p99 per decision in µs for each, the
 * added latency, and a "ratio:" line for bench/run's summary: TLS against plain, p50.
 */
#define _POSIX_C_SOURCE 200809L
#include "retryfreeze/retry_budget_redis.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char LOCK[] =
    "{\"endpoint\":\"GET /v1/jobs\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,"
    "\"retryable\":[\"HTTP_503\"],\"backoff\":{\"baseMs\":10,\"maxMs\":100,\"jitter\":\"none\"},"
    "\"retryBudget\":{\"maxTokens\":100,\"tokenRatio\":1,\"shared\":{\"name\":\"bench\"}}}";

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Alternating failures and successes keep the bucket away from its bounds; returns the fallbacks seen. */
static long run(const rf_policy *p, rf_retry_budget *b, int64_t *ns, int n) {
    long fallback = 0;
    for (int i = 0; i < n; i++) {
        rf_facts f = {.method = "GET",
                      .method_len = 3,
                      .path = "/v1/jobs",
                      .path_len = 8,
                      .status = i % 2 ? 200 : 503,
                      .transport = RF_TRANSPORT_OK,
                      .attempts = 1};
        rf_verdict v;
        rf_error err;
        int64_t t0 = now_ns();
        if (rf_decide(p, &f, NULL, b, &v, &err) != RF_OK) return -1;
        ns[i] = now_ns() - t0;
        if (v.budget == RF_BUDGET_LOCAL_FALLBACK) fallback++;
    }
    qsort(ns, (size_t)n, sizeof *ns, cmp);
    return fallback;
}

/* A TLS decision may cost this much more than a plain one (p50): the records' encryption and MAC on a few dozen
 * bytes each way, against a loopback round trip. */
#define TLS_TARGET_RATIO 2.0

int main(int argc, char **argv) {
    if (argc != 2 && argc != 3 && argc != 5) {
        fprintf(
            stderr,
            "usage: bench_budget_redis redis://127.0.0.1:PORT/0 [DECISIONS [rediss://127.0.0.1:TLS_PORT/0 CA_FILE]]\n");
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 20000;
    if (n < 100) n = 100;
    rf_policy *p = NULL;
    rf_error err;
    if (rf_policy_load_buffer(LOCK, strlen(LOCK), &p, &err) != RF_OK) return 1;
    rf_retry_budget *local = rf_retry_budget_new(p), *shared = NULL, *tls = NULL;
    rf_redis_budget_options o = {.url = argv[1], .timeout_ms = 1000};
    rf_redis_budget_options ot = {
        .url = argc == 5 ? argv[3] : NULL, .ca_file = argc == 5 ? argv[4] : NULL, .timeout_ms = 1000};
    if (local == NULL || rf_retry_budget_redis_new(p, &o, &shared, &err) != RF_OK ||
        (argc == 5 && rf_retry_budget_redis_new(p, &ot, &tls, &err) != RF_OK)) {
        fprintf(stderr, "bench_budget_redis: %s %s\n", err.path, err.message);
        return 1;
    }
    int64_t *a = malloc(sizeof *a * (size_t)n), *b = malloc(sizeof *b * (size_t)n), *c = malloc(sizeof *c * (size_t)n);
    if (a == NULL || b == NULL || c == NULL) return 1;
    run(p, shared, b, 100); /* connect (and handshake) and load the script outside the measurement */
    if (tls) run(p, tls, c, 100);
    run(p, local, a, n);
    /* Plain and TLS in alternating rounds, so that a change in the machine's load falls on both alike. */
    long fallback = 0;
    int rounds = tls ? 10 : 1, per = n / rounds;
    for (int r = 0; r < rounds; r++) {
        fallback += run(p, shared, b + r * per, per);
        if (tls) fallback += run(p, tls, c + r * per, per);
    }
    int m = per * rounds;
    qsort(b, (size_t)m, sizeof *b, cmp);
    if (tls) qsort(c, (size_t)m, sizeof *c, cmp);
    double l50 = (double)a[n / 2] / 1000.0, l99 = (double)a[n * 99 / 100] / 1000.0;
    double s50 = (double)b[m / 2] / 1000.0, s99 = (double)b[m * 99 / 100] / 1000.0;
    printf("retry budget per decision (%d decisions): local p50 %.2f us p99 %.2f us; shared in Redis (loopback) "
           "p50 %.1f us p99 %.1f us; added p50 %.1f us p99 %.1f us; fallbacks %ld\n",
           n, l50, l99, s50, s99, s50 - l50, s99 - l99, fallback);
    if (tls) {
        double t50 = (double)c[m / 2] / 1000.0, t99 = (double)c[m * 99 / 100] / 1000.0, ratio = t50 / s50;
        printf("shared retry budget over TLS (rediss://, the same server, %d decisions alternating with plain): "
               "p50 %.1f us p99 %.1f us; plain p50 %.1f us p99 %.1f us\n",
               m, t50, t99, s50, s99);
        printf("ratio: shared budget decision over TLS vs plain Redis (p50): %.2fx (target <= %.0fx) %s\n", ratio,
               TLS_TARGET_RATIO, ratio <= TLS_TARGET_RATIO ? "met" : "NOT MET");
    }
    free(a);
    free(b);
    free(c);
    rf_retry_budget_free(local);
    rf_retry_budget_free(shared);
    rf_retry_budget_free(tls);
    rf_policy_free(p);
    return fallback == 0 ? 0 : 1;
}
