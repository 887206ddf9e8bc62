/*
 * core.ledger_tally(path, skip_corrupt[, timeline[, after_line[, by]]]) → scopes, info[, buckets]: the per-route
 * counters of retryfreeze.ledger_stats (per host with by = "host": the ledger's "host" field, "" for lines without
 * one), gathered in C so that a large ledger costs no Lua table per record. It only counts;
 * the statistics (ratios, percentiles, merging) stay in lua/retryfreeze/ledger_stats.lua, whose histogram it
 * fills (same buckets).
 * scopes = {[route] = {requests, successes, retried_successes, attempts, success_attempts, retries,
 *           elapsed_sum, elapsed_min, elapsed_max, outcomes = {[outcome] = {[reason] = n}},
 *           retried_classes = {[class] = n}, hist = {[bucket + 1] = n},
 *           by_attempts = {[attempts + 1] = n} (attempts 0..16), retry_after = {[use] = n} (see ra_use),
 *           elapsed_le = {[i] = n}: requests with elapsed_ms in (LE_MS[i-2], LE_MS[i-1]], the last slot above
 *           the last bound (RF_TALLY_LE_MS below; ledger_stats.lua's le_ms list must match it)}}
 * info = {lines = n, torn = false|first torn line, torn_lines = n (torn lines are skipped), corrupt = n,
 *         ts_min = ms|nil, ts_max = ms|nil (the records' ts range)}.
 * timeline (optional) = {origin_ms = integer, bucket_ms = integer > 0, buckets = 1..1024}: also counts every
 * record, whatever its route, into the time bucket (ts_ms − origin_ms) // bucket_ms (clamped to the first and
 * last), returned as buckets = {scope…} (one scope per bucket, in time order; route-independent). Seed-harness
 * lines (RF_LEDGER_HARNESS_ROUTE) carry no ts and go in no bucket.
 * Raises "path:line: corrupt ledger line: …" unless skip_corrupt, or "cannot open/read ledger …". Memory is
 * bounded by the number of distinct routes, outcome and reason pairs and classes (and the timeline's buckets),
 * never by the ledger's length.
 * after_line (default 0): lines 1..after_line are read but neither counted nor judged (demo's stats and the
 * --report of soak and demo count only the lines their run appended).
 * rfl_appended_*: the same counters kept while a ledger appends (an rf_ledger_observe observer), for soak: its
 * run's statistics without reading the ledger back. What the observer is given is what a reader of the line gets
 * back (rf_ledger_observer), so the counts equal those of ledger_tally over the lines the run appended.
 */
#define _POSIX_C_SOURCE 200809L
#include "lua_retryfreeze.h"

#include "retryfreeze/retry_after.h"
#include "retryfreeze/vocabulary.h"

#include <stdlib.h>
#include <string.h>

#define BUCKETS 3072 /* ledger_stats.lua: 128 exact buckets, then 64 per power of two up to 2^53 */
#define MAX_TIMELINE 1024
#define TS_LIMIT ((int64_t)253402300799999) /* the ledger's largest ts_ms (9999-12-31T23:59:59.999Z) */
/* The OpenMetrics histogram's upper bounds (le) in ms: Prometheus' default buckets (5 ms .. 10 s) and two more,
 * since a retried request with backoff easily takes longer than 10 s. Counted exactly, unlike the percentiles. */
static const int64_t LE_MS[] = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000};
#define N_LE (sizeof LE_MS / sizeof LE_MS[0])

typedef struct named_count {
    char *a, *b; /* outcome and reason, or class and NULL */
    int64_t n;
} named_count;

typedef struct scope {
    char *route;
    int64_t requests, successes, retried_successes, attempts, success_attempts, retries;
    int64_t elapsed_sum, elapsed_min, elapsed_max;
    named_count *pairs, *classes;
    size_t n_pairs, n_classes;
    int64_t by_attempts[RF_LEDGER_MAX_TRIES + 1];
    int64_t retry_after[RF_RA_USE_COUNT];
    int64_t elapsed_le[N_LE + 1];
    int64_t hist[BUCKETS];
} scope;

typedef struct tally {
    bool by_host;  /* scopes per host (the ledger's "host" field) instead of per route */
    bool snapshot; /* a copy of another tally's arrays (rfl_appended_push): its names are the other's, not freed */
    scope *scopes;
    size_t n_scopes;
    scope *timeline; /* NULL, or n_timeline scopes (route unused) */
    size_t n_timeline;
    int64_t origin_ms, bucket_ms;
    rf_ledger_reader *reader;
} tally;

