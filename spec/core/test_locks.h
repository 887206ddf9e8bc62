/*
 * Loading lock texts in the spec/core tests: one lock that must load, one that must be refused at a given JSON path
 * with a given message. Header-only; a test file that includes it uses cmocka (fail_msg, assert_*).
 */
#ifndef RF_SPEC_TEST_LOCKS_H
#define RF_SPEC_TEST_LOCKS_H

#include "retryfreeze/policy.h"
#include <string.h>

/* The policy text loads to (the caller frees it); a refusal fails the test with its JSON path and message. */
static inline rf_policy *lock_load(const char *text) {
    rf_policy *p = NULL;
    rf_error err;
    if (rf_policy_load_buffer(text, strlen(text), &p, &err) != RF_OK)
        fail_msg("expected the lock to load, got %s: %s", err.path, err.message);
    return p;
}

/* Loads text expecting a refusal: RF_EINVAL, no policy, err.path equal to path and err.message containing needle. */
static inline void lock_refused(const char *text, const char *path, const char *needle) {
    rf_policy *p = NULL;
    rf_error err;
    rf_status st = rf_policy_load_buffer(text, strlen(text), &p, &err);
    if (st == RF_OK) {
        rf_policy_free(p);
        fail_msg("expected a refusal at %s for: %s", path, text);
    }
    assert_int_equal(st, RF_EINVAL);
    assert_null(p);
    if (strcmp(err.path, path) != 0 || strstr(err.message, needle) == NULL)
        fail_msg("got %s: %s; want %s: …%s…", err.path, err.message, path, needle);
}

#endif
