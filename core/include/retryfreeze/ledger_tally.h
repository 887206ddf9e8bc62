/*
 * The ledger's tally: the counts and figures `retryfreeze stats`, `gate`, `report`, the OpenMetrics text and
 * `soak` print, kept in one accumulator, so each figure has one definition (docs/evidence.md). Feed it records
 * (rf_ledger_tally_add, or rf_ledger_tally_observer while a ledger appends) or whole ledger files
 * (rf_ledger_tally_read); read it back as one scope for everything counted, one per route (or per host), and one
 * per time bucket when asked for, each as counts and as figures (ratios, latency percentiles). Part of
 * libretryfreeze (no libcurl, no Lua).
 *
 * Memory: a scope is about 26 kB (the latency histogram); a tally holds one for the whole, one per distinct route
 * or host and one per time bucket, plus an entry per distinct (outcome, reason) pair and retried failure class in
 * each scope. Counting a record allocates only when it brings a new route, host, pair or class: memory grows with
 * the number of distinct names, never with the number of records.
 * Threads: no global state; one thread at a time per tally (rf_ledger_tally_copy makes one for another thread).
 */
#ifndef RETRYFREEZE_LEDGER_TALLY_H
#define RETRYFREEZE_LEDGER_TALLY_H

#include "retryfreeze/ledger.h"
#include "retryfreeze/vocabulary.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The latency histogram of elapsed_ms: every value 0..127 ms has its own bucket (exact); above, each power of two
 * [2^e, 2^(e+1)) is split into 64 equal buckets, up to 2^53. A percentile read from it is exact below 128 ms and
 * within 1/128 (0.78 %) of the true nearest-rank value above. Negative values count as 0.
 */
#define RF_TALLY_BUCKETS 3072

/* The upper bounds (ms) of the exact elapsed_ms counts behind the OpenMetrics histogram: Prometheus' default
 * buckets (5 ms .. 10 s) and two more, since a retried request with backoff easily takes longer than 10 s. */
#define RF_TALLY_LE_MS(X) X(5) X(10) X(25) X(50) X(100) X(250) X(500) X(1000) X(2500) X(5000) X(10000) X(30000) X(60000)
#define RF_TALLY_LE_COUNT 13

/* Most time buckets a tally keeps (rf_tally_options.time_buckets). */
#define RF_TALLY_MAX_TIME_BUCKETS 1024

/*
 * The counts of a scope, with the names `retryfreeze stats --json` gives them. X(name).
 *   requests           records counted: logical requests, one ledger line each
 *   successes          requests with ok true
 *   failures           requests − successes
 *   terminal           requests with outcome "terminal" (stopped on a failure no retry could fix, docs/reasons.md)
 *   retried_successes  successes after more than one attempt
 *   attempts           HTTP requests sent (the ledger's attempts: followed redirects included)
 *   success_attempts   attempts of the successful requests
 *   retries            attempts after the first (hedges included)
 *   hedged             requests that started a hedge (an attempt beside others in flight: the lock's hedging)
 *   hedges             hedges started (tries with "hedge": true), cancelled ones included
 *   hedge_wins         requests a hedge won (its try's fate "winner")
 */
#define RF_TALLY_REQUEST_COUNTS(X) \
    X(requests) X(successes) X(failures) X(terminal) X(retried_successes) X(attempts) X(success_attempts) X(retries)
#define RF_TALLY_HEDGE_COUNTS(X) X(hedged) X(hedges) X(hedge_wins)
#define RF_TALLY_COUNTS(X) RF_TALLY_REQUEST_COUNTS(X) RF_TALLY_HEDGE_COUNTS(X)

/*
 * The ratios of a scope: X(name, numerator, denominator), each a count above; 0 when the denominator is 0.
 * The gate's thresholds (docs/evidence.md "How the gate judges") are limits on these.
 */
#define RF_TALLY_RATIOS(X)                                 \
    X(success_rate, successes, requests)                   \
    X(terminal_rate, terminal, requests)                   \
    X(retried_success_ratio, retried_successes, successes) \
    X(attempts_per_success, success_attempts, successes)   \
    X(attempts_per_request, attempts, requests)            \
    X(retry_ratio, retries, requests)                      \
    X(hedges_per_request, hedges, requests)                \
    X(hedge_win_rate, hedge_wins, requests)

