/*
 * Fuzz target: Retry-After (rf_retry_after_parse), HTTP-date (rf_http_date_parse) and every other wait header
 * parser (rf_wait_header_parse: retry-after-ms, x-ms-retry-after-ms, ratelimit-reset, ratelimit,
 * x-ratelimit-reset, grpc-retry-pushback-ms), each fed the same value.
 * Input: VALUE [ NUL DATE [ NUL NOW_MS ] ] — the Retry-After field value, the response's Date header and the
 * local clock in decimal Unix ms. Without NOW_MS the value is tried with now_ms = 0 (no clock) and with a
 * fixed instant, so a plain seed file is simply a header value.
 * Invariants:
 *   - the status is one of the five, with a stable name; on RF_RA_OK the delay is >= 0, on any other status
 *     *delay_ms is untouched; the same call twice, and with a NULL delay pointer, gives the same status;
 *   - delay-seconds (trimmed 1*DIGIT) is exactly digits × 1000 ms, or too-long past int64 ms, whatever the clock;
 *   - an HTTP-date follows the contract of retry_after.h: invalid unless rf_http_date_parse accepts it, else
 *     max(0, at − Date) when Date parses, max(0, at − now) with a clock, no-clock otherwise;
 *   - every wait header: a known status with a name, the delay written only on ok (and >= 0), deterministic,
 *     the same status with a NULL delay pointer; and each header's own contract from retry_after.h: integer ms
 *     (or too-long), delta-seconds × 1000, seconds up to 10^9 else a Unix timestamp against Date/now,
 *     a RateLimit wait in whole seconds within an SF Integer, a pushback that is ok only for an int32 of digits
 *     and a stop for anything else that is present, an empty value included (only a NULL value is absent);
 *   - an accepted HTTP-date lies in years 0000..9999 (plus a leap second; an RFC 850 two-digit year may
 *     resolve up to 10049 when the clock is past 9999), and printed back as IMF-fixdate it parses to the
 *     same instant.
 */
#include "fuzz.h"

#include "retryfreeze/retry_after.h"

#include <stdbool.h>

#define UNTOUCHED INT64_C(-777)
#define FIXED_NOW INT64_C(1700000000000) /* 2023-11-14T22:13:20Z */
#define MS_PER_DAY INT64_C(86400000)
#define MIN_EPOCH_MS (INT64_C(-719528) * MS_PER_DAY) /* 0000-01-01T00:00:00Z */
/* 10050-01-01T00:00:00Z: four-digit years end at 9999 (plus a leap second), but an RFC 850 two-digit year is
 * the latest one at most 50 years after the reference, and a reference past 9999 counts as 9999. */
#define MAX_EPOCH_MS (INT64_C(2951160) * MS_PER_DAY)

static bool is_ows(char c) { return c == ' ' || c == '\t'; }

static void trim(const char **s, size_t *n) {
    while (*n > 0 && is_ows((*s)[0])) (*s)++, (*n)--;
    while (*n > 0 && is_ows((*s)[*n - 1])) (*n)--;
}

