/*
 * retryfreeze — common definitions shared by every public header: the export macro, the version, status
 * codes and the caller-owned error struct. No process-wide state exists anywhere in the library: errors
 * are written into an rf_error the caller passes in.
 */
#ifndef RETRYFREEZE_COMMON_H
#define RETRYFREEZE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define RF_API __declspec(dllexport)
#elif defined(__GNUC__)
#define RF_API __attribute__((visibility("default")))
#else
#define RF_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status of a call that can fail. RF_OK is 0 so `if (rf_x(...))` reads as "if it failed". */
typedef enum rf_status {
    RF_OK = 0,
    RF_EINVAL = 1, /* bad argument or bad input: the rf_error says which */
    RF_ENOMEM = 2, /* an allocation failed; nothing was leaked */
    RF_EIO = 3     /* a read or write failed; rf_error.message carries strerror */
} rf_status;

/*
 * An error report, owned and allocated by the caller (usually on the stack).
 * path:    where in the input the problem is — a JSON path such as "$.routes[2].maxAttempts", a file name,
 *          or an argument name; "" when there is no better location.
 * message: what rule was broken and the offending value, in one sentence.
 * line, column: 1-based position in the input text for parse errors, 0 when not known.
 * Every function that takes an rf_error * accepts NULL (the report is then dropped); after RF_OK its contents
 * are unspecified. docs/c-api.md documents every public function: errors, ownership, thread safety.
 */
typedef struct rf_error {
    char path[256];
    char message[1024];
    int line;
    int column;
} rf_error;

/* The library version "MAJOR.MINOR.PATCH"; defined once, in CMakeLists.txt (project VERSION). A static string:
 * never free it. Thread-safe. */
RF_API const char *rf_version(void);

/*
 * err as one line for people, about input named source (a file name; NULL or "" for none): "source: path: message
 * (line L, column C)", where "source: " is left out without a source, "path: " when err->path is empty or is source
 * itself, and the position when err->line is 0. An error about the file as a whole (err->path is source and line 0:
 * it cannot be opened or read) is its message alone, which already names the file. Writes into out[0..cap) (cut,
 * NUL-terminated when cap > 0) and returns the whole line's length, as snprintf does. Allocates nothing;
 * thread-safe.
 */
RF_API size_t rf_error_text(const rf_error *err, const char *source, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
