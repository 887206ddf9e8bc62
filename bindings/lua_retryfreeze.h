/* Private header of the Lua binding (retryfreeze.core): functions shared between its files (prefix rfl_). */
#ifndef RETRYFREEZE_LUA_H
#define RETRYFREEZE_LUA_H

#include "retryfreeze/client.h"
#include "retryfreeze/decide.h"
#include "retryfreeze/ledger.h"
#include "retryfreeze/policy.h"
#include "lua_compat.h"
#include "lua_object.h"
#include "lua_state.h"

/* The only exported symbol of the module: require "retryfreeze.core". */
#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
int luaopen_retryfreeze_core(lua_State *L);

/* The policy at stack index idx, or raises a type error ("retryfreeze.Policy expected"). */
const rf_policy *rfl_check_policy(lua_State *L, int idx);
/* The same, taken by one more user (rfl_take: a __gc called by hand then frees nothing; give it back with
 * rfl_give_back(*obj) or rfl_retire). */
const rf_policy *rfl_take_policy(lua_State *L, int idx, void **obj);
/* Reads a facts table (raw iteration; unknown keys raise, naming the key). */
void rfl_read_facts(lua_State *L, int arg, rf_facts *f);
/* Pushes a verdict table of policy p. */
void rfl_push_verdict(lua_State *L, const rf_policy *p, const rf_verdict *v);
/* t[k] = v for the table on top of the stack (a Lua integer). */
void rfl_set_int(lua_State *L, const char *k, int64_t v);
/* t[k] = v for the table on top of the stack (a Lua string); nothing when v is NULL (the field stays absent). */
void rfl_set_str(lua_State *L, const char *k, const char *v);
/* The one shape of an expected failure, which is not misuse: a lock that does not load, a file that cannot be
 * opened, a ledger in use, Redis out of reach, a header value that does not parse, a step that may not start.
 * Pushes nil, message and, when code is not NULL, code (a short word such as "missing"); returns the number of
 * values pushed, 2 or 3, for `return rfl_fail(...)` (as luaL_fileresult does). Misuse raises instead. */
int rfl_fail(lua_State *L, const char *message, const char *code);
/* The open ledger at idx, taken by one more user (rfl_take: ledger:close() answers nil, "ledger in use …" until it
 * is given back with rfl_give_back(*obj)); returns its rf_ledger. Raises when idx holds no open ledger. */
rf_ledger *rfl_take_ledger(lua_State *L, int idx, void **obj);
/* The client's network options (lua_client_network.c): their names, and reading them into *o (raises on a
 * bad value, naming the option); every string read is kept in the table at keep. o is a struct
 * rf_client_options. */
struct rf_client_options;
extern const char *const rfl_client_network_keys[];
void rfl_read_client_network(lua_State *L, int idx, int keep, struct rf_client_options *o);
/* Reads request.deadline_ms and request.timeout_ms (integers >= 1, ms) into *req (a struct rf_request). */
struct rf_request;
void rfl_read_request_limits(lua_State *L, int idx, struct rf_request *req);
/* Where a request's strings are kept, so that C may point at them while the request runs: a keeper table at stack
 * index idx (absolute), by the request's field names (slot NULL: a keeper of one request, reusable), or at
 * idx[*slot + 1] on, *slot counted up (one keeper many requests share, its slots taken in turn). */
typedef struct rfl_keeper {
    int idx;
    lua_Integer *slot;
} rfl_keeper;
/* Pops the value on top of the stack into keeper k (a table the call made: no metamethod runs): at the next slot
 * of a shared keeper, else at field name, or, with name NULL, appended to the keeper's array part (lines a reused
 * keeper empties). */
void rfl_keep_value(lua_State *L, const rfl_keeper *k, const char *name);
/* Reads request.inbound_headers (nil, or {name = value or {values…}}, as ngx.req.get_headers() gives them: the
 * headers of the request this one serves) into req->inbound_headers as "name: value" lines, kept in keeper k
 * (rfl_keep_value): a keeper of one request in its field inbound_headers (set to nil when there are none), a shared
 * one in its next slot (nothing is stored when there are none). A value that is not a string raises (the script's
 * mistake); what a value says is never an error: the engine only lets it narrow. */
