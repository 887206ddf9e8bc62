/*
 * The ledger writer: one write(2) per line on an O_APPEND descriptor. With O_APPEND the kernel moves the
 * offset to the end and writes in one step, so lines appended by several processes (or several rf_ledger
 * objects) never interleave on a local file system. A partial write is reported, never completed: a second
 * write(2) could land after another process's line and splice two records together.
 */
#define _POSIX_C_SOURCE 200809L
#include "ledger_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct rf_ledger {
    int fd;
    rf_ledger_fsync fsync_mode;
    char *line;      /* scratch buffer: the record plus '\n', reused across appends */
    size_t line_cap; /* its size; never more than RF_LEDGER_MAX_LINE + 1 */
    char path[];     /* for error messages */
};

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
    l->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (l->fd < 0) {
        rfi_ledger_errno_error(err, path, errno, "cannot open ledger");
        free(l);
        return RF_EIO;
    }
    *out = l;
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

rf_status rf_ledger_append(rf_ledger *l, const rf_ledger_record *rec, rf_error *err) {
    rf_status status;
    size_t len = 0;

    if (!l) {
        rfi_ledger_error(err, "l", 0, 0, "l is NULL");
        return RF_EINVAL;
    }
    char *json = rfi_ledger_format_line(rec, &len, &status, err);
    if (!json) {
        return status;
    }
    if (!reserve(l, len + 1)) {
        cJSON_free(json);
        rfi_ledger_error(err, l->path, 0, 0, "out of memory appending to ledger %s", l->path);
        return RF_ENOMEM;
    }
    memcpy(l->line, json, len);
    l->line[len] = '\n';
    cJSON_free(json);

    ssize_t n;
    do { /* EINTR means nothing was written (a partial write returns its count), so retrying is safe */
        n = write(l->fd, l->line, len + 1);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        rfi_ledger_errno_error(err, l->path, errno, "cannot append to ledger");
        return RF_EIO;
    }
    if ((size_t)n != len + 1) {
        rfi_ledger_error(err, l->path, 0, 0,
                         "short write to ledger %s: %zd of %zu bytes written, the line is torn (disk full?)", l->path,
                         n, len + 1);
        return RF_EIO;
    }
    if (l->fsync_mode == RF_LEDGER_FSYNC_LINE) {
        int rc;
        do {
            rc = fsync(l->fd);
        } while (rc != 0 && errno == EINTR);
        if (rc != 0) {
            rfi_ledger_errno_error(err, l->path, errno, "cannot fsync ledger");
            return RF_EIO;
        }
    }
    return RF_OK;
}

rf_status rf_ledger_close(rf_ledger *l, rf_error *err) {
    rf_status status = RF_OK;

    if (!l) {
        return RF_OK;
    }
    /* Never retried, even on EINTR: on Linux the descriptor is gone either way. */
    if (close(l->fd) != 0) {
        rfi_ledger_errno_error(err, l->path, errno, "error closing ledger");
        status = RF_EIO;
    }
    free(l->line);
    free(l);
    return status;
}
