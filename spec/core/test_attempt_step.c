/*
 * The attempt loop without a transport (retryfreeze/attempt_step.h) as a host with its own transport drives it,
 * linked against libretryfreeze_attempt alone: no libcurl on this program's compile or link line (cmake/attempt.cmake),
 * so a curl symbol or header reaching the attempt loop fails this build. One request under
 * examples/retry-budget.lock.json (POST /v1/jobs: maxAttempts 2, perAttemptTimeoutMs 2000, totalBudgetMs 2500): a
 * 429 with Retry-After then a 200, its tries and its ledger line read back; two 504s, stopped at max-attempts.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "retryfreeze/attempt_step.h"

#define TMP_FILES_TAG "rf-test-attempt-step"
#include "tmp_files.h"
#include <string.h>

static rf_policy *load_example(void) {
    rf_policy *p = NULL;
    rf_error err = {0};
    assert_int_equal(rf_policy_load_file(RF_EXAMPLES_DIR "/retry-budget.lock.json", &p, &err), RF_OK);
    return p;
}

/* A 429 carrying "Retry-After: 1", then a 200: the retry waits the header's second, the second attempt's per-try
 * timeout is what the deadline leaves (2500 - 1100 ms), and the ledger line says what the response says. */
static void test_429_then_200(void **state) {
    (void)state;
    rf_policy *p = load_example();
    const char *path = tmp_file("ledger.jsonl");
    rf_ledger *ledger = NULL;
    rf_error err = {0};
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &ledger, &err), RF_OK);

    rf_request req = {.method = "POST", .path = "/v1/jobs", .idempotency_key = "job-1"};
    rf_response resp;
    rf_step s;
    assert_int_equal(rf_step_init(&s, p, &req, &resp, 0, &err), RF_OK);
    rf_rng rng;
    rf_rng_seed(&rng, 42);
    int64_t timeout_ms = 0, delay_ms = 0;
    rf_reason stop = RF_REASON_SUCCESS;
    int hook_rc = 0;

    assert_true(rf_step_begin(&s, 0, &timeout_ms, &stop));
    assert_int_equal(timeout_ms, 2000);
    rf_step_result r1 = {.status = 429, .transport = RF_TRANSPORT_OK, .now_ms = 100, .wall_ms = 1700000000000};
    r1.hints[RF_WAIT_RETRY_AFTER] = "1";
    assert_true(rf_step_after(&s, &r1, &rng, NULL, NULL, NULL, &hook_rc, &delay_ms, &stop));
    assert_int_equal(delay_ms, 1000);

    assert_true(rf_step_begin(&s, 1100, &timeout_ms, &stop));
    assert_int_equal(timeout_ms, 1400);
    rf_step_result r2 = {.status = 200, .transport = RF_TRANSPORT_OK, .now_ms = 1200, .wall_ms = 1700000001200};
    assert_false(rf_step_after(&s, &r2, &rng, NULL, NULL, NULL, &hook_rc, &delay_ms, &stop));
    assert_string_equal(rf_reason_name(stop), "success");
    rf_step_end_request(&s, stop, 1200, 1700000001200, ledger);
    assert_int_equal(rf_ledger_close(ledger, &err), RF_OK);

    assert_true(resp.ok);
    assert_int_equal(resp.status, 200);
    assert_int_equal(resp.attempts, 2);
    assert_int_equal(resp.elapsed_ms, 1200);
    assert_string_equal(rf_outcome_name(resp.outcome), "success");
    assert_string_equal(resp.route, "POST /v1/jobs");
    assert_string_equal(resp.ledger_error, "");
    assert_int_equal(resp.n_tries, 2);
    assert_int_equal(resp.tries[0].status, 429);
    assert_string_equal(resp.tries[0].class_name, "HTTP_429");
    assert_string_equal(rf_reason_name(resp.tries[0].reason), "pinned-status");
    assert_string_equal(resp.tries[0].retry_after, "1");
    assert_string_equal(resp.tries[0].retry_after_header, "retry-after");
    assert_int_equal(resp.tries[0].timeout_ms, 2000);
    assert_int_equal(resp.tries[0].elapsed_ms, 100);
    assert_int_equal(resp.tries[1].status, 200);
    assert_int_equal(resp.tries[1].delay_ms, 1000);
    assert_int_equal(resp.tries[1].timeout_ms, 1400);
    assert_int_equal(resp.tries[1].elapsed_ms, 100);

    rf_ledger_reader *rd = NULL;
    assert_int_equal(rf_ledger_reader_open(path, &rd, &err), RF_OK);
    rf_ledger_record rec;
    assert_int_equal(rf_ledger_reader_next(rd, &rec, &err), RF_LEDGER_RECORD);
    assert_string_equal(rec.route, "POST /v1/jobs");
    assert_string_equal(rec.key, "job-1");
    assert_string_equal(rec.outcome, "success");
    assert_string_equal(rec.reason, "success");
    assert_int_equal(rec.attempts, 2);
    assert_int_equal(rec.elapsed_ms, 1200);
    assert_int_equal(rec.status, 200);
    assert_int_equal(rec.n_tries, 2);
    assert_string_equal(rec.tries[0].reason, "pinned-status");
    assert_string_equal(rec.tries[0].retry_after, "1");
    assert_int_equal(rec.tries[1].delay_ms, 1000);
    assert_int_equal(rf_ledger_reader_next(rd, &rec, &err), RF_LEDGER_END);
    rf_ledger_reader_close(rd);
    rf_response_clear(&resp);
    rf_policy_free(p);
}

