/*
 * Lua binding of the HTTP client: rf.client{…} → "retryfreeze.Client", client:request{…}, client:all{…},
 * client:close(); rf.new_key(). Misuse (a bad argument, a closed client) raises; an HTTP or transport failure
 * is a response table, never an error.
 *
 * Lifetimes (lua_object.h): every method enters through rfl_method, which pins the client (busy) before it reads
 * an argument, so nothing a request table's metamethod, a hook or a finalizer runs can close the client or call
 * it while C uses it; rf.client takes the ledger and retry budget it is given (rfl_take) as it reads them, and
 * holds them and the policy (rfl_hold) until it closes. Each request's strings (method, path, query, body,
 * idempotency key, header lines) are kept in a keeper table the call made, on the stack or held by a pending
 * request, so a hook or another flow that drops the request table and collects garbage changes nothing.
 */
#define _POSIX_C_SOURCE 200809L
#include "lua_retryfreeze.h"
#include "../core/src/util/clock_ms.h"
#include "../core/src/util/os_random.h"

#include "retryfreeze/client.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The client's holdings (rfl_hold): what it borrows must stay alive as long as it does. */
enum { H_POLICY = 1, H_LEDGER = 2, H_HOOK = 3, H_BUDGET = 4 };
/* The objects it takes (lclient.taken). */
enum { T_POLICY, T_LEDGER, T_BUDGET };

typedef struct lclient {
    rf_client *c;            /* NULL until created, and after close */
    bool scheduled;          /* a scheduler drives it: request() yields inside coroutines (client:_set_scheduled) */
    void *taken[3];          /* the policy, ledger and retry budget objects it took (rfl_take, at T_POLICY,
                                T_LEDGER and T_BUDGET), given back when it closes; NULL without one */
    const rf_policy *policy; /* the client's policy, held (for verdicts given to hooks) */
} lclient;

/* A pending request's holdings: the client (which outlives its pending requests) and the request's keeper. */
enum { H_BOX_CLIENT = 1, H_BOX_KEEPER = 2 };

/* A request started by a scheduled flow: kept on the flow coroutine's stack while it yields. */
typedef struct lpending {
    rf_pending *p; /* NULL once collected */
    rf_response resp;
    rf_request req;      /* copied here: the flow keeps pointing at it while the coroutine is suspended */
    size_t cap_lines;    /* room in lines[]: a finished box is reused for a request with at most as many */
    const char *lines[]; /* its header lines (as many as it has: a small box stays a small allocation); the
                            strings live in the keeper table, held at H_BOX_KEEPER */
} lpending;

/* Collects a {Name = "value"} table at idx into "Name: value" strings kept by k (so they live as long as it does:
 * rfl_keep_value without a name, a keeper of one request appends them to its array part); fills lines[] (capacity
 * cap) and returns the count. Iterates raw. */
static size_t header_lines(lua_State *L, int idx, const rfl_keeper *k, const char *what, const char **lines,
                           size_t cap) {
    idx = lua_absindex(L, idx);
    size_t n = 0;
    if (lua_isnoneornil(L, idx)) return 0;
    if (lua_type(L, idx) != LUA_TTABLE)
        rfl_error(L, "%s must be a table of name = value, got %s", what, luaL_typename(L, idx));
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
            rfl_error(L, "%s must map header names (strings) to values (strings)", what);
        if (n == cap) rfl_error(L, "%s: more than %d headers", what, (int)cap);
        size_t nlen = 0, vlen = 0;
        const char *name = lua_tolstring(L, -2, &nlen), *value = lua_tolstring(L, -1, &vlen);
        if (memchr(name, '\0', nlen) != NULL || memchr(value, '\0', vlen) != NULL)
            rfl_error(L, "%s: header %s must not contain a NUL byte (C would cut the string there)", what,
                      memchr(name, '\0', nlen) != NULL ? "names" : "values");
        lua_pushfstring(L, "%s: %s", name, value);
        lines[n++] = lua_tostring(L, -1);
        rfl_keep_value(L, k, NULL);
        lua_pop(L, 1);
    }
    return n;
}

static const char *const client_keys[] = {
    "policy",       "base_url",         "ledger",         "headers",    "rng_seed",
    "retry_budget", "follow_redirects", "max_body_bytes", "on_attempt", NULL};

/* The place of k in list (NULL-terminated; a NULL list holds none), or -1. The first byte is compared before the
 * rest: this runs for every key of every request table. */
static int key_index(const char *k, const char *const *list) {
    for (int i = 0; list && list[i]; i++)
        if (k[0] == list[i][0] && strcmp(k, list[i]) == 0) return i;
    return -1;
}

/* Raises unless every key of the table at idx is a string of allowed or of more (raw: no metamethod runs). Returns
 * the keys of allowed it holds: bit i for allowed[i] (the first 32). */
static uint32_t check_keys2(lua_State *L, int idx, const char *const *allowed, const char *const *more,
                            const char *what) {
    uint32_t held = 0;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        int i = k ? key_index(k, allowed) : -1;
        if (i >= 0 && i < 32) held |= 1u << i;
        if (i < 0 && (k == NULL || key_index(k, more) < 0))
            rfl_unknown_option(L, what, k ? k : luaL_typename(L, -2), allowed, more);
        lua_pop(L, 1);
    }
    return held;
}

static uint32_t check_keys(lua_State *L, int idx, const char *const *allowed, const char *what) {
    return check_keys2(L, idx, allowed, NULL, what);
}

