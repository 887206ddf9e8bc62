/* retryfreeze-serve: IMF-fixdate (RFC 9110 §5.6.7) for Retry-After dates. */
#ifndef SRV_HTTPDATE_H
#define SRV_HTTPDATE_H

#include <stddef.h>
#include <time.h>

/* "Sun, 06 Nov 1994 08:49:37 GMT" is 29 characters. */
#define SRV_HTTPDATE_LEN 29

/* Writes the IMF-fixdate of t into out (at least SRV_HTTPDATE_LEN + 1 bytes). Returns 0, or -1
 * when t cannot be represented (out is then empty). */
int srv_httpdate(time_t t, char *out, size_t cap);

#endif
