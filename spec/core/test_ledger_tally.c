/*
 * The ledger's tally (retryfreeze/ledger_tally.h): every count and figure of a hand-made ledger, worked out here
 * by hand; the histogram checked bucket by bucket; what a try's wait header became, case by case; time buckets;
 * files read back (torn, corrupt, after_line) and the writer's observer, which must agree with them; copies;
 * refused options. Files live in a fresh directory under $TMPDIR (or /tmp), removed at the end.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "retryfreeze/ledger_tally.h"

#define TMP_FILES_TAG "rf-test-tally"
#include "tmp_files.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T0 INT64_C(1795972800000) /* 2026-11-29T17:20:00.000Z */

/* A record with its strings set; tries added by the caller. */
static rf_ledger_record rec(const char *route, int64_t ts_ms, int attempts, int64_t elapsed_ms, const char *outcome,
                            const char *reason, bool ok) {
    rf_ledger_record r;
    memset(&r, 0, sizeof r);
    r.ts_ms = ts_ms;
    r.route = route;
    r.method = route[0] == 'G' ? "GET" : "POST";
    r.path = "/v1/jobs";
    r.policy = "sha256:0123abcd";
    r.attempts = attempts;
    r.elapsed_ms = elapsed_ms;
    r.outcome = outcome;
    r.reason = reason;
    r.ok = ok;
    r.status = ok ? 200 : 503;
    return r;
}

static void try_(rf_ledger_record *r, const char *class_name, int status, int64_t elapsed_ms, int64_t delay_ms,
                 const char *reason, const char *retry_after, const char *header) {
    r->tries[r->n_tries++] = (rf_ledger_try){.class_name = class_name,
                                             .status = status,
                                             .elapsed_ms = elapsed_ms,
                                             .delay_ms = delay_ms,
                                             .reason = reason,
                                             .retry_after = retry_after,
                                             .retry_after_header = header};
}

/* The four records of the figures test:
 *   A  POST /v1/jobs   1 attempt, success, 7 ms
 *   B  POST /v1/jobs   3 attempts (503, 503, 200), success, 130 ms
 *   C  GET /v1/jobs/1  1 attempt, 404: terminal status-not-retryable, 20 ms
 *   D  GET /v1/jobs/1  2 attempts (503, 503): exhausted max-attempts, 3000 ms */
static void four_records(rf_ledger_record r[4]) {
    r[0] = rec("POST /v1/jobs", T0 + 1000, 1, 7, "success", "success", true);
    try_(&r[0], "SUCCESS", 200, 7, 0, "success", NULL, NULL);
    r[1] = rec("POST /v1/jobs", T0 + 2000, 3, 130, "success", "success", true);
    try_(&r[1], "HTTP_503", 503, 10, 0, "pinned-status", NULL, NULL);
    try_(&r[1], "HTTP_503", 503, 10, 50, "pinned-status", NULL, NULL);
    try_(&r[1], "SUCCESS", 200, 10, 60, "success", NULL, NULL);
    r[2] = rec("GET /v1/jobs/1", T0 + 3000, 1, 20, "terminal", "status-not-retryable", false);
    try_(&r[2], "HTTP_4XX", 404, 20, 0, "status-not-retryable", NULL, NULL);
    r[3] = rec("GET /v1/jobs/1", T0 + 4000, 2, 3000, "exhausted", "max-attempts", false);
    try_(&r[3], "HTTP_503", 503, 1000, 0, "pinned-status", NULL, NULL);
    try_(&r[3], "HTTP_503", 503, 1000, 1000, "max-attempts", NULL, NULL);
}

static rf_ledger_tally *new_tally(const rf_tally_options *opts) {
    rf_ledger_tally *t = NULL;
    rf_error err;
    assert_int_equal(RF_OK, rf_ledger_tally_new(opts, &t, &err));
    assert_non_null(t);
    return t;
}

static int64_t count_of(const rf_tally_count *c, size_t n, const char *name, const char *reason) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(c[i].name, name) == 0 && (reason == NULL || strcmp(c[i].reason, reason) == 0)) return c[i].n;
    return -1;
}

