/* Error reports of the ledger: written into the caller's rf_error, never into process-wide state. */
#define _POSIX_C_SOURCE 200809L
#include "ledger_internal.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void rfi_ledger_error(rf_error *err, const char *path, long line, int column, const char *fmt, ...) {
    va_list ap;

    if (!err) {
        return;
    }
    va_start(ap, fmt);
    rfi_vreport(err, RF_EINVAL, path, fmt, ap);
    va_end(ap);
    err->line = line > INT_MAX ? INT_MAX : (int)line;
    err->column = column;
}

void rfi_ledger_errno_error(rf_error *err, const char *path, int errnum, const char *what) {
    char text[128];

    /* strerror_r (the POSIX one, returning int) instead of strerror: no shared buffer. */
    if (strerror_r(errnum, text, sizeof text) != 0) {
        snprintf(text, sizeof text, "error %d", errnum);
    }
    rfi_ledger_error(err, path, 0, 0, "%s %s: %s", what, path, text);
}
