/*
 * Retry-After and HTTP-date parsing, RFC 9110 §10.2.3 and §5.6.7.
 *
 * A hand-written, fixed-layout parser: no sscanf, no strptime/timegm/mktime, no locale, no globals, no
 * allocation. Every name and number in an HTTP-date is case-sensitive and fixed-width, so each format is
 * recognised by its exact length and checked byte by byte. Epochs come from our own days-from-civil
 * arithmetic (proleptic Gregorian calendar), so results do not depend on the C library or the time zone.
 *
 * Ranges that keep the arithmetic inside int64_t without checks on every step:
 *   - four-digit years are 0000..9999, and RFC 850 years are at most 10049 (the reference "now" is clamped
 *     to the end of year 9999), so |epoch_ms| < 2^49;
 *   - delay-seconds are accumulated with an explicit overflow check against INT64_MAX / 1000.
 */
#include "retryfreeze/retry_after.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MS_PER_SEC INT64_C(1000)
#define MS_PER_DAY INT64_C(86400000)

/* The rarer formats out of line: the IMF-fixdate path, the one servers send, then needs fewer saved registers. */
#if defined(__GNUC__)
#define COLD __attribute__((noinline))
#else
#define COLD
#endif

/* The largest delay-seconds value whose millisecond count fits in int64_t. */
#define MAX_DELAY_SECONDS (INT64_MAX / MS_PER_SEC)

/* 9999-12-31T23:59:59.999Z: a reference "now" beyond it is clamped (RFC 850 year rule only). */
#define MAX_REF_MS INT64_C(253402300799999)

/* The reference for the RFC 850 year rule when no clock is known: 2000-01-01T00:00:00Z. */
#define DEFAULT_REF_MS INT64_C(946684800000)

/* ---- calendar arithmetic (Howard Hinnant's days_from_civil / civil_from_days) ---- */

static bool is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static int days_in_month(int64_t y, int m) {
    static const unsigned char len[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return (m == 2 && is_leap(y)) ? 29 : len[m - 1];
}

/* Days since 1970-01-01 of the civil date y-m-d (m 1..12, d 1..31); valid for any y in int32 range. */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= (m <= 2);
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const int64_t yoe = y - era * 400;                                   /* [0, 399] */
    const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* [0, 365] */
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           /* [0, 146096] */
    return era * 146097 + doe - 719468;
}

/* The civil date of a day count since 1970-01-01. */
static void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const int64_t doe = z - era * 146097;                                      /* [0, 146096] */
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* [0, 399] */
    const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);               /* [0, 365] */
    const int64_t mp = (5 * doy + 2) / 153;                                    /* [0, 11] */
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* ---- lexical helpers ---- */

static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* Two ASCII digits at p, or -1. */
static int two_digits(const unsigned char *p) {
    if (!is_digit(p[0]) || !is_digit(p[1])) {
        return -1;
    }
    return (p[0] - '0') * 10 + (p[1] - '0');
}

/* Four ASCII digits at p, or -1. */
static int four_digits(const unsigned char *p) {
    const int hi = two_digits(p);
    const int lo = two_digits(p + 2);
    return (hi < 0 || lo < 0) ? -1 : hi * 100 + lo;
}

static uint32_t pack3(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16);
}

#define PACK3(a, b, c) ((uint32_t)(a) | ((uint32_t)(b) << 8) | ((uint32_t)(c) << 16))

/*
 * Month number 1..12 of a case-sensitive three-letter name ("Jan"), or 0; weekday index 0..6 (Mon..Sun), or -1.
 * One table read each: a multiplicative hash of the three bytes names a slot, which holds the only name that can
 * be there (the multipliers give each name of its list a slot of its own, so a slot's entry is the one compare).
 */
