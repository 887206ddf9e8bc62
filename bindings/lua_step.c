/*
 * Lua binding of the transport-free attempt loop (retryfreeze/attempt_step.h), for rf.flow
 * (lua/retryfreeze/io_flow.lua): core.step(policy, request, opts) → "retryfreeze.Step" with step:begin,
 * step:after and step:finish; the clocks core.wall_ms() and core.monotonic_ms(). Retry budgets (io.retry_budget) are
 * rf.retry_budget's (lua_retry_budget.c). The step decides nothing itself: rf_budget, rf_decide, the hook's narrowing
 * and the ledger record all run in attempt_step.c, as for client:request.
 */
#define _POSIX_C_SOURCE 200809L
#include "lua_retryfreeze.h"
#include "../core/src/util/clock_ms.h"

#include "retryfreeze/attempt_step.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The step's holdings (rfl_hold): everything its C state points into stays alive as long as the step. */
enum { H_POLICY = 1, H_KEEP = 2, H_LEDGER = 3, H_RNG = 4, H_BUDGET = 5 };
/* The objects it takes (lstep.taken). */
enum { T_POLICY, T_LEDGER, T_BUDGET };

/* A step. Finished (step:finish) is its closed state: every method then raises the type's closed message. */
typedef struct lstep {
    rf_step s;
    rf_request req;   /* method, path, key: strings kept in the H_KEEP table, or in `strings` once reused */
    rf_response resp; /* freed at finish and by __gc (rf_response_clear) */
    rf_ledger *ledger;
    rf_rng *rng;
    rf_rng own_rng; /* when opts.rng is absent: seeded from the OS */
    rf_retry_budget *budget;
    void *taken[3]; /* its policy, io.ledger and io.retry_budget (T_POLICY, T_LEDGER, T_BUDGET), taken (rfl_take)
                       until finish or __gc */
    void *kept[3];  /* the same objects, remembered after they are given back: a step the FFI ended keeps them in its
                       holdings and takes them again when it is reused (rfl_step_reuse) */
    const rf_policy *policy;
    char *strings; /* a reused step's method, path and key, NUL-terminated in turn (malloc'd, grown; freed with the
                      step) */
    size_t strings_cap;
    bool began;
} lstep;

/* A clock takes no argument: a script passing one (a start time, say) has misread what it returns. */
static void check_no_args(lua_State *L) {
    if (lua_gettop(L) > 0) luaL_argerror(L, 1, "no arguments expected");
}

/* core.wall_ms() (rf.now_ms) → Unix time in ms: CLOCK_REALTIME, the clock the ledger's ts and the HTTP-date
 * arithmetic read. It may step (NTP, an operator): time intervals with core.monotonic_ms. Raises on any argument. */
static int l_wall_ms(lua_State *L) {
    check_no_args(L);
    lua_pushinteger(L, (lua_Integer)rfi_wall_ms());
    return 1;
}

/* core.monotonic_ms() (rf.monotonic_ms) → ms on CLOCK_MONOTONIC, the clock the client measures elapsed_ms and
 * deadlines on: never goes back, counts from an unspecified start (on Linux, the boot), so only differences mean
 * anything; a reading is far below 2^53, as rf.flow's io.now_ms must be. Raises on any argument. */
static int l_monotonic_ms(lua_State *L) {
    check_no_args(L);
    lua_pushinteger(L, (lua_Integer)rfi_mono_ms());
    return 1;
}

/* The clock reading at arg (ms): an integer in 0..2^53-1 (exact in a double, as under LuaJIT), or raises naming its
 * source (io.now_ms or io.wall_ms). Elapsed times are differences of these readings: bounding them keeps that
 * arithmetic far from int64 overflow, whatever a host's clock returns. */
static int64_t clock_arg(lua_State *L, int arg, const char *what) {
    if (lua_type(L, arg) == LUA_TNUMBER) { /* the range first: LuaJIT's numbers are doubles */
        lua_Number n = lua_tonumber(L, arg);
        if (!(n >= 0 && n <= 9007199254740991.0)) {
            char got[48];
            snprintf(got, sizeof got, "%.0f", (double)n);
            rfl_error(L, "rf.flow: %s must return milliseconds in 0..2^53-1, got %s", what, got);
        }
    }
    return (int64_t)rfl_checkinteger(L, arg);
}

