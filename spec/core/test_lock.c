/* Lock loading: the flat and multi-route forms, defaults, every refusal with its JSON path, the digest. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_locks.h"

#include "retryfreeze/decide.h"
#include "retryfreeze/policy.h"
#include "retryfreeze/input.h"
#include "retryfreeze/lock_schema.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DESK_LOCK                                                                                             \
    "{\"$comment\": \"retry-budget.lock.json — bump only with pairing sign-off\", \"endpoint\": \"POST "    \
    "/v1/jobs\", \"perAttemptTimeoutMs\": 2000, \"maxAttempts\": 2, \"totalBudgetMs\": 2500, \"retryable\": " \
    "[\"GATEWAY_TIMEOUT\", \"HTTP_429\", \"CONNECT_RESET\"], \"notRetryable\": [\"HTTP_400\", \"HTTP_401\", " \
    "\"HTTP_403\", \"HTTP_404\", \"HTTP_422\", \"HANDLER_5XX\"]}"

#define MINIMAL           \
    "\"endpoint\":\"GET " \
    "/a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,\"retryable\":[\"HTTP_503\"]"

/* The keys the lock schema allows in the object at JSON path `where`'s parent ("$.backoff.base" → backoff; a key at
 * "$" → the top of a multi-route lock), in the schema's order, then "$comment": what an unknown key's refusal lists
 * there, so that a field added to the schema needs no edit here. */
static void schema_keys(const char *where, char *buf, size_t cap) {
    char object[128] = "";
    const char *start = strncmp(where, "$.", 2) == 0 ? where + 2 : where, *dot = strrchr(start, '.');
    if (dot != NULL) snprintf(object, sizeof object, "%.*s", (int)(dot - start), start);
    size_t used = 0;
    for (size_t i = 0; i < rf_lock_schema_count(); i++) {
        const rf_lock_field *f = rf_lock_schema_field(i);
        const char *parent = f->parent >= 0 ? rf_lock_schema_field((size_t)f->parent)->path : "";
        if (strcmp(parent, object) != 0 || (object[0] == '\0' && f->place == RF_PLACE_ROUTE)) continue;
        used += (size_t)snprintf(buf + used, cap - used, "%s, ", f->key);
    }
    snprintf(buf + used, cap - used, "$comment");
}

/* A refusal's message equals want, where a trailing "allowed here: …)" stands for schema_keys(path). */
static void same_message(const char *got, const char *want, const char *path) {
    static const char marker[] = "allowed here: …)";
    size_t n = strlen(want), m = sizeof marker - 1;
    if (n < m || strcmp(want + n - m, marker) != 0) {
        assert_string_equal(got, want);
        return;
    }
    char keys[512], full[1024];
    schema_keys(path, keys, sizeof keys);
    snprintf(full, sizeof full, "%.*sallowed here: %s)", (int)(n - m), want, keys);
    assert_string_equal(got, full);
}

static void test_desk_lock_loads_with_defaults(void **state) {
    (void)state;
    rf_policy *p = lock_load(DESK_LOCK);
    assert_int_equal(rf_policy_route_count(p), 1);
    rf_route_view r;
    assert_int_equal(rf_policy_route(p, 0, &r), RF_OK);
    assert_string_equal(r.endpoint, "POST /v1/jobs");
    assert_int_equal(r.max_attempts, 2);
    assert_int_equal(r.per_attempt_timeout_ms, 2000);
    assert_int_equal(r.total_budget_ms, 2500);
    assert_int_equal(r.min_attempt_ms, 200);
    assert_int_equal(r.n_retryable, 4); /* GATEWAY_TIMEOUT expands to HTTP_504 + TIMEOUT */
    assert_string_equal(r.retryable[0], "HTTP_429");
    assert_string_equal(r.retryable[1], "HTTP_504");
    assert_string_equal(r.retryable[2], "TIMEOUT");
    assert_string_equal(r.retryable[3], "CONNECT_RESET");
    assert_int_equal(r.n_not_retryable, 6);
    assert_string_equal(r.not_retryable[5], "HTTP_5XX");
    assert_int_equal(r.n_idempotency_required, 3);
    assert_string_equal(r.idempotency_required[0], "DELETE");
    assert_string_equal(r.idempotency_required[2], "POST");
    assert_int_equal(r.backoff_base_ms, 100);
    assert_int_equal(r.backoff_multiplier_milli, 2000);
    assert_int_equal(r.backoff_max_ms, 10000);
    assert_int_equal(r.backoff_jitter, RF_JITTER_FULL);
    assert_true(r.retry_after_honor);
    assert_int_equal(r.retry_after_max_ms, 120000);
    const char *d = rf_policy_digest(p);
    assert_int_equal(strlen(d), 71);
    assert_memory_equal(d, "sha256:", 7);
    assert_false(rf_policy_retry_budget(p, NULL, NULL));
    rf_policy_free(p);
}

static void test_multi_route_inherits_field_by_field(void **state) {
    (void)state;
    rf_policy *p = lock_load(
        "{\"version\":1,\"defaults\":{\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,"
        "\"totalBudgetMs\":4000,\"retryable\":[\"HTTP_503\"],\"backoff\":{\"baseMs\":50,\"jitter\":\"none\"}},"
        "\"routes\":[{\"endpoint\":\"GET /v1/jobs/{id}\",\"maxAttempts\":4,\"backoff\":{\"maxMs\":400}},"
        "{\"endpoint\":\"POST /v1/jobs\",\"retryable\":[\"TIMEOUT\"],\"idempotencyRequired\":[]}]}");
    assert_int_equal(rf_policy_route_count(p), 2);
    rf_route_view get, post;
    /* Routes are sorted by endpoint text: "GET …" before "POST …". */
    rf_policy_route(p, 0, &get);
    rf_policy_route(p, 1, &post);
    assert_string_equal(get.endpoint, "GET /v1/jobs/{id}");
    assert_int_equal(get.max_attempts, 4);
    assert_int_equal(get.per_attempt_timeout_ms, 1000);
    assert_int_equal(get.backoff_base_ms, 50);
    assert_int_equal(get.backoff_max_ms, 400);
    assert_int_equal(get.backoff_jitter, RF_JITTER_NONE);
    assert_int_equal(post.max_attempts, 3);
    assert_string_equal(post.retryable[0], "TIMEOUT");
    assert_int_equal(post.n_retryable, 1);
    assert_int_equal(post.n_idempotency_required, 0);
    assert_int_equal(post.backoff_max_ms, 10000);
    rf_policy_free(p);
}

