/*
 * Failing allocator for the client: every allocation of one rf_client_new + rf_client_request (or rf_client_all_with) +
 * rf_client_free against the project's upstream is failed in turn, N = 1, 2, … until a run makes fewer than
 * N allocations: for a keyed POST retried once (alone, then three of them through rf_client_all_with at concurrency
 * 2), then for a hedged GET whose hedge wins. Each run must end cleanly — RF_ENOMEM from rf_client_new, or a response
 * (an allocation that fails inside libcurl is a transport failure, never a crash) — and leave no block behind.
 *
 * Allocations are caught as in test_alloc_failure.c: the client's and the engine's own through -Wl,--wrap,
 * and libcurl's through curl_global_init_mem, all counted by the same allocator.
 * Usage: test_client_alloc [PATH/TO/retryfreeze-serve [LOCK]]
 */
#define _POSIX_C_SOURCE 200809L
#include "retryfreeze/client.h"

#include <curl/curl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "serve_child.h"

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void __real_free(void *p);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
void __wrap_free(void *p);
char *__wrap_strdup(const char *s);

static struct {
    long fail_at; /* the 1-based allocation to fail; 0 = never */
    long count;   /* allocations attempted since arm() */
    bool failed;
    long live; /* blocks handed out and not yet freed */
} A;

static bool should_fail(void) {
    A.count++;
    if (A.fail_at > 0 && A.count == A.fail_at) {
        A.failed = true;
        return true;
    }
    return false;
}

void *__wrap_malloc(size_t size) {
    if (should_fail()) return NULL;
    void *p = __real_malloc(size);
    if (p) A.live++;
    return p;
}

void *__wrap_calloc(size_t n, size_t size) {
    if (should_fail()) return NULL;
    void *p = __real_calloc(n, size);
    if (p) A.live++;
    return p;
}

void *__wrap_realloc(void *p, size_t size) {
    if (should_fail()) return NULL;
    void *q = __real_realloc(p, size);
    if (q && !p) A.live++;
    return q;
}

void __wrap_free(void *p) {
    if (p) A.live--;
    __real_free(p);
}

char *__wrap_strdup(const char *s) {
    if (should_fail()) return NULL;
    char *d = __real_strdup(s);
    if (d) A.live++;
    return d;
}

/* libcurl's allocator hooks (curl_global_init_mem) route through the wrapped functions above. */
static void *hook_malloc(size_t size) { return __wrap_malloc(size); }
static void hook_free(void *p) { __wrap_free(p); }
static void *hook_realloc(void *p, size_t size) { return __wrap_realloc(p, size); }
static char *hook_strdup(const char *s) { return __wrap_strdup(s); }
static void *hook_calloc(size_t n, size_t size) { return __wrap_calloc(n, size); }

#ifndef RF_SERVE_PATH
#define RF_SERVE_PATH "build/bin/retryfreeze-serve"
#endif
#ifndef RF_LOCK_PATH
#define RF_LOCK_PATH "examples/retry-budget.lock.json"
#endif

/* What the runs of every pass gave. */
typedef struct tally {
    long runs, enomem, responses, ok_responses;
} tally;

/* A hedged route (hedging: attempts in flight at once), for the second pass. */
#define HEDGED_LOCK                                                                                         \
    "{\"endpoint\":\"GET /v1/jobs\",\"maxAttempts\":2,\"perAttemptTimeoutMs\":2000,\"totalBudgetMs\":4000," \
    "\"retryable\":[\"HTTP_503\"],\"hedging\":{\"maxAttempts\":2,\"hedgingDelayMs\":10}}"

/* Most requests of an rf_client_all_with pass. */
#define ALL_MAX 3

/* Fails every allocation of one rf_client_new + rf_client_request (method, the fault script header) +
 * rf_client_free in turn, after a calibration run that must succeed in want_attempts attempts; counts into *t. With
 * n_all > 0, rf_client_all_with of n_all such requests at concurrency 2 instead (the window: a request starts as
 * another ends). 0, or 1 on a finding. */
