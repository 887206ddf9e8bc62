/*
 * Lua binding of the replay (retryfreeze/replay.h): the core walks every recorded request under the candidate and
 * counts both sides; this file feeds it the files and marshals what it found into the table retryfreeze.replay
 * completes (docs/evidence.md "Replay").
 *   core.ledger_replay(policy, files, [{seed =, by = "route"|"host", skip_corrupt =, min_samples =, replicates =}])
 *     → {recorded = stats, predicted = stats (tally:stats()'s tables), info = {records, harness, no_route, …},
 *        interval = {whole = {ratio_lo =, ratio_hi = …, modelled =, hedges_modelled =, beyond =}, [scope] = …},
 *        gaps = {{route, class, samples, tries, fallback}…}, beyond = {{route, class, attempt, samples, drawn_as,
 *        fallback, tries}…}, locks = {{digest, requests}…}, files = {[path] = {lines, torn, torn_lines, corrupt}}}
 *     raises "path:line: corrupt ledger line: …" (unless skip_corrupt), the file's error, or a bad option naming it.
 * The policy never closes (lua_object.h rule 3) and stays on this call's stack; the replay is an object of rule 2
 * (rfl_make), freed when the call raises and, once read, before it returns. Options and paths are read raw.
 */
#include "lua_retryfreeze.h"

#include "retryfreeze/replay.h"

#include <stddef.h>
#include <string.h>

typedef struct lreplay {
    rf_replay *r;
} lreplay;

static void replay_release(lua_State *L, void *obj) {
    (void)L;
    lreplay *lr = obj;
    rf_replay_free(lr->r);
    lr->r = NULL;
}

static int l_replay_gc(lua_State *L) {
    lreplay *lr = rfl_checkobject(L, 1, RFL_REPLAY);
    if (rfl_collectable(lr)) replay_release(L, lr);
    return 0;
}

/* Integer option k of the options table at idx (raw), or dflt when absent; raises naming it otherwise. */
static lua_Integer int_option(lua_State *L, int idx, const char *k, lua_Integer lo, lua_Integer hi, lua_Integer dflt) {
    lua_pushstring(L, k);
    lua_rawget(L, idx);
    lua_Integer v = dflt;
    if (!lua_isnil(L, -1) && (!rfl_tointeger_exact(L, -1, &v) || v < lo || v > hi))
        rfl_error(L, "bad argument #3 to 'ledger_replay' (%s must be an integer %lld..%lld)", k, (long long)lo,
                  (long long)hi);
    lua_pop(L, 1);
    return v;
}

