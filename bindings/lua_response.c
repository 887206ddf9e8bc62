/*
 * The tables a response becomes in Lua: client:request's and client:all's responses and their tries, rf.flow's
 * step:finish response and on_attempt's try (lua_client.c, lua_step.c); and the keeper store both files keep a
 * request's strings in (rfl_keep_value). Below the client and the step, which build on it: it calls neither.
 */
#include "lua_retryfreeze.h"

#include "retryfreeze/client.h"
#include <ctype.h>
#include <stdint.h>
#include <string.h>

void rfl_keep_value(lua_State *L, const rfl_keeper *k, const char *name) {
    if (k->slot != NULL)
        lua_rawseti(L, k->idx, ++*k->slot);
    else if (name != NULL)
        lua_setfield(L, k->idx, name);
    else
        lua_rawseti(L, k->idx, (lua_Integer)lua_rawlen(L, k->idx) + 1);
}

/* The names of a response table's and a try table's fields. A caller that builds many responses (client:all) pushes
 * them once (push_field_names) and passes them: each field is then set with a copy of its name from there (lua_rawset
 * on a table that has no metatable yet, as lua_setfield would), without interning the name again for every field of
 * every response. NULL where none are pushed: each name is pushed as it is set. */
#define RESPONSE_FIELDS(X)                                                                                        \
    X(class), X(status), X(transport), X(elapsed_ms), X(delay_ms), X(timeout_ms), X(reason), X(retry_after),      \
        X(retry_after_header), X(error), X(start_ms), X(hedge), X(fate), X(ok), X(outcome), X(attempts), X(body), \
        X(headers), X(tries), X(route), X(budget), X(overloaded), X(inbound_deadline_ms), X(inbound_attempt),     \
        X(ledger_error), X(grpc_status)
#define FIELD_ENUM(name) F_##name
#define FIELD_NAME(name) #name
enum { RESPONSE_FIELDS(FIELD_ENUM), F_COUNT };
static const char *const field_names[F_COUNT] = {RESPONSE_FIELDS(FIELD_NAME)};

void rfl_push_field_names(lua_State *L, rfl_response_names *fn) {
    luaL_checkstack(L, F_COUNT + RFL_VALUE_CACHE, "push_field_names");
    fn->base = lua_gettop(L) + 1;
    for (int k = 0; k < F_COUNT; k++) lua_pushstring(L, field_names[k]);
    fn->cache = lua_gettop(L) + 1;
    for (int k = 0; k < RFL_VALUE_CACHE; k++) {
        lua_pushnil(L);
        fn->cached[k] = NULL;
    }
}

/* Pushes field k's name: its copy in *names, or a new one (names NULL). */
static void push_key(lua_State *L, const rfl_response_names *names, int k) {
    if (names)
        lua_pushvalue(L, names->base + k);
    else
        lua_pushstring(L, field_names[k]);
}

/* Pushes v, one of the engine's constant strings (see rfl_response_names): the cache's copy when it holds v, else a new
 * one, which the cache then keeps (names NULL: always a new one). */
static void push_constant(lua_State *L, rfl_response_names *names, const char *v) {
    if (names == NULL) {
        lua_pushstring(L, v);
        return;
    }
    size_t slot = (size_t)(((uintptr_t)v * UINT64_C(0x9E3779B97F4A7C15)) >> 32) % RFL_VALUE_CACHE;
    if (names->cached[slot] == v) {
        lua_pushvalue(L, names->cache + (int)slot);
        return;
    }
    lua_pushstring(L, v);
    lua_pushvalue(L, -1);
    lua_replace(L, names->cache + (int)slot);
    names->cached[slot] = v;
}

/* table[field k] = value, the table on top of the stack (its fields' setters, one per value type). */
static void set_integer(lua_State *L, const rfl_response_names *names, int k, lua_Integer v) {
    push_key(L, names, k);
    lua_pushinteger(L, v);
    lua_rawset(L, -3);
}

static void set_string(lua_State *L, const rfl_response_names *names, int k, const char *v) {
    push_key(L, names, k);
    lua_pushstring(L, v);
    lua_rawset(L, -3);
}

/* The same for one of the engine's constant strings (push_constant). */
static void set_constant(lua_State *L, rfl_response_names *names, int k, const char *v) {
    push_key(L, names, k);
    push_constant(L, names, v);
    lua_rawset(L, -3);
}

static void set_boolean(lua_State *L, const rfl_response_names *names, int k, bool v) {
    push_key(L, names, k);
    lua_pushboolean(L, v);
    lua_rawset(L, -3);
}

/* Stack slots push_try_named uses at most (the caller checks them). */
#define TRY_SLOTS 3

/* Pushes the try table of *t; names as for push_key. */
static void push_try_named(lua_State *L, const rf_try *t, rfl_response_names *names) {
    /* Sized to its fields exactly: a try table per attempt is most of a response's allocation. */
    lua_createtable(L, 0,
                    7 + (t->retry_after_header[0] ? 2 : 0) + (t->error[0] ? 1 : 0) + (t->fate != RF_FATE_NONE ? 3 : 0) +
                        (t->grpc_status ? 1 : 0));
    set_string(L, names, F_class, t->class_name);
    set_integer(L, names, F_status, t->status);
    set_constant(L, names, F_transport, rf_transport_name(t->transport));
    set_integer(L, names, F_elapsed_ms, t->elapsed_ms);
    set_integer(L, names, F_delay_ms, t->delay_ms);
    set_integer(L, names, F_timeout_ms, t->timeout_ms);
    set_constant(L, names, F_reason, rf_reason_name(t->reason));
    if (t->retry_after_header[0]) { /* the value of the header the verdict names, even an empty one */
        set_string(L, names, F_retry_after, t->retry_after);
        set_string(L, names, F_retry_after_header, t->retry_after_header);
    }
    if (t->error[0]) set_string(L, names, F_error, t->error);
    if (t->grpc_status) set_integer(L, names, F_grpc_status, t->grpc_status); /* the response's grpc-status, 1..16 */
    if (t->fate != RF_FATE_NONE) {                                            /* one of a hedged request's attempts */
        set_integer(L, names, F_start_ms, t->start_ms);
        set_boolean(L, names, F_hedge, t->hedge);
        set_constant(L, names, F_fate, rf_try_fate_name(t->fate));
    }
}