/* Same as M.bucket in ledger_stats.lua. */
static int bucket(int64_t v) {
    if (v < 128) return v < 0 ? 0 : (int)v;
    int e = 7;
    for (int64_t t = v >> 8; t > 0; t >>= 1) e++;
    int b = 128 + (e - 7) * 64 + (int)(v >> (e - 6)) - 64;
    return b < BUCKETS ? b : BUCKETS - 1;
}

static void free_counts(named_count *c, size_t n, bool names) {
    for (size_t i = 0; names && i < n; i++) {
        free(c[i].a);
        free(c[i].b);
    }
    free(c);
}

/* Frees the n scopes at s, with their names unless they are another tally's (names false). */
static void free_scopes(scope *s, size_t n, bool names) {
    for (size_t i = 0; i < n; i++) {
        if (names) free(s[i].route);
        free_counts(s[i].pairs, s[i].n_pairs, names);
        free_counts(s[i].classes, s[i].n_classes, names);
    }
    free(s);
}

static int l_tally_gc(lua_State *L) {
    tally *t = rfl_checkobject(L, 1, RFL_TALLY);
    free_scopes(t->scopes, t->n_scopes, !t->snapshot);
    t->scopes = NULL;
    t->n_scopes = 0;
    free_scopes(t->timeline, t->n_timeline, !t->snapshot);
    t->timeline = NULL;
    t->n_timeline = 0;
    rf_ledger_reader_close(t->reader);
    t->reader = NULL;
    return 0;
}

/* Adds 1 to the count named (a, b) in *list (linear: there are few distinct names); false when memory ran out
 * (nothing counted). Never raises: the running tally calls it from inside rf_ledger_append. */
static bool bump(named_count **list, size_t *n, const char *a, const char *b) {
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*list)[i].a, a) == 0 && (b == NULL || strcmp((*list)[i].b, b) == 0)) {
            (*list)[i].n++;
            return true;
        }
    char *da = strdup(a), *db = b ? strdup(b) : NULL;
    named_count *grown = da && (db || !b) ? realloc(*list, (*n + 1) * sizeof **list) : NULL;
    if (grown == NULL) {
        free(da);
        free(db);
        return false;
    }
    *list = grown;
    grown[(*n)++] = (named_count){.a = da, .b = db, .n = 1};
    return true;
}

/* A scope's start state: zero counts, min and max ready for the first value. */
static void scope_init(scope *s) {
    memset(s, 0, sizeof *s);
    s->elapsed_min = INT64_MAX;
    s->elapsed_max = INT64_MIN;
}

/* The scope of route (made on first use), or NULL when memory ran out. Never raises (see bump). */
static scope *scope_for(tally *t, const char *route) {
    for (size_t i = 0; i < t->n_scopes; i++)
        if (strcmp(t->scopes[i].route, route) == 0) return &t->scopes[i];
    char *name = strdup(route);
    scope *grown = name ? realloc(t->scopes, (t->n_scopes + 1) * sizeof *grown) : NULL;
    if (grown == NULL) {
        free(name);
        return NULL;
    }
    t->scopes = grown;
    scope *s = &grown[t->n_scopes++];
    scope_init(s);
    s->route = name;
    return s;
}

/* The integer value of x-ratelimit-reset as a Unix time in ms (its "timestamp" form), or false. */
static bool reset_epoch_ms(const char *v, int64_t *out) {
    while (*v == ' ' || *v == '\t') v++;
    int64_t n = 0;
    const char *p = v;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (n > 253402300799) return false; /* past 9999-12-31 */
        n = n * 10 + (*p - '0');
    }
    while (*p == ' ' || *p == '\t') p++;
    if (p == v || *p != '\0') return false;
    *out = n * 1000;
    return true;
}

/*
 * What became of try i's wait header (docs/reasons.md "Retry-After in a verdict"), told from the ledger alone,
 * or -1 when the try had none. The ledger keeps the raw value and which header it came from
 * (retry_after_header: retry-after when absent), the verdict's reason and the next try's delay, not the
 * verdict's retry_after, so, with the value read by that header's own rule (rf_wait_header_parse):
 *   - an invalid value (for Retry-After, RFC 9110 §10.2.3: neither delay-seconds nor an HTTP-date):
 *     ignored-invalid;
 *   - reason retry-after-exceeds-budget or server-pushback (the value stopped the request): honored;
 *   - reason pinned-status (retried): honored when the next try waited exactly the delay, or, for a date
 *     (an HTTP-date, an x-ratelimit-reset timestamp), started within 1 s of it (the try ends are rebuilt
 *     from ts and the durations; such dates have 1 s resolution); else not-honored;
 *   - any other reason (success, not retryable, deadline, …): the request stopped: not-needed.
 * The engine calls a valid value "honored" even when a later check (deadline, throttling) stops the request;
 * the ledger cannot tell whether the route honours the header then, so such tries count as not-needed.
 */
