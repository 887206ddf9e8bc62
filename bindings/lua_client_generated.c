/*
 * client:_run_generated{…}: `retryfreeze soak`'s default flow driven from C. Each flow is one request whose
 * path and idempotency key are made from the flow number by a template, and whose response nobody reads; the
 * loop starts up to `concurrency` of them on the real client (rf_client_start: the same policy, engine, retries
 * and ledger lines as client:request) and drives them with rf_client_run. Lua is called only for progress, so
 * a request costs no Lua table, string, closure or garbage (retryfreeze.scheduler.run_requests does the same
 * with a request function in Lua, at several times the CPU per request).
 *
 * Lifetimes: every string a started request points at lives in a userdata this call holds on its stack (copied
 * from the routes, never borrowed from a table a callback could change). The loop runs in a protected call;
 * whatever it raises (a progress callback's error, memory), every request still in flight is stopped
 * (rf_pending_stop: stopped-by-caller, its attempt in flight aborted) and freed, which writes its ledger line, before
 * the error goes on; the client stays pinned for the whole call (rfl_method).
 */
#include "lua_retryfreeze.h"

#include "retryfreeze/client.h"
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Decimal digits of the largest flow number (a 64-bit integer) and its sign. */
#define MAX_DIGITS 21
/* Tickets taken from rf_client_run per call. */
#define DONE_CAP 256

/* One route of the rotation: path = pieces[0] .. i .. pieces[1] .. i .. … pieces[n_pieces - 1]. */
typedef struct gen_route {
    const char *method;
    const char **pieces;
    size_t n_pieces;
} gen_route;

/* One request in flight (or a free place for one). */
typedef struct gen_slot {
    rf_pending *p; /* NULL: free */
    lua_Integer i; /* its flow number */
    rf_request req;
    rf_response resp;
    char *path, *key; /* its own buffers (in the call's slots userdata) */
    struct gen_slot *next_free;
} gen_slot;

typedef struct gen_run {
    rf_client *c;
    const gen_route *routes;
    size_t n_routes;
    const char *key_prefix;
    size_t key_prefix_len;
    lua_Integer count, next, done, failed, max_errors, progress_every;
    size_t concurrency;
    gen_slot *slots, *free_slots;
    int progress_idx, errors_idx; /* stack indices in run_loop: on_progress (0: none), the errors table */
} gen_run;

/* Writes v in decimal at out; returns the digits written (at most MAX_DIGITS). */
static size_t put_int(char *out, lua_Integer v) {
    char tmp[MAX_DIGITS];
    size_t n = 0;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    size_t k = 0;
    if (v < 0) out[k++] = '-';
    while (n > 0) out[k++] = tmp[--n];
    return k;
}

/* Flow i is over: counts it, and calls on_progress(done) every progress_every flows and after the last. */
static void flow_over(lua_State *L, gen_run *g, lua_Integer i, bool ok, const char *why) {
    g->done++;
    if (!ok) {
        g->failed++;
        if ((lua_Integer)lua_rawlen(L, g->errors_idx) < g->max_errors) {
            char num[MAX_DIGITS + 1];
            num[put_int(num, i)] = '\0';
            lua_pushfstring(L, "flow %s: %s", num, why);
            lua_rawseti(L, g->errors_idx, (lua_Integer)lua_rawlen(L, g->errors_idx) + 1);
        }
    }
    if (g->progress_idx != 0 && (g->done % g->progress_every == 0 || g->done == g->count)) {
        lua_pushvalue(L, g->progress_idx);
        lua_pushinteger(L, g->done);
        lua_call(L, 1, 0);
    }
}

