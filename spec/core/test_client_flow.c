/*
 * The client's concurrent paths against the project's upstream: rf_client_all keeps at most
 * RF_ALL_CONCURRENCY requests in flight (600 requests to an upstream that takes 512 connections all succeed), and
 * rf_client_all_with at most the caller's concurrency (counted at the upstream: its max_in_flight),
 * refuses to run beside requests started with rf_client_start (whose completions it would swallow), and
 * rf_pending_done says when a started request has been reported.
 * Usage: test_client_flow [PATH/TO/retryfreeze-serve]
 */
#define _POSIX_C_SOURCE 200809L
#include "retryfreeze/client.h"
#include "retryfreeze/policy.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "serve_child.h"

#ifndef RF_SERVE_PATH
#define RF_SERVE_PATH "build/bin/retryfreeze-serve"
#endif

static const char *serve_program = RF_SERVE_PATH;
static pid_t serve_pid = -1;
static char base_url[64];
static rf_policy *policy;

static const char LOCK[] = "{\"endpoint\": \"GET /echo/{i}\", \"maxAttempts\": 2, \"perAttemptTimeoutMs\": 5000,"
                           " \"totalBudgetMs\": 10000, \"retryable\": [\"HTTP_503\"]}";

/* Starts retryfreeze-serve on a free loopback port and loads the lock. */
static int setup(void **state) {
    (void)state;
    serve_pid = serve_child_start(serve_program, base_url, sizeof base_url);
    if (serve_pid < 0) return -1;
    rf_error err;
    return rf_policy_load_buffer(LOCK, sizeof LOCK - 1, &policy, &err) == RF_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    rf_policy_free(policy);
    serve_child_stop(serve_pid);
    return 0;
}

/* The upstream's control paths (GET /__stats, POST /__reset), each sent once. */
static const char CONTROL_LOCK[] =
    "{\"version\":1,\"defaults\":{\"maxAttempts\":1,\"perAttemptTimeoutMs\":5000,\"totalBudgetMs\":5000,"
    "\"retryable\":[]},\"routes\":[{\"endpoint\":\"GET /__stats\"},"
    "{\"endpoint\":\"POST /__reset\",\"idempotencyRequired\":[]}]}";

/* The policy of a lock's text (the caller frees it). */
static rf_policy *load_lock(const char *text) {
    rf_policy *p = NULL;
    rf_error err;
    assert_int_equal(rf_policy_load_buffer(text, strlen(text), &p, &err), RF_OK);
    return p;
}

/* A client of policy p against url. */
static rf_client *client_of(const rf_policy *p, const char *url) {
    rf_client_options o = {.policy = p, .base_url = url, .rng_seed = 1};
    rf_client *c = NULL;
    rf_error err;
    assert_int_equal(rf_client_new(&o, &c, &err), RF_OK);
    return c;
}

/* Sends one control request (method, path) to the upstream; returns its body (the caller frees it). */
static char *control(const char *method, const char *path) {
    rf_policy *cp = load_lock(CONTROL_LOCK);
    rf_client *c = client_of(cp, base_url);
    rf_error err;
    rf_request req = {.method = method, .path = path};
    rf_response r = {0};
    assert_int_equal(rf_client_request(c, &req, NULL, NULL, &r, &err), RF_OK);
    assert_int_equal(r.status, 200);
    char *body = r.body;
    r.body = NULL;
    rf_response_clear(&r);
    rf_client_free(c);
    rf_policy_free(cp);
    return body;
}

/* One counter of the upstream's GET /__stats ("requests", "max_in_flight", …). */
static long upstream_stat(const char *name) {
    char *json = control("GET", "/__stats"), key[64];
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *at = strstr(json, key);
    assert_non_null(at);
    long v = strtol(at + strlen(key), NULL, 10);
    free(json);
    return v;
}

static void upstream_reset(void) { free(control("POST", "/__reset")); }

