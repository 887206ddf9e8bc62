/*
 * A main() for the fuzz targets without libFuzzer: runs LLVMFuzzerTestOneInput once per file named on the
 * command line, or per regular file in a named directory (sorted, so runs are reproducible). ctest uses it to
 * replay fuzz/corpus/<target>/ and fuzz/regressions/<target>/ with the ordinary compiler and sanitizers, so
 * every seed and every past finding stays a regression test. Exit 0 when every input passed; a violated
 * invariant aborts (the file being run is printed first).
 */
#define _POSIX_C_SOURCE 200809L
#include "fuzz.h"

#include <dirent.h>
#include <sys/stat.h>

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    size_t cap = 4096, len = 0;
    unsigned char *buf = malloc(cap);
    size_t n;
    while (buf != NULL && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            unsigned char *bigger = realloc(buf, cap * 2);
            if (bigger == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf == NULL) {
        fprintf(stderr, "replay: out of memory reading %s\n", path);
        return 1;
    }
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
    /* A copy of exactly len bytes, so a read past the input is an error under ASan and valgrind. */
    unsigned char *exact = malloc(len ? len : 1);
    if (exact == NULL) {
        free(buf);
        return 1;
    }
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int compare_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int run_dir(const char *dir, int *count) {
    DIR *d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "replay: cannot open directory %s\n", dir);
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int failed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **more = realloc(names, cap * sizeof *names);
            if (more == NULL) {
                failed = 1;
                break;
            }
            names = more;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        if (names[n] == NULL) {
            failed = 1;
            break;
        }
        snprintf(names[n], len, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    if (n > 0) qsort(names, n, sizeof *names, compare_names);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (!failed && stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            failed |= run_file(names[i]);
            (*count)++;
        }
        free(names[i]);
    }
    free(names);
    return failed;
}

int main(int argc, char **argv) {
    LLVMFuzzerInitialize(&argc, &argv);
    int failed = 0, count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: no such file or directory: %s\n", argv[i]);
            failed = 1;
        } else if (S_ISDIR(st.st_mode)) {
            failed |= run_dir(argv[i], &count);
        } else {
            failed |= run_file(argv[i]);
            count++;
        }
    }
    if (count == 0) {
        fprintf(stderr, "replay: no inputs\n");
        return 1;
    }
    printf("replayed %d inputs: %s\n", count, failed ? "FAILED" : "all invariants hold");
    return failed;
}
