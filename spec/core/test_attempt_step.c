/*
 * The step machine for a host's own transport (retryfreeze/attempt_step.h): rf_step_restart starts the next request
 * on a step whose last one ended, and gives the same tries, outcome and ledger line as a fresh rf_step_init would,
 * whatever the step ran before (more tries, a key, a failure); refusals. ASan and valgrind see that it allocates
 * nothing and leaks nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "retryfreeze/attempt_step.h"
#include "retryfreeze/policy.h"

#include <string.h>

static const char LOCK[] =
    "{\"version\":1,\"defaults\":{\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,"
    "\"retryable\":[\"HTTP_503\"],\"backoff\":{\"baseMs\":10,\"maxMs\":40,\"jitter\":\"none\"}},"
    "\"routes\":[{\"endpoint\":\"GET /items/*\"},{\"endpoint\":\"POST /v1/jobs\"}]}";

static rf_policy *policy(void) {
    rf_policy *p = NULL;
    rf_error err = {0};
    if (rf_policy_load_buffer(LOCK, sizeof LOCK - 1, &p, &err) != RF_OK)
        fail_msg("lock: %s: %s", err.path, err.message);
    return p;
}

/* Runs req on s (started by the caller) with the statuses given, one per attempt, from now_ms on; ends it. */
static void run(rf_step *s, const int *statuses, size_t n, int64_t now_ms) {
    rf_rng rng;
    rf_rng_seed(&rng, 7);
    rf_reason stop = RF_REASON_COUNT;
    for (size_t i = 0;; i++) {
        int64_t timeout = 0, delay = 0;
        if (!rf_step_begin(s, now_ms, &timeout, &stop)) break;
        assert_true(i < n);
        now_ms += 5;
        rf_step_result res = {.status = statuses[i], .transport = RF_TRANSPORT_OK, .now_ms = now_ms,
                              .wall_ms = 1795972801123};
        int hook_rc = 0;
        if (!rf_step_after(s, &res, &rng, NULL, NULL, NULL, &hook_rc, &delay, &stop)) break;
        now_ms += delay;
    }
    rf_step_end_request(s, stop, now_ms, 1795972801123, NULL);
}

static void assert_same_response(const rf_response *a, const rf_response *b) {
    assert_int_equal(a->status, b->status);
    assert_int_equal(a->ok, b->ok);
    assert_int_equal(a->outcome, b->outcome);
    assert_int_equal(a->reason, b->reason);
    assert_int_equal(a->attempts, b->attempts);
    assert_int_equal(a->elapsed_ms, b->elapsed_ms);
    assert_int_equal(a->n_tries, b->n_tries);
    assert_memory_equal(a->tries, b->tries, a->n_tries * sizeof *a->tries);
    assert_string_equal(a->route ? a->route : "", b->route ? b->route : "");
}

/* A restarted step answers as a fresh one: after a request of three tries with a key, one of a single try. */
static void test_restart_answers_as_a_fresh_step(void **state) {
    (void)state;
    rf_policy *p = policy();
    rf_step s;
    rf_response resp;
    rf_request first = {.method = "POST", .path = "/v1/jobs", .idempotency_key = "k-1"};
    assert_int_equal(rf_step_init(&s, p, &first, &resp, 1000, NULL), RF_OK);
    static const int three[] = {503, 503, 503};
    run(&s, three, 3, 1000);
    assert_int_equal(resp.n_tries, 3);
    assert_int_equal(resp.outcome, RF_OUTCOME_EXHAUSTED);
    rf_try *tries = resp.tries;

    rf_request second = {.method = "GET", .path = "/items/9"};
    assert_int_equal(rf_step_restart(&s, &second, 2000, NULL), RF_OK);
    assert_ptr_equal(resp.tries, tries); /* reused, not allocated again */
    static const int ok[] = {200};
    run(&s, ok, 1, 2000);

    rf_step fresh;
    rf_response fresh_resp;
    assert_int_equal(rf_step_init(&fresh, p, &second, &fresh_resp, 2000, NULL), RF_OK);
    run(&fresh, ok, 1, 2000);
    assert_same_response(&resp, &fresh_resp);
    assert_int_equal(resp.outcome, RF_OUTCOME_SUCCESS);
    rf_response_clear(&fresh_resp);

    /* And back to a failing request: the same as fresh again (no try of the first request shows through). */
    static const int two[] = {503, 200};
    assert_int_equal(rf_step_restart(&s, &first, 3000, NULL), RF_OK);
    run(&s, two, 2, 3000);
    assert_int_equal(rf_step_init(&fresh, p, &first, &fresh_resp, 3000, NULL), RF_OK);
    run(&fresh, two, 2, 3000);
    assert_same_response(&resp, &fresh_resp);
    rf_response_clear(&fresh_resp);
    rf_response_clear(&resp);
    rf_policy_free(p);
}

/* Refusals: a step with no ended request (NULL, running, cleared); a bad request leaves the step restartable. */
static void test_restart_refusals(void **state) {
    (void)state;
    rf_policy *p = policy();
    rf_error err = {0};
    rf_request req = {.method = "GET", .path = "/items/1"};
    assert_int_equal(rf_step_restart(NULL, &req, 0, &err), RF_EINVAL);
    assert_string_equal(err.path, "step");
    rf_step s;
    rf_response resp;
    assert_int_equal(rf_step_init(&s, p, &req, &resp, 0, NULL), RF_OK);
    assert_int_equal(rf_step_restart(&s, &req, 0, &err), RF_EINVAL); /* still running */
    assert_string_equal(err.path, "step");
    static const int ok[] = {200};
    run(&s, ok, 1, 0);
    rf_request lower = {.method = "get", .path = "/items/1"};
    assert_int_equal(rf_step_restart(&s, &lower, 0, &err), RF_EINVAL);
    rf_request no_slash = {.method = "GET", .path = "items"};
    assert_int_equal(rf_step_restart(&s, &no_slash, 0, &err), RF_EINVAL);
    assert_string_equal(err.path, "path");
    assert_int_equal(rf_step_restart(&s, &req, 10, &err), RF_OK); /* still restartable */
    run(&s, ok, 1, 10);
    assert_int_equal(resp.outcome, RF_OUTCOME_SUCCESS);
    rf_response_clear(&resp);
    assert_int_equal(rf_step_restart(&s, &req, 0, &err), RF_EINVAL); /* cleared: no tries array */
    rf_policy_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_restart_answers_as_a_fresh_step),
        cmocka_unit_test(test_restart_refusals),
    };
    return cmocka_run_group_tests_name("attempt_step", tests, NULL, NULL);
}
