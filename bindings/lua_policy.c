/*
 * The Lua binding of the engine: module retryfreeze.core. It marshals; the core decides.
 * Objects are full userdata made closed before their C resource is acquired (liolib's newprefile), known by their
 * tags (lua_object.h), immutable from Lua: data stays in C, __index is a C function, __newindex raises,
 * __metatable hides the metatable. Policies, rngs and deciders never close (lifetime rule 3, lua_object.h): their
 * calls pin nothing and read table arguments raw. Programmer errors raise (luaL_argerror); an invalid lock
 * returns nil, message.
 */
#define _POSIX_C_SOURCE 200809L
#include "lua_retryfreeze.h"
#include "retryfreeze/gateway.h"
#include "retryfreeze/lock_schema.h"
#include "../core/src/util/clock_ms.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct lpolicy {
    rf_policy *p; /* NULL until loaded, and after __gc */
} lpolicy;

/* The policy or rng object at idx, or a raised "… expected" naming argument idx. */
static lpolicy *check_lpolicy(lua_State *L, int idx) {
    lpolicy *lp = rfl_testobject(L, idx, RFL_POLICY);
    return lp != NULL ? lp : rfl_checkobject(L, idx, RFL_POLICY);
}

static rf_rng *check_rng(lua_State *L, int idx) {
    rf_rng *r = rfl_testobject(L, idx, RFL_RNG);
    return r != NULL ? r : rfl_checkobject(L, idx, RFL_RNG);
}

const rf_policy *rfl_check_policy(lua_State *L, int idx) {
    lpolicy *lp = check_lpolicy(L, idx);
    if (lp->p == NULL) rfl_error(L, "attempt to use a freed policy");
    return lp->p;
}

const rf_policy *rfl_take_policy(lua_State *L, int idx, void **obj) {
    lpolicy *lp = rfl_take(L, idx, RFL_POLICY); /* open once loaded: the type's message for a freed one */
    *obj = lp;
    return lp->p;
}

/* ---- errors ------------------------------------------------------------------------------------- */

/* Returns nil and "source: path: message (line L, column C)" (rfl_fail). */
static int push_load_error(lua_State *L, const char *source, const rf_error *err) {
    size_t need = rf_error_text(err, source, NULL, 0);
    char *text = lua_newuserdata(L, need + 1); /* collected with the call */
    rf_error_text(err, source, text, need + 1);
    return rfl_fail(L, lua_pushstring(L, text), NULL);
}

/* ---- rng ---------------------------------------------------------------------------------------- */

/* core.rng(seed) → Rng. seed: an integer (the same seed gives the same jitter). */
static int l_rng_new(lua_State *L) {
    uint64_t seed = (uint64_t)rfl_checkinteger(L, 1);
    rf_rng_seed(rfl_newobject(L, RFL_RNG, sizeof(rf_rng)), seed);
    return 1;
}

/* rng:between(lo, hi) → a uniform integer in [lo, hi]. */
static int l_rng_between(lua_State *L) {
    rf_rng *rng = check_rng(L, 1);
    lua_Integer lo = rfl_checkinteger(L, 2), hi = rfl_checkinteger(L, 3);
    luaL_argcheck(L, lo <= hi, 3, "hi must be >= lo");
    luaL_argcheck(L, lo >= 0 && hi >= 0, 2, "bounds must be >= 0");
    lua_pushinteger(L, rf_rng_between(rng, lo, hi));
    return 1;
}

/* ---- loading ------------------------------------------------------------------------------------ */

static lpolicy *new_policy_ud(lua_State *L) {
    return rfl_newobject(L, RFL_POLICY, sizeof(lpolicy)); /* closed first (p NULL): an error below never leaks */
}

/* core.load_string(text [, chunkname]) → policy, or nil, "chunkname: $.path: message". */
static int l_load_string(lua_State *L) {
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    const char *name = luaL_optstring(L, 2, "lock");
    lpolicy *lp = new_policy_ud(L);
    rf_error err;
    rf_status st = rf_policy_load_buffer(text, len, &lp->p, &err);
    if (st == RF_ENOMEM) return rfl_error(L, "loading %s: %s", name, err.message); /* the core's own words */
    if (st != RF_OK) return push_load_error(L, name, &err);
    rfl_set_open(lp, true);
    return 1;
}

/* core.load_file(path) → policy, or nil, "path: $.json.path: message" (an invalid lock), or nil, "cannot open lock
 * path: why" (a file it cannot read: one sentence naming the path once). */
static int l_load_file(lua_State *L) {
    bool nul;
    const char *path = rfl_check_path(L, 1, &nul);
    if (nul) return rfl_fail(L, lua_pushfstring(L, "cannot open lock %s: the path contains a NUL byte", path), NULL);
    lpolicy *lp = new_policy_ud(L);
    rf_error err;
    rf_status st = rf_policy_load_file(path, &lp->p, &err);
    if (st == RF_ENOMEM) return rfl_error(L, "loading %s: %s", path, err.message);
    if (st != RF_OK) return push_load_error(L, path, &err);
    rfl_set_open(lp, true);
    return 1;
}

/* ---- facts -------------------------------------------------------------------------------------- */

/*
 * The facts a decision reads, and the one reader of each (fact_*): policy:decide reads them from a facts table,
 * a decider from its arguments, through the same functions. Each reads the value at stack index v (nil: absent,
 * where the fact may be absent) into *f, and raises naming the fact as its form calls it: "facts.status" in a
 * table (an error of argument src.arg, the table) or "status" as an argument (argument src.arg itself).
 */
static const char *const fact_keys[] = {"method",      "path",     "status",     "transport",       "retry_after",
                                        "date",        "attempts", "elapsed_ms", "idempotency_key", "source",
                                        "now_ms",      "hints",    "not_sent",   "overloaded",      "inbound_attempt",
                                        "grpc_status", NULL};
_Static_assert(sizeof fact_keys / sizeof *fact_keys == RFL_N_FACTS + 1, "one identity per fact name");
enum {
    F_METHOD,
    F_PATH,
    F_STATUS,
    F_TRANSPORT,
    F_RETRY_AFTER,
    F_DATE,
    F_ATTEMPTS,
    F_ELAPSED,
    F_KEY,
    F_SOURCE,
    F_NOW,
    F_HINTS,
    F_NOT_SENT,
    F_OVERLOADED,
    F_INBOUND_ATTEMPT,
    F_GRPC_STATUS
};

/* The integer facts' ranges: attempts (counting this one) and the millisecond facts (elapsed_ms, now_ms; a quarter of
 * int64 keeps the engine's sums far from overflow; where Lua has only doubles, RFL_INT_EXACT bounds them first). */
#define FACT_ATTEMPTS_MAX 1000000
#define FACT_MS_MAX (INT64_MAX / 4)

/* Where a fact comes from: argument arg, a facts table (table) or the value itself. */
typedef struct fact_src {
    int arg;
    bool table;
} fact_src;

/* Raises argument src's error: the fact's name (facts.<name> in a table) followed by the formatted rest. Cold: off
 * the decision path. */
static __attribute__((noinline, cold)) void fact_error(lua_State *L, fact_src src, const char *name, const char *fmt,
                                                       ...) {
    va_list ap;
    va_start(ap, fmt);
    lua_pushfstring(L, "%s%s ", src.table ? "facts." : "", name);
    lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_concat(L, 2);
    luaL_argerror(L, src.arg, lua_tostring(L, -1));
}

/* An integer fact's refusal: the value at v is not an exact integer in lo..hi. */
static __attribute__((noinline, cold)) lua_Integer int_fact_error(lua_State *L, int v, fact_src src, const char *name,
                                                                  lua_Integer lo, lua_Integer hi) {
    lua_Integer x = 0;
    if (!rfl_tointeger_exact(L, v, &x)) {
        if (lua_type(L, v) == LUA_TNUMBER && RFL_DOUBLES_ONLY)
            fact_error(L, src, name, "must be an integer in -(2^53-1)..2^53-1, got %f", lua_tonumber(L, v));
        fact_error(L, src, name, "must be an integer, got %s", luaL_typename(L, v));
    }
    if (strcmp(name, "status") == 0) /* the engine's own rule, in its words */
        fact_error(L, src, name, "must be 0 (none received) or %d..%d, got %s", RF_HTTP_STATUS_MIN, RF_HTTP_STATUS_MAX,
                   rfl_pushint(L, x));
    const char *los = rfl_pushint(L, lo), *his = rfl_pushint(L, hi), *xs = rfl_pushint(L, x);
    fact_error(L, src, name, "must be in %s..%s, got %s", los, his, xs);
    return 0; /* not reached */
}

