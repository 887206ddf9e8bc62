/* See clock_ms.h. */
#define _POSIX_C_SOURCE 200809L
#include "clock_ms.h"

#include <time.h>

/* A clock's reading in ms. clock_gettime fails only for an unknown clock id (EINVAL) or a bad pointer (EFAULT),
 * neither of which these two calls can pass. */
static int64_t clock_ms(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t rfi_mono_ms(void) { return clock_ms(CLOCK_MONOTONIC); }

int64_t rfi_wall_ms(void) { return clock_ms(CLOCK_REALTIME); }

int64_t rfi_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
