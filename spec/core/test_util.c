/*
 * The shared helpers of core/src/util: the clocks in ms (clock_ms.h) and the OS's randomness (os_random.h).
 * getrandom is wrapped (-Wl,--wrap=getrandom): a script of answers per call makes it fail, be interrupted by a
 * signal or return short reads, which the kernel does only rarely; with no script the real call runs.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>
#include <time.h>

#include "util/clock_ms.h"
#include "util/os_random.h"

/* ---- the scripted getrandom ---- */

/* One scripted answer: fill `give` bytes (0x5a, 0x5b, … in call order) and return them, or fail with `err`. */
typedef struct answer {
    ssize_t give;
    int err;
} answer;

static const answer *script; /* NULL: the real getrandom */
static size_t n_script, calls;

ssize_t __real_getrandom(void *buf, size_t n, unsigned int flags);
ssize_t __wrap_getrandom(void *buf, size_t n, unsigned int flags);

ssize_t __wrap_getrandom(void *buf, size_t n, unsigned int flags) {
    if (script == NULL) return __real_getrandom(buf, n, flags);
    assert_int_equal(0, flags); /* blocking until the pool is ready, never GRND_NONBLOCK: no early-boot failure */
    assert_true(calls < n_script);
    const answer *a = &script[calls++];
    if (a->err != 0) {
        errno = a->err;
        return -1;
    }
    assert_true((size_t)a->give <= n);
    memset(buf, 0x5a + (int)calls - 1, (size_t)a->give);
    return a->give;
}

static void run_script(const answer *s, size_t n) {
    script = s;
    n_script = n;
    calls = 0;
}

/* ---- os_random ---- */

static void short_reads_are_continued_until_full(void **state) {
    (void)state;
    static const answer s[] = {{.give = 3}, {.give = 0}, {.give = 5}};
    run_script(s, 3);
    unsigned char b[8];
    assert_int_equal(0, rfi_os_random(b, sizeof b));
    assert_int_equal(3, calls);
    static const unsigned char want[8] = {0x5a, 0x5a, 0x5a, 0x5c, 0x5c, 0x5c, 0x5c, 0x5c};
    assert_memory_equal(want, b, sizeof b);
    script = NULL;
}

static void an_interrupted_call_is_repeated(void **state) {
    (void)state;
    static const answer s[] = {{.err = EINTR}, {.err = EINTR}, {.give = 8}};
    run_script(s, 3);
    unsigned char b[8];
    assert_int_equal(0, rfi_os_random(b, sizeof b));
    assert_int_equal(3, calls);
    for (size_t i = 0; i < sizeof b; i++) assert_int_equal(0x5c, b[i]);
    script = NULL;
}

/* No fallback: the errno that stopped it, after a partial fill too, and no further call. */
static void a_failure_is_reported_with_its_errno(void **state) {
    (void)state;
    static const answer nosys[] = {{.err = ENOSYS}};
    run_script(nosys, 1);
    unsigned char b[8];
    assert_int_equal(ENOSYS, rfi_os_random(b, sizeof b));
    assert_int_equal(1, calls);
    static const answer partial[] = {{.give = 4}, {.err = EPERM}};
    run_script(partial, 2);
    assert_int_equal(EPERM, rfi_os_random(b, sizeof b));
    assert_int_equal(2, calls);
    script = NULL;
}

static void nothing_asked_calls_nothing(void **state) {
    (void)state;
    static const answer none[1];
    run_script(none, 0); /* any call fails the test */
    assert_int_equal(0, rfi_os_random(NULL, 0));
    assert_int_equal(0, calls);
    script = NULL;
}

/* The real kernel: 64 bytes, and not all one value (2^-504 to fail by chance). */
static void the_real_call_fills_the_buffer(void **state) {
    (void)state;
    unsigned char b[64];
    memset(b, 0, sizeof b);
    assert_int_equal(0, rfi_os_random(b, sizeof b));
    size_t same = 0;
    for (size_t i = 1; i < sizeof b; i++) same += b[i] == b[0];
    assert_true(same < sizeof b - 1);
}

/* ---- clock_ms ---- */

static int64_t ms_of(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Each reading lies between two readings taken around it the long way (seconds and nanoseconds). */
static void the_clocks_read_in_milliseconds(void **state) {
    (void)state;
    int64_t before = ms_of(CLOCK_MONOTONIC), mono = rfi_mono_ms(), after = ms_of(CLOCK_MONOTONIC);
    assert_true(before <= mono && mono <= after);
    before = ms_of(CLOCK_REALTIME);
    int64_t wall = rfi_wall_ms();
    after = ms_of(CLOCK_REALTIME);
    assert_true(before <= wall && wall <= after);
    assert_true(wall > INT64_C(1700000000000)); /* a Unix time in ms (after 2023), not seconds */
    struct timespec pause = {.tv_nsec = 20 * 1000000L};
    int64_t t0 = rfi_mono_ms();
    nanosleep(&pause, NULL);
    int64_t waited = rfi_mono_ms() - t0;
    assert_true(waited >= 19 && waited < 2000); /* ms, not µs or s; truncation may lose the last one */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(short_reads_are_continued_until_full), cmocka_unit_test(an_interrupted_call_is_repeated),
        cmocka_unit_test(a_failure_is_reported_with_its_errno), cmocka_unit_test(nothing_asked_calls_nothing),
        cmocka_unit_test(the_real_call_fills_the_buffer),       cmocka_unit_test(the_clocks_read_in_milliseconds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