/* request[key] as a string kept in the keeper table at keep; NULL when nil. Raises on another type. */
static const char *keep_string(lua_State *L, int req, int keep, const char *key, bool required) {
    lua_getfield(L, req, key);
    if (lua_isnil(L, -1) && !required) {
        lua_pop(L, 1);
        return NULL;
    }
    if (lua_type(L, -1) != LUA_TSTRING)
        rfl_error(L, "rf.flow: request.%s must be a string, got %s", key, luaL_typename(L, -1));
    size_t len = 0;
    const char *s = lua_tolstring(L, -1, &len);
    if (memchr(s, '\0', len) != NULL)
        rfl_error(L, "rf.flow: request.%s must not contain a NUL byte (C would cut the string there)", key);
    lua_setfield(L, keep, key);
    return s;
}

/* Releases what the step took and holds, and frees its response: at finish, __gc, and when core.step raised.
 * Never raises. */
static void step_release(lua_State *L, void *obj) {
    lstep *ls = obj;
    rf_response_clear(&ls->resp);
    rfl_retire(L, ls, ls->taken, 3);
    free(ls->strings); /* the request the step served last has ended: nothing points into them any more */
    ls->strings = NULL;
    ls->strings_cap = 0;
}

/* Raises unless request.headers (of the request table at idx) is nil or a table of string names to string values
 * that rf_request_header_check accepts, the client's rule: a step sends nothing, but its host sends these headers,
 * so a framing header (Content-Length, Host, …) or a CR/LF in a value is refused here, before any attempt. */
static void check_headers(lua_State *L, int idx) {
    if (lua_getfield(L, idx, "headers") == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    if (lua_type(L, -1) != LUA_TTABLE)
        rfl_error(L, "rf.flow: request.headers must be a table of name = value, got %s", luaL_typename(L, -1));
    const int t = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, t) != 0) { /* raw: no metamethod runs */
        if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
            rfl_error(L, "rf.flow: request.headers must map names (strings) to values (strings)");
        size_t nlen = 0, vlen = 0;
        const char *name = lua_tolstring(L, -2, &nlen), *value = lua_tolstring(L, -1, &vlen);
        if (memchr(name, '\0', nlen) != NULL || memchr(value, '\0', vlen) != NULL)
            rfl_error(L, "rf.flow: request.headers: header %s must not contain a NUL byte",
                      memchr(name, '\0', nlen) != NULL ? "names" : "values");
        const char *line = lua_pushfstring(L, "%s: %s", name, value);
        rf_error err;
        if (rf_request_header_check(line, &err) != RF_OK) rfl_error(L, "rf.flow: request.%s %s", err.path, err.message);
        lua_pop(L, 2); /* the line and the value */
    }
    lua_pop(L, 1);
}

/* core.step(policy, request, opts, now_ms) → step, propagates. request: {method=, path=, idempotency_key=,
 * inbound_headers=, …} (other keys are the host's); opts: {ledger=, rng=, retry_budget=}. Raises on a bad argument.
 * The clock starts at now_ms. propagates: whether the request's route has propagation (docs/lock.md), i.e. whether
 * step:propagation() can return headers; without it the caller never needs to ask. */