static void test_digest_ignores_whitespace_order_comment_and_alias_spelling(void **state) {
    (void)state;
    rf_policy *a = lock_load("{" MINIMAL "}");
    rf_policy *b = lock_load("{ \"$comment\": \"x\",\n \"retryable\": [\"HTTP_503\"], \"totalBudgetMs\": 5000,"
                             "\"perAttemptTimeoutMs\": 1000, \"maxAttempts\": 3, \"endpoint\": \"GET /a\" }");
    rf_policy *c = lock_load("{\"version\":1,\"routes\":[{" MINIMAL "}]}");
    rf_policy *d = lock_load("{" MINIMAL ",\"minAttemptMs\":200,\"backoff\":{\"baseMs\":100}}"); /* the defaults */
    assert_string_equal(rf_policy_digest(a), rf_policy_digest(b));
    assert_string_equal(rf_policy_digest(a), rf_policy_digest(c));
    assert_string_equal(rf_policy_digest(a), rf_policy_digest(d));
    rf_policy *e = lock_load("{\"endpoint\":\"GET /a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,"
                             "\"totalBudgetMs\":5000,\"retryable\":[\"GATEWAY_TIMEOUT\"]}");
    rf_policy *f = lock_load("{\"endpoint\":\"GET /a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,"
                             "\"totalBudgetMs\":5000,\"retryable\":[\"TIMEOUT\",\"HTTP_504\"]}");
    assert_string_equal(rf_policy_digest(e), rf_policy_digest(f));
    rf_policy_free(a);
    rf_policy_free(b);
    rf_policy_free(c);
    rf_policy_free(d);
    rf_policy_free(e);
    rf_policy_free(f);
}

static void test_digest_changes_with_every_decision_number(void **state) {
    (void)state;
    static const char *variants[] = {
        "{\"endpoint\":\"GET "
        "/a\",\"maxAttempts\":4,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,\"retryable\":[\"HTTP_503\"]}",
        "{\"endpoint\":\"GET "
        "/a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1001,\"totalBudgetMs\":5000,\"retryable\":[\"HTTP_503\"]}",
        "{\"endpoint\":\"GET "
        "/a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5001,\"retryable\":[\"HTTP_503\"]}",
        "{\"endpoint\":\"GET "
        "/a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,\"retryable\":[\"HTTP_502\"]}",
        "{" MINIMAL ",\"minAttemptMs\":201}",
        "{" MINIMAL ",\"backoff\":{\"multiplier\":2.001}}",
        "{" MINIMAL ",\"backoff\":{\"jitter\":\"equal\"}}",
        "{" MINIMAL ",\"retryAfter\":{\"maxMs\":1}}",
        "{" MINIMAL ",\"retryAfter\":{\"honor\":false}}",
        "{" MINIMAL ",\"idempotencyRequired\":[\"POST\"]}",
        "{" MINIMAL ",\"retryBudget\":{\"maxTokens\":10,\"tokenRatio\":0.1}}",
        "{" MINIMAL ",\"gate\":{\"maxRetriedSuccess\":0.05}}",
        "{" MINIMAL ",\"gate\":{\"forbidReasons\":[\"deadline\"]}}",
    };
    rf_policy *base = lock_load("{" MINIMAL "}");
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        rf_policy *v = lock_load(variants[i]);
        if (strcmp(rf_policy_digest(base), rf_policy_digest(v)) == 0) fail_msg("same digest for variant %zu", i);
        rf_policy_free(v);
    }
    rf_policy_free(base);
}

