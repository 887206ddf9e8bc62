/*
 * The ledger writer: one write(2) per line on an O_APPEND descriptor (or per batch of whole lines,
 * rf_ledger_append_batch). With O_APPEND the kernel moves the
 * offset to the end and writes in one step, so lines appended by several processes (or several rf_ledger
 * objects) never interleave on a local file system. A partial write is reported, never completed: a second
 * write(2) could land after another process's line and splice two records together. The line is formatted
 * into a buffer the ledger keeps, so an append allocates nothing once a line of its size was written.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* flock(2) */
#include "ledger_internal.h"
#include "retryfreeze/output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct rf_ledger {
    int fd;
    bool torn; /* the file may end in a fragment (a short write): the next line starts with "\n" */
    rf_ledger_fsync fsync_mode;
    char *line;                  /* scratch buffer: the record plus '\n', reused across appends */
    size_t line_cap;             /* its size; RF_LEDGER_MAX_LINE + 1 for the longest line (+ 1 after a torn write) */
    rf_ledger_observer observer; /* told of every whole append (rf_ledger_observe), or NULL */
    void *observer_ud;
    size_t hold_max;   /* rf_ledger_hold: most bytes of lines held before they are written; 0 = lines go at once */
    size_t held;       /* bytes of held lines, at line[1..1 + held) (line[0]: the "\n" ending a fragment) */
    size_t held_lines; /* how many lines those are */
    pid_t held_pid;    /* the process that formatted them: another (a forked child) drops them */
    volatile unsigned char *fork_mark; /* a page a forked child sees zeroed (MADV_WIPEONFORK): 1 while this process
                                          holds lines, so the check costs no getpid(2); NULL where the kernel has
                                          no such page, and then held_pid is compared */
    rfi_ledger_ts_cache ts;            /* the minute of the last line formatted */
    char host[RF_LEDGER_MAX_HOST + 1]; /* written on lines whose record has no host; "" = none */
    char path[];                       /* for error messages */
};

/*
 * Writers that check a file's last byte (at open) hold an exclusive flock(2) meanwhile, so two of them never
 * both end the same fragment. Appends take no lock: each is one write(2) on O_APPEND (a lock around
 * every append cost as much as the write itself). A lock that cannot be had (a file system without flock) is
 * done without.
 */
static void lock_file(int fd, int op) {
    while (flock(fd, op) != 0 && errno == EINTR) {}
}

/* The last byte of the file and its size; false when empty or unreadable. */
static bool last_byte(int fd, off_t *size, char *last) {
    struct stat st;
    ssize_t n = 0;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) return false;
    do {
        n = pread(fd, last, 1, st.st_size - 1);
    } while (n < 0 && errno == EINTR);
    *size = st.st_size;
    return n == 1;
}

/* Rounds of "the file grew while it was checked" after which the check gives up (see terminate_torn_line). */
#define TORN_CHECK_ROUNDS 64

/*
 * A file whose last byte is not a newline ends in a fragment: a writer killed mid-append, or a short write on
 * a full disk. Appending to it would glue the next line onto the fragment and lose both, so the fragment is
 * terminated first with one write(2) of "\n"; readers then report it as a torn line and read on.
 * Another writer's line still being copied into the file looks the same for a moment (the kernel grows the
 * size page by page as it copies), and ending it would add an empty line. So a non-newline last byte is
 * taken for a fragment only when the file has not grown once every write in progress has ended: a write(2)
 * of zero bytes waits for those, because on Linux's local file systems (ext4, xfs, btrfs, tmpfs) a write holds
 * the inode's write lock for its whole copy, even one of zero bytes; the same lock is what makes an O_APPEND
 * write land whole. A file that keeps growing through TORN_CHECK_ROUNDS checks is left alone: it is being
 * appended to, and a fragment in it has been built upon already.
 */
