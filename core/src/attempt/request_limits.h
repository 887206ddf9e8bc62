/*
 * Private to the attempt library (libretryfreeze_attempt) and the libcurl client: a request's own limits
 * (rf_request.deadline_ms, .timeout_ms), which narrow its route's totalBudgetMs and perAttemptTimeoutMs
 * (request_limits.c). Prefix rfi_; the functions marked RFI_ABI are the library's internal ABI (attempt_abi.h).
 */
#ifndef RETRYFREEZE_REQUEST_LIMITS_H
#define RETRYFREEZE_REQUEST_LIMITS_H

#include "attempt_abi.h"
#include "retryfreeze/attempt_step.h"

typedef struct rfi_limits {
    int64_t elapsed_shift_ms; /* totalBudgetMs - the request's deadline (its deadline_ms or its caller's); 0: none */
    int64_t timeout_ms;       /* the request's timeout_ms; 0: the lock's */
} rfi_limits;

/* Checks req's deadline_ms and timeout_ms against its route (route: rf_policy_match, -1 for none) and fills *l; the
 * deadline is the narrowest of the route's totalBudgetMs, req's deadline_ms and inbound_deadline_ms (the time the
 * caller has left, from its propagation header; -1: none), which can only narrow. RF_EINVAL (err->path the field)
 * for a negative value or one wider than the lock's, naming the lock's limit. */
RFI_ABI rf_status rfi_limits_init(rfi_limits *l, const rf_policy *p, long route, const rf_request *req,
                                  int64_t inbound_deadline_ms, rf_error *err);
/* The elapsed time the engine is told for elapsed_ms into the request (its deadline narrowed by the shift). */
RFI_ABI int64_t rfi_limits_elapsed(const rfi_limits *l, int64_t elapsed_ms);
/* The per-try timeout timeout_ms narrowed to the request's own. */
RFI_ABI int64_t rfi_limits_timeout(const rfi_limits *l, int64_t timeout_ms);

#endif
