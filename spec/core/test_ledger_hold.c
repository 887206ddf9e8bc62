/*
 * Held ledger lines (rf_ledger_hold, rf_ledger_flush): the bytes are those of separate appends, in order, written
 * as whole lines in one write(2) per batch; the bound; a line over it; close; a forked child; a full disk; the
 * refusals. Files live in a fresh directory under $TMPDIR (or /tmp), removed at the end.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "retryfreeze/ledger.h"
#include "ledger_sample.h"

#define TMP_FILES_TAG "rf-test-ledger-hold"
#include "tmp_files.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A record whose line differs by n (its attempts and path). */
static rf_ledger_record sample(int n, char *path_buf, size_t cap) {
    snprintf(path_buf, cap, "/v1/jobs/%d", n);
    rf_ledger_record r = ledger_sample();
    r.route = "POST /v1/jobs/*";
    r.path = path_buf;
    r.key = NULL;
    r.attempts = 1;
    r.elapsed_ms = n;
    r.status = 200;
    r.n_tries = 1;
    r.tries[0] = (rf_ledger_try){.class_name = "SUCCESS", .status = 200, .elapsed_ms = 3, .reason = "success"};
    r.host = "h";
    return r;
}

static long file_size(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    return (long)st.st_size;
}

/* The whole file (at most cap - 1 bytes), NUL-terminated; its length. */
static size_t slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n;
}

static void append_ok(rf_ledger *l, const rf_ledger_record *rec) {
    rf_error err = {0};
    rf_status st = rf_ledger_append(l, rec, &err);
    if (st != RF_OK) fail_msg("append failed (%d): %s: %s", (int)st, err.path, err.message);
}

/* n lines appended one by one (each its own write) into path: the bytes a held ledger must produce. */
static size_t expected_bytes(const char *path, int n, char *buf, size_t cap) {
    rf_ledger *l = NULL;
    rf_error err = {0};
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    for (int i = 0; i < n; i++) {
        char p[32];
        rf_ledger_record rec = sample(i, p, sizeof p);
        append_ok(l, &rec);
    }
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    return slurp(path, buf, cap);
}

static char want[1 << 16], got[1 << 16];

/* Held lines stay out of the file until rf_ledger_flush, then go in whole, in order, byte for byte as separate
 * appends would have written them. */
static void test_held_until_flush(void **state) {
    (void)state;
    size_t want_len = expected_bytes(tmp_file("one-by-one.jsonl"), 5, want, sizeof want);
    const char *path = tmp_file("held.jsonl");
    rf_ledger *l = NULL;
    rf_error err = {0};
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_LINE, &l, &err), RF_OK);
    assert_int_equal(rf_ledger_hold(l, RF_LEDGER_BATCH_BYTES, &err), RF_OK);
    for (int i = 0; i < 5; i++) {
        char p[32];
        rf_ledger_record rec = sample(i, p, sizeof p);
        append_ok(l, &rec);
    }
    assert_int_equal(rf_ledger_held(l), 5);
    assert_int_equal(file_size(path), 0);
    assert_int_equal(rf_ledger_flush(l, &err), RF_OK);
    assert_int_equal(rf_ledger_held(l), 0);
    assert_int_equal(rf_ledger_flush(l, &err), RF_OK); /* nothing held: nothing written */
    assert_int_equal(slurp(path, got, sizeof got), want_len);
    assert_memory_equal(got, want, want_len);
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
}

/* The bound: a line that would take the held ones past max_bytes writes them first; a line longer than max_bytes
 * goes alone, at once; close writes what is held. */
