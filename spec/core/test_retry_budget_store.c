/*
 * The retry budget's shared store (rf_retry_budget_set_store) and its Redis implementation
 * (rf_retry_budget_redis_new):
 *   - a store that answers decides: verdict budget "shared", throttled by the store's count, local bucket
 *     untouched; a store that fails: "local-fallback", the local bucket takes the attempt; ownership: the
 *     store's ctx is freed exactly once by rf_retry_budget_free; an inert budget or a second store: RF_EINVAL;
 *   - 8 threads share one Redis budget (a real redis-server on a free loopback port, started here): exactly
 *     the 4 retries one bucket allows across all threads (one in five requests for a ratio), every verdict
 *     "shared" but those that waited out their deadline for the other threads' calls, which fall back and are
 *     said. Skipped without redis-server. .ci/tsan runs this file under ThreadSanitizer.
 *   - a decision that waits out its deadline for another thread's call falls back and says so.
 *   - one deadline per decision: against a hostile Redis (spec/core/fake_resp.c, started here on a port the
 *     kernel picks) that drips each reply a byte per 20 ms, stalls mid-reply, sends garbage, never answers, or
 *     never completes the TCP handshake, every decision ends within timeout_ms plus a few ms, falls back to
 *     the local bucket and says so; the same server answering properly gives "shared" (the control), by its
 *     address and by the name localhost;
 *   - a name the resolver never answers for (a mount and network namespace of its own, where a UDP socket on
 *     127.0.0.1:53 swallows every query): the lookup ends by the deadline too. Skipped where no namespace can
 *     be made, and under ThreadSanitizer (UNDER_TSAN says why).
 */
#define _GNU_SOURCE /* unshare(2) */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_locks.h"

#include "retryfreeze/retry_budget_redis.h"
#include "stall_clock.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LOCK(shared)                                                                                          \
    "{\"endpoint\":\"GET /v1/jobs\",\"maxAttempts\":10,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":60000," \
    "\"retryable\":[\"HTTP_503\"],\"backoff\":{\"baseMs\":10,\"maxMs\":100,\"jitter\":\"none\"},"             \
    "\"retryBudget\":{\"maxTokens\":10,\"tokenRatio\":0.5" shared "}}"

/* The facts of a GET /v1/jobs attempt that got `status` (transport ok), the request's attempt number `attempts`. */
static rf_facts jobs_facts(int status, int attempts) {
    return (rf_facts){.method = "GET",
                      .method_len = 3,
                      .path = "/v1/jobs",
                      .path_len = 8,
                      .status = status,
                      .transport = RF_TRANSPORT_OK,
                      .attempts = attempts};
}

static rf_verdict decide(const rf_policy *p, rf_retry_budget *b, int status, int attempts) {
    rf_facts f = jobs_facts(status, attempts);
    rf_verdict v;
    rf_error err;
    assert_int_equal(rf_decide(p, &f, NULL, b, &v, &err), RF_OK);
    return v;
}

typedef struct fake_store {
    bool answer;    /* false: behave as an unreachable store */
    int64_t tokens; /* the shared count */
    int calls, frees;
} fake_store;

static bool fake_add(void *ctx, int64_t delta, int64_t max, int64_t *tokens) {
    fake_store *s = ctx;
    s->calls++;
    if (!s->answer) return false;
    s->tokens += delta;
    if (s->tokens < 0) s->tokens = 0;
    if (s->tokens > max) s->tokens = max;
    *tokens = s->tokens;
    return true;
}

static void fake_free(void *ctx) { ((fake_store *)ctx)->frees++; }

static void test_store_decides_and_falls_back(void **state) {
    (void)state;
    rf_policy *p = lock_load(LOCK(""));
    rf_retry_budget *b = rf_retry_budget_new(p);
    fake_store fs = {.answer = true, .tokens = 6000};
    rf_retry_budget_store store = {.add = fake_add, .free = fake_free, .ctx = &fs};
    rf_error err;
    assert_int_equal(rf_retry_budget_set_store(b, &store, &err), RF_OK);

    rf_verdict v = decide(p, b, 503, 1); /* shared 6 → 5: at maxTokens / 2, throttled */
    assert_false(v.retry);
    assert_int_equal(v.reason, RF_REASON_RETRY_THROTTLED);
    assert_int_equal(v.budget, RF_BUDGET_SHARED);
    assert_int_equal(fs.tokens, 5000);
    assert_int_equal(rf_retry_budget_tokens_milli(b), 10000); /* the local bucket did not move */

    v = decide(p, b, 200, 1); /* a success adds tokenRatio to the shared bucket */
    assert_int_equal(v.budget, RF_BUDGET_SHARED);
    assert_int_equal(fs.tokens, 5500);

    fs.answer = false; /* unreachable: the local bucket (full) decides, and says so */
    v = decide(p, b, 503, 1);
    assert_true(v.retry);
    assert_int_equal(v.budget, RF_BUDGET_LOCAL_FALLBACK);
    assert_int_equal(rf_retry_budget_tokens_milli(b), 9000);
    assert_int_equal(fs.tokens, 5500);

    v = decide(p, b, 404, 1); /* a non-retryable failure leaves every bucket alone */
    assert_int_equal(v.budget, RF_BUDGET_NONE);
    assert_int_equal(fs.calls, 3);

    assert_int_equal(rf_retry_budget_set_store(b, &store, &err), RF_EINVAL); /* one store per budget */
    assert_string_equal(err.message, "the budget already has a shared store");
    rf_retry_budget_free(b);
    assert_int_equal(fs.frees, 1);
    rf_policy_free(p);
}

static void test_store_needs_a_budget(void **state) {
    (void)state;
    rf_policy *p = lock_load("{\"endpoint\":\"GET /v1/jobs\",\"maxAttempts\":2,\"perAttemptTimeoutMs\":100,"
                             "\"totalBudgetMs\":500,\"retryable\":[\"HTTP_503\"]}");
    rf_retry_budget *b = rf_retry_budget_new(p);
    fake_store fs = {.answer = true};
    rf_retry_budget_store store = {.add = fake_add, .free = fake_free, .ctx = &fs};
    rf_error err;
    assert_int_equal(rf_retry_budget_set_store(b, &store, &err), RF_EINVAL);
    assert_string_equal(err.path, "retryBudget");
    rf_retry_budget_free(b);
    assert_int_equal(fs.frees, 0); /* not taken, not freed */

    rf_retry_budget *shared = NULL;
    rf_redis_budget_options o = {.url = "redis://127.0.0.1:1/0"};
    assert_int_equal(rf_retry_budget_redis_new(p, &o, &shared, &err), RF_EINVAL);
    assert_string_equal(err.path, "retryBudget.shared");
    rf_policy_free(p);

    p = lock_load(LOCK(",\"shared\":{\"name\":\"t\"}"));
    o.url = "redis://127.0.0.1:99999/0";
    assert_int_equal(rf_retry_budget_redis_new(p, &o, &shared, &err), RF_EINVAL);
    assert_string_equal(err.message, "has a port that is not 1..65535");
    o.url = "redis://127.0.0.1:6379/0";
    o.timeout_ms = 10001;
    assert_int_equal(rf_retry_budget_redis_new(p, &o, &shared, &err), RF_EINVAL);
    assert_string_equal(err.path, "timeout_ms");
    rf_policy_free(p);
}

/* ---- 8 threads, one bucket in a real Redis -------------------------------------------------------- */

#define THREADS 8
#define ROUNDS 200

/* A redis-server this test started: its port (0: none) and its directory (pid file, log). */
typedef struct redis_proc {
    int port;
    char dir[64];
} redis_proc;

static redis_proc plain_redis, acl_redis;

static bool redis_answers(int port) {
    char cmd[96];
    snprintf(cmd, sizeof cmd, "redis-cli -p %d ping 2>/dev/null | grep -q PONG", port);
    return system(cmd) == 0;
}

/* Starts redis-server on a free loopback port without persistence, with the extra arguments (shell words);
 * r->port stays 0 when none is installed or none started. The server must answer PING without a password. */