static rf_client *new_client(void) { return client_of(policy, base_url); }

/* More requests than the upstream takes connections (512): the window keeps each one from being refused. */
static void test_all_keeps_a_window(void **state) {
    (void)state;
    enum { N = 600 };
    static rf_request reqs[N];
    static char paths[N][32];
    static rf_response out[N];
    for (size_t i = 0; i < N; i++) {
        snprintf(paths[i], sizeof paths[i], "/echo/%zu", i);
        reqs[i] = (rf_request){.method = "GET", .path = paths[i]};
    }
    rf_client *c = new_client();
    rf_error err;
    upstream_reset();
    assert_int_equal(rf_client_all(c, reqs, N, NULL, NULL, out, &err), RF_OK);
    size_t ok = 0;
    for (size_t i = 0; i < N; i++) {
        if (out[i].status == 200 && out[i].attempts == 1) ok++;
        rf_response_clear(&out[i]);
    }
    assert_int_equal(ok, N);
    assert_int_equal(upstream_stat("requests"), N);
    assert_in_range(upstream_stat("max_in_flight"), 1, RF_ALL_CONCURRENCY); /* the default window */
    rf_client_free(c);
}

/* Runs n requests of GET /echo/<tag>-<i>, each held `delay_ms` by the upstream, through rf_client_all_with at
 * concurrency k; every one must answer 200 in one attempt. Returns the upstream's max_in_flight for them. */
static long all_in_flight(const char *tag, size_t n, size_t k, int delay_ms) {
    enum { MAX = 16 };
    assert_true(n <= MAX);
    rf_request reqs[MAX];
    rf_response out[MAX];
    char paths[MAX][32], script[64];
    snprintf(script, sizeof script, "X-Fault-Script: 200;delay=%d", delay_ms);
    const char *headers[] = {script};
    for (size_t i = 0; i < n; i++) {
        snprintf(paths[i], sizeof paths[i], "/echo/%s-%zu", tag, i);
        reqs[i] = (rf_request){.method = "GET", .path = paths[i], .headers = headers, .n_headers = 1};
    }
    rf_client *c = new_client();
    rf_error err;
    upstream_reset();
    const rf_all_options opts = {.concurrency = k};
    assert_int_equal(rf_client_all_with(c, reqs, n, &opts, NULL, NULL, out, &err), RF_OK);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(out[i].status, 200);
        assert_int_equal(out[i].attempts, 1);
        rf_response_clear(&out[i]);
    }
    assert_int_equal(upstream_stat("requests"), (long)n);
    rf_client_free(c);
    return upstream_stat("max_in_flight");
}

/* Concurrency 1: each request starts only once the one before has its answer, so the upstream never answers two at
 * once (it counts an attempt in flight until its answer is queued, before the client can see it). */
static void test_all_concurrency_one_runs_one_at_a_time(void **state) {
    (void)state;
    assert_int_equal(all_in_flight("one", 5, 1, 100), 1);
}

/* Concurrency 3 over 12 requests the upstream holds 400 ms each: never more than 3 at once, and the window is used
 * (3 at once: all three of a window start within far less than 400 ms of each other). */
static void test_all_concurrency_caps_in_flight(void **state) {
    (void)state;
    assert_int_equal(all_in_flight("three", 12, 3, 400), 3);
}

/* A concurrency over RF_ALL_CONCURRENCY_MAX is refused before anything is sent; the maximum itself is taken. */
static void test_all_concurrency_out_of_range(void **state) {
    (void)state;
    rf_client *c = new_client();
    rf_request req = {.method = "GET", .path = "/echo/range"};
    rf_response out = {0};
    rf_error err;
    upstream_reset();
    rf_all_options opts = {.concurrency = RF_ALL_CONCURRENCY_MAX + 1};
    assert_int_equal(rf_client_all_with(c, &req, 1, &opts, NULL, NULL, &out, &err), RF_EINVAL);
    assert_string_equal(err.path, "concurrency");
    assert_string_equal(err.message, "must be 1..1024 (0 = the default, 100), got 1025");
    assert_int_equal(upstream_stat("requests"), 0);
    opts.concurrency = RF_ALL_CONCURRENCY_MAX;
    assert_int_equal(rf_client_all_with(c, &req, 1, &opts, NULL, NULL, &out, &err), RF_OK);
    assert_int_equal(out.status, 200);
    rf_response_clear(&out);
    rf_client_free(c);
}

