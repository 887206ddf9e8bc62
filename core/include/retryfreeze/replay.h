/*
 * A replay: the requests a ledger recorded, decided again under a candidate lock ("what if this lock had been in
 * force?", docs/evidence.md "Replay"). Each recorded request is walked try by try through the engine calls the client
 * makes, with the facts its line recorded: rf_budget before an attempt (its per-try timeout), rf_decide_on_route after
 * it (rf_redirect_verdict on a 3xx the record followed), and one retry budget fed in record order. Where the record
 * decides (the candidate stops at or before the record's last try) the prediction is exact; the tries the record never
 * made are drawn from the record itself: for each candidate route, attempt number and failure class, the recorded
 * tries at that attempt that followed a failure of that class (a request's tries conditioned on its own history as
 * far as the record observed it: the record's requests that failed as often say how often such a request failed
 * again; the upstream unchanged by the load), with an interval from replicated draws. An attempt the record's
 * requests did not reach often enough is drawn as the deepest they did, and the interval then spans such tries
 * failing and succeeding (rf_replay_beyond). The recorded and the predicted requests are counted by two ledger
 * tallies (retryfreeze/ledger_tally.h), so both carry the figures `retryfreeze stats` prints, computed by the same
 * code.
 *
 * Memory: the two tallies, one pool of at most RF_REPLAY_POOL_SAMPLES recorded tries per (candidate route, attempt
 * number, failure class), at most `pending` requests waiting for their drawn tries (processed when the queue is full,
 * and by rf_replay_finish), and the replicates' counts per scope: constant in the number of records. Part of
 * libretryfreeze.
 * Threads: no global state; one thread at a time per replay. The candidate is borrowed: it must outlive the replay.
 */
#ifndef RETRYFREEZE_REPLAY_H
#define RETRYFREEZE_REPLAY_H

#include "retryfreeze/ledger_tally.h"
#include "retryfreeze/policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Below this many recorded tries after a failure class at an attempt on a route, the class is a gap there
 * (rf_replay_gap), or the attempt is beyond the record (rf_replay_beyond). */
#define RF_REPLAY_MIN_SAMPLES 30
/* The draws of the modelled tries repeated for the interval, by default and at most. */
#define RF_REPLAY_REPLICATES 40
#define RF_REPLAY_MAX_REPLICATES 1000
/* Recorded tries a pool keeps (a uniform reservoir of all it was offered). */
#define RF_REPLAY_POOL_SAMPLES 512
/* Requests that wait for drawn tries until the pools have seen more of the record, by default and at most. */
#define RF_REPLAY_PENDING 1024
#define RF_REPLAY_MAX_PENDING 1000000

/* What a new replay does. Zeroed: seed 0, by route, the defaults above. */
typedef struct rf_replay_options {
    uint64_t seed;        /* the candidate's jitter and the model's draws: the same seed, the same prediction */
    rf_tally_group group; /* the scopes of both tallies: by route or by host */
    uint32_t min_samples; /* 0: RF_REPLAY_MIN_SAMPLES; else 1..1000000 */
    uint32_t replicates;  /* 0: RF_REPLAY_REPLICATES; else 2..RF_REPLAY_MAX_REPLICATES */
    uint32_t pending;     /* 0: RF_REPLAY_PENDING; else 1..RF_REPLAY_MAX_PENDING */
} rf_replay_options;