static void whole_figures_are_the_hand_counted_ones(void **state) {
    (void)state;
    rf_ledger_record r[4];
    four_records(r);
    rf_ledger_tally *t = new_tally(NULL);
    for (int i = 0; i < 4; i++) assert_int_equal(RF_OK, rf_ledger_tally_add(t, &r[i], NULL, NULL));
    rf_tally_scope s;
    rf_ledger_tally_whole(t, &s);
    const rf_tally_figures *f = &s.figures;
    assert_null(s.name);
    assert_int_equal(4, f->requests);
    assert_int_equal(2, f->successes);
    assert_int_equal(2, f->failures);
    assert_int_equal(1, f->terminal);
    assert_int_equal(1, f->retried_successes);
    assert_int_equal(7, f->attempts);         /* 1 + 3 + 1 + 2 */
    assert_int_equal(4, f->success_attempts); /* 1 + 3 */
    assert_int_equal(3, f->retries);          /* 0 + 2 + 0 + 1 */
    assert_true(f->success_rate == 0.5);
    assert_true(f->terminal_rate == 0.25);
    assert_true(f->retried_success_ratio == 0.5);
    assert_true(f->attempts_per_success == 2.0);
    assert_true(f->attempts_per_request == 1.75);
    assert_true(f->retry_ratio == 0.75);
    assert_int_equal(3157, f->elapsed_ms_sum);
    assert_int_equal(7, f->elapsed_min_ms);
    assert_int_equal(3000, f->elapsed_max_ms);
    assert_true(f->elapsed_mean_ms == 789.25);
    /* p50: the 2nd of 7, 20, 130, 3000 (exact below 128 ms); p95, p99: the 4th, 3000, whose bucket is
     * [2976, 3007] (64 buckets of 32 ms in [2048, 4096)): its midpoint 2991. */
    assert_int_equal(20, f->elapsed_p50_ms);
    assert_int_equal(2991, f->elapsed_p95_ms);
    assert_int_equal(2991, f->elapsed_p99_ms);
    /* le 5 10 25 50 100 250 500 1000 2500 5000 …, cumulative. */
    static const int64_t le[RF_TALLY_LE_COUNT] = {0, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4};
    assert_memory_equal(le, f->elapsed_le, sizeof le);
    assert_int_equal(3, s.n_outcomes);
    assert_int_equal(2, count_of(s.outcomes, s.n_outcomes, "success", "success"));
    assert_int_equal(1, count_of(s.outcomes, s.n_outcomes, "terminal", "status-not-retryable"));
    assert_int_equal(1, count_of(s.outcomes, s.n_outcomes, "exhausted", "max-attempts"));
    assert_int_equal(1, s.n_retried_classes);
    assert_int_equal(3, count_of(s.retried_classes, s.n_retried_classes, "HTTP_503", NULL)); /* 2 in B, 1 in D */
    assert_int_equal(0, s.by_attempts[0]);
    assert_int_equal(2, s.by_attempts[1]);
    assert_int_equal(1, s.by_attempts[2]);
    assert_int_equal(1, s.by_attempts[3]);
    assert_int_equal(1, s.hist[7]);
    assert_int_equal(1, s.hist[20]);
    assert_int_equal(1, s.hist[rf_tally_bucket_of(130)]);
    assert_int_equal(1, s.hist[rf_tally_bucket_of(3000)]);
    rf_tally_info info;
    rf_ledger_tally_info(t, &info);
    assert_int_equal(4, info.lines);
    assert_true(info.has_ts);
    assert_int_equal(T0 + 1000, info.ts_min_ms);
    assert_int_equal(T0 + 4000, info.ts_max_ms);
    assert_false(info.incomplete);
    rf_ledger_tally_free(t);
}

