/*
 * Route matching as locks grow: rf_decide on generated locks of 4 to 10 000 routes, against the same decisions on a
 * lock of 4 routes in the same run; and the time to load a lock of 10 000 routes (a note: its linear growth is
 * counted in instructions by bench/engine/c_instructions.sh).
 * A lock of N routes has N / 8 services of the 8 shapes a service lock has (literals, {param}s, a last "*",
 * 4 methods); the decisions are the same 8 requests (a literal, a {param}, a "*", a query, no route, …) of one
 * service in the middle of the lock. Each figure is the best of its rounds (on a shared machine the slowest rounds
 * measure the neighbours). Prints a table and "ratio:" lines for bench/run's summary.
 * Usage: bench_routes [iterations per round]
 *        bench_routes --calls N ROUTES   N decisions on a lock of ROUTES routes, nothing timed:
 *        bench/engine/c_instructions.sh runs it under callgrind at two N and divides the difference.
 */
#define _POSIX_C_SOURCE 200809L
#include "../lib/bench_util.h"
#include "retryfreeze/decide.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 15
#define N_FACTS 8
#define TARGET_MATCH 1.5 /* 1 000 routes cost at most 1.5x what 4 routes cost */

static const char *const shapes[] = {"GET /v1/svc%d/items",
                                     "GET /v1/svc%d/items/{id}",
                                     "POST /v1/svc%d/items",
                                     "GET /v1/svc%d/*",
                                     "PUT /v1/svc%d/items/{id}",
                                     "DELETE /v1/svc%d/items/{id}",
                                     "GET /v1/svc%d/items/{id}/events",
                                     "GET /v2/svc%d/{kind}/{id}/*"};
#define N_SHAPES 8

/* The text of a lock of n routes (the caller frees it). */
static char *lock_text(int n) {
    size_t cap = 256 + (size_t)n * 64, len = 0;
    char *s = malloc(cap);
    if (s == NULL) bench_die("bench_routes", "out of memory", NULL);
    len += (size_t)snprintf(s + len, cap - len,
                            "{\"version\":1,\"defaults\":{\"maxAttempts\":3,\"perAttemptTimeoutMs\":500,"
                            "\"totalBudgetMs\":2000,\"retryable\":[\"HTTP_503\",\"TIMEOUT\"],"
                            "\"idempotencyRequired\":[\"POST\",\"PUT\",\"DELETE\"]},\"routes\":[");
    for (int k = 0; k < n; k++) {
        char endpoint[96];
        snprintf(endpoint, sizeof endpoint, shapes[k % N_SHAPES], k / N_SHAPES + 1);
        len += (size_t)snprintf(s + len, cap - len, "%s{\"endpoint\":\"%s\"}", k ? "," : "", endpoint);
    }
    snprintf(s + len, cap - len, "]}");
    return s;
}

static rf_policy *load_text(const char *text, int n) {
    rf_policy *p = NULL;
    rf_error err;
    if (rf_policy_load_buffer(text, strlen(text), &p, &err) != RF_OK) {
        fprintf(stderr, "bench_routes: a lock of %d routes: %s: %s\n", n, err.path, err.message);
        return NULL;
    }
    return p;
}

/* The same 8 requests of the service in the middle of a lock of n routes. */
typedef struct mix {
    char paths[N_FACTS][64];
    rf_facts facts[N_FACTS];
} mix;

static void make_mix(mix *m, int n) {
    int svc = (n / N_SHAPES) / 2 + 1;
    static const struct {
        const char *method, *path;
    } req[N_FACTS] = {{"GET", "/v1/svc%d/items"},    {"GET", "/v1/svc%d/items/42"},  {"POST", "/v1/svc%d/items"},
                      {"GET", "/v1/svc%d/other/7"},  {"GET", "/v1/svc%d/items?x=1"}, {"GET", "/v3/none"},
                      {"POST", "/v1/svc%d/items/9"}, {"GET", "/v1/svc%d/items/42/"}};
    for (int i = 0; i < N_FACTS; i++) {
        snprintf(m->paths[i], sizeof m->paths[i], req[i].path, svc);
        m->facts[i] = (rf_facts){.method = req[i].method,
                                 .method_len = strlen(req[i].method),
                                 .path = m->paths[i],
                                 .path_len = strlen(m->paths[i]),
                                 .status = 503,
                                 .transport = RF_TRANSPORT_OK,
                                 .attempts = 1,
                                 .elapsed_ms = 100,
                                 .has_idempotency_key = true};
    }
}