/* Releases what the client holds and took: its rf_client, the ledger and retry budget it uses, its holdings. Its
 * close, its __gc and a failed rf.client call it; safe twice, never raises. */
static void client_release(lua_State *L, void *obj) {
    lclient *lc = obj;
    rf_client_free(lc->c);
    lc->c = NULL;
    rfl_retire(L, lc, lc->taken, 3);
}

/* rf.client{policy=, base_url=, ledger=, headers=, rng_seed=, retry_budget=, follow_redirects=,
 *           max_body_bytes=, on_attempt=} → client. Raises on a bad option. */
static int client_new(lua_State *L, rfl_call *call) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    check_keys2(L, 1, client_keys, rfl_client_network_keys, "rf.client");
    lclient *lc = rfl_make(L, call, RFL_CLIENT, sizeof *lc, client_release); /* at 2 */
    rf_client_options o = {0};
    /* Each option is read once and kept on the stack (anchored) until rf_client_new has copied it; each object
     * is taken or held as soon as it is read, before the next read can run Lua. */
    if (lua_getfield(L, 1, "policy") != LUA_TUSERDATA)
        return rfl_error(L, "rf.client: policy must be a policy from rf.load, got %s", luaL_typename(L, -1));
    o.policy = rfl_take_policy(L, -1, &lc->taken[T_POLICY]);
    lc->policy = o.policy;
    rfl_hold(L, lc, H_POLICY);
    lua_getfield(L, 1, "base_url"); /* at 3, kept */
    if (lua_type(L, -1) != LUA_TSTRING) return rfl_error(L, "rf.client: base_url must be a string");
    o.base_url = rfl_tostring_nonul(L, -1, "rf.client: base_url");
    if (lua_getfield(L, 1, "ledger") != LUA_TNIL) o.ledger = rfl_take_ledger(L, -1, &lc->taken[T_LEDGER]);
    rfl_hold(L, lc, H_LEDGER);
    if (lua_getfield(L, 1, "on_attempt") != LUA_TNIL) luaL_checktype(L, -1, LUA_TFUNCTION);
    rfl_hold(L, lc, H_HOOK);
    lua_getfield(L, 1, "rng_seed");
    lua_Integer seed = 0, max_body = 0;
    if (lua_isnil(L, -1))
        o.rng_seed = rfl_random_seed(L, "rf.client");
    else if (rfl_tointeger_exact(L, -1, &seed))
        o.rng_seed = (uint64_t)seed;
    else
        return rfl_error(L, "rf.client: rng_seed must be an integer");
    lua_pop(L, 1);
    lua_getfield(L, 1, "retry_budget"); /* true, a rf.retry_budget, or its options {redis=, timeout_ms=} */
    if (lua_istable(L, -1)) {
        lua_pushliteral(L, "redis");
        bool has_redis = lua_rawget(L, -2) != LUA_TNIL; /* raw: rf.retry_budget reads these options itself */
        lua_pop(L, 1);
        if (!has_redis) return rfl_error(L, "rf.client: retry_budget must be true, a rf.retry_budget or {redis=…}");
        lua_pushcfunction(L, rfl_retry_budget_new); /* rf.retry_budget(policy, opts) */
        rfl_held(L, lc, H_POLICY);
        lua_pushvalue(L, -3);
        lua_call(L, 2, 1);
        lua_replace(L, -2);
    }
    if (lua_type(L, -1) == LUA_TUSERDATA) {
        o.budget = rfl_take_retry_budget(L, -1, &lc->taken[T_BUDGET]);
        rfl_hold(L, lc, H_BUDGET);
    } else if (lua_isboolean(L, -1) || lua_isnil(L, -1)) {
        o.retry_budget = lua_toboolean(L, -1);
        const bool dropped = lua_isboolean(L, -1) && !o.retry_budget;
        lua_pop(L, 1);
        if (dropped && rf_policy_retry_budget(o.policy, NULL, NULL))
            return rfl_error(L, "rf.client: retry_budget = false, but the lock has a retryBudget, which every client "
                                "obeys: share a rf.retry_budget(policy) or narrow it, never drop it (lock field "
                                "retryBudget)");
        if (o.retry_budget && !rf_policy_retry_budget(o.policy, NULL, NULL))
            return rfl_error(L,
                             "rf.client: retry_budget = true, but the lock has no retryBudget {maxTokens, tokenRatio}");
    } else {
        return rfl_error(L, "rf.client: retry_budget must be true, a rf.retry_budget or {redis=…}, got %s",
                         luaL_typename(L, -1));
    }
    lua_getfield(L, 1, "follow_redirects");
    o.follow_redirects = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, 1, "max_body_bytes") != LUA_TNIL) {
        if (!rfl_tointeger_exact(L, -1, &max_body) || max_body < 1)
            return rfl_error(L, "rf.client: max_body_bytes must be a positive integer");
        o.max_body_bytes = (size_t)max_body;
    }
    lua_pop(L, 1);
    lua_newtable(L); /* the keeper of the network options' strings and the header lines, until rf_client_new */
    int keep = lua_gettop(L);
    rfl_read_client_network(L, 1, keep, &o);
    const char *lines[64];
    lua_getfield(L, 1, "headers");
    o.headers = lines;
    o.n_headers = header_lines(L, -1, &(rfl_keeper){.idx = keep, .slot = NULL}, "rf.client: headers", lines, 64);
    rf_error err;
    rf_status st = rf_client_new(&o, &lc->c, &err);
    if (st == RF_ENOMEM) return rfl_error(L, "rf.client: %s", err.message); /* the core's own words */
    if (st != RF_OK) return rfl_error(L, "rf.client: %s %s", err.path, err.message);
    rfl_set_open(lc, true);
    lua_settop(L, 2);
    return 1;
}

