/* A fresh empty file for a bench program to write: shared by bench_ledger.c and bench_client.c. */
#ifndef RETRYFREEZE_BENCH_TEMP_H
#define RETRYFREEZE_BENCH_TEMP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A fresh empty file under $TMPDIR (default /tmp), named rf-bench-<name>.XXXXXX; the caller unlinks and frees
 * it. Exits with a message naming prog when the file cannot be made. */
static inline char *bench_temp_path(const char *prog, const char *name) {
    const char *dir = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/rf-bench-%s.XXXXXX", dir && dir[0] ? dir : "/tmp", name);
    int fd = mkstemp(tmpl);
    char *path = fd >= 0 ? strdup(tmpl) : NULL;
    if (fd >= 0) close(fd);
    if (path == NULL) {
        fprintf(stderr, "%s: cannot make a temporary file %s\n", prog, tmpl);
        exit(1);
    }
    return path;
}

#endif