static rf_status terminate_torn_line(rf_ledger *l, rf_error *err) {
    rf_status status = RF_OK;
    lock_file(l->fd, LOCK_EX);
    for (int round = 0; round < TORN_CHECK_ROUNDS; round++) {
        off_t size = 0, grown = 0;
        char last = '\n';
        if (!last_byte(l->fd, &size, &last) || last == '\n') break;
        ssize_t n;
        do {
            n = write(l->fd, "", 0); /* returns once no write(2) is copying into the file */
        } while (n < 0 && errno == EINTR);
        if (!last_byte(l->fd, &grown, &last) || grown != size) continue; /* a line was still coming in */
        do {
            n = write(l->fd, "\n", 1);
        } while (n < 0 && errno == EINTR);
        if (n != 1) {
            rfi_ledger_errno_error(err, l->path, n < 0 ? errno : EIO, "cannot terminate the torn last line of ledger");
            status = RF_EIO;
        }
        break;
    }
    lock_file(l->fd, LOCK_UN);
    return status;
}

rf_status rf_ledger_open(const char *path, rf_ledger_fsync fsync_mode, rf_ledger **out, rf_error *err) {
    if (!path || !out) {
        rfi_ledger_error(err, path ? "out" : "path", 0, 0, "%s is NULL", path ? "out" : "path");
        return RF_EINVAL;
    }
    *out = NULL;
    if (fsync_mode != RF_LEDGER_FSYNC_NONE && fsync_mode != RF_LEDGER_FSYNC_LINE) {
        rfi_ledger_error(err, "fsync_mode", 0, 0, "fsync_mode %d is neither RF_LEDGER_FSYNC_NONE nor _LINE",
                         (int)fsync_mode);
        return RF_EINVAL;
    }
    size_t path_len = strlen(path);
    rf_ledger *l = malloc(sizeof *l + path_len + 1);
    if (!l) {
        rfi_ledger_error(err, path, 0, 0, "out of memory opening ledger %s", path);
        return RF_ENOMEM;
    }
    memcpy(l->path, path, path_len + 1);
    l->fsync_mode = fsync_mode;
    l->line = NULL;
    l->line_cap = 0;
    l->torn = false;
    l->observer = NULL;
    l->observer_ud = NULL;
    l->hold_max = l->held = l->held_lines = 0;
    l->held_pid = 0;
    l->fork_mark = NULL;
    l->ts = (rfi_ledger_ts_cache)RFI_LEDGER_TS_CACHE_INIT;
    l->fd = -1;
    /* Regular files only (a FIFO without a reader is refused at once instead of blocking open(2)), through a
     * symlink, never "-" (retryfreeze/output.h). */
    rf_status st = rf_output_open_append(path, O_RDWR, "ledger", &l->fd, err);
    if (st == RF_EIO) /* no read permission (a write-only file): append without the torn-line check */
        st = rf_output_open_append(path, O_WRONLY, "ledger", &l->fd, err);
    else if (st == RF_OK)
        st = terminate_torn_line(l, err);
    if (st != RF_OK) {
        if (l->fd >= 0) close(l->fd);
        free(l);
        return st;
    }
    if (gethostname(l->host, sizeof l->host) != 0) l->host[0] = '\0';
    l->host[sizeof l->host - 1] = '\0';
    *out = l;
    return RF_OK;
}

static bool host_ok(const char *host, size_t len) {
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)host[i] < 0x21 || (unsigned char)host[i] > 0x7e) return false;
    return true;
}

rf_status rf_ledger_set_host(rf_ledger *l, const char *host, rf_error *err) {
    if (!l || !host) {
        rfi_ledger_error(err, l ? "host" : "l", 0, 0, "%s is NULL", l ? "host" : "l");
        return RF_EINVAL;
    }
    size_t len = strlen(host);
    if (len > RF_LEDGER_MAX_HOST || !host_ok(host, len)) {
        rfi_ledger_error(err, "host", 0, 0, "host must be at most %d bytes of printable ASCII without spaces",
                         RF_LEDGER_MAX_HOST);
        return RF_EINVAL;
    }
    memcpy(l->host, host, len + 1);
    return RF_OK;
}