static int l_client_new(lua_State *L) { return rfl_function(L, client_new); }

/* client:close(): frees the client and releases its policy, ledger and retry budget. Safe twice; also __close.
 * Raises while scheduled requests are in flight, or when called from inside one of the client's calls. */
static int client_close(lua_State *L, rfl_call *call) {
    lclient *lc = call->self;
    if (lc->c != NULL && rf_client_pending(lc->c) > 0)
        return rfl_error(L, "cannot close a client with %d requests in flight", (int)rf_client_pending(lc->c));
    client_release(L, lc);
    return 0;
}

static int l_client_close(lua_State *L) { return rfl_method(L, 1, RFL_CLIENT, 0, client_close); }

/* __gc: unreachable, so no call of it runs, and its pending requests, which hold it, were finalized first (a
 * __gc called by hand from its own call frees nothing: rfl_collectable). */
static int l_client_gc(lua_State *L) {
    lclient *lc = rfl_checkobject(L, 1, RFL_CLIENT);
    if (rfl_collectable(lc)) client_release(L, lc);
    return 0;
}

static int l_pending_gc(lua_State *L) {
    lpending *lp = rfl_checkobject(L, 1, RFL_PENDING);
    rf_pending_free(lp->p); /* an abandoned flow: its transfer is dropped */
    lp->p = NULL;
    rf_response_clear(&lp->resp);
    rfl_release_holdings(L, lp);
    return 0;
}

/* ---- requests ----------------------------------------------------------------------------------- */

static const char *const request_keys[] = {
    "method",     "path",        "query",      "headers",         "body", "idempotency_key",
    "on_attempt", "deadline_ms", "timeout_ms", "inbound_headers", NULL};
/* Their places in request_keys. */
enum {
    K_METHOD,
    K_PATH,
    K_QUERY,
    K_HEADERS,
    K_BODY,
    K_IDEMPOTENCY_KEY,
    K_ON_ATTEMPT,
    K_DEADLINE_MS,
    K_TIMEOUT_MS,
    K_INBOUND_HEADERS,
    K_COUNT
};
_Static_assert(sizeof request_keys / sizeof request_keys[0] == K_COUNT + 1, "a place for each request key");

/* Pushes request[request_keys[i]] of the table at idx, and returns its type. held: the keys the table holds
 * (check_keys), every bit for a table with a metatable: a key it does not hold reads nil without a lookup. */
static int request_field(lua_State *L, int idx, uint32_t held, int i) {
    if ((held & (1u << i)) == 0) {
        lua_pushnil(L);
        return LUA_TNIL;
    }
    return lua_getfield(L, idx, request_keys[i]);
}

/* request[key] as a string (NULL when nil), stored in the keeper (k): C reads it while the request runs, and a hook
 * may drop it from the request table. A nil is stored too when a keeper of one request is reused (clear): nothing
 * of the request before stays in it. */
static const char *opt_string_field(lua_State *L, int idx, uint32_t held, const rfl_keeper *k, int i, size_t *len,
                                    bool clear) {
    const char *key = request_keys[i];
    if (request_field(L, idx, held, i) == LUA_TNIL) {
        if (clear && k->slot == NULL)
            lua_setfield(L, k->idx, key);
        else
            lua_pop(L, 1);
        return NULL;
    }
    if (lua_type(L, -1) != LUA_TSTRING) rfl_error(L, "request.%s must be a string, got %s", key, luaL_typename(L, -1));
    const char *s = lua_tolstring(L, -1, len);
    if (i != K_BODY && memchr(s, '\0', *len) != NULL) /* the body is sent with its length */
        rfl_error(L, "request.%s must not contain a NUL byte (C would cut the string there)", key);
    rfl_keep_value(L, k, key);
    return s;
}

/* Reads the request table at idx into *req, every string *req points to (method, path, query, body, idempotency key,
 * header lines) kept by k (clear: a reused keeper of one request, see opt_string_field). Pushes the request's
 * on_attempt (nil or a function; read once, so that a metamethod cannot answer a second read differently). A table
 * without a metatable is read only for the keys it holds (the others are nil: a lookup could find nothing). */
static void read_request_kept(lua_State *L, int idx, rf_request *req, const char **lines, size_t cap,
                              const rfl_keeper *k, bool clear) {
    idx = lua_absindex(L, idx);
    luaL_checktype(L, idx, LUA_TTABLE);
    uint32_t held = check_keys(L, idx, request_keys, "request");
    if (lua_getmetatable(L, idx)) { /* its __index may answer any key */
        lua_pop(L, 1);
        held = UINT32_MAX;
    }
    memset(req, 0, sizeof *req);
    size_t len = 0;
    req->method = opt_string_field(L, idx, held, k, K_METHOD, &len, clear);
    req->path = opt_string_field(L, idx, held, k, K_PATH, &len, clear);
    if (req->method == NULL || req->path == NULL) rfl_error(L, "request.method and request.path are required");
    req->query = opt_string_field(L, idx, held, k, K_QUERY, &len, clear);
    req->body = opt_string_field(L, idx, held, k, K_BODY, &req->body_len, clear);
    req->idempotency_key = opt_string_field(L, idx, held, k, K_IDEMPOTENCY_KEY, &len, clear);
    if (held & ((1u << K_DEADLINE_MS) | (1u << K_TIMEOUT_MS))) rfl_read_request_limits(L, idx, req);
    if ((held & (1u << K_INBOUND_HEADERS)) || (clear && k->slot == NULL)) rfl_read_inbound(L, idx, k, req);
    request_field(L, idx, held, K_HEADERS);
    req->headers = lines;
    req->n_headers = header_lines(L, -1, k, "request.headers", lines, cap);
    lua_pop(L, 1);
    if (request_field(L, idx, held, K_ON_ATTEMPT) != LUA_TNIL) luaL_checktype(L, -1, LUA_TFUNCTION);
}

