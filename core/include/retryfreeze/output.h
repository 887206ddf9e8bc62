/*
 * Output files: every file retryfreeze writes (a report, metrics, a ledger, a pairing log) is written through
 * these two functions, so every writer treats what a path points at the same way, in the same words:
 *   - a symlink is written through: its target gets the content and the link stays a link;
 *   - a directory, a FIFO, a socket or a device is refused (never replaced by a regular file, never blocked on);
 *   - "-" is standard output where a whole file is written, and refused where a file is appended to and read
 *     back (a ledger, a pairing log): "./-" names a file called "-".
 * docs/cli.md ("Output files") is the user's side of this.
 */
#ifndef RETRYFREEZE_OUTPUT_H
#define RETRYFREEZE_OUTPUT_H

#include "retryfreeze/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a file is written: its whole content replaced (a report, metrics), or lines appended (a ledger, a log). */
typedef enum rf_output_mode { RF_OUTPUT_REPLACE, RF_OUTPUT_APPEND } rf_output_mode;

/*
 * Says whether path may be written in `mode` without writing anything, for a command that checks its outputs
 * before a long run: what rf_output_write (REPLACE) or rf_output_open_append (APPEND) would refuse before any
 * I/O. RF_OK for a regular file, a path where nothing is yet (a later write may still fail: a missing
 * directory, permissions), and "-" in REPLACE mode. RF_EINVAL, with the message those functions give ("cannot
 * write WHAT PATH: it is a FIFO, not a regular file (- writes to standard output)"; "cannot open WHAT PATH: …"
 * in APPEND mode): a NULL argument, an empty path or one ending in "/", "-" in APPEND mode, or a path that is,
 * or resolves to, a directory, FIFO, socket or device. RF_EIO: stat(2) failed otherwise (a loop of symlinks,
 * a directory that may not be searched). err->path is path.
 */
RF_API rf_status rf_output_check(const char *path, rf_output_mode mode, const char *what, rf_error *err);

/*
 * Writes len bytes of data as the whole content of the file at path. `what` names the output in messages
 * ("report", "metrics"). The file is replaced atomically: the bytes go to a new temporary file beside the
 * resolved target (".NAME.rf-XXXXXXXX.tmp", the target's mode, or 0666 less the umask for a new file), which is
 * fsync(2)ed and then rename(2)d over the target, so a crash leaves the old content or the new, never part of
 * it. A symlink (a chain of them, up to 40) is resolved first: the rename lands on the final target and the
 * link stays. Where no temporary file can be made beside the target (a directory the caller may not write, but
 * a target it may) or the target cannot be renamed over (a bind-mounted file), the target is truncated and
 * written in place, without that guarantee. path "-" writes to standard output (file descriptor 1).
 * RF_EINVAL: path, data (with len > 0) or what is NULL; path ends in "/"; or path is, or a symlink resolves
 * to, a directory, FIFO, socket or device (err->message: "cannot write WHAT PATH: it is a FIFO, not a regular
 * file"; "PATH (→ TARGET)" when a symlink led there). RF_EIO: a system call failed (err->message: "cannot
 * write WHAT PATH: strerror", e.g. "No space left on device"); nothing is left behind but the old file.
 * err->path is path.
 */
RF_API rf_status rf_output_write(const char *path, const void *data, size_t len, const char *what, rf_error *err);

/*
 * Opens path to append to, creating it (mode 0644) when missing: rf_input_open (retryfreeze/input.h) with
 * O_APPEND | O_CREAT added to `access` (O_WRONLY, or O_RDWR for a writer that also reads what is there), so a
 * symlink is followed and anything but a regular file is refused in the same words. Each write(2) of a line on
 * the descriptor is one append (O_APPEND). On RF_OK *fd is the descriptor (the caller closes it).
 * RF_EINVAL: a NULL argument, an access mode that is neither, path "-" ("standard output cannot be appended to
 * and read back as a WHAT; name a file (./- for one called -)"), or not a regular file. RF_EIO: open(2) or
 * fstat(2) failed. err->path is path.
 */
RF_API rf_status rf_output_open_append(const char *path, int access, const char *what, int *fd, rf_error *err);

#ifdef __cplusplus
}
#endif
#endif