rf_status rf_ledger_observe(rf_ledger *l, rf_ledger_observer fn, void *ud, rf_error *err) {
    if (!l) {
        rfi_ledger_error(err, "l", 0, 0, "l is NULL");
        return RF_EINVAL;
    }
    if (fn && l->hold_max > 0) {
        rfi_ledger_error(err, "fn", 0, 0,
                         "ledger %s holds its lines (rf_ledger_hold): an observer needs each line's "
                         "record as it is written",
                         l->path);
        return RF_EINVAL;
    }
    l->observer = fn;
    l->observer_ud = fn ? ud : NULL;
    return RF_OK;
}

/* Makes the scratch buffer hold at least need bytes. */
static bool reserve(rf_ledger *l, size_t need) {
    if (need <= l->line_cap) {
        return true;
    }
    size_t cap = l->line_cap ? l->line_cap : 512;
    while (cap < need) {
        cap *= 2;
    }
    if (cap > RF_LEDGER_MAX_LINE + 1 && need <= RF_LEDGER_MAX_LINE + 1) {
        cap = RF_LEDGER_MAX_LINE + 1;
    }
    char *grown = realloc(l->line, cap);
    if (!grown) {
        return false;
    }
    l->line = grown;
    l->line_cap = cap;
    return true;
}

/* With RF_LEDGER_FSYNC_LINE, fsync(2)s l's descriptor (again on EINTR): RF_OK, or RF_EIO with err said. After each
 * write of whole lines: a single line, held lines, a batch. */
static rf_status sync_lines(rf_ledger *l, rf_error *err) {
    if (l->fsync_mode != RF_LEDGER_FSYNC_LINE) return RF_OK;
    int rc;
    do {
        rc = fsync(l->fd);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        rfi_ledger_errno_error(err, l->path, errno, "cannot fsync ledger");
        return RF_EIO;
    }
    return RF_OK;
}

/* ---- held lines (rf_ledger_hold) ------------------------------------------------------------------------ */

/* Drops held lines another process formatted: a child forked while they were held (its parent writes them). */
static void drop_inherited(rf_ledger *l) {
    if (l->held == 0) return;
    if (l->fork_mark ? *l->fork_mark == 0 : l->held_pid != getpid()) l->held = l->held_lines = 0;
}

/* Marks the held lines as this process's: the first line of a batch. */
static void mark_held(rf_ledger *l) {
    if (l->fork_mark)
        *l->fork_mark = 1;
    else
        l->held_pid = getpid();
}

/* The page behind fork_mark, or NULL: Linux 4.14+ zeroes a MADV_WIPEONFORK page in a forked child. */
static volatile unsigned char *new_fork_mark(void) {
#ifdef MADV_WIPEONFORK
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return NULL;
    void *p = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    if (madvise(p, (size_t)page, MADV_WIPEONFORK) != 0) {
        munmap(p, (size_t)page);
        return NULL;
    }
    return p;
#else
    return NULL;
#endif
}

static void free_fork_mark(rf_ledger *l) {
    if (l->fork_mark) munmap((void *)(uintptr_t)l->fork_mark, (size_t)sysconf(_SC_PAGESIZE));
    l->fork_mark = NULL;
}

