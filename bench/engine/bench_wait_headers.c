/*
 * ns per wait header parse (rf_wait_header_parse, one value per header) as a ratio to Retry-After
 * delay-seconds in the same run, and ns per rf_decide on a route that reads all seven wait headers with only
 * the last one present (the worst walk of retryAfter.headers) as a ratio to the default route reading
 * Retry-After alone. Prints one line per measurement. Usage: bench_wait_headers [iterations]
 */
#define _POSIX_C_SOURCE 200809L
#include "../lib/bench_util.h"
#include "retryfreeze/decide.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const VALUES[RF_WAIT_HEADER_COUNT] = {
    "120", "250", "250", "50", "\"burst\";r=0;t=5, \"daily\";r=10;t=3600", "1700000060", "80",
};

static rf_policy *load(const char *text) {
    rf_policy *p = NULL;
    rf_error err;
    if (rf_policy_load_buffer(text, strlen(text), &p, &err) != RF_OK) {
        fprintf(stderr, "%s: %s\n", err.path, err.message);
        exit(2);
    }
    return p;
}

static double decide_ns(const rf_policy *p, const rf_facts *f, long iters, long *sink) {
    rf_verdict v;
    rf_error err;
    double t0 = bench_now_ns();
    for (long i = 0; i < iters; i++) {
        rf_decide(p, f, NULL, NULL, &v, &err);
        *sink += v.delay_ms;
    }
    return (bench_now_ns() - t0) / (double)iters;
}

int main(int argc, char **argv) {
    long iters = argc > 1 ? atol(argv[1]) : 2000000;
    long sink = 0;
    double ns[RF_WAIT_HEADER_COUNT];
    for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) {
        size_t len = strlen(VALUES[h]);
        int64_t ms = 0;
        double t0 = bench_now_ns();
        for (long i = 0; i < iters; i++) {
            rf_wait_header_parse((rf_wait_header)h, VALUES[h], len, INT64_C(1700000000000), NULL, 0, &ms);
            sink += ms;
            __asm__ volatile("" : : "r"(&ms) : "memory");
        }
        ns[h] = (bench_now_ns() - t0) / (double)iters;
    }
    for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++)
        printf("parse %-23s %6.1f ns  (%.2f x retry-after delay-seconds)  \"%s\"\n", rf_wait_header_name(h), ns[h],
               ns[h] / ns[RF_WAIT_RETRY_AFTER], VALUES[h]);

#define ROUTE                                                                                         \
    "\"endpoint\":\"GET /x\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":60000," \
    "\"retryable\":[\"HTTP_429\"],\"backoff\":{\"baseMs\":100,\"multiplier\":2,\"maxMs\":1000,\"jitter\":\"none\"}"
    rf_policy *plain = load("{" ROUTE "}");
    rf_policy *all = load("{" ROUTE ",\"retryAfter\":{\"headers\":[\"grpc-retry-pushback-ms\",\"retry-after-ms\","
                          "\"x-ms-retry-after-ms\",\"ratelimit\",\"ratelimit-reset\",\"x-ratelimit-reset\","
                          "\"retry-after\"]}}");
    rf_facts f = {.method = "GET",
                  .method_len = 3,
                  .path = "/x",
                  .path_len = 2,
                  .status = 429,
                  .attempts = 1,
                  .now_ms = INT64_C(1700000000000)};
    f.hints[RF_WAIT_RETRY_AFTER] = "1";
    f.hint_lens[RF_WAIT_RETRY_AFTER] = 1;
    double base = decide_ns(plain, &f, iters, &sink);
    double seven = decide_ns(all, &f, iters, &sink);
    printf("rf_decide, 7 headers listed, the last present %6.1f ns  (%.2f x the default route, %.1f ns)\n", seven,
           seven / base, base);
    if (sink == 42) puts("");
    rf_policy_free(plain);
    rf_policy_free(all);
    return 0;
}
