/*
 * Private to the replay (core/src/replay/): the walk of one request under the candidate (replay_walk.c), the pools of
 * recorded tries the walk draws from (replay_model.c), the replicates' counts behind the interval
 * (replay_interval.c), and the object that feeds them (replay.c). Prefix rfi_replay_; never installed.
 */
#ifndef RETRYFREEZE_REPLAY_INTERNAL_H
#define RETRYFREEZE_REPLAY_INTERNAL_H

#include "retryfreeze/decide.h"
#include "retryfreeze/outcome.h"
#include "retryfreeze/replay.h"
#include "../engine/retry_budget_state.h"

#include <stdbool.h>
#include <stdint.h>

/* Failure classes as small numbers (pools are keyed by route and class): HTTP_<nnn> is nnn (100..599), a named class
 * RFI_REPLAY_NAMED + its RF_NAMED_CLASSES index; FIRST keys the first tries of a route, ANY its tries after any
 * failure, and UNKNOWN is a recorded class this build does not know (learned into ANY only). */
enum {
    RFI_REPLAY_FIRST = 0,
    RFI_REPLAY_ANY = 1,
    RFI_REPLAY_UNKNOWN = 2,
    RFI_REPLAY_NAMED = 600,
    RFI_REPLAY_CLASSES = RFI_REPLAY_NAMED + RF_NAMED_CLASS_COUNT
};

/* Attempt depths the pools tell apart (a try's depth: the attempts of its request before it; the first try's is 0):
 * as many as a request may make. */
#define RFI_REPLAY_DEPTHS RF_LEDGER_MAX_TRIES

/* The class number of a class token (RFI_REPLAY_UNKNOWN for anything else). */
int rfi_replay_class_id(const char *name);

/* A try as a walk takes it: the facts of a recorded try, or of one drawn from a pool. Strings are borrowed. */
typedef struct rfi_replay_facts {
    int status;
    rf_transport transport;
    bool not_sent;
    int grpc_status; /* the response's grpc-status 0..16 (0: absent or OK), from the try or its GRPC_* class */
    int64_t elapsed_ms;
    int64_t timeout_ms; /* the per-try timeout it ran with; 0: unknown (an older line) */
    int64_t wall_ms;    /* when it ended (Unix ms): "now" for a date-valued wait header */
    const char *wait[RF_WAIT_HEADER_COUNT];
    const char *date;
    uint8_t redirect; /* 0; RFI_REPLAY_FOLLOWED: the record followed this 3xx; RFI_REPLAY_TOO_MANY: it stopped it as
                         too many redirects */
    bool stopped_by_caller; /* the record's on_attempt hook stopped a retry after it */
    bool older;             /* from a line without replay facts */
} rfi_replay_facts;

enum { RFI_REPLAY_FOLLOWED = 1, RFI_REPLAY_TOO_MANY = 2 };

/* A predicted try, compact (a walk keeps up to RF_LEDGER_MAX_TRIES). */
typedef struct rfi_replay_try {
    int64_t elapsed_ms, delay_ms, timeout_ms;
    int64_t start_ms; /* when it started, after the request's first attempt */
    bool hedge;       /* started by the candidate's hedging delay beside the attempt in flight */
    uint16_t class_id;
    int16_t status;
    uint8_t reason;   /* rf_reason */
    int8_t ra_header; /* the rf_wait_header of its retry_after, -1: none */
    uint16_t ra_at;   /* 1 + the offset of its retry_after in the walk's text, 0: none */
} rfi_replay_try;

/* One request's replay under the candidate: its facts, its progress, and (unless light) its predicted tries. The
 * fields up to `n` are the state; a replicate copies only those (offsetof(rfi_replay_walk, n)). */