/* Pushes the interval of one scope (scope NULL: the whole) as {ratio_lo, ratio_hi…, modelled}. */
static void push_interval(lua_State *L, const rf_replay_interval *iv) {
    lua_createtable(L, 0, 20);
#define RF_X_BOUND(name, num, den)    \
    lua_pushnumber(L, iv->name##_lo); \
    lua_setfield(L, -2, #name "_lo"); \
    lua_pushnumber(L, iv->name##_hi); \
    lua_setfield(L, -2, #name "_hi");
    RF_TALLY_RATIOS(RF_X_BOUND)
#undef RF_X_BOUND
    lua_pushboolean(L, iv->modelled);
    lua_setfield(L, -2, "modelled");
    lua_pushboolean(L, iv->hedges_modelled);
    lua_setfield(L, -2, "hedges_modelled");
    lua_pushboolean(L, iv->beyond);
    lua_setfield(L, -2, "beyond");
}

/* The counts of rf_replay_info, by the names its fields have. */
#define INFO_COUNT(name) \
    { #name, offsetof(rf_replay_info, name) }
static const struct {
    const char *name;
    size_t at;
} INFO_COUNTS[] = {
    INFO_COUNT(records),         INFO_COUNT(harness),         INFO_COUNT(no_route),        INFO_COUNT(exact),
    INFO_COUNT(modelled),        INFO_COUNT(unmodelled),      INFO_COUNT(modelled_tries),  INFO_COUNT(assumed_timeouts),
    INFO_COUNT(timeouts_cut),    INFO_COUNT(deadline_cut),    INFO_COUNT(throttled),       INFO_COUNT(sooner),
    INFO_COUNT(overlapping),     INFO_COUNT(older_records),   INFO_COUNT(older_timeouts),  INFO_COUNT(older_waits),
    INFO_COUNT(older_dates),     INFO_COUNT(older_tls),       INFO_COUNT(hedged_requests), INFO_COUNT(hedge_keyless),
    INFO_COUNT(hedges_best),     INFO_COUNT(hedge_wins_best), INFO_COUNT(attempts_best),   INFO_COUNT(hedges_unbounded),
    INFO_COUNT(beyond_requests), INFO_COUNT(beyond_tries)};
#undef INFO_COUNT

static void push_info(lua_State *L, const rf_replay_info *i) {
    lua_createtable(L, 0, 30);
    for (size_t k = 0; k < sizeof INFO_COUNTS / sizeof INFO_COUNTS[0]; k++) {
        int64_t n;
        memcpy(&n, (const char *)i + INFO_COUNTS[k].at, sizeof n);
        rfl_set_int(L, INFO_COUNTS[k].name, n);
    }
    rfl_set_int(L, "min_samples", i->min_samples);
    rfl_set_int(L, "replicates", i->replicates);
    rfl_set_int(L, "seed", (int64_t)i->seed);
    lua_pushboolean(L, i->budget);
    lua_setfield(L, -2, "budget");
}

/* core.ledger_replay(policy, files [, opts]) (see the top). */
static int replay_run(lua_State *L, rfl_call *call) {
    const rf_policy *p = rfl_check_policy(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    rf_replay_options o = {0};
    bool skip = false;
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        o.seed = (uint64_t)int_option(L, 3, "seed", 0, INT64_MAX, 0);
        o.min_samples = (uint32_t)int_option(L, 3, "min_samples", 1, 1000000, 0);
        o.replicates = (uint32_t)int_option(L, 3, "replicates", 2, RF_REPLAY_MAX_REPLICATES, 0);
        lua_pushliteral(L, "skip_corrupt");
        lua_rawget(L, 3);
        skip = lua_toboolean(L, -1);
        lua_pushliteral(L, "by");
        lua_rawget(L, 3);
        if (!lua_isnil(L, -1)) {
            const char *by = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
            if (strcmp(by, "host") == 0)
                o.group = RF_TALLY_BY_HOST;
            else if (strcmp(by, "route") != 0)
                return rfl_error(L, "bad argument #3 to 'ledger_replay' (by must be \"route\" or \"host\")");
        }
        lua_pop(L, 2);
    }
    lreplay *lr = rfl_make(L, call, RFL_REPLAY, sizeof *lr, replay_release);
    rf_error err;
    rf_status st = rf_replay_new(p, &o, &lr->r, &err);
    if (st != RF_OK) return rfl_error(L, "cannot replay: %s", err.message);
    lua_createtable(L, 0, 4); /* files: each file's facts */
    const int files = lua_gettop(L);
    const lua_Integer n = (lua_Integer)lua_rawlen(L, 2);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 2, i); /* anchored on this stack while C reads it */
        if (lua_type(L, -1) != LUA_TSTRING)
            return rfl_error(L, "bad argument #2 to 'ledger_replay' (files[%d] is not a string)", (int)i);
        size_t len;
        const char *path = lua_tolstring(L, -1, &len);
        if (strlen(path) != len) return rfl_error(L, "cannot open ledger %s: the path contains a NUL byte", path);
        rf_tally_file file;
        st = rf_replay_read(lr->r, path, skip, &file, &err);
        if (st == RF_EINVAL && err.line > 0)
            return rfl_error(L, "%s:%d: corrupt ledger line: %s", path, err.line, err.message);
        if (st != RF_OK) return rfl_error(L, "%s", err.message);
        lua_createtable(L, 0, 4);
        rfl_set_int(L, "lines", file.lines);
        rfl_set_int(L, "torn", file.first_torn);
        rfl_set_int(L, "torn_lines", file.torn_lines);
        rfl_set_int(L, "corrupt", file.corrupt_lines);
        lua_rawset(L, files); /* files[path] = facts */
    }
    if (rf_replay_finish(lr->r, &err) != RF_OK) return rfl_error(L, "cannot replay: %s", err.message);
    const char *group = o.group == RF_TALLY_BY_HOST ? "by_host" : "by_route";
    lua_createtable(L, 0, 7);
    lua_pushvalue(L, files);
    lua_setfield(L, -2, "files");
    rfl_push_tally_stats_as(L, rf_replay_recorded(lr->r), group);
    lua_setfield(L, -2, "recorded");
    const rf_ledger_tally *predicted = rf_replay_predicted(lr->r);
    rfl_push_tally_stats_as(L, predicted, group);
    lua_setfield(L, -2, "predicted");
    rf_replay_info info;
    rf_replay_summary(lr->r, &info);
    push_info(L, &info);
    lua_setfield(L, -2, "info");
    lua_newtable(L); /* interval: the whole and each predicted scope */
    rf_replay_interval iv;
    rf_replay_interval_of(lr->r, NULL, &iv);
    push_interval(L, &iv);
    lua_setfield(L, -2, "whole");
    rf_tally_scope s;
    for (size_t i = 0; rf_ledger_tally_scope(predicted, i, &s); i++) {
        if (!rf_replay_interval_of(lr->r, s.name, &iv)) continue;
        push_interval(L, &iv);
        lua_setfield(L, -2, s.name);
    }
    lua_setfield(L, -2, "interval");
    size_t ng = rf_replay_gap_count(lr->r);
    lua_createtable(L, (int)ng, 0);
    for (size_t i = 0; i < ng; i++) {
        rf_replay_gap g;
        rf_replay_gap_at(lr->r, i, &g);
        lua_createtable(L, 0, 5);
        rfl_set_str(L, "route", g.route);
        rfl_set_str(L, "class", g.class_name);
        rfl_set_int(L, "samples", g.samples);
        rfl_set_int(L, "tries", g.tries);
        rfl_set_str(L, "fallback", g.fallback); /* absent without one */
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "gaps");
    size_t nb = rf_replay_beyond_count(lr->r);
    lua_createtable(L, (int)nb, 0);
    for (size_t i = 0; i < nb; i++) {
        rf_replay_beyond b;
        rf_replay_beyond_at(lr->r, i, &b);
        lua_createtable(L, 0, 7);
        rfl_set_str(L, "route", b.route);
        rfl_set_str(L, "class", b.class_name);
        rfl_set_int(L, "attempt", b.attempt);
        rfl_set_int(L, "samples", b.samples);
        rfl_set_int(L, "drawn_as", b.drawn_as);
        rfl_set_str(L, "fallback", b.fallback); /* absent without one */
        rfl_set_int(L, "tries", b.tries);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "beyond");
    size_t nl = rf_replay_lock_count(lr->r);
    lua_createtable(L, (int)nl, 0);
    for (size_t i = 0; i < nl; i++) {
        rf_replay_lock k;
        rf_replay_lock_at(lr->r, i, &k);
        lua_createtable(L, 0, 2);
        rfl_set_str(L, "digest", k.digest);
        rfl_set_int(L, "requests", k.requests);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "locks");
    replay_release(L, lr); /* read: freed now, not at the next collection */
    return 1;
}

static int l_replay(lua_State *L) { return rfl_function(L, replay_run); }

void rfl_open_replay(lua_State *L) {
    static const luaL_Reg meta[] = {{"__gc", l_replay_gc}, {NULL, NULL}};
    rfl_new_type(L, RFL_REPLAY, NULL, meta);
    static const luaL_Reg functions[] = {{"ledger_replay", l_replay}, {NULL, NULL}};
    luaL_setfuncs(L, functions, 0);
}