void rfl_read_inbound(lua_State *L, int idx, const rfl_keeper *k, struct rf_request *req);
/* Sets rf.libcurl (version, ssl, http2) in the module table on top of the stack. */
void rfl_open_client_network(lua_State *L);
/* Pushes a try table {class, status, transport, elapsed_ms, delay_ms, timeout_ms, reason [, retry_after,
 * retry_after_header, error]} and a response table {status, ok, outcome, reason, attempts, elapsed_ms, body,
 * headers, tries, route [, ledger_error]}: the shapes client:request returns (lua_response.c). */
void rfl_push_try(lua_State *L, const rf_try *t);
/* rfl_push_response: pushes the response table of *r. body_idx and headers_idx: stack indices (absolute or relative
 * to the top before the push) of the values to use as its body and headers, or 0 for none, which uses r's own body
 * and header block; 0 is read as "none" before any index arithmetic, so it never names the top. */
void rfl_push_response(lua_State *L, const rf_response *r, int body_idx, int headers_idx);
/* For a caller that builds many responses (client:all): the field names pushed once, and a cache of the engine's
 * strings; each response then copies its names from there instead of interning them again. */
/* Slots of rfl_response_names' cache of the engine's strings (a power of two). */
#define RFL_VALUE_CACHE 16

/* The pushed field names, and a cache of the strings the engine names a response's values with (an outcome, a
 * reason, a transport, the route's endpoint): constant strings, owned by the engine or by the policy the client
 * holds, so that the same pointer is the same text. Each slot holds the last such string whose pointer maps to it,
 * and its Lua copy on the stack: a response reuses the copy instead of interning the text again. */
typedef struct rfl_response_names {
    int base;                            /* index of the first field name */
    int cache;                           /* index of the first of RFL_VALUE_CACHE slots (nil until used) */
    const char *cached[RFL_VALUE_CACHE]; /* the string each slot's copy is of; NULL: none yet */
} rfl_response_names;
/* Pushes the field names and the cache's slots (nil) on the stack, into *names; they stay there while names is used. */
void rfl_push_field_names(lua_State *L, rfl_response_names *names);
/* rfl_push_response with r's own body and headers, its names taken from *names (rfl_push_field_names). */
void rfl_push_response_named(lua_State *L, const rf_response *r, rfl_response_names *names);
/* Pushes p[0, len) lowercased (ASCII, as tolower in the C locale): a response header name as client:request's and
 * step:finish's headers tables key it. Built on the C stack when short (every usual name), which costs a third of a
 * luaL_Buffer; a longer one in a luaL_Buffer. */
void rfl_push_lower(lua_State *L, const char *p, size_t len);
/* Registers core.step and core.wall_ms (lua_step.c). */
void rfl_open_step(lua_State *L);
/* The open retry budget (rf.retry_budget) at idx, taken by one more user (budget:close() raises until it is given
 * back with rfl_give_back(*obj)); returns its rf_retry_budget. Raises when idx holds no open budget. */
rf_retry_budget *rfl_take_retry_budget(lua_State *L, int idx, void **obj);
void rfl_open_retry_budget(lua_State *L);
/* rf.retry_budget(policy [, opts]) as a lua_CFunction (for rf.client's retry_budget = {redis=…}). */
int rfl_retry_budget_new(lua_State *L);
/* Pushes a ratio budget's window as budget:window() and client:retry_tokens() give it: {ttl_ms, requests, retries,
 * allowance} (allowance: the retries the window allows, retryRatio × requests + the reserve). */
void rfl_push_budget_window(lua_State *L, const rf_budget_window *w);
/* Puts budget b (of policy p, with a retryBudget, no store yet) in nginx's lua_shared_dict `name`, shared by the
 * workers (lua_budget_shdict.c); raises outside nginx, without that dict, or when the engine refuses the store. */
int rfl_budget_shdict_store(lua_State *L, const rf_policy *p, rf_retry_budget *b, const char *name);
/* The rf_client of a client method's self (pinned by rfl_method), for a C loop that drives it and calls back into
 * Lua; raises (naming what) when it has scheduled requests in flight (the loop would be reported theirs) or an
 * on_attempt hook (not available in scheduled flows). */