/* The integer fact at v, in lo..hi; nil gives dflt when dflt >= lo (else nil is refused). Two API calls for an
 * integer: this runs several times per decision. A numeric string is refused, never converted. */
static inline __attribute__((always_inline)) lua_Integer int_fact(lua_State *L, int v, fact_src src, const char *name,
                                                                  lua_Integer lo, lua_Integer hi, lua_Integer dflt) {
#if LUA_VERSION_NUM >= 503
    if (lua_isinteger(L, v)) {
        lua_Integer x = lua_tointegerx(L, v, NULL);
        if (x >= lo && x <= hi) return x;
    }
#endif
    lua_Integer x = 0;
    if (dflt >= lo && lua_type(L, v) <= LUA_TNIL) return dflt;
    if (rfl_tointeger_exact(L, v, &x) && x >= lo && x <= hi) return x;
    return int_fact_error(L, v, src, name, lo, hi);
}

/* The string fact at v (*len its length), or NULL for nil (absent). */
static inline __attribute__((always_inline)) const char *str_fact(lua_State *L, int v, fact_src src, const char *name,
                                                                  size_t *len) {
    int t = lua_type(L, v);
    if (t == LUA_TSTRING) return lua_tolstring(L, v, len);
    if (t > LUA_TNIL) fact_error(L, src, name, "must be a string, got %s", luaL_typename(L, v));
    *len = 0;
    return NULL;
}

/* facts.status: 0 (none received) or RF_HTTP_STATUS_MIN..MAX (RFC 9110 §15); required as an argument (nil is
 * refused). */
static inline __attribute__((always_inline)) void fact_status(lua_State *L, int v, fact_src src, rf_facts *f) {
    lua_Integer s = int_fact(L, v, src, "status", 0, RF_HTTP_STATUS_MAX, -1);
    if (s != 0 && s < RF_HTTP_STATUS_MIN) int_fact_error(L, v, src, "status", 0, RF_HTTP_STATUS_MAX);
    f->status = (int)s;
}

/* Raises "facts.transport must be one of ok, timeout, …; got 't'", the list from RF_TRANSPORTS. */
static __attribute__((noinline, cold)) void transport_error(lua_State *L, fact_src src, const char *t) {
    char names[256];
    size_t used = 0;
    for (int i = 0; i < RF_TRANSPORT_COUNT && used < sizeof names; i++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                                 rf_transport_name((rf_transport)i));
    fact_error(L, src, "transport", "must be one of %s; got '%s'", names, t);
}

/* facts.transport: one of rf.transports; nil: ok. */
static inline __attribute__((always_inline)) void fact_transport(lua_State *L, int v, fact_src src, rf_facts *f) {
    size_t len = 0;
    const char *t = str_fact(L, v, src, "transport", &len);
    f->transport = RF_TRANSPORT_OK;
    if (t != NULL && rf_transport_parse(t, len, &f->transport) != 0) transport_error(L, src, t);
}

/* An attempt's now_ms when the caller gave none (0) and a Retry-After may need it: the wall clock. */
static inline void attempt_clock(rf_facts *f) {
    if (f->now_ms == 0 && f->retry_after != NULL) f->now_ms = rfi_wall_ms();
}

/* The facts of one attempt that both forms read, at v + i for i = 0 status, 1 transport, 2 attempts, 3 elapsed_ms,
 * 4 retry_after, 5 date, 6 now_ms (a decider's arguments), each named as an argument. */
static inline __attribute__((always_inline)) void read_attempt_facts(lua_State *L, int v, rf_facts *f) {
    fact_status(L, v, (fact_src){v, false}, f);
    fact_transport(L, v + 1, (fact_src){v + 1, false}, f);
    f->attempts = (int)int_fact(L, v + 2, (fact_src){v + 2, false}, "attempts", 1, FACT_ATTEMPTS_MAX, 1);
    f->elapsed_ms = int_fact(L, v + 3, (fact_src){v + 3, false}, "elapsed_ms", 0, FACT_MS_MAX, 0);
    f->retry_after = str_fact(L, v + 4, (fact_src){v + 4, false}, "retry_after", &f->retry_after_len);
    f->date = str_fact(L, v + 5, (fact_src){v + 5, false}, "date", &f->date_len);
    f->now_ms =
        lua_type(L, v + 6) <= LUA_TNIL ? 0 : int_fact(L, v + 6, (fact_src){v + 6, false}, "now_ms", 0, FACT_MS_MAX, 0);
    attempt_clock(f);
}

/* The fact names as the Lua strings of this state: short strings are interned (every Lua 5.1–5.4, LuaJIT), so a
 * facts table's key is one of them exactly when its identity is: a pointer comparison, no hashing. The binding's
 * state holds the strings (RFL_STATE_FACT_NAMES) and their identities (compared, never dereferenced). The identity
 * of a string key at idx, NULL for anything else: Lua 5.4's lua_topointer gives a string's object (one call instead
 * of lua_type and lua_tostring); elsewhere the interned text's address serves. A light userdata's address could
 * only equal it if C code made it so: the key is compared, never dereferenced. */
#if LUA_VERSION_NUM >= 504
#define fact_key_id(L, idx) lua_topointer((L), (idx))
#else
static const void *fact_key_id(lua_State *L, int idx) {
    return lua_type(L, idx) == LUA_TSTRING ? (const void *)lua_tostring(L, idx) : NULL;
}
#endif

static void make_fact_index(lua_State *L, rfl_state *st) {
    lua_createtable(L, RFL_N_FACTS, 0);
    for (int i = 0; fact_keys[i]; i++) {
        lua_pushstring(L, fact_keys[i]);
        st->fact_ids[i] = fact_key_id(L, -1);
        lua_rawseti(L, -2, i + 1);
    }
    rfl_hold(L, st, RFL_STATE_FACT_NAMES);
}

/*
 * facts.hints (the table at v): {[lowercase wait header name] = raw field value} into f->hints. A name that is
 * not one of RF_WAIT_HEADERS (exactly, lowercase) raises like an unknown fact; a listed name the route does not
 * read is refused by rf_decide. Iterated raw; the strings stay anchored by the facts table, which no Lua code
 * runs to change while the decision is read and made.
 */
/* RF_WAIT_HEADERS' names joined by ", ", after a leading ", " (skip 2): the hints a refusal lists. */
#define WAIT_HEADER_NAME(id, name) ", " name
static const char wait_header_names[] = RF_WAIT_HEADERS(WAIT_HEADER_NAME);
#undef WAIT_HEADER_NAME

static void read_hints(lua_State *L, int v, fact_src src, rf_facts *f) {
    if (lua_type(L, v) != LUA_TTABLE)
        fact_error(L, src, "hints", "must be a table {[header] = value}, got %s", luaL_typename(L, v));
    lua_pushnil(L);
    while (lua_next(L, v) != 0) {
        size_t klen = 0;
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &klen) : NULL;
        rf_wait_header h;
        if (k == NULL || rf_wait_header_parse_name(k, klen, &h) != 0 || strcmp(rf_wait_header_name(h), k) != 0)
            luaL_argerror(L, src.arg,
                          lua_pushfstring(L, "unknown hint '%s' (hints are lowercase wait header names: %s)",
                                          k ? k : luaL_typename(L, -2), wait_header_names + 2));
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_argerror(L, src.arg,
                          lua_pushfstring(L, "facts.hints['%s'] must be a string, got %s", k, luaL_typename(L, -1)));
        f->hints[h] = lua_tolstring(L, -1, &f->hint_lens[h]);
        lua_pop(L, 1);
    }
}

/*
 * Reads the facts table at arg into *f; ids: the fact names' identities (make_fact_index). Iterates raw (lua_next),
 * so metamethods on the table cannot inject facts, and no Lua runs; any key other than fact_keys raises, naming it
 * (the engine reads transport facts only: no body). One walk visits each present key once, which is cheaper than a
 * raw lookup of all 13 names, and it is the only way to see the unknown keys. String pointers stay valid while the
 * table is on the stack.
 */