static void test_bound_and_close(void **state) {
    (void)state;
    size_t want_len = expected_bytes(tmp_file("one-by-one.jsonl"), 7, want, sizeof want);
    size_t one = (size_t)(strchr(want, '\n') - want) + 1; /* every line has this length (paths /v1/jobs/0..6) */
    const char *path = tmp_file("bounded.jsonl");
    rf_ledger *l = NULL;
    rf_error err = {0};
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    assert_int_equal(rf_ledger_hold(l, 2 * one + one / 2, &err), RF_OK); /* two lines fit, not three */
    char p[32];
    rf_ledger_record rec;
    for (int i = 0; i < 2; i++) {
        rec = sample(i, p, sizeof p);
        append_ok(l, &rec);
    }
    assert_int_equal(file_size(path), 0);
    rec = sample(2, p, sizeof p);
    append_ok(l, &rec); /* the third: the two held go out, it stays */
    assert_int_equal(file_size(path), (long)(2 * one));
    assert_int_equal(rf_ledger_held(l), 1);
    assert_int_equal(rf_ledger_hold(l, one / 2, &err), RF_OK); /* a bound below what is held: written at once */
    assert_int_equal(file_size(path), (long)(3 * one));
    rec = sample(3, p, sizeof p);
    append_ok(l, &rec); /* longer than the bound: alone, at once */
    assert_int_equal(file_size(path), (long)(4 * one));
    assert_int_equal(rf_ledger_held(l), 0);
    assert_int_equal(rf_ledger_hold(l, RF_LEDGER_BATCH_BYTES, &err), RF_OK);
    for (int i = 4; i < 7; i++) {
        rec = sample(i, p, sizeof p);
        append_ok(l, &rec);
    }
    assert_int_equal(file_size(path), (long)(4 * one));
    assert_int_equal(rf_ledger_close(l, &err), RF_OK); /* writes the three held */
    assert_int_equal(slurp(path, got, sizeof got), want_len);
    assert_memory_equal(got, want, want_len);
}

/* Turning holding off writes what is held; rf_ledger_append_batch while holding holds each record in order. */
static void test_off_and_batch(void **state) {
    (void)state;
    size_t want_len = expected_bytes(tmp_file("one-by-one.jsonl"), 4, want, sizeof want);
    const char *path = tmp_file("off.jsonl");
    rf_ledger *l = NULL;
    rf_error err = {0};
    char p[4][32];
    rf_ledger_record recs[4];
    const rf_ledger_record *ptrs[4];
    for (int i = 0; i < 4; i++) {
        recs[i] = sample(i, p[i], sizeof p[i]);
        ptrs[i] = &recs[i];
    }
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    assert_int_equal(rf_ledger_hold(l, 4096, &err), RF_OK);
    append_ok(l, &recs[0]);
    rf_status status[3];
    assert_int_equal(rf_ledger_append_batch(l, ptrs + 1, 2, status, NULL), 2);
    assert_int_equal(status[0], RF_OK);
    assert_int_equal(status[1], RF_OK);
    assert_int_equal(rf_ledger_held(l), 3);
    assert_int_equal(file_size(path), 0);
    assert_int_equal(rf_ledger_hold(l, 0, &err), RF_OK); /* off: the three go out */
    assert_int_equal(rf_ledger_held(l), 0);
    append_ok(l, &recs[3]); /* written at once again */
    assert_int_equal(slurp(path, got, sizeof got), want_len);
    assert_memory_equal(got, want, want_len);
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
}

static void observe(void *ud, const rf_ledger_record *rec, const char *host) {
    (void)rec;
    (void)host;
    ++*(int *)ud;
}