/* Reads the request table at idx into *req. Pushes one keeper table that holds every string *req points to
 * (method, path, query, body, idempotency key, header lines): keep it alive for as long as *req is used.
 * reuse (0: none) is the index of a keeper no request uses any more (a finished box's): it is emptied and
 * pushed as the keeper instead of a new table. Pushes the request's on_attempt too (nil or a function; read once,
 * so that a metamethod cannot answer a second read differently): [keeper, on_attempt]. */
static void read_request(lua_State *L, int idx, rf_request *req, const char **lines, size_t cap, int reuse) {
    idx = lua_absindex(L, idx); /* before the keeper is pushed; read_request_kept checks it is a table */
    bool clear = reuse != 0;
    if (clear) {
        lua_pushvalue(L, reuse);
        for (lua_Integer i = (lua_Integer)lua_rawlen(L, -1); i > 0; i--) { /* its header lines */
            lua_pushnil(L);
            lua_rawseti(L, -2, i);
        }
    } else {
        lua_createtable(L, 0, 6);
    }
    rfl_keeper k = {.idx = lua_gettop(L), .slot = NULL};
    read_request_kept(L, idx, req, lines, cap, &k, clear);
}

/* The on_attempt hook: hook(try, verdict) → false stops (narrows). An error is kept and re-raised after the
 * request has been cleaned up, so no curl state or memory is left behind. Nothing here may raise (a raise
 * would unwind through libcurl): the try and verdict tables are built inside the protected call (rfl_pcall). */
typedef struct hook_ctx {
    lua_State *L;
    rfl_call *call;
    const lclient *lc;
    int errors_idx; /* a table with room for [1] = the first error raised by a hook */
    int fn_idx;     /* stack index of the request's on_attempt; 0: the client's, if any */
    const rf_try *t;
    const rf_verdict *v;
} hook_ctx;

/* Protected part of call_hook: (fn) → fn(try table, verdict table). */
static int run_hook(lua_State *L, void *ud) {
    const hook_ctx *h = ud;
    rfl_push_try(L, h->t);
    rfl_push_verdict(L, h->lc->policy, h->v);
    lua_call(L, 2, 1);
    return 1;
}

static int call_hook(void *ud, const rf_try *t, const rf_verdict *v) {
    hook_ctx *h = ud;
    lua_State *L = h->L;
    if (!lua_checkstack(L, 6)) return -1; /* no stack left: the hook cannot run, the request stops */
    if (h->fn_idx)
        lua_pushvalue(L, h->fn_idx);
    else if (rfl_held(L, h->lc, H_HOOK) != LUA_TFUNCTION) {
        lua_pop(L, 1);
        return 0;
    }
    h->t = t;
    h->v = v;
    if (rfl_pcall(L, h->call, run_hook, h, 1, 1) != LUA_OK) {
        if (lua_rawlen(L, h->errors_idx) == 0)
            lua_rawseti(L, h->errors_idx, 1); /* the slot was made with the table: no allocation, no raise */
        else
            lua_pop(L, 1);
        return -1;
    }
    int stop = lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1);
    lua_pop(L, 1);
    return stop ? 1 : 0;
}

/* Responses (and client:all's requests) owned by a userdata, so that a raise while they are turned into tables frees
 * their bodies and the arrays. The arrays are C memory (calloc), not the userdata's own: they live only while the
 * call runs, and megabytes counted by the collector for so short a time would only make it run more often over the
 * objects that stay. */
typedef struct lresponses {
    size_t n;         /* responses in r to clear (0 until r is made) */
    rf_response *r;   /* n responses, each zeroed (rf_response_clear frees nothing of a zeroed one) */
    rf_request *reqs; /* client:all's n requests, or NULL */
} lresponses;

/* Pushes a box of n zeroed responses (at least one), and room for n requests when with_requests. Raises when memory
 * runs out (what: the method). */
static lresponses *new_responses(lua_State *L, size_t n, bool with_requests, const char *what) {
    lresponses *rs = rfl_newobject(L, RFL_RESPONSES, sizeof *rs);
    rs->r = calloc(n ? n : 1, sizeof *rs->r);
    if (rs->r == NULL) rfl_error(L, "%s: out of memory", what);
    rs->n = n;
    if (with_requests && (rs->reqs = calloc(n ? n : 1, sizeof *rs->reqs)) == NULL)
        rfl_error(L, "%s: out of memory", what);
    return rs;
}

static int l_responses_gc(lua_State *L) {
    lresponses *rs = rfl_checkobject(L, 1, RFL_RESPONSES);
    for (size_t i = 0; i < rs->n; i++) rf_response_clear(&rs->r[i]);
    free(rs->r);
    free(rs->reqs);
    rs->r = NULL;
    rs->reqs = NULL;
    rs->n = 0;
    return 0;
}

/* Starts the request without blocking and yields (ticket, box) to the scheduler: the ticket (a light userdata)
 * names the transfer in client:_run's results, the box (a userdata the scheduler keeps while the flow waits)
 * holds the response and anchors the client and the request's strings. The scheduler resumes the flow with
 * client:_finish(box), so client:request returns the response. A plain lua_yield (no continuation) works alike in
 * Lua 5.1, LuaJIT, 5.2, 5.3 and 5.4. */
