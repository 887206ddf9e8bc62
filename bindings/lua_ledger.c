/*
 * Lua binding of the ledger: rf.ledger.open(path [, {fsync = "none"|"line"}]) → "retryfreeze.Ledger" (or nil,
 * message), ledger:close() (refused while a client uses the ledger); rf.ledger.read(path) → iterator, state. The
 * iterator yields record tables; a torn line (a write cut short) is skipped: state.torn holds the first one's line
 * number, state.torn_lines their count; a corrupt line raises an error naming the file and line
 * (state.skip_corrupt = true counts them in state.corrupt instead).
 */
#include "lua_retryfreeze.h"

#include "retryfreeze/ledger_tally.h"

#include <string.h>

/* A ledger object. Its users (lua_object.h: open clients and unfinished steps writing to it) make close refuse. */
typedef struct lledger {
    rf_ledger *l;
    rf_ledger_tally *appended; /* the running tally of its appends (ledger:_tally_appends), or NULL; freed by __gc */
} lledger;

typedef struct lreader {
    rf_ledger_reader *r;
} lreader;

rf_ledger *rfl_take_ledger(lua_State *L, int idx, void **obj) {
    lledger *ll = rfl_take(L, idx, RFL_LEDGER);
    *obj = ll;
    return ll->l;
}

/* Closes a half-made ledger (rf.ledger.open raised after opening the file). */
static void ledger_release(lua_State *L, void *obj) {
    (void)L;
    lledger *ll = obj;
    rf_ledger_close(ll->l, NULL);
    ll->l = NULL;
    rfl_set_open(ll, false);
}

/* rf.ledger.open(path [, {fsync = "none"|"line", host = "name"}]) → ledger, or nil, "path: strerror".
 * host is written on every line (default: this machine's hostname; "" writes none). Raises on a bad option. */
static int ledger_open(lua_State *L, rfl_call *call) {
    bool nul;
    const char *path = rfl_check_path(L, 1, &nul);
    if (nul) return rfl_fail(L, lua_pushfstring(L, "cannot open ledger %s: the path contains a NUL byte", path), NULL);
    rf_ledger_fsync mode = RF_LEDGER_FSYNC_NONE;
    const char *host = NULL;
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        lua_settop(L, 2);
        lua_getfield(L, 2, "fsync");
        static const char *const modes[] = {"none", "line", NULL};
        mode = (rf_ledger_fsync)luaL_checkoption(L, -1, "none", modes);
        lua_getfield(L, 2, "host"); /* stays on the stack (anchored) until the ledger has copied it */
        if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
            return rfl_error(L, "rf.ledger.open: host must be a string, got %s", luaL_typename(L, -1));
        host = rfl_tostring_nonul(L, -1, "rf.ledger.open: host");
    }
    lledger *ll = rfl_make(L, call, RFL_LEDGER, sizeof *ll, ledger_release);
    rf_error err;
    if (rf_ledger_open(path, mode, &ll->l, &err) != RF_OK) return rfl_fail(L, err.message, NULL);
    if (host != NULL && rf_ledger_set_host(ll->l, host, &err) != RF_OK)
        return rfl_error(L, "rf.ledger.open: %s", err.message);
    rfl_set_open(ll, true);
    return 1;
}

static int l_ledger_open(lua_State *L) { return rfl_function(L, ledger_open); }

/* ledger:close() → true, or nil, message: close(2) failed, or open clients still write to the ledger (it
 * stays open for them: close them first). Safe twice; also __close. */
static int ledger_close(lua_State *L, rfl_call *call) {
    lledger *ll = call->self;
    if (rfl_users(ll) > 0)
        return rfl_fail(L,
                        lua_pushfstring(L,
                                        "ledger in use by %d open client(s) or unfinished flow(s): close or "
                                        "finish them first",
                                        (int)rfl_users(ll)),
                        NULL);
    rf_error err;
    rf_status st = rf_ledger_close(ll->l, &err);
    ll->l = NULL;
    rfl_set_open(ll, false);
    if (st != RF_OK) return rfl_fail(L, err.message, NULL);
    lua_pushboolean(L, 1);
    return 1;
}

