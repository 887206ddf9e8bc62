/*
 * Ledger timestamps: RFC 3339 UTC with milliseconds, "2026-11-29T17:20:01.123Z", always 24 characters.
 * Both ways go through the proleptic Gregorian calendar by H. Hinnant's civil_from_days and days_from_civil (no
 * gmtime_r, which takes libc's time zone lock; no timegm; no locale).
 */
#include "ledger_internal.h"

#include <string.h>

const char rfi_ledger_digit_pairs[201] = "0001020304050607080910111213141516171819202122232425262728293031323334353637"
                                         "3839404142434445464748495051525354555657585960616263646566676869707172737475"
                                         "767778798081828384858687888990919293949596979899";

/* Writes v (0..99) as two digits. */
static void put2(char *out, uint32_t v) { memcpy(out, rfi_ledger_digit_pairs + 2 * v, 2); }

/* The proleptic Gregorian date of a day count since 1970-01-01 (0 .. 2 932 896, to 9999-12-31): H. Hinnant's
 * civil_from_days, in 32-bit arithmetic (the divisions by constants are multiplications). */
static void civil_from_days(uint32_t z, int *y, int *m, int *d) {
    z += 719468;
    const uint32_t era = z / 146097, doe = z - era * 146097;
    const uint32_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const uint32_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

void rfi_ledger_ts_format(int64_t ts_ms, char out[RFI_LEDGER_TS_LEN + 1]) {
    if (ts_ms < 0 || ts_ms > RFI_LEDGER_TS_MAX_MS) ts_ms = 0; /* unreachable: the writer refuses them first */
    const uint32_t days = (uint32_t)(ts_ms / 86400000);
    const uint32_t ms_of_day = (uint32_t)(ts_ms - (int64_t)days * 86400000), seconds = ms_of_day / 1000;
    int year, month, day;
    civil_from_days(days, &year, &month, &day);
    const uint32_t minutes = seconds / 60, hour = minutes / 60, ms = ms_of_day - seconds * 1000, centi = ms / 10;
    put2(out, (uint32_t)year / 100);
    put2(out + 2, (uint32_t)year % 100);
    out[4] = '-';
    put2(out + 5, (uint32_t)month);
    out[7] = '-';
    put2(out + 8, (uint32_t)day);
    out[10] = 'T';
    put2(out + 11, hour);
    out[13] = ':';
    put2(out + 14, minutes - hour * 60);
    out[16] = ':';
    put2(out + 17, seconds - minutes * 60);
    out[19] = '.';
    put2(out + 20, centi);
    out[22] = (char)('0' + (ms - centi * 10));
    out[23] = 'Z';
    out[24] = '\0';
}

void rfi_ledger_ts_format_cached(int64_t ts_ms, rfi_ledger_ts_cache *cache, char out[RFI_LEDGER_TS_LEN + 1]) {
    const int64_t minute = ts_ms / 60000;
    if (cache == NULL || ts_ms < 0 || ts_ms > RFI_LEDGER_TS_MAX_MS || minute != cache->minute) {
        rfi_ledger_ts_format(ts_ms, out);
        if (cache != NULL && ts_ms >= 0 && ts_ms <= RFI_LEDGER_TS_MAX_MS) {
            memcpy(cache->prefix, out, RFI_LEDGER_TS_MINUTE_LEN);
            cache->minute = minute;
        }
        return;
    }
    const uint32_t ms_of_minute = (uint32_t)(ts_ms - minute * 60000), second = ms_of_minute / 1000;
    const uint32_t ms = ms_of_minute - second * 1000, centi = ms / 10;
    memcpy(out, cache->prefix, RFI_LEDGER_TS_MINUTE_LEN);
    put2(out + 17, second);
    out[19] = '.';
    put2(out + 20, centi);
    out[22] = (char)('0' + (ms - centi * 10));
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