#define RF_X_TALLY_COUNT(name) int64_t name;
#define RF_X_TALLY_RATIO(name, num, den) double name;
/* A scope's figures, computed when the scope is read (rf_ledger_tally_whole, …). */
typedef struct rf_tally_figures {
    RF_TALLY_COUNTS(RF_X_TALLY_COUNT)
    RF_TALLY_RATIOS(RF_X_TALLY_RATIO)
    int64_t elapsed_ms_sum; /* the requests' elapsed_ms added up */
    /* When requests > 0 (else 0): the smallest and largest elapsed_ms, the nearest-rank percentiles read from the
     * histogram (its bucket's midpoint, clamped to min and max: rf_tally_percentile_ms) and the mean. */
    int64_t elapsed_min_ms, elapsed_max_ms, elapsed_p50_ms, elapsed_p95_ms, elapsed_p99_ms;
    double elapsed_mean_ms;
    /* Requests with elapsed_ms <= RF_TALLY_LE_MS's i-th bound, cumulative (OpenMetrics' le buckets; exact). */
    int64_t elapsed_le[RF_TALLY_LE_COUNT];
} rf_tally_figures;
#undef RF_X_TALLY_COUNT
#undef RF_X_TALLY_RATIO

/* A named count of a scope: an (outcome, reason) pair and its requests, or a failure class (reason NULL) and the
 * attempts of it that were retried. */
typedef struct rf_tally_count {
    const char *name;
    const char *reason;
    int64_t n;
} rf_tally_count;

/*
 * One scope as read: the figures and the counts behind them. Every pointer points into the tally: valid until the
 * next call that feeds or frees it (rf_ledger_tally_add, _read, _free, or an append its observer sees).
 */
typedef struct rf_tally_scope {
    const char *name; /* the route (the ledger's "route", "" for a request no route matched) or the host ("" for
                         lines without one); NULL for the whole tally and a time bucket */
    int64_t start_ms; /* a time bucket's start (Unix ms); 0 otherwise */
    rf_tally_figures figures;
    const rf_tally_count *outcomes; /* (outcome, final reason) → requests, in the order first seen */
    size_t n_outcomes;
    const rf_tally_count *retried_classes; /* failure class → attempts of it the verdict retried (pinned-status) */
    size_t n_retried_classes;
    const int64_t *by_attempts; /* [n]: requests that made n attempts, n = 0..RF_LEDGER_MAX_TRIES */
    const int64_t *retry_after; /* [use]: tries whose wait header became that rf_retry_after_use (how: below) */
    const int64_t *hist;        /* [b]: requests in latency bucket b (rf_tally_bucket_of), RF_TALLY_BUCKETS of them */
} rf_tally_scope;

/* How the records are grouped into named scopes. */
typedef enum rf_tally_group {
    RF_TALLY_BY_ROUTE = 0, /* by the record's route */
    RF_TALLY_BY_HOST = 1   /* by the host its line carries (the ledger's "host" field) */
} rf_tally_group;

/* What a new tally counts. Zeroed: by route, no time buckets. */
typedef struct rf_tally_options {
    rf_tally_group group;
    /* Time buckets (for charts over time): 0 for none, else 1..RF_TALLY_MAX_TIME_BUCKETS buckets of bucket_ms
     * (1..253402300799999) from origin_ms (Unix ms, ±253402300799999). A record counts in the bucket of
     * (ts_ms − origin_ms) / bucket_ms, clamped to the first and the last; seed-harness records (no ts) in none. */
    size_t time_buckets;
    int64_t origin_ms, bucket_ms;
} rf_tally_options;

/* What was read and counted, over everything fed so far. */
typedef struct rf_tally_info {
    int64_t lines;         /* lines rf_ledger_tally_read read (every one: skipped, torn, corrupt) + records added */
    int64_t torn_lines;    /* torn lines read (writes cut short): skipped */
    int64_t corrupt_lines; /* corrupt lines skipped (rf_ledger_tally_read with skip_corrupt) */
    bool has_ts;           /* whether a record with a ts was counted; then: */
    int64_t ts_min_ms, ts_max_ms; /* the range of their ts (seed-harness records, which have none, left out) */
    bool incomplete; /* memory ran out while counting (RF_ENOMEM, or in rf_ledger_tally_observer): records are
                        missing, and the tally should be discarded */
} rf_tally_info;

/* What rf_ledger_tally_read found in one file. */
typedef struct rf_tally_file {
    int64_t lines;         /* lines read, every one */
    long first_torn;       /* the line number of the first torn line, 0 when none */
    int64_t torn_lines;    /* torn lines (skipped, and the reader read on) */
    int64_t corrupt_lines; /* corrupt lines skipped (with skip_corrupt) */
} rf_tally_file;

typedef struct rf_ledger_tally rf_ledger_tally;

/*
 * Makes an empty tally (opts NULL: by route, no time buckets). RF_OK: *out is the caller's, freed with
 * rf_ledger_tally_free. RF_EINVAL (err->path "group", "time_buckets", "bucket_ms" or "origin_ms", err->message the
 * range and the value): an option out of range. RF_ENOMEM.
 */
RF_API rf_status rf_ledger_tally_new(const rf_tally_options *opts, rf_ledger_tally **out, rf_error *err);

