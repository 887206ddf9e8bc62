/*
 * The clocks in milliseconds, read in one place (core/src/util: small helpers that the client library and the
 * binding each compile in, as curl's curlx/ serves libcurl and the curl tool). Private: prefix rfi_, never
 * installed, hidden in every library that links it (CMAKE_C_VISIBILITY_PRESET).
 */
#ifndef RETRYFREEZE_UTIL_CLOCK_MS_H
#define RETRYFREEZE_UTIL_CLOCK_MS_H

#include <stdint.h>

/* CLOCK_MONOTONIC in ms (seconds × 1000 + nanoseconds ÷ 10^6, truncated): for durations, deadlines and per-try
 * timeouts, which a change of the wall clock must not move. Never fails on Linux. */
int64_t rfi_mono_ms(void);

/* CLOCK_MONOTONIC in ns: for deadlines that poll(2) and pthread_mutex_timedlock(3) wait on to the millisecond. */
int64_t rfi_mono_ns(void);

/* CLOCK_REALTIME in Unix ms, truncated: only for HTTP-dates (Retry-After, Date) and ledger timestamps. */
int64_t rfi_wall_ms(void);

#endif