typedef struct rfi_replay_walk {
    /* the request */
    long route;
    const char *method, *path, *host;
    size_t method_len, path_len;
    bool has_key;
    int64_t start_wall_ms; /* when it started (the recorded ts − its elapsed_ms) */
    int64_t overhead_ms;   /* the recorded time between its tries beyond their durations and delays, per try */
    int rec_tries;         /* tries recorded */
    /* how the record ended (for a request whose tries cannot be drawn: it ends as recorded) */
    uint8_t rec_outcome, rec_reason;
    bool rec_ok;
    int rec_attempts, rec_status;
    int64_t rec_elapsed_ms;
    /* progress */
    int attempts;     /* the engine's attempts (followed redirects are part of theirs) */
    int requests;     /* tries sent */
    int hops;         /* redirects followed in the attempt in flight */
    bool in_hop;      /* the next try is a followed redirect's */
    int64_t clock_ms; /* the engine's elapsed_ms at the start of the next try */
    int64_t delay_ms; /* the wait before the next try */
    int64_t hop_timeout_ms;
    uint16_t prev_class; /* the class of the last try (RFI_REPLAY_FIRST before any) */
    int last_status;
    bool last_retryable; /* the last failure's class is retryable on the route (true before any failure) */
    bool done;
    uint8_t stop;  /* rf_reason, once done */
    bool modelled; /* a try was drawn or assumed */
    bool unmodelled;
    bool light;       /* a replicate's: no tries kept */
    int depth;        /* attempts answered (not a followed redirect's hop, not a hedge): the next try's depth */
    bool beyond;      /* a try was drawn at a depth the record holds too few of (rfi_replay_pools_draw) */
    int beyond_tries; /* such tries taken */
    /* the last try as decided (after the candidate's per-try timeout): a try beyond the record repeats it in the
     * worst case */
    int64_t last_elapsed_ms, last_wall_ms;
    uint8_t last_transport;
    bool last_not_sent;
    int64_t tokens_milli;             /* a waiting walk's retry budget, when it was put aside */
    rfi_budget_state window;          /* a waiting walk's ratio window, when it was put aside */
    rf_budget_request budget_request; /* its token for a ratio retry budget: the window counts the request once */
    rf_attempt_budget first; /* rf_budget before the first attempt (attempts 0, elapsed 0), asked once per request */
    /* hedging (rf_policy_hedging): hedges start while a try is in flight, every delay, as rf_hedge_decide allows */
    bool hedged;        /* the candidate hedges the request */
    bool hedge_stopped; /* a hedge was refused: no more start (as the client's) */
    int hedges;         /* hedges started */
    int64_t hedge_delay_ms;
    int64_t hedge_at;          /* the clock at which the next hedge may start */
    int64_t win_at;            /* best case: when its first hedge would answer, as the route's fastest success; -1 */
    bool unbounded;            /* a hedge started with no recorded success on its route: best case as the worst */
    bool best_taken, best_won; /* best case: its hedge won, after best_hedges hedges and best_requests tries */
    int best_hedges, best_requests;
    /* the predicted tries */
    size_t n;
    size_t text_used;
    rfi_replay_try tries[RF_LEDGER_MAX_TRIES];
    char text[1024]; /* their retry_after values */
} rfi_replay_walk;

/* ---- replay_walk.c: one request under the candidate, through the engine's calls ----------------------------- */

/* A candidate route as a walk reads it. */
typedef struct rfi_replay_route {
    const char *endpoint;
    bool reads[RF_WAIT_HEADER_COUNT]; /* the wait headers it reads (retryAfter.headers) */
    bool reads_beyond_retry_after;    /* one of them is not Retry-After */
} rfi_replay_route;

/* What a walk runs with. */
typedef struct rfi_replay_ctx {
    const rf_policy *p;
    const rfi_replay_route *routes; /* by candidate route index */
    rf_retry_budget *budget;        /* the candidate's retry budget, or NULL */
    rf_replay_info *info;      /* what the point's walks count (cut, assumed, older lines…); NULL for a replicate */
    const int64_t *fastest_ms; /* by candidate route: its fastest recorded success so far, -1 none */
} rfi_replay_ctx;

/* Starts w for rec on candidate route first->route (its strings borrowed from rec); first is rf_budget's answer
 * before its first attempt (the call that also routed it); its hedging is rf_policy_hedging's for c->p. */
void rfi_replay_walk_start(const rfi_replay_ctx *c, rfi_replay_walk *w, const rf_ledger_record *rec,
                           const rf_attempt_budget *first);

/* What w's request would have been in the best case of its hedges (a hedge answers as its route's fastest recorded
 * success; the first to answer before the attempt it hedges wins): its hedges, tries sent, and whether a hedge won.
 * Without a hedge, or for a request that could not be modelled, the prediction's own (no win). */
void rfi_replay_walk_best(const rfi_replay_walk *w, int *hedges, int *requests, bool *won);

/* The facts of recorded try i of rec, which ended at wall time end_wall_ms; older-line notes go to info (may be
 * NULL) as route (the candidate's) would need them. */
void rfi_replay_recorded_facts(const rf_ledger_record *rec, size_t i, int64_t end_wall_ms,
                               const rfi_replay_route *route, rf_replay_info *info, rfi_replay_facts *f);

/* One more try of w, whose facts (as recorded or drawn, before the candidate's per-try timeout) are f: rf_budget (or
 * a followed redirect's timeout), the timeout applied, rf_decide_on_route or rf_redirect_verdict, the verdict kept.
 * rng: the candidate's jitter. Returns whether the request goes on (false: w->done, or the budget refused). */
bool rfi_replay_walk_try(const rfi_replay_ctx *c, rfi_replay_walk *w, const rfi_replay_facts *f, rf_rng *rng);