static void scopes_split_by_route_or_by_host(void **state) {
    (void)state;
    rf_ledger_record r[4];
    four_records(r);
    rf_ledger_tally *t = new_tally(NULL);
    rf_tally_options by_host = {.group = RF_TALLY_BY_HOST};
    rf_ledger_tally *h = new_tally(&by_host);
    const char *hosts[4] = {"web-1", NULL, "web-1", "web-2"};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(RF_OK, rf_ledger_tally_add(t, &r[i], hosts[i], NULL));
        assert_int_equal(RF_OK, rf_ledger_tally_add(h, &r[i], hosts[i], NULL));
    }
    assert_int_equal(2, rf_ledger_tally_scope_count(t));
    rf_tally_scope s;
    assert_true(rf_ledger_tally_scope(t, 0, &s));
    assert_string_equal("POST /v1/jobs", s.name);
    assert_int_equal(2, s.figures.requests);
    assert_true(s.figures.retried_success_ratio == 0.5);
    assert_true(s.figures.terminal_rate == 0);
    assert_int_equal(2, count_of(s.retried_classes, s.n_retried_classes, "HTTP_503", NULL));
    assert_true(rf_ledger_tally_scope(t, 1, &s));
    assert_string_equal("GET /v1/jobs/1", s.name);
    assert_int_equal(0, s.figures.successes);
    assert_true(s.figures.attempts_per_success == 0); /* no successes: 0, never a division by zero */
    assert_true(s.figures.terminal_rate == 0.5);
    assert_int_equal(20, s.figures.elapsed_p50_ms);
    assert_false(rf_ledger_tally_scope(t, 2, &s));
    assert_int_equal(3, rf_ledger_tally_scope_count(h));
    static const char *const names[3] = {"web-1", "", "web-2"}; /* "": a line without a host */
    static const int64_t requests[3] = {2, 1, 1};
    for (size_t i = 0; i < 3; i++) {
        assert_true(rf_ledger_tally_scope(h, i, &s));
        assert_string_equal(names[i], s.name);
        assert_int_equal(requests[i], s.figures.requests);
    }
    rf_ledger_tally_free(t);
    rf_ledger_tally_free(h);
}

/*
 * The histogram, every bucket: the ranges tile 0..2^53 − 1 without gap or overlap (each starts one past the
 * previous end), each range's ends map back to it, and bucket_of is monotonic; so every duration has exactly one
 * bucket. Plus the edges: negative values, 127/128, and values past 2^53.
 */
static void the_histogram_tiles_every_duration(void **state) {
    (void)state;
    int64_t next = 0;
    for (size_t b = 0; b < RF_TALLY_BUCKETS; b++) {
        int64_t lo, hi;
        rf_tally_bucket_range(b, &lo, &hi);
        assert_int_equal(next, lo);
        assert_true(hi >= lo);
        assert_int_equal(b, rf_tally_bucket_of(lo));
        assert_int_equal(b, rf_tally_bucket_of(hi));
        assert_int_equal(b, rf_tally_bucket_of(lo + (hi - lo) / 2));
        if (b < 128)
            assert_int_equal(lo, hi); /* exact below 128 ms */
        else
            assert_true((hi - lo + 1) * 128 <= lo * 2); /* width ≤ 1/64 of the range's start: 1/128 off the midpoint */
        next = hi + 1;
    }
    assert_int_equal((INT64_C(1) << 53), next);
    assert_int_equal(0, rf_tally_bucket_of(-5));
    assert_int_equal(127, rf_tally_bucket_of(127));
    assert_int_equal(128, rf_tally_bucket_of(128));
    assert_int_equal(RF_TALLY_BUCKETS - 1, rf_tally_bucket_of(INT64_MAX));
    int64_t lo, hi;
    rf_tally_bucket_range(RF_TALLY_BUCKETS + 7, &lo, &hi); /* out of range: the last */
    assert_int_equal((INT64_C(1) << 53) - 1, hi);
}