/* __gc: a client holds its ledger and gives it back when closed, so a ledger in use is no garbage; a __gc called
 * by hand (debug.getmetatable) on one in use frees nothing (rfl_collectable). */
/* core.utf8_repair(s) → s as well-formed UTF-8: each byte of s that belongs to no well-formed sequence replaced by
 * U+FFFD (rf_utf8_repair, retryfreeze/ledger.h: what a ledger line takes of text from the wire). Raises for s not a
 * string. */
static int l_utf8_repair(lua_State *L) {
    size_t len = 0;
    const char *s = luaL_checklstring(L, 1, &len);
    size_t need = rf_utf8_repair(s, len, NULL, 0);
    if (need == len) { /* nothing replaced: the same bytes */
        lua_settop(L, 1);
        return 1;
    }
    char *out = lua_newuserdata(L, need + 1); /* collected with the call: a Lua error cannot leak it */
    rf_utf8_repair(s, len, out, need + 1);
    lua_pushlstring(L, out, need);
    return 1;
}

static int l_ledger_gc(lua_State *L) {
    lledger *ll = rfl_checkobject(L, 1, RFL_LEDGER);
    if (!rfl_collectable(ll)) return 0;
    rf_ledger_close(ll->l, NULL);
    ll->l = NULL;
    rfl_set_open(ll, false);
    rf_ledger_tally_free(ll->appended);
    ll->appended = NULL;
    return 0;
}

/* ledger:_tally_appends(): from now on, counts every line this ledger appends whole into a tally
 * (rf_ledger_tally_observer), as a tally reading the line back would count it (retryfreeze.ledger_stats.of_appends
 * reads the counts). Used by `retryfreeze soak` for its run's statistics. A second call goes on with the same
 * counts. Raises on a closed ledger. */
static int ledger_tally_appends(lua_State *L, rfl_call *call) {
    lledger *ll = call->self;
    if (ll->appended != NULL) return 0;
    rf_ledger_tally *tally = NULL;
    rf_error err;
    if (rf_ledger_tally_new(NULL, &tally, &err) != RF_OK) return rfl_error(L, "ledger:_tally_appends: %s", err.message);
    if (rf_ledger_observe(ll->l, rf_ledger_tally_observer, tally, &err) != RF_OK) {
        rf_ledger_tally_free(tally);
        return rfl_error(L, "ledger:_tally_appends: %s", err.message);
    }
    ll->appended = tally;
    return 0;
}

/* ledger:hold(max_bytes) → true, or nil, message. max_bytes > 0: from now on each line is held in memory and the
 * held lines go out as one write(2) of whole lines when the next would take them past max_bytes, at ledger:flush()
 * and at close (rf_ledger_hold; a line longer than max_bytes goes alone, at once); 0: lines go out at once again,
 * the held ones first. The host bounds how long a line waits by calling ledger:flush() (a timer, and before it
 * exits: examples/nginx/retry_proxy.lua). nil, message: writing the held lines failed (those not written are lost;
 * the message says how many). Raises for max_bytes not an integer from 0 to core.LEDGER_BATCH_BYTES, and on a
 * ledger counting its appends (ledger:_tally_appends needs each line's record as it is written). */
static int ledger_hold(lua_State *L, rfl_call *call) {
    lledger *ll = call->self;
    lua_Integer max = 0;
    if (!rfl_tointeger_exact(L, 2, &max) || max < 0 || max > RF_LEDGER_BATCH_BYTES)
        return rfl_error(L, "ledger:hold: max_bytes must be an integer from 0 to %d, got %s", RF_LEDGER_BATCH_BYTES,
                         lua_type(L, 2) == LUA_TNUMBER ? lua_tostring(L, 2) : luaL_typename(L, 2));
    rf_error err;
    rf_status st = rf_ledger_hold(ll->l, (size_t)max, &err);
    if (st == RF_EINVAL) return rfl_error(L, "ledger:hold: %s", err.message);
    if (st != RF_OK) return rfl_fail(L, err.message, NULL);
    lua_pushboolean(L, 1);
    return 1;
}

/* ledger:flush() → true, or nil, message: writes the lines ledger:hold made it hold, in one write(2) (nothing held:
 * true at once). nil, message: the write failed or was cut short (a full disk); the message says how many held lines
 * were lost. */
