/*
 * Ledger timestamps: RFC 3339 UTC with milliseconds, "2026-11-29T17:20:01.123Z", always 24 characters.
 * Formatting uses gmtime_r; parsing is the exact inverse (days from the civil date, no timegm, no locale).
 */
#define _POSIX_C_SOURCE 200809L
#include "ledger_internal.h"

#include <time.h>

/* Writes value as exactly width decimal digits (value < 10^width, checked by the caller). */
static void put_digits(char *out, int value, int width) {
    for (int i = width - 1; i >= 0; i--) {
        out[i] = (char)('0' + value % 10);
        value /= 10;
    }
}

void rfi_ledger_ts_format(int64_t ts_ms, char out[RFI_LEDGER_TS_LEN + 1]) {
    time_t seconds = (time_t)(ts_ms / 1000);
    struct tm tm;

    if (ts_ms < 0 || ts_ms > RFI_LEDGER_TS_MAX_MS || !gmtime_r(&seconds, &tm)) {
        /* Unreachable: rfi_ledger_format_line refuses ts_ms outside the range first. */
        seconds = 0;
        ts_ms = 0;
        gmtime_r(&seconds, &tm);
    }
    put_digits(out, tm.tm_year + 1900, 4);
    out[4] = '-';
    put_digits(out + 5, tm.tm_mon + 1, 2);
    out[7] = '-';
    put_digits(out + 8, tm.tm_mday, 2);
    out[10] = 'T';
    put_digits(out + 11, tm.tm_hour, 2);
    out[13] = ':';
    put_digits(out + 14, tm.tm_min, 2);
    out[16] = ':';
    put_digits(out + 17, tm.tm_sec, 2);
    out[19] = '.';
    put_digits(out + 20, (int)(ts_ms % 1000), 3);
    out[23] = 'Z';
    out[24] = '\0';
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m) {
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

static int digits_at(const char *s, int at, int width) {
    int v = 0;
    for (int i = 0; i < width; i++) {
        v = v * 10 + (s[at + i] - '0');
    }
    return v;
}

bool rfi_ledger_ts_parse(const char *s, size_t len, int64_t *ts_ms) {
    static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";

    if (len != RFI_LEDGER_TS_LEN) {
        return false;
    }
    for (size_t i = 0; i < RFI_LEDGER_TS_LEN; i++) {
        bool ok = shape[i] == 'd' ? (s[i] >= '0' && s[i] <= '9') : s[i] == shape[i];
        if (!ok) {
            return false;
        }
    }
    int year = digits_at(s, 0, 4), month = digits_at(s, 5, 2), day = digits_at(s, 8, 2);
    int hour = digits_at(s, 11, 2), minute = digits_at(s, 14, 2), second = digits_at(s, 17, 2);
    int ms = digits_at(s, 20, 3);
    if (year < 1970 || month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) || hour > 23 ||
        minute > 59 || second > 59) {
        return false;
    }
    int64_t days = days_from_civil(year, month, day);
    *ts_ms = ((days * 24 + hour) * 60 + minute) * 60000 + (int64_t)second * 1000 + ms;
    return true;
}
