/*
 * The setup the ledger line tests share (test_ledger_format.c, test_ledger_escape.c): a line buffer of
 * RF_LEDGER_MAX_LINE + 1 bytes, and an empty ledger file opened without fsync whose scratch buffer has grown to
 * hold one long line (warm, appended then truncated away), so that a batch's lines are mostly written without a
 * bound check. Header-only; TMPDIR (or /tmp) holds the file, named after tag.
 */
#ifndef RF_SPEC_LEDGER_LINES_H
#define RF_SPEC_LEDGER_LINES_H

#include "retryfreeze/ledger.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char *line_buf;
static rf_ledger *ledger;
static char ledger_path[96];

/* Allocates line_buf and opens ledger at a fresh ledger_path, then appends warm and truncates the file; 0, or -1
 * when any step fails. */
static inline int ledger_lines_setup(const char *tag, const rf_ledger_record *warm) {
    line_buf = malloc(RF_LEDGER_MAX_LINE + 1);
    const char *dir = getenv("TMPDIR");
    snprintf(ledger_path, sizeof ledger_path, "%s/rf-test-%s-XXXXXX", dir && *dir ? dir : "/tmp", tag);
    int fd = mkstemp(ledger_path);
    if (line_buf == NULL || fd < 0) return -1;
    close(fd);
    rf_error err;
    if (rf_ledger_open(ledger_path, RF_LEDGER_FSYNC_NONE, &ledger, &err) != RF_OK) return -1;
    if (rf_ledger_append(ledger, warm, &err) != RF_OK || truncate(ledger_path, 0) != 0) return -1;
    return 0;
}

/* Closes the ledger, removes its file and frees line_buf. */
static inline void ledger_lines_teardown(void) {
    rf_error err;
    rf_ledger_close(ledger, &err);
    unlink(ledger_path);
    free(line_buf);
}

#endif
