/*
 * The baseline for `retryfreeze soak`: a plain libcurl multi loop sending the same requests (GET
 * /v1/jobs/<i>, i = 1..N) with the same concurrency, no policy, no ledger. Prints requests per second and CPU
 * microseconds per request (getrusage), for bench/bench_soak.sh to compare with soak in the same run.
 * Usage: bench_multi BASE_URL REQUESTS CONCURRENCY
 */
#define _POSIX_C_SOURCE 200809L
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static size_t discard(char *p, size_t size, size_t n, void *ud) {
    (void)p;
    (void)ud;
    return size * n;
}

static double cpu_seconds(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec / 1e6;
}

static double wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void start(CURLM *multi, CURL *easy, const char *base, long i) {
    char url[512];
    snprintf(url, sizeof url, "%s/v1/jobs/%ld", base, i);
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 5000L);
    curl_multi_add_handle(multi, easy);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: bench_multi BASE_URL REQUESTS CONCURRENCY\n");
        return 2;
    }
    long n = atol(argv[2]), conc = atol(argv[3]), next = 1, done = 0, failed = 0;
    if (n < 1 || conc < 1 || conc > 4096) return 2;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *multi = curl_multi_init();
    CURL **easy = calloc((size_t)conc, sizeof *easy);
    double cpu0 = cpu_seconds(), wall0 = wall_seconds();
    for (long k = 0; k < conc && next <= n; k++) {
        easy[k] = curl_easy_init();
        curl_easy_setopt(easy[k], CURLOPT_PRIVATE, (void *)k);
        start(multi, easy[k], argv[1], next++);
    }
    while (done < n) {
        int running = 0, left = 0;
        curl_multi_perform(multi, &running);
        CURLMsg *msg;
        while ((msg = curl_multi_info_read(multi, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE) continue;
            if (msg->data.result != CURLE_OK) failed++;
            done++;
            curl_multi_remove_handle(multi, msg->easy_handle);
            if (next <= n) start(multi, msg->easy_handle, argv[1], next++); /* reuse the handle: keep-alive */
        }
        if (done < n) curl_multi_poll(multi, NULL, 0, 100, NULL);
    }
    double cpu = cpu_seconds() - cpu0, wall = wall_seconds() - wall0;
    printf("plain libcurl multi: %ld requests (%ld failed), concurrency %ld: %.0f req/s, %.1f us CPU/request\n", n,
           failed, conc, (double)n / wall, 1e6 * cpu / (double)n);
    for (long k = 0; k < conc; k++)
        if (easy[k]) curl_easy_cleanup(easy[k]);
    free(easy);
    curl_multi_cleanup(multi);
    curl_global_cleanup();
    return failed ? 1 : 0;
}
