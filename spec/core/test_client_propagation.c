/*
 * The libcurl client's propagation on the wire (lock field propagation, retryfreeze/propagation.h): a loopback
 * upstream in a child process answers every request 503 (with x-envoy-overloaded on /shed) and records the attempt
 * number and the deadline each request carried. Checked: attempts 1, 2, 3 with a deadline that shrinks and never
 * exceeds totalBudgetMs; a request's own header of those names replaced; an overloaded 503 not retried; the
 * caller's headers (rf_request.inbound_headers) narrowing the attempts and the deadline, bad ones narrowing
 * nothing; nothing sent without propagation.
 */
#define _POSIX_C_SOURCE 200809L
#include "retryfreeze/attempt_step.h"
#include "retryfreeze/client.h"
#include "retryfreeze/policy.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* perAttemptTimeoutMs = totalBudgetMs and a fixed 100 ms backoff: each attempt's deadline header is the time left,
 * at least 100 ms less than the one before. /plain has no propagation. BUDGET_MS is far above what three quick 503s
 * take, even under valgrind on a loaded machine, so every request reaches its three attempts. */
#define BUDGET_MS 10000
static const char LOCK[] =
    "{\"version\":1,\"defaults\":{\"maxAttempts\":3,\"perAttemptTimeoutMs\":10000,\"totalBudgetMs\":10000,"
    "\"minAttemptMs\":50,\"retryable\":[\"HTTP_503\"],\"backoff\":{\"baseMs\":100,\"multiplier\":1,\"maxMs\":100,"
    "\"jitter\":\"none\"}},\"routes\":[{\"endpoint\":\"GET /fail\",\"propagation\":{}},{\"endpoint\":\"GET /shed\","
    "\"propagation\":{}},{\"endpoint\":\"GET /plain\"}]}";

static rf_policy *policy;
static int record_fd = -1; /* the read end of the recorder's pipe */
static pid_t recorder = -1;
static char base_url[64];

/* The value of header name in the head [head, end) (case-insensitive), copied into out ("-" when absent). */
static void header_value(const char *head, const char *end, const char *name, char *out, size_t cap) {
    snprintf(out, cap, "-");
    const size_t n = strlen(name);
    for (const char *l = strstr(head, "\r\n"); l != NULL && l < end; l = strstr(l + 2, "\r\n")) {
        if (strncasecmp(l + 2, name, n) == 0 && l[2 + n] == ':') {
            const char *v = l + 3 + n, *e = strstr(v, "\r\n");
            while (*v == ' ') v++;
            snprintf(out, cap, "%.*s", (int)(e - v), v);
            return;
        }
    }
}

/* The recorder: one connection after another, each request answered 503, and "PATH ATTEMPT DEADLINE\n" written
 * to fd out for each. */
static void record(int ls, int out) {
    static char buf[1 << 16];
    for (;;) {
        int s = accept(ls, NULL, NULL);
        if (s < 0) _exit(0);
        size_t have = 0;
        buf[0] = '\0';
        for (;;) {
            char *end;
            while ((end = strstr(buf, "\r\n\r\n")) == NULL) {
                ssize_t n = read(s, buf + have, sizeof buf - 1 - have);
                if (n <= 0) goto next;
                have += (size_t)n;
                buf[have] = '\0';
            }
            char path[64] = "", attempt[32], deadline[32], line[160];
            sscanf(buf, "%*s %63s", path);
            header_value(buf, end, "x-envoy-attempt-count", attempt, sizeof attempt);
            header_value(buf, end, "x-envoy-expected-rq-timeout-ms", deadline, sizeof deadline);
            int k = snprintf(line, sizeof line, "%s %s %s\n", path, attempt, deadline);
            if (write(out, line, (size_t)k) != k) _exit(1);
            const char *reply = strcmp(path, "/shed") == 0
                                    ? "HTTP/1.1 503 Busy\r\nx-envoy-overloaded: true\r\nContent-Length: 0\r\n\r\n"
                                    : "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n";
            if (write(s, reply, strlen(reply)) != (ssize_t)strlen(reply)) _exit(1);
            size_t head = (size_t)(end + 4 - buf);
            memmove(buf, buf + head, have - head + 1);
            have -= head;
        }
    next:
        close(s);
    }
}

