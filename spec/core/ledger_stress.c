/*
 * ledger_stress [DIR] — the ledger under several processes and a crash (registered as ctest c_ledger_stress).
 *
 * Phase 1: WRITERS processes append PER_WRITER records each to one file (path "/w<writer>/<i>"). Reading it
 *          back must give exactly WRITERS * PER_WRITER records, all of which parse, each writer's sequence
 *          complete and in order: one write(2) per line on O_APPEND never interleaves.
 * Phase 2: a writer appending in a loop is killed with SIGKILL after ~50 ms, then half a line is appended
 *          raw, as a crash mid-write leaves it. Every whole line must read as a record, in order, and the
 *          last as RF_LEDGER_TORN.
 * Phase 3: writers killed at seeded moments, each on a fresh file; phase 4: a full tmpfs, then space freed;
 * phase 5: writers killed in turn on one file, every fragment ended by the next writer; phase 6: writers opening
 * the file while others append lines that cross page boundaries (see each phase).
 * Files go into a fresh directory under DIR (default $TMPDIR or /tmp), removed at the end. Exit status 0
 * on success, 1 with a message on stderr otherwise. Prints the appends per second of phase 1.
 */
#define _POSIX_C_SOURCE 200809L
#include "retryfreeze/ledger.h"
#include "ledger_sample.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { WRITERS = 4, PER_WRITER = 50000, KILL_AFTER_MS = 50, KILLS = 50 };

