/*
 * The plain libcurl multi loop that bench_multi (soak's baseline) and the rf_bench_multi Lua module (client:all's
 * baseline, bench/client/bench_all.lua) run: N requests GET BASE/v1/jobs/<i>, i = 1..N, at most CONC in flight,
 * keep-alive (each finished easy handle is reused for the next request; connections stay in the multi's pool), a 5 s
 * per-request timeout, CURLOPT_NOSIGNAL (without it libcurl swaps the SIGPIPE handler around every call), the given
 * User-Agent and, with a key prefix, "Idempotency-Key: <prefix>-<i>". No policy, no ledger.
 * With keep, every response's status, header block and body are kept (each in a buffer of its own, grown by
 * doubling from 256 bytes, as the client's are) until the loop ends, as a client that hands its caller every
 * response must; without, the body is discarded as it arrives and no header callback runs (soak reads no response).
 * Header-only: static functions.
 */
#ifndef RETRYFREEZE_BENCH_MULTI_LOOP_H
#define RETRYFREEZE_BENCH_MULTI_LOOP_H

#define _POSIX_C_SOURCE 200809L
#include <curl/curl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

typedef struct bench_multi_opts {
    const char *base;       /* the upstream's base URL, no trailing slash */
    long n, conc;           /* requests (>= 1) and most in flight (1..4096) */
    const char *key_prefix; /* NULL: no Idempotency-Key */
    const char *user_agent; /* NULL: libcurl sends none */
    bool keep;              /* keep every response's status, header block and body until the loop ends */
} bench_multi_opts;

typedef struct bench_multi_result {
    long failed;  /* transfers that did not end with CURLE_OK */
    double cpu_s; /* CPU (user + system, getrusage) of the loop, from the first request's set-up to the last's end */
    double wall_s;
} bench_multi_result;

/* The CPU seconds (user + system) the process has used so far. */
static inline double bench_cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec / 1e6;
}

typedef struct bench_buf {
    char *data;
    size_t len, cap;
} bench_buf;

/* A kept response. */
typedef struct bench_response {
    long status;
    bench_buf head, body;
} bench_response;

static size_t bench_buf_write(char *p, size_t size, size_t n, void *ud) {
    bench_buf *b = ud;
    size_t len = size * n;
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len + 1) cap *= 2;
        char *q = realloc(b->data, cap);
        if (q == NULL) return 0; /* aborts the transfer: counted as failed */
        b->data = q;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, len);
    b->len += len;
    b->data[b->len] = '\0';
    return len;
}

static size_t bench_discard(char *p, size_t size, size_t n, void *ud) {
    (void)p;
    (void)ud;
    return size * n;
}

typedef struct bench_slot {
    CURL *easy;
    long i;                     /* the request it carries (1..n) */
    struct curl_slist *headers; /* this request's Idempotency-Key line (libcurl reads the list during the transfer) */
} bench_slot;

static void bench_multi_start(CURLM *multi, bench_slot *s, const bench_multi_opts *o, bench_response *kept, long i) {
    char url[512], key[512];
    snprintf(url, sizeof url, "%s/v1/jobs/%ld", o->base, i);
    s->i = i;
    curl_easy_setopt(s->easy, CURLOPT_URL, url);
    if (kept != NULL) {
        curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, bench_buf_write);
        curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, (void *)&kept[i - 1].body);
        curl_easy_setopt(s->easy, CURLOPT_HEADERFUNCTION, bench_buf_write);
        curl_easy_setopt(s->easy, CURLOPT_HEADERDATA, (void *)&kept[i - 1].head);
    } else {
        curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, bench_discard);
    }
    curl_easy_setopt(s->easy, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(s->easy, CURLOPT_NOSIGNAL, 1L);
    if (o->user_agent) curl_easy_setopt(s->easy, CURLOPT_USERAGENT, o->user_agent);
    curl_slist_free_all(s->headers);
    s->headers = NULL;
    if (o->key_prefix) {
        snprintf(key, sizeof key, "Idempotency-Key: %s-%ld", o->key_prefix, i);
        s->headers = curl_slist_append(NULL, key);
    }
    curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, s->headers);
    curl_multi_add_handle(multi, s->easy);
}

/* Runs the loop on a new multi (cold connections). False when memory for its slots runs out. */
static bool bench_multi_run(const bench_multi_opts *o, bench_multi_result *r) {
    long next = 1, done = 0;
    memset(r, 0, sizeof *r);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *multi = curl_multi_init();
    bench_slot *slots = calloc((size_t)o->conc, sizeof *slots);
    bench_response *kept = o->keep ? calloc((size_t)o->n, sizeof *kept) : NULL;
    if (multi == NULL || slots == NULL || (o->keep && kept == NULL)) {
        free(slots);
        free(kept);
        curl_multi_cleanup(multi);
        curl_global_cleanup();
        return false;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    double cpu0 = bench_cpu_s();
    for (long k = 0; k < o->conc && next <= o->n; k++) {
        slots[k].easy = curl_easy_init();
        curl_easy_setopt(slots[k].easy, CURLOPT_PRIVATE, (void *)&slots[k]);
        bench_multi_start(multi, &slots[k], o, kept, next++);
    }
    while (done < o->n) {
        int running = 0, left = 0;
        curl_multi_perform(multi, &running);
        CURLMsg *msg;
        while ((msg = curl_multi_info_read(multi, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE) continue;
            if (msg->data.result != CURLE_OK) r->failed++;
            done++;
            CURL *easy = msg->easy_handle;
            bench_slot *s = NULL;
            curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&s);
            if (kept != NULL) curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &kept[s->i - 1].status);
            curl_multi_remove_handle(multi, easy);
            if (next <= o->n) bench_multi_start(multi, s, o, kept, next++); /* reuse the handle: keep-alive */
        }
        if (done < o->n) curl_multi_poll(multi, NULL, 0, 100, NULL);
    }
    r->cpu_s = bench_cpu_s() - cpu0;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->wall_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    for (long i = 0; kept != NULL && i < o->n; i++) {
        if (kept[i].status != 200 && kept[i].status != 0) r->failed++; /* a 200 each is expected (0: failed above) */
        free(kept[i].head.data);
        free(kept[i].body.data);
    }
    for (long k = 0; k < o->conc; k++) {
        if (slots[k].easy) curl_easy_cleanup(slots[k].easy);
        curl_slist_free_all(slots[k].headers);
    }
    free(slots);
    free(kept);
    curl_multi_cleanup(multi);
    curl_global_cleanup();
    return true;
}

#endif