/* Civil date from days since 1970-01-01 (Howard Hinnant's algorithm), proleptic Gregorian. */
static void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const int64_t doe = z - era * 146097;
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* epoch_ms (whole seconds) as IMF-fixdate; false when the year has not four digits. */
static bool format_imf(int64_t epoch_ms, char out[40]) {
    static const char *const wd[] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"}; /* 1970-01-01 was a Thursday */
    static const char *const mon[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    int64_t days = epoch_ms / MS_PER_DAY, rem = epoch_ms % MS_PER_DAY;
    if (rem < 0) rem += MS_PER_DAY, days--;
    int64_t y;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    if (y < 0 || y > 9999) return false;
    int64_t s = rem / 1000;
    snprintf(out, 40, "%s, %02d %s %04d %02d:%02d:%02d GMT", wd[((days % 7) + 7) % 7], d, mon[m - 1], (int)y,
             (int)(s / 3600), (int)(s / 60 % 60), (int)(s % 60));
    return true;
}

static void check_http_date(const char *s, size_t n, int64_t now_ms) {
    int64_t at = UNTOUCHED;
    bool ok = rf_http_date_parse(s, n, now_ms, &at);
    FZ_CHECK(ok == rf_http_date_parse(s, n, now_ms, NULL), "validating alone disagrees with parsing");
    if (!ok) {
        FZ_CHECK(at == UNTOUCHED, "a refused HTTP-date wrote %lld", (long long)at);
        return;
    }
    FZ_CHECK(at % 1000 == 0, "HTTP-date with a fraction of a second: %lld", (long long)at);
    FZ_CHECK(at >= MIN_EPOCH_MS && at <= MAX_EPOCH_MS, "HTTP-date outside years 0000..10049: %lld", (long long)at);
    char imf[40];
    if (format_imf(at, imf)) {
        int64_t again = UNTOUCHED;
        FZ_CHECK(rf_http_date_parse(imf, strlen(imf), now_ms, &again) && again == at,
                 "\"%.*s\" is %lld, but its IMF-fixdate \"%s\" is %lld", (int)n, s, (long long)at, imf,
                 (long long)again);
    }
}

/* What rf_retry_after_parse must answer, from retry_after.h alone. */
static rf_retry_after_status expected(const char *v, size_t n, int64_t now_ms, const char *date, size_t dlen,
                                      int64_t *delay) {
    if (v == NULL) return RF_RA_ABSENT;
    trim(&v, &n);
    if (n == 0) return RF_RA_ABSENT;
    if (v[0] >= '0' && v[0] <= '9') {
        int64_t sec = 0;
        bool too_long = false;
        for (size_t i = 0; i < n; i++) {
            if (v[i] < '0' || v[i] > '9') return RF_RA_INVALID;
            int digit = v[i] - '0';
            if (too_long || sec > (INT64_MAX / 1000 - digit) / 10)
                too_long = true;
            else
                sec = sec * 10 + digit;
        }
        if (too_long) return RF_RA_TOO_LONG;
        *delay = sec * 1000;
        return RF_RA_OK;
    }
    int64_t date_ms = 0, at = 0;
    bool have_date = date != NULL && rf_http_date_parse(date, dlen, now_ms, &date_ms);
    int64_t ref = now_ms > 0 ? now_ms : (have_date ? date_ms : 0);
    if (!rf_http_date_parse(v, n, ref, &at)) return RF_RA_INVALID;
    int64_t base;
    if (have_date)
        base = date_ms;
    else if (now_ms > 0)
        base = now_ms;
    else
        return RF_RA_NO_CLOCK;
    *delay = at > base ? at - base : 0;
    return RF_RA_OK;
}

static void check_retry_after(const char *v, size_t n, int64_t now_ms, const char *date, size_t dlen) {
    int64_t delay = UNTOUCHED;
    rf_retry_after_status st = rf_retry_after_parse(v, n, now_ms, date, dlen, &delay);
    FZ_CHECK(st == RF_RA_ABSENT || st == RF_RA_OK || st == RF_RA_INVALID || st == RF_RA_TOO_LONG ||
                 st == RF_RA_NO_CLOCK,
             "status %d", (int)st);
    FZ_CHECK(strcmp(rf_retry_after_status_name(st), "unknown") != 0, "status %d has no name", (int)st);
    if (st == RF_RA_OK)
        FZ_CHECK(delay >= 0, "negative delay %lld", (long long)delay);
    else
        FZ_CHECK(delay == UNTOUCHED, "status %s wrote a delay %lld", rf_retry_after_status_name(st), (long long)delay);
    FZ_CHECK(rf_retry_after_parse(v, n, now_ms, date, dlen, NULL) == st, "a NULL delay pointer changes the status");
    int64_t again = UNTOUCHED;
    FZ_CHECK(rf_retry_after_parse(v, n, now_ms, date, dlen, &again) == st && again == delay, "not deterministic");
    int64_t want_delay = UNTOUCHED;
    rf_retry_after_status want = expected(v, n, now_ms, date, dlen, &want_delay);
    FZ_CHECK(st == want && delay == want_delay,
             "Retry-After \"%.*s\" (Date \"%.*s\", now %lld): %s %lld, the contract says %s %lld", (int)n, v, (int)dlen,
             date ? date : "", (long long)now_ms, rf_retry_after_status_name(st), (long long)delay,
             rf_retry_after_status_name(want), (long long)want_delay);
}

/* 1*DIGIT after trimming into *v: 1 ok, 0 not digits (or empty), -1 over max. */
static int digits_value(const char *v, size_t n, int64_t max, int64_t *out) {
    trim(&v, &n);
    if (n == 0) return 0;
    int64_t x = 0;
    bool over = false;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9') return 0;
        int d = v[i] - '0';
        if (over || x > (max - d) / 10)
            over = true;
        else
            x = x * 10 + d;
    }
    if (over) return -1;
    *out = x;
    return 1;
}

