/*
 * A ledger append against a raw write(2) of the same line, in the same run, on the same file system: N
 * records through rf_ledger_append (formatting, validation, the single write) against N write(2) calls of the
 * same bytes, formatted once beforehand, on an O_APPEND descriptor of a file in the same directory. Rounds
 * alternate the two; each side's best round counts (on a shared machine the slowest rounds measure the
 * neighbours). Prints the time per line of each and a "ratio:" line for bench/run's summary (the
 * target: an append at most 2x the raw write).
 * Usage: bench_ledger [appends per round [rounds]]; the files go to $TMPDIR (default /tmp) and are removed.
 *        bench_ledger --calls N   N lines appended in batches of 64, nothing timed (bench/engine/c_instructions.sh
 *        counts the instructions per byte formatted under callgrind); prints the line's length.
 */
#define _POSIX_C_SOURCE 200809L
#include "../lib/bench_util.h"
#include "../lib/bench_temp.h"
#include "retryfreeze/ledger.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TARGET_RATIO 2.0
#define TARGET_BATCH_RATIO 1.5 /* a batch is one write(2): what is left is the formatting */

/* Both files must hold the same bytes: the bench compares equal work. */
static void same_files(const char *raw_path, const char *ledger_path) {
    FILE *a = fopen(raw_path, "rb"), *b = fopen(ledger_path, "rb");
    if (a == NULL || b == NULL) bench_die("bench_ledger", "cannot reopen the bench files", NULL);
    for (int ca = 0, cb = 0; ca != EOF || cb != EOF;)
        if ((ca = fgetc(a)) != (cb = fgetc(b)))
            bench_die("bench_ledger", "the ledger file differs from the raw file", ledger_path);
    fclose(a);
    fclose(b);
}

/* The baseline: seconds to write buf (len bytes) count times to the file at path, emptied first, one write(2) each on
 * an O_APPEND descriptor. */
static double raw_writes(const char *path, const char *buf, size_t len, long count) {
    int fd = open(path, O_WRONLY | O_APPEND | O_TRUNC | O_CLOEXEC);
    if (fd < 0) bench_die("bench_ledger", "open failed", path);
    double t0 = bench_now_s();
    for (long i = 0; i < count; i++)
        if (write(fd, buf, len) != (ssize_t)len) bench_die("bench_ledger", "write failed", path);
    double took = bench_now_s() - t0;
    close(fd);
    return took;
}

/* The ledger at path, emptied and opened without fsync. */
static rf_ledger *empty_ledger(const char *path) {
    rf_error err;
    if (truncate(path, 0) != 0) bench_die("bench_ledger", "truncate failed", path);
    rf_ledger *l = NULL;
    if (rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err) != RF_OK)
        bench_die("bench_ledger", "rf_ledger_open failed", err.message);
    return l;
}