static void start_redis(redis_proc *r, const char *extra) {
    r->port = 0;
    if (system("command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1") != 0) return;
    snprintf(r->dir, sizeof r->dir, "/tmp/rf-redis-XXXXXX");
    if (mkdtemp(r->dir) == NULL) return;
    for (int tries = 0; tries < 20; tries++) {
        int port = 33000 + rand() % 12000;
        if (redis_answers(port)) continue; /* someone else's */
        char cmd[1024];
        snprintf(cmd, sizeof cmd,
                 "redis-server --port %d --bind 127.0.0.1 --save '' --appendonly no --dir %s "
                 "--pidfile %s/redis.pid --daemonize yes --logfile %s/redis.log %s >/dev/null 2>&1",
                 port, r->dir, r->dir, r->dir, extra);
        if (system(cmd) != 0) continue;
        /* A daemonized redis-server exits 0 before it binds: the port is this server's only once its own log says
         * it listens (else another process's server, started meanwhile, would answer in its place). */
        char ready[160], failed[160];
        snprintf(ready, sizeof ready, "grep -q 'Ready to accept connections' %s/redis.log 2>/dev/null", r->dir);
        snprintf(failed, sizeof failed, "grep -q 'Could not create server TCP' %s/redis.log 2>/dev/null", r->dir);
        for (int i = 0; i < 100; i++) {
            if (system(ready) == 0 && redis_answers(port)) {
                r->port = port;
                return;
            }
            if (system(failed) == 0) break; /* the port was taken: the next one */
            nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL);
        }
        snprintf(cmd, sizeof cmd, "rm -f %s/redis.log", r->dir); /* the next server's log starts afresh */
        if (system(cmd) != 0) return;
    }
}

static void stop_redis(redis_proc *r) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "kill $(cat %s/redis.pid) 2>/dev/null; sleep 0.1; rm -rf %s", r->dir, r->dir);
    if (system(cmd) != 0) fprintf(stderr, "could not stop redis in %s\n", r->dir);
}

/* A storm's counts: the decisions Redis answered (shared: retried or throttled), those that fell back to the
 * local budget, and any other outcome. */
typedef struct worker {
    const rf_policy *p;
    rf_retry_budget *b;
    pthread_barrier_t *start;
    long retried, throttled, fell_back, other;
} worker;

static void *fail_loop(void *arg) {
    worker *w = arg;
    pthread_barrier_wait(w->start);
    for (int i = 0; i < ROUNDS; i++) {
        rf_budget_request ticket = RF_BUDGET_REQUEST_INIT; /* each decision: a request of its own */
        rf_facts f = jobs_facts(503, 1);
        f.budget_request = &ticket;
        rf_verdict v;
        rf_error err;
        if (rf_decide(w->p, &f, NULL, w->b, &v, &err) != RF_OK) {
            w->other++;
            continue;
        }
        if (v.budget == RF_BUDGET_LOCAL_FALLBACK)
            w->fell_back++;
        else if (v.budget != RF_BUDGET_SHARED)
            w->other++;
        else if (v.retry)
            w->retried++;
        else if (v.reason == RF_REASON_RETRY_THROTTLED)
            w->throttled++;
        else
            w->other++;
    }
    return NULL;
}

/* What a budget shared by threads said (its log callback, which two threads may call at once): how many lines, and
 * whether each was the wait for another thread's call. */
typedef struct storm_log {
    pthread_mutex_t mu;
    int lines, waits;
} storm_log;

static void storm_heard(void *ctx, const char *line) {
    storm_log *l = ctx;
    pthread_mutex_lock(&l->mu);
    l->lines++;
    l->waits += strstr(line, ": another thread's call to redis held this budget ") != NULL;
    pthread_mutex_unlock(&l->mu);
}

/* A storm's decisions against a healthy Redis: the only way one falls back is a wait for the other threads' calls
 * to its deadline (the machine's load decides how often), and that is said, once: no other failure. */
static void assert_fallbacks_said(const worker *sum, const storm_log *heard) {
    printf("fell back %ld times; the budget said %d lines, %d of a wait for another thread\n", sum->fell_back,
           heard->lines, heard->waits);
    assert_int_equal(sum->other, 0);
    assert_int_equal(heard->lines, sum->fell_back > 0 ? 1 : 0);
    assert_int_equal(heard->waits, heard->lines);
}

/* THREADS threads at once (a barrier starts them together) run fail_loop on one Redis budget for p at url, made
 * here into *b (the caller frees it); the sum of their counts, and what the budget said in *heard. */
static worker storm_threads(const rf_policy *p, const char *url, rf_retry_budget **b, storm_log *heard) {
    pthread_mutex_init(&heard->mu, NULL);
    rf_redis_budget_options o = {.url = url, .timeout_ms = 2000, .log = storm_heard, .log_ctx = heard};
    rf_error err;
    assert_int_equal(rf_retry_budget_redis_new(p, &o, b, &err), RF_OK);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    worker w[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.p = p, .b = *b, .start = &start};
        pthread_create(&t[i], NULL, fail_loop, &w[i]);
    }
    worker sum = {0};
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        sum.retried += w[i].retried;
        sum.throttled += w[i].throttled;
        sum.fell_back += w[i].fell_back;
        sum.other += w[i].other;
    }
    pthread_barrier_destroy(&start);
    return sum;
}

static void test_threads_share_one_redis_bucket(void **state) {
    (void)state;
    if (plain_redis.port == 0) {
        skip();
    }
    rf_policy *p = lock_load(LOCK(",\"shared\":{\"name\":\"threads\"}"));
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", plain_redis.port);
    rf_retry_budget *b = NULL;
    rf_error err;
    storm_log heard = {.lines = 0};
    const worker sum = storm_threads(p, url, &b, &heard);
    printf("one bucket in Redis, %d threads x %d requests: %ld retried, %ld throttled\n", THREADS, ROUNDS, sum.retried,
           sum.throttled);
    assert_fallbacks_said(&sum, &heard);
    /* One bucket of 10 tokens: of the decisions Redis answered, those that left 9, 8, 7, 6 tokens retried; every
     * other one throttled. */
    assert_int_equal(sum.retried, 4);
    assert_int_equal(sum.retried + sum.throttled + sum.fell_back, THREADS * ROUNDS);
    int64_t tokens = -2, ttl = -2;
    rf_redis_budget_options show = {.url = url, .timeout_ms = 1000};
    assert_int_equal(rf_retry_budget_redis_peek(&show, "threads", &tokens, &ttl, &err), RF_OK);
    assert_int_equal(tokens, 0);
    assert_true(ttl > 0 && ttl <= RF_REDIS_BUDGET_TTL_MS);
    assert_int_equal(rf_retry_budget_redis_peek(&show, "never-used", &tokens, &ttl, &err), RF_OK);
    assert_int_equal(tokens, -1);
    rf_retry_budget_free(b);
    pthread_mutex_destroy(&heard.mu);
    rf_policy_free(p);
}

/* A ratio budget (retryRatio 0.2) kept in Redis: the window's script takes 6 arguments, so its EVALSHA is the
 * longest command the store sends (10 words). 8 threads, each decision a request asking for a retry: one window
 * allows exactly one retry in five requests, whatever the interleaving (the script runs atomically). */
static void test_threads_share_one_redis_window(void **state) {
    (void)state;
    if (plain_redis.port == 0) {
        skip();
    }
    static const char lock[] =
        "{\"endpoint\":\"GET /v1/jobs\",\"maxAttempts\":10,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":60000,"
        "\"retryable\":[\"HTTP_503\"],\"backoff\":{\"baseMs\":10,\"maxMs\":100,\"jitter\":\"none\"},"
        "\"retryBudget\":{\"retryRatio\":0.2,\"ttlMs\":600000,\"shared\":{\"name\":\"window-threads\"}}}";
    rf_policy *p = lock_load(lock);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", plain_redis.port);
    rf_retry_budget *b = NULL;
    rf_error err;
    storm_log heard = {.lines = 0};
    const worker sum = storm_threads(p, url, &b, &heard);
    bool found = false;
    rf_budget_window win = {0};
    int64_t idle = -2;
    rf_redis_budget_options show = {.url = url, .timeout_ms = 1000};
    assert_int_equal(rf_retry_budget_redis_peek_window(&show, "window-threads", &found, &win, &idle, &err), RF_OK);
    printf("ratio 0.2 in Redis, %d threads x %d requests: %ld retried, %ld throttled; the window holds %" PRId64
           " requests and %" PRId64 " retries\n",
           THREADS, ROUNDS, sum.retried, sum.throttled, win.requests, win.retries);
    assert_fallbacks_said(&sum, &heard);
    /* The window counts each request Redis answered, and allows exactly one retry in five of them. */
    const long answered = sum.retried + sum.throttled;
    assert_int_equal(answered + sum.fell_back, THREADS * ROUNDS);
    assert_true(found);
    assert_int_equal(win.requests, answered);
    assert_int_equal(sum.retried, answered / 5);
    assert_int_equal(win.retries, answered / 5);
    assert_int_equal(win.allowance_milli, 200 * answered);
    assert_int_equal(win.ttl_ms, 600000);
    assert_true(idle > 0);
    assert_int_equal(rf_retry_budget_redis_peek_window(&show, "never-used", &found, &win, &idle, &err), RF_OK);
    assert_false(found);
    rf_retry_budget_free(b);
    pthread_mutex_destroy(&heard.mu);
    rf_policy_free(p);
}

/* ---- One deadline per decision, against a hostile Redis ------------------------------------------------ */

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define UNDER_VALGRIND RUNNING_ON_VALGRIND
#endif
#endif
#ifndef UNDER_VALGRIND
#define UNDER_VALGRIND 0
#endif

