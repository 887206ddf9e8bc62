/*
 * A fresh directory for a test file's files, under $TMPDIR (or /tmp), named after TMP_FILES_TAG (define it before
 * including this header), made by the cmocka group setup tmp_files_setup and removed with what it holds by
 * tmp_files_teardown; tmp_file(name) is a path in it. Header-only, for the spec/core tests that write files.
 */
#ifndef RF_SPEC_TMP_FILES_H
#define RF_SPEC_TMP_FILES_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmp_dir[256];

/* cmocka group setup: makes tmp_dir as $TMPDIR/TMP_FILES_TAG-XXXXXX; 0, or -1 when it cannot. */
static inline int tmp_files_setup(void **state) {
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/%s-XXXXXX", base && *base ? base : "/tmp", TMP_FILES_TAG);
    return mkdtemp(tmp_dir) ? 0 : -1;
}

/* cmocka group teardown: removes tmp_dir and the files in it; 0, or -1 when it cannot. */
static inline int tmp_files_teardown(void **state) {
    (void)state;
    DIR *d = opendir(tmp_dir);
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char p[512];
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            snprintf(p, sizeof p, "%s/%s", tmp_dir, e->d_name);
            unlink(p);
        }
    }
    closedir(d);
    return rmdir(tmp_dir);
}

/* A fresh path in the temporary directory (the file does not exist yet); valid until the next call. */
static inline const char *tmp_file(const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    unlink(path);
    return path;
}

#endif
