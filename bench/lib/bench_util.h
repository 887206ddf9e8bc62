/* What the C bench programs share: the monotonic clock they time with, and how they read a count argument and
 * fail. Header-only; prog is the program's name for its messages. */
#ifndef RETRYFREEZE_BENCH_UTIL_H
#define RETRYFREEZE_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The monotonic clock in seconds. */
static inline double bench_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The monotonic clock in nanoseconds (as a double: exact to the nanosecond for any uptime below 104 days). */
static inline double bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Ends the program (exit 1) with "prog: what[: detail]". */
static inline void bench_die(const char *prog, const char *what, const char *detail) {
    fprintf(stderr, "%s: %s%s%s\n", prog, what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

/* The positive integer in argument s, or exit 2 with "prog: what must be a positive integer, got "s"". */
static inline long bench_positive(const char *prog, const char *s, const char *what) {
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < 1) {
        fprintf(stderr, "%s: %s must be a positive integer, got \"%s\"\n", prog, what, s);
        exit(2);
    }
    return v;
}

#endif