static int ledger_flush(lua_State *L, rfl_call *call) {
    lledger *ll = call->self;
    rf_error err;
    if (rf_ledger_flush(ll->l, &err) != RF_OK) return rfl_fail(L, err.message, NULL);
    lua_pushboolean(L, 1);
    return 1;
}

/* ledger:held() → the number of lines held (ledger:hold) and not yet written. */
static int ledger_held(lua_State *L, rfl_call *call) {
    lua_pushinteger(L, (lua_Integer)rf_ledger_held(((lledger *)call->self)->l));
    return 1;
}

/* ledger:_appended() → stats: the counts since ledger:_tally_appends, as core.ledger_tally's tally:stats() gives
 * them (lines = the records counted, none torn or corrupt), read from a snapshot. Also after close. Raises when
 * counting never started, or memory ran out while counting. */
static int ledger_appended(lua_State *L, rfl_call *call) {
    lledger *ll = call->self;
    if (ll->appended == NULL) return rfl_error(L, "ledger:_appended: call ledger:_tally_appends() first");
    const rf_ledger_tally *copy = rfl_tally_snapshot(L, ll->appended);
    rfl_push_tally_stats(L, copy);
    lua_remove(L, -2); /* the box: the copy is freed by its __gc */
    return 1;
}

static int l_ledger_close(lua_State *L) { return rfl_method(L, 1, RFL_LEDGER, 0, ledger_close); }
static int l_ledger_tally_appends(lua_State *L) { return rfl_method(L, 1, RFL_LEDGER, RFL_OPEN, ledger_tally_appends); }
static int l_ledger_appended(lua_State *L) { return rfl_method(L, 1, RFL_LEDGER, 0, ledger_appended); }
static int l_ledger_hold(lua_State *L) { return rfl_method(L, 1, RFL_LEDGER, RFL_OPEN, ledger_hold); }
static int l_ledger_flush(lua_State *L) { return rfl_method(L, 1, RFL_LEDGER, RFL_OPEN, ledger_flush); }
static int l_ledger_held(lua_State *L) { return rfl_method(L, 1, RFL_LEDGER, RFL_OPEN, ledger_held); }

/* A try's replay facts into the try table on top, those the line has: timeout_ms, transport, not_sent (true),
 * grpc_status (1..16), wait = {[header] = value}, date; and its peer ("host:port"). */
static void push_try_facts(lua_State *L, const rf_ledger_try *t) {
    if (t->timeout_ms > 0) rfl_set_int(L, "timeout_ms", t->timeout_ms);
    rfl_set_str(L, "transport", t->transport);
    if (t->not_sent) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "not_sent");
    }
    if (t->grpc_status) rfl_set_int(L, "grpc_status", t->grpc_status);
    bool any = false;
    for (int h = 0; h < RF_WAIT_HEADER_COUNT; h++) {
        if (t->wait[h] == NULL) continue;
        if (!any) lua_createtable(L, 0, 2);
        any = true;
        rfl_set_str(L, rf_wait_header_name((rf_wait_header)h), t->wait[h]);
    }
    if (any) lua_setfield(L, -2, "wait");
    rfl_set_str(L, "date", t->date);
    rfl_set_str(L, "peer", t->peer);
}