/* Writes the held lines line[1..1 + held) in one write(2), with the "\n" ending an earlier fragment before them. */
static rf_status write_held(rf_ledger *l, rf_error *err) {
    size_t lines = l->held_lines, total = l->held + (l->torn ? 1 : 0);
    const char *from = l->torn ? l->line : l->line + 1;
    if (l->torn) l->line[0] = '\n';
    l->held = l->held_lines = 0; /* written or lost: never written twice */
    if (lines == 0) return RF_OK;
    ssize_t n;
    do { /* EINTR means nothing was written (a partial write returns its count), so retrying is safe */
        n = write(l->fd, from, total);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        int e = errno;
        char what[96];
        snprintf(what, sizeof what, "%zu held line(s) lost: cannot append to ledger", lines);
        rfi_ledger_errno_error(err, l->path, e, what);
        return RF_EIO;
    }
    if ((size_t)n != total) {
        size_t whole = 0; /* the lines that went out whole: a newline ends each (the leading one ends the fragment) */
        for (size_t i = l->torn ? 1 : 0; i < (size_t)n; i++) whole += from[i] == '\n';
        if (n > 0) l->torn = from[n - 1] != '\n';
        rfi_ledger_error(err, l->path, 0, 0,
                         "short write to ledger %s: %zd of %zu bytes written, %zu of %zu held line(s) lost, the last "
                         "written torn (disk full?)",
                         l->path, n, total, lines - whole, lines);
        return RF_EIO;
    }
    l->torn = false;
    return sync_lines(l, err);
}

/* rf_ledger_append while holding: formats rec after the held lines; writes them first when it would not fit. */
static rf_status hold_line(rf_ledger *l, const rf_ledger_record *rec, rf_error *err) {
    const char *host = l->host[0] ? l->host : NULL;
    drop_inherited(l);
    size_t at = 1 + l->held; /* line[0] stays free for the "\n" that may end a fragment */
    size_t room = l->line_cap > at + 1 ? l->line_cap - at - 1 : 0;
    size_t len = 0;
    rf_status status = rfi_ledger_format_into(rec, host, &l->ts, room ? l->line + at : NULL, room, &len, err);
    if (status != RF_OK) return status;
    rf_status written = RF_OK;
    rf_error write_err = {0};
    bool formatted = len <= room;
    if (l->held > 0 && l->held + len + 1 > l->hold_max) { /* would not fit: the held lines go first */
        written = write_held(l, &write_err);
        if (formatted) memmove(l->line + 1, l->line + at, len); /* move it down to the start */
        at = 1;
    }
    if (!formatted) {
        if (!reserve(l, at + len + 1)) {
            rfi_ledger_error(err, l->path, 0, 0, "out of memory appending to ledger %s", l->path);
            return RF_ENOMEM;
        }
        rfi_ledger_format_into(rec, host, &l->ts, l->line + at, len, &len, err);
    }
    l->line[at + len] = '\n';
    if (l->held_lines++ == 0) mark_held(l);
    l->held += len + 1;
    if (l->held >= l->hold_max && written == RF_OK) written = write_held(l, &write_err); /* a line over the bound */
    if (written != RF_OK && err) *err = write_err;
    return written;
}

rf_status rf_ledger_hold(rf_ledger *l, size_t max_bytes, rf_error *err) {
    if (!l) {
        rfi_ledger_error(err, "l", 0, 0, "l is NULL");
        return RF_EINVAL;
    }
    if (max_bytes > RF_LEDGER_BATCH_BYTES) {
        rfi_ledger_error(err, "max_bytes", 0, 0, "max_bytes must be from 0 to %d, got %zu", RF_LEDGER_BATCH_BYTES,
                         max_bytes);
        return RF_EINVAL;
    }
    if (max_bytes > 0 && l->observer) {
        rfi_ledger_error(err, "max_bytes", 0, 0,
                         "ledger %s has an observer (rf_ledger_observe), which needs each line's record as it is "
                         "written: it cannot hold lines",
                         l->path);
        return RF_EINVAL;
    }
    rf_status st = RF_OK;
    if (l->held > 0 && l->held >= max_bytes) st = rf_ledger_flush(l, err); /* off, or the held lines over the bound */
    if (max_bytes > 0 && l->fork_mark == NULL) l->fork_mark = new_fork_mark();
    l->hold_max = max_bytes;
    return st;
}