rf_client *rfl_client_loop(lua_State *L, void *self, const char *what);
/* Ends the started request *p at once, if any (NULL: nothing to do): rf_pending_stop with why (reason
 * stopped-by-caller, its attempt in flight aborted), then rf_pending_free, which writes its ledger line (one reported
 * done had its line written then), and clears its response *resp; *p is NULL after. For client:_cancel and a
 * client:_run_generated stopped by its on_progress: dropping a request would leave it without its line. */
void rfl_pending_cancel(rf_pending **p, rf_response *resp, const char *why);
/* The body of client:_run_generated{…} (lua_client_generated.c), a client method. */
int rfl_client_run_generated(lua_State *L, rfl_call *call);
/* Register the Client and Ledger metatables and functions in the module table on top of the stack. */
void rfl_open_client(lua_State *L);
void rfl_open_ledger(lua_State *L);
void rfl_open_ledger_tally(lua_State *L);
/* core.ledger_replay (lua_replay.c). */
void rfl_open_replay(lua_State *L);
/* A ledger's running tally (ledger:_tally_appends, an rf_ledger_tally fed by rf_ledger_tally_observer) read from
 * Lua (lua_ledger_tally.c): snapshot pushes a box that owns a copy of t (freed by its __gc) and returns the copy,
 * so that a finalizer that appends to the ledger while the stats are pushed feeds t, never what is being read;
 * push_tally_stats pushes tally:stats()'s table of t, grouped by route (raises when t is incomplete). */
struct rf_ledger_tally;
struct rf_ledger_tally *rfl_tally_snapshot(lua_State *L, const struct rf_ledger_tally *t);
void rfl_push_tally_stats(lua_State *L, const struct rf_ledger_tally *t);
/* The same, its named scopes under group ("by_route" or "by_host"). */
void rfl_push_tally_stats_as(lua_State *L, const struct rf_ledger_tally *t, const char *group);
/* The string argument idx as a file path (raises unless a string). *nul is set when it holds a NUL byte: C
 * would open a shorter path, so the caller refuses it (lua_input.c). */
const char *rfl_check_path(lua_State *L, int idx, bool *nul);
/* The string at idx (lua_tolstring: NULL unless a string or number); raises "<what> must not contain a NUL byte"
 * when it holds one: C reads it up to its first NUL, so "key\0a" and "key\0b" would become the same "key". */
const char *rfl_tostring_nonul(lua_State *L, int idx, const char *what);
/* Adds core.read_file and the readers' size caps (lua_input.c). */
void rfl_open_input(lua_State *L);
/* Adds core.write_file and core.append_file, the writers of output files (lua_output.c). */
void rfl_open_output(lua_State *L);
/* Add json_codec (lua_json.c, cJSON) and glob (lua_glob.c, glob(3)) to the module table on top of the stack. */
void rfl_open_json(lua_State *L);
void rfl_open_glob(lua_State *L);
/* The lock schema (lua_lock_schema.c). rfl_push_fields sets, in the table on top of the stack, the view of every
 * field of place `place` (an rf_field_place) under the object of row `parent` (-1: the place's top), of route `route`
 * for a route's fields: each at its row's view key, an object as a nested table, an absent field left out.
 * rfl_push_lock_view pushes a fresh table of the lock's object at path ("gate") and returns true, or pushes nothing
 * and returns false when the lock has none. rfl_open_lock_schema adds core.lock_schema and core.lock_field_check. */
void rfl_push_fields(lua_State *L, const rf_policy *p, size_t route, long parent, int place);
bool rfl_push_lock_view(lua_State *L, const rf_policy *p, const char *path);
void rfl_open_lock_schema(lua_State *L);
/* Registers the Policy and Rng metatables and adds the policy functions to the table on top of the stack. */
void rfl_open_policy(lua_State *L);
/* A decider's decision for one attempt, in C alone (lua_policy.c, for the FFI path of lua_ffi.c): obj is a decider's
 * bytes; the numbers come as doubles and are checked here as policy:decider's calls check them. RF_OK and *v, or
 * RF_EINVAL (a fact out of range, the decider closed, or rf_decide refused the facts). */
