/*
 * Shared helpers of the fuzz targets (fuzz/README.md): the invariant check and a reader that turns the
 * fuzzer's bytes into structured values. Header-only, public API only, so the same target files build both
 * as libFuzzer targets (clang, fuzz/CMakeLists.txt) and as corpus replayers (any C11 compiler,
 * fuzz/replay_main.c, registered with ctest by cmake/hardening.cmake).
 */
#ifndef RF_FUZZ_H
#define RF_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The libFuzzer entry points every target defines. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* An invariant: on violation, say which and abort (libFuzzer records the input as a crash). */
#define FZ_CHECK(cond, ...)                                                                      \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            fprintf(stderr, "\ninvariant violated at %s:%d: %s\n  ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                        \
            fputc('\n', stderr);                                                                 \
            abort();                                                                             \
        }                                                                                        \
    } while (0)

/* The fuzzer's bytes, consumed front to back; reading past the end yields zeros and empty strings. */
typedef struct fz_in {
    const uint8_t *p;
    size_t n;
} fz_in;

static inline uint8_t fz_u8(fz_in *in) {
    if (in->n == 0) return 0;
    in->n--;
    return *in->p++;
}

static inline uint64_t fz_uint(fz_in *in, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v = (v << 8) | fz_u8(in);
    return v;
}

static inline int64_t fz_i64(fz_in *in) {
    uint64_t u = fz_uint(in, 8);
    int64_t v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* Up to `max` bytes, the count taken from one length byte; *len gets the count. Points into the input. */
static inline const char *fz_bytes(fz_in *in, size_t max, size_t *len) {
    size_t want = fz_u8(in);
    if (want > max) want = max;
    if (want > in->n) want = in->n;
    const char *s = (const char *)in->p;
    in->p += want;
    in->n -= want;
    *len = want;
    return s;
}

/* One of n choices. */
static inline size_t fz_pick(fz_in *in, size_t n) { return n ? fz_u8(in) % n : 0; }

#endif
