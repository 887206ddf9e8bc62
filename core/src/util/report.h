/*
 * Small helpers the engine, the ledger and the client share (core/src/util/, internal: never installed, each
 * library compiles its own copy, as curl's curlx/ serves libcurl and the curl tool).
 *
 * Error reports: every refusal of the core is written into the caller's rf_error through rfi_report, so the
 * shape of a report (path, message, line and column zeroed, a NULL err dropped) is decided in one place.
 */
#ifndef RETRYFREEZE_UTIL_REPORT_H
#define RETRYFREEZE_UTIL_REPORT_H

#include "retryfreeze/common.h"

#include <stdarg.h>

/* printf-checked arguments (fmt_index: the format's argument number, first_arg: the first value's, 0 for a
 * va_list), and cold: a refusal's branch is laid out off the decision path. */
#if defined(__GNUC__)
#define RFI_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#define RFI_COLD __attribute__((cold))
#else
#define RFI_PRINTF(fmt_index, first_arg)
#define RFI_COLD
#endif

/*
 * Fills *err (when not NULL) with path and the printf-formatted message, line and column 0, cut to the fields'
 * sizes. Returns st, so that a refusal is one statement: `return rfi_report(err, RF_EINVAL, "path", "…")`.
 */
rf_status rfi_report(rf_error *err, rf_status st, const char *path, const char *fmt, ...) RFI_PRINTF(4, 5) RFI_COLD;
rf_status rfi_vreport(rf_error *err, rf_status st, const char *path, const char *fmt, va_list ap)
    RFI_PRINTF(4, 0) RFI_COLD;

/* The common case: a bad argument or bad input (RF_EINVAL). */
#define rfi_fail(err, path, ...) rfi_report((err), RF_EINVAL, (path), __VA_ARGS__)

#endif