static int ra_use(const rf_ledger_record *rec, size_t i) {
    const rf_ledger_try *t = &rec->tries[i];
    if (t->retry_after == NULL) return -1;
    rf_wait_header h = RF_WAIT_RETRY_AFTER;
    if (t->retry_after_header != NULL &&
        rf_wait_header_parse_name(t->retry_after_header, strlen(t->retry_after_header), &h) != 0)
        return -1; /* a header this build does not know: not judged */
    size_t len = strlen(t->retry_after);
    int64_t delay = 0;
    /* now_ms 0: a valid date comes back as RF_RA_NO_CLOCK, which tells it from an invalid value. */
    rf_retry_after_status st = rf_wait_header_parse(h, t->retry_after, len, 0, NULL, 0, &delay);
    if (st == RF_RA_ABSENT) return -1;
    if (st == RF_RA_INVALID) return RF_RA_USE_IGNORED;
    if (strcmp(t->reason, rf_reason_name(RF_REASON_RETRY_AFTER_EXCEEDS_BUDGET)) == 0 ||
        strcmp(t->reason, rf_reason_name(RF_REASON_SERVER_PUSHBACK)) == 0)
        return RF_RA_USE_HONORED;
    if (strcmp(t->reason, rf_reason_name(RF_REASON_PINNED_STATUS)) != 0 || i + 1 >= rec->n_tries)
        return RF_RA_USE_NOT_NEEDED;
    const rf_ledger_try *next = &rec->tries[i + 1];
    if (st == RF_RA_OK) return next->delay_ms == delay ? RF_RA_USE_HONORED : RF_RA_USE_NOT_HONORED;
    if (st != RF_RA_NO_CLOCK) return RF_RA_USE_NOT_HONORED; /* too long or a stop, yet retried: not used */
    int64_t date_ms = 0;
    bool dated = h == RF_WAIT_RETRY_AFTER ? rf_http_date_parse(t->retry_after, len, rec->ts_ms, &date_ms)
                                          : reset_epoch_ms(t->retry_after, &date_ms);
    if (!dated) return RF_RA_USE_NOT_HONORED;
    int64_t next_start = rec->ts_ms; /* the record ends when its last try does */
    for (size_t j = rec->n_tries; j-- > i + 1;) {
        next_start -= rec->tries[j].elapsed_ms;
        if (j > i + 1) next_start -= rec->tries[j].delay_ms;
    }
    int64_t off = next_start - date_ms;
    return (off >= -1000 && off <= 1000) ? RF_RA_USE_HONORED : RF_RA_USE_NOT_HONORED;
}

/* Counts rec into s; false when memory ran out (the counts are then incomplete). Never raises (see bump). */
static bool add_to(scope *s, const rf_ledger_record *rec) {
    bool ok = true;
    s->requests++;
    s->attempts += rec->attempts;
    if (rec->attempts > 1) {
        s->retries += rec->attempts - 1;
        for (size_t i = 0; i < rec->n_tries; i++)
            if (strcmp(rec->tries[i].reason, "pinned-status") == 0)
                ok = bump(&s->classes, &s->n_classes, rec->tries[i].class_name, NULL) && ok;
    }
    if (rec->ok) {
        s->successes++;
        s->success_attempts += rec->attempts;
        if (rec->attempts > 1) s->retried_successes++;
    }
    ok = bump(&s->pairs, &s->n_pairs, rec->outcome, rec->reason) && ok;
    s->elapsed_sum += rec->elapsed_ms;
    if (rec->elapsed_ms < s->elapsed_min) s->elapsed_min = rec->elapsed_ms;
    if (rec->elapsed_ms > s->elapsed_max) s->elapsed_max = rec->elapsed_ms;
    s->hist[bucket(rec->elapsed_ms)]++;
    s->by_attempts[rec->attempts < 0 ? 0 : rec->attempts > RF_LEDGER_MAX_TRIES ? RF_LEDGER_MAX_TRIES : rec->attempts]++;
    size_t le = 0;
    while (le < N_LE && rec->elapsed_ms > LE_MS[le]) le++;
    s->elapsed_le[le]++;
    for (size_t i = 0; i < rec->n_tries; i++) {
        int use = ra_use(rec, i);
        if (use >= 0) s->retry_after[use]++;
    }
    return ok;
}

