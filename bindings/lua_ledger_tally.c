/*
 * Lua binding of the ledger's tally (retryfreeze/ledger_tally.h): the core counts and computes every figure; this
 * file marshals its scopes into the tables retryfreeze.ledger_stats returns (docs/evidence.md "Fields").
 *   core.ledger_tally([{by = "route"|"host", timeline = {origin_ms =, bucket_ms =, buckets =}}]) → tally
 *   tally:read(path [, skip_corrupt [, after_line]]) → {lines =, torn = false|first torn line, torn_lines =,
 *     corrupt =}; raises "path:line: corrupt ledger line: …" (unless skip_corrupt) or the file's error
 *     ("cannot open ledger …", "cannot read ledger …")
 *   tally:stats() → the whole input's scope with lines, torn_lines, corrupt_lines, ts_min_ms, ts_max_ms (absent
 *     without records) and by_route (or by_host) = {[name] = scope}
 *   tally:timeline() → {scope…}, one per time bucket in time order, each with start_ms
 *   core.ledger_bucket(ms) → histogram bucket; core.ledger_bucket_range(b) → lo, hi (ms); core.ledger_le_ms
 * A tally is an object of lua_object.h's rule 1 (its methods pinned: no hook or finalizer can feed it while a
 * method reads it) made by a rule-2 constructor; __gc frees it.
 */
#include "lua_retryfreeze.h"

#include "retryfreeze/ledger_tally.h"

#include <string.h>

#define RF_X_LE(ms) ms,
static const int64_t LE_MS[RF_TALLY_LE_COUNT] = {RF_TALLY_LE_MS(RF_X_LE)}; /* the bounds of elapsed_buckets */
#undef RF_X_LE

typedef struct ltally {
    rf_ledger_tally *t;
    bool by_host; /* grouped by host: stats() names its scopes by_host */
} ltally;

static void tally_release(lua_State *L, void *obj) {
    (void)L;
    ltally *lt = obj;
    rf_ledger_tally_free(lt->t);
    lt->t = NULL;
}

static int l_tally_gc(lua_State *L) {
    ltally *lt = rfl_checkobject(L, 1, RFL_TALLY);
    if (rfl_collectable(lt)) tally_release(L, lt);
    return 0;
}

/* ---- pushing scopes ---------------------------------------------------------------------------------- */

/* t[k] = t[k] + n for the table at idx (a fresh table of this file: raw access, no metamethod). */
static void add_count(lua_State *L, int idx, const char *k, int64_t n) {
    lua_pushstring(L, k);
    lua_pushvalue(L, -1);
    lua_rawget(L, idx);
    lua_Integer was = lua_tointeger(L, -1);
    lua_pop(L, 1);
    lua_pushinteger(L, (lua_Integer)(was + n));
    lua_rawset(L, idx);
}

/* Pushes the scope's table (docs/evidence.md "Fields"): the counts and ratios by their C names, elapsed_ms
 * {p50, p95, p99, min, max, mean} (empty without requests), by_outcome, by_reason ("outcome reason"), reasons,
 * retried_classes, by_attempts ({["n"] = requests}, those made), elapsed_buckets ({{le_ms, count}…}, cumulative)
 * and retry_after ({[use] = tries}, those seen). */