/* What a replay found, over every record fed. Requests are counted once each, by how they were predicted. */
typedef struct rf_replay_info {
    int64_t records;        /* records fed */
    int64_t harness;        /* seed-harness records (no method, path or tries): in the recorded figures only */
    int64_t no_route;       /* requests the candidate routes nowhere: predicted as refused (no-route), no attempt */
    int64_t exact;          /* requests the record decides alone (the candidate stops at or before its last try) */
    int64_t modelled;       /* requests with tries the record never made, drawn from its other requests, or with
                               hedges (whose answers the record lacks) */
    int64_t unmodelled;     /* requests whose needed tries no pool could give (rf_replay_gap): their remaining tries are
                               not predicted, and they end as recorded */
    int64_t modelled_tries; /* tries drawn */
    int64_t assumed_timeouts; /* recorded tries that timed out at a per-try timeout shorter than the candidate's: the
                                 record cannot say when the upstream would have answered, so they are assumed to time
                                 out again, at the candidate's (their requests count as modelled) */
    int64_t timeouts_cut;     /* recorded tries that ran longer than the candidate's per-try timeout: a TIMEOUT at it */
    int64_t deadline_cut; /* requests the candidate's deadline (or a wait beyond it) stopped before the record did */
    int64_t throttled;    /* requests the candidate's retry budget stopped (retry-throttled) */
    int64_t sooner;       /* retries the candidate sends sooner than the record did (the upstream's answer to
                             them is assumed unchanged) */
    int64_t overlapping;  /* requests that started before an earlier-recorded one ended: the retry budget sees
                             requests in the order they were recorded, not their tries interleaved */
    /* What older lines (without the replay facts of retryfreeze/ledger.h) could not support: */
    int64_t older_records;  /* requests with tries but no replay facts */
    int64_t older_timeouts; /* their TIMEOUT tries: the per-try timeout they ran under taken as their duration */
    int64_t older_waits;    /* their tries on a candidate route that reads a wait header other than the one recorded:
                               the response's other wait headers are unknown, taken as absent */
    int64_t older_dates;    /* their tries whose wait header is a date (no Date recorded): read against the try's end */
    int64_t older_tls;      /* their TLS_FAILURE tries (whether the request left is unknown): taken as sent */
    /* Hedging (the candidate's hedging: attempts started beside one in flight, rf_hedge_decide). A hedge's own answer
     * is not in the record: the prediction takes the worst case for load (a hedge is an attempt the upstream sees,
     * cancelled when the request ends, never its answer); the best case takes it to answer as the fastest success
     * recorded on its route so far, and win when that comes before the attempt it hedges. */
    int64_t hedged_requests;  /* requests the candidate hedges (rf_policy_hedging), whether a hedge started or not */
    int64_t hedge_keyless;    /* requests on a hedging route not hedged: their method needs an idempotency key */
    int64_t hedges_best;      /* hedges in the best case (the prediction's hedges are the worst case's) */
    int64_t hedge_wins_best;  /* requests a hedge won in the best case (the prediction's: none) */
    int64_t attempts_best;    /* attempts the upstream sees in the best case, hedges included */
    int64_t hedges_unbounded; /* hedged requests whose route had no recorded success yet: best case taken as worst */
    /* Beyond the record (rf_replay_beyond): tries at an attempt its requests with the same failure before did not
     * reach min_samples times, drawn as the deepest attempt they did; the interval spans their failing and
     * succeeding. */
    int64_t beyond_requests; /* requests with such a try */
    int64_t beyond_tries;    /* such tries drawn (by the prediction) */
    bool budget;             /* the candidate has a retryBudget */
    uint32_t min_samples, replicates;
    uint64_t seed;
    bool finished; /* rf_replay_finish ran */
} rf_replay_info;

/* A gap: a failure class after which the candidate needs tries on a route whose record holds fewer than min_samples
 * of them. Strings are the replay's or the candidate's, valid until rf_replay_free. */
typedef struct rf_replay_gap {
    const char *route;      /* the candidate's endpoint */
    const char *class_name; /* the failure class the tries follow; "(first try)" for a request the record never sent */
    int64_t samples;        /* the recorded tries after it on that route (when last needed) */
    int64_t tries;          /* the tries drawn for it (or, with no fallback, that could not be) */
    /* What they were drawn from instead: "any failure" (the route's tries after any failure class), "first tries" (the
     * route's first tries), or NULL: nothing (those requests are unmodelled). */
    const char *fallback;
} rf_replay_gap;

/* Tries beyond the record: at an attempt on a route after a failure class that the record's requests reached fewer
 * than min_samples times. The prediction draws them as the deepest attempt they did reach (drawn_as), which the record
 * cannot confirm, so the interval (rf_replay_interval.beyond) spans them failing as the try before did for any number
 * of them and then succeeding, and all failing. Strings as rf_replay_gap's. */
typedef struct rf_replay_beyond {
    const char *route;      /* the candidate's endpoint */
    const char *class_name; /* the failure class of the try before */
    int attempt;            /* the attempt number of the tries (2..) */
    int64_t samples;        /* the recorded tries at that attempt after that class (fewer than min_samples) */
    int drawn_as;           /* the attempt whose recorded tries stood in (1: the route's first tries) */
    const char *fallback;   /* their class source, as rf_replay_gap's: NULL (the class's own), "any failure", "first
                               tries" */
    int64_t tries;          /* the tries drawn so */
} rf_replay_beyond;

/* A lock the recorded lines name, and how many requests ran under it. */
typedef struct rf_replay_lock {
    const char *digest; /* the line's policy field ("" for seed-harness lines) */
    int64_t requests;
} rf_replay_lock;