static void test_refusals_name_path_rule_and_value(void **state) {
    (void)state;
    /* Each: the lock text, the JSON path of the refusal, a fragment of its message (lock_refused). */
    static const struct {
        const char *text, *path, *needle;
    } cases[] = {
        {"", "$", "empty lock"},
        {"[]", "$", "must be a JSON object"},
        {"{" MINIMAL "} x", "$", "trailing data"},
        {"{" MINIMAL ",\"maxAttemps\":2}", "$.maxAttemps", "unknown key \"maxAttemps\" (did you mean \"maxAttempts\"?"},
        {"{" MINIMAL ",\"zzz\":2}", "$.zzz", "unknown key \"zzz\" (allowed here:"},
        {"{" MINIMAL ",\"maxAttempts\":2}", "$.maxAttempts", "duplicate key"},
        {"{\"endpoint\":\"GET "
         "/a\",\"maxAttempts\":11,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,\"retryable\":[]}",
         "$.maxAttempts", "from 1 to 10, got 11"},
        {"{\"endpoint\":\"GET "
         "/a\",\"maxAttempts\":2.5,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,\"retryable\":[]}",
         "$.maxAttempts", "no fraction"},
        {"{\"endpoint\":\"GET "
         "/a\",\"maxAttempts\":\"3\",\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,\"retryable\":[]}",
         "$.maxAttempts", "got a string"},
        {"{\"endpoint\":\"GET "
         "/a\",\"maxAttempts\":1e400,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,\"retryable\":[]}",
         "$.maxAttempts", "too large"},
        {"{\"endpoint\":\"GET "
         "/a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":-1,\"totalBudgetMs\":5000,\"retryable\":[]}",
         "$.perAttemptTimeoutMs", "got -1"},
        {"{\"endpoint\":\"GET "
         "/a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":500,\"retryable\":[]}",
         "$.totalBudgetMs", "at least perAttemptTimeoutMs (1000), got 500"},
        {"{\"endpoint\":\"GET /a\",\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,\"retryable\":[]}",
         "$.maxAttempts", "required"},
        {"{\"endpoint\":\"GET /a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000}",
         "$.retryable", "required"},
        {"{\"endpoint\":\"GET /a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,"
         "\"retryable\":[\"HTTP_999\"]}",
         "$.retryable[0]", "unknown failure class \"HTTP_999\""},
        {"{\"endpoint\":\"GET /a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,"
         "\"retryable\":[\"timeout\"]}",
         "$.retryable[0]", "unknown failure class \"timeout\" (did you mean \"TIMEOUT\"?"},
        {"{\"endpoint\":\"GET /a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,"
         "\"retryable\":[\"CONNECTION_RESET\"]}",
         "$.retryable[0]", "(did you mean \"CONNECT_RESET\"?"},
        /* a bare status number, a lowercase or unprefixed status or family: the token the lock spells it as */
        {"{\"endpoint\":\"GET /a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,"
         "\"retryable\":[\"503\"]}",
         "$.retryable[0]", "unknown failure class \"503\" (did you mean \"HTTP_503\"?"},
        {"{" MINIMAL ",\"notRetryable\":[\"http_404\"]}", "$.notRetryable[0]", "(did you mean \"HTTP_404\"?"},
        {"{" MINIMAL ",\"notRetryable\":[\"HTTP 400\"]}", "$.notRetryable[0]", "(did you mean \"HTTP_400\"?"},
        {"{" MINIMAL ",\"notRetryable\":[\"4xx\"]}", "$.notRetryable[0]", "(did you mean \"HTTP_4XX\"?"},
        {"{" MINIMAL ",\"classLimits\":{\"503\":2}}", "$.classLimits.503", "(did you mean \"HTTP_503\"?"},
        {"{" MINIMAL ",\"hedging\":{\"maxAttempts\":2,\"hedgingDelayMs\":10,\"nonFatalClasses\":[\"502\"]}}",
         "$.hedging.nonFatalClasses[0]", "(did you mean \"HTTP_502\"?"},
        {"{" MINIMAL ",\"notRetryable\":[\"999\"]}", "$.notRetryable[0]", "unknown failure class \"999\" (HTTP_"},
        {"{" MINIMAL ",\"notRetryable\":[\"HTTP_503\"]}", "$.notRetryable", "HTTP_503 is in both"},
        {"{\"endpoint\":\"GET /a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,"
         "\"retryable\":[\"HTTP_504\"],\"notRetryable\":[\"GATEWAY_TIMEOUT\"]}",
         "$.notRetryable", "in both"},
        {"{\"endpoint\":\"GET /a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,"
         "\"retryable\":[\"HTTP_503\",\"HTTP_503\"]}",
         "$.retryable[1]", "listed twice"},
        {"{\"endpoint\":\"get "
         "/a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,\"retryable\":[]}",
         "$.endpoint", "uppercase"},
        {"{\"endpoint\":\"GET "
         "a\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,\"retryable\":[]}",
         "$.endpoint", "start with '/'"},
        {"{\"endpoint\":\"GET "
         "/a/*/b\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,\"retryable\":[]}",
         "$.endpoint", "last segment"},
        {"{\"endpoint\":\"GET "
         "/a//b\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,\"retryable\":[]}",
         "$.endpoint", "empty path segment"},
        {"{\"endpoint\":\"GET "
         "/a/{1x}\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,\"retryable\":[]}",
         "$.endpoint", "parameter"},
        {"{" MINIMAL ",\"idempotencyRequired\":[\"post\"]}", "$.idempotencyRequired[0]", "not a method"},
        {"{" MINIMAL ",\"backoff\":{\"jitter\":\"random\"}}", "$.backoff.jitter", "none, full, equal, decorrelated"},
        {"{" MINIMAL ",\"backoff\":{\"multiplier\":1.0001}}", "$.backoff.multiplier", "3 decimal places"},
        /* The offending value as the user wrote it (shortest round-trip form), not 1.2344999999999999. */
        {"{" MINIMAL ",\"backoff\":{\"multiplier\":1.2345}}", "$.backoff.multiplier",
         "must have at most 3 decimal places, got 1.2345"},
        {"{" MINIMAL ",\"backoff\":{\"baseMs\":20000}}", "$.backoff.baseMs", "at most backoff.maxMs"},
        {"{" MINIMAL ",\"backoff\":{\"cap\":1}}", "$.backoff.cap", "unknown key"},
        {"{" MINIMAL ",\"retryAfter\":{\"honor\":1}}", "$.retryAfter.honor", "true or false"},
        {"{" MINIMAL ",\"minAttemptMs\":2000}", "$.minAttemptMs",
         "must be at most perAttemptTimeoutMs (1000), got 2000"},
        {"{" MINIMAL ",\"hedging\":{\"maxAttempts\":4,\"hedgingDelayMs\":100}}", "$.hedging.maxAttempts",
         "must be at most maxAttempts (3), got 4"},
        {"{" MINIMAL ",\"retryBudget\":{\"maxTokens\":10}}", "$.retryBudget.tokenRatio", "required"},
        {"{" MINIMAL ",\"retryBudget\":{\"maxTokens\":10,\"tokenRatio\":0}}", "$.retryBudget.tokenRatio", "from"},
        {"{\"version\":2,\"routes\":[{" MINIMAL "}]}", "$.version", "from 1 to 1, got 2"},
        {"{\"version\":1,\"routes\":[]}", "$.routes", "non-empty"},
        {"{\"version\":1,\"routes\":[{" MINIMAL "},{" MINIMAL "}]}", "$.routes[1].endpoint", "duplicates $.routes[0]"},
        {"{\"version\":1,\"routes\":[{\"endpoint\":\"GET /a/{x}\",\"maxAttempts\":3,\"perAttemptTimeoutMs\":1000,"
         "\"totalBudgetMs\":5000,\"retryable\":[]},{\"endpoint\":\"GET /a/{y}\",\"maxAttempts\":3,"
         "\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000,\"retryable\":[]}]}",
         "$.routes[1].endpoint", "duplicates"},
        {"{\"version\":1,\"defaults\":{\"endpoint\":\"GET /a\"},\"routes\":[{" MINIMAL "}]}", "$.defaults.endpoint",
         "cannot have a default"},
        {"{\"version\":1,\"routes\":[{" MINIMAL ",\"retryBudget\":{\"maxTokens\":1,\"tokenRatio\":1}}]}",
         "$.routes[0].retryBudget", "client-wide"},
        {"{\"version\":1,\"routes\":[{\"endpoint\":\"GET /a\"}]}", "$.routes[0].maxAttempts", "required"},
        {"{\"version\":1,\"routes\":[{" MINIMAL "}],\"route\":1}", "$.route", "unknown key"},
        {"{\"$comment\":5," MINIMAL "}", "$.$comment", "must be a string"},
        {"{" MINIMAL ",\"gate\":{\"maxRetriedSuccess\":1.5}}", "$.gate.maxRetriedSuccess", "from 0 to 1"},
        {"{" MINIMAL ",\"gate\":{\"forbidReasons\":[\"nope\"]}}", "$.gate.forbidReasons[0]", "unknown reason"},
        {"{" MINIMAL ",\"gate\":{\"forbidReasons\":[\"deadline\",\"deadline\"]}}", "$.gate.forbidReasons[1]",
         "listed twice"},
        {"{" MINIMAL ",\"gate\":{\"minSuccess\":1}}", "$.gate.minSuccess", "unknown key"},
        {"{" MINIMAL ",\"gate\":[]}", "$.gate", "must be an object"},
        {"{" MINIMAL ",\"backoff\":{\"$comment\":1}}", "$.backoff.$comment", "must be a string, got a number"},
        {"{" MINIMAL ",\"gate\":{\"$comment\":null}}", "$.gate.$comment", "must be a string, got null"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        lock_refused(cases[i].text, cases[i].path, cases[i].needle);
}

static void test_gate_object(void **state) {
    (void)state;
    rf_policy *p = lock_load("{" MINIMAL ",\"gate\":{\"maxRetriedSuccess\":0.05,\"maxAttemptsPerSuccess\":1.3,"
                             "\"minSuccesses\":50,\"forbidReasons\":[\"unpinned-source\",\"deadline\"]}}");
    rf_gate_view g;
    assert_true(rf_policy_gate(p, &g));
    assert_true(g.has_max_retried_success);
    assert_int_equal(g.max_retried_success_milli, 50);
    assert_int_equal(g.max_attempts_per_success_milli, 1300);
    assert_false(g.has_max_terminal_rate);
    assert_int_equal(g.min_successes, 50);
    assert_int_equal(g.n_forbid_reasons, 2);
    assert_string_equal(g.forbid_reasons[0], "deadline"); /* sorted: order does not change the digest */
    assert_string_equal(g.forbid_reasons[1], "unpinned-source");
    rf_policy *q = lock_load("{" MINIMAL ",\"gate\":{\"forbidReasons\":[\"deadline\",\"unpinned-source\"],"
                             "\"minSuccesses\":50,\"maxAttemptsPerSuccess\":1.3,\"maxRetriedSuccess\":0.05}}");
    assert_string_equal(rf_policy_digest(p), rf_policy_digest(q));
    rf_policy *none = lock_load("{" MINIMAL "}");
    assert_false(rf_policy_gate(none, &g));
    rf_policy_free(p);
    rf_policy_free(q);
    rf_policy_free(none);
}

/* Every gate threshold: its range, its kind (3-decimal number or integer), its exact refusal text and path, and
 * where an accepted value lands in rf_gate_view. */
static void test_gate_thresholds_each_name_their_range(void **state) {
    (void)state;
    static const struct {
        const char *lock, *path, *message;
    } bad[] = {
        {"\"maxRetriedSuccess\":1.5", "$.gate.maxRetriedSuccess", "must be a number from 0 to 1, got 1.5"},
        {"\"maxRetriedSuccess\":\"x\"", "$.gate.maxRetriedSuccess",
         "must be a finite number from 0 to 1, got a string"},
        {"\"maxRetriedSuccess\":0.0001", "$.gate.maxRetriedSuccess", "must have at most 3 decimal places, got 0.0001"},
        {"\"maxAttemptsPerSuccess\":0.5", "$.gate.maxAttemptsPerSuccess", "must be a number from 1 to 10, got 0.5"},
        {"\"maxAttemptsPerSuccess\":null", "$.gate.maxAttemptsPerSuccess",
         "must be a finite number from 1 to 10, got null"},
        {"\"maxTerminalRate\":-0.1", "$.gate.maxTerminalRate", "must be a number from 0 to 1, got -0.1"},
        /* A value is printed as written: the shortest form that reads back as the same double. */
        {"\"maxTerminalRate\":0.1234", "$.gate.maxTerminalRate", "must have at most 3 decimal places, got 0.1234"},
        {"\"minSuccesses\":2.1", "$.gate.minSuccesses", "must be an integer (no fraction), got 2.1"},
        {"\"minSuccesses\":1e20", "$.gate.minSuccesses", "must be an integer from 0 to 1000000000, got 1e+20"},
        {"\"maxTerminalRate\":true", "$.gate.maxTerminalRate", "must be a finite number from 0 to 1, got a boolean"},
        {"\"maxRetryRatio\":10.5", "$.gate.maxRetryRatio", "must be a number from 0 to 10, got 10.5"},
        {"\"maxRetryRatio\":[]", "$.gate.maxRetryRatio", "must be a finite number from 0 to 10, got an array"},
        {"\"minSuccessRate\":2", "$.gate.minSuccessRate", "must be a number from 0 to 1, got 2"},
        {"\"minSuccessRate\":0.12345", "$.gate.minSuccessRate", "must have at most 3 decimal places, got 0.12345"},
        {"\"minSuccesses\":-1", "$.gate.minSuccesses", "must be an integer from 0 to 1000000000, got -1"},
        {"\"minSuccesses\":1.5", "$.gate.minSuccesses", "must be an integer (no fraction), got 1.5"},
        {"\"minSuccesses\":\"10\"", "$.gate.minSuccesses", "must be an integer from 0 to 1000000000, got a string"},
        {"\"minSuccesses\":1000000001", "$.gate.minSuccesses",
         "must be an integer from 0 to 1000000000, got 1000000001"},
        {"\"forbidReasons\":\"deadline\"", "$.gate.forbidReasons", "must be an array of reasons, got a string"},
        {"\"minSuccess\":1", "$.gate.minSuccess",
         "unknown key \"minSuccess\" (did you mean \"minSuccesses\"? allowed here: …)"},
    };
    char text[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "{" MINIMAL ",\"gate\":{%s}}", bad[i].lock);
        rf_policy *p = NULL;
        rf_error err;
        assert_int_equal(rf_policy_load_buffer(text, strlen(text), &p, &err), RF_EINVAL);
        assert_null(p);
        assert_string_equal(err.path, bad[i].path);
        same_message(err.message, bad[i].message, err.path);
    }
    rf_policy *p = lock_load("{" MINIMAL ",\"gate\":{\"maxRetriedSuccess\":1,\"maxAttemptsPerSuccess\":10,"
                             "\"maxTerminalRate\":0.001,\"maxRetryRatio\":9.999,\"minSuccessRate\":0,"
                             "\"minSuccesses\":1000000000}}");
    rf_gate_view g;
    assert_true(rf_policy_gate(p, &g));
    assert_true(g.has_max_retried_success && g.has_max_attempts_per_success && g.has_max_terminal_rate &&
                g.has_max_retry_ratio && g.has_min_success_rate && g.has_min_successes);
    assert_int_equal(g.max_retried_success_milli, 1000);
    assert_int_equal(g.max_attempts_per_success_milli, 10000);
    assert_int_equal(g.max_terminal_rate_milli, 1);
    assert_int_equal(g.max_retry_ratio_milli, 9999);
    assert_int_equal(g.min_success_rate_milli, 0);
    assert_int_equal(g.min_successes, 1000000000);
    assert_int_equal(g.n_forbid_reasons, 0);
    rf_policy_free(p);
    p = lock_load("{" MINIMAL ",\"gate\":{\"maxRetryRatio\":0.25}}");
    assert_true(rf_policy_gate(p, &g));
    assert_true(g.has_max_retry_ratio);
    assert_false(g.has_max_retried_success || g.has_max_attempts_per_success || g.has_max_terminal_rate ||
                 g.has_min_success_rate || g.has_min_successes);
    assert_int_equal(g.max_retry_ratio_milli, 250);
    rf_policy_free(p);
}

/* Each nested object of the lock: its refusal when it is not an object, of a non-string $comment and of an unknown
 * key, each with its exact text and JSON path. */
static void test_objects_refuse_other_shapes_comments_and_keys(void **state) {
    (void)state;
#define MULTI(rest) "{\"version\":1,\"routes\":[{" MINIMAL "}]" rest "}"
    static const struct {
        const char *lock, *path, *message;
    } bad[] = {
        {"{" MINIMAL ",\"backoff\":1}", "$.backoff",
         "must be an object {baseMs, multiplier, maxMs, jitter}, got a number"},
        {"{" MINIMAL ",\"retryAfter\":[]}", "$.retryAfter", "must be an object {honor, maxMs, headers}, got an array"},
        {"{" MINIMAL ",\"retryBudget\":\"x\"}", "$.retryBudget",
         "must be an object {maxTokens, tokenRatio} or {retryRatio, minRetriesPerSecond, ttlMs}, got a string"},
        {"{" MINIMAL ",\"retryBudget\":{\"maxTokens\":1,\"tokenRatio\":1,\"shared\":true}}", "$.retryBudget.shared",
         "must be an object {name}, got a boolean"},
        {"{" MINIMAL ",\"gate\":5}", "$.gate", "must be an object of gate thresholds, got a number"},
        {MULTI(",\"defaults\":[]"), "$.defaults", "must be an object of route fields, got an array"},
        {"{" MINIMAL ",\"retryAfter\":{\"$comment\":[]}}", "$.retryAfter.$comment", "must be a string, got an array"},
        {"{" MINIMAL ",\"retryBudget\":{\"$comment\":1,\"maxTokens\":1,\"tokenRatio\":1}}", "$.retryBudget.$comment",
         "must be a string, got a number"},
        {"{" MINIMAL ",\"retryBudget\":{\"maxTokens\":1,\"tokenRatio\":1,\"shared\":{\"$comment\":{}}}}",
         "$.retryBudget.shared.$comment", "must be a string, got an object"},
        {MULTI(",\"$comment\":false"), "$.$comment", "must be a string, got a boolean"},
        {"{" MINIMAL ",\"backoff\":{\"base\":1}}", "$.backoff.base", "unknown key \"base\" (allowed here: …)"},
        {"{" MINIMAL ",\"retryAfter\":{\"honour\":true}}", "$.retryAfter.honour",
         "unknown key \"honour\" (did you mean \"honor\"? allowed here: …)"},
        {"{" MINIMAL ",\"retryBudget\":{\"maxTokens\":1,\"tokenRatio\":1,\"ratio\":1}}", "$.retryBudget.ratio",
         "unknown key \"ratio\" (allowed here: …)"},
        {"{" MINIMAL ",\"retryBudget\":{\"maxTokens\":1,\"tokenRatio\":1,\"shared\":{\"nam\":\"a\"}}}",
         "$.retryBudget.shared.nam", "unknown key \"nam\" (did you mean \"name\"? allowed here: …)"},
        {MULTI(",\"gates\":{}"), "$.gates", "unknown key \"gates\" (did you mean \"gate\"? allowed here: …)"},
    };
#undef MULTI
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rf_policy *p = NULL;
        rf_error err;
        assert_int_equal(rf_policy_load_buffer(bad[i].lock, strlen(bad[i].lock), &p, &err), RF_EINVAL);
        assert_null(p);
        assert_string_equal(err.path, bad[i].path);
        same_message(err.message, bad[i].message, err.path);
    }
}