static int setup(void **state) {
    (void)state;
    rf_error err;
    if (rf_policy_load_buffer(LOCK, sizeof LOCK - 1, &policy, &err) != RF_OK) {
        fprintf(stderr, "lock: %s %s\n", err.path, err.message);
        return -1;
    }
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fds[2];
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 8) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &len) != 0 || pipe(fds) != 0)
        return -1;
    snprintf(base_url, sizeof base_url, "http://127.0.0.1:%d", ntohs(a.sin_port));
    recorder = fork();
    if (recorder < 0) return -1;
    if (recorder == 0) {
        close(fds[0]);
        record(ls, fds[1]);
        _exit(0);
    }
    close(ls);
    close(fds[1]);
    record_fd = fds[0];
    return 0;
}

static int teardown(void **state) {
    (void)state;
    if (recorder > 0) {
        kill(recorder, SIGTERM);
        waitpid(recorder, NULL, 0);
    }
    if (record_fd >= 0) close(record_fd);
    rf_policy_free(policy);
    return 0;
}

/* One recorded request. */
typedef struct seen {
    char path[64], attempt[32], deadline[32];
} seen;

/* Reads the n records the requests so far left in the pipe (the recorder writes each before it answers). */
static void read_seen(seen *out, size_t n) {
    static char pending[4096];
    static size_t have = 0;
    for (size_t i = 0; i < n; i++) {
        char *nl;
        while ((nl = memchr(pending, '\n', have)) == NULL) {
            ssize_t r = read(record_fd, pending + have, sizeof pending - have);
            assert_true(r > 0);
            have += (size_t)r;
        }
        *nl = '\0';
        assert_int_equal(sscanf(pending, "%63s %31s %31s", out[i].path, out[i].attempt, out[i].deadline), 3);
        size_t used = (size_t)(nl + 1 - pending);
        memmove(pending, nl + 1, have - used);
        have -= used;
    }
}

/* Runs req on a fresh client into *r. */
static void run(const rf_request *req, rf_response *r) {
    rf_client_options o = {.policy = policy, .base_url = base_url, .rng_seed = 1};
    rf_client *c = NULL;
    rf_error err;
    assert_int_equal(rf_client_new(&o, &c, &err), RF_OK);
    assert_int_equal(rf_client_request(c, req, NULL, NULL, r, &err), RF_OK);
    rf_client_free(c);
}

static void test_every_attempt_says_its_number_and_deadline(void **state) {
    (void)state;
    const char *own[] = {"X-Envoy-Attempt-Count: 9", "x-envoy-expected-rq-timeout-ms: 99999"};
    rf_request req = {.method = "GET", .path = "/fail", .headers = own, .n_headers = 2};
    rf_response r = {0};
    run(&req, &r);
    assert_int_equal(r.attempts, 3);
    assert_int_equal(r.reason, RF_REASON_MAX_ATTEMPTS);
    assert_true(r.overloaded); /* exhausted: a proxy tells its caller */
    seen s[3];
    read_seen(s, 3);
    long before = BUDGET_MS + 100;
    for (int i = 0; i < 3; i++) {
        char want[4];
        snprintf(want, sizeof want, "%d", i + 1);
        assert_string_equal(s[i].path, "/fail");
        assert_string_equal(s[i].attempt, want); /* the request's own 9 replaced */
        long d = strtol(s[i].deadline, NULL, 10);
        assert_true(d <= BUDGET_MS);                /* never above totalBudgetMs */
        assert_true(d <= before - 100);             /* shrinking by at least the backoff */
        assert_int_equal(d, r.tries[i].timeout_ms); /* the attempt's per-try timeout */
        before = d;
    }
    rf_response_clear(&r);
}

