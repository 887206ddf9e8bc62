/*
 * decide_host.c — a C program that uses only the engine (libretryfreeze): it loads a lock, asks rf_budget for
 * the first attempt's per-try timeout, and asks rf_decide what to do after a 429 with "Retry-After: 1" on a
 * keyed POST /v1/jobs. No libcurl, no Lua. docs/c-api.md shows how to build it with CMake's find_package or
 * with pkg-config; spec/install_spec.sh builds it both ways against an installed prefix.
 * Usage: decide_host LOCK
 */
#include <retryfreeze/decide.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: decide_host LOCK\n");
        return 2;
    }
    rf_error err = {0};
    rf_policy *policy = NULL;
    if (rf_policy_load_file(argv[1], &policy, &err) != RF_OK) {
        /* An error about the file itself (path is the file) is a sentence that already names it; an error inside
         * the lock names where: "LOCK: $.routes[0].maxAttempts: must be …" (docs/c-api.md, "Conventions"). */
        if (strcmp(err.path, argv[1]) == 0)
            fprintf(stderr, "%s\n", err.message);
        else
            fprintf(stderr, "%s: %s: %s\n", argv[1], err.path, err.message);
        return 2;
    }
    rf_attempt_budget budget;
    if (rf_budget(policy, "POST", 4, "/v1/jobs", 8, 0, 0, &budget, &err) != RF_OK) {
        fprintf(stderr, "rf_budget: %s: %s\n", err.path, err.message);
        rf_policy_free(policy);
        return 2;
    }
    rf_facts facts = {.method = "POST",
                      .method_len = 4,
                      .path = "/v1/jobs",
                      .path_len = 8,
                      .status = 429,
                      .transport = RF_TRANSPORT_OK,
                      .retry_after = "1",
                      .retry_after_len = 1,
                      .attempts = 1,
                      .elapsed_ms = 100,
                      .has_idempotency_key = true};
    rf_rng rng;
    rf_rng_seed(&rng, 42);
    rf_verdict v;
    if (rf_decide(policy, &facts, &rng, NULL, &v, &err) != RF_OK) {
        fprintf(stderr, "rf_decide: %s: %s\n", err.path, err.message);
        rf_policy_free(policy);
        return 2;
    }
    printf("first attempt timeout_ms=%lld; after %s: %s %s delay_ms=%lld timeout_ms=%lld\n",
           (long long)budget.timeout_ms, v.class_name, v.retry ? "retry" : "stop", rf_reason_name(v.reason),
           (long long)v.delay_ms, (long long)v.timeout_ms);
    rf_policy_free(policy);
    return 0;
}