static void test_malformed_json_reports_line_and_column(void **state) {
    (void)state;
    const char *text = "{\n  \"endpoint\": \"GET /a\",\n  \"maxAttempts\": ,\n}";
    rf_policy *p = NULL;
    rf_error err;
    assert_int_equal(rf_policy_load_buffer(text, strlen(text), &p, &err), RF_EINVAL);
    assert_int_equal(err.line, 3);
    assert_true(err.column >= 18);
    assert_non_null(strstr(err.message, "malformed JSON"));
}

static void test_bom_is_skipped_and_oversize_refused(void **state) {
    (void)state;
    rf_policy *p = lock_load("\xEF\xBB\xBF{" MINIMAL "}");
    rf_policy_free(p);
    size_t n = RF_LOCK_MAX_BYTES + 1;
    char *big = malloc(n);
    assert_non_null(big);
    memset(big, ' ', n);
    big[0] = '{';
    big[n - 1] = '}';
    rf_error err;
    p = NULL;
    assert_int_equal(rf_policy_load_buffer(big, n, &p, &err), RF_EINVAL);
    assert_non_null(strstr(err.message, "byte limit"));
    free(big);
}

static void test_buffer_need_not_be_nul_terminated(void **state) {
    (void)state;
    const char *text = "{" MINIMAL "}GARBAGE";
    rf_policy *p = NULL;
    rf_error err;
    assert_int_equal(rf_policy_load_buffer(text, strlen(text) - 7, &p, &err), RF_OK);
    rf_policy_free(p);
}

