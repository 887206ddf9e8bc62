/*
 * Input files (retryfreeze/input.h): one place that opens what the library reads, so that a FIFO never
 * blocks a reader, a device or a directory is refused in words, and nothing is read past a cap. The
 * descriptor is opened with O_NONBLOCK (open(2) on a FIFO with no writer would otherwise wait forever;
 * POSIX open(2), "O_NONBLOCK"), checked with fstat(2), and only a regular file (S_ISREG) is kept.
 */
#define _POSIX_C_SOURCE 200809L
#include "retryfreeze/input.h"
#include "internal.h"

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void errno_error(rf_error *err, const char *path, const char *doing, const char *what, int errnum) {
    char text[128];
    if (strerror_r(errnum, text, sizeof text) != 0) snprintf(text, sizeof text, "error %d", errnum);
    rfi_fail(err, path, "cannot %s %s %s: %s", doing, what, path, text);
}

const char *rfi_file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a file";
}

rf_status rf_input_open(const char *path, int flags, const char *what, int *fd, rf_error *err) {
    if (path == NULL || fd == NULL || what == NULL) {
        rfi_fail(err, "", "path, what and fd must not be NULL");
        return RF_EINVAL;
    }
    *fd = -1;
    int f;
    do {
        f = open(path, flags | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644);
    } while (f < 0 && errno == EINTR);
    if (f < 0) {
        int e = errno;
        struct stat st;
        /* ENXIO: a FIFO opened for writing without a reader; EISDIR: a directory opened for writing. */
        if ((e == ENXIO || e == EISDIR) && stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
            rfi_fail(err, path, "cannot open %s %s: it is %s, not a regular file", what, path,
                     rfi_file_kind(st.st_mode));
            return RF_EINVAL;
        }
        errno_error(err, path, "open", what, e);
        return RF_EIO;
    }
    struct stat st;
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        errno_error(err, path, "stat", what, e);
        return RF_EIO;
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        rfi_fail(err, path, "cannot open %s %s: it is %s, not a regular file", what, path, rfi_file_kind(st.st_mode));
        return RF_EINVAL;
    }
    int fl = fcntl(f, F_GETFL);
    if (fl >= 0) (void)fcntl(f, F_SETFL, fl & ~O_NONBLOCK); /* no effect on a regular file; cleared for clarity */
    *fd = f;
    return RF_OK;
}

rf_status rf_input_read(const char *path, size_t cap, const char *what, char **text, size_t *len, rf_error *err) {
    if (text == NULL || len == NULL) {
        rfi_fail(err, path, "text and len must not be NULL");
        return RF_EINVAL;
    }
    *text = NULL;
    *len = 0;
    int fd;
    rf_status st = rf_input_open(path, O_RDONLY, what, &fd, err);
    if (st != RF_OK) return st;
    /* Read at most cap + 1 bytes (one byte over the cap proves the file is over it, so /dev/zero-like
     * growth costs nothing), starting from the size fstat saw (or 4 KiB) plus one byte for the NUL. */
    size_t limit = cap < SIZE_MAX - 1 ? cap + 1 : SIZE_MAX - 1;
    struct stat sb;
    size_t size = (fstat(fd, &sb) == 0 && sb.st_size > 0) ? (size_t)sb.st_size + 1 : 4096;
    if (size > limit) size = limit;
    size += 1;
    size_t used = 0;
    char *buf = malloc(size);
    while (buf != NULL) {
        if (used == size - 1) {
            if (used >= limit) break;
            size_t bigger = size - 1 > limit / 2 ? limit + 1 : (size - 1) * 2 + 1; /* data bytes + NUL */
            char *grown = realloc(buf, bigger);
            if (grown == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
            size = bigger;
        }
        ssize_t n = read(fd, buf + used, size - 1 - used);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            free(buf);
            close(fd);
            errno_error(err, path, "read", what, e);
            return RF_EIO;
        }
        if (n == 0) break;
        used += (size_t)n;
    }
    if (buf == NULL) {
        close(fd);
        rfi_fail(err, path, "out of memory reading %s %s", what, path);
        return RF_ENOMEM;
    }
    close(fd);
    if (used > cap) {
        free(buf);
        rfi_fail(err, path, "%s %s is over the %zu byte limit", what, path, cap);
        return RF_EINVAL;
    }
    buf[used] = '\0';
    *text = buf;
    *len = used;
    return RF_OK;
}

void rf_input_free(char *text) { free(text); }

rf_status rf_input_sha256(const char *path, const char *what, char out[RF_SHA256_TEXT_LEN + 1], int64_t *lines,
                          rf_error *err) {
    if (out == NULL) {
        rfi_fail(err, path ? path : "", "out must not be NULL");
        return RF_EINVAL;
    }
    out[0] = '\0';
    if (lines != NULL) *lines = 0;
    int fd;
    rf_status st = rf_input_open(path, O_RDONLY, what, &fd, err);
    if (st != RF_OK) return st;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (md == NULL || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(md);
        close(fd);
        rfi_fail(err, path, "cannot hash %s %s: SHA-256 failed (libcrypto)", what, path);
        return RF_ENOMEM;
    }
    static const size_t piece = 64 * 1024;
    unsigned char *buf = malloc(piece);
    int64_t newlines = 0;
    bool ends_line = true, ok = buf != NULL;
    while (ok) {
        ssize_t n = read(fd, buf, piece);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            free(buf);
            EVP_MD_CTX_free(md);
            close(fd);
            errno_error(err, path, "read", what, e);
            return RF_EIO;
        }
        if (n == 0) break;
        for (const unsigned char *p = buf, *end = buf + n; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++)
            newlines++;
        ends_line = buf[n - 1] == '\n';
        ok = EVP_DigestUpdate(md, buf, (size_t)n) == 1;
    }
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int digest_len = 0;
    ok = ok && EVP_DigestFinal_ex(md, digest, &digest_len) == 1 && digest_len == 32;
    free(buf);
    EVP_MD_CTX_free(md);
    close(fd);
    if (!ok) {
        rfi_fail(err, path, "cannot hash %s %s: SHA-256 failed (libcrypto, or out of memory)", what, path);
        return RF_ENOMEM;
    }
    memcpy(out, "sha256:", 7);
    for (unsigned i = 0; i < 32; i++) snprintf(out + 7 + 2 * i, 3, "%02x", digest[i]);
    if (lines != NULL) *lines = newlines + (ends_line ? 0 : 1);
    return RF_OK;
}