/* rf_client_all beside a started request would report (and drop) that request's completion: refused. */
static void test_all_refused_beside_started_requests(void **state) {
    (void)state;
    rf_client *c = new_client();
    rf_request req = {.method = "GET", .path = "/echo/1"};
    rf_response started_resp = {0}, all_resp = {0};
    rf_pending *p = NULL;
    rf_error err;
    assert_int_equal(rf_client_start(c, &req, NULL, NULL, &started_resp, &p, &err), RF_OK);
    assert_false(rf_pending_done(p));
    memset(&err, 0, sizeof err);
    assert_int_equal(rf_client_all(c, &req, 1, NULL, NULL, &all_resp, &err), RF_EINVAL);
    assert_string_equal(err.path, "client");
    assert_string_equal(err.message, "has started requests in flight (rf_client_start)");
    /* the started request is untouched and finishes */
    rf_pending *done[4];
    size_t n = 0;
    for (int i = 0; i < 50 && n == 0; i++) n = rf_client_run(c, 100, done, 4);
    assert_int_equal(n, 1);
    assert_ptr_equal(done[0], p);
    assert_true(rf_pending_done(p));
    assert_int_equal(started_resp.status, 200);
    rf_pending_free(p);
    rf_response_clear(&started_resp);
    /* with nothing started any more, client:all runs */
    assert_int_equal(rf_client_all(c, &req, 1, NULL, NULL, &all_resp, &err), RF_OK);
    assert_int_equal(all_resp.status, 200);
    rf_response_clear(&all_resp);
    rf_client_free(c);
}

/* A one-connection HTTP/1.1 server in a child process: it answers every request on the connection with
 * "200 ok" and writes "<METHOD> <Content-Length or -1> <body bytes read>" for each to fd out. Returns its pid;
 * *port is where it listens. */
static pid_t start_recorder(int out, int *port) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(ls >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(ls, 1), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(ls, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid > 0) {
        close(ls);
        return pid;
    }
    int s = accept(ls, NULL, NULL);
    static char buf[1 << 16];
    size_t have = 0;
    for (;;) {
        char *end = NULL;
        while ((end = strstr(buf, "\r\n\r\n")) == NULL) {
            ssize_t n = read(s, buf + have, sizeof buf - 1 - have);
            if (n <= 0) _exit(0);
            have += (size_t)n;
            buf[have] = '\0';
        }
        char method[16] = "";
        sscanf(buf, "%15s", method);
        long clen = -1;
        const char *cl = strstr(buf, "\r\nContent-Length:");
        if (cl != NULL && cl < end) clen = strtol(cl + 17, NULL, 10);
        size_t head = (size_t)(end + 4 - buf), body = clen > 0 ? (size_t)clen : 0;
        while (have < head + body) {
            ssize_t n = read(s, buf + have, sizeof buf - 1 - have);
            if (n <= 0) _exit(0);
            have += (size_t)n;
        }
        char line[64];
        int k = snprintf(line, sizeof line, "%s %ld %zu\n", method, clen, body);
        if (write(out, line, (size_t)k) != k) _exit(1);
        static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        size_t reply_len = strcmp(method, "HEAD") == 0 ? sizeof reply - 3 : sizeof reply - 1;
        if (write(s, reply, reply_len) != (ssize_t)reply_len) _exit(1);
        memmove(buf, buf + head + body, have - head - body);
        have -= head + body;
        buf[have] = '\0';
    }
}