static int step_new(lua_State *L, rfl_call *call) {
    rfl_check_policy(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    luaL_checktype(L, 3, LUA_TTABLE);
    int64_t now = clock_arg(L, 4, "io.now_ms");
    lua_settop(L, 4);
    lstep *ls = rfl_make(L, call, RFL_STEP, sizeof *ls, step_release);
    const rf_policy *p = rfl_take_policy(L, 1, &ls->taken[T_POLICY]);
    lua_pushvalue(L, 1);
    rfl_hold(L, ls, H_POLICY);
    lua_createtable(L, 0, 4); /* method, path, idempotency_key, inbound_headers: sized once, never rehashed */
    int keep = lua_gettop(L);
    ls->req.method = keep_string(L, 2, keep, "method", true);
    ls->req.path = keep_string(L, 2, keep, "path", true);
    ls->req.idempotency_key = keep_string(L, 2, keep, "idempotency_key", false);
    if (ls->req.idempotency_key && (ls->req.idempotency_key[0] == '\0' || strpbrk(ls->req.idempotency_key, "\r\n")))
        return rfl_error(L, "rf.flow: request.idempotency_key must be a non-empty string without CR or LF");
    check_headers(L, 2);
    rfl_read_inbound(L, 2, &(rfl_keeper){.idx = keep, .slot = NULL}, &ls->req);
    rfl_hold(L, ls, H_KEEP);
    /* Each object is taken or held as soon as it is read, before the next read can run Lua. */
    if (lua_getfield(L, 3, "ledger") != LUA_TNIL)
        ls->ledger = rfl_take_ledger(L, -1, &ls->taken[T_LEDGER]); /* ledger:close() mid-flow is refused */
    rfl_hold(L, ls, H_LEDGER);
    if (lua_getfield(L, 3, "rng") != LUA_TNIL) {
        ls->rng = rfl_testobject(L, -1, RFL_RNG);
        if (ls->rng == NULL)
            return rfl_error(L, "rf.flow: io.rng must be an rf.rng(seed), got %s", luaL_typename(L, -1));
    } else {
        rf_rng_seed(&ls->own_rng, rfl_random_seed(L, "rf.flow"));
        ls->rng = &ls->own_rng;
    }
    rfl_hold(L, ls, H_RNG);
    if (lua_getfield(L, 3, "retry_budget") != LUA_TNIL) {
        if (lua_isboolean(L, -1) && !lua_toboolean(L, -1) && rf_policy_retry_budget(p, NULL, NULL))
            return rfl_error(L, "rf.flow: io.retry_budget = false, but the lock has a retryBudget, which every request "
                                "obeys: pass a rf.retry_budget(policy) or none (the lock's own), never drop it (lock "
                                "field retryBudget)");
        if (lua_type(L, -1) != LUA_TUSERDATA)
            return rfl_error(L, "rf.flow: io.retry_budget must be an rf.retry_budget(policy), got %s",
                             luaL_typename(L, -1));
        ls->budget = rfl_take_retry_budget(L, -1, &ls->taken[T_BUDGET]);
    }
    rfl_hold(L, ls, H_BUDGET);
    rf_error err;
    rf_status st = rf_step_init(&ls->s, p, &ls->req, &ls->resp, now, &err);
    if (st == RF_ENOMEM) return rfl_error(L, "rf.flow: %s", err.message);
    if (st != RF_OK) return rfl_error(L, "rf.flow: request.%s %s", err.path, err.message);
    memcpy(ls->kept, ls->taken, sizeof ls->kept);
    ls->policy = p;
    rfl_set_open(ls, true);
    lua_settop(L, 5);
    lua_pushboolean(L, ls->s.prop.enabled);
    return 2;
}

static int l_step_new(lua_State *L) { return rfl_function(L, step_new); }

/* step:begin(now_ms) → the attempt's per-try timeout_ms, or nil, reason (the request stops). */
static int step_begin(lua_State *L, rfl_call *call) {
    lstep *ls = call->self;
    int64_t timeout = 0;
    rf_reason stop;
    if (!rf_step_begin(&ls->s, clock_arg(L, 2, "io.now_ms"), &timeout, &stop)) {
        return rfl_fail(L, rf_reason_name(stop), NULL);
    }
    ls->began = true;
    lua_pushinteger(L, (lua_Integer)timeout);
    return 1;
}

/* step:propagation() → {name = value, …}: the headers the attempt step:begin just allowed sends with the route's
 * propagation (its number and the ms it may take, rf_step_propagation_lines), or nil when the route has none. */
static int step_propagation(lua_State *L, rfl_call *call) {
    lstep *ls = call->self;
    char lines[2][RF_PROPAGATION_LINE_MAX];
    const size_t n = rf_step_propagation_lines(&ls->s, lines);
    if (n == 0) {
        lua_pushnil(L);
        return 1;
    }
    lua_createtable(L, 0, (int)n);
    for (size_t i = 0; i < n; i++) {
        const char *colon = strchr(lines[i], ':');
        lua_pushlstring(L, lines[i], (size_t)(colon - lines[i]));
        lua_pushstring(L, colon + 2);
        lua_rawset(L, -3);
    }
    return 1;
}

static bool parse_transport(const char *name, rf_transport *out) {
    for (int t = 0; t < RF_TRANSPORT_COUNT; t++) {
        if (strcmp(name, rf_transport_name((rf_transport)t)) == 0) {
            *out = (rf_transport)t;
            return true;
        }
    }
    return false;
}

typedef struct step_hook {
    lua_State *L;
    rfl_call *call;
    const rf_policy *policy;
    int fn;     /* stack index of the hook */
    int errors; /* stack index of a table: [1] = the hook's error */
    const rf_try *t;
    const rf_verdict *v;
} step_hook;

/* Protected part of call_step_hook: (fn) → fn(try table, verdict table). */
static int run_step_hook(lua_State *L, void *ud) {
    const step_hook *h = ud;
    rfl_push_try(L, h->t);
    rfl_push_verdict(L, h->policy, h->v);
    lua_call(L, 2, 1);
    return 1;
}

/* The hook, called from inside rf_step_after: nothing here may raise through the engine. */
static int call_step_hook(void *ud, const rf_try *t, const rf_verdict *v) {
    step_hook *h = ud;
    lua_State *L = h->L;
    if (!lua_checkstack(L, 4)) return -1;
    lua_pushvalue(L, h->fn);
    h->t = t;
    h->v = v;
    if (rfl_pcall(L, h->call, run_step_hook, h, 1, 1) != LUA_OK) {
        lua_rawseti(L, h->errors, 1);
        return -1;
    }
    int stop = lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1);
    lua_pop(L, 1);
    return stop ? 1 : 0;
}