/* Nearest rank over 100 requests of 1..100 ms: the q-th percentile is the ⌈100 q⌉-th value itself. */
static void percentiles_are_nearest_rank(void **state) {
    (void)state;
    rf_ledger_tally *t = new_tally(NULL);
    for (int64_t ms = 100; ms >= 1; ms--) {
        rf_ledger_record r = rec("GET /x", T0, 1, ms, "success", "success", true);
        assert_int_equal(RF_OK, rf_ledger_tally_add(t, &r, NULL, NULL));
    }
    rf_tally_scope s;
    rf_ledger_tally_whole(t, &s);
    assert_int_equal(50, s.figures.elapsed_p50_ms);
    assert_int_equal(95, s.figures.elapsed_p95_ms);
    assert_int_equal(99, s.figures.elapsed_p99_ms);
    assert_int_equal(1, rf_tally_percentile_ms(&s, 0.001));
    assert_int_equal(100, rf_tally_percentile_ms(&s, 1.0));
    assert_int_equal(1, rf_tally_percentile_ms(&s, 0.0 / 0.0)); /* NaN: the first rank, never undefined */
    rf_tally_scope empty = {0};
    assert_int_equal(0, rf_tally_percentile_ms(&empty, 0.5));
    rf_ledger_tally_free(t);
}

/* One record per rule of ledger_wait_use.c, each try's use asserted. */
static void what_each_wait_header_became(void **state) {
    (void)state;
    rf_ledger_tally *t = new_tally(NULL);
    rf_ledger_record r;
    /* honored: retried after exactly the delay (Retry-After 2 → 2000 ms), then not-needed (a success with one) */
    r = rec("GET /x", T0, 2, 2100, "success", "success", true);
    try_(&r, "HTTP_503", 503, 50, 0, "pinned-status", "2", NULL);
    try_(&r, "SUCCESS", 200, 50, 2000, "success", "5", "retry-after");
    assert_int_equal(RF_OK, rf_ledger_tally_add(t, &r, NULL, NULL));
    /* not-honored: retried after another delay; ignored-invalid: not a delay-seconds or an HTTP-date */
    r = rec("GET /x", T0, 3, 900, "success", "success", true);
    try_(&r, "HTTP_503", 503, 50, 0, "pinned-status", "1", NULL);
    try_(&r, "HTTP_503", 503, 50, 500, "pinned-status", "soon", NULL);
    try_(&r, "SUCCESS", 200, 50, 250, "success", NULL, NULL);
    assert_int_equal(RF_OK, rf_ledger_tally_add(t, &r, NULL, NULL));
    /* honored: the value stopped the request (too long for the budget); retry-after-ms read in ms */
    r = rec("GET /x", T0, 2, 100, "deadline", "retry-after-exceeds-budget", false);
    try_(&r, "HTTP_503", 503, 50, 0, "pinned-status", "300", "retry-after-ms");
    try_(&r, "HTTP_503", 503, 50, 300, "retry-after-exceeds-budget", "999999", "retry-after-ms");
    assert_int_equal(RF_OK, rf_ledger_tally_add(t, &r, NULL, NULL));
    /* an HTTP-date: the next try started 400 ms after it (within 1 s: honored). The record ends at ts = the second
     * try's end: it started at ts − 50 = 17:20:05.400, the date is 17:20:05. */
    r = rec("GET /x", T0 + 5450, 2, 5450, "success", "success", true);
    try_(&r, "HTTP_503", 503, 50, 0, "pinned-status", "Sun, 29 Nov 2026 17:20:05 GMT", NULL);
    try_(&r, "SUCCESS", 200, 50, 5350, "success", NULL, NULL);
    assert_int_equal(RF_OK, rf_ledger_tally_add(t, &r, NULL, NULL));
    /* the same date, but the next try started 3 s late: not-honored; an unknown header: not judged */
    r = rec("GET /x", T0 + 8450, 2, 8450, "success", "success", true);
    try_(&r, "HTTP_503", 503, 50, 0, "pinned-status", "Sun, 29 Nov 2026 17:20:05 GMT", NULL);
    try_(&r, "SUCCESS", 200, 50, 8350, "success", "1", "x-unknown-wait");
    assert_int_equal(RF_OK, rf_ledger_tally_add(t, &r, NULL, NULL));
    rf_tally_scope s;
    rf_ledger_tally_whole(t, &s);
    assert_int_equal(0, s.retry_after[RF_RA_USE_ABSENT]);
    assert_int_equal(4, s.retry_after[RF_RA_USE_HONORED]);
    assert_int_equal(1, s.retry_after[RF_RA_USE_IGNORED]);
    assert_int_equal(2, s.retry_after[RF_RA_USE_NOT_HONORED]);
    assert_int_equal(1, s.retry_after[RF_RA_USE_NOT_NEEDED]);
    rf_ledger_tally_free(t);
}