static int fail_each(const char *url, const rf_policy *policy, const char *method, const char *script,
                     int want_attempts, size_t n_all, long only, tally *t) {
    const char *headers[] = {script};
    long ok_responses = 0, responses_before = t->responses;
    int rc = 0;
    rf_error err;
    /* n = 0 is the calibration run: nothing fails, and its allocation count is how many points there are. */
    long points = -1;
    for (long n = only > 0 ? only : 0; points < 0 || n <= points; n++) {
        char keys[ALL_MAX][48];
        rf_request reqs[ALL_MAX];
        for (size_t i = 0; i < ALL_MAX; i++) { /* a fresh sequence at the upstream every run */
            snprintf(keys[i], sizeof keys[i], "alloc-%s-%zu-%ld-%zu", method, n_all, n, i);
            reqs[i] = (rf_request){.method = method,
                                   .path = "/v1/jobs",
                                   .body = "{}",
                                   .body_len = 2,
                                   .idempotency_key = keys[i],
                                   .headers = headers,
                                   .n_headers = 1};
        }
        rf_client_options o = {.policy = policy, .base_url = url, .rng_seed = 1};
        long live_before = A.live;
        A.fail_at = n;
        A.count = 0;
        A.failed = false;
        rf_client *c = NULL;
        rf_status st = rf_client_new(&o, &c, &err);
        if (st == RF_OK) {
            rf_response r[ALL_MAX] = {{0}};
            const rf_all_options window = {.concurrency = 2};
            st = n_all > 0 ? rf_client_all_with(c, reqs, n_all, &window, NULL, NULL, r, &err)
                           : rf_client_request(c, &reqs[0], NULL, NULL, &r[0], &err);
            if (st == RF_OK) {
                for (size_t i = 0; i < (n_all > 0 ? n_all : 1); i++) {
                    t->responses++;
                    if (r[i].ok && r[i].attempts == want_attempts) {
                        ok_responses++;
                    } else if (n == 0) { /* what the calibration run got instead */
                        fprintf(stderr, "calibration request %zu: ok %d, %d attempts (want %d), reason %s\n", i,
                                (int)r[i].ok, r[i].attempts, want_attempts, rf_reason_name(r[i].reason));
                    }
                }
            } else if (st == RF_ENOMEM) {
                t->enomem++;
            } else {
                fprintf(stderr, "run %ld: %s returned %d (%s %s)\n", n,
                        n_all > 0 ? "rf_client_all_with" : "rf_client_request", st, err.path, err.message);
                rc = 1;
            }
            for (size_t i = 0; i < ALL_MAX; i++) rf_response_clear(&r[i]);
            rf_client_free(c);
        } else if (st == RF_ENOMEM) {
            t->enomem++;
        } else {
            fprintf(stderr, "run %ld: rf_client_new returned %d (%s %s)\n", n, st, err.path, err.message);
            rc = 1;
        }
        A.fail_at = 0;
        if (A.live != live_before) {
            fprintf(stderr, "run %ld: %ld blocks leaked\n", n, A.live - live_before);
            rc = 1;
        }
        if (n == 0) {
            points = A.count;
            if (ok_responses != (long)(n_all > 0 ? n_all : 1)) {
                fprintf(stderr, "the calibration run did not succeed\n");
                rc = 1;
            }
            ok_responses = 0;
            t->responses = responses_before;
            continue;
        }
        t->runs++;
        if (rc != 0 || only > 0) break;
    }
    t->ok_responses += ok_responses;
    return rc;
}

int main(int argc, char **argv) {
    /* Without arguments (as .ci/run's valgrind pass runs every build/test_*): the build's own paths. */
    const char *serve = argc > 1 ? argv[1] : RF_SERVE_PATH, *lock = argc > 2 ? argv[2] : RF_LOCK_PATH;
    if (curl_global_init_mem(CURL_GLOBAL_DEFAULT, hook_malloc, hook_free, hook_realloc, hook_strdup, hook_calloc) !=
        CURLE_OK) {
        fprintf(stderr, "curl_global_init_mem failed\n");
        return 1;
    }
    char url[64];
    pid_t serve_pid = serve_child_start(serve, url, sizeof url);
    if (serve_pid < 0) {
        fprintf(stderr, "cannot start %s\n", serve);
        return 1;
    }
    rf_policy *policy = NULL;
    rf_error err;
    if (rf_policy_load_file(lock, &policy, &err) != RF_OK) {
        fprintf(stderr, "%s: %s\n", err.path, err.message);
        return 1;
    }
    /* RF_ALLOC_ONLY=N runs only fail point N (to look at one finding under valgrind). */
    long only = getenv("RF_ALLOC_ONLY") ? atol(getenv("RF_ALLOC_ONLY")) : 0;
    tally t = {0};
    /* A keyed POST retried once (504, 200); then a hedged GET: its first answer comes after 1 s, a hedge starts
     * after 10 ms and wins, the first attempt's transfer is aborted (two easy handles, the client's own multi). */
    int rc = fail_each(url, policy, "POST", "X-Fault-Script: 504,200", 2, 0, only, &t);
    /* The same three times through rf_client_all_with at concurrency 2. */
    if (rc == 0) rc = fail_each(url, policy, "POST", "X-Fault-Script: 504,200", 2, ALL_MAX, only, &t);
    rf_policy *hedged = NULL;
    if (rc == 0 && rf_policy_load_buffer(HEDGED_LOCK, strlen(HEDGED_LOCK), &hedged, &err) != RF_OK) {
        fprintf(stderr, "%s: %s\n", err.path, err.message);
        rc = 1;
    }
    if (rc == 0) rc = fail_each(url, hedged, "GET", "X-Fault-Script: ok;delay=1000", 2, 0, only, &t);
    rf_policy_free(hedged);
    rf_policy_free(policy);
    serve_child_stop(serve_pid);
    curl_global_cleanup();
    printf("client failing allocator: %ld allocation points, each failed in turn: %ld RF_ENOMEM, %ld responses "
           "(%ld still successful), 0 leaks\n",
           t.runs, t.enomem, t.responses, t.ok_responses);
    printf("%ld passed, %d failed\n", rc == 0 ? t.runs : 0, rc == 0 ? 0 : 1);
    return rc;
}