/* The 95% interval of a scope's predicted ratios: the prediction ± 1.96 standard deviations of the replicates (each
 * redraws every modelled try, from a bootstrap resample of its pool), widened, when the scope holds tries beyond the
 * record (rf_replay_beyond), to its figures in every case of them: the first m failing as the try before did and the
 * next succeeding (each m, the same for every request), and all failing; clamped to the ratio's range. Without modelled
 * requests in the scope, lo = hi = the prediction. */
#define RF_X_INTERVAL(name, num, den) double name##_lo, name##_hi;
typedef struct rf_replay_interval {
    bool modelled;        /* the scope holds modelled requests */
    bool beyond;          /* the scope holds tries beyond the record: the interval spans their failing and succeeding */
    bool hedges_modelled; /* the scope holds hedges: hedges_per_request and hedge_win_rate span the best case (lo
                             hedges, hi wins) and the prediction, the worst (hi hedges, no win) */
    RF_TALLY_RATIOS(RF_X_INTERVAL)
} rf_replay_interval;
#undef RF_X_INTERVAL

typedef struct rf_replay rf_replay;

/*
 * Makes a replay of records under candidate (opts NULL: zeroed options). RF_OK: *out is the caller's, freed with
 * rf_replay_free. RF_EINVAL (err->path the option: "candidate", "group", "min_samples", "replicates", "pending"):
 * an option out of its range. RF_ENOMEM.
 */
RF_API rf_status rf_replay_new(const rf_policy *candidate, const rf_replay_options *opts, rf_replay **out,
                               rf_error *err);

/* Frees the replay, its tallies and pools; NULL is a no-op. */
RF_API void rf_replay_free(rf_replay *r);

/*
 * Replays one record (a ledger line; its host the line's): counted as recorded, and as predicted once decided
 * (a request whose tries must be drawn waits until the queue is full or rf_replay_finish). The record and its
 * strings are borrowed for the call. RF_EINVAL: NULL r or rec, a string the tally reads missing (err->path names it),
 * or after rf_replay_finish. RF_ENOMEM: the replay is incomplete; discard it.
 */
RF_API rf_status rf_replay_add(rf_replay *r, const rf_ledger_record *rec, rf_error *err);

/*
 * Streams the ledger at path and replays each record, as rf_ledger_tally_read counts one: a torn line is counted in
 * *file and skipped; a corrupt line stops the read with RF_EINVAL (err->line its number) unless skip_corrupt; other
 * errors are the reader's (RF_EINVAL, RF_EIO, RF_ENOMEM naming the file). file may be NULL. After an error, discard
 * the replay. Memory: the reader's window, whatever the file's length.
 */
RF_API rf_status rf_replay_read(rf_replay *r, const char *path, bool skip_corrupt, rf_tally_file *file, rf_error *err);

/* Draws the tries of every request still waiting, and ends feeding (rf_replay_add then refuses). RF_ENOMEM. A second
 * call does nothing. */
RF_API rf_status rf_replay_finish(rf_replay *r, rf_error *err);

/* The tally of the records as recorded (what `retryfreeze stats` counts of the same lines), and of the requests as
 * predicted (one per record, its route the candidate's endpoint, "" for no route; seed-harness records left out).
 * Owned by the replay. */
RF_API const rf_ledger_tally *rf_replay_recorded(const rf_replay *r);
RF_API const rf_ledger_tally *rf_replay_predicted(const rf_replay *r);

/* What the replay found so far, into *out. */
RF_API void rf_replay_summary(const rf_replay *r, rf_replay_info *out);

/* The interval of the predicted ratios of the whole (scope NULL) or of one named scope of rf_replay_predicted (a
 * route or host), into *out; false when no such scope was predicted. Complete after rf_replay_finish. */
RF_API bool rf_replay_interval_of(const rf_replay *r, const char *scope, rf_replay_interval *out);

/* The gaps (rf_replay_gap), in the order first met. */
RF_API size_t rf_replay_gap_count(const rf_replay *r);
RF_API bool rf_replay_gap_at(const rf_replay *r, size_t i, rf_replay_gap *out);

/* The tries beyond the record (rf_replay_beyond), by route, class and attempt, in the order first met. */
RF_API size_t rf_replay_beyond_count(const rf_replay *r);
RF_API bool rf_replay_beyond_at(const rf_replay *r, size_t i, rf_replay_beyond *out);

/* The locks the recorded lines name, in the order first met. */
RF_API size_t rf_replay_lock_count(const rf_replay *r);
RF_API bool rf_replay_lock_at(const rf_replay *r, size_t i, rf_replay_lock *out);

#ifdef __cplusplus
}
#endif
#endif