/* step:after(result, now_ms, wall_ms [, on_attempt]) → true, delay_ms (wait, then step:begin), or false, reason
 * (the request stops) [, the hook's error]. result: {status=, transport=, headers=, error=, not_sent=, peer=}, peer
 * the "host:port" the attempt went to (rf_ledger_peer_ok), recorded in its try; with the route's propagation, a
 * header named its overloadedHeader (any case, any value) makes the response overloaded. */
static int step_after(lua_State *L, rfl_call *call) {
    lstep *ls = call->self;
    if (!ls->began) return rfl_error(L, "rf.flow: step:after without step:begin");
    luaL_checktype(L, 2, LUA_TTABLE);
    rf_step_result res = {.now_ms = clock_arg(L, 3, "io.now_ms"), .wall_ms = clock_arg(L, 4, "io.wall_ms")};
    lua_settop(L, 5);
    if (!lua_isnil(L, 5)) luaL_checktype(L, 5, LUA_TFUNCTION);
    lua_Integer status = 0;
    lua_getfield(L, 2, "status");
    if (!lua_isnil(L, -1) &&
        (!rfl_tointeger_exact(L, -1, &status) || status < 0 || status > 599 || (status > 0 && status < 100)))
        return rfl_error(L, "rf.flow: io.send's result.status must be 0 or 100..599, got %s", luaL_typename(L, -1));
    res.status = (int)status;
    lua_getfield(L, 2, "transport");
    if (lua_isnil(L, -1))
        res.transport = status > 0 ? RF_TRANSPORT_OK : RF_TRANSPORT_OTHER;
    else if (lua_type(L, -1) != LUA_TSTRING || !parse_transport(lua_tostring(L, -1), &res.transport))
        return rfl_error(L, "rf.flow: io.send's result.transport must be one of rf.transports, got %s",
                         lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, -1));
    if (res.transport == RF_TRANSPORT_OK && status == 0)
        return rfl_error(L, "rf.flow: io.send's result has transport \"ok\" but no status");
    lua_getfield(L, 2, "not_sent");
    res.not_sent = lua_toboolean(L, -1);
    lua_getfield(L, 2, "error");
    res.error = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    lua_getfield(L, 2, "peer"); /* stays on the stack, anchored, until the call returns */
    if (!lua_isnil(L, -1)) {
        size_t peer_len = 0;
        const char *peer = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &peer_len) : NULL;
        if (peer == NULL || !rf_ledger_peer_ok(peer, peer_len))
            return rfl_error(L, "rf.flow: io.send's result.peer must be \"host:port\" (port 1..65535), got %s",
                             peer != NULL ? peer : luaL_typename(L, -1));
        res.peer = peer;
    }
    /* Wait headers and Date, by case-insensitive name; the first one a table iteration meets wins. Each value used
     * is kept in a keeper table this call made: the headers table is the host's, which Lua may change meanwhile. */
    lua_createtable(L, RF_WAIT_HEADER_COUNT + 1, 0);
    int keep = lua_gettop(L);
    if (lua_getfield(L, 2, "headers") == LUA_TTABLE) {
        int hdrs = lua_gettop(L);
        lua_pushnil(L);
        while (lua_next(L, hdrs) != 0) {
            if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TSTRING) {
                const char *name = lua_tostring(L, -2), *value = lua_tostring(L, -1);
                bool used = false;
                if (strcasecmp(name, "date") == 0 && res.date == NULL) res.date = value, used = true;
                if (ls->s.prop.enabled && strcasecmp(name, ls->s.prop.overloaded_header) == 0) res.overloaded = true;
                for (int w = 0; w < RF_WAIT_HEADER_COUNT; w++)
                    if (res.hints[w] == NULL && strcasecmp(name, rf_wait_header_name((rf_wait_header)w)) == 0)
                        res.hints[w] = value, used = true;
                if (used) {
                    lua_pushvalue(L, -1);
                    lua_rawseti(L, keep, (lua_Integer)lua_rawlen(L, keep) + 1);
                }
            }
            lua_pop(L, 1);
        }
    } else if (!lua_isnil(L, -1)) {
        return rfl_error(L, "rf.flow: io.send's result.headers must be a table, got %s", luaL_typename(L, -1));
    }
    lua_createtable(L, 1, 0);
    step_hook h = {.L = L, .call = call, .policy = ls->s.policy, .fn = 5, .errors = lua_gettop(L)};
    int hook_rc = 0;
    int64_t delay = 0;
    rf_reason stop;
    /* The hook may call back into this step: rfl_method pinned it, so every method raises until this returns. */
    ls->began = false; /* the attempt ends here: a bad result raised above and left it for step:finish to cancel */
    bool retry = rf_step_after(&ls->s, &res, ls->rng, ls->budget, lua_isnil(L, 5) ? NULL : call_step_hook, &h, &hook_rc,
                               &delay, &stop);
    lua_pushboolean(L, retry);
    if (retry)
        lua_pushinteger(L, (lua_Integer)delay);
    else
        lua_pushstring(L, rf_reason_name(stop));
    if (hook_rc < 0) {
        lua_rawgeti(L, h.errors, 1);
        return 3;
    }
    return 2;
}