static void time_buckets_clamp_and_skip_the_harness(void **state) {
    (void)state;
    rf_tally_options o = {.time_buckets = 3, .origin_ms = T0, .bucket_ms = 60000};
    rf_ledger_tally *t = new_tally(&o);
    int64_t at[] = {T0 - 5, T0 + 59999, T0 + 60000, T0 + 999999999};
    for (int i = 0; i < 4; i++) {
        rf_ledger_record r = rec("GET /x", at[i], 1, 10, "success", "success", true);
        assert_int_equal(RF_OK, rf_ledger_tally_add(t, &r, NULL, NULL));
    }
    rf_ledger_record harness = rec(RF_LEDGER_HARNESS_ROUTE, 0, 1, 10, "success", "success", true);
    assert_int_equal(RF_OK, rf_ledger_tally_add(t, &harness, NULL, NULL));
    assert_int_equal(3, rf_ledger_tally_time_bucket_count(t));
    static const int64_t requests[3] = {2, 1, 1}; /* before the first: the first; past the last: the last */
    for (size_t i = 0; i < 3; i++) {
        rf_tally_scope s;
        assert_true(rf_ledger_tally_time_bucket(t, i, &s));
        assert_null(s.name);
        assert_int_equal(T0 + (int64_t)i * 60000, s.start_ms);
        assert_int_equal(requests[i], s.figures.requests);
    }
    rf_tally_scope s;
    assert_false(rf_ledger_tally_time_bucket(t, 3, &s));
    rf_ledger_tally_whole(t, &s);
    assert_int_equal(5, s.figures.requests); /* the harness line is counted, only in no time bucket */
    rf_tally_info info;
    rf_ledger_tally_info(t, &info);
    assert_int_equal(T0 - 5, info.ts_min_ms); /* its ts 0 is no time: not the range's start */
    rf_ledger_tally_free(t);
}

/* Compares the figures two tallies give for their whole scope. */
static void assert_same_whole(const rf_ledger_tally *a, const rf_ledger_tally *b) {
    rf_tally_scope x, y;
    rf_ledger_tally_whole(a, &x);
    rf_ledger_tally_whole(b, &y);
    assert_memory_equal(&x.figures, &y.figures, sizeof x.figures);
    assert_int_equal(x.n_outcomes, y.n_outcomes);
    for (size_t i = 0; i < x.n_outcomes; i++)
        assert_int_equal(x.outcomes[i].n, count_of(y.outcomes, y.n_outcomes, x.outcomes[i].name, x.outcomes[i].reason));
    assert_memory_equal(x.hist, y.hist, RF_TALLY_BUCKETS * sizeof *x.hist);
    assert_memory_equal(x.retry_after, y.retry_after, RF_RA_USE_COUNT * sizeof *x.retry_after);
    assert_memory_equal(x.by_attempts, y.by_attempts, (RF_LEDGER_MAX_TRIES + 1) * sizeof *x.by_attempts);
}

/* The writer's observer counts what a tally reading the file back counts; lines before after_line are left out,
 * a torn line is counted and skipped, a corrupt one stops the read (or is skipped). */