static void test_load_file_errors(void **state) {
    (void)state;
    rf_policy *p = NULL;
    rf_error err;
    assert_int_equal(rf_policy_load_file("/nonexistent/x.lock.json", &p, &err), RF_EIO);
    /* An error about the file as a whole: path is the file, line 0, and the message is one sentence that names
     * it once (docs/c-api.md, "Conventions"): print the message alone. */
    assert_string_equal(err.path, "/nonexistent/x.lock.json");
    assert_int_equal(err.line, 0);
    assert_string_equal(err.message, "cannot open lock /nonexistent/x.lock.json: No such file or directory");
}

/* Like lock_refused(), for text of explicit length (it may hold raw NUL bytes). */
static void refused_n(const char *text, size_t len, const char *path, const char *needle) {
    rf_policy *p = NULL;
    rf_error err;
    rf_status st = rf_policy_load_buffer(text, len, &p, &err);
    if (st == RF_OK) {
        rf_policy_free(p);
        fail_msg("expected a refusal at %s", path);
    }
    assert_int_equal(st, RF_EINVAL);
    assert_null(p);
    assert_string_equal(err.path, path);
    if (strstr(err.message, needle) == NULL) fail_msg("message \"%s\" lacks \"%s\"", err.message, needle);
}

#define FLAT_REST "\"perAttemptTimeoutMs\":1000,\"totalBudgetMs\":5000"