static void read_facts(lua_State *L, int arg, const void *const *ids, rf_facts *f) {
    luaL_checktype(L, arg, LUA_TTABLE);
    memset(f, 0, sizeof *f);
    f->attempts = 1;
    fact_src src = {arg, true};
    lua_pushnil(L);
    while (lua_next(L, arg) != 0) {
        const void *id = fact_key_id(L, -2);
        int v = lua_gettop(L);
        int which = 0;
        while (which < RFL_N_FACTS && ids[which] != id) which++;
        switch (which) {
        case F_METHOD: f->method = str_fact(L, v, src, "method", &f->method_len); break;
        case F_PATH: f->path = str_fact(L, v, src, "path", &f->path_len); break;
        case F_STATUS: fact_status(L, v, src, f); break;
        case F_TRANSPORT: fact_transport(L, v, src, f); break;
        case F_RETRY_AFTER: f->retry_after = str_fact(L, v, src, "retry_after", &f->retry_after_len); break;
        case F_DATE: f->date = str_fact(L, v, src, "date", &f->date_len); break;
        case F_ATTEMPTS: f->attempts = (int)int_fact(L, v, src, "attempts", 1, FACT_ATTEMPTS_MAX, 1); break;
        case F_ELAPSED: f->elapsed_ms = int_fact(L, v, src, "elapsed_ms", 0, FACT_MS_MAX, 0); break;
        case F_KEY:
            if (lua_type(L, v) == LUA_TBOOLEAN) {
                f->has_idempotency_key = lua_toboolean(L, v);
            } else {
                size_t n;
                str_fact(L, v, src, "idempotency_key", &n);
                f->has_idempotency_key = n > 0;
            }
            break;
        case F_SOURCE: f->source = str_fact(L, v, src, "source", &f->source_len); break;
        case F_NOW: f->now_ms = int_fact(L, v, src, "now_ms", 0, FACT_MS_MAX, 0); break;
        case F_HINTS: read_hints(L, v, src, f); break;
        case F_NOT_SENT:
            if (lua_type(L, v) != LUA_TBOOLEAN)
                fact_error(L, src, "not_sent", "must be a boolean, got %s", luaL_typename(L, v));
            f->not_sent = lua_toboolean(L, v);
            break;
        case F_OVERLOADED:
            if (lua_type(L, v) != LUA_TBOOLEAN)
                fact_error(L, src, "overloaded", "must be a boolean, got %s", luaL_typename(L, v));
            f->overloaded = lua_toboolean(L, v);
            break;
        case F_INBOUND_ATTEMPT: f->inbound_attempt = (int)int_fact(L, v, src, "inbound_attempt", 0, INT_MAX, 0); break;
        case F_GRPC_STATUS: /* a gRPC status code (grpc/doc/statuscodes.md); 0: OK */
            f->grpc_status = (int)int_fact(L, v, src, "grpc_status", 0, RF_GRPC_STATUS_MAX, 0);
            break;
        default:
            if (lua_type(L, -2) != LUA_TSTRING)
                luaL_argerror(L, arg, lua_pushfstring(L, "facts has a non-string key (%s)", luaL_typename(L, -2)));
            /* hedging is the route's, not an attempt's fact: say where it is asked and pinned */
            luaL_argerror(L, arg,
                          lua_pushfstring(L,
                                          "unknown fact '%s' (%sthe engine reads transport facts only: method, "
                                          "path, status, transport, retry_after, date, attempts, elapsed_ms, "
                                          "idempotency_key, source, now_ms, hints, not_sent, overloaded, "
                                          "inbound_attempt, grpc_status)",
                                          lua_tostring(L, -2),
                                          strncmp(lua_tostring(L, -2), "hedg", 4) == 0
                                              ? "whether a request is hedged is policy:hedging(facts)'s answer, "
                                                "pinned by assert.hedges or a decision table's hedge column; "
                                              : ""));
        }
        lua_pop(L, 1);
    }
    if (f->method == NULL) luaL_argerror(L, arg, "facts.method is required");
    if (f->path == NULL) luaL_argerror(L, arg, "facts.path is required");
    bool any_hint = f->retry_after != NULL;
    for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) any_hint |= f->hints[h] != NULL;
    if (f->now_ms == 0 && any_hint) f->now_ms = rfi_wall_ms();
}

/* ---- verdicts ----------------------------------------------------------------------------------- */

/* The verdict's keys, in the order of the decide closure's key upvalues and of the string cache's slots. */
enum { K_RETRY, K_REASON, K_CLASS, K_DELAY, K_TIMEOUT, K_RA, K_RA_HEADER, K_ROUTE, K_BUDGET, N_VERDICT_KEYS };

/* The per-state string cache (a table; registry, pointer key; also an upvalue of decide): the verdict's key
 * names at [STR_KEY + K_*], and the strings a verdict's values take, so that a verdict interns nothing:
 * reason names, Retry-After use names, wait header names, budget source names, and the class names, filled on
 * first use (HTTP_<status> at STR_CLASS_HTTP + status, the named classes at STR_CLASS_NAMED + i, and again by the
 * transport they classify, at STR_CLASS_TRANSPORT + transport, UNKNOWN at its ok: see fact_class_slot). */
enum {
    STR_KEY = 1,
    STR_REASON = STR_KEY + N_VERDICT_KEYS,
    STR_RA_USE = STR_REASON + RF_REASON_COUNT,
    STR_WAIT_HEADER = STR_RA_USE + RF_RA_USE_COUNT,
    STR_BUDGET = STR_WAIT_HEADER + RF_WAIT_HEADER_COUNT,
    STR_CLASS_HTTP = 100,
    STR_CLASS_NAMED = STR_CLASS_HTTP + 600,
    STR_CLASS_TRANSPORT = STR_CLASS_NAMED + RF_NAMED_CLASS_COUNT
};
_Static_assert(STR_BUDGET + RF_BUDGET_SOURCE_COUNT <= STR_CLASS_HTTP, "string cache slots overlap");

#define RF_X_CLASS_NAME(name, str) str,
static const char *const named_classes[] = {RF_NAMED_CLASSES(RF_X_CLASS_NAME)};

/* The verdict's keys (K_*), as docs/lua.md's Verdict table names them. */
static const char *const verdict_key_names[] = {
    "retry", "reason", "class", "delay_ms", "timeout_ms", "retry_after", "retry_after_header", "route", "budget"};
_Static_assert(sizeof verdict_key_names / sizeof *verdict_key_names == N_VERDICT_KEYS, "one name per verdict key");

/* The text of string cache slot `slot`: a verdict key, a reason, a retry_after use, a wait header, a budget source
 * or a class name (HTTP_<nnn> formatted into buf). */
static const char *slot_text(int slot, char buf[RF_CLASS_NAME_MAX]) {
    if (slot >= STR_CLASS_TRANSPORT) {
        rf_classify(0, (rf_transport)(slot - STR_CLASS_TRANSPORT), buf);
        return buf;
    }
    if (slot >= STR_CLASS_NAMED) return named_classes[slot - STR_CLASS_NAMED];
    if (slot >= STR_CLASS_HTTP) {
        rf_classify(slot - STR_CLASS_HTTP, RF_TRANSPORT_OK, buf);
        return buf;
    }
    if (slot >= STR_BUDGET) return rf_budget_source_name((rf_budget_source)(slot - STR_BUDGET));
    if (slot >= STR_WAIT_HEADER) return rf_wait_header_name((rf_wait_header)(slot - STR_WAIT_HEADER));
    if (slot >= STR_RA_USE) return rf_retry_after_use_name((rf_retry_after_use)(slot - STR_RA_USE));
    if (slot >= STR_REASON) return rf_reason_name((rf_reason)(slot - STR_REASON));
    return verdict_key_names[slot - STR_KEY];
}

/* Pushes cache[slot] (cache: its index, 0 for none); on a miss its text (slot_text), stored there for the next
 * time with remember. The text is made only on a miss: a hit costs one lookup. A cache replaced through the
 * debug library costs speed, never a wrong string type. */
static inline __attribute__((always_inline)) void push_cached(lua_State *L, int cache, int slot, bool remember) {
    if (cache != 0) {
        if (lua_rawgeti(L, cache, slot) == LUA_TSTRING) return;
        lua_pop(L, 1);
    }
    char buf[RF_CLASS_NAME_MAX];
    lua_pushstring(L, slot_text(slot, buf));
    if (remember && cache != 0) {
        lua_pushvalue(L, -1);
        lua_rawseti(L, cache, slot);
    }
}

/* Makes the string cache, held by the binding's state: the fixed slots filled, the class ones on use. */
static void make_string_cache(lua_State *L, rfl_state *st) {
    /* Sized for every slot, the class slots too, so that each lookup is an array access, never a hash one. */
    lua_createtable(L, STR_CLASS_TRANSPORT + RF_TRANSPORT_COUNT, 0);
    char buf[RF_CLASS_NAME_MAX];
    for (int slot = STR_KEY; slot < STR_BUDGET + RF_BUDGET_SOURCE_COUNT; slot++) {
        lua_pushstring(L, slot_text(slot, buf));
        lua_rawseti(L, -2, slot);
    }
    rfl_hold(L, st, RFL_STATE_STRINGS);
}