static void a_file_read_back_equals_its_appends(void **state) {
    (void)state;
    const char *path = tmp_file("ledger.jsonl");
    rf_ledger *l;
    rf_error err;
    assert_int_equal(RF_OK, rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err));
    rf_ledger_record r[4];
    four_records(r);
    assert_int_equal(RF_OK, rf_ledger_append(l, &r[0], &err)); /* line 1: before the run */
    rf_ledger_tally *observed = new_tally(NULL);
    assert_int_equal(RF_OK, rf_ledger_observe(l, rf_ledger_tally_observer, observed, &err));
    for (int i = 1; i < 4; i++) assert_int_equal(RF_OK, rf_ledger_append(l, &r[i], &err));
    assert_int_equal(RF_OK, rf_ledger_close(l, &err));
    rf_ledger_tally *read = new_tally(NULL);
    rf_tally_file file;
    assert_int_equal(RF_OK, rf_ledger_tally_read(read, path, 1, false, &file, &err));
    assert_int_equal(4, file.lines);
    assert_int_equal(0, file.first_torn);
    assert_same_whole(observed, read);
    rf_tally_info a, b;
    rf_ledger_tally_info(observed, &a);
    rf_ledger_tally_info(read, &b);
    assert_int_equal(3, a.lines); /* three records appended */
    assert_int_equal(4, b.lines); /* four lines read */
    assert_int_equal(a.ts_min_ms, b.ts_min_ms);
    assert_int_equal(a.ts_max_ms, b.ts_max_ms);

    /* A torn fragment in the middle and a corrupt line: counted, line numbers kept. */
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fputs("{\"ts\":\"2026-11-29T17:2\n{\"not\":\"a record\"}\n", f);
    fclose(f);
    rf_ledger_tally *t = new_tally(NULL);
    assert_int_equal(RF_EINVAL, rf_ledger_tally_read(t, path, 0, false, &file, &err));
    assert_int_equal(6, err.line);
    assert_string_equal(path, err.path);
    assert_non_null(strstr(err.message, "unknown field"));
    rf_ledger_tally_free(t);
    t = new_tally(NULL);
    assert_int_equal(RF_OK, rf_ledger_tally_read(t, path, 0, true, &file, &err));
    assert_int_equal(6, file.lines);
    assert_int_equal(5, file.first_torn);
    assert_int_equal(1, file.torn_lines);
    assert_int_equal(1, file.corrupt_lines);
    rf_tally_info info;
    rf_ledger_tally_info(t, &info);
    assert_int_equal(6, info.lines);
    assert_int_equal(1, info.torn_lines);
    assert_int_equal(1, info.corrupt_lines);
    rf_tally_scope s;
    rf_ledger_tally_whole(t, &s);
    assert_int_equal(4, s.figures.requests);
    /* A second file adds to the same tally. */
    assert_int_equal(RF_OK, rf_ledger_tally_read(t, path, 4, true, &file, &err));
    rf_ledger_tally_whole(t, &s);
    assert_int_equal(4, s.figures.requests); /* its lines 1..4 are left out, 5 torn, 6 corrupt */
    rf_ledger_tally_info(t, &info);
    assert_int_equal(12, info.lines);
    assert_int_equal(2, info.torn_lines);
    assert_int_equal(2, info.corrupt_lines);
    rf_ledger_tally_free(t);
    rf_ledger_tally_free(observed);
    rf_ledger_tally_free(read);
}

static void a_missing_file_is_named(void **state) {
    (void)state;
    rf_ledger_tally *t = new_tally(NULL);
    rf_error err;
    rf_tally_file file;
    const char *path = tmp_file("absent.jsonl");
    assert_int_equal(RF_EIO, rf_ledger_tally_read(t, path, 0, false, &file, &err));
    assert_non_null(strstr(err.message, "No such file or directory"));
    assert_non_null(strstr(err.message, path));
    assert_int_equal(0, file.lines);
    rf_ledger_tally_free(t);
}

/* A copy is whole and its own: feeding the original changes nothing in it, and freeing it frees everything. */
static void a_copy_does_not_move_with_the_original(void **state) {
    (void)state;
    rf_ledger_record r[4];
    four_records(r);
    rf_tally_options o = {.time_buckets = 2, .origin_ms = T0, .bucket_ms = 3000};
    rf_ledger_tally *t = new_tally(&o), *c = NULL;
    for (int i = 0; i < 2; i++) assert_int_equal(RF_OK, rf_ledger_tally_add(t, &r[i], "web-1", NULL));
    assert_int_equal(RF_OK, rf_ledger_tally_copy(t, &c, NULL));
    for (int i = 2; i < 4; i++) assert_int_equal(RF_OK, rf_ledger_tally_add(t, &r[i], "web-1", NULL));
    rf_tally_scope s;
    rf_ledger_tally_whole(c, &s);
    assert_int_equal(2, s.figures.requests);
    assert_int_equal(1, rf_ledger_tally_scope_count(c));
    assert_true(rf_ledger_tally_time_bucket(c, 0, &s));
    assert_int_equal(2, s.figures.requests);
    rf_ledger_tally_whole(t, &s);
    assert_int_equal(4, s.figures.requests);
    rf_ledger_tally_free(t); /* the copy's names are its own */
    assert_true(rf_ledger_tally_scope(c, 0, &s));
    assert_string_equal("POST /v1/jobs", s.name);
    assert_int_equal(2, count_of(s.outcomes, s.n_outcomes, "success", "success"));
    rf_ledger_tally_free(c);
}