static void push_scope(lua_State *L, const rf_tally_scope *s) {
    luaL_checkstack(L, 8, "ledger stats"); /* a scope, a nested table, an entry, keys and values */
    const rf_tally_figures *f = &s->figures;
    lua_createtable(L, 0, 28);
    int scope = lua_gettop(L);
#define RF_X_COUNT(name) rfl_set_int(L, #name, f->name);
    RF_TALLY_COUNTS(RF_X_COUNT)
#undef RF_X_COUNT
    /* A ratio over nothing is the integer 0, as it always was in Lua (b > 0 and a / b or 0). */
#define RF_X_RATIO(name, num, den)              \
    if (f->den > 0)                             \
        lua_pushnumber(L, (lua_Number)f->name); \
    else                                        \
        lua_pushinteger(L, 0);                  \
    lua_setfield(L, scope, #name);
    RF_TALLY_RATIOS(RF_X_RATIO)
#undef RF_X_RATIO
    rfl_set_int(L, "elapsed_ms_sum", f->elapsed_ms_sum);
    lua_createtable(L, 0, 6);
    if (f->requests > 0) {
        rfl_set_int(L, "p50", f->elapsed_p50_ms);
        rfl_set_int(L, "p95", f->elapsed_p95_ms);
        rfl_set_int(L, "p99", f->elapsed_p99_ms);
        rfl_set_int(L, "min", f->elapsed_min_ms);
        rfl_set_int(L, "max", f->elapsed_max_ms);
        lua_pushnumber(L, (lua_Number)f->elapsed_mean_ms);
        lua_setfield(L, -2, "mean");
    }
    lua_setfield(L, scope, "elapsed_ms");
    lua_newtable(L); /* by_outcome */
    lua_newtable(L); /* by_reason */
    lua_newtable(L); /* reasons */
    for (size_t i = 0; i < s->n_outcomes; i++) {
        const rf_tally_count *c = &s->outcomes[i];
        add_count(L, scope + 1, c->name, c->n);
        lua_pushfstring(L, "%s %s", c->name, c->reason);
        lua_pushinteger(L, (lua_Integer)c->n);
        lua_rawset(L, scope + 2);
        add_count(L, scope + 3, c->reason, c->n);
    }
    lua_setfield(L, scope, "reasons");
    lua_setfield(L, scope, "by_reason");
    lua_setfield(L, scope, "by_outcome");
    lua_createtable(L, 0, (int)s->n_retried_classes);
    for (size_t i = 0; i < s->n_retried_classes; i++)
        rfl_set_int(L, s->retried_classes[i].name, s->retried_classes[i].n);
    lua_setfield(L, scope, "retried_classes");
    lua_newtable(L);
    for (int n = 0; n <= RF_LEDGER_MAX_TRIES; n++) {
        if (s->by_attempts[n] == 0) continue;
        lua_pushfstring(L, "%d", n);
        lua_pushinteger(L, (lua_Integer)s->by_attempts[n]);
        lua_rawset(L, -3);
    }
    lua_setfield(L, scope, "by_attempts");
    lua_createtable(L, RF_TALLY_LE_COUNT, 0);
    for (int i = 0; i < RF_TALLY_LE_COUNT; i++) {
        lua_createtable(L, 0, 2);
        rfl_set_int(L, "le_ms", LE_MS[i]);
        rfl_set_int(L, "count", f->elapsed_le[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, scope, "elapsed_buckets");
    lua_createtable(L, 0, RF_RA_USE_COUNT);
    for (int u = 0; u < RF_RA_USE_COUNT; u++)
        if (s->retry_after[u] > 0) rfl_set_int(L, rf_retry_after_use_name((rf_retry_after_use)u), s->retry_after[u]);
    lua_setfield(L, scope, "retry_after");
}

/* Pushes stats (see tally:stats) of t, its named scopes under group ("by_route" or "by_host"). */
static void push_stats(lua_State *L, const rf_ledger_tally *t, const char *group) {
    rf_tally_info info;
    rf_ledger_tally_info(t, &info);
    if (info.incomplete) rfl_error(L, "out of memory tallying the ledger: the counts are incomplete");
    rf_tally_scope s;
    rf_ledger_tally_whole(t, &s);
    push_scope(L, &s);
    rfl_set_int(L, "lines", info.lines);
    rfl_set_int(L, "torn_lines", info.torn_lines);
    rfl_set_int(L, "corrupt_lines", info.corrupt_lines);
    if (info.has_ts) {
        rfl_set_int(L, "ts_min_ms", info.ts_min_ms);
        rfl_set_int(L, "ts_max_ms", info.ts_max_ms);
    }
    size_t n = rf_ledger_tally_scope_count(t);
    lua_createtable(L, 0, (int)n);
    for (size_t i = 0; i < n; i++) {
        rf_ledger_tally_scope(t, i, &s);
        push_scope(L, &s);
        lua_setfield(L, -2, s.name);
    }
    lua_setfield(L, -2, group);
}

rf_ledger_tally *rfl_tally_snapshot(lua_State *L, const rf_ledger_tally *t) {
    ltally *box = rfl_newobject(L, RFL_TALLY, sizeof *box); /* first: a copy made is freed by its __gc */
    rf_error err;
    if (rf_ledger_tally_copy(t, &box->t, &err) != RF_OK) rfl_error(L, "copying the ledger's tally: %s", err.message);
    return box->t;
}

void rfl_push_tally_stats(lua_State *L, const rf_ledger_tally *t) { push_stats(L, t, "by_route"); }

void rfl_push_tally_stats_as(lua_State *L, const rf_ledger_tally *t, const char *group) { push_stats(L, t, group); }

/* ---- the object ---------------------------------------------------------------------------------------- */

/* Integer field k of the timeline table at idx, or raises naming it (its range is the core's to check). */
static int64_t timeline_field(lua_State *L, int idx, const char *k) {
    lua_getfield(L, idx, k);
    lua_Integer v = 0;
    if (!rfl_tointeger_exact(L, -1, &v))
        rfl_error(L, "bad argument #1 to 'ledger_tally' (timeline.%s must be an integer, got %s)", k,
                  luaL_typename(L, -1));
    lua_pop(L, 1);
    return v;
}

/* core.ledger_tally([opts]) → tally (see the top). Raises on a bad option, naming it. */
static int tally_new(lua_State *L, rfl_call *call) {
    rf_tally_options o = {0};
    if (!lua_isnoneornil(L, 1)) {
        luaL_checktype(L, 1, LUA_TTABLE);
        lua_settop(L, 1);
        lua_getfield(L, 1, "by");
        static const char *const groups[] = {"route", "host", NULL};
        o.group = luaL_checkoption(L, -1, "route", groups) == 1 ? RF_TALLY_BY_HOST : RF_TALLY_BY_ROUTE;
        if (lua_getfield(L, 1, "timeline") != LUA_TNIL) {
            luaL_checktype(L, -1, LUA_TTABLE);
            int tl = lua_gettop(L);
            o.origin_ms = timeline_field(L, tl, "origin_ms");
            o.bucket_ms = timeline_field(L, tl, "bucket_ms");
            int64_t buckets = timeline_field(L, tl, "buckets"); /* 0 would mean no timeline to the core */
            if (buckets < 1 || buckets > RF_TALLY_MAX_TIME_BUCKETS)
                return rfl_error(L, "bad argument #1 to 'ledger_tally' (timeline.buckets must be 1..%d, got %s)",
                                 RF_TALLY_MAX_TIME_BUCKETS, rfl_pushint(L, (lua_Integer)buckets));
            o.time_buckets = (size_t)buckets;
        }
    }
    ltally *lt = rfl_make(L, call, RFL_TALLY, sizeof *lt, tally_release);
    lt->by_host = o.group == RF_TALLY_BY_HOST;
    rf_error err;
    rf_status st = rf_ledger_tally_new(&o, &lt->t, &err);
    if (st == RF_ENOMEM) return rfl_error(L, "ledger_tally: %s", err.message);
    if (st != RF_OK) return rfl_error(L, "bad argument #1 to 'ledger_tally' (timeline.%s %s)", err.path, err.message);
    return 1;
}

/* tally:read(path [, skip_corrupt [, after_line]]) → the file's facts (see the top). */
static int tally_read(lua_State *L, rfl_call *call) {
    ltally *lt = call->self;
    bool nul;
    const char *path = rfl_check_path(L, 2, &nul);
    if (nul) return rfl_error(L, "cannot open ledger %s: the path contains a NUL byte", path);
    bool skip = lua_toboolean(L, 3);
    lua_Integer after_line = lua_isnoneornil(L, 4) ? 0 : rfl_checkinteger(L, 4);
    rf_tally_file file;
    rf_error err;
    rf_status st = rf_ledger_tally_read(lt->t, path, (long)after_line, skip, &file, &err);
    if (st == RF_EINVAL && err.line > 0)
        return rfl_error(L, "%s:%d: corrupt ledger line: %s", path, err.line, err.message);
    if (st != RF_OK) return rfl_error(L, "%s", err.message); /* names the file (docs/c-api.md "Conventions") */
    lua_createtable(L, 0, 4);
    rfl_set_int(L, "lines", file.lines);
    if (file.first_torn > 0)
        rfl_set_int(L, "torn", file.first_torn);
    else {
        lua_pushboolean(L, 0);
        lua_setfield(L, -2, "torn");
    }
    rfl_set_int(L, "torn_lines", file.torn_lines);
    rfl_set_int(L, "corrupt", file.corrupt_lines);
    return 1;
}

/* tally:stats() → the stats table (see the top). */
static int tally_stats(lua_State *L, rfl_call *call) {
    ltally *lt = call->self;
    push_stats(L, lt->t, lt->by_host ? "by_host" : "by_route");
    return 1;
}

/* tally:timeline() → {scope…}: one per time bucket, in time order, each with start_ms ({} without a timeline). */
static int tally_timeline(lua_State *L, rfl_call *call) {
    ltally *lt = call->self;
    size_t n = rf_ledger_tally_time_bucket_count(lt->t);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        rf_tally_scope s;
        rf_ledger_tally_time_bucket(lt->t, i, &s);
        push_scope(L, &s);
        rfl_set_int(L, "start_ms", s.start_ms);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

static int l_tally_new(lua_State *L) { return rfl_function(L, tally_new); }
static int l_tally_read(lua_State *L) { return rfl_method(L, 1, RFL_TALLY, 0, tally_read); }
static int l_tally_stats(lua_State *L) { return rfl_method(L, 1, RFL_TALLY, 0, tally_stats); }
static int l_tally_timeline(lua_State *L) { return rfl_method(L, 1, RFL_TALLY, 0, tally_timeline); }

/* core.ledger_bucket(ms) → the histogram bucket (0-based) of a duration (rf_tally_bucket_of). */
static int l_bucket(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)rf_tally_bucket_of((int64_t)rfl_checkinteger(L, 1)));
    return 1;
}

/* core.ledger_bucket_range(b) → lo, hi: the durations (ms) bucket b holds (rf_tally_bucket_range). */
static int l_bucket_range(lua_State *L) {
    lua_Integer b = rfl_checkinteger(L, 1);
    luaL_argcheck(L, b >= 0 && b < RF_TALLY_BUCKETS, 1, "bucket out of range");
    int64_t lo, hi;
    rf_tally_bucket_range((size_t)b, &lo, &hi);
    lua_pushinteger(L, (lua_Integer)lo);
    lua_pushinteger(L, (lua_Integer)hi);
    return 2;
}

void rfl_open_ledger_tally(lua_State *L) {
    static const luaL_Reg methods[] = {
        {"read", l_tally_read}, {"stats", l_tally_stats}, {"timeline", l_tally_timeline}, {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__gc", l_tally_gc}, {NULL, NULL}};
    rfl_new_type(L, RFL_TALLY, methods, meta);
    static const luaL_Reg functions[] = {{"ledger_tally", l_tally_new},
                                         {"ledger_bucket", l_bucket},
                                         {"ledger_bucket_range", l_bucket_range},
                                         {NULL, NULL}};
    luaL_setfuncs(L, functions, 0);
    lua_createtable(L, RF_TALLY_LE_COUNT, 0); /* core.ledger_le_ms: the bounds of elapsed_buckets */
    for (int i = 0; i < RF_TALLY_LE_COUNT; i++) {
        lua_pushinteger(L, (lua_Integer)LE_MS[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "ledger_le_ms");
    lua_pushliteral(L, RF_LEDGER_HARNESS_ROUTE); /* core.LEDGER_HARNESS_ROUTE: the route of lines without a ts */
    lua_setfield(L, -2, "LEDGER_HARNESS_ROUTE");
}