rf_status rfl_decider_attempt(void *obj, double status, rf_transport transport, double attempts, double elapsed_ms,
                              const char *retry_after, size_t retry_after_len, const char *date, size_t date_len,
                              double now_ms, rf_verdict *v);
/* step:begin and step:after (without a hook) in C alone, for the FFI path (lua_step.c): obj is a step's bytes, the
 * clocks doubles, checked as the methods check them. begin: 0 and *timeout_ms, 1 and *stop (the request ends), or
 * -1 (the step is finished or busy, or a clock is out of range: the method raises). after: the result's fields as
 * step:after reads them (transport -1: none given; hints[n_hints], RF_WAIT_HEADER_COUNT, by rf_wait_header; peer
 * NULL or peer_len bytes); 0 and *delay_ms (retry), 1 and *stop, or -1 (as begin's, also a status, transport or peer
 * step:after refuses, or no begin). */
int rfl_step_begin_attempt(void *obj, double now_ms, int64_t *timeout_ms, rf_reason *stop);
int rfl_step_after_attempt(void *obj, double status, int transport, bool not_sent, const char *error, const char *date,
                           const char *const *hints, int n_hints, const char *peer, size_t peer_len, double now_ms,
                           double wall_ms, int64_t *delay_ms, rf_reason *stop);
/* The FFI's step:finish for a host that reads no response table (rfl_ffi_abi_v4.step_end): ends the request of the
 * open, idle step obj whose last attempt ended (reason an rf_reason; clocks as step:finish takes them), appends its
 * ledger record, gives back what the step took and frees its response; its Lua holdings go with the userdata.
 * Returns 1 when the response is overloaded (rf_response.overloaded), 0 when not, -1 (nothing done) for a step that
 * is not open and idle, has an attempt in flight, or a bad argument: the Lua half then calls step:finish. */
int rfl_step_end_request(void *obj, double reason, double now_ms, double wall_ms);
/* Reuses the step obj that rfl_step_end_request ended for a new request (rfl_ffi_abi_v4.step_reuse), as core.step
 * would make one with the same policy and io (its ledger, rng and retry budget, which its holdings keep): no userdata,
 * holdings or keeper table per request. method, path and key (NULL: none) are method_len, path_len and key_len bytes,
 * copied into the step; rf_step_init matches the route (*route its index in policy:routes() order, from 0; -1 none).
 * Returns 0: the step serves the request, open, its clock started at now_ms (no attempt begun); 1: no route matches,
 * or serve[*route] is 0 (serve: n_serve bytes, one per route: whether a step may serve it; a route past n_serve may
 * not), and the step stays ended; -1, the step stays ended: obj is no step the FFI ended (open, busy, finished by
 * step:finish or collected), its ledger or retry budget is closed, an argument is one core.step refuses (an empty
 * method, a path that does not start with '/', a NUL byte, an empty key or one with a CR or LF) or rf_step_init refuses
 * (a lowercase method, a hedged route), now_ms is no clock reading, or memory ran out: the host then makes a new step
 * with core.step, which raises what it refuses. No Lua C API call. */
int rfl_step_reuse(void *obj, const char *method, size_t method_len, const char *path, size_t path_len, const char *key,
                   size_t key_len, const unsigned char *serve, size_t n_serve, double now_ms, long *route);
/* The FFI's step:propagation for a host that sets the two values itself (rfl_ffi_abi_v4.step_propagation): the
 * attempt number and the deadline in ms rf_step_propagation_values gives (its lines' numbers) for the open, idle
 * step obj (the attempt header's, then the deadline header's); 0 and both set, 1 when its route has no propagation,
 * -1 for a step that is not open and idle (the Lua half then calls step:propagation, which raises). */
int rfl_step_propagation_values(void *obj, double *attempt, double *deadline_ms);
/* The FFI path (lua_ffi.c), under LuaJIT. rfl_open_ffi runs once per luaopen, after rfl_open_policy: it sets
 * core.ffi in the module table on top of the stack (true when the FFI path is on), and when it is on holds the Lua
 * half's decider wrap in the binding's state (RFL_STATE_FFI), which policy:decider applies (lua_policy.c). */
void rfl_open_ffi(lua_State *L);

#endif