/* Under ThreadSanitizer a name lookup cannot run: glibc's getaddrinfo_a starts its thread inside libc, where
 * TSan does not see it, and the process crashes. .ci/tsan is about the budget's own threads; the lookups are
 * tested in the other runs. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

/* Whether a decision that took took_us (on the stall clock: net of the time the machine kept the thread from
 * running, stall_clock.h) is within the bound. Under valgrind (.ci/run runs every C test under it),
 * which runs each instruction on a synthetic CPU and translates code the first time it runs, times say nothing
 * about the client: the bound is asserted in the plain, ASan and TSan runs, and valgrind checks memory. */
static bool within(int64_t took_us, int64_t bound_ms) { return UNDER_VALGRIND || took_us <= bound_ms * 1000; }

/* Whether this build runs under AddressSanitizer, whose instrumented code runs 2 to 3 times slower. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define DEADLINE_TIMEOUT_MS 50
/* How far past timeout_ms a decision may end: the work after the last poll (dropping the connection, the
 * local bucket's decision) and the scheduler's wake-up. That work is CPU time the stall clock counts in full, and a
 * sanitized build's CPU time is several times the plain build's (an ASan run at load 9 ended a TLS drip 18 ms past
 * its deadline): 10 ms in the plain build, 40 ms under a sanitizer. Either bound still fails a client that waits on
 * a server that never stops dripping. */
#define DEADLINE_SLACK_MS (UNDER_ASAN || UNDER_TSAN ? 40 : 10)
#define DECISIONS_PER_MODE 5

/* Starts fake_resp in `mode` on a port the kernel picks; returns the port (0 when it did not start). */
static int start_fake(const char *mode, pid_t *pid) {
    int out[2];
    if (pipe(out) != 0) return 0;
    *pid = fork();
    if (*pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        close(out[0]);
        close(out[1]);
        execl(RF_FAKE_RESP, "fake_resp", "0", mode, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    char line[16] = "";
    ssize_t n = *pid > 0 ? read(out[0], line, sizeof line - 1) : -1;
    close(out[0]);
    if (n <= 0) return 0;
    line[n] = '\0';
    return atoi(line);
}

static void stop_fake(pid_t pid) {
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

/* Starts fake_resp in `mode` (start_fake) and writes its URL, `scheme`://127.0.0.1:PORT/0, to url (cap bytes);
 * returns the port. A fake that did not start fails the test here. */
static int start_fake_url(const char *mode, const char *scheme, pid_t *pid, char *url, size_t cap) {
    int port = start_fake(mode, pid);
    assert_int_not_equal(port, 0);
    snprintf(url, cap, "%s://127.0.0.1:%d/0", scheme, port);
    return port;
}

/* This program's own path (argv[0]): in_child runs it again, as a fresh process, in a child's role. */
static const char *self_path;

/* A child's role: what it runs (fn(arg, line, cap) writes its answer into line), by the name main takes. */
typedef struct child_role {
    const char *name;
    void (*fn)(void *arg, char *line, size_t cap);
} child_role;

/*
 * Runs the role `name` with arg in a child: this program again (fork, then exec, so the child is a fresh
 * process: ThreadSanitizer cannot start threads after a fork of a threaded process, and a name lookup starts
 * one), which prints its answer. Returns true with the answer in line; false with *exit_code when the child
 * exited without one. Once it has answered, the child is ended with SIGKILL, so nothing of it runs at exit: a
 * lookup the test abandons is still running there.
 */
static bool in_child(const char *name, const char *arg, char *line, size_t cap, int *exit_code) {
    int out[2];
    if (pipe(out) != 0) return false;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        close(out[0]);
        close(out[1]);
        execl(self_path, self_path, "--child", name, arg, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    ssize_t n = pid > 0 ? read(out[0], line, cap - 1) : -1;
    close(out[0]);
    line[n > 0 ? n : 0] = '\0';
    if (n > 0) kill(pid, SIGKILL);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return n > 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

static const char *budget_name(rf_budget_source b) {
    return b == RF_BUDGET_SHARED ? "shared" : b == RF_BUDGET_LOCAL_FALLBACK ? "local-fallback" : "other";
}

/* What a budget said through its log callback (rf_redis_budget_options.log). */
typedef struct said {
    int n;
    char lines[4][1400];
} said;

static void collect(void *ctx, const char *line) {
    said *s = ctx;
    if (s->n < 4) snprintf(s->lines[s->n], sizeof s->lines[0], "%s", line);
    s->n++;
}

/* One failed attempt decided with a fresh budget kept at the fake server (so each decision connects, loads
 * the script and runs it) with timeout_ms; returns how long rf_decide took, in µs, and the verdict's budget.
 * What the budget says goes to lines when given, else to stderr. */
static int64_t timed_decision(const rf_policy *p, rf_redis_budget_options o, rf_budget_source *source, said *lines) {
    o.log = lines ? collect : NULL;
    o.log_ctx = lines;
    rf_retry_budget *b = NULL;
    rf_error err;
    assert_int_equal(rf_retry_budget_redis_new(p, &o, &b, &err), RF_OK);
    int64_t t0 = stall_clock_us();
    rf_verdict v = decide(p, b, 503, 1);
    int64_t took = stall_clock_us() - t0;
    *source = v.budget;
    assert_true(v.retry); /* shared 9000 (the control), or the full local bucket: 9 > 5 */
    rf_retry_budget_free(b);
    return took;
}

/* A child's role (in_child): one decision with the budget at the URL arg, a name, with time to spare. */
static void localhost_control(void *arg, char *line, size_t cap) {
    const char *text = LOCK(",\"shared\":{\"name\":\"deadline\"}");
    rf_policy *p = NULL;
    rf_error err;
    if (rf_policy_load_buffer(text, strlen(text), &p, &err) != RF_OK) _exit(1);
    rf_redis_budget_options o = {.url = arg, .timeout_ms = 2000};
    rf_retry_budget *b = NULL;
    if (rf_retry_budget_redis_new(p, &o, &b, &err) != RF_OK) _exit(1);
    rf_facts f = jobs_facts(503, 1);
    rf_verdict v;
    if (rf_decide(p, &f, NULL, b, &v, &err) != RF_OK) _exit(1);
    snprintf(line, cap, "%s", budget_name(v.budget));
}

static void test_every_decision_ends_by_its_deadline(void **state) {
    (void)state;
    /* Each way a server can hold a decision: every reply, or only the decision's EVALSHA (a warm script). */
    static const char *const modes[] = {"drip",   "drip:EVALSHA",   "stall",   "stall:EVALSHA",
                                        "silent", "silent:EVALSHA", "garbage", "backlog"};
    rf_policy *p = lock_load(LOCK(",\"shared\":{\"name\":\"deadline\"}"));
    pid_t pid;
    char url[64];
    int port = start_fake_url("ok", "redis", &pid, url, sizeof url);
    rf_budget_source source;
    /* The controls, with time to spare: the non-blocking client works, by address, and by a name (looked up,
     * each address tried: ::1 refused, then 127.0.0.1), in a child (in_child says why). */
    timed_decision(p, (rf_redis_budget_options){.url = url, .timeout_ms = 2000}, &source, NULL);
    assert_int_equal(source, RF_BUDGET_SHARED);
    snprintf(url, sizeof url, "redis://localhost:%d/0", port);
    char line[256];
    int code;
    if (UNDER_TSAN) {
        printf("ThreadSanitizer: no name lookup (the control by name is not run)\n");
    } else {
        assert_true(in_child("localhost", url, line, sizeof line, &code));
        assert_string_equal(line, "shared");
    }
    stop_fake(pid);
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        start_fake_url(modes[m], "redis", &pid, url, sizeof url);
        int64_t worst = 0;
        int fallbacks = 0;
        for (int i = 0; i < DECISIONS_PER_MODE; i++) {
            int64_t took = timed_decision(p, (rf_redis_budget_options){.url = url, .timeout_ms = DEADLINE_TIMEOUT_MS},
                                          &source, NULL);
            fallbacks += source == RF_BUDGET_LOCAL_FALLBACK;
            if (took > worst) worst = took;
        }
        stop_fake(pid);
        printf("fake redis %-15s timeout_ms %d: worst of %d decisions %.1f ms, %d fell back\n", modes[m],
               DEADLINE_TIMEOUT_MS, DECISIONS_PER_MODE, (double)worst / 1000, fallbacks);
        fflush(stdout);
        assert_true(within(worst, DEADLINE_TIMEOUT_MS + DEADLINE_SLACK_MS));
        assert_int_equal(fallbacks, DECISIONS_PER_MODE);
    }
    rf_policy_free(p);
}

/* Threads sharing one budget at a dripping Redis: waiting for another thread's round trip counts too. */
#define DEADLINE_THREADS 4
#define DEADLINE_ROUNDS 30

typedef struct deadline_worker {
    const rf_policy *p;
    rf_retry_budget *b;
    int64_t worst_us;
    long fallbacks;
} deadline_worker;

static void *deadline_loop(void *arg) {
    deadline_worker *w = arg;
    for (int i = 0; i < DEADLINE_ROUNDS; i++) {
        int64_t t0 = stall_clock_us();
        rf_verdict v = decide(w->p, w->b, i % 2 ? 200 : 503, 1);
        int64_t took = stall_clock_us() - t0;
        if (took > w->worst_us) w->worst_us = took;
        if (v.budget == RF_BUDGET_LOCAL_FALLBACK) w->fallbacks++;
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL); /* 10 ms: past a backoff now and then */
    }
    return NULL;
}

static void test_threads_wait_no_longer_than_their_deadline(void **state) {
    (void)state;
    pid_t pid;
    char url[64];
    start_fake_url("drip:EVALSHA", "redis", &pid, url, sizeof url);
    rf_policy *p = lock_load(LOCK(",\"shared\":{\"name\":\"deadline\"}"));
    rf_redis_budget_options o = {.url = url, .timeout_ms = DEADLINE_TIMEOUT_MS};
    rf_retry_budget *b = NULL;
    rf_error err;
    assert_int_equal(rf_retry_budget_redis_new(p, &o, &b, &err), RF_OK);
    deadline_worker w[DEADLINE_THREADS];
    pthread_t t[DEADLINE_THREADS];
    for (int i = 0; i < DEADLINE_THREADS; i++) {
        w[i] = (deadline_worker){.p = p, .b = b};
        pthread_create(&t[i], NULL, deadline_loop, &w[i]);
    }
    int64_t worst = 0;
    long fallbacks = 0;
    for (int i = 0; i < DEADLINE_THREADS; i++) {
        pthread_join(t[i], NULL);
        if (w[i].worst_us > worst) worst = w[i].worst_us;
        fallbacks += w[i].fallbacks;
    }
    stop_fake(pid);
    printf("fake redis drip:EVALSHA, %d threads x %d decisions on one budget: worst %.1f ms\n", DEADLINE_THREADS,
           DEADLINE_ROUNDS, (double)worst / 1000);
    /* Every decision that touched the budget fell back (a 503 and a 200 alike; none got a whole reply). */
    assert_int_equal(fallbacks, DEADLINE_THREADS * DEADLINE_ROUNDS);
    assert_true(within(worst, DEADLINE_TIMEOUT_MS + DEADLINE_SLACK_MS));
    rf_retry_budget_free(b);
    rf_policy_free(p);
}

/* A log callback whose first line holds on (with the store's lock, as report runs) until the test releases it; it
 * keeps the first two lines. Lines may come from two threads at once, so it has a lock of its own. */
typedef struct held_log {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    bool holding, released;
    char lines[2][1400];
} held_log;

static void hold_first_line(void *ctx, const char *line) {
    held_log *h = ctx;
    pthread_mutex_lock(&h->mu);
    const int i = h->n++;
    if (i < 2) snprintf(h->lines[i], sizeof h->lines[i], "%s", line);
    if (i == 0) {
        h->holding = true;
        pthread_cond_broadcast(&h->cv);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 30; /* a test that never releases fails on its own assertions, not by hanging */
        while (!h->released && pthread_cond_timedwait(&h->cv, &h->mu, &until) == 0) {}
    }
    pthread_mutex_unlock(&h->mu);
}

typedef struct one_decision {
    const rf_policy *p;
    rf_retry_budget *b;
} one_decision;

static void *decide_once(void *arg) {
    one_decision *d = arg;
    (void)decide(d->p, d->b, 503, 1);
    return NULL;
}

/* A decision that waits out its whole timeout for another thread's call falls back, and says so: a thread's
 * failure at a stalling server holds the store's lock while its line is logged (a log callback that does not
 * return), and a second thread's decision meanwhile finds the lock taken to its deadline. */
static void test_a_wait_for_another_threads_call_is_said(void **state) {
    (void)state;
    pid_t pid;
    char url[64];
    start_fake_url("stall", "redis", &pid, url, sizeof url);
    rf_policy *p = lock_load(LOCK(",\"shared\":{\"name\":\"busy\"}"));
    held_log h = {.n = 0};
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cv, NULL);
    rf_redis_budget_options o = {.url = url, .timeout_ms = DEADLINE_TIMEOUT_MS, .log = hold_first_line, .log_ctx = &h};
    rf_retry_budget *b = NULL;
    rf_error err;
    assert_int_equal(rf_retry_budget_redis_new(p, &o, &b, &err), RF_OK);
    one_decision first = {.p = p, .b = b};
    pthread_t t;
    pthread_create(&t, NULL, decide_once, &first);
    pthread_mutex_lock(&h.mu);
    while (!h.holding) pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);
    int64_t t0 = stall_clock_us();
    rf_verdict v = decide(p, b, 503, 1);
    int64_t took = stall_clock_us() - t0;
    pthread_mutex_lock(&h.mu);
    h.released = true;
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.mu);
    pthread_join(t, NULL);
    stop_fake(pid);
    printf("a decision behind another thread's call, timeout_ms %d: %.1f ms, %s; lines said: %d\n", DEADLINE_TIMEOUT_MS,
           (double)took / 1000, budget_name(v.budget), h.n);
    assert_int_equal(v.budget, RF_BUDGET_LOCAL_FALLBACK);
    assert_true(within(took, DEADLINE_TIMEOUT_MS + DEADLINE_SLACK_MS));
    assert_int_equal(h.n, 2);
    char expected[512];
    snprintf(expected, sizeof expected,
             "retryfreeze: shared retry budget busy at %s falls back to the local bucket: another thread's call to "
             "redis held this budget for the decision's whole %d ms (a budget makes one call to redis at a time: "
             "raise timeout_ms, or give busy threads budgets of their own) (said once per budget for this kind of "
             "failure)",
             url, DEADLINE_TIMEOUT_MS);
    assert_string_equal(h.lines[1], expected);
    rf_retry_budget_free(b);
    rf_policy_free(p);
    pthread_cond_destroy(&h.cv);
    pthread_mutex_destroy(&h.mu);
}

