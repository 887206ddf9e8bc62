/* retryfreeze-serve: IMF-fixdate by hand, not strftime, so the locale can never change the names. */
#define _POSIX_C_SOURCE 200809L
#include "httpdate.h"

#include <stdio.h>

int srv_httpdate(time_t t, char *out, size_t cap) {
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct tm tm;
    if (cap > 0) out[0] = '\0';
    if (cap < SRV_HTTPDATE_LEN + 1 || gmtime_r(&t, &tm) == NULL) return -1;
    /* IMF-fixdate has a four-digit year. */
    if (tm.tm_year < -1900 || tm.tm_year > 9999 - 1900 || tm.tm_wday < 0 || tm.tm_wday > 6 || tm.tm_mon < 0 ||
        tm.tm_mon > 11)
        return -1;
    int n = snprintf(out, cap, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday], tm.tm_mday, months[tm.tm_mon],
                     tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    if (n != SRV_HTTPDATE_LEN) {
        out[0] = '\0';
        return -1;
    }
    return 0;
}
