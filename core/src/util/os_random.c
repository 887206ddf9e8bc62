/* See os_random.h. */
#define _GNU_SOURCE
#include "os_random.h"

#include <errno.h>
#include <sys/random.h>

int rfi_os_random(void *buf, size_t n) {
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        p += got;
        n -= (size_t)got;
    }
    return 0;
}