/* ---- A name the resolver never answers for ---------------------------------------------------------------- */

static bool put_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return false;
    bool ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
    return close(fd) == 0 && ok;
}

/*
 * In a child process: a mount and a network namespace of its own (as root, or as root of a new user namespace),
 * where /etc/resolv.conf names 127.0.0.1, /etc/nsswitch.conf asks files then DNS, and a UDP socket on
 * 127.0.0.1:53 receives every query and answers none. False where the system allows no such namespace.
 */
static bool silent_resolver(const char *dir) {
    if (unshare(CLONE_NEWNS | CLONE_NEWNET) != 0) {
        char map[64];
        unsigned uid = (unsigned)getuid(), gid = (unsigned)getgid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET) != 0) return false;
        snprintf(map, sizeof map, "0 %u 1\n", uid);
        if (!put_file("/proc/self/setgroups", "deny") || !put_file("/proc/self/uid_map", map)) return false;
        snprintf(map, sizeof map, "0 %u 1\n", gid);
        if (!put_file("/proc/self/gid_map", map)) return false;
    }
    /* Private first: the bind mounts below must not reach the machine's own namespace. */
    if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0) return false;
    char resolv[96], nss[96];
    snprintf(resolv, sizeof resolv, "%s/resolv.conf", dir);
    snprintf(nss, sizeof nss, "%s/nsswitch.conf", dir);
    if (!put_file(resolv, "nameserver 127.0.0.1\noptions timeout:5 attempts:2\n") ||
        !put_file(nss, "hosts: files dns\n") || mount(resolv, "/etc/resolv.conf", "none", MS_BIND, NULL) != 0)
        return false;
    (void)mount(nss, "/etc/nsswitch.conf", "none", MS_BIND, NULL); /* where there is one */
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct ifreq lo = {0};
    snprintf(lo.ifr_name, sizeof lo.ifr_name, "lo");
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &lo) != 0) return false;
    lo.ifr_flags |= IFF_UP;
    if (ioctl(s, SIOCSIFFLAGS, &lo) != 0) return false;
    struct sockaddr_in dns = {.sin_family = AF_INET, .sin_port = htons(53)};
    dns.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return bind(s, (struct sockaddr *)&dns, sizeof dns) == 0; /* kept open, never read: the child exits */
}

/* A child's role (in_child): decisions and a peek against a name the resolver never answers for, and the
 * budget's free, each timed; exits 77 where no namespace can be made. */