#define MONTH_SLOT(v) ((uint32_t)((v)*UINT32_C(26596)) >> 28)
#define WEEKDAY_SLOT(v) ((uint32_t)((v)*UINT32_C(2522)) >> 29)
typedef struct name_slot {
    uint32_t packed; /* PACK3 of the name; 0 in an empty slot, which three NUL bytes must not match */
    int8_t value;
} name_slot;
#define MONTH(a, b, c, n) [MONTH_SLOT(PACK3(a, b, c))] = {PACK3(a, b, c), n}
static const name_slot month_slots[16] = {MONTH('J', 'a', 'n', 1),  MONTH('F', 'e', 'b', 2),  MONTH('M', 'a', 'r', 3),
                                          MONTH('A', 'p', 'r', 4),  MONTH('M', 'a', 'y', 5),  MONTH('J', 'u', 'n', 6),
                                          MONTH('J', 'u', 'l', 7),  MONTH('A', 'u', 'g', 8),  MONTH('S', 'e', 'p', 9),
                                          MONTH('O', 'c', 't', 10), MONTH('N', 'o', 'v', 11), MONTH('D', 'e', 'c', 12)};
#define WEEKDAY(a, b, c, n) [WEEKDAY_SLOT(PACK3(a, b, c))] = {PACK3(a, b, c), n}
static const name_slot weekday_slots[8] = {
    WEEKDAY('M', 'o', 'n', 0), WEEKDAY('T', 'u', 'e', 1), WEEKDAY('W', 'e', 'd', 2), WEEKDAY('T', 'h', 'u', 3),
    WEEKDAY('F', 'r', 'i', 4), WEEKDAY('S', 'a', 't', 5), WEEKDAY('S', 'u', 'n', 6)};

static int month_of_packed(uint32_t v) {
    const name_slot *e = &month_slots[MONTH_SLOT(v)];
    return e->packed == v ? e->value : 0;
}

static int month_number(const unsigned char *p) { return month_of_packed(pack3(p)); }

static int weekday_index(const unsigned char *p) {
    const uint32_t v = pack3(p);
    const name_slot *e = &weekday_slots[WEEKDAY_SLOT(v)];
    return e->packed == v && v != 0 ? e->value : -1;
}

/*
 * Length of the long weekday name (day-name-l, "Monday") that starts text of length n, or 0 when text
 * does not start with one. Only the name itself is checked, not what follows it.
 */
static size_t long_weekday_len(const unsigned char *p, size_t n) {
    /* The suffix after the three-letter short name, indexed like weekday_index. */
    static const char *const rest[7] = {"day", "sday", "nesday", "rsday", "day", "urday", "day"};
    if (n < 6) {
        return 0;
    }
    const int w = weekday_index(p);
    if (w < 0) {
        return 0;
    }
    const char *r = rest[w];
    size_t i = 0;
    for (; r[i] != '\0'; i++) {
        if (3 + i >= n || p[3 + i] != (unsigned char)r[i]) {
            return 0;
        }
    }
    return 3 + i;
}

/* "HH:MM:SS" at p (8 bytes) into seconds of the day; hour 00-23, minute 00-59, second 00-60. -1 if bad. */
static int32_t time_of_day(const unsigned char *p) {
    if (p[2] != ':' || p[5] != ':') {
        return -1;
    }
    const int h = two_digits(p);
    const int mi = two_digits(p + 3);
    const int s = two_digits(p + 6);
    if (h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 || s > 60) {
        return -1;
    }
    return (int32_t)(h * 3600 + mi * 60 + s);
}

static bool is_gmt(const unsigned char *p) { return p[0] == 'G' && p[1] == 'M' && p[2] == 'T'; }

/* Epoch ms of a validated civil date + seconds of day; false when the day is not in the month. */
static bool civil_to_ms(int64_t y, int m, int d, int32_t sod, int64_t *out) {
    if (m < 1 || m > 12 || d < 1 || d > days_in_month(y, m)) {
        return false;
    }
    *out = days_from_civil(y, m, d) * MS_PER_DAY + (int64_t)sod * MS_PER_SEC;
    return true;
}