/* Whether c is a space, tab or CR: what push_headers_of trims from both ends of a value. */
static bool is_trimmed(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* The response's headers from the host's table at idx (its string names and values; other entries are skipped):
 * {lowercased name = value, trimmed of spaces, tabs and CRs at both ends}, the first a traversal meets winning, as
 * client:request's response gives them. Raw reads only: no metamethod of the host's table runs. A name already in
 * lowercase and a value with nothing to trim are the host's own strings (the usual case, a parser's lowercased
 * names): no string is made for them. */
static void push_headers_of(lua_State *L, int idx) {
    if (lua_type(L, idx) != LUA_TTABLE) {
        lua_newtable(L);
        return;
    }
    lua_createtable(L, 0, 4); /* a response's usual few fields (Content-Length, Date, …) without a rehash */
    int out = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) { /* key at out + 1, value at out + 2 */
        if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TSTRING) {
            size_t name_len = 0, len = 0;
            const char *name = lua_tolstring(L, -2, &name_len), *v = lua_tolstring(L, -1, &len);
            const char *ve = v + len;
            size_t upper = 0;
            while (upper < name_len && !isupper((unsigned char)name[upper])) upper++;
            if (upper == name_len) {
                lua_pushvalue(L, -2);
            } else {
                rfl_push_lower(L, name, name_len);
            }
            lua_pushvalue(L, -1);
            if (lua_rawget(L, out) == LUA_TNIL) {
                lua_pop(L, 1);
                while (v < ve && is_trimmed(*v)) v++;
                while (ve > v && is_trimmed(ve[-1])) ve--;
                if ((size_t)(ve - v) == len)
                    lua_pushvalue(L, out + 2);
                else
                    lua_pushlstring(L, v, (size_t)(ve - v));
                lua_rawset(L, out);
            } else {
                lua_pop(L, 2);
            }
        }
        lua_pop(L, 1);
    }
}