static void silent_resolver_run(void *arg, char *line, size_t cap) {
    if (!silent_resolver(arg)) _exit(77);
    rf_policy *p = NULL;
    rf_error err;
    const char *text = LOCK(",\"shared\":{\"name\":\"dns\"}");
    if (rf_policy_load_buffer(text, strlen(text), &p, &err) != RF_OK) _exit(1);
    rf_redis_budget_options o = {.url = "redis://redis.retryfreeze-test:6379/0", .timeout_ms = DEADLINE_TIMEOUT_MS};
    rf_retry_budget *b = NULL;
    if (rf_retry_budget_redis_new(p, &o, &b, &err) != RF_OK) _exit(1);
    /* Under AddressSanitizer, glibc's resolver thread is started first, by a lookup of an address that needs no
     * server. On a loaded CI machine the first decision once took 94 ms there, the second 40: most likely that
     * thread's start (the first getaddrinfo_a of a process makes it, and the sanitizer maps its stack's shadow),
     * which is one-time work, not the lookup's wait this test bounds. Its time is said. */
    int64_t warm_us = 0;
    if (UNDER_ASAN) {
        warm_us = stall_clock_us();
        struct gaicb warm = {.ar_name = "127.0.0.1", .ar_service = "6379"};
        struct gaicb *list[1] = {&warm};
        if (getaddrinfo_a(GAI_WAIT, list, 1, NULL) != 0 || warm.ar_result == NULL) _exit(1);
        freeaddrinfo(warm.ar_result);
        warm_us = stall_clock_us() - warm_us;
    }
    int64_t took[2];
    int fallbacks = 0;
    for (int i = 0; i < 2; i++) { /* the second after the reconnection backoff: the same lookup, still running */
        rf_facts f = jobs_facts(503, 1);
        rf_verdict v;
        int64_t t0 = stall_clock_us();
        if (rf_decide(p, &f, NULL, b, &v, &err) != RF_OK) _exit(1);
        took[i] = stall_clock_us() - t0;
        fallbacks += v.budget == RF_BUDGET_LOCAL_FALLBACK;
        nanosleep(&(struct timespec){.tv_nsec = 150000000}, NULL);
    }
    int64_t peek_took = stall_clock_us(), tokens, ttl;
    rf_redis_budget_options show = {.url = o.url, .timeout_ms = 200};
    rf_status peeked = rf_retry_budget_redis_peek(&show, "dns", &tokens, &ttl, &err);
    peek_took = stall_clock_us() - peek_took;
    int64_t free_took = stall_clock_us();
    rf_retry_budget_free(b); /* its lookup still runs: left to the resolver, not waited for */
    free_took = stall_clock_us() - free_took;
    rf_policy_free(p);
    snprintf(line, cap, "%lld %lld %lld %d %lld %lld %d %s", (long long)warm_us, (long long)took[0], (long long)took[1],
             fallbacks, (long long)peek_took, (long long)free_took, (int)peeked, err.message);
}

static void test_a_name_lookup_ends_by_the_deadline(void **state) {
    (void)state;
    if (UNDER_TSAN) {
        printf("ThreadSanitizer: no name lookup (not tested here)\n");
        skip();
    }
    char dir[] = "/tmp/rf-dns-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char line[256];
    int code;
    bool answered = in_child("silent-resolver", dir, line, sizeof line, &code);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    if (!answered && code == 77) {
        printf("no mount and network namespace here: the name lookup's deadline is not tested\n");
        skip();
    }
    assert_true(answered);
    long long warm, first, second, peek_us, free_us;
    int fallbacks, peeked, used = 0;
    assert_int_equal(sscanf(line, "%lld %lld %lld %d %lld %lld %d %n", &warm, &first, &second, &fallbacks, &peek_us,
                            &free_us, &peeked, &used),
                     7);
    printf("a name the resolver never answers, timeout_ms %d: decisions %.1f and %.1f ms (warm-up under "
           "AddressSanitizer: %.1f ms); budget show --timeout-ms 200: %.1f ms, \"%s\"; rf_retry_budget_free %.1f "
           "ms\n",
           DEADLINE_TIMEOUT_MS, (double)first / 1000, (double)second / 1000, (double)warm / 1000,
           (double)peek_us / 1000, line + used, (double)free_us / 1000);
    assert_true(within(free_us, DEADLINE_SLACK_MS));
    assert_int_equal(fallbacks, 2);
    assert_true(within(first, DEADLINE_TIMEOUT_MS + DEADLINE_SLACK_MS));
    assert_true(within(second, DEADLINE_TIMEOUT_MS + DEADLINE_SLACK_MS));
    assert_int_equal(peeked, RF_EIO);
    assert_true(within(peek_us, 200 + DEADLINE_SLACK_MS));
    assert_string_equal(line + used, "cannot resolve redis host redis.retryfreeze-test within 200 ms");
}

/* ---- The URL and the TLS options ---------------------------------------------------------------------------- */

typedef struct refused_url {
    const char *url, *path, *message;
} refused_url;

