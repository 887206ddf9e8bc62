/* Filling a caller-owned rf_error (report.h). */
#include "report.h"

#include <stdio.h>
#include <string.h>

rf_status rfi_vreport(rf_error *err, rf_status st, const char *path, const char *fmt, va_list ap) {
    if (err == NULL) return st;
    memset(err, 0, sizeof *err);
    snprintf(err->path, sizeof err->path, "%s", path != NULL ? path : "");
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    return st;
}

rf_status rfi_report(rf_error *err, rf_status st, const char *path, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rfi_vreport(err, st, path, fmt, ap);
    va_end(ap);
    return st;
}