/* One easy handle (the blocking client's) carries request after request: each sends its own method and body
 * and nothing of the one before (a POST's body, HEAD's no-body, a custom method), with the options the client's
 * requests share set once on the handle and the rest set on every attempt. */
static void test_one_handle_sends_each_request_as_its_own(void **state) {
    (void)state;
    static const char lock[] =
        "{\"version\":1,\"defaults\":{\"maxAttempts\":1,\"perAttemptTimeoutMs\":5000,\"totalBudgetMs\":10000,"
        "\"retryable\":[]},\"routes\":[{\"endpoint\":\"GET /r\"},{\"endpoint\":\"HEAD /r\"},{\"endpoint\":\"POST "
        "/r\",\"idempotencyRequired\":[]},{\"endpoint\":\"DELETE /r\",\"idempotencyRequired\":[]},"
        "{\"endpoint\":\"PUT /r\",\"idempotencyRequired\":[]}]}";
    rf_policy *pol = load_lock(lock);
    rf_error err;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    int port = 0;
    pid_t pid = start_recorder(fds[1], &port);
    close(fds[1]);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    rf_client *c = client_of(pol, url);
    const rf_request reqs[] = {
        {.method = "POST", .path = "/r", .body = "payload", .body_len = 7},
        {.method = "GET", .path = "/r"},
        {.method = "HEAD", .path = "/r"},
        {.method = "GET", .path = "/r"},
        {.method = "PUT", .path = "/r", .body = "xy", .body_len = 2},
        {.method = "DELETE", .path = "/r"},
        {.method = "POST", .path = "/r"},
        {.method = "GET", .path = "/r"},
    };
    const long body_len[] = {2, 2, 0, 2, 2, 2, 2, 2};
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        rf_response r = {0};
        assert_int_equal(rf_client_request(c, &reqs[i], NULL, NULL, &r, &err), RF_OK);
        assert_int_equal(r.status, 200);
        assert_int_equal((long)r.body_len, body_len[i]);
        rf_response_clear(&r);
    }
    rf_client_free(c);
    int status = 0;
    waitpid(pid, &status, 0);
    char seen[512] = "";
    ssize_t n = read(fds[0], seen, sizeof seen - 1);
    close(fds[0]);
    assert_true(n > 0);
    seen[n] = '\0';
    assert_string_equal(seen, "POST 7 7\nGET -1 0\nHEAD -1 0\nGET -1 0\nPUT 2 2\nDELETE -1 0\nPOST 0 0\nGET -1 0\n");
    rf_policy_free(pol);
}

/* Lines in the file at path. */
static long count_lines(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    long n = 0;
    for (int ch; (ch = fgetc(f)) != EOF;) n += ch == '\n';
    fclose(f);
    return n;
}

/* A client of policy p against the upstream that writes a new ledger, *ledger, at path (a mkstemp template, filled
 * in); the caller frees the client, closes the ledger and unlinks path. */
static rf_client *ledgered_client(const rf_policy *p, char *path, rf_ledger **ledger) {
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    rf_error err;
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, ledger, &err), RF_OK);
    rf_client_options o = {.policy = p, .base_url = base_url, .rng_seed = 1, .ledger = *ledger};
    rf_client *c = NULL;
    assert_int_equal(rf_client_new(&o, &c, &err), RF_OK);
    return c;
}

/* rf_client_run appends the lines of the requests it reports before it returns (one batch per run), so every
 * reported request's line is already in the file; the reported ones and those freed unreported make every line. */