/* CJSON ends strings at a NUL, so "maxAttempts\u0000 anything" used to load as maxAttempts. */
static void test_nul_in_any_lock_string_is_refused_with_its_path(void **state) {
    (void)state;
    const char *nul = "contains a NUL character";
    lock_refused("{\"endpoint\":\"GET /a\",\"maxAttempts\\u0000 anything\":10,\"maxAttempts\":3," FLAT_REST
                 ",\"retryable\":[\"HTTP_503\"]}",
                 "$.maxAttempts\\u0000 anything", nul);
    lock_refused("{\"endpoint\":\"GET /a\",\"maxAttempts\":3," FLAT_REST
                 ",\"retryable\":[\"HTTP_5XX\\u0000 except 503\"]}",
                 "$.retryable[0]", nul);
    lock_refused("{\"endpoint\":\"GET /a\\u0000/b\",\"maxAttempts\":3," FLAT_REST ",\"retryable\":[]}", "$.endpoint",
                 nul);
    lock_refused("{" MINIMAL ",\"backoff\":{\"jitter\":\"full\\u0000 and more\"}}", "$.backoff.jitter", nul);
    lock_refused("{" MINIMAL ",\"idempotencyRequired\":[\"POST\\u0000GET\"]}", "$.idempotencyRequired[0]", nul);
    lock_refused("{\"version\":1,\"routes\":[{" MINIMAL ",\"$comment\":\"x\\u0000\"}]}", "$.routes[0].$comment", nul);
    /* Raw NUL bytes: in a key, in a value, and between tokens (cJSON skips them as whitespace). */
    static const char raw_key[] =
        "{\"endpoint\":\"GET /a\",\"maxAttempts\0 x\":10,\"maxAttempts\":3," FLAT_REST ",\"retryable\":[]}";
    refused_n(raw_key, sizeof raw_key - 1, "$.maxAttempts\\u0000 x", nul);
    static const char raw_value[] = "{" MINIMAL ",\"backoff\":{\"jitter\":\"full\0x\"}}";
    refused_n(raw_value, sizeof raw_value - 1, "$.backoff.jitter", nul);
    static const char raw_between[] = "{" MINIMAL ",\0\"$comment\":\"x\"}";
    refused_n(raw_between, sizeof raw_between - 1, "$", "NUL byte");
    /* An escaped backslash followed by "u0000" is six ordinary characters, and noncharacters are text. */
    rf_policy *p = lock_load("{" MINIMAL ",\"$comment\":\"C:\\\\u0000 \\ufdd0 \xef\xb7\x90\"}");
    rf_policy_free(p);
}

/* A FIFO blocked the loader forever; a device or a directory is no lock either. */
static void test_load_file_takes_regular_files_only(void **state) {
    (void)state;
    alarm(20); /* a blocking open would hang the test: make it fail instead */
    char dir[] = "/tmp/rf-test-lock-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char fifo[64];
    snprintf(fifo, sizeof fifo, "%s/lock.fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    rf_policy *p = NULL;
    rf_error err;
    assert_int_equal(rf_policy_load_file(fifo, &p, &err), RF_EINVAL);
    assert_null(p);
    assert_string_equal(err.path, fifo);
    assert_non_null(strstr(err.message, "is a FIFO, not a regular file"));
    assert_int_equal(rf_policy_load_file(dir, &p, &err), RF_EINVAL);
    assert_non_null(strstr(err.message, "is a directory, not a regular file"));
    assert_int_equal(rf_policy_load_file("/dev/zero", &p, &err), RF_EINVAL);
    assert_non_null(strstr(err.message, "is a character device, not a regular file"));
    /* A regular file over the cap: refused after reading cap + 1 bytes. */
    char big[64];
    snprintf(big, sizeof big, "%s/big.lock.json", dir);
    FILE *f = fopen(big, "wb");
    assert_non_null(f);
    assert_int_equal(fseek(f, RF_LOCK_MAX_BYTES, SEEK_SET), 0);
    assert_int_equal(fputc(' ', f), ' ');
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rf_policy_load_file(big, &p, &err), RF_EINVAL);
    assert_non_null(strstr(err.message, "over the 1048576 byte limit"));
    /* rf_input_read itself: exact length, NUL bytes kept, the cap exact. */
    f = fopen(big, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite("a\0b", 1, 3, f), 3);
    assert_int_equal(fclose(f), 0);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(rf_input_read(big, 3, "table", &text, &len, &err), RF_OK);
    assert_int_equal(len, 3);
    assert_memory_equal(text, "a\0b", 4);
    rf_input_free(text);
    assert_int_equal(rf_input_read(big, 2, "table", &text, &len, &err), RF_EINVAL);
    assert_null(text);
    assert_non_null(strstr(err.message, "table"));
    assert_non_null(strstr(err.message, "over the 2 byte limit"));
    /* rf_input_sha256: the digest of the bytes (sha256sum's), its lines as the reader counts them (a last line
     * without its newline is one), in pieces whatever the length; a FIFO is refused as by the others. */
    char digest[RF_SHA256_TEXT_LEN + 1];
    int64_t lines = -1;
    f = fopen(big, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite("a\nb", 1, 3, f), 3);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rf_input_sha256(big, "ledger", digest, &lines, &err), RF_OK);
    assert_string_equal(digest, "sha256:7e18f737311b2dc3b2f269dd78396b0351f14fb66efa879f768cb23181883c78");
    assert_int_equal(lines, 2);
    f = fopen(big, "wb");
    assert_non_null(f);
    for (int i = 0; i < 100000; i++) assert_int_equal(fputs("0123456\n", f), 1); /* 800 000 bytes: 13 pieces */
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rf_input_sha256(big, "ledger", digest, &lines, &err), RF_OK);
    assert_string_equal(digest, "sha256:06508f1eb398283931af72dc1959411d0284554854bf5e680eb3e1401a04c346");
    assert_int_equal(lines, 100000);
    f = fopen(big, "wb");
    assert_non_null(f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rf_input_sha256(big, "ledger", digest, NULL, &err), RF_OK);
    assert_string_equal(digest, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_int_equal(rf_input_sha256(fifo, "ledger", digest, &lines, &err), RF_EINVAL);
    assert_non_null(strstr(err.message, "cannot open ledger"));
    assert_non_null(strstr(err.message, "is a FIFO, not a regular file"));
    /* Writing: a FIFO without a reader is refused too, never waited on. */
    int fd = -1;
    assert_int_equal(rf_input_open(fifo, O_WRONLY | O_APPEND | O_CREAT, "ledger", &fd, &err), RF_EINVAL);
    assert_int_equal(fd, -1);
    assert_non_null(strstr(err.message, "is a FIFO, not a regular file"));
    assert_int_equal(unlink(fifo), 0);
    assert_int_equal(unlink(big), 0);
    assert_int_equal(rmdir(dir), 0);
    alarm(0);
}