static void check_wait_header(rf_wait_header h, const char *v, size_t n, int64_t now_ms, const char *date,
                              size_t dlen) {
    int64_t delay = UNTOUCHED;
    rf_retry_after_status st = rf_wait_header_parse(h, v, n, now_ms, date, dlen, &delay);
    FZ_CHECK(st >= RF_RA_ABSENT && st <= RF_RA_STOP, "%s: status %d", rf_wait_header_name(h), (int)st);
    FZ_CHECK(strcmp(rf_retry_after_status_name(st), "unknown") != 0, "status %d has no name", (int)st);
    if (st == RF_RA_OK)
        FZ_CHECK(delay >= 0, "%s: negative delay %lld", rf_wait_header_name(h), (long long)delay);
    else
        FZ_CHECK(delay == UNTOUCHED, "%s: status %s wrote a delay", rf_wait_header_name(h),
                 rf_retry_after_status_name(st));
    FZ_CHECK(rf_wait_header_parse(h, v, n, now_ms, date, dlen, NULL) == st, "%s: a NULL delay pointer changes it",
             rf_wait_header_name(h));
    int64_t again = UNTOUCHED;
    FZ_CHECK(rf_wait_header_parse(h, v, n, now_ms, date, dlen, &again) == st && again == delay, "%s: not deterministic",
             rf_wait_header_name(h));
    const char *t = v;
    size_t tn = n;
    trim(&t, &tn);
    int64_t x = 0;
    int dv;
    switch (h) {
    case RF_WAIT_RETRY_AFTER: {
        int64_t d2 = UNTOUCHED;
        FZ_CHECK(st == rf_retry_after_parse(v, n, now_ms, date, dlen, &d2) && d2 == delay, "retry-after differs");
        break;
    }
    case RF_WAIT_RETRY_AFTER_MS:
    case RF_WAIT_X_MS_RETRY_AFTER_MS:
    case RF_WAIT_RATELIMIT_RESET: {
        const int64_t unit = h == RF_WAIT_RATELIMIT_RESET ? 1000 : 1;
        dv = digits_value(v, n, INT64_MAX / unit, &x);
        rf_retry_after_status want = tn == 0  ? RF_RA_ABSENT
                                     : dv > 0 ? RF_RA_OK
                                     : dv < 0 ? RF_RA_TOO_LONG
                                              : RF_RA_INVALID;
        FZ_CHECK(st == want && (st != RF_RA_OK || delay == x * unit), "%s \"%.*s\": %s %lld", rf_wait_header_name(h),
                 (int)n, v, rf_retry_after_status_name(st), (long long)delay);
        break;
    }
    case RF_WAIT_X_RATELIMIT_RESET:
        dv = digits_value(v, n, INT64_MAX / 1000, &x);
        if (tn == 0) {
            FZ_CHECK(st == RF_RA_ABSENT, "x-ratelimit-reset: empty is not absent");
        } else if (dv == 0) {
            FZ_CHECK(st == RF_RA_INVALID, "x-ratelimit-reset \"%.*s\": not digits, yet %s", (int)n, v,
                     rf_retry_after_status_name(st));
        } else if (dv > 0 && x <= 1000000000) {
            FZ_CHECK(st == RF_RA_OK && delay == x * 1000, "x-ratelimit-reset seconds %lld: %s %lld", (long long)x,
                     rf_retry_after_status_name(st), (long long)delay);
        } else if (dv < 0 || x > INT64_C(253402300799)) {
            FZ_CHECK(st == RF_RA_TOO_LONG, "x-ratelimit-reset past 9999: %s", rf_retry_after_status_name(st));
        } else {
            int64_t base = 0;
            bool have = date != NULL && rf_http_date_parse(date, dlen, now_ms, &base);
            if (!have && now_ms <= 0) {
                FZ_CHECK(st == RF_RA_NO_CLOCK, "x-ratelimit-reset without a clock: %s", rf_retry_after_status_name(st));
            } else {
                if (!have) base = now_ms;
                int64_t want = x * 1000 > base ? x * 1000 - base : 0;
                FZ_CHECK(st == RF_RA_OK && delay == want, "x-ratelimit-reset timestamp %lld: %s %lld, want %lld",
                         (long long)x, rf_retry_after_status_name(st), (long long)delay, (long long)want);
            }
        }
        break;
    case RF_WAIT_RATELIMIT:
        FZ_CHECK(st == RF_RA_ABSENT || st == RF_RA_OK || st == RF_RA_INVALID, "ratelimit: status %s",
                 rf_retry_after_status_name(st));
        if (st == RF_RA_OK)
            FZ_CHECK(delay % 1000 == 0 && delay <= INT64_C(999999999999999000), "ratelimit: delay %lld",
                     (long long)delay);
        if (tn == 0) FZ_CHECK(st == RF_RA_ABSENT, "ratelimit: empty is not absent");
        break;
    case RF_WAIT_GRPC_RETRY_PUSHBACK_MS:
        dv = digits_value(v, n, INT32_MAX, &x);
        if (tn == 0) /* present but empty: no integer, so A6's stop; only an absent (NULL) field asks nothing */
            FZ_CHECK(st == (v == NULL ? RF_RA_ABSENT : RF_RA_STOP), "pushback: empty gives %s",
                     rf_retry_after_status_name(st));
        else if (dv > 0)
            FZ_CHECK(st == RF_RA_OK && delay == x, "pushback %lld: %s", (long long)x, rf_retry_after_status_name(st));
        else
            FZ_CHECK(st == RF_RA_STOP, "pushback \"%.*s\": A6 says stop, got %s", (int)n, v,
                     rf_retry_after_status_name(st));
        break;
    default: FZ_CHECK(false, "header %d", (int)h);
    }
}

