/*
 * core.ledger_tally(path, skip_corrupt) → scopes, info: the per-route counters of retryfreeze.ledger_stats,
 * gathered in C so that a large ledger costs no Lua table per record. It only counts; the statistics (ratios,
 * percentiles, merging) stay in lua/retryfreeze/ledger_stats.lua, whose histogram it fills (same buckets).
 * scopes = {[route] = {requests, successes, retried_successes, attempts, success_attempts, retries,
 *           elapsed_sum, elapsed_min, elapsed_max, outcomes = {[outcome] = {[reason] = n}},
 *           retried_classes = {[class] = n}, hist = {[bucket + 1] = n}}}
 * info = {lines = n, torn = false|line, corrupt = n}. Raises "path:line: corrupt ledger line: …" unless
 * skip_corrupt, or "cannot open/read ledger …". Memory is bounded by the number of distinct routes, outcome and
 * reason pairs and classes, never by the ledger's length.
 */
#define _POSIX_C_SOURCE 200809L
#include "lua_retryfreeze.h"

#include <stdlib.h>
#include <string.h>

#define TALLY_MT "retryfreeze.LedgerTally"
#define BUCKETS 3072 /* ledger_stats.lua: 128 exact buckets, then 64 per power of two up to 2^53 */

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
    int64_t hist[BUCKETS];
} scope;

typedef struct tally {
    scope *scopes;
    size_t n_scopes;
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

static void free_counts(named_count *c, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(c[i].a);
        free(c[i].b);
    }
    free(c);
}

static int l_tally_gc(lua_State *L) {
    tally *t = luaL_checkudata(L, 1, TALLY_MT);
    for (size_t i = 0; i < t->n_scopes; i++) {
        free(t->scopes[i].route);
        free_counts(t->scopes[i].pairs, t->scopes[i].n_pairs);
        free_counts(t->scopes[i].classes, t->scopes[i].n_classes);
    }
    free(t->scopes);
    t->scopes = NULL;
    t->n_scopes = 0;
    rf_ledger_reader_close(t->reader);
    t->reader = NULL;
    return 0;
}

static char *dup_or_die(lua_State *L, const char *s) {
    char *d = strdup(s ? s : "");
    if (d == NULL) luaL_error(L, "out of memory tallying a ledger");
    return d;
}

/* Adds 1 to the count named (a, b) in *list (linear: there are few distinct names). */
static void bump(lua_State *L, named_count **list, size_t *n, const char *a, const char *b) {
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*list)[i].a, a) == 0 && (b == NULL || strcmp((*list)[i].b, b) == 0)) {
            (*list)[i].n++;
            return;
        }
    named_count *grown = realloc(*list, (*n + 1) * sizeof **list);
    if (grown == NULL) luaL_error(L, "out of memory tallying a ledger");
    *list = grown;
    grown[*n] = (named_count){.a = NULL, .b = NULL, .n = 1};
    (*n)++;
    grown[*n - 1].a = dup_or_die(L, a);
    if (b) grown[*n - 1].b = dup_or_die(L, b);
}

static scope *scope_for(lua_State *L, tally *t, const char *route) {
    for (size_t i = 0; i < t->n_scopes; i++)
        if (strcmp(t->scopes[i].route, route) == 0) return &t->scopes[i];
    scope *grown = realloc(t->scopes, (t->n_scopes + 1) * sizeof *grown);
    if (grown == NULL) luaL_error(L, "out of memory tallying a ledger");
    t->scopes = grown;
    scope *s = &grown[t->n_scopes++];
    memset(s, 0, sizeof *s);
    s->elapsed_min = INT64_MAX;
    s->elapsed_max = INT64_MIN;
    s->route = dup_or_die(L, route);
    return s;
}

static void add(lua_State *L, tally *t, const rf_ledger_record *rec) {
    scope *s = scope_for(L, t, rec->route);
    s->requests++;
    s->attempts += rec->attempts;
    if (rec->attempts > 1) {
        s->retries += rec->attempts - 1;
        for (size_t i = 0; i < rec->n_tries; i++)
            if (strcmp(rec->tries[i].reason, "pinned-status") == 0)
                bump(L, &s->classes, &s->n_classes, rec->tries[i].class_name, NULL);
    }
    if (rec->ok) {
        s->successes++;
        s->success_attempts += rec->attempts;
        if (rec->attempts > 1) s->retried_successes++;
    }
    bump(L, &s->pairs, &s->n_pairs, rec->outcome, rec->reason);
    s->elapsed_sum += rec->elapsed_ms;
    if (rec->elapsed_ms < s->elapsed_min) s->elapsed_min = rec->elapsed_ms;
    if (rec->elapsed_ms > s->elapsed_max) s->elapsed_max = rec->elapsed_ms;
    s->hist[bucket(rec->elapsed_ms)]++;
}

static void push_scope(lua_State *L, const scope *s) {
    lua_createtable(L, 0, 12);
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
}

static int l_ledger_tally(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    bool skip = lua_toboolean(L, 2);
    tally *t = lua_newuserdatauv(L, sizeof *t, 0);
    memset(t, 0, sizeof *t);
    luaL_setmetatable(L, TALLY_MT);
    int ud = lua_gettop(L); /* owns the counters: freed by __gc if anything below raises */
    rf_error err;
    if (rf_ledger_reader_open(path, &t->reader, &err) != RF_OK) return luaL_error(L, "%s", err.message);
    int64_t corrupt = 0, torn = 0;
    for (;;) {
        rf_ledger_record rec;
        rf_ledger_read_status st = rf_ledger_reader_next(t->reader, &rec, &err);
        if (st == RF_LEDGER_RECORD) {
            add(L, t, &rec);
        } else if (st == RF_LEDGER_CORRUPT) {
            if (!skip) return luaL_error(L, "%s:%d: corrupt ledger line: %s", path, err.line, err.message);
            corrupt++;
        } else if (st == RF_LEDGER_TORN) {
            torn = err.line;
            break;
        } else if (st == RF_LEDGER_ERROR) {
            return luaL_error(L, "%s: cannot read ledger: %s", path, err.message);
        } else {
            break;
        }
    }
    lua_createtable(L, 0, (int)t->n_scopes);
    for (size_t i = 0; i < t->n_scopes; i++) {
        push_scope(L, &t->scopes[i]);
        lua_setfield(L, -2, t->scopes[i].route);
    }
    lua_createtable(L, 0, 3);
    rfl_set_int(L, "lines", rf_ledger_reader_line(t->reader));
    if (torn)
        rfl_set_int(L, "torn", torn);
    else {
        lua_pushboolean(L, 0);
        lua_setfield(L, -2, "torn");
    }
    rfl_set_int(L, "corrupt", corrupt);
    lua_pushcfunction(L, l_tally_gc); /* free now rather than at the next collection */
    lua_pushvalue(L, ud);
    lua_call(L, 1, 0);
    return 2;
}

void rfl_open_ledger_tally(lua_State *L) {
    luaL_newmetatable(L, TALLY_MT);
    lua_pushcfunction(L, l_tally_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushliteral(L, TALLY_MT);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
    lua_pushcfunction(L, l_ledger_tally);
    lua_setfield(L, -2, "ledger_tally");
}
