/*
 * The baseline for `retryfreeze soak` and client:all (bench/bench_all.lua): a plain libcurl multi loop sending the
 * same requests with the same concurrency and keep-alive (each finished easy handle is reused for the next request;
 * connections stay in the multi's pool), no policy, no ledger. "The same requests" means the same bytes and the same
 * libcurl settings: GET /v1/jobs/<i>, i = 1..N, with the headers soak's client sends (User-Agent "retryfreeze/<version>
 * libcurl/<version>"; with KEY_PREFIX, "Idempotency-Key: <KEY_PREFIX>-<i>"), a 5 s per-request timeout and
 * CURLOPT_NOSIGNAL (without it libcurl swaps the SIGPIPE handler around every call: about 5 rt_sigaction calls
 * per request that soak does not make). Prints requests per second and CPU microseconds per request of the loop
 * (getrusage); bench/bench_soak.sh times the whole process.
 * Usage: bench_multi BASE_URL REQUESTS CONCURRENCY [KEY_PREFIX [USER_AGENT]]
 */
#define _POSIX_C_SOURCE 200809L
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "bench_util.h"

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

typedef struct slot {
    CURL *easy;
    struct curl_slist *headers; /* this request's Idempotency-Key line (libcurl reads the list during the transfer) */
} slot;

static const char *key_prefix, *user_agent;

static void start(CURLM *multi, slot *s, const char *base, long i) {
    char url[512], key[512];
    snprintf(url, sizeof url, "%s/v1/jobs/%ld", base, i);
    curl_easy_setopt(s->easy, CURLOPT_URL, url);
    curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(s->easy, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(s->easy, CURLOPT_NOSIGNAL, 1L); /* as soak's client: no SIGPIPE handler swapped per call */
    if (user_agent) curl_easy_setopt(s->easy, CURLOPT_USERAGENT, user_agent);
    curl_slist_free_all(s->headers);
    s->headers = NULL;
    if (key_prefix) {
        snprintf(key, sizeof key, "Idempotency-Key: %s-%ld", key_prefix, i);
        s->headers = curl_slist_append(NULL, key);
    }
    curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, s->headers);
    curl_multi_add_handle(multi, s->easy);
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: bench_multi BASE_URL REQUESTS CONCURRENCY [KEY_PREFIX [USER_AGENT]]\n");
        return 2;
    }
    key_prefix = argc > 4 && argv[4][0] ? argv[4] : NULL;
    user_agent = argc > 5 ? argv[5] : NULL;
    long n = atol(argv[2]), conc = atol(argv[3]), next = 1, done = 0, failed = 0;
    if (n < 1 || conc < 1 || conc > 4096) return 2;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *multi = curl_multi_init();
    slot *slots = calloc((size_t)conc, sizeof *slots);
    double cpu0 = cpu_seconds(), wall0 = bench_now_s();
    for (long k = 0; k < conc && next <= n; k++) {
        slots[k].easy = curl_easy_init();
        curl_easy_setopt(slots[k].easy, CURLOPT_PRIVATE, (void *)&slots[k]);
        start(multi, &slots[k], argv[1], next++);
    }
    while (done < n) {
        int running = 0, left = 0;
        curl_multi_perform(multi, &running);
        CURLMsg *msg;
        while ((msg = curl_multi_info_read(multi, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE) continue;
            if (msg->data.result != CURLE_OK) failed++;
            done++;
            CURL *easy = msg->easy_handle;
            slot *s = NULL;
            curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&s);
            curl_multi_remove_handle(multi, easy);
            if (next <= n) start(multi, s, argv[1], next++); /* reuse the handle: keep-alive */
        }
        if (done < n) curl_multi_poll(multi, NULL, 0, 100, NULL);
    }
    double cpu = cpu_seconds() - cpu0, wall = bench_now_s() - wall0;
    printf("plain libcurl multi: %ld requests (%ld failed), concurrency %ld: %.0f req/s, %.1f us CPU/request\n", n,
           failed, conc, (double)n / wall, 1e6 * cpu / (double)n);
    for (long k = 0; k < conc; k++) {
        if (slots[k].easy) curl_easy_cleanup(slots[k].easy);
        curl_slist_free_all(slots[k].headers);
    }
    free(slots);
    curl_multi_cleanup(multi);
    curl_global_cleanup();
    return failed ? 1 : 0;
}