#if LUA_VERSION_NUM >= 503
#define K_REQUEST k_request
/* Continuation (Lua 5.3+): the flow was resumed. Only the scheduler's resume, with client:_finish(box)'s
 * response, is valid; any other resume raises in the flow. */
static int k_request(lua_State *L, int status, lua_KContext ctx) {
    (void)status;
    const lpending *lp = rfl_checkobject(L, (int)ctx, RFL_PENDING);
    if (lp->p != NULL) /* not finished: resumed by someone else */
        return rfl_error(L, "client:request: resumed before its response was ready (a scheduled flow is resumed "
                            "by retryfreeze.scheduler only)");
    return 1; /* the response the scheduler passed to resume */
}
#else
#define K_REQUEST NULL
#endif

/* Starts *req without blocking: pushes (box, ticket, box) — the ticket a light userdata naming the transfer in
 * client:_run's results, the box a userdata that owns the response and holds the client (at 1) and the request's
 * keeper (at index keep) until it is finished or collected. old (NULL: none), at index reuse, is a finished box of
 * this client (reusable_box) with room for the request's header lines: it becomes the box, instead of a new one.
 * Raises on a refused request. */
static void start_request(lua_State *L, rf_client *c, const rf_request *req, int keep, int reuse, lpending *old) {
    size_t size = sizeof(lpending) + req->n_headers * sizeof(const char *);
    lpending *lp;
    if (old != NULL) {
        lua_pushvalue(L, reuse);
        lp = old;
        size = sizeof(lpending) + lp->cap_lines * sizeof(const char *);
        memset(lp, 0, size);
        lp->cap_lines = (size - sizeof(lpending)) / sizeof(const char *);
    } else {
        lp = rfl_newobject(L, RFL_PENDING, size);
        lp->cap_lines = req->n_headers;
        lua_pushvalue(L, 1);
        rfl_hold(L, lp, H_BOX_CLIENT); /* the client outlives its pending requests */
    }
    lua_pushvalue(L, keep);
    rfl_hold(L, lp, H_BOX_KEEPER); /* and so do the request's strings */
    int box = lua_gettop(L);
    lp->req = *req;
    memcpy(lp->lines, req->headers, req->n_headers * sizeof *lp->lines);
    lp->req.headers = lp->lines;
    rf_error err;
    rf_status st = rf_client_start(c, &lp->req, NULL, NULL, &lp->resp, &lp->p, &err);
    if (st == RF_ENOMEM) rfl_error(L, "client:request: %s", err.message);
    if (st != RF_OK) rfl_error(L, "client:request: %s %s", err.path, err.message);
    lua_pushlightuserdata(L, lp->p);
    lua_pushvalue(L, box);
}

/* The pending request at idx when it belongs to the client at 1, else raises `refusal`. */
static lpending *own_box(lua_State *L, int idx, const char *refusal) {
    lpending *lp = rfl_checkobject(L, idx, RFL_PENDING);
    rfl_held(L, lp, H_BOX_CLIENT);
    bool ours = lua_rawequal(L, -1, 1);
    lua_pop(L, 1);
    if (!ours) rfl_error(L, "%s", refusal);
    return lp;
}

/* client:_finish(box [, want]) → the response of a scheduled request that client:_run reported done; frees its
 * transfer. With want == false nothing is returned and no response table is built (a caller that never reads
 * it: soak's default flow). Raises when the box is not done (or already finished), or is another client's. */
static int client_finish(lua_State *L, rfl_call *call) {
    (void)call;
    lpending *lp = own_box(L, 2, "client:_finish: the box belongs to another client");
    bool want = lua_isnoneornil(L, 3) || lua_toboolean(L, 3);
    if (lp->p == NULL) return rfl_error(L, "client:_finish: this request was already finished");
    if (!rf_pending_done(lp->p)) /* only client:_run's reports make a box finishable */
        return rfl_error(L, "client:request: resumed before its response was ready (a scheduled flow is resumed "
                            "by retryfreeze.scheduler only)");
    if (want) rfl_push_response(L, &lp->resp, 0, 0);
    rf_pending_free(lp->p);
    lp->p = NULL;
    rf_response_clear(&lp->resp);
    return want ? 1 : 0;
}

/* client:_cancel(box): ends a scheduled request that client:_finish has not ended, at once: rf_pending_stop (reason
 * stopped-by-caller, its attempt in flight aborted) and frees it, which writes its ledger line (one reported done
 * had its line written then). Returns nothing. For retryfreeze.scheduler when a callback raises with requests in
 * flight: dropping their boxes would abandon them without a line. A box already finished is left as it is; another
 * client's raises. */
static int client_cancel(lua_State *L, rfl_call *call) {
    (void)call;
    lpending *lp = own_box(L, 2, "client:_cancel: the box belongs to another client");
    rfl_pending_cancel(&lp->p, &lp->resp, "cancelled: its scheduler stopped, a callback raised");
    return 0;
}

void rfl_pending_cancel(rf_pending **p, rf_response *resp, const char *why) {
    if (*p == NULL) return;
    rf_pending_stop(*p, why);
    rf_pending_free(*p);
    *p = NULL;
    rf_response_clear(resp);
}

/* The box at idx, when it may carry the client's next request: a box of this client (at 1) that client:_finish
 * ended (not in flight, not abandoned). Raises for anything else; NULL for none (nil). */
