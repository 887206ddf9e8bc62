/*
 * Output files (retryfreeze/output.h): one place that decides what writing to a path means. A whole file is
 * written to a temporary file beside its target and renamed over it (POSIX rename(2) replaces the target
 * atomically), after the symlink chain is resolved with lstat(2)/readlink(2), so the rename lands on the
 * link's target instead of replacing the link. What stat(2) finds there decides first: only a regular file (or
 * nothing yet) may be written, never a directory, FIFO, socket or device, which a rename would replace and an
 * open would block on. Appending writers take the same check through rf_input_open.
 */
#define _POSIX_C_SOURCE 200809L
#include "retryfreeze/output.h"
#include "retryfreeze/input.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SYMLINK_HOPS_MAX 40 /* Linux's own limit (path_resolution(7)) */
#define TEMP_TRIES 100

/* "PATH", or "PATH (→ TARGET)" when a symlink led from one to the other. */
static const char *shown(char *buf, size_t cap, const char *path, const char *target) {
    if (target == NULL || target[0] == '\0' || strcmp(path, target) == 0) return path;
    snprintf(buf, cap, "%s (\xe2\x86\x92 %s)", path, target);
    return buf;
}

static rf_status errno_fail(rf_error *err, const char *path, const char *verb, const char *what, const char *where,
                            int errnum) {
    char text[128];
    if (strerror_r(errnum, text, sizeof text) != 0) snprintf(text, sizeof text, "error %d", errnum);
    rfi_fail(err, path, "cannot %s %s %s: %s", verb, what, where, text);
    return RF_EIO;
}

static bool write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return false;
        if (w == 0) {
            errno = EIO;
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/*
 * Follows the symlinks at path to the name the content must land on (target, cap bytes): each link's text,
 * taken relative to the link's own directory unless absolute, until a name that is not a link (or does not
 * exist yet: a new file, or a dangling link's target). 0, or an errno value (ELOOP past 40 links).
 */
static int resolve(const char *path, char *target, size_t cap) {
    size_t n = strlen(path);
    if (n >= cap) return ENAMETOOLONG;
    memcpy(target, path, n + 1);
    for (int hop = 0;; hop++) {
        struct stat st;
        if (lstat(target, &st) != 0) return errno == ENOENT ? 0 : errno;
        if (!S_ISLNK(st.st_mode)) return 0;
        if (hop == SYMLINK_HOPS_MAX) return ELOOP;
        char link[PATH_MAX];
        ssize_t len = readlink(target, link, sizeof link - 1);
        if (len < 0) return errno;
        link[len] = '\0';
        const char *slash = strrchr(target, '/');
        size_t keep = (link[0] == '/' || slash == NULL) ? 0 : (size_t)(slash - target) + 1;
        if (keep + (size_t)len >= cap) return ENAMETOOLONG;
        memmove(target + keep, link, (size_t)len + 1);
    }
}

/* Truncates the regular file target and writes data into it: where no rename can replace it. */
static rf_status write_in_place(const char *path, const char *target, const char *where, const void *data, size_t len,
                                const char *what, rf_error *err) {
    int fd;
    rf_status st = rf_input_open(target, O_WRONLY | O_TRUNC, what, &fd, err);
    if (st != RF_OK) return st;
    bool ok = write_all(fd, data, len) && fsync(fd) == 0;
    int e = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    return ok ? RF_OK : errno_fail(err, path, "write", what, where, e);
}

/* What a refusal or failure says: "cannot write WHAT PATH" (a whole file) or "cannot open WHAT PATH" (appending,
 * in rf_input_open's words). */
static const char *verb_of(rf_output_mode mode) { return mode == RF_OUTPUT_APPEND ? "open" : "write"; }

rf_status rf_output_check(const char *path, rf_output_mode mode, const char *what, rf_error *err) {
    if (path == NULL || what == NULL || (mode != RF_OUTPUT_REPLACE && mode != RF_OUTPUT_APPEND)) {
        rfi_fail(err, "", "path and what must not be NULL, mode must be RF_OUTPUT_REPLACE or RF_OUTPUT_APPEND");
        return RF_EINVAL;
    }
    const char *verb = verb_of(mode);
    if (strcmp(path, "-") == 0) {
        if (mode == RF_OUTPUT_REPLACE) return RF_OK;
        rfi_fail(err, path,
                 "cannot open %s -: standard output cannot be appended to and read back as a %s; name a file "
                 "(./- for one called -)",
                 what, what);
        return RF_EINVAL;
    }
    size_t plen = strlen(path);
    if (plen == 0 || path[plen - 1] == '/') {
        rfi_fail(err, path, "cannot %s %s %s: %s", verb, what, plen ? path : "''",
                 plen ? "the path names a directory (it ends in /)" : "the path is empty");
        return RF_EINVAL;
    }
    struct stat st;
    if (stat(path, &st) != 0) { /* follows every link, /proc's magic ones too (/dev/stdout) */
        if (errno == ENOENT) return RF_OK;
        return errno_fail(err, path, verb, what, path, errno);
    }
    if (S_ISREG(st.st_mode)) return RF_OK;
    char target[PATH_MAX], where[2 * PATH_MAX + 8];
    const char *at = shown(where, sizeof where, path, resolve(path, target, sizeof target) == 0 ? target : NULL);
    bool stream = S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode);
    rfi_fail(err, path, "cannot %s %s %s: it is %s, not a regular file%s", verb, what, at, rfi_file_kind(st.st_mode),
             stream && mode == RF_OUTPUT_REPLACE ? " (- writes to standard output)" : "");
    return RF_EINVAL;
}