static void test_route_matching_prefers_the_most_specific(void **state) {
    (void)state;
    rf_policy *p = lock_load(
        "{\"version\":1,\"defaults\":{\"maxAttempts\":2,\"perAttemptTimeoutMs\":100,"
        "\"totalBudgetMs\":1000,\"retryable\":[]},\"routes\":["
        "{\"endpoint\":\"GET /v1/*\"},{\"endpoint\":\"GET /v1/jobs/{id}\"},"
        "{\"endpoint\":\"GET /v1/jobs/latest\"},{\"endpoint\":\"GET /v1/jobs/*\"},{\"endpoint\":\"GET /\"}]}");
    rf_route_view r;
    struct {
        const char *path, *want;
    } cases[] = {{"/v1/jobs/7", "GET /v1/jobs/{id}"},
                 {"/v1/jobs/latest", "GET /v1/jobs/latest"},
                 {"/v1/jobs/latest?x=1", "GET /v1/jobs/latest"},
                 {"/v1/jobs/7/logs", "GET /v1/jobs/*"},
                 {"/v1/jobs", "GET /v1/jobs/*"},
                 {"/v1/other", "GET /v1/*"},
                 {"/v1", "GET /v1/*"},
                 {"/", "GET /"},
                 {"/v2", NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long idx = rf_policy_match(p, "GET", 3, cases[i].path, strlen(cases[i].path));
        if (cases[i].want == NULL) {
            assert_int_equal(idx, -1);
            continue;
        }
        assert_true(idx >= 0);
        rf_policy_route(p, (size_t)idx, &r);
        if (strcmp(r.endpoint, cases[i].want) != 0)
            fail_msg("%s matched %s, want %s", cases[i].path, r.endpoint, cases[i].want);
    }
    assert_int_equal(rf_policy_match(p, "POST", 4, "/v1/jobs/7", 10), -1);
    rf_policy_free(p);
}

/* A one-route lock of endpoint whose idempotencyRequired is [idempotency_method], expected refused (see refused). */
static void refused_route(const char *endpoint, const char *idempotency_method, const char *path, const char *needle) {
    char text[512];
    snprintf(text, sizeof text,
             "{\"endpoint\":\"%s\",\"maxAttempts\":1,\"perAttemptTimeoutMs\":1,\"totalBudgetMs\":1,"
             "\"retryable\":[],\"idempotencyRequired\":[\"%s\"]}",
             endpoint, idempotency_method);
    lock_refused(text, path, needle);
}

/* The witnesses of "any other segment" and "any other method" are no name a lock can hold, so the engine routes
 * them exactly where every segment (method) that no route names goes. */
static void test_other_segment_and_method_no_lock_can_name(void **state) {
    (void)state;
    const char *w = RF_OTHER_SEGMENT;
    assert_true(strlen(w) > 0);
    assert_null(strpbrk(w, "/?#")); /* one whole segment, never cut as a query or a fragment */
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "GET /a/%s", w);
    refused_route(endpoint, "GET", "$.endpoint", "has a character not allowed in a path");
    snprintf(endpoint, sizeof endpoint, "GET /%s", w);
    refused_route(endpoint, "GET", "$.endpoint", "has a character not allowed in a path");
    snprintf(endpoint, sizeof endpoint, "%s /a", RF_OTHER_METHOD);
    refused_route(endpoint, "GET", "$.endpoint", "method must be");
    refused_route("GET /a", RF_OTHER_METHOD, "$.idempotencyRequired[0]", "is not a method");
    /* A lock that names the old placeholder "rf~": the witness still reaches the {param}. */
    rf_policy *p = lock_load("{\"version\":1,\"defaults\":{\"maxAttempts\":1,\"perAttemptTimeoutMs\":1,"
                             "\"totalBudgetMs\":1,\"retryable\":[]},\"routes\":[{\"endpoint\":\"GET /a/rf~\"},"
                             "{\"endpoint\":\"GET /a/{id}\"},{\"endpoint\":\"GET /a/*\"}]}");
    char path[64];
    int n = snprintf(path, sizeof path, "/a/%s", w);
    rf_route_view r;
    assert_int_equal(rf_policy_route(p, (size_t)rf_policy_match(p, "GET", 3, path, (size_t)n), &r), RF_OK);
    assert_string_equal(r.endpoint, "GET /a/{id}");
    assert_int_equal(rf_policy_match(p, RF_OTHER_METHOD, strlen(RF_OTHER_METHOD), "/a/x", 4), -1);
    rf_policy_free(p);
}