static lpending *reusable_box(lua_State *L, int idx) {
    if (lua_isnoneornil(L, idx)) return NULL;
    lpending *lp = own_box(L, idx, "client:_start: the box to reuse belongs to another client");
    if (lp->p != NULL) rfl_error(L, "client:_start: the box to reuse is still in flight (finish it first)");
    return lp;
}

/* Raises unless the client (lc) and the request's on_attempt (at idx: nil or a function) leave no hook to run: a
 * request started without blocking calls none. */
static void refuse_hooks(lua_State *L, const lclient *lc, int idx) {
    bool client_hook = rfl_held(L, lc, H_HOOK) != LUA_TNIL;
    lua_pop(L, 1);
    if (client_hook || !lua_isnil(L, idx))
        rfl_error(L, "client:request: on_attempt is not available in scheduled flows");
}

/* client:_start(request [, box]) → ticket, box: starts a request without a coroutine (retryfreeze.scheduler's
 * run_requests); client:_run reports the ticket when it is done, client:_finish(box[, want]) ends it. The box
 * holds the client and the request's strings; dropping it abandons the transfer (no ledger line). A box this
 * client's _finish ended may be passed to carry the new request (the same box is returned: no new userdata and
 * keeper per request); one still in flight or another client's raises. Raises as client:request does for a bad
 * request, and when an on_attempt hook would apply (not available here). */
static int client_start(lua_State *L, rfl_call *call) {
    lclient *lc = call->self;
    lua_settop(L, 3);
    lpending *old = reusable_box(L, 3);
    bool reuse = old != NULL;
    bool keeper = reuse && rfl_held(L, old, H_BOX_KEEPER) == LUA_TTABLE; /* its keeper, at 4 */
    if (!reuse) lua_pushnil(L);
    const char *lines[64];
    rf_request req;
    read_request(L, 2, &req, lines, 64, keeper ? 4 : 0); /* pushes the strings' keeper (5) and on_attempt (6) */
    refuse_hooks(L, lc, 6);
    bool fits = reuse && req.n_headers <= old->cap_lines;
    if (reuse && !fits) { /* a new box takes the keeper: the old one must never clear it under the new request */
        lua_pushnil(L);
        rfl_hold(L, old, H_BOX_KEEPER);
    }
    start_request(L, lc->c, &req, 5, 3, fits ? old : NULL);
    return 2;
}

/* Blocking requests (client:request, client:all) nest when a hook starts another one: each level is C stack
 * (libcurl, the hook's pcall). Lua 5.4 stops near 200 C levels with "C stack overflow", LuaJIT does not and the
 * process dies on SIGSEGV near 1250. The depth is kept per Lua state (all its coroutines share one C stack) in
 * the binding's state, and a request deeper than MAX_NESTED_REQUESTS is refused. */
#define MAX_NESTED_REQUESTS 32

/* Enters one more blocking request, or raises when MAX_NESTED_REQUESTS are already running (what: the method). */
static void nesting_enter(lua_State *L, rfl_state *st, const char *what) {
    if (st->nesting >= MAX_NESTED_REQUESTS)
        rfl_error(L, "%s: more than %d requests nested in on_attempt hooks: refused before the C stack runs out", what,
                  MAX_NESTED_REQUESTS);
    st->nesting++;
}

/* client:request{method=, path=, query=, headers=, body=, idempotency_key=, on_attempt=, deadline_ms=,
 * timeout_ms=} → response table: {status, ok, outcome, reason, attempts, elapsed_ms, body, headers, tries, route
 * [, ledger_error]}. */
static int client_request(lua_State *L, rfl_call *call) {
    lclient *lc = call->self;
    lua_settop(L, 2);
    const char *lines[64];
    rf_request req;
    read_request(L, 2, &req, lines, 64, 0); /* pushes the strings' keeper (3) and on_attempt (4) */
    if (lc->scheduled && call->yieldable) {
        refuse_hooks(L, lc, 4);
        start_request(L, lc->c, &req, 3, 0, NULL); /* pushes box, ticket, box at 5..7 */
        rfl_yield(call, 2, 1, K_REQUEST);          /* yields ticket, box; the continuation finds the box at 1 */
        return 3;
    }
    int hook_idx = lua_isnil(L, 4) ? 0 : 4;
    lua_createtable(L, 1, 0);
    int errors = lua_gettop(L);
    lresponses *rs = new_responses(L, 1, false, "client:request");
    hook_ctx h = {.L = L, .call = call, .lc = lc, .errors_idx = errors, .fn_idx = hook_idx};
    rf_error err;
    nesting_enter(L, call->state, "client:request");
    rf_status st = rf_client_request(lc->c, &req, call_hook, &h, &rs->r[0], &err);
    call->state->nesting--;
    if (st == RF_OK) rfl_push_response(L, &rs->r[0], 0, 0);
    rf_response_clear(&rs->r[0]);
    if (st == RF_ENOMEM) return rfl_error(L, "client:request: %s", err.message);
    if (st != RF_OK) {
        if (lua_rawgeti(L, errors, 1) != LUA_TNIL) return rfl_pass_on(L, call); /* the hook's error */
        return rfl_error(L, "client:request: %s %s", err.path, err.message);
    }
    return 1;
}

static const char *const all_keys[] = {"concurrency", NULL};

/* client:all's options at idx (none or nil: the defaults) into *o. Read before anything else of the call, so that a
 * metamethod of the table runs before C holds anything; concurrency is copied out. Raises on a bad option. */