/* Refusals: a NULL ledger, a bound over RF_LEDGER_BATCH_BYTES, holding with an observer and the reverse. */
static void test_refusals(void **state) {
    (void)state;
    rf_error err = {0};
    assert_int_equal(rf_ledger_hold(NULL, 10, &err), RF_EINVAL);
    assert_int_equal(rf_ledger_flush(NULL, &err), RF_EINVAL);
    assert_int_equal(rf_ledger_held(NULL), 0);
    rf_ledger *l = NULL;
    assert_int_equal(rf_ledger_open(tmp_file("refused.jsonl"), RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    assert_int_equal(rf_ledger_hold(l, RF_LEDGER_BATCH_BYTES + 1, &err), RF_EINVAL);
    assert_string_equal(err.path, "max_bytes");
    int calls = 0;
    assert_int_equal(rf_ledger_observe(l, observe, &calls, &err), RF_OK);
    assert_int_equal(rf_ledger_hold(l, 100, &err), RF_EINVAL);
    assert_non_null(strstr(err.message, "observer"));
    assert_int_equal(rf_ledger_observe(l, NULL, NULL, &err), RF_OK);
    assert_int_equal(rf_ledger_hold(l, 100, &err), RF_OK);
    assert_int_equal(rf_ledger_observe(l, observe, &calls, &err), RF_EINVAL);
    assert_non_null(strstr(err.message, "holds its lines"));
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
}

/* A child forked while lines are held never writes them (its parent does): each line is in the file once. */
static void test_forked_child_drops_inherited_lines(void **state) {
    (void)state;
    const char *path = tmp_file("forked.jsonl");
    rf_ledger *l = NULL;
    rf_error err = {0};
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    assert_int_equal(rf_ledger_hold(l, 4096, &err), RF_OK);
    char p[32];
    rf_ledger_record rec = sample(1, p, sizeof p);
    append_ok(l, &rec);
    fflush(NULL);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) { /* the child: appends one line of its own and closes (which flushes) */
        rf_ledger_record own = sample(2, p, sizeof p);
        int bad = rf_ledger_held(l) != 1 || rf_ledger_append(l, &own, NULL) != RF_OK || rf_ledger_held(l) != 1 ||
                  rf_ledger_close(l, NULL) != RF_OK;
        _exit(bad);
    }
    int ws = 0;
    assert_int_equal(waitpid(child, &ws, 0), child);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    size_t n = slurp(path, got, sizeof got);
    size_t lines = 0;
    for (size_t i = 0; i < n; i++) lines += got[i] == '\n';
    assert_int_equal(lines, 2);
    const char *first = strstr(got, "\"/v1/jobs/1\""); /* the parent's, once */
    assert_non_null(first);
    assert_null(strstr(first + 1, "\"/v1/jobs/1\""));
    assert_non_null(strstr(got, "\"/v1/jobs/2\"")); /* the child's own */
}

/* A full disk cuts the held lines' write: the error says how many were lost, the lines before the cut are whole,
 * and once space is back the next write ends the fragment first (the reader then reads on). */
static void test_full_disk(void **state) {
    (void)state;
    struct rlimit saved;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
    if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < 1 << 20) skip();
    void (*old)(int) = signal(SIGXFSZ, SIG_IGN);
    expected_bytes(tmp_file("one-by-one.jsonl"), 1, want, sizeof want);
    long one = (long)(strchr(want, '\n') - want) + 1;
    const char *path = tmp_file("full.jsonl");
    rf_ledger *l = NULL;
    rf_error err = {0};
    assert_int_equal(rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err), RF_OK);
    assert_int_equal(rf_ledger_hold(l, 4096, &err), RF_OK);
    char p[32];
    rf_ledger_record rec = sample(0, p, sizeof p);
    for (int i = 0; i < 3; i++) append_ok(l, &rec);
    struct rlimit rl = saved;
    rl.rlim_cur = (rlim_t)(one + 10); /* the disk fills 10 bytes into the second line */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
    assert_int_equal(rf_ledger_flush(l, &err), RF_EIO);
    assert_non_null(strstr(err.message, "2 of 3 held line(s) lost"));
    assert_int_equal(rf_ledger_held(l), 0);
    assert_int_equal(file_size(path), one + 10);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &saved), 0);
    append_ok(l, &rec);
    assert_int_equal(rf_ledger_close(l, &err), RF_OK);
    assert_int_equal(file_size(path), one + 10 + 1 + one); /* "\n" + the line, in one write */
    signal(SIGXFSZ, old);
    rf_ledger_reader *r = NULL;
    assert_int_equal(rf_ledger_reader_open(path, &r, &err), RF_OK);
    rf_ledger_record back;
    assert_int_equal(rf_ledger_reader_next(r, &back, &err), RF_LEDGER_RECORD);
    assert_int_equal(rf_ledger_reader_next(r, &back, &err), RF_LEDGER_TORN);
    assert_int_equal(rf_ledger_reader_next(r, &back, &err), RF_LEDGER_RECORD);
    assert_int_equal(rf_ledger_reader_next(r, &back, &err), RF_LEDGER_END);
    rf_ledger_reader_close(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_held_until_flush),
        cmocka_unit_test(test_bound_and_close),
        cmocka_unit_test(test_off_and_batch),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_forked_child_drops_inherited_lines),
        cmocka_unit_test(test_full_disk),
    };
    return cmocka_run_group_tests_name("ledger_hold", tests, tmp_files_setup, tmp_files_teardown);
}