/* Counts rec (its line carries host: NULL for none) into its route's (or host's) scope and its time bucket;
 * false when memory ran out. Never raises (see bump). */
static bool add(tally *t, const rf_ledger_record *rec, const char *host) {
    scope *s = scope_for(t, t->by_host ? (host ? host : "") : rec->route);
    if (s == NULL || !add_to(s, rec)) return false;
    if (t->timeline == NULL || strcmp(rec->route, RF_LEDGER_HARNESS_ROUTE) == 0) return true; /* no ts: no bucket */
    int64_t off = rec->ts_ms - t->origin_ms;
    int64_t idx = off < 0 ? 0 : off / t->bucket_ms;
    if (idx >= (int64_t)t->n_timeline) idx = (int64_t)t->n_timeline - 1;
    return add_to(&t->timeline[idx], rec);
}

/* Pushes {[i] = counts[i - 1]} for the n counts (every slot, zeros included). */
static void push_counts(lua_State *L, const int64_t *counts, size_t n) {
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushinteger(L, counts[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

static void push_scope(lua_State *L, const scope *s) {
    luaL_checkstack(L, 6, "ledger stats"); /* a scope, a nested table, its entry, a key and a value */
    lua_createtable(L, 0, 15);
    rfl_set_int(L, "requests", s->requests);
    rfl_set_int(L, "successes", s->successes);
    rfl_set_int(L, "retried_successes", s->retried_successes);
    rfl_set_int(L, "attempts", s->attempts);
    rfl_set_int(L, "success_attempts", s->success_attempts);
    rfl_set_int(L, "retries", s->retries);
    rfl_set_int(L, "elapsed_sum", s->elapsed_sum);
    rfl_set_int(L, "elapsed_min", s->elapsed_min);
    rfl_set_int(L, "elapsed_max", s->elapsed_max);
    lua_newtable(L);
    for (size_t i = 0; i < s->n_pairs; i++) {
        if (lua_getfield(L, -1, s->pairs[i].a) != LUA_TTABLE) {
            lua_pop(L, 1);
            lua_newtable(L);
            lua_pushvalue(L, -1);
            lua_setfield(L, -3, s->pairs[i].a);
        }
        rfl_set_int(L, s->pairs[i].b, s->pairs[i].n);
        lua_pop(L, 1);
    }
    lua_setfield(L, -2, "outcomes");
    lua_newtable(L);
    for (size_t i = 0; i < s->n_classes; i++) rfl_set_int(L, s->classes[i].a, s->classes[i].n);
    lua_setfield(L, -2, "retried_classes");
    lua_newtable(L);
    for (int b = 0; b < BUCKETS; b++) {
        if (s->hist[b] == 0) continue;
        lua_pushinteger(L, s->hist[b]);
        lua_rawseti(L, -2, b + 1);
    }
    lua_setfield(L, -2, "hist");
    push_counts(L, s->by_attempts, RF_LEDGER_MAX_TRIES + 1);
    lua_setfield(L, -2, "by_attempts");
    push_counts(L, s->elapsed_le, N_LE + 1);
    lua_setfield(L, -2, "elapsed_le");
    lua_createtable(L, 0, RF_RA_USE_COUNT);
    for (int u = 0; u < RF_RA_USE_COUNT; u++)
        if (s->retry_after[u] > 0) rfl_set_int(L, rf_retry_after_use_name((rf_retry_after_use)u), s->retry_after[u]);
    lua_setfield(L, -2, "retry_after");
}

/* Integer field k of the table at idx, in [lo, hi], or raises naming it. */
static int64_t opt_field(lua_State *L, int idx, const char *k, int64_t lo, int64_t hi) {
    lua_getfield(L, idx, k);
    lua_Integer v = 0;
    if (!rfl_tointeger_exact(L, -1, &v) || v < lo || v > hi) {
        const char *los = rfl_pushint(L, (lua_Integer)lo), *his = rfl_pushint(L, (lua_Integer)hi);
        rfl_error(L, "bad argument #3 to 'ledger_tally' (timeline.%s must be an integer in %s..%s)", k, los, his);
    }
    lua_pop(L, 1);
    return v;
}

/* Pushes scopes, info (the shapes above) for t's scopes and the line counts. */
static void push_tally(lua_State *L, const tally *t, int64_t lines, int64_t ts_min, int64_t ts_max, int64_t torn,
                       int64_t torn_lines, int64_t corrupt) {
    lua_createtable(L, 0, (int)t->n_scopes);
    for (size_t i = 0; i < t->n_scopes; i++) {
        push_scope(L, &t->scopes[i]);
        lua_setfield(L, -2, t->scopes[i].route);
    }
    lua_createtable(L, 0, 6);
    rfl_set_int(L, "lines", lines);
    if (ts_min <= ts_max) {
        rfl_set_int(L, "ts_min", ts_min);
        rfl_set_int(L, "ts_max", ts_max);
    }
    if (torn)
        rfl_set_int(L, "torn", torn);
    else {
        lua_pushboolean(L, 0);
        lua_setfield(L, -2, "torn");
    }
    rfl_set_int(L, "torn_lines", torn_lines);
    rfl_set_int(L, "corrupt", corrupt);
}

static int l_ledger_tally(lua_State *L) {
    bool nul;
    const char *path = rfl_check_path(L, 1, &nul);
    if (nul) return rfl_error(L, "cannot open ledger %s: the path contains a NUL byte", path);
    bool skip = lua_toboolean(L, 2);
    int64_t origin_ms = 0, bucket_ms = 1;
    size_t n = 0;
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        origin_ms = opt_field(L, 3, "origin_ms", -TS_LIMIT, TS_LIMIT);
        bucket_ms = opt_field(L, 3, "bucket_ms", 1, TS_LIMIT);
        n = (size_t)opt_field(L, 3, "buckets", 1, MAX_TIMELINE);
    }
    lua_Integer after_line = luaL_optinteger(L, 4, 0);
    static const char *const groupings[] = {"route", "host", NULL};
    bool by_host = luaL_checkoption(L, 5, "route", groupings) == 1;
    lua_settop(L, 2);
    tally *t = rfl_newobject(L, RFL_TALLY, sizeof *t);
    t->by_host = by_host;
    int ud = lua_gettop(L); /* owns the counters: freed by __gc if anything below raises */
    if (n > 0) {
        t->origin_ms = origin_ms;
        t->bucket_ms = bucket_ms;
        t->timeline = malloc(n * sizeof *t->timeline);
        if (t->timeline == NULL) return rfl_error(L, "out of memory tallying a ledger");
        for (size_t i = 0; i < n; i++) scope_init(&t->timeline[i]);
        t->n_timeline = n;
    }
    rf_error err;
    int64_t ts_min = INT64_MAX, ts_max = INT64_MIN;
    if (rf_ledger_reader_open(path, &t->reader, &err) != RF_OK) return rfl_error(L, "%s", err.message);
    int64_t corrupt = 0, torn = 0, torn_lines = 0;
    for (;;) {
        rf_ledger_record rec;
        rf_ledger_read_status st = rf_ledger_reader_next(t->reader, &rec, &err);
        if ((st == RF_LEDGER_RECORD || st == RF_LEDGER_CORRUPT) && rf_ledger_reader_line(t->reader) <= after_line) {
            continue;
        } else if (st == RF_LEDGER_RECORD) {
            if (!add(t, &rec, rec.host)) return rfl_error(L, "out of memory tallying a ledger");
            bool timed = strcmp(rec.route, RF_LEDGER_HARNESS_ROUTE) != 0; /* seed-harness lines carry no ts */
            if (timed && rec.ts_ms < ts_min) ts_min = rec.ts_ms;
            if (timed && rec.ts_ms > ts_max) ts_max = rec.ts_ms;
        } else if (st == RF_LEDGER_CORRUPT) {
            if (!skip) return rfl_error(L, "%s:%d: corrupt ledger line: %s", path, err.line, err.message);
            corrupt++;
        } else if (st == RF_LEDGER_TORN) { /* a write cut short: counted, and the reader reads on */
            if (torn == 0) torn = err.line;
            torn_lines++;
        } else if (st == RF_LEDGER_ERROR) {
            return rfl_error(L, "%s: cannot read ledger: %s", path, err.message);
        } else {
            break;
        }
    }
    push_tally(L, t, rf_ledger_reader_line(t->reader), ts_min, ts_max, torn, torn_lines, corrupt);
    int results = 2;
    if (t->timeline != NULL) {
        lua_createtable(L, (int)t->n_timeline, 0);
        for (size_t i = 0; i < t->n_timeline; i++) {
            push_scope(L, &t->timeline[i]);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        results = 3;
    }
    lua_pushcfunction(L, l_tally_gc); /* free now rather than at the next collection */
    lua_pushvalue(L, ud);
    lua_call(L, 1, 0);
    return results;
}

/* ---- the running tally of one ledger's appends (ledger:_tally_appends) ------------------------------- */

struct rfl_appended {
    tally t;                /* by route; no timeline, no reader */
    int64_t lines;          /* records counted: one line each */
    int64_t ts_min, ts_max; /* their ts range (as read back: seed-harness lines excluded) */
    bool failed;            /* memory ran out once: the counts are incomplete, and reading them raises */
};

rfl_appended *rfl_appended_new(void) {
    rfl_appended *a = calloc(1, sizeof *a);
    if (a == NULL) return NULL;
    a->ts_min = INT64_MAX;
    a->ts_max = INT64_MIN;
    return a;
}

void rfl_appended_observe(void *ud, const rf_ledger_record *rec, const char *host) {
    rfl_appended *a = ud;
    if (a->failed) return;
    if (!add(&a->t, rec, host)) {
        a->failed = true;
        return;
    }
    a->lines++;
    if (strcmp(rec->route, RF_LEDGER_HARNESS_ROUTE) != 0) { /* as l_ledger_tally: such lines carry no ts */
        if (rec->ts_ms < a->ts_min) a->ts_min = rec->ts_ms;
        if (rec->ts_ms > a->ts_max) a->ts_max = rec->ts_ms;
    }
}

/* Copies the n named counts at from (the names shared), or NULL when memory runs out (n > 0). */
static named_count *copy_counts(const named_count *from, size_t n) {
    named_count *c = malloc((n ? n : 1) * sizeof *c);
    if (c != NULL && n > 0) memcpy(c, from, n * sizeof *c);
    return c;
}

/* Pushes the counts of a from a snapshot of its arrays (a tally box, popped before returning): pushing allocates,
 * and a finalizer that runs then may make a client append to the ledger, whose observer grows a's arrays (realloc)
 * under the push. The names are a's (never freed while the ledger lives: the call holds it). */
void rfl_appended_push(lua_State *L, const rfl_appended *a) {
    if (a->failed) rfl_error(L, "out of memory tallying the ledger's appends: the counts are incomplete");
    tally *t = rfl_newobject(L, RFL_TALLY, sizeof *t);
    int box = lua_gettop(L);
    t->snapshot = true;
    t->scopes = calloc(a->t.n_scopes ? a->t.n_scopes : 1, sizeof *t->scopes);
    if (t->scopes == NULL) rfl_error(L, "out of memory tallying the ledger's appends");
    for (size_t i = 0; i < a->t.n_scopes; i++, t->n_scopes++) {
        scope *s = &t->scopes[i];
        *s = a->t.scopes[i];
        s->pairs = copy_counts(a->t.scopes[i].pairs, s->n_pairs);
        s->classes = copy_counts(a->t.scopes[i].classes, s->n_classes);
        if (s->pairs == NULL || s->classes == NULL) {
            t->n_scopes++; /* freed with the others by __gc */
            rfl_error(L, "out of memory tallying the ledger's appends");
        }
    }
    push_tally(L, t, a->lines, a->ts_min, a->ts_max, 0, 0, 0);
    lua_remove(L, box);
}

void rfl_appended_free(rfl_appended *a) {
    if (a == NULL) return;
    free_scopes(a->t.scopes, a->t.n_scopes, true);
    free(a);
}

void rfl_open_ledger_tally(lua_State *L) {
    rfl_new_metatable(L, RFL_TALLY, NULL);
    lua_pushcfunction(L, l_tally_gc);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);
    lua_pushcfunction(L, l_ledger_tally);
    lua_setfield(L, -2, "ledger_tally");
    push_counts(L, LE_MS, N_LE); /* core.ledger_le_ms: the bounds of elapsed_le, for ledger_stats.lua */
    lua_setfield(L, -2, "ledger_le_ms");
    lua_pushliteral(L, RF_LEDGER_HARNESS_ROUTE); /* core.LEDGER_HARNESS_ROUTE: the route of lines without a ts */
    lua_setfield(L, -2, "LEDGER_HARNESS_ROUTE");
}