int main(int argc, char **argv) {
    bool calls = argc == 3 && strcmp(argv[1], "--calls") == 0;
    if (argc > 3 || (argc > 1 && argv[1][0] == '-' && !calls))
        bench_die("bench_ledger", "usage: bench_ledger [appends per round [rounds]] | --calls N", NULL);
    long n = argc > 1 ? bench_positive("bench_ledger", argv[calls ? 2 : 1], calls ? "N" : "appends per round") : 10000;
    int rounds = argc > 2 && !calls ? (int)bench_positive("bench_ledger", argv[2], "rounds") : 11;
    /* A typical line: a POST that succeeded on its second attempt after a 503 with Retry-After. */
    rf_ledger_record rec = {.ts_ms = 1795886401123,
                            .route = "POST /v1/jobs",
                            .method = "POST",
                            .path = "/v1/jobs",
                            .key = "0b5c2f7e-3f1a-4c2b-9d7e-6a1f2e3d4c5b",
                            .policy = "sha256:4f6c1e0b9d2a7c5e8f3b6a1d0c9e2f7a5b8d3c6e1f4a7b0d9c2e5f8a3b6c1d4e",
                            .attempts = 2,
                            .elapsed_ms = 130,
                            .outcome = "success",
                            .reason = "success",
                            .ok = true,
                            .status = 200,
                            .body_len = 17,
                            .n_tries = 2,
                            .host = "web-3"};
    rec.tries[0] = (rf_ledger_try){.class_name = "HTTP_503",
                                   .status = 503,
                                   .elapsed_ms = 20,
                                   .delay_ms = 0,
                                   .reason = "pinned-status",
                                   .retry_after = "1",
                                   .retry_after_header = "retry-after"};
    rec.tries[1] = (rf_ledger_try){.class_name = "HTTP_200",
                                   .status = 200,
                                   .elapsed_ms = 10,
                                   .delay_ms = 1000,
                                   .reason = "success",
                                   .retry_after = NULL};
    rf_error err;
    char line[4096];
    long len = rf_ledger_format(&rec, line, sizeof line - 1, &err);
    if (len < 0) bench_die("bench_ledger", "rf_ledger_format failed", err.message);
    line[len] = '\n';
    size_t line_len = (size_t)len + 1;

    if (calls) { /* N lines formatted into a batch buffer and written, nothing timed: callgrind counts it */
        enum { CALL_BATCH = 64 };
        const rf_ledger_record *batch[CALL_BATCH];
        rf_status statuses[CALL_BATCH];
        for (int k = 0; k < CALL_BATCH; k++) batch[k] = &rec;
        char *path = bench_temp_path("bench_ledger", "calls");
        rf_ledger *l = NULL;
        if (rf_ledger_open(path, RF_LEDGER_FSYNC_NONE, &l, &err) != RF_OK)
            bench_die("bench_ledger", "rf_ledger_open failed", err.message);
        for (long i = 0; i < n; i += CALL_BATCH) rf_ledger_append_batch(l, batch, CALL_BATCH, statuses, NULL);
        rf_ledger_close(l, &err);
        unlink(path);
        free(path);
        printf("%zu\n", (size_t)len + 1);
        return 0;
    }
    char *raw_path = bench_temp_path("bench_ledger", "ledger"),
         *ledger_path = bench_temp_path("bench_ledger", "ledger");
    double raw_best = 1e30, append_best = 1e30;
    for (int round = 0; round < rounds; round++) {
        /* Baseline: the same line, already formatted, one write(2) each on an O_APPEND descriptor. */
        double raw = raw_writes(raw_path, line, line_len, n);
        rf_ledger *l = empty_ledger(ledger_path);
        double t0 = bench_now_s();
        for (long i = 0; i < n; i++)
            if (rf_ledger_append(l, &rec, &err) != RF_OK)
                bench_die("bench_ledger", "rf_ledger_append failed", err.message);
        double app = bench_now_s() - t0;
        if (rf_ledger_close(l, &err) != RF_OK) bench_die("bench_ledger", "rf_ledger_close failed", err.message);
        if (raw < raw_best) raw_best = raw;
        if (app < append_best) append_best = app;
    }
    same_files(raw_path, ledger_path);

    /* Batches: BATCH records through rf_ledger_append_batch (formatting them into one buffer, one write(2))
     * against one write(2) of the same BATCH lines, formatted once beforehand. */
    enum { BATCH = 64 };
    char *lines = malloc(line_len * BATCH);
    if (lines == NULL) bench_die("bench_ledger", "out of memory", NULL);
    for (int k = 0; k < BATCH; k++) memcpy(lines + (size_t)k * line_len, line, line_len);
    const rf_ledger_record *batch[BATCH];
    rf_status statuses[BATCH];
    for (int k = 0; k < BATCH; k++) batch[k] = &rec;
    long batches = n / BATCH > 0 ? n / BATCH : 1;
    double raw_batch_best = 1e30, batch_best = 1e30;
    for (int round = 0; round < rounds; round++) {
        double raw = raw_writes(raw_path, lines, line_len * BATCH, batches);
        rf_ledger *l = empty_ledger(ledger_path);
        double t0 = bench_now_s();
        for (long i = 0; i < batches; i++)
            if (rf_ledger_append_batch(l, batch, BATCH, statuses, NULL) != BATCH)
                bench_die("bench_ledger", "a batch failed", NULL);
        double app = bench_now_s() - t0;
        if (rf_ledger_close(l, &err) != RF_OK) bench_die("bench_ledger", "rf_ledger_close failed", err.message);
        if (raw < raw_batch_best) raw_batch_best = raw;
        if (app < batch_best) batch_best = app;
    }
    same_files(raw_path, ledger_path);
    free(lines);
    unlink(raw_path);
    unlink(ledger_path);
    free(raw_path);
    free(ledger_path);

    double ratio = append_best / raw_best;
    printf("ledger: %ld appends per round, best of %d rounds, fsync none, a %zu-byte line (2 tries)\n", n, rounds,
           line_len);
    printf("  rf_ledger_append   %9.0f appends/s  %6.2f us each\n", (double)n / append_best,
           append_best / (double)n * 1e6);
    printf("  raw write(2)       %9.0f writes/s   %6.2f us each  (the same line pre-formatted, O_APPEND)\n",
           (double)n / raw_best, raw_best / (double)n * 1e6);
    printf("  rf_ledger_append_batch %5.2f us per line  (batches of %d)\n",
           batch_best / (double)(batches * BATCH) * 1e6, BATCH);
    printf("  raw write(2)       %9.2f us per line  (the same %d lines pre-formatted, one write(2))\n",
           raw_batch_best / (double)(batches * BATCH) * 1e6, BATCH);
    printf("ratio: ledger append vs raw write(2): %.2fx (target <= %.0fx) %s\n", ratio, TARGET_RATIO,
           ratio <= TARGET_RATIO ? "met" : "NOT MET");
    double batch_ratio = batch_best / raw_batch_best;
    printf("ratio: ledger batch append vs one raw write(2) of the same lines: %.2fx (target <= %gx) %s\n", batch_ratio,
           TARGET_BATCH_RATIO, batch_ratio <= TARGET_BATCH_RATIO ? "met" : "NOT MET");
    return 0;
}