static char dir[512];

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static int
fail(const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "ledger_stress: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    return 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A realistic record: about 450 bytes as a line. */
static rf_ledger_record record(const char *path) {
    rf_ledger_record r = ledger_sample();
    r.path = path;
    r.key = "0b9e7a52-3f7c-4c1e-9d55-6f5c3a1e2b7d";
    r.policy = "sha256:6c2f0f5e1b7a4d3c9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d";
    r.attempts = 3;
    r.elapsed_ms = 1830;
    r.body_len = 512;
    r.n_tries = 3;
    r.tries[0].elapsed_ms = 210;
    r.tries[2] = r.tries[1];
    r.tries[1] = (rf_ledger_try){
        .class_name = "TIMEOUT", .status = 0, .elapsed_ms = 500, .delay_ms = 1000, .reason = "pinned-status"};
    r.tries[2].elapsed_ms = 120;
    r.tries[2].delay_ms = 0;
    return r;
}

/* Child: appends count records "/<prefix>/<i>" (count < 0: forever), signalling ready_fd after the first. */
static void writer(const char *file, const char *prefix, long count, int ready_fd) {
    rf_ledger *l = NULL;
    rf_error err = {0};
    char path[64];

    if (rf_ledger_open(file, RF_LEDGER_FSYNC_NONE, &l, &err) != RF_OK) {
        fprintf(stderr, "ledger_stress: writer %s: %s\n", prefix, err.message);
        _exit(1);
    }
    for (long i = 0; count < 0 || i < count; i++) {
        snprintf(path, sizeof path, "/%s/%ld", prefix, i);
        rf_ledger_record rec = record(path);
        if (rf_ledger_append(l, &rec, &err) != RF_OK) {
            fprintf(stderr, "ledger_stress: writer %s: %s\n", prefix, err.message);
            _exit(1);
        }
        if (i == 0 && ready_fd >= 0) { /* tell the parent the first line is in */
            if (write(ready_fd, "x", 1) != 1) {
                _exit(1);
            }
            close(ready_fd);
        }
    }
    _exit(rf_ledger_close(l, &err) == RF_OK ? 0 : 1);
}

/* Parses "/<prefix><n>/<i>"; false when path has any other shape. */
static bool parse_path(const char *path, char prefix, long *n, long *i) {
    char *end;
    if (path[0] != '/' || path[1] != prefix) {
        return false;
    }
    *n = strtol(path + 2, &end, 10);
    if (end == path + 2 || *end != '/') {
        return false;
    }
    const char *second = end + 1;
    *i = strtol(second, &end, 10);
    return end != second && *end == '\0';
}

static int phase1(const char *file) {
    pid_t pids[WRITERS];
    char prefix[16];
    double t0 = now_s();

    for (int w = 0; w < WRITERS; w++) {
        snprintf(prefix, sizeof prefix, "w%d", w);
        pids[w] = fork();
        if (pids[w] < 0) {
            return fail("fork: %s", strerror(errno));
        }
        if (pids[w] == 0) {
            writer(file, prefix, PER_WRITER, -1);
        }
    }
    int failed = 0;
    for (int w = 0; w < WRITERS; w++) {
        int status;
        if (waitpid(pids[w], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            failed = fail("writer w%d failed", w);
        }
    }
    if (failed) {
        return 1;
    }
    double t1 = now_s();

    rf_ledger_reader *r = NULL;
    rf_error err = {0};
    rf_ledger_record rec;
    long next[WRITERS] = {0}, total = 0;
    if (rf_ledger_reader_open(file, &r, &err) != RF_OK) {
        return fail("%s", err.message);
    }
    for (;;) {
        rf_ledger_read_status st = rf_ledger_reader_next(r, &rec, &err);
        if (st == RF_LEDGER_END) {
            break;
        }
        if (st != RF_LEDGER_RECORD) {
            fail("line %ld is not a record (status %d): %s", rf_ledger_reader_line(r), (int)st, err.message);
            rf_ledger_reader_close(r);
            return 1;
        }
        long w, i;
        if (!parse_path(rec.path, 'w', &w, &i) || w < 0 || w >= WRITERS) {
            rf_ledger_reader_close(r);
            return fail("unexpected path %s at line %ld", rec.path, rf_ledger_reader_line(r));
        }
        if (i != next[w]) {
            rf_ledger_reader_close(r);
            return fail("out of order: %s at line %ld", rec.path, rf_ledger_reader_line(r));
        }
        next[w]++;
        total++;
    }
    rf_ledger_reader_close(r);
    double t2 = now_s();
    for (int w = 0; w < WRITERS; w++) {
        if (next[w] != PER_WRITER) {
            return fail("writer w%d: %ld of %d records", w, next[w], PER_WRITER);
        }
    }
    if (total != (long)WRITERS * PER_WRITER) {
        return fail("%ld records read, expected %d", total, WRITERS * PER_WRITER);
    }
    printf("phase 1: %ld appends by %d processes in %.0f ms = %.0f appends/s; read back in %.0f ms = %.0f "
           "records/s\n",
           total, WRITERS, (t1 - t0) * 1e3, (double)total / (t1 - t0), (t2 - t1) * 1e3, (double)total / (t2 - t1));
    return 0;
}

static int phase2(const char *file) {
    int ready[2];
    char byte;

    if (pipe(ready) != 0) {
        return fail("pipe: %s", strerror(errno));
    }
    pid_t pid = fork();
    if (pid < 0) {
        return fail("fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(ready[0]);
        alarm(20); /* never outlive a parent that failed to kill us */
        writer(file, "k0", -1, ready[1]);
    }
    close(ready[1]);
    if (read(ready[0], &byte, 1) != 1) {
        close(ready[0]);
        return fail("the looping writer never appended");
    }
    close(ready[0]);
    struct timespec pause = {0, KILL_AFTER_MS * 1000000L};
    nanosleep(&pause, NULL);
    kill(pid, SIGKILL);
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
        return fail("the looping writer did not die of SIGKILL");
    }

    /* The crash: the first half of a line, no newline, written raw. */
    char line[2048];
    rf_ledger_record rec = record("/k0/torn");
    rf_error err = {0};
    long len = rf_ledger_format(&rec, line, sizeof line, &err);
    if (len <= 0) {
        return fail("format: %s", err.message);
    }
    int fd = open(file, O_WRONLY | O_APPEND);
    if (fd < 0 || write(fd, line, (size_t)len / 2) != len / 2) {
        return fail("raw append: %s", strerror(errno));
    }
    close(fd);

    rf_ledger_reader *r = NULL;
    long records = 0;
    if (rf_ledger_reader_open(file, &r, &err) != RF_OK) {
        return fail("%s", err.message);
    }
    rf_ledger_read_status st;
    while ((st = rf_ledger_reader_next(r, &rec, &err)) == RF_LEDGER_RECORD) {
        long n, i;
        if (!parse_path(rec.path, 'k', &n, &i) || n != 0 || i != records) {
            rf_ledger_reader_close(r);
            return fail("unexpected path %s at line %ld", rec.path, records + 1);
        }
        records++;
    }
    long torn_line = err.line;
    rf_ledger_read_status after = rf_ledger_reader_next(r, &rec, &err);
    rf_ledger_reader_close(r);
    if (st != RF_LEDGER_TORN || torn_line != records + 1 || after != RF_LEDGER_END) {
        return fail("after %ld records: expected RF_LEDGER_TORN at line %ld then RF_LEDGER_END, got %d at line %ld "
                    "then %d (%s)",
                    records, records + 1, (int)st, torn_line, (int)after, err.message);
    }
    printf("phase 2: writer killed after %d ms: %ld whole lines, then the torn line %ld\n", KILL_AFTER_MS, records,
           torn_line);
    return 0;
}

/*
 * Phase 3: a writer killed with SIGKILL at KILLS seeded moments, each on a fresh ledger. Each time
 * every line but at most the last parses, the lines are whole and in order, and a line cut by the kill (a
 * fatal signal can interrupt write(2) midway) is reported by the reader as the torn last line.
 */
static int phase3(const char *file) {
    unsigned seed = 12345;
    long total = 0, torn = 0;
    for (int k = 1; k <= KILLS; k++) {
        int ready[2];
        char byte;
        unlink(file);
        if (pipe(ready) != 0) return fail("pipe: %s", strerror(errno));
        pid_t pid = fork();
        if (pid < 0) return fail("fork: %s", strerror(errno));
        if (pid == 0) {
            close(ready[0]);
            alarm(20);
            writer(file, "m0", -1, ready[1]);
        }
        close(ready[1]);
        if (read(ready[0], &byte, 1) != 1) return fail("kill %d: the writer never appended", k);
        close(ready[0]);
        seed = seed * 1103515245u + 12345u;
        struct timespec pause = {0, (long)(1 + (seed >> 16) % 20) * 1000000L}; /* 1..20 ms */
        nanosleep(&pause, NULL);
        kill(pid, SIGKILL);
        int status;
        if (waitpid(pid, &status, 0) < 0 || !WIFSIGNALED(status)) return fail("kill %d: no SIGKILL death", k);
        rf_ledger_reader *r = NULL;
        rf_error err = {0};
        rf_ledger_record rec;
        if (rf_ledger_reader_open(file, &r, &err) != RF_OK) return fail("%s", err.message);
        long records = 0;
        rf_ledger_read_status st;
        while ((st = rf_ledger_reader_next(r, &rec, &err)) == RF_LEDGER_RECORD) {
            long n, i;
            if (!parse_path(rec.path, 'm', &n, &i) || n != 0 || i != records) break;
            records++;
        }
        rf_ledger_reader_close(r);
        if (st == RF_LEDGER_TORN && err.line == records + 1) {
            torn++;
        } else if (st != RF_LEDGER_END) {
            return fail("kill %d: line %ld is not a whole record in order (status %d, %s)", k, records + 1, (int)st,
                        err.message);
        }
        if (records < 1) return fail("kill %d: no whole line", k);
        total += records;
    }
    unlink(file);
    printf("phase 3: %d writers killed with SIGKILL at seeded moments: %ld whole lines, %ld torn last lines reported, "
           "0 other damage\n",
           KILLS, total, torn);
    return 0;
}

/* Phase 4: a ledger on a 16 KiB tmpfs. Appends until the disk is full: the failure says "No space
 * left on device" and every line before it reads back whole. Then space is freed (a 4 KiB filler
 * file removed) and a new writer appends: it ends the torn line first, so its record reads back whole after
 * it. Skipped (and said so) where tmpfs cannot be mounted (not root, or no CAP_SYS_ADMIN). */
static int phase4(void) {
    char mnt[600], file[700], filler[700];
    snprintf(mnt, sizeof mnt, "%s/tiny", dir);
    snprintf(file, sizeof file, "%s/ledger.jsonl", mnt);
    snprintf(filler, sizeof filler, "%s/filler", mnt);
    if (mkdir(mnt, 0700) != 0) return fail("mkdir %s: %s", mnt, strerror(errno));
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=16k") != 0) {
        printf("phase 4: skipped: cannot mount a tmpfs (%s)\n", strerror(errno));
        rmdir(mnt);
        return 0;
    }
    rf_ledger *l = NULL;
    rf_error err = {0};
    int rc = 0;
    long ok = 0;
    static const char block[4096];
    int ffd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (ffd < 0 || write(ffd, block, sizeof block) != (ssize_t)sizeof block || close(ffd) != 0)
        return fail("phase 4: filler: %s", strerror(errno));
    if (rf_ledger_open(file, RF_LEDGER_FSYNC_NONE, &l, &err) != RF_OK) {
        rc = fail("%s", err.message);
    } else {
        char path[64];
        for (;;) {
            snprintf(path, sizeof path, "/f0/%ld", ok);
            rf_ledger_record rec = record(path);
            if (rf_ledger_append(l, &rec, &err) != RF_OK) break;
            if (++ok > 1000) break;
        }
        rf_ledger_close(l, NULL);
        char append_error[sizeof err.message];
        memcpy(append_error, err.message, sizeof append_error);
        /* Full disk: either write(2) fails with ENOSPC, or it writes part of the line and the writer says so. */
        bool reported =
            strstr(err.message, "No space left on device") != NULL || strstr(err.message, "short write") != NULL;
        if (ok > 1000 || !reported) {
            rc = fail("expected ENOSPC after a few lines, got %ld lines and \"%s\"", ok, err.message);
        } else {
            rf_ledger_reader *r = NULL;
            rf_ledger_record rec;
            long records = 0;
            rf_ledger_read_status st = RF_LEDGER_ERROR;
            if (rf_ledger_reader_open(file, &r, &err) == RF_OK) {
                while ((st = rf_ledger_reader_next(r, &rec, &err)) == RF_LEDGER_RECORD) records++;
                rf_ledger_reader_close(r);
            }
            /* A short write leaves a torn last line, which the reader reports; nothing else is lost. */
            bool torn = st == RF_LEDGER_TORN;
            if (records != ok || (st != RF_LEDGER_END && !torn))
                rc = fail("after ENOSPC: %ld of %ld lines read back, then status %d", records, ok, (int)st);
            /* The disk is freed; a new writer appends one line after ending the fragment. */
            rf_ledger_record after = record("/f0/after");
            if (rc == 0 && (unlink(filler) != 0 || rf_ledger_open(file, RF_LEDGER_FSYNC_NONE, &l, &err) != RF_OK ||
                            rf_ledger_append(l, &after, &err) != RF_OK || rf_ledger_close(l, &err) != RF_OK))
                rc = fail("after freeing space: %s", err.message);
            long records2 = 0, torn2 = 0;
            if (rc == 0 && rf_ledger_reader_open(file, &r, &err) == RF_OK) {
                while ((st = rf_ledger_reader_next(r, &rec, &err)) != RF_LEDGER_END) {
                    if (st == RF_LEDGER_RECORD)
                        records2++;
                    else if (st == RF_LEDGER_TORN)
                        torn2++;
                    else
                        break;
                }
                rf_ledger_reader_close(r);
                if (st != RF_LEDGER_END || records2 != ok + 1 || torn2 != (torn ? 1 : 0))
                    rc = fail("after freeing space: %ld records and %ld torn lines (status %d)", records2, torn2,
                              (int)st);
            }
            if (rc == 0)
                printf("phase 4: a full 16 KiB tmpfs after %ld lines, reported as \"%s\"; all %ld read back%s; "
                       "space freed, a new writer %s, its line read back whole\n",
                       ok, append_error, records, torn ? ", then the short write reported as a torn last line" : "",
                       torn ? "ended the torn line (repaired) before appending" : "appended");
        }
    }
    unlink(file);
    unlink(filler);
    umount(mnt);
    rmdir(mnt);
    return rc;
}

/*
 * Phase 5: KILLS writers in turn on ONE ledger, each killed with SIGKILL at a seeded moment. After
 * each kill, when the file ends in a whole line, a part of a line is appended raw, as a kill inside write(2)
 * leaves it; the next writer must end that fragment before its first line. At the end every line is a whole
 * record (each writer's in order) or a torn line, the torn lines are exactly the fragments, and nothing is
 * corrupt: no record was glued onto a fragment and lost.
 */
static int phase5(const char *file) {
    unsigned seed = 777;
    long fragments = 0, killed_mid_write = 0;
    unlink(file);
    for (int k = 1; k <= KILLS; k++) {
        int ready[2];
        char byte, prefix[16];
        if (pipe(ready) != 0) return fail("pipe: %s", strerror(errno));
        snprintf(prefix, sizeof prefix, "r%d", k);
        pid_t pid = fork();
        if (pid < 0) return fail("fork: %s", strerror(errno));
        if (pid == 0) {
            close(ready[0]);
            alarm(20);
            writer(file, prefix, -1, ready[1]);
        }
        close(ready[1]);
        if (read(ready[0], &byte, 1) != 1) return fail("phase 5, kill %d: the writer never appended", k);
        close(ready[0]);
        seed = seed * 1103515245u + 12345u;
        struct timespec pause = {0, (long)(1 + (seed >> 16) % 10) * 1000000L}; /* 1..10 ms */
        nanosleep(&pause, NULL);
        kill(pid, SIGKILL);
        int status;
        if (waitpid(pid, &status, 0) < 0 || !WIFSIGNALED(status)) return fail("phase 5, kill %d: no SIGKILL", k);
        int fd = open(file, O_RDWR | O_APPEND);
        struct stat st;
        char last = '\n';
        if (fd < 0 || fstat(fd, &st) != 0) return fail("phase 5: %s: %s", file, strerror(errno));
        if (st.st_size > 0 && pread(fd, &last, 1, st.st_size - 1) != 1) return fail("phase 5: pread failed");
        if (last == '\n') { /* the kill fell between two writes: leave the fragment a kill inside one leaves */
            char line[RF_LEDGER_MAX_LINE > 4096 ? 4096 : RF_LEDGER_MAX_LINE];
            rf_ledger_record rec = record("/torn/0");
            rf_error err = {0};
            long len = rf_ledger_format(&rec, line, sizeof line, &err);
            if (len < 0) return fail("phase 5: %s", err.message);
            size_t cut = 1 + (seed >> 8) % (size_t)(len - 1); /* 1 .. len-1 bytes of the line */
            if (write(fd, line, cut) != (ssize_t)cut) return fail("phase 5: write: %s", strerror(errno));
        } else {
            killed_mid_write++;
        }
        fragments++;
        close(fd);
    }
    /* The last fragment is ended by one more writer, then the whole file is read. */
    pid_t pid = fork();
    if (pid == 0) writer(file, "r0", 1, -1);
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return fail("phase 5: the last writer failed");
    rf_ledger_reader *r = NULL;
    rf_error err = {0};
    rf_ledger_record rec;
    if (rf_ledger_reader_open(file, &r, &err) != RF_OK) return fail("%s", err.message);
    long records = 0, torn = 0, next[KILLS + 1] = {0};
    rf_ledger_read_status st;
    while ((st = rf_ledger_reader_next(r, &rec, &err)) != RF_LEDGER_END) {
        if (st == RF_LEDGER_TORN) {
            torn++;
            continue;
        }
        long n, i;
        if (st != RF_LEDGER_RECORD || !parse_path(rec.path, 'r', &n, &i) || n < 0 || n > KILLS || i != next[n])
            return fail("phase 5: line %ld is neither a whole record in order nor torn (status %d: %s)",
                        rf_ledger_reader_line(r), (int)st, st == RF_LEDGER_RECORD ? rec.path : err.message);
        next[n]++;
        records++;
    }
    rf_ledger_reader_close(r);
    unlink(file);
    if (torn != fragments) return fail("phase 5: %ld torn lines for %ld fragments", torn, fragments);
    printf("phase 5: %d writers killed with SIGKILL on one ledger: %ld torn lines repaired by the next writer "
           "(%ld cut by the kill itself) and reported, %ld whole records read on, 0 lost or corrupt\n",
           KILLS, fragments, killed_mid_write, records);
    return 0;
}

/*
 * Phase 6: RACERS processes append lines of about 3 KB (so most cross a page boundary, where another process
 * can see the line half copied in) while this process opens the file OPENS times, each open checking the last
 * byte for a fragment. No line may be empty: an open that took another writer's line in progress for a
 * fragment would have ended it with a newline of its own (appends take no lock; without the
 * check's wait for writes in progress this found empty lines in 3 runs of 4).
 */
enum { RACERS = 3, OPENS = 3000 };

static int phase6(const char *file) {
    static char key[3000];
    memset(key, 'k', sizeof key - 1);
    rf_ledger_record r = record("/race");
    r.key = key;
    unlink(file);
    pid_t kids[RACERS];
    int ready[2];
    if (pipe(ready) != 0) return fail("pipe: %s", strerror(errno));
    for (int k = 0; k < RACERS; k++) {
        kids[k] = fork();
        if (kids[k] < 0) return fail("fork: %s", strerror(errno));
        if (kids[k] == 0) {
            close(ready[0]);
            alarm(60);
            rf_ledger *l = NULL;
            rf_error err;
            if (rf_ledger_open(file, RF_LEDGER_FSYNC_NONE, &l, &err) != RF_OK) _exit(3);
            for (long i = 0;; i++) {
                if (rf_ledger_append(l, &r, &err) != RF_OK) _exit(4);
                if (i == 0 && write(ready[1], "r", 1) != 1) _exit(5);
            }
        }
    }
    close(ready[1]);
    char byte;
    for (int k = 0; k < RACERS; k++)
        if (read(ready[0], &byte, 1) != 1) return fail("phase 6: a writer never appended");
    close(ready[0]);
    for (int i = 0; i < OPENS; i++) {
        rf_ledger *l = NULL;
        rf_error err;
        if (rf_ledger_open(file, RF_LEDGER_FSYNC_NONE, &l, &err) != RF_OK) return fail("phase 6: %s", err.message);
        rf_ledger_close(l, &err);
    }
    for (int k = 0; k < RACERS; k++) {
        kill(kids[k], SIGKILL);
        waitpid(kids[k], NULL, 0);
    }
    FILE *f = fopen(file, "r");
    if (f == NULL) return fail("phase 6: %s: %s", file, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long lines = 0, empty = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        lines++;
        if (n == 1 && line[0] == '\n') empty++;
    }
    free(line);
    fclose(f);
    if (empty != 0)
        return fail("phase 6: %ld empty lines in %ld: an open ended a line still being written", empty, lines);
    printf("phase 6: %d opens while %d writers appended 3 KB lines: %ld lines, none empty\n", OPENS, RACERS, lines);
    return 0;
}

int main(int argc, char **argv) {
    const char *base = argc > 1 ? argv[1] : getenv("TMPDIR");
    char file1[600], file2[600];

    snprintf(dir, sizeof dir, "%s/rf-ledger-stress-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(dir)) {
        return fail("mkdtemp %s: %s", dir, strerror(errno));
    }
    snprintf(file1, sizeof file1, "%s/concurrent.jsonl", dir);
    snprintf(file2, sizeof file2, "%s/killed.jsonl", dir);
    char file3[600];
    snprintf(file3, sizeof file3, "%s/killed50.jsonl", dir);
    int rc = phase1(file1);
    if (rc == 0) {
        rc = phase2(file2);
    }
    if (rc == 0) rc = phase3(file3);
    if (rc == 0) rc = phase4();
    if (rc == 0) rc = phase5(file3);
    if (rc == 0) rc = phase6(file3);
    unlink(file1);
    unlink(file2);
    unlink(file3);
    rmdir(dir);
    return rc;
}