/* Starts flow g->next in a free slot; a refused request is a failed flow (as client:_start's error). */
static void start_next(lua_State *L, gen_run *g) {
    lua_Integer i = g->next++;
    gen_slot *s = g->free_slots;
    g->free_slots = s->next_free;
    const gen_route *r = &g->routes[(size_t)((i - 1) % (lua_Integer)g->n_routes)];
    char *w = s->path;
    for (size_t k = 0; k < r->n_pieces; k++) {
        if (k > 0) w += put_int(w, i);
        size_t len = strlen(r->pieces[k]);
        memcpy(w, r->pieces[k], len);
        w += len;
    }
    *w = '\0';
    memcpy(s->key, g->key_prefix, g->key_prefix_len);
    s->key[g->key_prefix_len + put_int(s->key + g->key_prefix_len, i)] = '\0';
    memset(&s->req, 0, sizeof s->req);
    s->req.method = r->method;
    s->req.path = s->path;
    s->req.idempotency_key = s->key;
    s->i = i;
    rf_error err;
    rf_status st = rf_client_start(g->c, &s->req, NULL, NULL, &s->resp, &s->p, &err);
    if (st == RF_OK) return;
    s->p = NULL;
    s->next_free = g->free_slots;
    g->free_slots = s;
    char why[sizeof err.path + sizeof err.message + 24];
    if (st == RF_ENOMEM)
        snprintf(why, sizeof why, "client:request: %s", err.message);
    else
        snprintf(why, sizeof why, "client:request: %s %s", err.path, err.message);
    flow_over(L, g, i, false, why);
}

/* The loop, run in a protected call (rfl_pcall): its arguments are the errors table and on_progress (or nil). */
static int run_loop(lua_State *L, void *ud) {
    gen_run *g = ud;
    g->errors_idx = 1;
    g->progress_idx = lua_isnil(L, 2) ? 0 : 2;
    rf_pending *done[DONE_CAP];
    for (;;) {
        while (g->next <= g->count && rf_client_pending(g->c) < g->concurrency) start_next(L, g);
        if (rf_client_pending(g->c) == 0) break; /* everything started has been reported */
        size_t n = rf_client_run(g->c, 100, done, DONE_CAP);
        for (size_t k = 0; k < n; k++) {
            /* The slot holds the response: rf_pending_response finds it without a lookup table. */
            gen_slot *s = (gen_slot *)(void *)((char *)rf_pending_response(done[k]) - offsetof(gen_slot, resp));
            rf_pending_free(s->p);
            s->p = NULL;
            rf_response_clear(&s->resp);
            s->next_free = g->free_slots;
            g->free_slots = s;
            flow_over(L, g, s->i, true, NULL);
        }
    }
    return 0;
}

/* The routes being read (the array at stack index 5) into one arena: measured first (out == NULL), then copied
 * within what was measured. */
typedef struct route_reader {
    gen_route *out;      /* NULL: measure only */
    const char **pieces; /* the next piece slot */
    char *w;             /* the next arena byte */
    size_t arena_left;   /* bytes the arena has left (copying), or needs (measuring, counted up) */
    size_t pieces_left;  /* piece slots left (copying), or needed (measuring) */
    size_t max_path;     /* the longest path a route makes, flow number digits included */
} route_reader;

/* Takes string s into the arena (copying) or counts it (measuring); raises when copying finds more than was
 * measured (the routes changed in between). */
static const char *take(lua_State *L, route_reader *rr, const char *s, size_t len) {
    if (rr->out == NULL) {
        rr->arena_left += len + 1;
        return s;
    }
    if (len + 1 > rr->arena_left) rfl_error(L, "client:_run_generated: routes changed while being read");
    char *d = rr->w;
    memcpy(d, s, len);
    d[len] = '\0';
    rr->w += len + 1;
    rr->arena_left -= len + 1;
    return d;
}

/* Reads routes[1..n] raw (no metamethod runs, so nothing can change them during one pass; between the passes a
 * finalizer might, which copying catches as more than measured), checking each shape as it goes. */
