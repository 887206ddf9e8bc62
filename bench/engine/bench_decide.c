/*
 * rf_decide, and rf_decide_on_route (the matched-route path: each fact's route matched once, as the client does per
 * request), on a mix of statuses, methods and Retry-After forms, against the hand-written C port of the seed's
 * classifier (bench/engine/seed_classifier.h, which does far less) on the same facts, in the same run; and the
 * HTTP-date parse per format. Prints one line per measurement and "ratio:" lines for bench/run's summary.
 * Each measurement is the best of ROUNDS rounds, the sides alternating: on a shared machine the slowest rounds
 * measure the neighbours.
 * Usage: bench_decide LOCK [iterations per round]
 *        bench_decide --calls decide|on_route|seed N LOCK   N calls of one side, nothing timed:
 *        bench/engine/c_instructions.sh runs it under callgrind at two N and divides the difference (instructions
 *        per call, repeatable on a busy machine where nanoseconds are not).
 */
#define _POSIX_C_SOURCE 200809L
#include "../lib/bench_util.h"
#include "retryfreeze/decide.h"
#include "seed_classifier.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_FACTS 8
#define ROUNDS 25
/* rf_decide does far more than the port (route matching, deadline, per-try timeout, Retry-After, budget, keys):
 * this bounds what all of it may cost. */
#define TARGET_RATIO 5.0

static rf_facts facts[N_FACTS];

static void make_facts(void) {
    struct {
        const char *method;
        int status;
        rf_transport t;
        const char *ra;
        int attempts;
        int key;
    } mix[N_FACTS] = {
        {"POST", 504, RF_TRANSPORT_OK, NULL, 1, 1},
        {"POST", 500, RF_TRANSPORT_OK, NULL, 1, 1},
        {"POST", 429, RF_TRANSPORT_OK, "1", 1, 1},
        {"POST", 429, RF_TRANSPORT_OK, "Sun, 06 Nov 1994 08:49:38 GMT", 1, 1},
        {"POST", 0, RF_TRANSPORT_TIMEOUT, NULL, 1, 0},
        {"POST", 200, RF_TRANSPORT_OK, NULL, 1, 1},
        {"GET", 503, RF_TRANSPORT_OK, NULL, 1, 0},
        {"POST", 504, RF_TRANSPORT_OK, NULL, 2, 1},
    };
    for (int i = 0; i < N_FACTS; i++) {
        facts[i] = (rf_facts){.method = mix[i].method,
                              .method_len = strlen(mix[i].method),
                              .path = "/v1/jobs",
                              .path_len = 8,
                              .status = mix[i].status,
                              .transport = mix[i].t,
                              .retry_after = mix[i].ra,
                              .retry_after_len = mix[i].ra ? strlen(mix[i].ra) : 0,
                              .date = "Sun, 06 Nov 1994 08:49:37 GMT",
                              .date_len = 29,
                              .attempts = mix[i].attempts,
                              .elapsed_ms = 100,
                              .has_idempotency_key = mix[i].key,
                              .now_ms = 784111777000};
    }
}

static long sink;

static void run_decide(const rf_policy *p, rf_rng *rng, long iters) {
    rf_verdict v;
    rf_error err;
    for (long i = 0; i < iters; i++) {
        rf_decide(p, &facts[i % N_FACTS], rng, NULL, &v, &err);
        sink += v.delay_ms;
    }
}

/* The matched-route path: rf_decide_on_route with the route rf_policy_match gave for each fact, once. */
static void run_on_route(const rf_policy *p, rf_rng *rng, long iters) {
    long route[N_FACTS];
    for (int i = 0; i < N_FACTS; i++)
        route[i] = rf_policy_match(p, facts[i].method, facts[i].method_len, facts[i].path, facts[i].path_len);
    rf_verdict v;
    rf_error err;
    for (long i = 0; i < iters; i++) {
        rf_decide_on_route(p, route[i % N_FACTS], &facts[i % N_FACTS], rng, NULL, &v, &err);
        sink += v.delay_ms;
    }
}

static void run_seed(seed_classifier *c, long iters) {
    seed_verdict v;
    for (long i = 0; i < iters; i++) {
        seed_decide(c, &facts[i % N_FACTS], &v);
        sink += v.delay_ms;
        __asm__ volatile("" : : "r"(&v) : "memory");
    }
}

static rf_policy *load(const char *path) {
    rf_policy *p = NULL;
    rf_error err;
    if (rf_policy_load_file(path, &p, &err) != RF_OK) {
        fprintf(stderr, "%s: %s: %s\n", path, err.path, err.message);
        exit(2);
    }
    return p;
}