/* The string cache slot of rf_classify(status, transport), found without reading the name: a transport outcome
 * other than ok decides the class alone, ok gives HTTP_<status> for 100..599 and UNKNOWN (the ok slot) for
 * anything else (rf_classify's contract, decide.h). transport must be below RF_TRANSPORT_COUNT. */
static inline int fact_class_slot(int status, rf_transport transport) {
    if (transport == RF_TRANSPORT_OK && status >= 100 && status <= 599) return STR_CLASS_HTTP + status;
    return STR_CLASS_TRANSPORT + (int)transport;
}

/* The string cache slot of a class name: HTTP_<nnn> by its status, a named class by its index; 0 if neither. */
static int class_slot(const char *c) {
    if (c[0] == 'H' && c[4] == '_' && c[5] >= '1' && c[5] <= '5' && c[6] >= '0' && c[6] <= '9' && c[7] >= '0' &&
        c[7] <= '9' && c[8] == '\0' && memcmp(c, "HTTP", 4) == 0)
        return STR_CLASS_HTTP + (c[5] - '0') * 100 + (c[6] - '0') * 10 + (c[7] - '0');
    for (int i = 0; i < RF_NAMED_CLASS_COUNT; i++)
        if (strcmp(c, named_classes[i]) == 0) return STR_CLASS_NAMED + i;
    return 0;
}

/* Where set_verdict_fields finds the key strings: the decide closure's upvalues from `first` on, or, with
 * first == 0, the string cache. */
typedef struct key_source {
    int first;
    int cache; /* the string cache's index, 0 when there is none */
} key_source;

static void push_key(lua_State *L, const key_source *ks, int k) {
    if (ks->first != 0)
        lua_pushvalue(L, lua_upvalueindex(ks->first + k));
    else
        push_cached(L, ks->cache, STR_KEY + k, false);
}

/*
 * Sets the verdict fields {retry, reason, class, delay_ms, timeout_ms, retry_after, retry_after_header, route,
 * budget} of policy p into the table on top of the stack, raw; ks: where the key strings are. retry_after_header,
 * route and budget only when present; with clear_absent, an absent one is set to nil, so that a reused table
 * keeps nothing from an earlier verdict. Every string comes from the cache: the common verdict interns nothing.
 */
static void set_verdict_fields(lua_State *L, const key_source *ks, const rf_policy *p, const rf_verdict *v,
                               bool clear_absent) {
    int cache = ks->cache; /* each field: key and value pushed above the table, then a raw set at -3 */
    push_key(L, ks, K_RETRY);
    lua_pushboolean(L, v->retry);
    lua_rawset(L, -3);
    push_key(L, ks, K_REASON);
    push_cached(L, cache, STR_REASON + (int)v->reason, false);
    lua_rawset(L, -3);
    push_key(L, ks, K_CLASS);
    int slot = class_slot(v->class_name);
    if (slot != 0)
        push_cached(L, cache, slot, true);
    else
        lua_pushstring(L, v->class_name);
    lua_rawset(L, -3);
    push_key(L, ks, K_DELAY);
    lua_pushinteger(L, v->delay_ms);
    lua_rawset(L, -3);
    push_key(L, ks, K_TIMEOUT);
    lua_pushinteger(L, v->timeout_ms);
    lua_rawset(L, -3);
    push_key(L, ks, K_RA);
    push_cached(L, cache, STR_RA_USE + (int)v->retry_after, false);
    lua_rawset(L, -3);
    bool has_header = v->retry_after_header >= 0 && v->retry_after_header < RF_WAIT_HEADER_COUNT;
    if (has_header || clear_absent) {
        push_key(L, ks, K_RA_HEADER);
        if (has_header)
            push_cached(L, cache, STR_WAIT_HEADER + v->retry_after_header, false);
        else
            lua_pushnil(L);
        lua_rawset(L, -3);
    }
    rf_route_view rv;
    bool has_route = v->route >= 0 && rf_policy_route(p, (size_t)v->route, &rv) == RF_OK;
    if (has_route || clear_absent) {
        push_key(L, ks, K_ROUTE);
        if (has_route)
            lua_pushstring(L, rv.endpoint); /* interned: no allocation while the previous verdict holds it */
        else
            lua_pushnil(L);
        lua_rawset(L, -3);
    }
    bool has_budget = v->budget != RF_BUDGET_NONE; /* only when a retry budget took part */
    if (has_budget || clear_absent) {
        push_key(L, ks, K_BUDGET);
        if (has_budget)
            push_cached(L, cache, STR_BUDGET + (int)v->budget, false);
        else
            lua_pushnil(L);
        lua_rawset(L, -3);
    }
}

/* Pushes the verdict table of policy p (the fields of set_verdict_fields). */
void rfl_push_verdict(lua_State *L, const rf_policy *p, const rf_verdict *v) {
    luaL_checkstack(L, 5, "verdict");
    rfl_held(L, rfl_state_get(L), RFL_STATE_STRINGS);
    key_source ks = {0, lua_type(L, -1) == LUA_TTABLE ? lua_gettop(L) : 0};
    lua_createtable(L, 0, 8);
    set_verdict_fields(L, &ks, p, v, false);
    lua_remove(L, -2);
}
/* ---- the two decision forms ------------------------------------------------------------------------ */

/* The upvalues of the decide closures (policy.decide and core.decide): what every call needs, one indexed read away
 * (push_decide). debug.setupvalue can replace any of them, so none vouches for an object (objects are known by
 * their tags) and each is checked where it is read (rfl_upvalue; a replaced one only costs its fast path). */
enum { UV_STATE = 1, UV_STRINGS, UV_KEYS, N_DECIDE_UPVALUES = UV_KEYS + N_VERDICT_KEYS - 1 };

/* The binding's state from upvalue i (a decide closure's or a decider's), or from the registry when debug.setupvalue
 * replaced it. */
static inline rfl_state *upvalue_state(lua_State *L, int i) {
    rfl_state *st = rfl_testobject(L, lua_upvalueindex(i), RFL_STATE);
    return st != NULL ? st : rfl_state_get(L);
}

/* policy:decide(facts [, rng [, out]]) → verdict table. Raises on bad facts (argument errors name the key).
 * With out (a table, the third argument; rng may be nil), the verdict's fields are written into out, which is
 * returned: nothing is allocated when one facts table and one out table are reused, but the table walk and the
 * field writes cost about what a pure-Lua classifier does (bench/run): policy:decider is the fast form
 * (docs/lua.md). The rng stays the second argument only, so a table posing as an rng is refused, never taken for
 * out. Nothing between reading the facts and deciding allocates or runs Lua, so the facts' strings stay as read. */
static int l_decide(lua_State *L) {
    lua_settop(L, 4); /* the arguments at 1..4, absent ones nil */
    lpolicy *lp = check_lpolicy(L, 1);
    if (lp->p == NULL) rfl_error(L, "attempt to use a freed policy");
    const rf_policy *p = lp->p;
    int out = 0, out_type = lua_type(L, 4);
    if (out_type > LUA_TNIL) {
        if (out_type != LUA_TTABLE) luaL_checktype(L, 4, LUA_TTABLE); /* raises the usual message */
        out = 4;
    }
    rfl_state *st = upvalue_state(L, UV_STATE);
    rf_rng *rng = lua_type(L, 3) <= LUA_TNIL ? &st->rng : check_rng(L, 3);
    rf_facts f;
    read_facts(L, 2, st->fact_ids, &f);
    rf_verdict v;
    rf_error err;
    if (rf_decide(p, &f, rng, NULL, &v, &err) != RF_OK)
        return luaL_argerror(L, 2, lua_pushfstring(L, "facts.%s %s", err.path, err.message));
    key_source ks = {UV_KEYS, rfl_upvalue(L, UV_STRINGS, LUA_TTABLE)};
    if (out == 0)
        lua_createtable(L, 0, 8);
    else
        lua_pushvalue(L, out);
    set_verdict_fields(L, &ks, p, &v, out != 0);
    return 1;
}

/* ---- a request's decider (policy:decider) ----------------------------------------------------------- */