/* step:finish(reason, now_ms, wall_ms [, body [, headers]]) → the response table (client:request's shape); the
 * ledger record is appended here. body: the last attempt's body (a string, or a number, which becomes one); headers:
 * its {name = value}. The body is the response's as given, not copied: the ledger records its length. An attempt
 * step:begin allowed and no step:after ended (the host's io.send raised, or returned a bad result) is recorded first,
 * cancelled (rf_step_cancel): the host may have sent it, so it counts. */
static int step_finish(lua_State *L, rfl_call *call) {
    lstep *ls = call->self;
    const char *reason_name = luaL_checkstring(L, 2);
    rf_reason reason = RF_REASON_COUNT;
    for (int r = 0; r < RF_REASON_COUNT; r++)
        if (strcmp(reason_name, rf_reason_name((rf_reason)r)) == 0) reason = (rf_reason)r;
    luaL_argcheck(L, reason != RF_REASON_COUNT, 2, "a reason from rf.reasons");
    int64_t now = clock_arg(L, 3, "io.now_ms"), wall = clock_arg(L, 4, "io.wall_ms");
    size_t body_len = 0;
    luaL_optlstring(L, 5, "", &body_len); /* a number becomes a string in its slot */
    lua_settop(L, 6);
    if (lua_isnil(L, 5)) {
        lua_pushliteral(L, "");
        lua_replace(L, 5);
    }
    rf_response *r = &ls->resp;
    if (ls->began) rf_step_cancel(&ls->s, now, "cancelled: the host gave this attempt up (a callback raised)");
    ls->began = false;
    r->body_len = body_len; /* the ledger's body_len; r->body and r->headers stay NULL */
    rf_step_end_request(&ls->s, reason, now, wall, ls->ledger);
    rfl_set_open(ls, false); /* finished (its closed state) before anything can raise: never recorded twice */
    r->body_len = 0;
    push_headers_of(L, 6); /* at 7 */
    rfl_push_response(L, r, 5, 7);
    step_release(L, ls);
    return 1;
}

static int l_step_gc(lua_State *L) {
    lstep *ls = rfl_checkobject(L, 1, RFL_STEP);
    if (rfl_collectable(ls)) step_release(L, ls);
    return 0;
}

/* The methods, each through rfl_method (the step pinned; refused once finished). */
static int l_step_begin(lua_State *L) { return rfl_method(L, 1, RFL_STEP, RFL_OPEN, step_begin); }
static int l_step_after(lua_State *L) { return rfl_method(L, 1, RFL_STEP, RFL_OPEN, step_after); }
static int l_step_finish(lua_State *L) { return rfl_method(L, 1, RFL_STEP, RFL_OPEN, step_finish); }
static int l_step_propagation(lua_State *L) { return rfl_method(L, 1, RFL_STEP, RFL_OPEN, step_propagation); }

/* ---- the step's FFI entries (lua_ffi.c) -------------------------------------------------------------- */

/* Whether x (a double, what the FFI passes) is a clock reading clock_arg accepts: an integer in 0..2^53-1. */
static bool ffi_clock(double x) { return x >= 0 && x <= 9007199254740991.0 && x == (double)(int64_t)x; }

int rfl_step_begin_attempt(void *obj, double now_ms, int64_t *timeout_ms, rf_reason *stop) {
    lstep *ls = obj;
    if (!rfl_is_idle(ls) || !ffi_clock(now_ms)) return -1;
    if (!rf_step_begin(&ls->s, (int64_t)now_ms, timeout_ms, stop)) return 1;
    ls->began = true;
    return 0;
}