static void push_record(lua_State *L, const rf_ledger_record *rec) {
    luaL_checkstack(L, 6, "ledger record"); /* a record, its tries, a try, a key and a value */
    lua_createtable(L, 0, 15);
    rfl_set_int(L, "ts_ms", rec->ts_ms);
    rfl_set_str(L, "route", rec->route);
    rfl_set_str(L, "method", rec->method);
    rfl_set_str(L, "path", rec->path);
    rfl_set_str(L, "key", rec->key);
    rfl_set_str(L, "policy", rec->policy);
    rfl_set_int(L, "attempts", rec->attempts);
    rfl_set_int(L, "elapsed_ms", rec->elapsed_ms);
    rfl_set_str(L, "outcome", rec->outcome);
    rfl_set_str(L, "reason", rec->reason);
    lua_pushboolean(L, rec->ok);
    lua_setfield(L, -2, "ok");
    rfl_set_int(L, "status", rec->status);
    rfl_set_int(L, "body_len", rec->body_len);
    lua_createtable(L, (int)rec->n_tries, 0);
    for (size_t i = 0; i < rec->n_tries; i++) {
        const rf_ledger_try *t = &rec->tries[i];
        lua_createtable(L, 0, 7);
        rfl_set_str(L, "class", t->class_name);
        rfl_set_int(L, "status", t->status);
        rfl_set_int(L, "elapsed_ms", t->elapsed_ms);
        rfl_set_int(L, "delay_ms", t->delay_ms);
        rfl_set_str(L, "reason", t->reason);
        rfl_set_str(L, "retry_after", t->retry_after);
        rfl_set_str(L, "retry_after_header", t->retry_after_header);
        push_try_facts(L, t);
        if (t->fate != NULL) { /* a hedged request's try */
            rfl_set_int(L, "start_ms", t->start_ms);
            lua_pushboolean(L, t->hedge);
            lua_setfield(L, -2, "hedge");
            rfl_set_str(L, "fate", t->fate);
        }
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "tries");
    rfl_set_str(L, "host", rec->host);
    rfl_set_str(L, "budget", rec->budget);
    if (rec->has_inbound_deadline) rfl_set_int(L, "inbound_deadline_ms", rec->inbound_deadline_ms);
    if (rec->inbound_attempt > 0) rfl_set_int(L, "inbound_attempt", rec->inbound_attempt);
}

static int l_reader_gc(lua_State *L) {
    lreader *lr = rfl_checkobject(L, 1, RFL_READER);
    if (!rfl_collectable(lr)) return 0; /* called by hand while it steps */
    rf_ledger_reader_close(lr->r);
    lr->r = NULL;
    return 0;
}

/* The iterator's state table (argument 1), read and written raw: state[key] pushed, or the value on top popped
 * into it. */
static void get_state(lua_State *L, const char *key) {
    lua_pushstring(L, key);
    lua_rawget(L, 1);
}

static void set_state(lua_State *L, const char *key) {
    lua_pushstring(L, key);
    lua_insert(L, -2);
    lua_rawset(L, 1);
}

/* The iterator's step, a method of the reader (pinned: a finalizer that runs while a record is pushed cannot step
 * the same reader, whose next line would overwrite the record's strings). Stack: state, the reader, its path. */
static int read_next(lua_State *L, rfl_call *call) {
    lreader *lr = call->self;
    const char *path = lua_tostring(L, 3);
    lua_pushliteral(L, "skip_corrupt");
    lua_rawget(L, 1);
    bool skip = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (lr->r == NULL) return 0;
    for (;;) {
        rf_ledger_record rec;
        rf_error err;
        rf_ledger_read_status st = rf_ledger_reader_next(lr->r, &rec, &err);
        lua_pushinteger(L, rf_ledger_reader_line(lr->r));
        set_state(L, "lines");
        switch (st) {
        case RF_LEDGER_RECORD: push_record(L, &rec); return 1;
        case RF_LEDGER_TORN: /* a write cut short: noted, and the reader reads on */
            get_state(L, "torn_lines");
            lua_pushinteger(L, lua_tointeger(L, -1) + 1);
            set_state(L, "torn_lines");
            lua_pop(L, 1);
            get_state(L, "torn");
            if (!lua_toboolean(L, -1)) {
                lua_pushinteger(L, err.line);
                set_state(L, "torn");
            }
            lua_pop(L, 1);
            continue;
        case RF_LEDGER_CORRUPT:
            if (!skip) {
                rf_ledger_reader_close(lr->r);
                lr->r = NULL;
                return rfl_error(L, "%s:%d: corrupt ledger line: %s", path, err.line, err.message);
            }
            get_state(L, "corrupt");
            lua_pushinteger(L, lua_tointeger(L, -1) + 1);
            set_state(L, "corrupt");
            lua_pop(L, 1);
            continue;
        case RF_LEDGER_ERROR:
            rf_ledger_reader_close(lr->r);
            lr->r = NULL;
            return rfl_error(L, "%s: cannot read ledger: %s", path, err.message);
        default:
            rf_ledger_reader_close(lr->r);
            lr->r = NULL;
            return 0;
        }
    }
}