/* Two 504s (class HTTP_504, retryable through the lock's GATEWAY_TIMEOUT = TIMEOUT + HTTP_504): the second is the
 * last of maxAttempts 2, so the request ends exhausted. */
static void test_max_attempts(void **state) {
    (void)state;
    rf_policy *p = load_example();
    rf_request req = {.method = "POST", .path = "/v1/jobs", .idempotency_key = "job-2"};
    rf_response resp;
    rf_step s;
    rf_error err = {0};
    assert_int_equal(rf_step_init(&s, p, &req, &resp, 0, &err), RF_OK);
    rf_rng rng;
    rf_rng_seed(&rng, 7);
    int64_t timeout_ms = 0, delay_ms = 0, now = 0;
    rf_reason stop = RF_REASON_SUCCESS;
    int hook_rc = 0;
    assert_true(rf_step_begin(&s, now, &timeout_ms, &stop));
    rf_step_result r = {.status = 504, .transport = RF_TRANSPORT_OK, .now_ms = now + 10, .wall_ms = 1700000000000};
    assert_true(rf_step_after(&s, &r, &rng, NULL, NULL, NULL, &hook_rc, &delay_ms, &stop));
    assert_true(delay_ms >= 0 && delay_ms < 2500);
    now = r.now_ms + delay_ms;
    assert_true(rf_step_begin(&s, now, &timeout_ms, &stop));
    r.now_ms = now + 10;
    assert_false(rf_step_after(&s, &r, &rng, NULL, NULL, NULL, &hook_rc, &delay_ms, &stop));
    assert_string_equal(rf_reason_name(stop), "max-attempts");
    rf_step_end_request(&s, stop, r.now_ms, 1700000000100, NULL);
    assert_false(resp.ok);
    assert_string_equal(rf_outcome_name(resp.outcome), "exhausted");
    assert_int_equal(resp.attempts, 2);
    assert_int_equal(resp.n_tries, 2);
    assert_string_equal(resp.tries[0].class_name, "HTTP_504");
    assert_string_equal(rf_reason_name(resp.tries[0].reason), "pinned-status");
    assert_string_equal(rf_reason_name(resp.tries[1].reason), "max-attempts");
    assert_string_equal(resp.tries[1].class_name, "HTTP_504");
    rf_response_clear(&resp);
    rf_policy_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_429_then_200),
        cmocka_unit_test(test_max_attempts),
    };
    return cmocka_run_group_tests(tests, tmp_files_setup, tmp_files_teardown);
}