/*
 * The state of one request's decider: the request's method, path and key presence, bound once (facts; method and
 * path point into text), the route they match (matched once: a policy is immutable), and the policy and rng it
 * decides with. It holds those two userdata (rfl_hold; the per-state rng is the binding's state's) until its __gc,
 * not through the closure's upvalues, which debug.setupvalue could replace; __gc clears lp and rng, so that a state
 * resurrected by another finalizer refuses instead of reading freed memory. Each call writes its attempt's facts
 * into facts, in place: every field rf_decide reads is either bound here or written by every call.
 */
typedef struct ldecider {
    lpolicy *lp;
    void *taken[1]; /* its policy, taken (rfl_take) until __gc */
    rf_rng *rng;
    long route;
    rf_facts facts;
    char text[]; /* method NUL path NUL */
} ldecider;

static int l_decider_gc(lua_State *L) {
    ldecider *d = rfl_checkobject(L, 1, RFL_DECIDER);
    rfl_retire(L, d, d->taken, 1);
    d->lp = NULL;
    d->rng = NULL;
    return 0;
}

/* The decision of a decider, in C alone (no Lua): the facts are d's, with the attempt's fields written by the
 * caller. */
static inline rf_status decider_decide(const ldecider *d, rf_verdict *v, rf_error *err) {
    return rf_decide_on_route(d->lp->p, d->route, &d->facts, d->rng, NULL, v, err);
}

/*
 * decide(status, transport, attempts, elapsed_ms [, retry_after [, date [, now_ms]]]) → retry, reason, delay_ms,
 * timeout_ms, class: the closure policy:decider returns. The same facts as policy:decide's table (read by the same
 * readers, each argument named as the fact it is), with the method, path, key presence and rng bound; the decision
 * is rf_decide's, and the five values are the verdict's fields of those names, the strings from the binding's string
 * cache (nothing allocated). Raises naming the argument; raises "decider is closed" after its state was collected.
 */
static int l_decider_call(lua_State *L) {
    ldecider *d = rfl_testobject(L, lua_upvalueindex(1), RFL_DECIDER);
    if (d == NULL) return rfl_error(L, "retryfreeze: this decider's state was replaced (debug.setupvalue)");
    if (d->lp == NULL || d->lp->p == NULL) return rfl_error(L, "retryfreeze: decider is closed");
    rf_facts *f = &d->facts;
    read_attempt_facts(L, 1, f);
    rf_verdict v;
    rf_error err;
    if (decider_decide(d, &v, &err) != RF_OK) return rfl_error(L, "decider: %s %s", err.path, err.message);
    int cache = rfl_upvalue(L, 2, LUA_TTABLE);
    lua_pushboolean(L, v.retry);
    push_cached(L, cache, STR_REASON + (int)v.reason, false);
    lua_pushinteger(L, v.delay_ms);
    lua_pushinteger(L, v.timeout_ms);
    push_cached(L, cache, fact_class_slot(f->status, f->transport), true); /* v.class_name, rf_decide's */
    return 5;
}

/* Replaces the decider closure on top of the stack by the FFI's closure over the decider state at state_idx, when
 * the FFI path is on (lua_ffi.c held its wrap at RFL_STATE_FFI: wrap(state, classic)); returns 1, the closure on
 * top. Under Lua 5.4 the classic closure stays. */
static int ffi_decider(lua_State *L, int state_idx) {
#if LUA_VERSION_NUM == 501
    if (rfl_held(L, rfl_state_get(L), RFL_STATE_FFI) != LUA_TFUNCTION) {
        lua_pop(L, 1);
        return 1; /* the classic closure, on top */
    }
    lua_pushvalue(L, state_idx);
    lua_pushvalue(L, -3);
    lua_call(L, 2, 1); /* wrap(state, classic) */
    return 1;
#else
    (void)L;
    (void)state_idx;
    return 1;
#endif
}

/*
 * policy:decider(method, path, has_key [, rng]) → decide: one request's decider, the way Envoy keeps a retry
 * state per request. The method and path are copied and matched to their route once (rf_decide_on_route), as
 * policy:decide routes them (a method or path no route matches decides no-route each time); has_key is a
 * boolean, the request carries an idempotency key; rng an rf.rng (nil: the per-state RNG). decide(status,
 * transport, attempts, elapsed_ms [, retry_after [, date [, now_ms]]]) then decides each attempt with no table in
 * or out and nothing allocated.
 * The policy and rng stay alive while the decider does. Raises naming a bad argument; a lowercase method raises
 * as rf_decide refuses it (RFC 9110 §9.1).
 */
static int l_decider(lua_State *L) {
    lua_settop(L, 5);
    lpolicy *lp = check_lpolicy(L, 1);
    if (lp->p == NULL) return rfl_error(L, "attempt to use a freed policy");
    size_t mlen = 0, plen = 0;
    const char *method = lua_type(L, 2) == LUA_TSTRING ? lua_tolstring(L, 2, &mlen) : NULL;
    if (method == NULL) return luaL_argerror(L, 2, "method must be a string");
    const char *path = lua_type(L, 3) == LUA_TSTRING ? lua_tolstring(L, 3, &plen) : NULL;
    if (path == NULL) return luaL_argerror(L, 3, "path must be a string");
    if (lua_type(L, 4) != LUA_TBOOLEAN) return luaL_argerror(L, 4, "has_key must be a boolean");
    if (mlen > 4096 || plen > 1048576) return luaL_argerror(L, mlen > 4096 ? 2 : 3, "too long");
    rf_rng *rng;
    if (lua_type(L, 5) <= LUA_TNIL) {
        rng = &rfl_state_push(L)->rng; /* held below: the very object d->rng points into */
    } else {
        rng = check_rng(L, 5);
        lua_pushvalue(L, 5);
    }
    /* A lowercase method: refused now, as rf_decide refuses it, rather than at the first attempt. */
    rf_facts probe = {.method = method,
                      .method_len = mlen,
                      .path = path,
                      .path_len = plen,
                      .status = 200,
                      .attempts = 1,
                      .has_idempotency_key = lua_toboolean(L, 4)};
    long route = rf_policy_match(lp->p, method, mlen, path, plen);
    rf_verdict v;
    rf_error err;
    rf_rng scratch = *rng;
    if (rf_decide_on_route(lp->p, route, &probe, &scratch, NULL, &v, &err) != RF_OK)
        return luaL_argerror(L, 2, lua_pushfstring(L, "%s %s", err.path, err.message));
    ldecider *d = rfl_newobject(L, RFL_DECIDER, sizeof *d + mlen + plen + 2); /* at 7 */
    memcpy(d->text, method, mlen);
    d->text[mlen] = '\0';
    memcpy(d->text + mlen + 1, path, plen);
    d->text[mlen + 1 + plen] = '\0';
    d->facts = probe;
    d->facts.method = d->text;
    d->facts.path = d->text + mlen + 1;
    d->route = route;
    lua_pushvalue(L, 6);
    rfl_hold(L, d, 2); /* the rng's object (or the binding's state) */
    lua_pushvalue(L, 1);
    rfl_hold(L, d, 1); /* the policy */
    d->taken[0] = rfl_take(L, 1, RFL_POLICY);
    d->lp = lp;
    d->rng = rng;
    rfl_set_open(d, true);
    lua_pushvalue(L, 7);
    rfl_held(L, rfl_state_get(L), RFL_STATE_STRINGS); /* at 9: the closure's upvalues are d and the cache */
    lua_pushcclosure(L, l_decider_call, 2);
    return ffi_decider(L, 7); /* under LuaJIT, the FFI's closure over d */
}

/* ---- the decider's FFI entry (lua_ffi.c) ------------------------------------------------------------ */

/* Whether x (a number as a double, what the FFI passes) is an integer in lo..hi that int_fact accepts. */
static inline bool fact_exact(double x, lua_Integer lo, lua_Integer hi) {
    if (hi > RFL_INT_EXACT) hi = RFL_INT_EXACT;
    return x >= (double)lo && x <= (double)hi && x == (double)(int64_t)x; /* NaN fails the first test */
}

/* A decider's decision for one attempt from C alone, for the FFI: d a decider's bytes (rfl_object_at), the attempt's
 * facts as a decider's call takes them, the numbers as doubles and the strings with their lengths, checked here as
 * read_attempt_facts checks them (the FFI's Lua half checks only the types) and written into d's facts. RF_OK and *v;
 * RF_EINVAL when a fact is out of its range, d is closed or the engine refused the facts: the classic call then
 * raises the classic message. */
