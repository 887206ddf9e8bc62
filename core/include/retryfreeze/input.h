/*
 * Input files: every file retryfreeze reads (a lock, a ledger, a decision table, a sign-off log) is opened
 * through these two functions, so every reader refuses the same things in the same words: a FIFO, a socket,
 * a device or a directory (open(2) with O_NONBLOCK, then fstat(2): a FIFO with no writer cannot block the
 * caller), and a file over the reader's size cap. docs/cli.md lists each reader's cap.
 */
#ifndef RETRYFREEZE_INPUT_H
#define RETRYFREEZE_INPUT_H

#include "retryfreeze/common.h"
#include "retryfreeze/policy.h" /* RF_SHA256_TEXT_LEN */

#ifdef __cplusplus
extern "C" {
#endif

/* Size caps of the readers that take a file whole (the lock's is RF_LOCK_MAX_BYTES, 1 MiB, in policy.h).
 * A decision table (retryfreeze check --table): 4 MiB. A pairing log (verify, signoff, diff --log): 16 MiB. */
#define RF_TABLE_MAX_BYTES (4 * 1024 * 1024)
#define RF_LOG_MAX_BYTES (16 * 1024 * 1024)
/* A Lua flow script (retryfreeze run, soak --script): 4 MiB. */
#define RF_SCRIPT_MAX_BYTES (4 * 1024 * 1024)

/*
 * Opens path with open(2) flags (O_RDONLY, or O_WRONLY|O_APPEND|O_CREAT; O_NONBLOCK, O_CLOEXEC and O_NOCTTY
 * are added, and O_NONBLOCK is cleared again once the file is known to be regular) and checks with fstat(2)
 * that it is a regular file. `what` names the input in messages ("lock", "ledger", …). New files get mode
 * 0644. On RF_OK *fd is the open descriptor (the caller closes it).
 * RF_EINVAL: path, fd or what is NULL, or the path is not a regular file (err->message: "cannot open WHAT:
 * PATH is a FIFO, not a regular file"; also a directory, a character device, a block device, a socket).
 * RF_EIO: open(2) or fstat(2) failed (err->message: "cannot open WHAT PATH: strerror"). err->path is path.
 */
RF_API rf_status rf_input_open(const char *path, int flags, const char *what, int *fd, rf_error *err);

/*
 * Reads the whole regular file at path (opened with rf_input_open) into a new buffer of at most cap bytes
 * plus a terminating NUL (for convenience only: the text may hold NUL bytes, *len is its length). Free it
 * with rf_input_free. Refused (RF_EINVAL): what rf_input_open refuses, and a file longer than cap bytes
 * ("WHAT is over the CAP byte limit", read stops at cap + 1 bytes, so /dev/zero-like growth costs nothing).
 * RF_EIO: a read error (strerror). RF_ENOMEM. err->path is path.
 */
RF_API rf_status rf_input_read(const char *path, size_t cap, const char *what, char **text, size_t *len, rf_error *err);

/* Frees a buffer from rf_input_read; NULL is a no-op. */
RF_API void rf_input_free(char *text);

/*
 * The SHA-256 of the whole regular file at path (opened with rf_input_open), read in 64 KiB pieces whatever its
 * length (a ledger cited as evidence: signoff --evidence), as "sha256:<64 lowercase hex>" (RF_SHA256_TEXT_LEN + 1
 * bytes with the NUL) into out, and its lines into *lines (may be NULL): its newlines, plus one for a last line
 * without one, as the ledger reader counts them. RF_EINVAL: what rf_input_open refuses, or a NULL out. RF_EIO: a
 * read error (strerror). RF_ENOMEM: libcrypto failed. err->path is path.
 */
RF_API rf_status rf_input_sha256(const char *path, const char *what, char out[RF_SHA256_TEXT_LEN + 1], int64_t *lines,
                                 rf_error *err);

#ifdef __cplusplus
}
#endif
#endif