static void test_overloaded_response_is_not_retried(void **state) {
    (void)state;
    rf_request req = {.method = "GET", .path = "/shed"};
    rf_response r = {0};
    run(&req, &r);
    assert_int_equal(r.attempts, 1);
    assert_int_equal(r.reason, RF_REASON_UPSTREAM_OVERLOADED);
    assert_true(r.overloaded);
    seen s[1];
    read_seen(s, 1);
    assert_string_equal(s[0].attempt, "1");
    rf_response_clear(&r);
}

static void test_inbound_narrows_only(void **state) {
    (void)state;
    /* the caller is retrying: one attempt here */
    const char *retrying[] = {"X-Envoy-Attempt-Count: 1, 2", "other: 7"};
    rf_request req = {.method = "GET", .path = "/fail", .inbound_headers = retrying, .n_inbound_headers = 2};
    rf_response r = {0};
    run(&req, &r);
    assert_int_equal(r.attempts, 1);
    assert_int_equal(r.reason, RF_REASON_INBOUND_RETRY);
    assert_int_equal(r.inbound.attempt, 2);
    assert_false(r.overloaded);
    seen s[3];
    read_seen(s, 1);
    rf_response_clear(&r);
    /* the caller has 250 ms left: so has this request, and so says its first attempt */
    const char *short_deadline[] = {"x-envoy-expected-rq-timeout-ms: 250", "x-envoy-expected-rq-timeout-ms: 900"};
    req = (rf_request){.method = "GET", .path = "/fail", .inbound_headers = short_deadline, .n_inbound_headers = 2};
    run(&req, &r);
    assert_true(r.inbound.has_deadline);
    assert_int_equal(r.inbound.deadline_ms, 250);
    assert_true(r.elapsed_ms <= 260);
    read_seen(s, (size_t)r.attempts);
    assert_true(strtol(s[0].deadline, NULL, 10) <= 250);
    rf_response_clear(&r);
    /* bad values narrow nothing and are no error */
    const char *bad[] = {"x-envoy-expected-rq-timeout-ms: -5",
                         "x-envoy-expected-rq-timeout-ms: 1e2",
                         "x-envoy-expected-rq-timeout-ms: 99999999999999999999",
                         "x-envoy-attempt-count: abc",
                         "x-envoy-attempt-count: 0",
                         "x-envoy-attempt-count:",
                         "x-envoy-attempt-count"};
    req = (rf_request){.method = "GET", .path = "/fail", .inbound_headers = bad, .n_inbound_headers = 7};
    run(&req, &r);
    assert_int_equal(r.attempts, 3);
    assert_false(r.inbound.has_deadline);
    assert_int_equal(r.inbound.attempt, 0);
    read_seen(s, 3);
    rf_response_clear(&r);
}

static void test_nothing_without_propagation(void **state) {
    (void)state;
    const char *retrying[] = {"x-envoy-attempt-count: 2", "x-envoy-expected-rq-timeout-ms: 1"};
    rf_request req = {.method = "GET", .path = "/plain", .inbound_headers = retrying, .n_inbound_headers = 2};
    rf_response r = {0};
    run(&req, &r);
    assert_int_equal(r.attempts, 3);
    assert_false(r.overloaded);
    assert_int_equal(r.inbound.attempt, 0);
    seen s[3];
    read_seen(s, 3);
    for (int i = 0; i < 3; i++) {
        assert_string_equal(s[i].attempt, "-");
        assert_string_equal(s[i].deadline, "-");
    }
    rf_response_clear(&r);
}

/* Every name of RF_FRAMING_HEADERS, in any case and with spaces or tabs around it, is refused as a request header
 * (a Content-Length: 0 before a body that is a second request made the upstream execute two), by the one rule
 * every sender calls; rf_step_init refuses it before its host sends anything. */