static long sink;

static void decide_loop(const rf_policy *p, const mix *m, rf_rng *rng, long iters) {
    rf_verdict v;
    rf_error err;
    for (long i = 0; i < iters; i++) {
        rf_decide(p, &m->facts[i % N_FACTS], rng, NULL, &v, &err);
        sink += v.route;
    }
}

/* The best of rounds load times of text, in ns. */
static double load_ns(const char *text, int n, int rounds) {
    double best = 1e300;
    for (int r = 0; r < rounds; r++) {
        double t0 = bench_now_ns();
        rf_policy *p = load_text(text, n);
        double t = bench_now_ns() - t0;
        if (p == NULL) return -1;
        rf_policy_free(p);
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    rf_rng rng;
    rf_rng_seed(&rng, 1);
    if (argc == 4 && strcmp(argv[1], "--calls") == 0) {
        long calls = bench_positive("bench_routes", argv[2], "N");
        int n = (int)bench_positive("bench_routes", argv[3], "ROUTES");
        char *text = lock_text(n);
        rf_policy *p = load_text(text, n);
        free(text);
        if (p == NULL) return 1;
        mix m;
        make_mix(&m, n);
        decide_loop(p, &m, &rng, calls);
        rf_policy_free(p);
        return sink == 42;
    }
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: bench_routes [iterations per round]\n       bench_routes --calls N ROUTES\n");
        return 2;
    }
    long iters = argc > 1 ? bench_positive("bench_routes", argv[1], "iterations per round") : 100000;
    static const int sizes[] = {4, 10, 100, 256, 1000, 10000};
    enum { N_SIZES = sizeof sizes / sizeof sizes[0] };
    rf_policy *p[N_SIZES] = {0};
    mix m[N_SIZES];
    double best[N_SIZES];
    for (int s = 0; s < N_SIZES; s++) {
        char *text = lock_text(sizes[s]);
        p[s] = load_text(text, sizes[s]);
        free(text);
        make_mix(&m[s], sizes[s]);
        best[s] = 1e300;
    }
    for (int round = 0; round < ROUNDS; round++) { /* the sizes alternate within each round */
        for (int s = 0; s < N_SIZES; s++) {
            if (p[s] == NULL) continue;
            double t0 = bench_now_ns();
            decide_loop(p[s], &m[s], &rng, iters);
            double t = (bench_now_ns() - t0) / (double)iters;
            if (t < best[s]) best[s] = t;
        }
    }
    printf("rf_decide by the number of routes (best of %d rounds of %ld decisions, %d requests):\n", ROUNDS, iters,
           N_FACTS);
    for (int s = 0; s < N_SIZES; s++) {
        if (p[s] == NULL)
            printf("  %6d routes: refused by the loader\n", sizes[s]);
        else
            printf("  %6d routes: %7.1f ns/decision (%.2fx 4 routes)\n", sizes[s], best[s], best[s] / best[0]);
    }
    char *t1k = lock_text(1000), *t10k = lock_text(10000);
    double l1k = load_ns(t1k, 1000, 5), l10k = load_ns(t10k, 10000, 3);
    free(t1k);
    free(t10k);
    if (l1k > 0 && l10k > 0) {
        printf("loading: 1 000 routes %.1f ms, 10 000 routes %.1f ms (load, validate, canonical form and digest)\n",
               l1k / 1e6, l10k / 1e6);
        /* Caches make time grow a little faster than the work past 1 000 routes: the linear-growth target is counted
         * in instructions (bench/engine/c_instructions.sh); the time is a note. */
        printf("note: a lock of 10 000 routes loads, validates and digests in %.0f ms (%.2fx ten times 1 000 routes)\n",
               l10k / 1e6, l10k / (10 * l1k));
    }
    if (p[0] != NULL && p[4] != NULL) {
        double r = best[4] / best[0];
        printf("ratio: rf_decide with 1 000 routes over 4 routes, time: %.2fx (target <= %gx) %s\n", r, TARGET_MATCH,
               r <= TARGET_MATCH ? "met" : "NOT MET");
    }
    for (int s = 0; s < N_SIZES; s++) rf_policy_free(p[s]);
    return sink == 42;
}