int rfl_step_after_attempt(void *obj, double status, int transport, bool not_sent, const char *error, const char *date,
                           const char *const *hints, int n_hints, const char *peer, size_t peer_len, double now_ms,
                           double wall_ms, int64_t *delay_ms, rf_reason *stop) {
    lstep *ls = obj;
    if (!rfl_is_idle(ls) || !ls->began || !ffi_clock(now_ms) || !ffi_clock(wall_ms)) return -1;
    if (!(status >= 0 && status <= 599 && status == (double)(int)status) || (status > 0 && status < 100)) return -1;
    if (n_hints != RF_WAIT_HEADER_COUNT || hints == NULL || transport < -1 || transport >= RF_TRANSPORT_COUNT)
        return -1;
    rf_transport t = transport >= 0 ? (rf_transport)transport : status > 0 ? RF_TRANSPORT_OK : RF_TRANSPORT_OTHER;
    if (t == RF_TRANSPORT_OK && status == 0) return -1;                /* step:after raises */
    if (peer != NULL && !rf_ledger_peer_ok(peer, peer_len)) return -1; /* step:after raises */
    rf_step_result res = {.status = (int)status,
                          .transport = t,
                          .date = date,
                          .not_sent = not_sent,
                          .error = error,
                          .peer = peer,
                          .now_ms = (int64_t)now_ms,
                          .wall_ms = (int64_t)wall_ms};
    for (int w = 0; w < RF_WAIT_HEADER_COUNT; w++) res.hints[w] = hints[w];
    ls->began = false;
    int hook_rc = 0;
    return rf_step_after(&ls->s, &res, ls->rng, ls->budget, NULL, NULL, &hook_rc, delay_ms, stop) ? 0 : 1;
}

int rfl_step_propagation_values(void *obj, double *attempt, double *deadline_ms) {
    lstep *ls = obj;
    if (!rfl_is_idle(ls)) return -1;
    int n = 0;
    int64_t ms = 0;
    if (!rf_step_propagation_values(&ls->s, &n, &ms)) return 1; /* the numbers its lines would say */
    *attempt = n;
    *deadline_ms = (double)ms;
    return 0;
}

/* Gives back the objects the step took (its request ended, or a reuse stopped half-way). No Lua C API call. */
static void give_back_taken(lstep *ls) {
    for (size_t i = 0; i < sizeof ls->taken / sizeof ls->taken[0]; i++) {
        rfl_give_back(ls->taken[i]);
        ls->taken[i] = NULL;
    }
}

int rfl_step_end_request(void *obj, double reason, double now_ms, double wall_ms) {
    lstep *ls = obj;
    if (!rfl_is_idle(ls) || ls->began || !ffi_clock(now_ms) || !ffi_clock(wall_ms)) return -1;
    if (!(reason >= 0 && reason < RF_REASON_COUNT && reason == (double)(int)reason)) return -1;
    rf_response *r = &ls->resp;
    r->body_len = 0; /* the ledger's body_len: the host passes no body */
    rf_step_end_request(&ls->s, (rf_reason)(int)reason, (int64_t)now_ms, (int64_t)wall_ms, ls->ledger);
    rfl_set_open(ls, false); /* finished (its closed state) first: never recorded twice */
    const bool overloaded = r->overloaded;
    /* What step_finish's step_release does without Lua: the objects it took are given back and the response
     * freed now; its holdings (Lua references) go with the userdata (__gc), or serve its reuse (rfl_step_reuse). */
    give_back_taken(ls);
    rf_response_clear(r);
    return overloaded ? 1 : 0;
}

/* Whether s (len bytes) holds no NUL byte: C would cut it there. */
static bool no_nul(const char *s, size_t len) { return len == 0 || memchr(s, '\0', len) == NULL; }