#define RFT_STR(name, str) str,
static void test_framing_headers_refused(void **state) {
    (void)state;
    static const char *const names[] = {RF_FRAMING_HEADERS(RFT_STR)};
    char line[80];
    rf_error err;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        assert_string_equal(rf_framing_header(names[i], strlen(names[i])), names[i]);
        for (int v = 0; v < 3; v++) {
            snprintf(line, sizeof line, v == 0 ? "%s: 0" : v == 1 ? " %s\t: 0" : "%s : 0", names[i]);
            if (v == 0) line[0] = (char)(line[0] - 'a' + 'A');
            assert_int_equal(rf_request_header_check(line, &err), RF_EINVAL);
            assert_string_equal(err.path, "headers");
            assert_non_null(strstr(err.message, names[i]));
        }
    }
    assert_null(rf_framing_header("content-lengthx", 15));
    assert_null(rf_framing_header("x-te", 4));
    assert_null(rf_framing_header(NULL, 0));
    assert_int_equal(rf_request_header_check("X-Trace: a", &err), RF_OK);
    assert_int_equal(rf_request_header_check("X-A: a\r\nContent-Length: 0", &err), RF_EINVAL);
    assert_int_equal(rf_request_header_check("idempotency-key: k", &err), RF_EINVAL);
    assert_int_equal(rf_request_header_check(NULL, &err), RF_EINVAL);
    const char *smuggle[] = {"X-Fault-Script: 200", "CONTENT-LENGTH: 0"};
    rf_request req = {.method = "GET", .path = "/plain", .headers = smuggle, .n_headers = 2};
    rf_step st;
    rf_response r = {0};
    assert_int_equal(rf_step_init(&st, policy, &req, &r, 0, &err), RF_EINVAL);
    assert_string_equal(err.path, "headers");
    assert_non_null(strstr(err.message, "\"CONTENT-LENGTH\" is content-length"));
    rf_response_clear(&r);
}

/* A hedged route's request whose caller already retries (inbound attempt > 1, with inboundAttempt) makes one
 * attempt: it is not hedged, so rf_step_init takes it; the caller's first attempt leaves it hedged, refused. */
static void test_inbound_attempt_unhedges(void **state) {
    (void)state;
    static const char lock[] = "{\"endpoint\": \"GET /h\", \"maxAttempts\": 3, \"perAttemptTimeoutMs\": 1000, "
                               "\"totalBudgetMs\": 3000, \"retryable\": [\"HTTP_503\"], \"propagation\": {}, "
                               "\"hedging\": {\"maxAttempts\": 3, \"hedgingDelayMs\": 100}}";
    rf_policy *p = NULL;
    rf_error err;
    assert_int_equal(rf_policy_load_buffer(lock, sizeof lock - 1, &p, &err), RF_OK);
    const char *second[] = {"X-Envoy-Attempt-Count: 2"}, *first[] = {"x-envoy-attempt-count: 1"};
    rf_request req = {.method = "GET", .path = "/h", .inbound_headers = second, .n_inbound_headers = 1};
    rf_step st;
    rf_response r = {0};
    assert_int_equal(rf_step_init(&st, p, &req, &r, 0, &err), RF_OK);
    assert_int_equal(r.inbound.attempt, 2);
    rf_response_clear(&r);
    req.inbound_headers = first;
    assert_int_equal(rf_step_init(&st, p, &req, &r, 0, &err), RF_EINVAL);
    assert_string_equal(err.path, "hedging");
    rf_response_clear(&r);
    rf_policy_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_attempt_says_its_number_and_deadline),
        cmocka_unit_test(test_overloaded_response_is_not_retried),
        cmocka_unit_test(test_inbound_narrows_only),
        cmocka_unit_test(test_nothing_without_propagation),
        cmocka_unit_test(test_framing_headers_refused),
        cmocka_unit_test(test_inbound_attempt_unhedges),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