/* A file under dir with the text; its path in out. */
static void file_in(const char *dir, const char *name, const char *text, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s", dir, name);
    FILE *f = fopen(out, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_urls_and_tls_options(void **state) {
    (void)state;
    rf_policy *p = lock_load(LOCK(",\"shared\":{\"name\":\"urls\"}"));
    rf_retry_budget *b = NULL;
    rf_error err;
    /* Every part of the grammar, present and absent: nothing is sent yet, so each makes a budget. */
    static const char *const accepted[] = {
        "redis://h",       "redis://h:1",      "redis://h/2",          "redis://h:65535/1000000",
        "redis://h/",      "redis://:pw@h",    "redis://app:pw@h:1/3", "rediss://app:p%40%3A%2F%25@h",
        "rediss://h",      "REDISS://H:6380",  "redis://[::1]:6380/1", "rediss://[fe80::1]",
        "redis://a:b:c@h", "redis://a%3Ab:c@h" /* the first ':' ends the user */};
    for (size_t i = 0; i < sizeof accepted / sizeof *accepted; i++) {
        rf_redis_budget_options o = {.url = accepted[i]};
        rf_status st = rf_retry_budget_redis_new(p, &o, &b, &err);
        if (st != RF_OK) printf("%s: %s %s\n", accepted[i], err.path, err.message);
        assert_int_equal(st, RF_OK);
        rf_retry_budget_free(b);
    }
    static const refused_url refused[] = {
        {"http://h", "url", "must start with redis:// or rediss://"},
        {"redis:/h", "url", "must start with redis:// or rediss://"},
        {"redis://", "url", "has no host (redis://host:port/db)"},
        {"redis://:pw@", "url", "has no host (redis://host:port/db)"},
        {"redis://:pw@:1", "url", "has no host (redis://host:port/db)"},
        {"redis://secret@h", "url",
         "has a user but no password: write user:password@ (an ACL user) or :password@ (the default user)"},
        {"redis://app:@h", "url", "has an empty password"},
        {"redis://app:p%zz@h", "url", "has a user or password that is over-long or has a bad %-escape (%XX, not %00)"},
        {"redis://app:p%00@h", "url", "has a user or password that is over-long or has a bad %-escape (%XX, not %00)"},
        {"redis://app:p%4@h", "url", "has a user or password that is over-long or has a bad %-escape (%XX, not %00)"},
        {"redis://[::1", "url", "has an IPv6 address that is empty or lacks its closing ]"},
        {"redis://[]:1", "url", "has an IPv6 address that is empty or lacks its closing ]"},
        {"redis://[h]:1", "url", "has something in [ ] that is not an IPv6 address"},
        {"redis://[fe80::1%25eth0]:1", "url", "has something in [ ] that is not an IPv6 address"},
        {"redis://h:1/2#x", "url", "has a database that is not a number (redis://host:port/0)"},
        {"redis://h:6379:1", "url", "has a port that is not 1..65535"},
        {"redis://h:0", "url", "has a port that is not 1..65535"},
        {"redis://h:65536", "url", "has a port that is not 1..65535"},
        {"redis://h:+1", "url", "has a port that is not 1..65535"},
        {"redis://h: 1", "url", "has a port that is not 1..65535"},
        {"redis://h:1x", "url", "has a port that is not 1..65535"},
        {"redis://h:", "url", "has a port that is not 1..65535"},
        {"redis://h/x", "url", "has a database that is not a number (redis://host:port/0)"},
        {"redis://h/-1", "url", "has a database that is not a number (redis://host:port/0)"},
        {"redis://h/ 1", "url", "has a database that is not a number (redis://host:port/0)"},
        {"redis://h/1?x", "url", "has a database that is not a number (redis://host:port/0)"},
        {"redis://h?db=1", "url", "has unexpected text after the host (a query or fragment?)"},
        {"redis://h#x", "url", "has unexpected text after the host (a query or fragment?)"},
        {"redis://[::1]x", "url", "has unexpected text after the host (a query or fragment?)"},
        {"redis://h\n", "url", "has a control character (a byte below 0x20, or 0x7f)"},
        {"redis://a\tb:pw@h", "url", "has a control character (a byte below 0x20, or 0x7f)"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        rf_redis_budget_options o = {.url = refused[i].url};
        assert_int_equal(rf_retry_budget_redis_new(p, &o, &b, &err), RF_EINVAL);
        assert_null(b);
        if (strcmp(err.message, refused[i].message) != 0) printf("url %s\n", refused[i].url);
        assert_string_equal(err.path, refused[i].path);
        assert_string_equal(err.message, refused[i].message);
    }
    /* The TLS options: only with rediss://, each file read (and refused, naming the option) when the budget is made. */
    char dir[] = "/tmp/rf-tls-opts-XXXXXX", junk[96], missing[96];
    assert_non_null(mkdtemp(dir));
    file_in(dir, "junk.pem", "not a certificate\n", junk, sizeof junk);
    snprintf(missing, sizeof missing, "%s/missing.pem", dir);
    struct {
        rf_redis_budget_options o;
        const char *path, *message;
    } tls[] = {
        {{.url = "redis://h", .ca_file = junk}, "ca_file", "needs a rediss:// URL (TLS); redis:// is plain TCP"},
        {{.url = "redis://h", .cert = junk}, "cert", "needs a rediss:// URL (TLS); redis:// is plain TCP"},
        {{.url = "rediss://h", .ca_file = missing}, "ca_file", "No such file or directory"},
        {{.url = "rediss://h", .ca_path = junk}, "ca_path", "not a directory"},
        {{.url = "rediss://h", .ca_file = dir}, "ca_file", "not a regular file"},
        {{.url = "rediss://h", .ca_file = junk}, "ca_file", "no CA certificate could be read"},
        {{.url = "rediss://h", .key = junk}, "key", "needs cert (the client certificate it belongs to)"},
        {{.url = "rediss://h", .cert = junk}, "cert", "not a PEM certificate"},
        {{.url = "rediss://h", .cert = missing}, "cert", "No such file or directory"},
    };
    for (size_t i = 0; i < sizeof tls / sizeof *tls; i++) {
        assert_int_equal(rf_retry_budget_redis_new(p, &tls[i].o, &b, &err), RF_EINVAL);
        if (strstr(err.message, tls[i].message) == NULL) printf("TLS option %zu: %s %s\n", i, err.path, err.message);
        assert_string_equal(err.path, tls[i].path);
        assert_non_null(strstr(err.message, tls[i].message));
        int64_t tokens, ttl; /* budget show refuses them alike */
        assert_int_equal(rf_retry_budget_redis_peek(&tls[i].o, "x", &tokens, &ttl, &err), RF_EINVAL);
        assert_string_equal(err.path, tls[i].path);
    }
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    rf_policy_free(p);
}

/* s with every byte outside RFC 3986's unreserved set written as %XX. */
static void percent_encode(const char *s, char *out, size_t cap) {
    size_t o = 0;
    for (; *s && o + 4 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr("-._~", c))
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, cap - o, "%%%02X", c);
    }
    out[o] = '\0';
}

/*
 * No message shows the URL's password: the log line of a budget that cannot reach Redis, and the error of each
 * malformed variant of its URL. The passwords are drawn to trip a formatter or a masker: placeholders, the mask
 * itself, every reserved character, case and encoding variants, non-ASCII; each starts with a marker, so that
 * finding it in a message can only mean the password leaked. Both schemes, the default user and ACL users.
 */
static void test_no_message_shows_the_password(void **state) {
    (void)state;
    static const char *const secrets[] = {"Zq7plain",
                                          "Zq7***",
                                          "Zq7%s%n%p%%",
                                          "Zq7{password}",
                                          "Zq7 ${REDIS_PASSWORD}",
                                          "Zq7:@/?#[]!$&'()*+,;=",
                                          "Zq7%25%40",
                                          "ZQ7-UPPER",
                                          "Zq7\xc3\xa9t\xc3\xa9",
                                          "Zq7\"\\",
                                          "Zq7@",
                                          "Zq7:"};
    static const char *const users[] = {"", "app", "A-user.x_y~z"};
    static const char *const schemes[] = {"redis", "rediss"};
    /* Variants the parser refuses after it has read the password: the message must not quote it either. */
    static const char *const broken[] = {":0/0", ":1/x", ":1/0?q", ":1x"};
    rf_policy *p = lock_load(LOCK(",\"shared\":{\"name\":\"secret\"}"));
    int lines = 0;
    for (size_t i = 0; i < sizeof secrets / sizeof *secrets; i++) {
        char enc[256];
        percent_encode(secrets[i], enc, sizeof enc);
        for (size_t u = 0; u < sizeof users / sizeof *users; u++) {
            for (size_t sc = 0; sc < 2; sc++) {
                char url[512], masked[128];
                snprintf(url, sizeof url, "%s://%s:%s@127.0.0.1:1/0", schemes[sc], users[u], enc);
                snprintf(masked, sizeof masked, "%s://%s:***@127.0.0.1:1/0", schemes[sc], users[u]);
                said heard = {0};
                rf_redis_budget_options o = {.url = url, .timeout_ms = 1000, .log = collect, .log_ctx = &heard};
                rf_retry_budget *b = NULL;
                rf_error err;
                assert_int_equal(rf_retry_budget_redis_new(p, &o, &b, &err), RF_OK);
                rf_verdict v = decide(p, b, 503, 1); /* port 1: refused */
                assert_int_equal(v.budget, RF_BUDGET_LOCAL_FALLBACK);
                rf_retry_budget_free(b);
                assert_int_equal(heard.n, 1);
                assert_non_null(strstr(heard.lines[0], masked));
                assert_non_null(strstr(heard.lines[0], "cannot connect to redis 127.0.0.1:1: Connection refused"));
                assert_null(strstr(heard.lines[0], secrets[i]));
                assert_null(strstr(heard.lines[0], enc));
                lines++;
                for (size_t k = 0; k < sizeof broken / sizeof *broken; k++) {
                    snprintf(url, sizeof url, "%s://%s:%s@127.0.0.1%s", schemes[sc], users[u], enc, broken[k]);
                    assert_int_equal(rf_retry_budget_redis_new(p, &o, &b, &err), RF_EINVAL);
                    assert_null(strstr(err.message, secrets[i]));
                    assert_null(strstr(err.message, enc));
                    int64_t tokens, ttl;
                    assert_int_equal(rf_retry_budget_redis_peek(&o, "secret", &tokens, &ttl, &err), RF_EINVAL);
                    assert_null(strstr(err.message, secrets[i]));
                }
            }
        }
    }
    printf("%d log lines and %d refusals, none showing its password\n", lines, lines * 4 * 2);
    rf_policy_free(p);
}

/* ---- The TLS handshake under the same deadline ------------------------------------------------------------- */

/*
 * rediss:// against servers that hold the handshake: one that never answers the ClientHello, one that stops in
 * the middle of its ServerHello record, one that drips a record that never ends, a listen queue that never
 * completes the TCP handshake, and a plain Redis (it drops a ClientHello, which is not RESP). Every decision
 * ends within timeout_ms plus a few ms, falls back, and its budget says why once. The budgets trust a CA of the
 * test's own (one certificate, made with the openssl CLI): the system's bundle takes 30 ms to read in a plain
 * build and 200 ms under ThreadSanitizer, which would leave budget show's bound measuring that, not the hold.
 */
static void test_tls_handshake_ends_by_its_deadline(void **state) {
    (void)state;
    char dir[] = "/tmp/rf-tls-ca-XXXXXX", cmd[512], ca[64];
    assert_non_null(mkdtemp(dir));
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout %s/ca.key -out %s "
             "-days 2 -subj '/CN=retryfreeze test CA' >/dev/null 2>&1",
             dir, ca);
    if (system(cmd) != 0) {
        printf("no openssl command: the TLS handshake's deadline is not tested\n");
        skip();
    }
    /* timeout_ms: the deadline a mode tests, or, for a server that closes the connection (ok: it speaks no TLS), one
     * long enough that the close always comes first, even under ThreadSanitizer on a loaded machine: that mode tests
     * the message, not the deadline. */
    static const struct {
        const char *mode, *why;
        int timeout_ms;
    } modes[] = {
        {"tls-silent", "TLS handshake with redis 127.0.0.1:%d: no whole handshake within 50 ms", DEADLINE_TIMEOUT_MS},
        {"tls-stall", "TLS handshake with redis 127.0.0.1:%d: no whole handshake within 50 ms", DEADLINE_TIMEOUT_MS},
        {"tls-drip", "TLS handshake with redis 127.0.0.1:%d: no whole handshake within 50 ms", DEADLINE_TIMEOUT_MS},
        {"backlog", "cannot connect to redis 127.0.0.1:%d: no connection within 50 ms", DEADLINE_TIMEOUT_MS},
        {"ok", "TLS handshake with redis 127.0.0.1:%d: the server closed the connection", 2000},
    };
    rf_policy *p = lock_load(LOCK(",\"shared\":{\"name\":\"tls\"}"));
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        pid_t pid;
        char url[64], why[160];
        int port = start_fake_url(modes[m].mode, "rediss", &pid, url, sizeof url);
        snprintf(why, sizeof why, modes[m].why, port);
        int64_t worst = 0;
        int fallbacks = 0;
        for (int i = 0; i < DECISIONS_PER_MODE; i++) {
            said heard = {0};
            rf_budget_source source;
            int64_t took = timed_decision(
                p, (rf_redis_budget_options){.url = url, .timeout_ms = modes[m].timeout_ms, .ca_file = ca}, &source,
                &heard);
            fallbacks += source == RF_BUDGET_LOCAL_FALLBACK;
            if (took > worst) worst = took;
            assert_int_equal(heard.n, 1);
            if (strstr(heard.lines[0], why) == NULL) printf("%s\n", heard.lines[0]);
            assert_non_null(strstr(heard.lines[0], why));
        }
        int64_t tokens, ttl, peek_us = stall_clock_us();
        rf_error err;
        rf_redis_budget_options show = {.url = url, .timeout_ms = 200, .ca_file = ca};
        assert_int_equal(rf_retry_budget_redis_peek(&show, "tls", &tokens, &ttl, &err), RF_EIO);
        peek_us = stall_clock_us() - peek_us;
        stop_fake(pid);
        printf("rediss:// at fake redis %-10s timeout_ms %d: worst of %d decisions %.1f ms, %d fell back; budget "
               "show --timeout-ms 200: %.1f ms, \"%s\"\n",
               modes[m].mode, modes[m].timeout_ms, DECISIONS_PER_MODE, (double)worst / 1000, fallbacks,
               (double)peek_us / 1000, err.message);
        fflush(stdout);
        assert_true(within(worst, modes[m].timeout_ms + DEADLINE_SLACK_MS));
        assert_true(within(peek_us, 200 + DEADLINE_SLACK_MS));
        assert_int_equal(fallbacks, DECISIONS_PER_MODE);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    rf_policy_free(p);
}