rf_status rf_ledger_flush(rf_ledger *l, rf_error *err) {
    if (!l) {
        rfi_ledger_error(err, "l", 0, 0, "l is NULL");
        return RF_EINVAL;
    }
    drop_inherited(l);
    return write_held(l, err);
}

size_t rf_ledger_held(const rf_ledger *l) { return l ? l->held_lines : 0; }

rf_status rf_ledger_append(rf_ledger *l, const rf_ledger_record *rec, rf_error *err) {
    rf_status status;
    size_t len = 0;

    if (!l) {
        rfi_ledger_error(err, "l", 0, 0, "l is NULL");
        return RF_EINVAL;
    }
    if (l->hold_max > 0) return hold_line(l, rec, err);
    const char *host = l->host[0] ? l->host : NULL; /* written when the record has no host of its own */
    size_t lead = l->torn ? 1 : 0; /* "\n" ending an earlier short write's fragment, in this same write(2) */
    /* Formatted straight into the scratch buffer; only a line longer than any before needs a second pass. */
    size_t room = l->line_cap > lead + 1 ? l->line_cap - lead - 1 : 0;
    status = rfi_ledger_format_into(rec, host, &l->ts, room ? l->line + lead : NULL, room, &len, err);
    if (status != RF_OK) {
        return status;
    }
    if (len > room) {
        if (!reserve(l, lead + len + 1)) {
            rfi_ledger_error(err, l->path, 0, 0, "out of memory appending to ledger %s", l->path);
            return RF_ENOMEM;
        }
        rfi_ledger_format_into(rec, host, &l->ts, l->line + lead, len, &len, err);
    }
    if (lead) l->line[0] = '\n';
    l->line[lead + len] = '\n';
    size_t total = lead + len + 1;

    ssize_t n;
    do { /* EINTR means nothing was written (a partial write returns its count), so retrying is safe */
        n = write(l->fd, l->line, total);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        rfi_ledger_errno_error(err, l->path, errno, "cannot append to ledger");
        return RF_EIO;
    }
    if ((size_t)n != total) {
        if (n > 0) l->torn = !(lead == 1 && n == 1); /* only the "\n" went out: the old fragment ended, no new one */
        rfi_ledger_error(err, l->path, 0, 0,
                         "short write to ledger %s: %zd of %zu bytes written, the line is torn (disk full?)", l->path,
                         n, total);
        return RF_EIO;
    }
    l->torn = false;
    /* The line is in the file whole: an observer counts it now (before fsync, whose failure does not take the
     * line back out; a reader of the file sees it either way). */
    if (l->observer) l->observer(l->observer_ud, rec, rec->host ? rec->host : host);
    return sync_lines(l, err);
}

/* Lines a batch holds at most: their end offsets are kept on the stack to tell which a short write cut. */
#define BATCH_LINES 64

/* Marks records idx[0..n) failed with status st and error err (copied into errs when given). */
static void batch_fail(const size_t *idx, size_t n, rf_status *status, rf_error *errs, rf_status st,
                       const rf_error *err) {
    for (size_t k = 0; k < n; k++) {
        status[idx[k]] = st;
        if (errs) errs[idx[k]] = *err;
    }
}

