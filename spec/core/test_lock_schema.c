/*
 * The lock schema's rows (retryfreeze/lock_schema.h): well formed, each default a value its own reader accepts,
 * each Lua view named by its path, and a policy's fields read through the rows equal to what rf_policy_route and
 * rf_policy_gate say of the same policy.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "retryfreeze/lock_schema.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *key_of(const rf_lock_field *f) {
    const char *dot = strrchr(f->path, '.');
    return dot ? dot + 1 : f->path;
}

/* "retryAfter.maxMs" → "retry_after.max_ms". */
static void snake(const char *path, char *out, size_t cap) {
    size_t o = 0;
    for (const char *p = path; *p && o + 2 < cap; p++) {
        if (isupper((unsigned char)*p)) {
            out[o++] = '_';
            out[o++] = (char)tolower((unsigned char)*p);
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
}

static void test_rows_are_well_formed(void **state) {
    (void)state;
    size_t n = rf_lock_schema_count();
    assert_true(n >= 30);
    assert_null(rf_lock_schema_field(n));
    for (size_t i = 0; i < n; i++) {
        const rf_lock_field *f = rf_lock_schema_field(i);
        assert_non_null(f);
        assert_int_equal(rf_lock_schema_find(f->path), (long)i);
        /* An object's rows follow it, in its place, and their paths extend its path by one key. */
        if (f->parent >= 0) {
            assert_true(f->parent < (long)i);
            const rf_lock_field *o = rf_lock_schema_field((size_t)f->parent);
            assert_int_equal(o->type, RF_FIELD_OBJECT);
            assert_int_equal(o->place, f->place);
            char want[128];
            snprintf(want, sizeof want, "%s.%s", o->path, key_of(f));
            assert_string_equal(f->path, want);
        } else {
            assert_null(strchr(f->path, '.'));
        }
        assert_true(f->min <= f->max);
        assert_true((f->if_absent == RF_DEFAULT_VALUE) == (f->default_json != NULL) ||
                    (f->if_absent == RF_DEFAULT_NONE && f->default_json != NULL));
        /* A field the canonical form leaves out at its default has one (else it could never be left out), or is an
         * optional object (hedging), left out when absent. */
        if (f->canonical == RF_CANON_UNLESS_DEFAULT)
            assert_true(f->if_absent == RF_DEFAULT_VALUE ||
                        (f->type == RF_FIELD_OBJECT && f->if_absent == RF_DEFAULT_NONE));
        /* Its Lua view is its path in snake case; a row whose object has no table of its own stands for it. */
        if (f->view != NULL) {
            char want[128];
            snake(f->path, want, sizeof want);
            const rf_lock_field *o = f->parent >= 0 ? rf_lock_schema_field((size_t)f->parent) : NULL;
            if (o != NULL && o->view == NULL) snake(o->path, want, sizeof want);
            assert_string_equal(f->view, want);
        }
        /* A number's default is a value the loader accepts for it. */
        if ((f->type == RF_FIELD_INTEGER || f->type == RF_FIELD_DECIMAL) && f->default_json != NULL) {
            rf_error err;
            if (rf_lock_field_check(i, strtod(f->default_json, NULL), &err) != RF_OK)
                fail_msg("%s: default %s refused: %s", f->path, f->default_json, err.message);
        }
    }
    /* No two rows of one object share a key. */
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            const rf_lock_field *a = rf_lock_schema_field(i), *b = rf_lock_schema_field(j);
            if (a->parent == b->parent && a->place == b->place) assert_string_not_equal(key_of(a), key_of(b));
        }
    assert_int_equal(rf_lock_schema_find("nope"), -1);
    assert_int_equal(rf_lock_schema_find(NULL), -1);
}

/* rf_lock_field_check takes what a lock takes, at each bound and just outside it, and refuses other rows. */
static void test_field_check_is_the_loaders_rule(void **state) {
    (void)state;
    for (size_t i = 0; i < rf_lock_schema_count(); i++) {
        const rf_lock_field *f = rf_lock_schema_field(i);
        rf_error err;
        if (f->type != RF_FIELD_INTEGER && f->type != RF_FIELD_DECIMAL) {
            assert_int_equal(rf_lock_field_check(i, 1, &err), RF_EINVAL);
            continue;
        }
        const double scale = f->type == RF_FIELD_DECIMAL ? 1000.0 : 1.0, step = 1.0 / scale;
        const double lo = (double)f->min / scale, hi = (double)f->max / scale;
        assert_int_equal(rf_lock_field_check(i, lo, &err), RF_OK);
        assert_int_equal(rf_lock_field_check(i, hi, &err), RF_OK);
        assert_int_equal(rf_lock_field_check(i, lo - step, &err), RF_EINVAL);
        char path[128];
        snprintf(path, sizeof path, "$.%s", f->path);
        assert_string_equal(err.path, path);
        assert_int_equal(rf_lock_field_check(i, hi + step, &err), RF_EINVAL);
        if (hi > lo) assert_int_equal(rf_lock_field_check(i, lo + step / 2, &err), RF_EINVAL); /* finer than allowed */
    }
    assert_int_equal(rf_lock_field_check(rf_lock_schema_count(), 1, NULL), RF_EINVAL);
    rf_error err;
    assert_int_equal(rf_lock_field_check((size_t)rf_lock_schema_find("gate.maxAttemptsPerSuccess"), 0.5, &err),
                     RF_EINVAL);
    assert_string_equal(err.message, "must be a number from 1 to 10, got 0.5");
}

#define LOCK                                                                                                       \
    "{\"version\": 1, \"defaults\": {\"maxAttempts\": 3, \"perAttemptTimeoutMs\": 1000, \"totalBudgetMs\": 4000, " \
    "\"retryable\": [\"GATEWAY_TIMEOUT\", \"HTTP_429\"], \"classLimits\": {\"TIMEOUT\": 2}}, \"routes\": ["        \
    "{\"endpoint\": \"GET /a\", \"retryAfter\": {\"headers\": [\"retry-after-ms\", \"retry-after\"]}}, "           \
    "{\"endpoint\": \"POST /b\", \"backoff\": {\"multiplier\": 1.5, \"jitter\": \"none\"}}], "                     \
    "\"retryBudget\": {\"maxTokens\": 10, \"tokenRatio\": 0.25, \"shared\": {\"name\": \"jobs\"}}, "               \
    "\"gate\": {\"maxRetryRatio\": 0.5, \"minSuccesses\": 20, \"forbidReasons\": [\"deadline\"]}}"

static rf_field_value field(const rf_policy *p, size_t route, const char *path) {
    rf_field_value v;
    long i = rf_lock_schema_find(path);
    assert_true(i >= 0);
    assert_int_equal(rf_policy_field(p, route, (size_t)i, &v), RF_OK);
    return v;
}

static void same_list(rf_field_value v, const char *const *items, size_t n) {
    assert_true(v.present);
    assert_int_equal(v.n, n);
    for (size_t k = 0; k < n; k++) assert_string_equal(v.items[k], items[k]);
}

static void test_policy_fields_agree_with_the_views(void **state) {
    (void)state;
    rf_policy *p = NULL;
    rf_error err;
    assert_int_equal(rf_policy_load_buffer(LOCK, strlen(LOCK), &p, &err), RF_OK);
    for (size_t route = 0; route < rf_policy_route_count(p); route++) {
        rf_route_view r;
        assert_int_equal(rf_policy_route(p, route, &r), RF_OK);
        assert_string_equal(field(p, route, "endpoint").text, r.endpoint);
        assert_int_equal(field(p, route, "maxAttempts").number, r.max_attempts);
        assert_int_equal(field(p, route, "perAttemptTimeoutMs").number, r.per_attempt_timeout_ms);
        assert_int_equal(field(p, route, "totalBudgetMs").number, r.total_budget_ms);
        assert_int_equal(field(p, route, "minAttemptMs").number, r.min_attempt_ms);
        same_list(field(p, route, "retryable"), r.retryable, r.n_retryable);
        same_list(field(p, route, "notRetryable"), r.not_retryable, r.n_not_retryable);
        same_list(field(p, route, "idempotencyRequired"), r.idempotency_required, r.n_idempotency_required);
        assert_int_equal(field(p, route, "backoff.baseMs").number, r.backoff_base_ms);
        assert_int_equal(field(p, route, "backoff.multiplier").number, r.backoff_multiplier_milli);
        assert_int_equal(field(p, route, "backoff.maxMs").number, r.backoff_max_ms);
        assert_string_equal(field(p, route, "backoff.jitter").text, rf_jitter_name(r.backoff_jitter));
        assert_int_equal(field(p, route, "retryAfter.honor").number, r.retry_after_honor);
        assert_int_equal(field(p, route, "retryAfter.maxMs").number, r.retry_after_max_ms);
        same_list(field(p, route, "retryAfter.headers"), r.retry_after_headers, r.n_retry_after_headers);
        rf_field_value limits = field(p, route, "classLimits");
        same_list(limits, r.class_limit_classes, r.n_class_limits);
        for (size_t k = 0; k < r.n_class_limits; k++) assert_int_equal(limits.limits[k], r.class_limit_values[k]);
    }
    assert_int_equal(field(p, 1, "backoff.multiplier").number, 1500);
    assert_int_equal(field(p, 0, "classLimits").n, 1);
    rf_gate_view g;
    assert_true(rf_policy_gate(p, &g));
    assert_true(field(p, 0, "gate").present);
    assert_false(field(p, 0, "gate.maxRetriedSuccess").present);
    assert_int_equal(field(p, 0, "gate.maxRetryRatio").number, g.max_retry_ratio_milli);
    assert_int_equal(field(p, 0, "gate.minSuccesses").number, g.min_successes);
    same_list(field(p, 0, "gate.forbidReasons"), g.forbid_reasons, g.n_forbid_reasons);
    int64_t max_milli, ratio_milli;
    assert_true(rf_policy_retry_budget(p, &max_milli, &ratio_milli));
    assert_int_equal(field(p, 0, "retryBudget.maxTokens").number * 1000, max_milli);
    assert_int_equal(field(p, 0, "retryBudget.tokenRatio").number, ratio_milli);
    assert_string_equal(field(p, 0, "retryBudget.shared.name").text, rf_policy_retry_budget_shared(p));
    assert_int_equal(field(p, 0, "transparentRetry").number, 1);
    assert_int_equal(field(p, 0, "routes").n, 2);
    rf_field_value v;
    assert_int_equal(rf_policy_field(p, 2, (size_t)rf_lock_schema_find("maxAttempts"), &v), RF_EINVAL);
    assert_int_equal(rf_policy_field(p, 2, (size_t)rf_lock_schema_find("gate"), &v), RF_OK); /* route ignored */
    assert_int_equal(rf_policy_field(p, 0, rf_lock_schema_count(), &v), RF_EINVAL);
    assert_int_equal(rf_policy_field(NULL, 0, 0, &v), RF_EINVAL);
    assert_int_equal(rf_policy_field(p, 0, 0, NULL), RF_EINVAL);
    rf_policy_free(p);
    /* Absent objects: neither they nor their fields are present. */
    const char *flat =
        "{\"endpoint\": \"GET /x\", \"maxAttempts\": 1, \"perAttemptTimeoutMs\": 1, \"totalBudgetMs\": 1, "
        "\"retryable\": [], \"transparentRetry\": false}";
    assert_int_equal(rf_policy_load_buffer(flat, strlen(flat), &p, &err), RF_OK);
    assert_false(field(p, 0, "gate").present);
    assert_false(field(p, 0, "gate.forbidReasons").present);
    assert_false(field(p, 0, "retryBudget.maxTokens").present);
    assert_int_equal(field(p, 0, "transparentRetry").number, 0);
    assert_int_equal(field(p, 0, "version").number, 1);
    rf_policy_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_are_well_formed),
        cmocka_unit_test(test_field_check_is_the_loaders_rule),
        cmocka_unit_test(test_policy_fields_agree_with_the_views),
    };
    return cmocka_run_group_tests_name("lock schema", tests, NULL, NULL);
}