rf_status rfl_decider_attempt(void *obj, double status, rf_transport transport, double attempts, double elapsed_ms,
                              const char *retry_after, size_t retry_after_len, const char *date, size_t date_len,
                              double now_ms, rf_verdict *v) {
    ldecider *d = obj;
    if (!fact_exact(status, 0, 599) || (status != 0 && status < 100) || !fact_exact(attempts, 1, FACT_ATTEMPTS_MAX) ||
        !fact_exact(elapsed_ms, 0, FACT_MS_MAX) || !fact_exact(now_ms, 0, FACT_MS_MAX))
        return RF_EINVAL;
    if (d->lp == NULL || d->lp->p == NULL) return RF_EINVAL;
    rf_facts *f = &d->facts;
    f->status = (int)status;
    f->transport = transport;
    f->attempts = (int)attempts;
    f->elapsed_ms = (int64_t)elapsed_ms;
    f->retry_after = retry_after;
    f->retry_after_len = retry_after_len;
    f->date = date;
    f->date_len = date_len;
    f->now_ms = (int64_t)now_ms;
    attempt_clock(f);
    return decider_decide(d, v, NULL);
}

/* Pushes the decide closure (l_decide) with its upvalues (UV_*); the binding's state and its string cache must
 * exist. */
static void push_decide(lua_State *L, rfl_state *st) {
    luaL_checkstack(L, N_DECIDE_UPVALUES + 1, "decide");
    rfl_state_push(L);
    rfl_held(L, st, RFL_STATE_STRINGS);
    int strings = lua_gettop(L);
    for (int k = 0; k < N_VERDICT_KEYS; k++) lua_rawgeti(L, strings, STR_KEY + k);
    lua_pushcclosure(L, l_decide, N_DECIDE_UPVALUES);
}

/* policy:budget{method=, path=, attempts=, elapsed_ms=} → {allowed, timeout_ms, reason, route}. */
static int l_budget(lua_State *L) {
    const rf_policy *p = rfl_check_policy(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    size_t mlen = 0, plen = 0;
    lua_Integer attempts = 0, elapsed = 0;
    const char *method = NULL, *path = NULL;
    fact_src src = {2, true};
    lua_pushnil(L);
    while (lua_next(L, 2) != 0) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        int v = lua_gettop(L);
        if (strcmp(k, "method") == 0)
            method = str_fact(L, v, src, k, &mlen);
        else if (strcmp(k, "path") == 0)
            path = str_fact(L, v, src, k, &plen);
        else if (strcmp(k, "attempts") == 0)
            attempts = int_fact(L, v, src, k, 0, FACT_ATTEMPTS_MAX, 0);
        else if (strcmp(k, "elapsed_ms") == 0)
            elapsed = int_fact(L, v, src, k, 0, FACT_MS_MAX, 0);
        else
            luaL_argerror(L, 2, lua_pushfstring(L, "unknown budget key '%s' (method, path, attempts, elapsed_ms)", k));
        lua_pop(L, 1);
    }
    if (method == NULL || path == NULL) return luaL_argerror(L, 2, "method and path are required");
    rf_attempt_budget b;
    rf_error err;
    if (rf_budget(p, method, mlen, path, plen, (int)attempts, elapsed, &b, &err) != RF_OK)
        return luaL_argerror(L, 2, lua_pushfstring(L, "%s %s", err.path, err.message));
    lua_createtable(L, 0, 4);
    lua_pushboolean(L, b.allowed);
    lua_setfield(L, -2, "allowed");
    lua_pushinteger(L, b.timeout_ms);
    lua_setfield(L, -2, "timeout_ms");
    lua_pushstring(L, rf_reason_name(b.reason));
    lua_setfield(L, -2, "reason");
    rf_route_view rv;
    if (b.route >= 0 && rf_policy_route(p, (size_t)b.route, &rv) == RF_OK) {
        lua_pushstring(L, rv.endpoint);
        lua_setfield(L, -2, "route");
    }
    return 1;
}

/* policy:classify{status=, transport=} → class token such as "HTTP_503" or "TIMEOUT". */
/* Reads a {status=, transport=} table at arg (absent keys: status 0, transport "ok"); any other key raises
 * "unknown <what> '<key>' (status, transport)". */
static void read_status_transport(lua_State *L, int arg, const char *what, lua_Integer *status, rf_transport *t) {
    luaL_checktype(L, arg, LUA_TTABLE);
    *t = RF_TRANSPORT_OK;
    *status = 0;
    fact_src src = {arg, true};
    lua_pushnil(L);
    while (lua_next(L, arg) != 0) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        size_t len;
        if (strcmp(k, "status") == 0)
            *status = int_fact(L, lua_gettop(L), src, k, 0, 599, 0);
        else if (strcmp(k, "transport") == 0) {
            const char *s = str_fact(L, lua_gettop(L), src, k, &len);
            if (s != NULL && rf_transport_parse(s, len, t) != 0)
                luaL_argerror(L, arg, lua_pushfstring(L, "unknown transport '%s'", s));
        } else
            luaL_argerror(L, arg, lua_pushfstring(L, "unknown %s '%s' (status, transport)", what, k));
        lua_pop(L, 1);
    }
}

static int l_classify(lua_State *L) {
    rfl_check_policy(L, 1);
    rf_transport t;
    lua_Integer status;
    read_status_transport(L, 2, "classify key", &status, &t);
    char buf[RF_CLASS_NAME_MAX];
    rf_classify((int)status, t, buf);
    lua_pushstring(L, buf);
    return 1;
}

/* policy:routes() → a fresh array of route tables (copies: changing them changes nothing): each route's fields as
 * the lock schema's rows name them (rfl_push_fields), plus its endpoint's method and pattern. */