/* Frees the tally and everything its scopes hold; NULL is a no-op. */
RF_API void rf_ledger_tally_free(rf_ledger_tally *t);

/*
 * Counts one record (one ledger line) into the whole, its route's or host's scope (host: the host its line
 * carries, NULL for none) and its time bucket. The record and its strings are borrowed for the call; the names a
 * new scope, pair or class needs are copied. What a try's wait header became (rf_tally_scope.retry_after) is
 * told from the ledger alone, as docs/evidence.md "Retry-After use from the ledger" writes down: the value read by its
 * header's own rule (rf_wait_header_parse), then the try's reason and the next try's delay or start.
 * RF_EINVAL: NULL t or rec. RF_ENOMEM: the record is counted in part and the tally marked incomplete.
 */
RF_API rf_status rf_ledger_tally_add(rf_ledger_tally *t, const rf_ledger_record *rec, const char *host, rf_error *err);

/*
 * rf_ledger_tally_add as a ledger observer (rf_ledger_observer: rf_ledger_observe(l, rf_ledger_tally_observer,
 * t, err)), so a writer's appends are counted as they are written: the same counts a tally reading the lines
 * back gets. ud is the tally. Never fails: when memory runs out the tally is marked incomplete (rf_tally_info).
 */
RF_API void rf_ledger_tally_observer(void *ud, const rf_ledger_record *rec, const char *host);

/*
 * Streams the ledger at path (rf_ledger_reader_open: a regular file only) and counts each record. Lines
 * 1..after_line are read but not counted (what a run appended is summarized apart from what the file held before;
 * torn lines there still count as torn). A torn line is counted in *file and skipped. A corrupt line stops the
 * read with RF_EINVAL, err->line its line number > 0 and err->message what is wrong (rf_ledger_reader_next), unless
 * skip_corrupt: then it is counted and skipped. file may be NULL. Other errors: those of rf_ledger_reader_open
 * (RF_EINVAL, RF_EIO, RF_ENOMEM: err->message names the file), RF_EIO when a read fails (err->message names the
 * file and strerror), RF_ENOMEM while counting. After an error the tally holds the records counted before it:
 * discard it. Memory: the reader's window, whatever the file's length.
 */
RF_API rf_status rf_ledger_tally_read(rf_ledger_tally *t, const char *path, long after_line, bool skip_corrupt,
                                      rf_tally_file *file, rf_error *err);

/* A deep copy of t (names included), for a reader that must not see t change under it: a finalizer may append
 * to the ledger whose observer feeds t while the copy is read. RF_EINVAL (NULL t or out), RF_ENOMEM. */
RF_API rf_status rf_ledger_tally_copy(const rf_ledger_tally *t, rf_ledger_tally **out, rf_error *err);

/* The scope of everything counted (name NULL) into *out. */
RF_API void rf_ledger_tally_whole(const rf_ledger_tally *t, rf_tally_scope *out);

/* The number of named scopes: distinct routes (or hosts) counted so far. */
RF_API size_t rf_ledger_tally_scope_count(const rf_ledger_tally *t);

/* Named scope i (0..rf_ledger_tally_scope_count − 1, in the order first counted) into *out; false when i is out of
 * range (*out untouched). */
RF_API bool rf_ledger_tally_scope(const rf_ledger_tally *t, size_t i, rf_tally_scope *out);

/* The number of time buckets (rf_tally_options.time_buckets). */
RF_API size_t rf_ledger_tally_time_bucket_count(const rf_ledger_tally *t);

/* Time bucket i (in time order; start_ms set) into *out; false when i is out of range (*out untouched). */
RF_API bool rf_ledger_tally_time_bucket(const rf_ledger_tally *t, size_t i, rf_tally_scope *out);

/* What was read and counted into *out. */
RF_API void rf_ledger_tally_info(const rf_ledger_tally *t, rf_tally_info *out);

/* The histogram bucket of a duration: 0..RF_TALLY_BUCKETS − 1 for 0..2^53 − 1 ms (negative: 0; larger: the last). */
RF_API size_t rf_tally_bucket_of(int64_t elapsed_ms);

/* The inclusive range [*lo_ms, *hi_ms] of durations bucket b holds (b < RF_TALLY_BUCKETS; a larger b is taken as
 * the last). */
RF_API void rf_tally_bucket_range(size_t b, int64_t *lo_ms, int64_t *hi_ms);

/*
 * The nearest-rank q-quantile (0 < q <= 1) of s's elapsed_ms, from its histogram: the bucket holding the
 * ceil(q × requests)-th smallest value, as its midpoint, clamped to the scope's min and max. 0 when s has no
 * requests. Exact below 128 ms.
 */
RF_API int64_t rf_tally_percentile_ms(const rf_tally_scope *s, double q);

#ifdef __cplusplus
}
#endif
#endif