static void read_routes(lua_State *L, route_reader *rr, size_t n) {
    for (size_t r = 1; r <= n; r++) {
        lua_rawgeti(L, 5, (lua_Integer)r);
        bool ok = lua_type(L, -1) == LUA_TTABLE;
        if (ok) {
            lua_pushliteral(L, "method");
            ok = lua_rawget(L, -2) == LUA_TSTRING;
            lua_pushliteral(L, "pieces");
            ok = lua_rawget(L, -3) == LUA_TTABLE && ok && lua_rawlen(L, -1) > 0;
        }
        if (!ok)
            rfl_error(L, "client:_run_generated: routes[%d] must be {method = string, pieces = {string, …}}", (int)r);
        const char *m = rfl_tostring_nonul(L, -2, "client:_run_generated: a method");
        const char *method = take(L, rr, m, strlen(m));
        size_t np = (size_t)lua_rawlen(L, -1), path = 0;
        if (rr->out != NULL) {
            if (np > rr->pieces_left) rfl_error(L, "client:_run_generated: routes changed while being read");
            rr->out[r - 1] = (gen_route){.method = method, .pieces = rr->pieces, .n_pieces = np};
            rr->pieces_left -= np;
        } else {
            rr->pieces_left += np;
        }
        for (size_t k = 1; k <= np; k++) {
            if (lua_rawgeti(L, -1, (lua_Integer)k) != LUA_TSTRING)
                rfl_error(L, "client:_run_generated: routes[%d].pieces[%d] must be a string", (int)r, (int)k);
            const char *piece = rfl_tostring_nonul(L, -1, "client:_run_generated: a path piece");
            size_t len = strlen(piece);
            piece = take(L, rr, piece, len);
            if (rr->out != NULL) *rr->pieces++ = piece;
            path += len + MAX_DIGITS;
            lua_pop(L, 1);
        }
        if (path > rr->max_path) rr->max_path = path;
        lua_pop(L, 3);
    }
}

/* Integer field key of the options table at 2: raises unless an integer in lo..hi (range: the same in words),
 * or absent with a default (dflt < 0: required). */
static lua_Integer int_field(lua_State *L, const char *key, lua_Integer lo, lua_Integer hi, const char *range,
                             lua_Integer dflt) {
    lua_Integer v = dflt;
    if (lua_getfield(L, 2, key) != LUA_TNIL && (!rfl_tointeger_exact(L, -1, &v) || v < lo || v > hi))
        rfl_error(L, "client:_run_generated: %s must be an integer %s", key, range);
    if (lua_isnil(L, -1) && dflt < 0) rfl_error(L, "client:_run_generated: %s is required", key);
    lua_pop(L, 1);
    return v;
}

/* client:_run_generated{routes = {{method = "GET", pieces = {"/v1/jobs/", ""}}, …}, key_prefix = "soak-1-",
 *   count = N, concurrency = C [, on_progress = function(done)] [, progress_every = 64] [, max_errors = 3]}
 * → failed, errors. Flow i (1..count) sends one request: route (i - 1) % #routes + 1's method, the path its
 * pieces make with i between each two, and the idempotency key key_prefix .. i; at most concurrency (1..4096)
 * are in flight. Responses are not built (the ledger has every request). on_progress(done) is called every
 * progress_every flows and after the last. failed counts flows whose request was refused (errors holds the first
 * max_errors messages, "flow i: client:request: …"). Raises for bad options, a closed or busy client, one with
 * scheduled requests in flight or an on_attempt hook, and re-raises what on_progress raises (the requests in
 * flight then end at once as stopped-by-caller, each with its ledger line). Every method of the client raises while it
 * runs (busy: a method body, lua_object.h). */
