/*
 * The attempt library's internal ABI: the rfi_ functions of the attempt loop (attempt_step_internal.h,
 * request_limits.h) that the libcurl client (libretryfreeze_client) calls across the shared-library boundary.
 * Each is declared with RFI_ABI, which exports it from libretryfreeze_attempt.so under the private symbol version
 * RETRYFREEZE_ATTEMPT_PRIVATE_<project version> (the version script cmake/attempt.cmake writes), as glibc keeps
 * its GLIBC_PRIVATE: the client records that exact version, so a client and an attempt library of two different
 * builds refuse to load together ("version ... not found") instead of calling each other with other structs.
 * Never in a public header, never a promise to anyone outside this project; every other rfi_ symbol stays hidden
 * (CMAKE_C_VISIBILITY_PRESET). docs/design.md, "The attempt path", says why the split is a shared library.
 */
#ifndef RETRYFREEZE_ATTEMPT_ABI_H
#define RETRYFREEZE_ATTEMPT_ABI_H

#if defined(__GNUC__) && !defined(_WIN32)
#define RFI_ABI __attribute__((visibility("default")))
#else
#define RFI_ABI
#endif

#endif