static void read_all_options(lua_State *L, int idx, rf_all_options *o) {
    memset(o, 0, sizeof *o);
    if (lua_isnoneornil(L, idx)) return;
    if (lua_type(L, idx) != LUA_TTABLE)
        rfl_error(L, "client:all: options must be a table {concurrency = N}, got %s", luaL_typename(L, idx));
    check_keys(L, idx, all_keys, "client:all: options");
    if (lua_getfield(L, idx, "concurrency") != LUA_TNIL) {
        lua_Integer k = 0;
        if (!rfl_tointeger_exact(L, -1, &k) || k < 1 || k > RF_ALL_CONCURRENCY_MAX)
            rfl_error(L, "client:all: options.concurrency must be an integer from 1 to %d, got %s",
                      RF_ALL_CONCURRENCY_MAX,
                      lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
        o->concurrency = (size_t)k;
    }
    lua_pop(L, 1);
}

/* client:all({req1, req2, …} [, {concurrency = N}]) → {resp1, resp2, …}: concurrent (curl multi, at most N requests
 * in flight: 1..RF_ALL_CONCURRENCY_MAX, RF_ALL_CONCURRENCY without), responses in request order. A request's own
 * on_attempt is not supported here (use the client's). */
static int client_all(lua_State *L, rfl_call *call) {
    lclient *lc = call->self;
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 3);
    rf_all_options opts;
    read_all_options(L, 3, &opts);
    lua_settop(L, 2);
    lua_Integer n = luaL_len(L, 2);
    luaL_argcheck(L, n >= 0 && n <= 10000, 2, "between 0 and 10000 requests");
    if (rf_client_pending(lc->c) > 0)
        return rfl_error(L, "client:all: %d scheduled requests of this client are in flight",
                         (int)rf_client_pending(lc->c));
    /* The requests' header line pointers, packed one request after another (most requests have none): grown by
     * doubling into a new block (the old one left to the collector), so each request's are pointed at only once all
     * are read. */
    size_t lines_cap = 64, n_lines = 0;
    const char **lines = lua_newuserdatauv(L, sizeof *lines * lines_cap, 0);
    int lines_idx = lua_gettop(L);
    lresponses *rs = new_responses(L, (size_t)n, true, "client:all");
    rf_request *reqs = rs->reqs;
    /* One keeper for every request's strings, each in the next slot: the stack stays flat however many. */
    lua_createtable(L, (int)(2 * n), 0);
    lua_Integer slot = 0;
    rfl_keeper k = {.idx = lua_gettop(L), .slot = &slot};
    for (lua_Integer i = 1; i <= n; i++) {
        const char *own[64];
        rf_request *req = &reqs[i - 1];
        lua_rawgeti(L, 2, i);
        read_request_kept(L, -1, req, own, 64, &k, false); /* pushes its on_attempt */
        if (!lua_isnil(L, -1)) return rfl_error(L, "client:all: request %d: on_attempt is per client here", (int)i);
        lua_pop(L, 2);
        if (req->n_headers > lines_cap - n_lines) {
            while (req->n_headers > lines_cap - n_lines) lines_cap *= 2;
            const char **more = lua_newuserdatauv(L, sizeof *lines * lines_cap, 0);
            memcpy(more, lines, sizeof *lines * n_lines);
            lua_replace(L, lines_idx);
            lines = more;
        }
        memcpy(lines + n_lines, own, sizeof *lines * req->n_headers);
        n_lines += req->n_headers;
    }
    for (lua_Integer i = 0, at = 0; i < n; at += (lua_Integer)reqs[i].n_headers, i++) reqs[i].headers = lines + at;
    lua_createtable(L, 1, 0);
    int errors = lua_gettop(L);
    hook_ctx h = {.L = L, .call = call, .lc = lc, .errors_idx = errors, .fn_idx = 0};
    rf_error err;
    nesting_enter(L, call->state, "client:all");
    rf_status st = rf_client_all_with(lc->c, reqs, (size_t)n, &opts, call_hook, &h, rs->r, &err);
    call->state->nesting--;
    if (st == RF_OK) {
        rfl_response_names names;
        rfl_push_field_names(L, &names);
        lua_createtable(L, (int)n, 0);
        for (lua_Integer i = 0; i < n; i++) {
            luaL_checkstack(L, 2, "client:all");
            rfl_push_response_named(L, &rs->r[i], &names);
            lua_rawseti(L, -2, i + 1);
            rf_response_clear(&rs->r[i]); /* its body is a Lua string now: free the copy early */
        }
    }
    if (st != RF_OK) /* each one turned into a table is cleared already; a raise leaves the rest to rs's __gc */
        for (lua_Integer i = 0; i < n; i++) rf_response_clear(&rs->r[i]);
    if (st == RF_ENOMEM) return rfl_error(L, "client:all: %s", err.message);
    if (st != RF_OK) {
        if (lua_rawgeti(L, errors, 1) != LUA_TNIL) return rfl_pass_on(L, call); /* the hook's error */
        return rfl_error(L, "client:all: %s %s", err.path, err.message);
    }
    return 1;
}

rf_client *rfl_client_loop(lua_State *L, void *self, const char *what) {
    lclient *lc = self;
    if (rf_client_pending(lc->c) > 0)
        rfl_error(L, "%s: %d scheduled requests of this client are in flight", what, (int)rf_client_pending(lc->c));
    if (rfl_held(L, lc, H_HOOK) != LUA_TNIL) rfl_error(L, "%s: on_attempt is not available in scheduled flows", what);
    lua_pop(L, 1);
    return lc->c;
}

/* client:_set_scheduled(bool): used by retryfreeze.scheduler; while set, request() inside a coroutine
 * yields instead of blocking. */