size_t rf_ledger_append_batch(rf_ledger *l, const rf_ledger_record *const *recs, size_t n, rf_status *status,
                              rf_error *errs) {
    if (!l || !recs || !status) return 0;
    if (l->hold_max > 0) { /* held like separate appends, in order */
        size_t taken = 0;
        rf_error scratch = {0};
        for (size_t i = 0; i < n; i++) {
            rf_error *err = errs ? &errs[i] : &scratch;
            if (recs[i] == NULL) {
                rfi_ledger_error(err, "rec", 0, 0, "rec is NULL");
                status[i] = RF_EINVAL;
                continue;
            }
            status[i] = hold_line(l, recs[i], err);
            if (status[i] == RF_OK || status[i] == RF_EIO) taken++; /* RF_EIO: earlier held lines were lost */
        }
        return taken;
    }
    const char *host = l->host[0] ? l->host : NULL;
    size_t written = 0, i = 0;
    rf_error scratch = {0}; /* a record's error when the caller keeps none */
    while (i < n) {
        /* Formats lines into the scratch buffer, one after the other, up to BATCH_LINES and BATCH_BYTES. */
        size_t idx[BATCH_LINES], ends[BATCH_LINES], lines = 0;
        size_t used = l->torn ? 1 : 0; /* "\n" ending an earlier short write's fragment, in this same write(2) */
        for (; i < n && lines < BATCH_LINES; i++) {
            rf_error *err = errs ? &errs[i] : &scratch;
            size_t len = 0, room = l->line_cap > used + 1 ? l->line_cap - used - 1 : 0;
            rf_status st = RF_EINVAL;
            if (recs[i] == NULL)
                rfi_ledger_error(err, "rec", 0, 0, "rec is NULL");
            else
                st = rfi_ledger_format_into(recs[i], host, &l->ts, room ? l->line + used : NULL, room, &len, err);
            if (st != RF_OK) {
                status[i] = st;
                continue;
            }
            if (lines > 0 && used + len + 1 > RF_LEDGER_BATCH_BYTES) break; /* full: this line starts the next */
            if (len > room) {
                if (!reserve(l, used + len + 1)) {
                    rfi_ledger_error(err, l->path, 0, 0, "out of memory appending to ledger %s", l->path);
                    status[i] = RF_ENOMEM;
                    continue;
                }
                rfi_ledger_format_into(recs[i], host, &l->ts, l->line + used, len, &len, err);
            }
            l->line[used + len] = '\n';
            used += len + 1;
            idx[lines] = i;
            ends[lines++] = used;
        }
        if (lines == 0) continue;
        if (l->torn) l->line[0] = '\n';
        ssize_t w;
        do { /* EINTR means nothing was written (a partial write returns its count), so retrying is safe */
            w = write(l->fd, l->line, used);
        } while (w < 0 && errno == EINTR);
        rf_error failure;
        if (w < 0) {
            rfi_ledger_errno_error(&failure, l->path, errno, "cannot append to ledger");
            batch_fail(idx, lines, status, errs, RF_EIO, &failure);
            continue;
        }
        /* What went out ends in a fragment unless it ends with a newline (or nothing went out). */
        if (w > 0) l->torn = l->line[w - 1] != '\n';
        size_t whole = 0;
        while (whole < lines && ends[whole] <= (size_t)w) whole++;
        for (size_t k = 0; k < whole; k++) {
            status[idx[k]] = RF_OK;
            if (l->observer) l->observer(l->observer_ud, recs[idx[k]], recs[idx[k]]->host ? recs[idx[k]]->host : host);
        }
        written += whole;
        if (whole < lines) {
            rfi_ledger_error(&failure, l->path, 0, 0,
                             "short write to ledger %s: %zd of %zu bytes written, the line is torn (disk full?)",
                             l->path, w, used);
            batch_fail(idx + whole, lines - whole, status, errs, RF_EIO, &failure);
        }
        if (whole > 0 && sync_lines(l, &failure) != RF_OK) batch_fail(idx, whole, status, errs, RF_EIO, &failure);
    }
    return written;
}

rf_status rf_ledger_close(rf_ledger *l, rf_error *err) {
    rf_status status = RF_OK;

    if (!l) {
        return RF_OK;
    }
    status = rf_ledger_flush(l, err);
    /* Never retried, even on EINTR: on Linux the descriptor is gone either way. */
    if (close(l->fd) != 0 && status == RF_OK) {
        rfi_ledger_errno_error(err, l->path, errno, "error closing ledger");
        status = RF_EIO;
    }
    free_fork_mark(l);
    free(l->line);
    free(l);
    return status;
}