/* What every measurement starts from: the lock at path, the facts mix, *rng seeded with 1, and *c the seed's
 * classifier for the lock's first route. */
static rf_policy *set_up(const char *path, rf_rng *rng, seed_classifier *c) {
    rf_policy *p = load(path);
    make_facts();
    rf_rng_seed(rng, 1);
    rf_route_view route;
    rf_policy_route(p, 0, &route);
    seed_for_route(c, &route, 1);
    return p;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "--calls") == 0) {
        long n = bench_positive("bench_decide", argv[3], "N");
        rf_rng rng;
        seed_classifier c;
        rf_policy *p = set_up(argv[4], &rng, &c);
        if (strcmp(argv[2], "decide") == 0) {
            run_decide(p, &rng, n);
        } else if (strcmp(argv[2], "on_route") == 0) {
            run_on_route(p, &rng, n);
        } else if (strcmp(argv[2], "seed") == 0) {
            run_seed(&c, n);
        } else {
            fprintf(stderr, "bench_decide: --calls takes decide, on_route or seed, got \"%s\"\n", argv[2]);
            return 2;
        }
        rf_policy_free(p);
        return sink == 42;
    }
    if (argc < 2 || argc > 3 || argv[1][0] == '-') {
        fprintf(stderr,
                "usage: bench_decide LOCK [iterations]\n       bench_decide --calls decide|on_route|seed N LOCK\n");
        return 2;
    }
    long iters = argc > 2 ? bench_positive("bench_decide", argv[2], "iterations") : 200000;
    rf_rng rng;
    seed_classifier c;
    rf_policy *p = set_up(argv[1], &rng, &c);
    double seed = 1e300, decide = 1e300, on_route = 1e300, t0;
    for (int round = 0; round < ROUNDS; round++) {
        t0 = bench_now_ns();
        run_seed(&c, iters);
        double s = (bench_now_ns() - t0) / (double)iters;
        if (s < seed) seed = s;
        t0 = bench_now_ns();
        run_decide(p, &rng, iters);
        double d = (bench_now_ns() - t0) / (double)iters;
        if (d < decide) decide = d;
        t0 = bench_now_ns();
        run_on_route(p, &rng, iters);
        double o = (bench_now_ns() - t0) / (double)iters;
        if (o < on_route) on_route = o;
    }
    static const char *dates[] = {"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
                                  "Sun Nov  6 08:49:37 1994"};
    double per_format[3];
    for (int d = 0; d < 3; d++) {
        size_t len = strlen(dates[d]);
        int64_t epoch = 0;
        per_format[d] = 1e300;
        for (int round = 0; round < ROUNDS; round++) {
            t0 = bench_now_ns();
            for (long i = 0; i < iters; i++) {
                rf_http_date_parse(dates[d], len, 784111777000, &epoch);
                sink += epoch;
                __asm__ volatile("" : : "r"(&epoch) : "memory");
            }
            double t = (bench_now_ns() - t0) / (double)iters;
            if (t < per_format[d]) per_format[d] = t;
        }
    }
    printf("rf_decide            %7.1f ns/decision   (best of %d rounds of %ld iterations, %d-fact mix)\n", decide,
           ROUNDS, iters, N_FACTS);
    printf("rf_decide_on_route   %7.1f ns/decision   (the matched-route path: each fact's route matched once)\n",
           on_route);
    printf("C port of the seed   %7.1f ns/decision   (bench/engine/seed_classifier.h: classify, class sets, backoff)\n",
           seed);
    printf("http-date IMF-fixdate %6.1f ns/parse\n", per_format[0]);
    printf("http-date RFC 850    %7.1f ns/parse\n", per_format[1]);
    printf("http-date asctime    %7.1f ns/parse\n", per_format[2]);
    double r = on_route / seed;
    printf("ratio: rf_decide_on_route (the matched-route path) over the C port of the seed's classifier, time: %.2fx "
           "(target <= %gx) %s\n",
           r, TARGET_RATIO, r <= TARGET_RATIO ? "met" : "NOT MET");
    r = decide / seed;
    printf("ratio: rf_decide (matching included) over the C port of the seed's classifier, time: %.2fx (target <= %gx) "
           "%s\n",
           r, TARGET_RATIO, r <= TARGET_RATIO ? "met" : "NOT MET");
    if (sink == 42) puts("");
    rf_policy_free(p);
    return 0;
}