/* ---- the three HTTP-date formats ---- */

static unsigned digit(const unsigned char *p) { return (unsigned)p[0] - '0'; }

/* The days since 1970-01-01 of a civil date of a four-digit year (y 0..9999, m 1..12, d 1..31): days_from_civil
 * counted from year -400, so that everything stays unsigned (no era). */
static int64_t days_from_civil4(unsigned y, unsigned m, unsigned d) {
    const unsigned yy = y + 400 - (m <= 2);
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    return (int64_t)(yy * 365u + yy / 4 - yy / 100 + yy / 400 + doy) - 146097 - 719468;
}

/* The layout of an IMF-fixdate, byte by byte: byte i is well placed when (unsigned char)(p[i] - imf_base[i]) <=
 * imf_span[i]: a fixed byte (span 0), a digit (base '0', span 9), or a name's letter (span 255: the name is looked
 * up after). Bytes 13..28 are read as the second half, which overlaps the first. */
static const unsigned char imf_base[32] = "\0\0\0, 00 \0\0\0 0000 00:00:00 GMT";
static const unsigned char imf_span[32] = {255, 255, 255, 0, 0, 9, 9, 0, 255, 255, 255, 0, 9, 9, 9,
                                           9,   0,   9,   9, 0, 9, 9, 0, 9,   9,   0,   0, 0, 0};

#if defined(__GNUC__)
/* Sixteen bytes at once (GCC's vector extension: SSE2 or NEON where there is one). */
typedef unsigned char bytes16 __attribute__((vector_size(16)));
static bool imf_layout(const unsigned char *p) {
    bytes16 x0, x1, b0, b1, s0, s1;
    memcpy(&x0, p, 16);
    memcpy(&x1, p + 13, 16);
    memcpy(&b0, imf_base, 16);
    memcpy(&b1, imf_base + 13, 16);
    memcpy(&s0, imf_span, 16);
    memcpy(&s1, imf_span + 13, 16);
    const bytes16 bad = ((bytes16)(x0 - b0) > s0) | ((bytes16)(x1 - b1) > s1);
    uint64_t half[2];
    memcpy(half, &bad, 16);
    return (half[0] | half[1]) == 0;
}
#else
static bool imf_layout(const unsigned char *p) {
    for (size_t i = 0; i < 29; i++)
        if ((unsigned char)(p[i] - imf_base[i]) > imf_span[i]) return false;
    return true;
}
#endif

/* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" (exactly 29 bytes): the layout at once, then the names, the ranges
 * and the day. */
static bool parse_imf_fixdate(const unsigned char *p, size_t n, int64_t *out) {
    if (n != 29 || !imf_layout(p) || weekday_index(p) < 0) {
        return false;
    }
    const unsigned m = (unsigned)month_number(p + 8);
    const unsigned d = digit(p + 5) * 10 + digit(p + 6);
    const unsigned y = digit(p + 12) * 1000 + digit(p + 13) * 100 + digit(p + 14) * 10 + digit(p + 15);
    const unsigned h = digit(p + 17) * 10 + digit(p + 18), mi = digit(p + 20) * 10 + digit(p + 21),
                   s = digit(p + 23) * 10 + digit(p + 24);
    /* One branch for the ranges (d - 1 > 30 when d is 0 or over 31); the day in its month only for a day 29 and up. */
    if ((m == 0) | (h > 23) | (mi > 59) | (s > 60) | (d - 1 > 30) || (d > 28 && (int)d > days_in_month(y, (int)m))) {
        return false;
    }
    *out = days_from_civil4(y, m, d) * MS_PER_DAY + (int64_t)(h * 3600 + mi * 60 + s) * MS_PER_SEC;
    return true;
}