static void test_lines_written_before_report(void **state) {
    (void)state;
    char path[] = "/tmp/rf-client-flow-XXXXXX";
    rf_ledger *ledger = NULL;
    rf_client *c = ledgered_client(policy, path, &ledger);
    rf_error err;
    enum { N = 6 };
    rf_request reqs[N];
    char paths[N][32];
    rf_response out[N];
    rf_pending *started[N];
    for (int i = 0; i < N; i++) {
        snprintf(paths[i], sizeof paths[i], "/echo/%d", i);
        reqs[i] = (rf_request){.method = "GET", .path = paths[i]};
        assert_int_equal(rf_client_start(c, &reqs[i], NULL, NULL, &out[i], &started[i], &err), RF_OK);
    }
    long reported = 0;
    for (int round = 0; round < 200 && reported < N - 1; round++) {
        rf_pending *done[2];
        size_t n = rf_client_run(c, 100, done, 2); /* two at a time: the others wait, ended or not */
        reported += (long)n;
        assert_true(count_lines(path) >= reported); /* before anything is freed */
        for (size_t k = 0; k < n; k++) {
            assert_int_equal(rf_pending_response(done[k])->status, 200);
            assert_string_equal(rf_pending_response(done[k])->ledger_error, "");
            rf_pending_free(done[k]);
        }
    }
    assert_true(reported >= N - 1);
    for (int i = 0; i < N; i++) /* whatever was not reported: freed now (its line, if it ended, goes out) */
        if (!rf_pending_done(started[i])) rf_pending_free(started[i]);
    for (int i = 0; i < N; i++) rf_response_clear(&out[i]);
    rf_client_free(c);
    assert_int_equal(rf_ledger_close(ledger, &err), RF_OK);
    assert_true(count_lines(path) >= reported);
    unlink(path);
}

/* Runs started request p until rf_client_run reports it (at most 5 s). */
static void run_until_done(rf_client *c, rf_pending *p) {
    rf_pending *done[4];
    size_t n = 0;
    for (int i = 0; i < 50 && n == 0; i++) n = rf_client_run(c, 100, done, 4);
    assert_int_equal(n, 1);
    assert_ptr_equal(done[0], p);
}

/* Started requests reuse the easy handles of finished ones: nothing of a request (its POST body, its headers,
 * its method) reaches the next one on the same handle. The first request's X-Fault-Script answers 503; a
 * second request on the reused handle that still sent it would get 503 too (its own identity, the script's
 * first step). */
static void test_reused_handle_carries_nothing_over(void **state) {
    (void)state;
    static const char lock[] = "{\"version\":1,\"defaults\":{\"maxAttempts\":1,\"perAttemptTimeoutMs\":5000,"
                               "\"totalBudgetMs\":10000,\"retryable\":[]},\"routes\":[{\"endpoint\":\"GET /echo/*\"},"
                               "{\"endpoint\":\"POST /echo/*\",\"idempotencyRequired\":[]}]}";
    rf_policy *pol = load_lock(lock);
    rf_client *c = client_of(pol, base_url);
    rf_error err;
    const char *lines[] = {"X-Fault-Script: 503,503"};
    rf_request first = {.method = "POST",
                        .path = "/echo/reuse-1",
                        .body = "payload",
                        .body_len = 7,
                        .headers = lines,
                        .n_headers = 1,
                        .idempotency_key = "reuse-key-1"};
    rf_request second = {.method = "GET", .path = "/echo/reuse-2"};
    rf_response r1 = {0}, r2 = {0};
    rf_pending *p = NULL;
    assert_int_equal(rf_client_start(c, &first, NULL, NULL, &r1, &p, &err), RF_OK);
    run_until_done(c, p);
    rf_pending_free(p);
    assert_int_equal(r1.status, 503);
    assert_int_equal(rf_client_start(c, &second, NULL, NULL, &r2, &p, &err), RF_OK);
    run_until_done(c, p);
    rf_pending_free(p);
    assert_int_equal(r2.status, 200);
    assert_int_equal(r2.attempts, 1);
    rf_response_clear(&r1);
    rf_response_clear(&r2);
    rf_client_free(c);
    rf_policy_free(pol);
}