rf_status rf_output_write(const char *path, const void *data, size_t len, const char *what, rf_error *err) {
    if (path == NULL || what == NULL || (data == NULL && len > 0)) {
        rfi_fail(err, "", "path, data and what must not be NULL");
        return RF_EINVAL;
    }
    rf_status checked = rf_output_check(path, RF_OUTPUT_REPLACE, what, err);
    if (checked != RF_OK) return checked;
    if (strcmp(path, "-") == 0) {
        if (write_all(STDOUT_FILENO, data, len)) return RF_OK;
        return errno_fail(err, path, "write", what, "to standard output", errno);
    }
    char target[PATH_MAX], where[2 * PATH_MAX + 8];
    int e = resolve(path, target, sizeof target);
    const char *at = shown(where, sizeof where, path, e == 0 ? target : NULL);
    if (e != 0) return errno_fail(err, path, "write", what, at, e);
    struct stat st;
    bool exists = stat(target, &st) == 0;

    /* The temporary file: in the target's directory (a rename never crosses file systems), named after it. */
    const char *slash = strrchr(target, '/');
    int dir_len = slash ? (int)(slash - target) + 1 : 0;
    const char *base = target + dir_len;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint32_t seed = (uint32_t)now.tv_nsec ^ (uint32_t)now.tv_sec * 2654435761u ^ (uint32_t)getpid() * 40503u;
    char tmp[PATH_MAX];
    int fd = -1;
    for (int i = 0; i < TEMP_TRIES && fd < 0; i++) {
        seed = seed * 1664525u + 1013904223u; /* a name not taken: try again on EEXIST */
        int n = snprintf(tmp, sizeof tmp, "%.*s.%.200s.rf-%08x.tmp", dir_len, target, base, (unsigned)seed);
        if (n < 0 || (size_t)n >= sizeof tmp) return errno_fail(err, path, "write", what, at, ENAMETOOLONG);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, exists ? 0600 : 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        e = errno;
        /* No file can be made beside the target (a directory the caller may not write), but the target itself
         * may still be writable: in place, without the all-or-nothing guarantee. */
        if (exists && (e == EACCES || e == EPERM || e == EROFS))
            return write_in_place(path, target, at, data, len, what, err);
        return errno_fail(err, path, "write", what, at, e);
    }
    if (exists) (void)fchmod(fd, st.st_mode & 07777); /* the target's mode; 0600 (stricter) if this fails */
    bool ok = write_all(fd, data, len) && fsync(fd) == 0;
    e = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (ok && rename(tmp, target) != 0) {
        ok = false;
        e = errno;
    }
    if (ok) return RF_OK;
    unlink(tmp);
    if (exists && (e == EBUSY || e == EXDEV)) /* a bind-mounted file cannot be renamed over */
        return write_in_place(path, target, at, data, len, what, err);
    return errno_fail(err, path, "write", what, at, e);
}

rf_status rf_output_open_append(const char *path, int access, const char *what, int *fd, rf_error *err) {
    if (fd == NULL || (access != O_WRONLY && access != O_RDWR)) {
        rfi_fail(err, path ? path : "", "fd must not be NULL; access must be O_WRONLY or O_RDWR");
        return RF_EINVAL;
    }
    *fd = -1;
    rf_status checked = rf_output_check(path, RF_OUTPUT_APPEND, what, err);
    if (checked != RF_OK) return checked;
    /* Checked again on the open descriptor (fstat), where nothing can change in between. */
    return rf_input_open(path, access | O_APPEND | O_CREAT, what, fd, err);
}