int rfl_step_reuse(void *obj, const char *method, size_t method_len, const char *path, size_t path_len, const char *key,
                   size_t key_len, const unsigned char *serve, size_t n_serve, double now_ms, long *route) {
    lstep *ls = obj;
    *route = -1;
    /* A step the FFI ended (rfl_step_end_request): closed, idle, its holdings (which keep its objects alive) there */
    if (rfl_is_open(ls) || !rfl_collectable(ls) || !rfl_has_holdings(ls) || ls->policy == NULL) return -1;
    if (method == NULL || path == NULL || serve == NULL || !ffi_clock(now_ms)) return -1;
    /* what core.step refuses, and a NUL byte, which a C string cannot carry */
    if (method_len == 0 || path_len == 0 || path[0] != '/' || !no_nul(method, method_len) || !no_nul(path, path_len))
        return -1;
    if (key != NULL && (key_len == 0 || !no_nul(key, key_len) || memchr(key, '\r', key_len) != NULL ||
                        memchr(key, '\n', key_len) != NULL))
        return -1;
    /* its policy, ledger and retry budget taken again, each still open (a closed ledger refuses: core.step says so) */
    for (size_t i = 0; i < sizeof ls->kept / sizeof ls->kept[0]; i++) {
        if (ls->kept[i] == NULL) continue;
        if (!rfl_take_again(ls->kept[i])) {
            give_back_taken(ls);
            return -1;
        }
        ls->taken[i] = ls->kept[i];
    }
    const size_t need = method_len + 1 + path_len + 1 + (key != NULL ? key_len + 1 : 0);
    if (need > ls->strings_cap) {
        size_t cap = ls->strings_cap * 2 > need ? ls->strings_cap * 2 : need < 256 ? 256 : need;
        char *grown = realloc(ls->strings, cap);
        if (grown == NULL) {
            give_back_taken(ls);
            return -1;
        }
        ls->strings = grown;
        ls->strings_cap = cap;
    }
    char *at = ls->strings;
    ls->req = (rf_request){.method = at};
    memcpy(at, method, method_len);
    at[method_len] = '\0';
    at += method_len + 1;
    ls->req.path = at;
    memcpy(at, path, path_len);
    at[path_len] = '\0';
    if (key != NULL) {
        at += path_len + 1;
        ls->req.idempotency_key = at;
        memcpy(at, key, key_len);
        at[key_len] = '\0';
    }
    rf_error err;
    if (rf_step_init(&ls->s, ls->policy, &ls->req, &ls->resp, (int64_t)now_ms, &err) != RF_OK) {
        give_back_taken(ls);
        return -1; /* core.step raises what rf_step_init refused */
    }
    *route = ls->s.route;                                                /* matched once, by rf_step_init */
    if (*route < 0 || (size_t)*route >= n_serve || serve[*route] == 0) { /* the step stays ended */
        rf_response_clear(&ls->resp);
        give_back_taken(ls);
        return 1;
    }
    ls->began = false;
    rfl_set_open(ls, true);
    return 0;
}

void rfl_open_step(lua_State *L) {
    static const luaL_Reg step_methods[] = {{"begin", l_step_begin},
                                            {"after", l_step_after},
                                            {"finish", l_step_finish},
                                            {"propagation", l_step_propagation},
                                            {NULL, NULL}};
    static const luaL_Reg step_meta[] = {{"__gc", l_step_gc}, {NULL, NULL}};
    static const luaL_Reg funcs[] = {
        {"step", l_step_new}, {"wall_ms", l_wall_ms}, {"monotonic_ms", l_monotonic_ms}, {NULL, NULL}};
    rfl_new_type(L, RFL_STEP, step_methods, step_meta);
    luaL_setfuncs(L, funcs, 0);
    lua_pushinteger(L, RF_HTTP_STATUS_MIN); /* a host that gets any three digits (nginx) tells a status from none */
    lua_setfield(L, -2, "HTTP_STATUS_MIN");
    lua_pushinteger(L, RF_HTTP_STATUS_MAX);
    lua_setfield(L, -2, "HTTP_STATUS_MAX");
    lua_pushinteger(L, RF_SUCCESS_STATUS_MIN); /* a host that skips reading what only a failure's verdict reads */
    lua_setfield(L, -2, "SUCCESS_STATUS_MIN");
    lua_pushinteger(L, RF_SUCCESS_STATUS_MAX);
    lua_setfield(L, -2, "SUCCESS_STATUS_MAX");
}