/* Ends w before a try with reason (rf_budget's refusal, or a try no pool could give). */
void rfi_replay_walk_end(rfi_replay_walk *w, rf_reason reason);

/* The outcome w ended with (rf_outcome_of_stop; a request that could not be modelled: the record's). */
rf_outcome rfi_replay_walk_outcome(const rfi_replay_walk *w);

/* ---- replay_model.c: pools of recorded tries ---------------------------------------------------------------- */

typedef struct rfi_replay_pools rfi_replay_pools;

/* A try drawn from a pool, as facts (its strings the pool's). */
typedef struct rfi_replay_drawn {
    rfi_replay_facts facts;
    uint16_t class_id; /* the pool's class (for the gap bookkeeping) */
    int depth;         /* the pool's depth (0: the route's first tries) */
} rfi_replay_drawn;

rfi_replay_pools *rfi_replay_pools_new(uint64_t seed);
void rfi_replay_pools_free(rfi_replay_pools *p);
/* Offers f, a try on route at depth (the attempts of its request before it, 1..RFI_REPLAY_DEPTHS) after a failure
 * of class_id (RFI_REPLAY_FIRST: a first try, depth ignored), to its pool of that depth (and, after a failure, to the
 * route's ANY pool of that depth): a uniform reservoir of RF_REPLAY_POOL_SAMPLES. False when memory ran out. */
bool rfi_replay_pools_offer(rfi_replay_pools *p, long route, uint16_t class_id, int depth, const rfi_replay_facts *f);
/* The most tries one pool of (route, class_id) at a depth up to depth has seen (the gap bookkeeping). */
int64_t rfi_replay_pools_seen(const rfi_replay_pools *p, long route, uint16_t class_id, int depth);
/* Tries seen by the pool of (route, class_id) at depth exactly. */
int64_t rfi_replay_pools_seen_at(const rfi_replay_pools *p, long route, uint16_t class_id, int depth);
/*
 * A try for route at depth after a failure of class_id (RFI_REPLAY_FIRST: a first try), into *out: from the class's
 * pool of that depth, or of the deepest depth before it, that has seen min_samples; else the same from the route's
 * ANY pools; else its FIRST pool (*fallback names the class source used, NULL for its own; out->depth the depth drawn
 * from: below depth, the try is beyond what the record observed). False when none has (*fallback then NULL).
 * replicate < 0: drawn with rng from the pool as it is; else drawn from replicate's bootstrap resample of it.
 */
bool rfi_replay_pools_draw(const rfi_replay_pools *p, long route, uint16_t class_id, int depth, int64_t min_samples,
                           rf_rng *rng, int replicate, rfi_replay_drawn *out, const char **fallback);

/* ---- replay_interval.c: the replicates' counts -------------------------------------------------------------- */

/* The counts of a request the interval needs: requests, successes, terminal, retried_successes, attempts,
 * success_attempts, retries (RF_TALLY_COUNTS without failures, which follows). */
#define RFI_REPLAY_COUNTS 7
typedef struct rfi_replay_counts {
    int64_t n[RFI_REPLAY_COUNTS];
} rfi_replay_counts;

typedef struct rfi_replay_spread rfi_replay_spread;

rfi_replay_spread *rfi_replay_spread_new(uint32_t replicates);
void rfi_replay_spread_free(rfi_replay_spread *s);
/* Adds replicate k's counts minus the point's, for a request in scope name (NULL: the whole only). False when memory
 * ran out. */
bool rfi_replay_spread_add(rfi_replay_spread *s, const char *name, uint32_t k, const rfi_replay_counts *point,
                           const rfi_replay_counts *replicate);
/* Adds a request with hedges in scope name (NULL: the whole only): its best case's hedges and wins less the
 * prediction's (rfi_replay_walk_best). False when memory ran out. */
bool rfi_replay_spread_hedges(rfi_replay_spread *s, const char *name, int64_t hedges_delta, int64_t wins_delta);
/* The cases of a request's tries beyond the record the interval spans: case m, its first m such tries fail as the
 * try before did and the next succeeds; the last case it has, they all fail (at most one per try, and that). */
#define RFI_REPLAY_CASES (RF_LEDGER_MAX_TRIES + 1)
/* Adds a request with tries beyond the record (rfi_replay_walk.beyond) in scope name (NULL: the whole only): its
 * counts in cases[0..n) less the point's (a case past n: its last, every such try failing). False when memory ran
 * out. */
bool rfi_replay_spread_beyond(rfi_replay_spread *s, const char *name, const rfi_replay_counts *point,
                              const rfi_replay_counts *cases, int n);
/* The interval of scope name (NULL: the whole) whose predicted figures are f, into *out. */
void rfi_replay_spread_interval(const rfi_replay_spread *s, const char *name, const rf_tally_figures *f,
                                rf_replay_interval *out);

#endif
