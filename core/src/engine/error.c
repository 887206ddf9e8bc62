/* Filling a caller-owned rf_error. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rf_status rfi_fail(rf_error *err, const char *path, const char *fmt, ...) {
    if (err == NULL) return RF_EINVAL;
    memset(err, 0, sizeof *err);
    snprintf(err->path, sizeof err->path, "%s", path ? path : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return RF_EINVAL;
}

const char *rfi_number_text(char buf[RFI_NUMBER_TEXT_MAX], double v) {
    snprintf(buf, RFI_NUMBER_TEXT_MAX, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, RFI_NUMBER_TEXT_MAX, "%.17g", v);
    return buf;
}