/* Iterator step: state is a table {reader = userdata, path = string, torn = false|line, torn_lines = n,
 * corrupt = n, lines = n, skip_corrupt = bool}. Raw reads and writes of the state table: a metatable the script
 * set on it runs no Lua code here. */
static int l_read_next(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    lua_pushliteral(L, "reader");
    lua_rawget(L, 1);
    lua_pushliteral(L, "path");
    lua_rawget(L, 1);
    if (lua_type(L, 3) != LUA_TSTRING) luaL_argerror(L, 1, "a ledger iterator's state (its path is gone)");
    return rfl_method(L, 2, RFL_READER, 0, read_next);
}

/* rf.ledger.read(path [, {skip_corrupt = bool}]) → iterator, state (for rec in it, state do … end;
 * afterwards state.torn is false or the first torn line's number, state.torn_lines how many, state.corrupt the
 * skipped corrupt lines). Raises when the file cannot be opened. */
static int ledger_read(lua_State *L, rfl_call *call) {
    bool nul;
    const char *path = rfl_check_path(L, 1, &nul);
    if (nul) return rfl_error(L, "cannot open ledger %s: the path contains a NUL byte", path);
    bool skip = false;
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        lua_getfield(L, 2, "skip_corrupt");
        skip = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    lua_pushcfunction(L, l_read_next);
    lua_createtable(L, 0, 7);
    lreader *lr = rfl_make(L, call, RFL_READER, sizeof *lr, NULL); /* closed by __gc when the body raises */
    rf_error err;
    if (rf_ledger_reader_open(path, &lr->r, &err) != RF_OK) return rfl_error(L, "%s", err.message);
    rfl_set_open(lr, true);
    lua_setfield(L, -2, "reader");
    lua_pushstring(L, path);
    lua_setfield(L, -2, "path");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "torn");
    lua_pushinteger(L, 0);
    lua_setfield(L, -2, "torn_lines");
    lua_pushinteger(L, 0);
    lua_setfield(L, -2, "corrupt");
    lua_pushboolean(L, skip);
    lua_setfield(L, -2, "skip_corrupt");
    return 2;
}

static int l_ledger_read(lua_State *L) { return rfl_function(L, ledger_read); }

void rfl_open_ledger(lua_State *L) {
    static const luaL_Reg methods[] = {{"close", l_ledger_close},
                                       {"_tally_appends", l_ledger_tally_appends},
                                       {"_appended", l_ledger_appended},
                                       {"hold", l_ledger_hold},
                                       {"flush", l_ledger_flush},
                                       {"held", l_ledger_held},
                                       {NULL, NULL}};
    static const luaL_Reg ledger_meta[] = {{"__gc", l_ledger_gc}, {"__close", l_ledger_close}, {NULL, NULL}};
    static const luaL_Reg reader_meta[] = {{"__gc", l_reader_gc}, {NULL, NULL}};
    static const luaL_Reg funcs[] = {
        {"ledger_open", l_ledger_open}, {"ledger_read", l_ledger_read}, {"utf8_repair", l_utf8_repair}, {NULL, NULL}};
    rfl_new_type(L, RFL_LEDGER, methods, ledger_meta);
    rfl_new_type(L, RFL_READER, NULL, reader_meta);
    luaL_setfuncs(L, funcs, 0);
    lua_pushinteger(L, RF_LEDGER_BATCH_BYTES);
    lua_setfield(L, -2, "LEDGER_BATCH_BYTES");
    lua_pushinteger(L, RF_LEDGER_HOLD_DEFAULT_BYTES);
    lua_setfield(L, -2, "LEDGER_HOLD_DEFAULT_BYTES");
    lua_pushinteger(L, RF_LEDGER_FLUSH_DEFAULT_MS);
    lua_setfield(L, -2, "LEDGER_FLUSH_DEFAULT_MS");
    lua_pushinteger(L, RF_LEDGER_FLUSH_MAX_MS);
    lua_setfield(L, -2, "LEDGER_FLUSH_MAX_MS");
}