int rfl_client_run_generated(lua_State *L, rfl_call *call) {
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    gen_run g = {0};
    g.count = int_field(L, "count", 0, RFL_INT_EXACT, ">= 0", -1);
    g.concurrency = (size_t)int_field(L, "concurrency", 1, 4096, "in 1..4096", -1);
    g.progress_every = int_field(L, "progress_every", 1, RFL_INT_EXACT, ">= 1", 64);
    g.max_errors = int_field(L, "max_errors", 0, 1000, "in 0..1000", 3);
    if (lua_getfield(L, 2, "on_progress") != LUA_TNIL) luaL_checktype(L, -1, LUA_TFUNCTION);
    int progress = lua_gettop(L); /* at 3 */
    if (lua_getfield(L, 2, "key_prefix") != LUA_TSTRING)
        return rfl_error(L, "client:_run_generated: key_prefix must be a string");
    size_t prefix_len = 0;
    const char *prefix = lua_tolstring(L, -1, &prefix_len); /* at 4 */
    if (memchr(prefix, '\0', prefix_len) != NULL)
        return rfl_error(L, "client:_run_generated: key_prefix must not contain a NUL byte");
    if (lua_getfield(L, 2, "routes") != LUA_TTABLE) /* at 5 */
        return rfl_error(L, "client:_run_generated: routes must be a non-empty array of {method=, pieces=}");
    size_t n_routes = (size_t)lua_rawlen(L, 5);
    if (n_routes == 0 || n_routes > 100000)
        return rfl_error(L, "client:_run_generated: routes must be a non-empty array of {method=, pieces=}");
    /* First pass: check the shapes and size the arena (strings, piece arrays). */
    route_reader rr = {.arena_left = prefix_len + 1};
    read_routes(L, &rr, n_routes);
    /* Second pass: copy everything into one userdata (at 6), so no callback can pull a string from under C; the
     * longest path is taken from what was copied, which sizes the path buffers below. */
    size_t header = n_routes * sizeof(gen_route) + rr.pieces_left * sizeof(const char *);
    char *mem = lua_newuserdatauv(L, header + rr.arena_left, 0);
    gen_route *routes = (gen_route *)(void *)mem;
    rr = (route_reader){.out = routes,
                        .pieces = (const char **)(void *)(mem + n_routes * sizeof(gen_route)),
                        .w = mem + header,
                        .arena_left = rr.arena_left,
                        .pieces_left = rr.pieces_left};
    g.key_prefix = take(L, &rr, prefix, prefix_len);
    g.key_prefix_len = prefix_len;
    read_routes(L, &rr, n_routes);
    g.routes = routes;
    g.n_routes = n_routes;
    /* The slots and their path and key buffers (at 7). */
    size_t path_cap = rr.max_path + 1, key_cap = prefix_len + MAX_DIGITS + 1;
    if (g.concurrency > (size_t)g.count && g.count > 0) g.concurrency = (size_t)g.count;
    char *sm = lua_newuserdatauv(L, g.concurrency * (sizeof(gen_slot) + path_cap + key_cap), 0);
    g.slots = (gen_slot *)(void *)sm;
    char *bufs = sm + g.concurrency * sizeof(gen_slot);
    for (size_t k = 0; k < g.concurrency; k++) {
        gen_slot *s = &g.slots[k];
        memset(s, 0, sizeof *s);
        s->path = bufs + k * (path_cap + key_cap);
        s->key = s->path + path_cap;
        s->next_free = k + 1 < g.concurrency ? &g.slots[k + 1] : NULL;
    }
    g.free_slots = g.slots;
    g.next = 1;
    lua_newtable(L); /* the errors, at 8 */
    int errors = lua_gettop(L);
    g.c = rfl_client_loop(L, call->self, "client:_run_generated");
    lua_pushvalue(L, errors);
    lua_pushvalue(L, progress);
    int rc = rfl_pcall(L, call, run_loop, &g, 2, 0);
    for (size_t k = 0; k < g.concurrency; k++) /* in flight after an error: stopped, and freed with its line */
        rfl_pending_cancel(&g.slots[k].p, &g.slots[k].resp,
                           "cancelled: client:_run_generated stopped, on_progress raised");
    if (rc != LUA_OK) return rfl_pass_on(L, call); /* on_progress's error, or memory */
    lua_pushinteger(L, g.failed);
    lua_pushvalue(L, errors);
    return 2;
}