static void bad_options_and_records_are_refused_by_name(void **state) {
    (void)state;
    rf_ledger_tally *t = NULL;
    rf_error err;
    rf_tally_options o = {.time_buckets = RF_TALLY_MAX_TIME_BUCKETS + 1, .bucket_ms = 1};
    assert_int_equal(RF_EINVAL, rf_ledger_tally_new(&o, &t, &err));
    assert_null(t);
    assert_string_equal("time_buckets", err.path);
    assert_string_equal("must be 0..1024, got 1025", err.message);
    o = (rf_tally_options){.time_buckets = 3, .bucket_ms = 0};
    assert_int_equal(RF_EINVAL, rf_ledger_tally_new(&o, &t, &err));
    assert_string_equal("bucket_ms", err.path);
    assert_string_equal("must be 1..253402300799999 (ms), got 0", err.message);
    o = (rf_tally_options){.time_buckets = 3, .bucket_ms = 1, .origin_ms = INT64_MIN};
    assert_int_equal(RF_EINVAL, rf_ledger_tally_new(&o, &t, &err));
    assert_string_equal("origin_ms", err.path);
    o = (rf_tally_options){.group = (rf_tally_group)7};
    assert_int_equal(RF_EINVAL, rf_ledger_tally_new(&o, &t, &err));
    assert_string_equal("group", err.path);
    assert_int_equal(RF_EINVAL, rf_ledger_tally_new(NULL, NULL, &err));
    t = new_tally(NULL);
    rf_ledger_record r = rec("GET /x", T0, 1, 10, "success", "success", true);
    r.outcome = NULL;
    assert_int_equal(RF_EINVAL, rf_ledger_tally_add(t, &r, NULL, &err));
    assert_string_equal("$.outcome", err.path);
    char want[128]; /* the reader is named: the tally, not the replay that shares the check */
    snprintf(want, sizeof want, "a string the tally reads is NULL, or more than %d tries", RF_LEDGER_MAX_TRIES);
    assert_non_null(strstr(err.message, want));
    r = rec("GET /x", T0, 1, 10, "success", "success", true);
    try_(&r, NULL, 200, 10, 0, "success", NULL, NULL);
    assert_int_equal(RF_EINVAL, rf_ledger_tally_add(t, &r, NULL, &err));
    assert_string_equal("$.tries", err.path);
    assert_int_equal(RF_EINVAL, rf_ledger_tally_add(t, NULL, NULL, &err));
    rf_tally_info info;
    rf_ledger_tally_info(t, &info);
    assert_int_equal(0, info.lines); /* nothing refused was counted */
    rf_ledger_tally_free(t);
    rf_ledger_tally_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(whole_figures_are_the_hand_counted_ones),
        cmocka_unit_test(scopes_split_by_route_or_by_host),
        cmocka_unit_test(the_histogram_tiles_every_duration),
        cmocka_unit_test(percentiles_are_nearest_rank),
        cmocka_unit_test(what_each_wait_header_became),
        cmocka_unit_test(time_buckets_clamp_and_skip_the_harness),
        cmocka_unit_test(a_file_read_back_equals_its_appends),
        cmocka_unit_test(a_missing_file_is_named),
        cmocka_unit_test(a_copy_does_not_move_with_the_original),
        cmocka_unit_test(bad_options_and_records_are_refused_by_name),
    };
    return cmocka_run_group_tests(tests, tmp_files_setup, tmp_files_teardown);
}