/* ---- ACL users: a real redis-server ------------------------------------------------------------------------- */

/* A password with every character a URL's userinfo must escape: the URL carries it percent-encoded. */
/* A decision's deadline against the real redis-server: long enough that its refusal always comes first, even when
 * the machine keeps the server from running (at 50 ms a loaded run timed out before the NOPERM reply). */
#define ACL_TIMEOUT_MS 2000
#define ACL_PASSWORD "pa:ss@w/rd%"
#define ACL_PASSWORD_IN_URL "pa%3Ass%40w%2Frd%25"
#define ACL_BUCKET "'~retryfreeze:budget:*'"
/* The budget's user (the documented rules), and users that each lack one of them; the default user may only
 * PING (the test's own check that the server is up). */
#define ACL_USERS                                                                         \
    "--user default on nopass +ping "                                                     \
    "--user app on '>" ACL_PASSWORD "' " ACL_BUCKET " +evalsha '+script|load' +get +set " \
    "--user noeval on '>pw' " ACL_BUCKET " '+script|load' +get +set "                     \
    "--user noload on '>pw' " ACL_BUCKET " +evalsha +get +set "                           \
    "--user nokeys on '>pw' '~other:*' +evalsha '+script|load' +get +set "                \
    "--user noset on '>pw' " ACL_BUCKET " +evalsha '+script|load' +get"

/*
 * Against a real redis-server with ACL users: the budget's user, named in the URL with its percent-encoded
 * password, decides in the shared bucket; a wrong password, an unknown user, no user, and a user lacking any one
 * permission the budget needs each fall back at once, and the budget says why exactly once, with what to change
 * (the decisions after it: one during the reconnection backoff, one after it, which is refused again).
 */
static void test_acl_refusals_fall_back_and_are_said_once(void **state) {
    (void)state;
    if (acl_redis.port == 0) {
        skip();
    }
    rf_policy *p = lock_load(LOCK(",\"shared\":{\"name\":\"acl\"}"));
    char url[160];
    snprintf(url, sizeof url, "redis://app:%s@127.0.0.1:%d/0", ACL_PASSWORD_IN_URL, acl_redis.port);
    rf_budget_source source;
    said heard = {0};
    timed_decision(p, (rf_redis_budget_options){.url = url, .timeout_ms = 2000}, &source, &heard);
    assert_int_equal(source, RF_BUDGET_SHARED);
    assert_int_equal(heard.n, 0);
    int64_t tokens = -2, ttl = -2;
    rf_error err;
    rf_redis_budget_options show = {.url = url, .timeout_ms = 2000};
    assert_int_equal(rf_retry_budget_redis_peek(&show, "acl", &tokens, &ttl, &err), RF_EIO); /* no +pttl */
    assert_string_equal(err.message, "redis PTTL failed: NOPERM this user has no permissions to run the 'pttl' "
                                     "command");
    static const struct {
        const char *userinfo, *why, *hint;
    } refusals[] = {
        {"app:wrong@", "redis AUTH failed: WRONGPASS", "(check the user and password in the URL)"},
        {"ghost:" ACL_PASSWORD_IN_URL "@", "redis AUTH failed: WRONGPASS", "(check the user and password in the URL)"},
        {"", "redis SCRIPT LOAD failed: NOPERM", "+evalsha +script|load +get +set"},
        {"noeval:pw@", "redis EVALSHA failed: NOPERM this user has no permissions to run the 'evalsha' command",
         "+evalsha +script|load +get +set"},
        {"noload:pw@", "redis SCRIPT LOAD failed: NOPERM this user has no permissions to run the 'script|load'",
         "+evalsha +script|load +get +set"},
        {"nokeys:pw@", "redis EVALSHA failed: NOPERM this user has no permissions to access one of the keys",
         "~retryfreeze:budget:*"},
        {"noset:pw@", "redis EVALSHA failed: ERR The user executing the script can't run this command",
         "+evalsha +script|load +get +set"},
    };
    for (size_t i = 0; i < sizeof refusals / sizeof *refusals; i++) {
        snprintf(url, sizeof url, "redis://%s127.0.0.1:%d/0", refusals[i].userinfo, acl_redis.port);
        said told = {0};
        rf_redis_budget_options o = {.url = url, .timeout_ms = ACL_TIMEOUT_MS, .log = collect, .log_ctx = &told};
        rf_retry_budget *b = NULL;
        assert_int_equal(rf_retry_budget_redis_new(p, &o, &b, &err), RF_OK);
        int64_t worst = 0;
        for (int d = 0; d < 3; d++) {
            if (d == 2) nanosleep(&(struct timespec){.tv_nsec = 150000000}, NULL); /* past the 100 ms backoff */
            int64_t t0 = stall_clock_us();
            rf_verdict v = decide(p, b, 503, 1);
            int64_t took = stall_clock_us() - t0;
            if (took > worst) worst = took;
            assert_int_equal(v.budget, RF_BUDGET_LOCAL_FALLBACK);
        }
        rf_retry_budget_free(b);
        printf("redis ACL, %-12s worst of 3 decisions %.1f ms: %s\n",
               refusals[i].userinfo[0] ? refusals[i].userinfo : "(no user)", (double)worst / 1000, told.lines[0]);
        fflush(stdout);
        assert_int_equal(told.n, 1);
        assert_non_null(strstr(told.lines[0], refusals[i].why));
        assert_non_null(strstr(told.lines[0], refusals[i].hint));
        assert_null(strstr(told.lines[0], ACL_PASSWORD));
        assert_null(strstr(told.lines[0], ACL_PASSWORD_IN_URL));
        assert_true(within(worst, ACL_TIMEOUT_MS / 4)); /* the refusal came back; no decision waited out its deadline */
    }
    rf_policy_free(p);
}

/* ---- A reply past the cap a budget's replies fit in --------------------------------------------------- */

/* A server that declares a bulk string or an array of 2 000 000 000 (then floods), or a status line that never
 * ends: a decision and a peek each refuse the reply at its cap with a message that says so, not at their deadline
 * (a deadline's message says "by the deadline"), and fall back (the decision) or fail (the peek). */
