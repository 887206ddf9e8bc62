/*
 * A clock for timing bounds in tests that a loaded machine cannot break: CLOCK_MONOTONIC minus the time the
 * machine kept the calling thread from running. That is the thread's run-queue delay (the second field of
 * /proc/thread-self/schedstat, ns: runnable, waiting for a CPU) plus the hypervisor's steal (the eighth field of
 * /proc/stat's "cpu" line, in USER_HZ ticks of 10 ms, summed over every CPU: an overestimate for one thread,
 * which only loosens a bound). The code under test's own work, and its waits, still count in full. Where the
 * kernel reports neither, the clock is plain CLOCK_MONOTONIC. The Lua specs use the same measure
 * (spec/support/stall.lua).
 */
#ifndef RF_SPEC_STALL_CLOCK_H
#define RF_SPEC_STALL_CLOCK_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

static int64_t stall_clock_stalled_us(void) {
    int64_t us = 0;
    unsigned long long cpu_ns = 0, wait_ns = 0;
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    if (f != NULL) {
        if (fscanf(f, "%llu %llu", &cpu_ns, &wait_ns) == 2) us += (int64_t)(wait_ns / 1000);
        fclose(f);
    }
    unsigned long long t[8] = {0};
    f = fopen("/proc/stat", "r");
    if (f != NULL) {
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &t[0], &t[1], &t[2], &t[3], &t[4], &t[5], &t[6],
                   &t[7]) == 8)
            us += (int64_t)t[7] * 10000;
        fclose(f);
    }
    return us;
}

/* Microseconds on the stall clock: differences of two readings are the elapsed time net of the stall between. */
static int64_t stall_clock_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 - stall_clock_stalled_us();
}

#endif