/* rf_policy_next_segment: the routes that can match a longer path after a prefix, and what each takes next. */
static void test_next_segment_after_a_prefix(void **state) {
    (void)state;
    rf_policy *p = lock_load("{\"version\":1,\"defaults\":{\"maxAttempts\":1,\"perAttemptTimeoutMs\":1,"
                             "\"totalBudgetMs\":1,\"retryable\":[]},\"routes\":[{\"endpoint\":\"GET /a/rf~\"},"
                             "{\"endpoint\":\"GET /a/{id}\"},{\"endpoint\":\"GET /a/*\"},{\"endpoint\":\"GET /b\"},"
                             "{\"endpoint\":\"GET /\"},{\"endpoint\":\"POST /a/x\"},{\"endpoint\":\"GET /{p}/c/*\"}]}");
    struct {
        const char *prefix;
        const char *want; /* what the routes take next, in route order: "L:text", "P" or "R", joined by ' ' */
    } cases[] = {
        {"/", "L:a L:a L:a L:b P"}, /* GET / has no segment to take: it matches "/" only */
        {"/a/", "R L:rf~ P L:c"},   /* the "*" of GET /a (sorted first), /a/rf~, /a/{id}, then /{p}/c */
        {"/b/", "L:c"},             /* GET /b matches /b only */
        {"/a/x/", "R"},             /* /a/{id} needs exactly 2 segments; /{p}/c refuses x */
        {"/a/c/", "R R"},           /* both routes with a "*", past it */
        {"/a//", "R"},              /* the empty segment: only a "*" takes it */
        {"//", ""},                 /* {p} refuses the empty segment, literals too */
        {"/a/rf~/x/y/", "R"},
        {"/zz/", "L:c"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char got[256] = "";
        size_t cursor = 0;
        rf_next_segment next;
        int found;
        while ((found = rf_policy_next_segment(p, "GET", 3, cases[i].prefix, strlen(cases[i].prefix), &cursor,
                                               &next)) == 1) {
            char item[64];
            if (next.kind == RF_NEXT_LITERAL)
                snprintf(item, sizeof item, "L:%.*s", (int)next.literal_len, next.literal);
            else
                snprintf(item, sizeof item, "%s", next.kind == RF_NEXT_PARAM ? "P" : "R");
            if (got[0] != '\0') strcat(got, " ");
            strcat(got, item);
            assert_null(next.kind == RF_NEXT_LITERAL ? NULL : next.literal);
            assert_true(cursor == next.route + 1);
        }
        assert_int_equal(found, 0);
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("after %s: got \"%s\", want \"%s\"", cases[i].prefix, got, cases[i].want);
    }
    size_t cursor = 0;
    rf_next_segment next;
    assert_int_equal(rf_policy_next_segment(p, "POST", 4, "/a/", 3, &cursor, &next), 1);
    assert_true(next.kind == RF_NEXT_LITERAL && next.literal_len == 1 && next.literal[0] == 'x');
    assert_int_equal(rf_policy_next_segment(p, "POST", 4, "/a/", 3, &cursor, &next), 0);
    cursor = 0;
    assert_int_equal(rf_policy_next_segment(p, "get", 3, "/", 1, &cursor, &next), 0); /* methods are exact */
    const char *bad[] = {"", "a/", "/a", "/a?/", "/#/", "/a/b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cursor = 0;
        assert_int_equal(rf_policy_next_segment(p, "GET", 3, bad[i], strlen(bad[i]), &cursor, &next), -1);
    }
    cursor = 0;
    assert_int_equal(rf_policy_next_segment(NULL, "GET", 3, "/", 1, &cursor, &next), -1);
    assert_int_equal(rf_policy_next_segment(p, NULL, 3, "/", 1, &cursor, &next), -1);
    assert_int_equal(rf_policy_next_segment(p, "GET", 3, NULL, 1, &cursor, &next), -1);
    assert_int_equal(rf_policy_next_segment(p, "GET", 3, "/", 1, NULL, &next), -1);
    assert_int_equal(rf_policy_next_segment(p, "GET", 3, "/", 1, &cursor, NULL), -1);
    rf_policy_free(p);
}

/* rf_error_text: each part left out when it says nothing, the whole-file error alone, a short buffer cut. */
static void test_error_text(void **state) {
    (void)state;
    rf_error err = {.path = "$.defaults.maxAttempts", .message = "must be an integer", .line = 0, .column = 0};
    char out[256];
    size_t n = rf_error_text(&err, "a.lock.json", out, sizeof out);
    assert_int_equal(n, strlen(out));
    assert_string_equal(out, "a.lock.json: $.defaults.maxAttempts: must be an integer");
    rf_error_text(&err, NULL, out, sizeof out);
    assert_string_equal(out, "$.defaults.maxAttempts: must be an integer");
    rf_error_text(&err, "", out, sizeof out);
    assert_string_equal(out, "$.defaults.maxAttempts: must be an integer");
    err = (rf_error){.path = "", .message = "malformed JSON", .line = 3, .column = 7};
    rf_error_text(&err, "a.lock.json", out, sizeof out);
    assert_string_equal(out, "a.lock.json: malformed JSON (line 3, column 7)");
    /* an error about the file itself already names it */
    err = (rf_error){.path = "a.lock.json", .message = "cannot open lock a.lock.json: No such file", .line = 0};
    rf_error_text(&err, "a.lock.json", out, sizeof out);
    assert_string_equal(out, "cannot open lock a.lock.json: No such file");
    /* cut, NUL-terminated; the whole length returned */
    char small[8];
    err = (rf_error){.path = "$.x", .message = "bad", .line = 0};
    assert_int_equal(rf_error_text(&err, "f", small, sizeof small), strlen("f: $.x: bad"));
    assert_string_equal(small, "f: $.x:");
    assert_int_equal(rf_error_text(&err, "f", NULL, 0), strlen("f: $.x: bad"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_desk_lock_loads_with_defaults),
        cmocka_unit_test(test_multi_route_inherits_field_by_field),
        cmocka_unit_test(test_digest_ignores_whitespace_order_comment_and_alias_spelling),
        cmocka_unit_test(test_digest_changes_with_every_decision_number),
        cmocka_unit_test(test_refusals_name_path_rule_and_value),
        cmocka_unit_test(test_gate_object),
        cmocka_unit_test(test_gate_thresholds_each_name_their_range),
        cmocka_unit_test(test_objects_refuse_other_shapes_comments_and_keys),
        cmocka_unit_test(test_malformed_json_reports_line_and_column),
        cmocka_unit_test(test_bom_is_skipped_and_oversize_refused),
        cmocka_unit_test(test_buffer_need_not_be_nul_terminated),
        cmocka_unit_test(test_load_file_errors),
        cmocka_unit_test(test_nul_in_any_lock_string_is_refused_with_its_path),
        cmocka_unit_test(test_load_file_takes_regular_files_only),
        cmocka_unit_test(test_route_matching_prefers_the_most_specific),
        cmocka_unit_test(test_other_segment_and_method_no_lock_can_name),
        cmocka_unit_test(test_next_segment_after_a_prefix),
        cmocka_unit_test(test_error_text),
    };
    return cmocka_run_group_tests_name("lock", tests, NULL, NULL);
}