static int client_set_scheduled(lua_State *L, rfl_call *call) {
    ((lclient *)call->self)->scheduled = lua_toboolean(L, 2);
    return 0;
}

/* client:_run(timeout_ms) → array of tickets (light userdata) of scheduled requests now done. */
static int client_run(lua_State *L, rfl_call *call) {
    rf_client *c = ((lclient *)call->self)->c;
    lua_Integer timeout = rfl_checkinteger(L, 2);
    luaL_argcheck(L, timeout >= 0 && timeout <= 60000, 2, "timeout_ms must be 0..60000");
    rf_pending *done[256];
    size_t n = rf_client_run(c, (int)timeout, done, 256);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        luaL_checkstack(L, 2, "client:_run");
        lua_pushlightuserdata(L, done[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* client:in_flight() → requests started by scheduled flows and not yet done. */
static int client_in_flight(lua_State *L, rfl_call *call) {
    lua_pushinteger(L, (lua_Integer)rf_client_pending(((lclient *)call->self)->c));
    return 1;
}

/* client:retry_tokens() → the retry budget's state: a token bucket's tokens (a number); a ratio's window now
 * {ttl_ms, requests, retries, allowance} (as budget:window()); nil when the client has none (the lock has no
 * retryBudget). */
static int client_retry_tokens(lua_State *L, rfl_call *call) {
    const rf_client *c = ((lclient *)call->self)->c;
    rf_budget_window w;
    if (rf_client_budget_window(c, rfi_mono_ms(), &w)) {
        rfl_push_budget_window(L, &w);
        return 1;
    }
    int64_t t = rf_client_retry_tokens_milli(c);
    if (t < 0) return 0;
    lua_pushnumber(L, (lua_Number)t / 1000.0);
    return 1;
}

/* The methods, each through rfl_method (the client pinned; RFL_OPEN: refused once closed). */
static int l_request(lua_State *L) { return rfl_method(L, 1, RFL_CLIENT, RFL_OPEN, client_request); }
static int l_all(lua_State *L) { return rfl_method(L, 1, RFL_CLIENT, RFL_OPEN, client_all); }
static int l_start(lua_State *L) { return rfl_method(L, 1, RFL_CLIENT, RFL_OPEN, client_start); }
static int l_finish(lua_State *L) { return rfl_method(L, 1, RFL_CLIENT, RFL_OPEN, client_finish); }
static int l_cancel(lua_State *L) { return rfl_method(L, 1, RFL_CLIENT, RFL_OPEN, client_cancel); }
static int l_set_scheduled(lua_State *L) { return rfl_method(L, 1, RFL_CLIENT, RFL_OPEN, client_set_scheduled); }
static int l_run(lua_State *L) { return rfl_method(L, 1, RFL_CLIENT, RFL_OPEN, client_run); }
static int l_in_flight(lua_State *L) { return rfl_method(L, 1, RFL_CLIENT, RFL_OPEN, client_in_flight); }
static int l_retry_tokens(lua_State *L) { return rfl_method(L, 1, RFL_CLIENT, RFL_OPEN, client_retry_tokens); }
static int l_run_generated(lua_State *L) { return rfl_method(L, 1, RFL_CLIENT, RFL_OPEN, rfl_client_run_generated); }

/* rf.new_key() → a random UUID v4 (RFC 9562 §5.4) from the OS CSPRNG (rfi_os_random), for Idempotency-Key; raises
 * when the OS gives no randomness (a guessable key could collide with another request's). */
static int l_new_key(lua_State *L) {
    unsigned char b[16];
    int e = rfi_os_random(b, sizeof b);
    if (e != 0) return rfl_error(L, "rf.new_key: no randomness from the OS (getrandom: %s)", strerror(e));
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    char s[37];
    snprintf(s, sizeof s, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
             b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    lua_pushstring(L, s);
    return 1;
}

static int l_client_tostring(lua_State *L) {
    lclient *lc = rfl_checkobject(L, 1, RFL_CLIENT);
    lua_pushstring(L, lc->c ? "retryfreeze.Client" : "retryfreeze.Client (closed)");
    return 1;
}

void rfl_open_client(lua_State *L) {
    static const luaL_Reg methods[] = {{"request", l_request},
                                       {"all", l_all},
                                       {"retry_tokens", l_retry_tokens},
                                       {"in_flight", l_in_flight},
                                       {"_set_scheduled", l_set_scheduled},
                                       {"_run", l_run},
                                       {"_finish", l_finish},
                                       {"_cancel", l_cancel},
                                       {"_start", l_start},
                                       {"_run_generated", l_run_generated},
                                       {"close", l_client_close},
                                       {NULL, NULL}};
    static const luaL_Reg client_meta[] = {
        {"__gc", l_client_gc}, {"__close", l_client_close}, {"__tostring", l_client_tostring}, {NULL, NULL}};
    static const luaL_Reg responses_meta[] = {{"__gc", l_responses_gc}, {NULL, NULL}};
    static const luaL_Reg pending_meta[] = {{"__gc", l_pending_gc}, {NULL, NULL}};
    static const luaL_Reg funcs[] = {{"client", l_client_new}, {"new_key", l_new_key}, {NULL, NULL}};
    rfl_new_type(L, RFL_CLIENT, methods, client_meta);
    rfl_new_type(L, RFL_RESPONSES, NULL, responses_meta);
    rfl_new_type(L, RFL_PENDING, NULL, pending_meta);
    luaL_setfuncs(L, funcs, 0);
    rfl_open_client_network(L);
}