static int l_routes(lua_State *L) {
    const rf_policy *p = rfl_check_policy(L, 1);
    size_t n = rf_policy_route_count(p);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        luaL_checkstack(L, 3, "policy:routes"); /* a route, a key and a value */
        rf_route_view r;
        rf_policy_route(p, i, &r);
        lua_createtable(L, 0, 16);
        rfl_push_fields(L, p, i, -1, RF_PLACE_ROUTE);
        lua_pushstring(L, r.method);
        lua_setfield(L, -2, "method");
        lua_pushstring(L, r.pattern);
        lua_setfield(L, -2, "pattern");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* policy:effective_json() → the effective policy as indented JSON (what `retryfreeze check` prints). */
static int l_effective_json(lua_State *L) {
    lua_pushstring(L, rf_policy_pretty_json(rfl_check_policy(L, 1)));
    return 1;
}

/* policy:canonical_json() → the compact canonical JSON whose SHA-256 is the digest. */
static int l_canonical_json(lua_State *L) {
    lua_pushstring(L, rf_policy_canonical_json(rfl_check_policy(L, 1)));
    return 1;
}

/* policy:match(method, path) → endpoint of the deciding route, or nil. */
static int l_match(lua_State *L) {
    const rf_policy *p = rfl_check_policy(L, 1);
    size_t mlen, plen;
    const char *m = luaL_checklstring(L, 2, &mlen), *path = luaL_checklstring(L, 3, &plen);
    long i = rf_policy_match(p, m, mlen, path, plen);
    rf_route_view r;
    if (i < 0 || rf_policy_route(p, (size_t)i, &r) != RF_OK) return 0;
    lua_pushstring(L, r.endpoint);
    return 1;
}

/* policy:next_segments(method, prefix) → literals, params, rest: of the routes of method that can match a path of
 * more than k segments beginning with prefix (its k segments each followed by "/", "/" for none;
 * rf_policy_next_segment), the distinct literal segments they name next (an array, in route order), how many take a
 * {param} there, and how many take every longer path by their last "*". retryfreeze.diff builds its request
 * classes from them. Raises on a prefix that does not start and end with "/" or that holds "?" or "#". */
static int l_next_segments(lua_State *L) {
    const rf_policy *p = rfl_check_policy(L, 1);
    size_t mlen, plen;
    const char *m = luaL_checklstring(L, 2, &mlen), *prefix = luaL_checklstring(L, 3, &plen);
    lua_settop(L, 3);
    lua_newtable(L); /* 4: the literals */
    lua_newtable(L); /* 5: the literals seen, as keys */
    lua_Integer n = 0, params = 0, rest = 0;
    size_t cursor = 0;
    rf_next_segment next;
    int found;
    while ((found = rf_policy_next_segment(p, m, mlen, prefix, plen, &cursor, &next)) == 1) {
        if (next.kind == RF_NEXT_PARAM) {
            params++;
        } else if (next.kind == RF_NEXT_REST) {
            rest++;
        } else {
            lua_pushlstring(L, next.literal, next.literal_len);
            lua_pushvalue(L, -1);
            if (lua_rawget(L, 5) == LUA_TNIL) {
                lua_pop(L, 1);
                lua_pushvalue(L, -1);
                lua_pushboolean(L, 1);
                lua_rawset(L, 5);
                lua_rawseti(L, 4, ++n);
            } else {
                lua_pop(L, 2);
            }
        }
    }
    if (found < 0) return luaL_argerror(L, 3, "prefix must start and end with '/' and hold no '?' or '#'");
    lua_pop(L, 1);
    lua_pushinteger(L, params);
    lua_pushinteger(L, rest);
    return 3;
}

/* core.sha256(text) → "sha256:<64 lowercase hex>" (rf_sha256): the pairing log's entry hashes. */
static int l_sha256(lua_State *L) {
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    char out[RF_SHA256_TEXT_LEN + 1];
    if (rf_sha256(text, len, out) != RF_OK) return rfl_error(L, "sha256 failed (libcrypto)");
    lua_pushstring(L, out);
    return 1;
}

/* The index of the route whose endpoint is argument idx (exact spelling); raises when there is none. */
static size_t route_by_endpoint(lua_State *L, const rf_policy *p, int idx) {
    size_t len;
    const char *endpoint = luaL_checklstring(L, idx, &len);
    size_t n = rf_policy_route_count(p);
    for (size_t i = 0; i < n; i++) { /* by length too: "POST /x\0…" is no route's spelling */
        rf_route_view r;
        if (rf_policy_route(p, i, &r) == RF_OK && strlen(r.endpoint) == len && strcmp(r.endpoint, endpoint) == 0)
            return i;
    }
    luaL_argerror(L, idx, lua_pushfstring(L, "no route '%s' in this policy", endpoint));
    return 0;
}

/* policy:delay_window(endpoint, attempts) → lo_ms, hi_ms: the backoff window before the retry that follows
 * attempt `attempts` (rf_backoff_window). */
static int l_delay_window(lua_State *L) {
    const rf_policy *p = rfl_check_policy(L, 1);
    size_t route = route_by_endpoint(L, p, 2);
    lua_Integer attempts = luaL_checkinteger(L, 3);
    luaL_argcheck(L, attempts >= 1 && attempts <= 1000, 3, "attempts must be 1..1000");
    int64_t lo = 0, hi = 0;
    rf_backoff_window(p, route, (int)attempts, &lo, &hi);
    lua_pushinteger(L, lo);
    lua_pushinteger(L, hi);
    return 2;
}

/* policy:gateway_refusals(endpoint, no_propagation) → nil when a gateway whose tries never wait serves the route, else
 * why not: rf_gateway_refusals's sentences (retryfreeze/gateway.h), with no_propagation (a boolean, default false)
 * for a form that reads no caller's headers (RF_GATEWAY_NO_PROPAGATION). Raises for an endpoint no route has. */
static int l_gateway_refusals(lua_State *L) {
    const rf_policy *p = rfl_check_policy(L, 1);
    size_t route = route_by_endpoint(L, p, 2);
    unsigned flags = lua_toboolean(L, 3) ? RF_GATEWAY_NO_PROPAGATION : 0u;
    char why[RF_GATEWAY_WHY_MAX];
    if (rf_gateway_refusals(p, route, flags, why, sizeof why) <= 0) {
        lua_pushnil(L);
    } else {
        lua_pushstring(L, why);
    }
    return 1;
}

/* The arguments of a question about a route's failure class: (policy, endpoint, {status=, transport=}). */
typedef struct class_question {
    const rf_policy *p;
    size_t route;
    int status;
    rf_transport transport;
} class_question;

static class_question read_class_question(lua_State *L) {
    class_question q;
    q.p = rfl_check_policy(L, 1);
    q.route = route_by_endpoint(L, q.p, 2);
    lua_Integer status;
    read_status_transport(L, 3, "key", &status, &q.transport);
    q.status = (int)status;
    return q;
}

/* policy:class_attempts(endpoint, {status=, transport=}) → the most attempts the route gives a request whose
 * failures are of that class: min(maxAttempts, its classLimits entry) (rf_policy_class_attempts). */
static int l_class_attempts(lua_State *L) {
    class_question q = read_class_question(L);
    lua_pushinteger(L, rf_policy_class_attempts(q.p, q.route, q.status, q.transport));
    return 1;
}

/* policy:class_retryable(endpoint, {status=, transport=}) → whether the route retries that failure class
 * (rf_policy_class_retryable). */
static int l_class_retryable(lua_State *L) {
    class_question q = read_class_question(L);
    lua_pushboolean(L, rf_policy_class_retryable(q.p, q.route, q.status, q.transport));
    return 1;
}

/*
 * policy:hedging(facts) → {hedged = boolean, route = endpoint|nil, max_attempts = integer, delay_ms = integer,
 * reason = string|nil}: the hedging the request of facts gets (rf_policy_hedging; the lock's hedging, docs/lock.md).
 * facts: a table as policy:decide takes, of which hedging reads method and path (strings, required) and
 * idempotency_key (a string or a boolean: whether the request carries one); any other key must be a fact name.
 * hedged: its attempts may overlap, one more every delay_ms (hedging.hedgingDelayMs) up to max_attempts
 * (hedging.maxAttempts) started; not hedged: reason says why (no-route, max-attempts: the route has no hedging,
 * mutating-without-idempotency), and max_attempts and delay_ms are 0. Reads the table raw (no Lua runs); raises on
 * a missing or mistyped method, path or idempotency_key, and on an unknown key.
 */
static int l_hedging(lua_State *L) {
    const rf_policy *p = rfl_check_policy(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    lua_pushnil(L);
    while (lua_next(L, 2) != 0) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        size_t i = 0;
        while (k != NULL && fact_keys[i] != NULL && strcmp(k, fact_keys[i]) != 0) i++;
        if (k == NULL || fact_keys[i] == NULL)
            luaL_argerror(L, 2, lua_pushfstring(L, "unknown fact '%s'", k ? k : luaL_typename(L, -2)));
        lua_pop(L, 1);
    }
    size_t mlen = 0, plen = 0;
    lua_pushliteral(L, "method");
    if (lua_rawget(L, 2) != LUA_TSTRING) luaL_argerror(L, 2, "facts.method must be a string");
    lua_pushliteral(L, "path");
    if (lua_rawget(L, 2) != LUA_TSTRING) luaL_argerror(L, 2, "facts.path must be a string");
    const char *m = lua_tolstring(L, 3, &mlen), *path = lua_tolstring(L, 4, &plen);
    lua_pushliteral(L, "idempotency_key");
    int kt = lua_rawget(L, 2);
    if (kt != LUA_TNIL && kt != LUA_TSTRING && kt != LUA_TBOOLEAN)
        luaL_argerror(
            L, 2,
            lua_pushfstring(L, "facts.idempotency_key must be a string or a boolean, got %s", luaL_typename(L, 5)));
    bool has_key = kt == LUA_TSTRING || (kt == LUA_TBOOLEAN && lua_toboolean(L, 5));
    long route = rf_policy_match(p, m, mlen, path, plen);
    rf_hedging h;
    if (rf_policy_hedging(p, route, m, mlen, has_key, &h) != RF_OK)
        luaL_argerror(L, 2, "facts.method and facts.path must not be empty");
    rf_route_view r;
    lua_createtable(L, 0, 5);
    lua_pushboolean(L, h.hedged);
    lua_setfield(L, -2, "hedged");
    lua_pushinteger(L, h.hedged ? h.max_attempts : 0);
    lua_setfield(L, -2, "max_attempts");
    lua_pushinteger(L, h.hedged ? (lua_Integer)h.delay_ms : 0);
    lua_setfield(L, -2, "delay_ms");
    if (!h.hedged) {
        lua_pushstring(L, rf_reason_name(h.why_not));
        lua_setfield(L, -2, "reason");
    }
    if (route >= 0 && rf_policy_route(p, (size_t)route, &r) == RF_OK) {
        lua_pushstring(L, r.endpoint);
        lua_setfield(L, -2, "route");
    }
    return 1;
}

static const luaL_Reg policy_methods[] = {{"decide", l_decide},
                                          {"decider", l_decider},
                                          {"budget", l_budget},
                                          {"classify", l_classify},
                                          {"routes", l_routes},
                                          {"effective_json", l_effective_json},
                                          {"canonical_json", l_canonical_json},
                                          {"match", l_match},
                                          {"next_segments", l_next_segments},
                                          {"delay_window", l_delay_window},
                                          {"gateway_refusals", l_gateway_refusals},
                                          {"class_retryable", l_class_retryable},
                                          {"class_attempts", l_class_attempts},
                                          {"hedging", l_hedging},
                                          {NULL, NULL}};

/* __index: methods by name, and the read-only fields digest, gate, retry_budget and route_count. */
static int l_policy_index(lua_State *L) {
    const rf_policy *p = rfl_check_policy(L, 1);
    const char *k = luaL_checkstring(L, 2);
    if (strcmp(k, "digest") == 0) {
        lua_pushstring(L, rf_policy_digest(p));
        return 1;
    }
    /* policy.gate, policy.retry_budget: fresh tables of the lock's objects (lock schema views), or nil. */
    if (strcmp(k, "gate") == 0) return rfl_push_lock_view(L, p, "gate") ? 1 : 0;
    if (strcmp(k, "retry_budget") == 0) return rfl_push_lock_view(L, p, "retryBudget") ? 1 : 0;
    if (strcmp(k, "route_count") == 0) {
        lua_pushinteger(L, (lua_Integer)rf_policy_route_count(p));
        return 1;
    }
    int methods = rfl_upvalue(L, 1, LUA_TTABLE); /* the method table */
    if (methods == 0) return rfl_error(L, "retryfreeze: the policy's method table was replaced (debug.setupvalue)");
    lua_pushvalue(L, 2);
    lua_rawget(L, methods);
    return 1;
}

static int l_policy_newindex(lua_State *L) {
    return rfl_error(L, "policy is immutable: cannot set '%s' (load a new lock instead)", luaL_tolstring(L, 2, NULL));
}

/* __gc: clients, steps, retry budgets and deciders take their policy, so a policy one uses is no garbage; a
 * __gc called by hand on one in use frees nothing (rfl_collectable). */
static int l_policy_gc(lua_State *L) {
    lpolicy *lp = check_lpolicy(L, 1);
    if (!rfl_collectable(lp)) return 0;
    rf_policy_free(lp->p);
    lp->p = NULL;
    rfl_set_open(lp, false);
    return 0;
}

static int l_policy_tostring(lua_State *L) {
    lpolicy *lp = check_lpolicy(L, 1);
    if (lp->p == NULL)
        lua_pushstring(L, "retryfreeze.Policy (freed)");
    else
        lua_pushfstring(L, "retryfreeze.Policy %s (%d routes)", rf_policy_digest(lp->p),
                        (int)rf_policy_route_count(lp->p));
    return 1;
}

/* core.parse_retry_after(value [, now_ms [, date]]) → delay_ms, or nil, why ("absent", "invalid", …). */
static int l_parse_retry_after(lua_State *L) {
    size_t len, dlen = 0;
    const char *v = luaL_checklstring(L, 1, &len);
    lua_Integer now = lua_isnoneornil(L, 2) ? 0 : rfl_checkinteger(L, 2);
    const char *date = luaL_optlstring(L, 3, NULL, &dlen);
    luaL_argcheck(L, now >= 0, 2, "now_ms must be >= 0");
    if (now == 0) now = (lua_Integer)rfi_wall_ms();
    int64_t delay = 0;
    rf_retry_after_status st = rf_retry_after_parse(v, len, now, date, dlen, &delay);
    if (st != RF_RA_OK) return rfl_fail(L, rf_retry_after_status_name(st), NULL);
    lua_pushinteger(L, delay);
    return 1;
}

/*
 * core.parse_wait_header(name, value [, now_ms [, date]]) → delay_ms, or nil, why ("absent", "invalid",
 * "too-long", "no-clock", "stop"). name: a lowercase wait header name (rf_wait_header_parse, retry_after.h);
 * an unknown name raises. now_ms 0 or absent: the wall clock.
 */
static int l_parse_wait_header(lua_State *L) {
    size_t nlen, len, dlen = 0;
    const char *name = luaL_checklstring(L, 1, &nlen);
    const char *v = luaL_checklstring(L, 2, &len);
    lua_Integer now = luaL_optinteger(L, 3, 0);
    const char *date = luaL_optlstring(L, 4, NULL, &dlen);
    rf_wait_header h;
    if (rf_wait_header_parse_name(name, nlen, &h) != 0 || strcmp(rf_wait_header_name(h), name) != 0)
        return luaL_argerror(L, 1, lua_pushfstring(L, "unknown wait header '%s'", name));
    luaL_argcheck(L, now >= 0, 3, "now_ms must be >= 0");
    if (now == 0) now = (lua_Integer)rfi_wall_ms();
    int64_t delay = 0;
    rf_retry_after_status st = rf_wait_header_parse(h, v, len, now, date, dlen, &delay);
    if (st != RF_RA_OK) return rfl_fail(L, rf_retry_after_status_name(st), NULL);
    lua_pushinteger(L, delay);
    return 1;
}

static void push_names(lua_State *L, const char *(*name)(int), int count) {
    lua_createtable(L, count, 0);
    for (int i = 0; i < count; i++) {
        lua_pushstring(L, name(i));
        lua_rawseti(L, -2, i + 1);
    }
}

static const char *reason_at(int i) { return rf_reason_name((rf_reason)i); }
static const char *outcome_at(int i) { return rf_outcome_name((rf_outcome)i); }
static const char *transport_at(int i) { return rf_transport_name((rf_transport)i); }
/* The GRPC_<name> class of gRPC status code i + 1 (RF_GRPC_CLASSES, in code order). */
static const char *grpc_class_at(int i) { return named_classes[RF_CLASS_GRPC_CANCELLED + i]; }
static const char *jitter_at(int i) { return rf_jitter_name((rf_jitter)i); }
static const char *wait_header_at(int i) { return rf_wait_header_name((rf_wait_header)i); }

void rfl_open_policy(lua_State *L) {
    rfl_state *st = rfl_state_open(L);
    make_fact_index(L, st);
    make_string_cache(L, st);
    static const luaL_Reg rng_methods[] = {{"between", l_rng_between}, {NULL, NULL}};
    static const luaL_Reg decider_meta[] = {{"__gc", l_decider_gc}, {NULL, NULL}};
    static const luaL_Reg policy_meta[] = {
        {"__newindex", l_policy_newindex}, {"__gc", l_policy_gc}, {"__tostring", l_policy_tostring}, {NULL, NULL}};
    rfl_new_type(L, RFL_RNG, rng_methods, NULL);
    rfl_new_type(L, RFL_DECIDER, NULL, decider_meta);

    rfl_new_metatable(L, RFL_POLICY, NULL, policy_meta);
    luaL_newlibtable(L, policy_methods);
    luaL_setfuncs(L, policy_methods, 0);
    push_decide(L, st); /* replaces the plain entry: decide carries its upvalues */
    lua_setfield(L, -2, "decide");
    lua_pushcclosure(L, l_policy_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);

    static const luaL_Reg funcs[] = {{"load_string", l_load_string},
                                     {"load_file", l_load_file},
                                     {"rng", l_rng_new},
                                     {"parse_retry_after", l_parse_retry_after},
                                     {"parse_wait_header", l_parse_wait_header},
                                     {"decide", l_decide},
                                     {"budget", l_budget},
                                     {"sha256", l_sha256},
                                     {NULL, NULL}};
    luaL_setfuncs(L, funcs, 0);
    push_decide(L, st);
    lua_setfield(L, -2, "decide");
    push_names(L, reason_at, RF_REASON_COUNT);
    lua_setfield(L, -2, "reasons");
    push_names(L, outcome_at, RF_OUTCOME_COUNT);
    lua_setfield(L, -2, "outcomes");
    push_names(L, transport_at, RF_TRANSPORT_COUNT);
    lua_setfield(L, -2, "transports");
    push_names(L, grpc_class_at, RF_GRPC_STATUS_MAX);
    lua_setfield(L, -2, "grpc_classes");
    push_names(L, jitter_at, RF_JITTER_COUNT);
    lua_setfield(L, -2, "jitters");
    push_names(L, wait_header_at, RF_WAIT_HEADER_COUNT);
    lua_setfield(L, -2, "wait_headers");
    lua_pushstring(L, rf_version());
    lua_setfield(L, -2, "VERSION");
    lua_pushliteral(L, RF_OTHER_SEGMENT); /* the witnesses of "any other segment / method" (policy.h) */
    lua_setfield(L, -2, "OTHER_SEGMENT");
    lua_pushliteral(L, RF_OTHER_METHOD);
    lua_setfield(L, -2, "OTHER_METHOD");
}