/* asctime-date: "Sun Nov  6 08:49:37 1994" or "Sun Nov 06 08:49:37 1994" (exactly 24 bytes). */
COLD static bool parse_asctime(const unsigned char *p, size_t n, int64_t *out) {
    if (n != 24 || weekday_index(p) < 0 || p[3] != ' ' || p[7] != ' ' || p[10] != ' ' || p[19] != ' ') {
        return false;
    }
    const int m = month_number(p + 4);
    int d;
    if (p[8] == ' ') {
        d = is_digit(p[9]) ? p[9] - '0' : -1;
    } else {
        d = two_digits(p + 8);
    }
    const int32_t sod = time_of_day(p + 11);
    const int y = four_digits(p + 20);
    if (d < 0 || y < 0 || sod < 0) {
        return false;
    }
    return civil_to_ms(y, m, d, sod, out);
}

/*
 * The four-digit year of an RFC 850 two-digit year yy (RFC 9110 §5.6.7): a timestamp that appears to be
 * more than 50 years in the future is the most recent year in the past with the same last two digits.
 * Here: the latest year ending in yy, with the day existing in that year, whose timestamp is at most
 * (reference + 50 calendar years). ref_ms must be in [0, MAX_REF_MS].
 */
static bool rfc850_resolve(int yy, int m, int d, int32_t sod, int64_t ref_ms, int64_t *out) {
    /* Reject a day that exists in no year (Apr 31, Feb 30) before searching. */
    if (d < 1 || d > days_in_month(2000, m)) {
        return false;
    }
    int64_t ref_y;
    int ref_m, ref_d;
    const int64_t ref_days = ref_ms / MS_PER_DAY;
    civil_from_days(ref_days, &ref_y, &ref_m, &ref_d);
    const int64_t limit_y = ref_y + 50;
    /* A reference on Feb 29 maps to Mar 1 fifty years on when that year is not a leap year. */
    const int64_t limit_ms = days_from_civil(limit_y, ref_m, ref_d) * MS_PER_DAY + (ref_ms - ref_days * MS_PER_DAY);
    int64_t y = limit_y - ((limit_y - yy) % 100); /* the latest year <= limit_y ending in yy */
    /* Only the first candidate can be too late, and Feb 29 exists in one of any four consecutive
     * centuries ending in yy (one of them is divisible by 400), so five candidates always suffice. */
    for (int i = 0; i < 5; i++, y -= 100) {
        int64_t t;
        if (civil_to_ms(y, m, d, sod, &t) && t <= limit_ms) {
            *out = t;
            return true;
        }
    }
    return false;
}

/* rfc850-date: "Sunday, 06-Nov-94 08:49:37 GMT" (long weekday name + 24 bytes). */
COLD static bool parse_rfc850(const unsigned char *p, size_t n, int64_t ref_ms, int64_t *out) {
    const size_t w = long_weekday_len(p, n);
    if (w == 0 || n != w + 24) {
        return false;
    }
    p += w;
    if (p[0] != ',' || p[1] != ' ' || p[4] != '-' || p[8] != '-' || p[11] != ' ' || p[20] != ' ' || !is_gmt(p + 21)) {
        return false;
    }
    const int d = two_digits(p + 2);
    const int m = month_number(p + 5);
    const int yy = two_digits(p + 9);
    const int32_t sod = time_of_day(p + 12);
    if (d < 0 || m == 0 || yy < 0 || sod < 0) {
        return false;
    }
    return rfc850_resolve(yy, m, d, sod, ref_ms, out);
}

/* Trims SP and HTAB from both ends of [*p, *p + *n). */
static void trim_ows(const unsigned char **p, size_t *n) {
    const unsigned char *s = *p;
    size_t len = *n;
    while (len > 0 && (s[0] == ' ' || s[0] == '\t')) {
        s++;
        len--;
    }
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t')) {
        len--;
    }
    *p = s;
    *n = len;
}

