/*
 * JSON paths of the lock loader's reports ("$.routes[1].backoff.baseMs", docs/lock.md): one bounded buffer
 * size and one way to extend a path, so that every refusal names where it is the same way.
 */
#ifndef RETRYFREEZE_UTIL_JSON_PATH_H
#define RETRYFREEZE_UTIL_JSON_PATH_H

/* The longest path kept: rf_error.path's size. A deeper path is cut and ends in "…" rather than overflowing. */
#define RFI_PATH_CAP 256

/* dst = parent + "." + key (dst holds RFI_PATH_CAP bytes; it may not overlap parent). */
void rfi_path_child(char *dst, const char *parent, const char *key);

/* dst = parent + "[" + i + "]". */
void rfi_path_index(char *dst, const char *parent, int i);

#endif
