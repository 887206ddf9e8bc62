/*
 * ns per rf_decide (a mix of statuses, methods and Retry-After forms) and per HTTP-date parse, against a
 * baseline loop in the same run that only walks the same facts. Prints one line per measurement and a
 * "ratio:" line for bench/run's summary (issue 17's target: the mix at <= 30 ns per decision).
 * Each measurement is the best of ROUNDS rounds: on a shared machine the slowest rounds measure the neighbours.
 * Usage: bench_decide LOCK [iterations per round]
 */
#define _POSIX_C_SOURCE 200809L
#include "retryfreeze/decide.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

#define N_FACTS 8
#define ROUNDS 25
#define TARGET_NS 30.0

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_decide LOCK [iterations]\n");
        return 2;
    }
    long iters = argc > 2 ? atol(argv[2]) : 200000;
    if (iters < 1) {
        fprintf(stderr, "bench_decide: iterations must be a positive number, got \"%s\"\n", argv[2]);
        return 2;
    }
    rf_policy *p = NULL;
    rf_error err;
    if (rf_policy_load_file(argv[1], &p, &err) != RF_OK) {
        fprintf(stderr, "%s: %s: %s\n", argv[1], err.path, err.message);
        return 2;
    }
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
    rf_facts facts[N_FACTS];
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
    rf_rng rng;
    rf_rng_seed(&rng, 1);
    rf_verdict v;
    long sink = 0;
    double base = 1e300, decide = 1e300, t0;
    for (int round = 0; round < ROUNDS; round++) {
        /* Baseline: the same loop, touching the facts and writing a verdict-sized struct, without deciding. */
        t0 = now_ns();
        for (long i = 0; i < iters; i++) {
            const rf_facts *f = &facts[i % N_FACTS];
            memset(&v, 0, sizeof v);
            v.delay_ms = f->status + f->attempts;
            sink += v.delay_ms;
            __asm__ volatile("" : : "r"(&v) : "memory");
        }
        double b = (now_ns() - t0) / (double)iters;
        if (b < base) base = b;
        t0 = now_ns();
        for (long i = 0; i < iters; i++) {
            rf_decide(p, &facts[i % N_FACTS], &rng, NULL, &v, &err);
            sink += v.delay_ms;
        }
        double d = (now_ns() - t0) / (double)iters;
        if (d < decide) decide = d;
    }
    static const char *dates[] = {"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
                                  "Sun Nov  6 08:49:37 1994"};
    double per_format[3];
    for (int d = 0; d < 3; d++) {
        size_t len = strlen(dates[d]);
        int64_t epoch = 0;
        per_format[d] = 1e300;
        for (int round = 0; round < ROUNDS; round++) {
            t0 = now_ns();
            for (long i = 0; i < iters; i++) {
                rf_http_date_parse(dates[d], len, 784111777000, &epoch);
                sink += epoch;
                __asm__ volatile("" : : "r"(&epoch) : "memory");
            }
            double t = (now_ns() - t0) / (double)iters;
            if (t < per_format[d]) per_format[d] = t;
        }
    }
    printf("rf_decide            %7.1f ns/decision   (baseline loop %.1f ns; best of %d rounds of %ld iterations, "
           "%d-fact mix)\n",
           decide, base, ROUNDS, iters, N_FACTS);
    printf("http-date IMF-fixdate %6.1f ns/parse\n", per_format[0]);
    printf("http-date RFC 850    %7.1f ns/parse\n", per_format[1]);
    printf("http-date asctime    %7.1f ns/parse\n", per_format[2]);
    printf("ratio: rf_decide on the bench mix: %.1f ns (target <= %.0f ns) %s\n", decide, TARGET_NS,
           decide <= TARGET_NS ? "met" : "NOT MET");
    if (sink == 42) puts("");
    rf_policy_free(p);
    return 0;
}