static void check_wait_headers(const char *v, size_t n, int64_t now_ms, const char *date, size_t dlen) {
    for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) check_wait_header((rf_wait_header)h, v, n, now_ms, date, dlen);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *v = (const char *)data, *date = NULL, *now_text = NULL;
    size_t n = size, dlen = 0, now_len = 0;
    const char *nul = memchr(v, '\0', n);
    if (nul != NULL) {
        n = (size_t)(nul - v);
        date = nul + 1;
        dlen = size - n - 1;
        const char *nul2 = memchr(date, '\0', dlen);
        if (nul2 != NULL) {
            now_text = nul2 + 1;
            now_len = dlen - (size_t)(nul2 - date) - 1;
            dlen = (size_t)(nul2 - date);
        }
    }
    check_http_date(v, n, 0);
    check_http_date(v, n, FIXED_NOW);
    if (date != NULL) check_http_date(date, dlen, FIXED_NOW);
    if (now_text != NULL) {
        int64_t now = 0;
        for (size_t i = 0; i < now_len && i < 18 && now_text[i] >= '0' && now_text[i] <= '9'; i++)
            now = now * 10 + (now_text[i] - '0');
        check_http_date(v, n, now);
        check_retry_after(v, n, now, date, dlen);
        check_wait_headers(v, n, now, date, dlen);
    } else {
        check_retry_after(v, n, 0, date, dlen);
        check_retry_after(v, n, FIXED_NOW, date, dlen);
        check_wait_headers(v, n, 0, date, dlen);
        check_wait_headers(v, n, FIXED_NOW, date, dlen);
    }
    /* NULL value: absent, whatever the length says. */
    FZ_CHECK(rf_retry_after_parse(NULL, n, FIXED_NOW, date, dlen, NULL) == RF_RA_ABSENT, "NULL is not absent");
    return 0;
}
