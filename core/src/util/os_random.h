/*
 * Randomness from the operating system, read in one place (core/src/util, see clock_ms.h): seeds of the jitter
 * RNGs, the binding's object tags, idempotency keys. Private: prefix rfi_, never installed.
 */
#ifndef RETRYFREEZE_UTIL_OS_RANDOM_H
#define RETRYFREEZE_UTIL_OS_RANDOM_H

#include <stddef.h>

/*
 * Fills buf[0..n) from the kernel's CSPRNG (getrandom(2) with no flags: it blocks only until the pool is first
 * initialized, early in boot), retrying on EINTR and on short reads. Returns 0, or the errno that stopped it
 * (ENOSYS on a kernel older than Linux 3.17, EPERM under a seccomp filter that forbids it), with buf then
 * unspecified. There is no fallback: a seed made from clocks and addresses is predictable and repeats across
 * processes started together, which would put their retries in step, so a caller fails closed and names the
 * errno instead.
 */
int rfi_os_random(void *buf, size_t n);

#endif