static void test_a_reply_past_its_cap_is_refused(void **state) {
    (void)state;
    static const struct {
        const char *mode, *says;
    } cases[] = {
        {"huge-bulk", "declares a bulk string of 2000000000 bytes (a retry budget's replies are at most 4096)"},
        {"huge-array", "declares an array of 2000000000 elements (a retry budget's replies have at most 256)"},
        {"long-line", "a reply over 16384 bytes (a retry budget's replies are smaller): refused"},
        {"huge-bulk:EVALSHA", "redis EVALSHA: the reply declares a bulk string of 2000000000 bytes"},
    };
    rf_policy *p = lock_load(LOCK(",\"shared\":{\"name\":\"capped\"}"));
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pid_t pid;
        char url[64];
        start_fake_url(cases[i].mode, "redis", &pid, url, sizeof url);
        said told = {0};
        rf_budget_source source;
        timed_decision(p, (rf_redis_budget_options){.url = url, .timeout_ms = 2000}, &source, &told);
        print_message("fake redis %s: %s\n", cases[i].mode, told.lines[0]);
        assert_int_equal(source, RF_BUDGET_LOCAL_FALLBACK);
        assert_int_equal(told.n, 1);
        assert_non_null(strstr(told.lines[0], cases[i].says));
        assert_null(strstr(told.lines[0], "deadline"));
        if (strchr(cases[i].mode, ':') == NULL) { /* budget show: the same cap on GET's reply */
            rf_redis_budget_options show = {.url = url, .timeout_ms = 2000};
            int64_t tokens = -2, ttl = -2;
            rf_error err;
            assert_int_equal(rf_retry_budget_redis_peek(&show, "capped", &tokens, &ttl, &err), RF_EIO);
            assert_non_null(strstr(err.message, cases[i].says));
        }
        stop_fake(pid);
    }
    rf_policy_free(p);
}

/* ---- A request counts once in a ratio window, whatever path decides it ----------------------------------- */

/* maxAttempts 3 on two routes, one hedged (3 attempts in flight at most, a 503 not fatal to the others); a ratio
 * budget of 0.5 over a long window. */
#define RATIO_HEDGE_LOCK(shared)                                                                              \
    "{\"version\":1,\"defaults\":{\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":60000,"    \
    "\"retryable\":[\"HTTP_503\"],\"backoff\":{\"baseMs\":10,\"maxMs\":10,\"jitter\":\"none\"}},"             \
    "\"routes\":[{\"endpoint\":\"GET /plain\"},{\"endpoint\":\"GET /hedged\",\"hedging\":{\"maxAttempts\":3," \
    "\"hedgingDelayMs\":100,\"nonFatalClasses\":[\"HTTP_503\"]}}],"                                           \
    "\"retryBudget\":{\"retryRatio\":0.5,\"ttlMs\":600000" shared "}}"

/* What one request's decisions took from the budget: retries and hedges allowed. */
typedef struct request_count {
    int retries, hedges;
} request_count;

/* One request to an upstream that answers 503 to every attempt, decided as the client does: on the hedged route a
 * hedge is asked for when the hedging delay passes with the first attempt in flight, then each attempt's failure is
 * decided (a retry it allows starts one more attempt); on the plain route each failure in turn. */
static request_count failing_request(const rf_policy *p, rf_retry_budget *b, bool hedged) {
    const char *path = hedged ? "/hedged" : "/plain";
    const long route = rf_policy_match(p, "GET", 3, path, strlen(path));
    assert_true(route >= 0);
    rf_budget_request ticket = RF_BUDGET_REQUEST_INIT;
    request_count n = {0};
    rf_verdict v;
    rf_error err;
    int started = 1, in_flight = 1;
    if (hedged) {
        const rf_hedge_facts h = {.method = "GET",
                                  .method_len = 3,
                                  .started = 1,
                                  .elapsed_ms = 100,
                                  .mono_ms = 1000,
                                  .budget_request = &ticket};
        assert_int_equal(rf_hedge_decide(p, route, &h, b, &v, &err), RF_OK);
        if (v.retry) {
            n.hedges++;
            started++;
            in_flight++;
        }
    }
    while (in_flight > 0) {
        rf_facts f = {.method = "GET",
                      .method_len = 3,
                      .path = path,
                      .path_len = strlen(path),
                      .status = 503,
                      .transport = RF_TRANSPORT_OK,
                      .attempts = started,
                      .elapsed_ms = 200,
                      .mono_ms = 1000,
                      .hedged = hedged,
                      .budget_request = &ticket};
        assert_int_equal(rf_decide_on_route(p, route, &f, NULL, b, &v, &err), RF_OK);
        in_flight--;
        if (v.retry) {
            n.retries++;
            started++;
            in_flight++;
        }
    }
    return n;
}

/* 100 requests that all fail, on one route, with a fresh budget b; the sums, and the window's requests. */
static request_count failing_requests(const rf_policy *p, rf_retry_budget *b, bool hedged) {
    request_count sum = {0};
    for (int i = 0; i < 100; i++) {
        const request_count n = failing_request(p, b, hedged);
        sum.retries += n.retries;
        sum.hedges += n.hedges;
    }
    return sum;
}

/* retryRatio 0.5 and 100 failing requests: 50 retries on the plain route; on the hedged route the same 50, hedges
 * and retries together, and the window counts 100 requests, not one per hedge decision plus one per first verdict. */
static void test_a_request_counts_once_local(void **state) {
    (void)state;
    rf_policy *p = lock_load(RATIO_HEDGE_LOCK(""));
    for (int hedged = 0; hedged <= 1; hedged++) {
        rf_retry_budget *b = rf_retry_budget_new(p);
        const request_count n = failing_requests(p, b, hedged);
        rf_budget_window w;
        assert_true(rf_retry_budget_window(b, 1000, &w));
        print_message("local window, %s route: %d retries + %d hedges, window requests %lld retries %lld\n",
                      hedged ? "hedged" : "plain", n.retries, n.hedges, (long long)w.requests, (long long)w.retries);
        assert_int_equal(n.retries + n.hedges, 50);
        assert_int_equal(w.requests, 100);
        assert_int_equal(w.retries, 50);
        rf_retry_budget_free(b);
    }
    rf_policy_free(p);
}

/* The same through a window kept in Redis: the fleet's window counts each request once too. */
static void test_a_request_counts_once_redis(void **state) {
    (void)state;
    if (plain_redis.port == 0) {
        skip();
    }
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", plain_redis.port);
    rf_redis_budget_options o = {.url = url, .timeout_ms = 2000};
    static const char *const names[] = {"once-plain", "once-hedged"};
    for (int hedged = 0; hedged <= 1; hedged++) {
        char lock[1024];
        snprintf(lock, sizeof lock, RATIO_HEDGE_LOCK(",\"shared\":{\"name\":\"%s\"}"), names[hedged]);
        rf_policy *p = lock_load(lock);
        rf_retry_budget *b = NULL;
        rf_error err;
        assert_int_equal(rf_retry_budget_redis_new(p, &o, &b, &err), RF_OK);
        const request_count n = failing_requests(p, b, hedged);
        bool found = false;
        rf_budget_window w;
        int64_t idle = -2;
        assert_int_equal(rf_retry_budget_redis_peek_window(&o, names[hedged], &found, &w, &idle, &err), RF_OK);
        assert_true(found);
        print_message("redis window, %s route: %d retries + %d hedges, window requests %lld retries %lld\n",
                      hedged ? "hedged" : "plain", n.retries, n.hedges, (long long)w.requests, (long long)w.retries);
        assert_int_equal(n.retries + n.hedges, 50);
        assert_int_equal(w.requests, 100);
        assert_int_equal(w.retries, 50);
        rf_retry_budget_free(b);
        rf_policy_free(p);
    }
}

int main(int argc, char **argv) {
    self_path = argv[0];
    if (argc == 4 && strcmp(argv[1], "--child") == 0) { /* a role in_child started */
        static const child_role roles[] = {{"localhost", localhost_control}, {"silent-resolver", silent_resolver_run}};
        for (size_t i = 0; i < sizeof roles / sizeof *roles; i++) {
            if (strcmp(argv[2], roles[i].name) != 0) continue;
            char line[256] = "";
            roles[i].fn(argv[3], line, sizeof line);
            if (line[0] == '\0' || fputs(line, stdout) < 0 || fflush(stdout) != 0) return 1;
            for (;;) pause(); /* until in_child's SIGKILL */
        }
        return 2;
    }
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    start_redis(&plain_redis, "");
    start_redis(&acl_redis, ACL_USERS);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_decides_and_falls_back),
        cmocka_unit_test(test_store_needs_a_budget),
        cmocka_unit_test(test_threads_share_one_redis_bucket),
        cmocka_unit_test(test_threads_share_one_redis_window),
        cmocka_unit_test(test_a_reply_past_its_cap_is_refused),
        cmocka_unit_test(test_a_request_counts_once_local),
        cmocka_unit_test(test_a_request_counts_once_redis),
        cmocka_unit_test(test_every_decision_ends_by_its_deadline),
        cmocka_unit_test(test_threads_wait_no_longer_than_their_deadline),
        cmocka_unit_test(test_a_wait_for_another_threads_call_is_said),
        cmocka_unit_test(test_a_name_lookup_ends_by_the_deadline),
        cmocka_unit_test(test_urls_and_tls_options),
        cmocka_unit_test(test_no_message_shows_the_password),
        cmocka_unit_test(test_tls_handshake_ends_by_its_deadline),
        cmocka_unit_test(test_acl_refusals_fall_back_and_are_said_once),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (plain_redis.port) stop_redis(&plain_redis);
    if (acl_redis.port) stop_redis(&acl_redis);
    return failed;
}