/* A reported request may be freed after its client (its handle went back to the client when it was reported):
 * no use after free (ASan, valgrind). */
static void test_reported_request_outlives_its_client(void **state) {
    (void)state;
    rf_client *c = new_client();
    rf_request req = {.method = "GET", .path = "/echo/outlives"};
    rf_response r = {0};
    rf_pending *p = NULL;
    rf_error err;
    assert_int_equal(rf_client_start(c, &req, NULL, NULL, &r, &p, &err), RF_OK);
    run_until_done(c, p);
    rf_client_free(c);
    assert_true(rf_pending_done(p));
    rf_pending_free(p);
    assert_int_equal(r.status, 200);
    rf_response_clear(&r);
}

/* Several reported requests, freed in any order around their client's end: the one freed first goes back to the
 * client for its next start (a request started then is whole and answered), the others outlive the client. */
static void test_reported_requests_freed_around_the_client(void **state) {
    (void)state;
    rf_client *c = new_client();
    rf_request reqs[3] = {{.method = "GET", .path = "/echo/a"},
                          {.method = "GET", .path = "/echo/b"},
                          {.method = "GET", .path = "/echo/c"}};
    rf_response r[4] = {{0}};
    rf_pending *p[4] = {NULL};
    rf_error err;
    for (int i = 0; i < 3; i++) assert_int_equal(rf_client_start(c, &reqs[i], NULL, NULL, &r[i], &p[i], &err), RF_OK);
    rf_pending *done[4];
    size_t n = 0;
    for (int i = 0; i < 50 && n < 3; i++) n += rf_client_run(c, 100, done + n, 4 - n);
    assert_int_equal(n, 3);
    rf_pending_free(p[1]); /* the middle of the reported list */
    rf_request again = {.method = "GET", .path = "/echo/d"};
    assert_int_equal(rf_client_start(c, &again, NULL, NULL, &r[3], &p[3], &err), RF_OK);
    run_until_done(c, p[3]);
    assert_int_equal(r[3].status, 200);
    assert_int_equal(r[3].attempts, 1);
    rf_pending_free(p[3]);
    rf_client_free(c);
    rf_pending_free(p[2]);
    rf_pending_free(p[0]);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(r[i].status, 200);
        rf_response_clear(&r[i]);
    }
}

/* rf_pending_stop ends a started request at once, whatever it is doing, as stopped-by-caller: a plain request's
 * attempt in flight and both attempts of a hedged one are aborted and recorded (no status, the caller's error; the
 * hedged ones with fate cancelled), the next rf_client_run reports them, and each has its ledger line. A request
 * already reported, and NULL, are left as they are. */