static void push_try(lua_State *L, const rf_try *t) {
    luaL_checkstack(L, TRY_SLOTS, "push_try");
    push_try_named(L, t, NULL);
}

void rfl_push_lower(lua_State *L, const char *p, size_t len) {
    char small[64];
    if (len <= sizeof small) {
        for (size_t i = 0; i < len; i++) small[i] = (char)tolower((unsigned char)p[i]);
        lua_pushlstring(L, small, len);
        return;
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (size_t i = 0; i < len; i++) luaL_addchar(&b, (char)tolower((unsigned char)p[i]));
    luaL_pushresult(&b);
}

/* Response headers as {lowercased name = value}; the first occurrence of a name wins (as for Retry-After). */
static void push_headers(lua_State *L, const char *block, size_t len) {
    lua_createtable(L, 0, 6); /* a usual response's header lines (Content-Type, -Length, Date, Connection, …) */
    luaL_checkstack(L, 6, "push_headers"); /* a name buffer, a key and a value: each line leaves the stack as it was */
    const char *p = block, *end = block + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (eol == NULL) eol = end;
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (colon != NULL && colon > p && memcmp(p, "HTTP/", 5) != 0) {
            rfl_push_lower(L, p, (size_t)(colon - p));
            lua_pushvalue(L, -1);
            if (lua_rawget(L, -3) == LUA_TNIL) {
                lua_pop(L, 1);
                const char *v = colon + 1, *ve = eol;
                while (v < ve && (*v == ' ' || *v == '\t')) v++;
                while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t')) ve--;
                lua_pushlstring(L, v, (size_t)(ve - v));
                lua_rawset(L, -3);
            } else {
                lua_pop(L, 2);
            }
        }
        p = eol + 1;
    }
}

/* Pushes the response table of *r; names as for push_key. Its body and headers are r's, or, when body_idx and
 * headers_idx are absolute stack indices (not 0), the values there (rf.flow's step:finish: the host's body and
 * headers, made before, so that no throwaway is made). */
static void push_response_named(lua_State *L, const rf_response *r, rfl_response_names *names, int body_idx,
                                int headers_idx) {
    luaL_checkstack(L, 4 + TRY_SLOTS, "push_response"); /* the table, a key, the tries and a try, at most */
    lua_createtable(L, 0, 12);
    set_integer(L, names, F_status, r->status);
    set_boolean(L, names, F_ok, r->ok);
    set_constant(L, names, F_outcome, rf_outcome_name(r->outcome));
    set_constant(L, names, F_reason, rf_reason_name(r->reason));
    set_integer(L, names, F_attempts, r->attempts);
    set_integer(L, names, F_elapsed_ms, r->elapsed_ms);
    push_key(L, names, F_body);
    if (body_idx != 0)
        lua_pushvalue(L, body_idx);
    else
        lua_pushlstring(L, r->body ? r->body : "", r->body_len);
    lua_rawset(L, -3);
    push_key(L, names, F_headers);
    if (headers_idx != 0)
        lua_pushvalue(L, headers_idx);
    else
        push_headers(L, r->headers ? r->headers : "", r->headers_len);
    lua_rawset(L, -3);
    push_key(L, names, F_tries);
    lua_createtable(L, (int)r->n_tries, 0);
    for (size_t i = 0; i < r->n_tries; i++) {
        push_try_named(L, &r->tries[i], names);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_rawset(L, -3);
    if (r->route) set_constant(L, names, F_route, r->route); /* the policy's, held by the client */
    if (r->budget != RF_BUDGET_NONE) set_constant(L, names, F_budget, rf_budget_source_name(r->budget));
    set_boolean(L, names, F_overloaded, r->overloaded); /* with propagation: tell the caller (its overloadedHeader) */
    if (r->inbound.has_deadline) set_integer(L, names, F_inbound_deadline_ms, (lua_Integer)r->inbound.deadline_ms);
    if (r->inbound.attempt > 0) set_integer(L, names, F_inbound_attempt, r->inbound.attempt);
    if (r->ledger_error[0]) set_string(L, names, F_ledger_error, r->ledger_error);
}

void rfl_push_try(lua_State *L, const rf_try *t) { push_try(L, t); }

void rfl_push_response(lua_State *L, const rf_response *r, int body_idx, int headers_idx) {
    /* 0 is "none" before it is anything else: lua_absindex would turn it into the top's index, a real slot. */
    body_idx = body_idx == 0 ? 0 : lua_absindex(L, body_idx);
    headers_idx = headers_idx == 0 ? 0 : lua_absindex(L, headers_idx);
    push_response_named(L, r, NULL, body_idx, headers_idx);
}

void rfl_push_response_named(lua_State *L, const rf_response *r, rfl_response_names *names) {
    push_response_named(L, r, names, 0, 0);
}