/* An HTTP-date on already-trimmed bytes. */
static bool parse_http_date_trimmed(const unsigned char *p, size_t n, int64_t now_ms, int64_t *out) {
    if (n < 24) {
        return false;
    }
    if (p[3] == ',') {
        return parse_imf_fixdate(p, n, out);
    }
    if (p[3] == ' ') {
        return parse_asctime(p, n, out);
    }
    int64_t ref_ms = now_ms > 0 ? now_ms : DEFAULT_REF_MS;
    if (ref_ms > MAX_REF_MS) {
        ref_ms = MAX_REF_MS;
    }
    return parse_rfc850(p, n, ref_ms, out);
}

bool rf_http_date_parse(const char *text, size_t len, int64_t now_ms, int64_t *epoch_ms) {
    if (text == NULL) {
        return false;
    }
    const unsigned char *p = (const unsigned char *)text;
    size_t n = len;
    trim_ows(&p, &n);
    int64_t t;
    if (!parse_http_date_trimmed(p, n, now_ms, &t)) {
        return false;
    }
    if (epoch_ms != NULL) {
        *epoch_ms = t;
    }
    return true;
}

/* ---- Retry-After ---- */

/* delay-seconds = 1*DIGIT, on trimmed bytes that start with a digit. */
static rf_retry_after_status parse_delay_seconds(const unsigned char *p, size_t n, int64_t *delay_ms) {
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(p[i])) {
            return RF_RA_INVALID;
        }
    }
    int64_t s = 0;
    for (size_t i = 0; i < n; i++) {
        const int64_t digit = p[i] - '0';
        if (s > (MAX_DELAY_SECONDS - digit) / 10) {
            return RF_RA_TOO_LONG;
        }
        s = s * 10 + digit;
    }
    if (delay_ms != NULL) {
        *delay_ms = s * MS_PER_SEC;
    }
    return RF_RA_OK;
}

rf_retry_after_status rf_retry_after_parse(const char *value, size_t len, int64_t now_ms, const char *date,
                                           size_t date_len, int64_t *delay_ms) {
    if (value == NULL) {
        return RF_RA_ABSENT;
    }
    const unsigned char *p = (const unsigned char *)value;
    size_t n = len;
    trim_ows(&p, &n);
    if (n == 0) {
        return RF_RA_ABSENT;
    }
    if (is_digit(p[0])) {
        return parse_delay_seconds(p, n, delay_ms);
    }

    /* An HTTP-date. The server's Date, when it parses, is the reference: Retry-After - Date is immune to
     * skew between the server's clock and ours. */
    int64_t date_ms = 0;
    const bool have_date = date != NULL && rf_http_date_parse(date, date_len, now_ms, &date_ms);
    const int64_t year_ref = now_ms > 0 ? now_ms : (have_date ? date_ms : 0);
    int64_t at_ms;
    if (!parse_http_date_trimmed(p, n, year_ref, &at_ms)) {
        return RF_RA_INVALID;
    }
    int64_t base_ms;
    if (have_date) {
        base_ms = date_ms;
    } else if (now_ms > 0) {
        base_ms = now_ms;
    } else {
        return RF_RA_NO_CLOCK;
    }
    /* Compare before subtracting: base_ms may be any positive int64 (now_ms), at_ms is < 2^49 in magnitude. */
    const int64_t delay = at_ms > base_ms ? at_ms - base_ms : 0;
    if (delay_ms != NULL) {
        *delay_ms = delay;
    }
    return RF_RA_OK;
}

const char *rf_retry_after_status_name(rf_retry_after_status s) {
    switch (s) {
    case RF_RA_ABSENT: return "absent";
    case RF_RA_OK: return "ok";
    case RF_RA_INVALID: return "invalid";
    case RF_RA_TOO_LONG: return "too-long";
    case RF_RA_NO_CLOCK: return "no-clock";
    case RF_RA_STOP: return "stop";
    }
    return "unknown";
}