static void test_stop_ends_requests_in_flight_with_their_lines(void **state) {
    (void)state;
    static const char lock[] =
        "{\"version\":1,\"defaults\":{\"maxAttempts\":2,\"perAttemptTimeoutMs\":5000,\"totalBudgetMs\":10000,"
        "\"retryable\":[\"HTTP_503\"]},\"routes\":[{\"endpoint\":\"GET /echo/*\"},"
        "{\"endpoint\":\"GET /h/*\",\"hedging\":{\"maxAttempts\":2,\"hedgingDelayMs\":100}}]}";
    rf_policy *pol = load_lock(lock);
    char path[] = "/tmp/rf-client-stop-XXXXXX";
    rf_ledger *ledger = NULL;
    rf_client *c = ledgered_client(pol, path, &ledger);
    rf_error err;
    const char *slow[] = {"X-Fault-Script: 200;delay=3000,200;delay=3000"};
    rf_request reqs[3] = {{.method = "GET", .path = "/echo/stop-plain", .headers = slow, .n_headers = 1},
                          {.method = "GET", .path = "/h/stop-hedged", .headers = slow, .n_headers = 1},
                          {.method = "GET", .path = "/echo/stop-quick"}};
    rf_response r[3] = {{0}};
    rf_pending *p[3] = {NULL};
    for (int i = 0; i < 3; i++) assert_int_equal(rf_client_start(c, &reqs[i], NULL, NULL, &r[i], &p[i], &err), RF_OK);
    rf_pending *done[4];
    size_t n = 0;
    for (int i = 0; i < 50 && n == 0; i++) n = rf_client_run(c, 100, done, 4);
    assert_int_equal(n, 1); /* the quick one */
    assert_ptr_equal(done[0], p[2]);
    for (int i = 0; i < 3; i++) n = rf_client_run(c, 100, done, 4); /* 300 ms more: the hedge starts at 100 */
    assert_int_equal(n, 0);
    assert_int_equal(rf_client_pending(c), 2);
    rf_pending_stop(p[2], "not used"); /* reported: left as it is */
    rf_pending_stop(NULL, "not used");
    rf_pending_stop(p[0], "cancelled: the caller stopped");
    rf_pending_stop(p[1], "cancelled: the caller stopped");
    rf_pending_stop(p[1], "twice"); /* done: left as it is */
    n = rf_client_run(c, 0, done, 4);
    assert_int_equal(n, 2);
    assert_int_equal(rf_client_pending(c), 0);
    assert_int_equal(r[2].reason, RF_REASON_SUCCESS);
    assert_int_equal(r[0].reason, RF_REASON_STOPPED_BY_CALLER);
    assert_int_equal(r[0].outcome, RF_OUTCOME_TERMINAL);
    assert_int_equal(r[0].status, 0);
    assert_int_equal(r[0].attempts, 1);
    assert_int_equal(r[0].n_tries, 1);
    assert_int_equal(r[0].tries[0].status, 0);
    assert_int_equal(r[0].tries[0].reason, RF_REASON_STOPPED_BY_CALLER);
    assert_int_equal(r[0].tries[0].fate, RF_FATE_NONE);
    assert_string_equal(r[0].tries[0].error, "cancelled: the caller stopped");
    assert_int_equal(r[0].body_len, 0);
    assert_true(r[0].elapsed_ms < 3000);
    assert_int_equal(r[1].reason, RF_REASON_STOPPED_BY_CALLER);
    assert_int_equal(r[1].attempts, 2);
    assert_int_equal(r[1].n_tries, 2);
    for (int t = 0; t < 2; t++) {
        assert_int_equal(r[1].tries[t].fate, RF_FATE_CANCELLED);
        assert_string_equal(r[1].tries[t].error, "cancelled: the caller stopped");
    }
    assert_true(r[1].elapsed_ms < 3000);
    for (int i = 0; i < 3; i++) assert_string_equal(r[i].ledger_error, ""); /* each line written, as it is */
    for (int i = 0; i < 3; i++) rf_pending_free(p[i]);
    for (int i = 0; i < 3; i++) rf_response_clear(&r[i]);
    rf_client_free(c);
    assert_int_equal(rf_ledger_close(ledger, &err), RF_OK);
    assert_int_equal(count_lines(path), 3); /* every request has its line */
    unlink(path);
    rf_policy_free(pol);
}

int main(int argc, char **argv) {
    if (argc > 1) serve_program = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_keeps_a_window),
        cmocka_unit_test(test_all_concurrency_one_runs_one_at_a_time),
        cmocka_unit_test(test_all_concurrency_caps_in_flight),
        cmocka_unit_test(test_all_concurrency_out_of_range),
        cmocka_unit_test(test_all_refused_beside_started_requests),
        cmocka_unit_test(test_reused_handle_carries_nothing_over),
        cmocka_unit_test(test_reported_request_outlives_its_client),
        cmocka_unit_test(test_reported_requests_freed_around_the_client),
        cmocka_unit_test(test_lines_written_before_report),
        cmocka_unit_test(test_one_handle_sends_each_request_as_its_own),
        cmocka_unit_test(test_stop_ends_requests_in_flight_with_their_lines),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
