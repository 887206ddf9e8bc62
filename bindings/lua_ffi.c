/*
 * The binding's FFI path under LuaJIT (docs/lua.md, "LuaJIT: the FFI path"). Every classic Lua C API call ends a
 * LuaJIT trace, and costs about twice what it costs on Lua 5.4; a call through LuaJIT's FFI is compiled into the
 * trace. So under LuaJIT, policy:decider returns a Lua closure (bindings/lua_ffi.lua, embedded here) that decides each
 * attempt with one FFI call, with the classic closure as its slow path (errors, a closed decider), and rf.flow makes
 * its step:begin and step:after (without a hook) through the FFI, with the methods as theirs.
 *
 * How the FFI reaches the engine: through an ABI table, a read-only struct of function pointers with its size and
 * version, whose address the module hands to its own Lua half, never through a symbol. The module exports only
 * luaopen_retryfreeze_core (cmake/lua_module.map), so that another libretryfreeze.so in the process neither
 * interposes on its engine nor is interposed by it; and a policy made by this module's engine must be decided by the
 * same engine (a libretryfreeze.so of another version could lay rf_policy out otherwise). ffi.load of an installed
 * libretryfreeze.so would give up both, and a rock has no such library at all.
 *
 * Lifetimes: the FFI side never holds an rf_policy *. It passes the decider's userdata (its bytes, as LuaJIT passes a
 * userdata to a pointer parameter), and the C side finds the decider by its tag and its policy through it on every
 * call: a decider finalized by hand refuses, and the decider takes its policy (lua_object.h, rule 3), so the policy
 * lives while it does. The verdict comes back as numbers (reason as an rf_reason); its strings are Lua strings the
 * Lua half made once from the engine's static names.
 *
 * Only for the Lua 5.1 C API (LuaJIT's and 5.1's modules: a 5.1 module also loads in LuaJIT); RF_NO_FFI=1 in the
 * environment when the module opens keeps the classic path.
 */
#include "lua_retryfreeze.h"
#include "../core/src/util/clock_ms.h"

#include <stdlib.h>
#include <string.h>

#if LUA_VERSION_NUM == 501
#include "lua_ffi_chunk.h" /* generated from bindings/lua_ffi.lua (cmake/bindings.cmake): rfl_ffi_chunk */

/* The ABI's version: bump it, and the _vN of the type names, with any change to the declarations below. */
#define RFL_FFI_ABI_VERSION 4

/*
 * The declarations the FFI and C share, written once: compiled here and given as text to ffi.cdef.
 * rfl_ffi_verdict_v4: what one decision returns (delays are exact in a double: at most 3600000 ms).
 * rfl_ffi_abi_v4.decide: the decision of the decider whose userdata is `decider` for one attempt (the arguments of a
 * decider's call: the numbers as doubles, checked in C; transport an rf_transport; lengths in bytes); 0 and *out, or
 * 1 when `decider` is no open decider, a fact is out of its range or the engine refused the facts.
 * rfl_ffi_step_v4: what step_begin and step_after return besides their code (ms: the per-try timeout after begin,
 * the delay after a retry verdict; reason: the rf_reason of a stop).
 * rfl_ffi_abi_v4.step_begin and step_after: rf.flow's step:begin and step:after (no on_attempt hook) on the step whose
 * userdata is `step` (rfl_step_begin_attempt, rfl_step_after_attempt: transport -1 for none, hints by rf_wait_header,
 * NULL for absent): 0 (an attempt may start / a retry), 1 (the request stops: out->reason), or -1 when `step` is no
 * open, idle step or an argument is one the method refuses (the Lua half then calls the method, which raises).
 * rfl_ffi_abi_v4.step_end: step:finish without the response table (rfl_step_end_request): 1 or 0, whether the
 * response is overloaded, or -1 (the Lua half then calls step:finish).
 * rfl_ffi_abi_v4.step_propagation: the two numbers of step:propagation() (rfl_step_propagation_values).
 * rfl_ffi_abi_v4.step_reuse: a step step_end ended, reused for a new request (rfl_step_reuse; *route its route's
 * index from 0, -1 for none): 0, 1 (no route, or one serve refuses: nothing done) or -1 (the Lua half then answers
 * that it did not reuse it: the host calls core.step).
 * rfl_ffi_abi_v4.monotonic_ms and wall_ms: core.monotonic_ms() and core.wall_ms(), for a host that reads the clocks
 * inside a trace.
 */
#define RFL_FFI_DECLARATIONS(M)                                                                                     \
    M(                                                                                                              \
        typedef struct rfl_ffi_verdict_v4 {                                                                         \
            bool retry;                                                                                             \
            int32_t reason;                                                                                         \
            double delay_ms;                                                                                        \
            double timeout_ms;                                                                                      \
        } rfl_ffi_verdict_v4;                                                                                       \
        typedef struct rfl_ffi_step_v4 {                                                                            \
            int32_t reason;                                                                                         \
            double ms;                                                                                              \
        } rfl_ffi_step_v4;                                                                                          \
        typedef struct rfl_ffi_abi_v4 {                                                                             \
            uint32_t size;                                                                                          \
            uint32_t version;                                                                                       \
            int (*decide)(void *decider, double status, int transport, double attempts, double elapsed_ms,          \
                          const char *retry_after, size_t retry_after_len, const char *date, size_t date_len,       \
                          double now_ms, rfl_ffi_verdict_v4 *out);                                                  \
            int (*step_begin)(void *step, double now_ms, rfl_ffi_step_v4 *out);                                     \
            int (*step_after)(void *step, double status, int transport, bool not_sent, const char *error,           \
                              const char *date, const char **hints, int n_hints, const char *peer, size_t peer_len, \
                              double now_ms, double wall_ms, rfl_ffi_step_v4 *out);                                 \
            int (*step_end)(void *step, double reason, double now_ms, double wall_ms);                              \
            int (*step_propagation)(void *step, rfl_ffi_step_v4 *attempt, rfl_ffi_step_v4 *deadline);               \
            int (*step_reuse)(void *step, const char *method, size_t method_len, const char *path, size_t path_len, \
                              const char *key, size_t key_len, const uint8_t *serve, size_t n_serve, double now_ms, \
                              int32_t *route);                                                                      \
            double (*monotonic_ms)(void);                                                                           \
            double (*wall_ms)(void);                                                                                \
        } rfl_ffi_abi_v4;)
#define RFL_FFI_DECLARE(...) __VA_ARGS__
#define RFL_FFI_TEXT(...) #__VA_ARGS__
RFL_FFI_DECLARATIONS(RFL_FFI_DECLARE)
static const char ffi_cdef[] = RFL_FFI_DECLARATIONS(RFL_FFI_TEXT);

/* rfl_ffi_abi_v4.decide. Runs inside an FFI call: no Lua C API, nothing that can raise. */
static int ffi_decide(void *decider, double status, int transport, double attempts, double elapsed_ms,
                      const char *retry_after, size_t retry_after_len, const char *date, size_t date_len, double now_ms,
                      rfl_ffi_verdict_v4 *out) {
    void *d = rfl_object_at(decider, RFL_DECIDER);
    if (d == NULL || out == NULL || transport < 0 || transport >= RF_TRANSPORT_COUNT) return 1;
    rf_verdict v;
    if (rfl_decider_attempt(d, status, (rf_transport)transport, attempts, elapsed_ms, retry_after, retry_after_len,
                            date, date_len, now_ms, &v) != RF_OK)
        return 1;
    out->retry = v.retry;
    out->reason = (int32_t)v.reason;
    out->delay_ms = (double)v.delay_ms;
    out->timeout_ms = (double)v.timeout_ms;
    return 0;
}

/* rfl_ffi_abi_v4.step_begin. Runs inside an FFI call. */
static int ffi_step_begin(void *step, double now_ms, rfl_ffi_step_v4 *out) {
    void *s = rfl_object_at(step, RFL_STEP);
    if (s == NULL || out == NULL) return -1;
    int64_t timeout = 0;
    rf_reason stop = RF_REASON_COUNT;
    int rc = rfl_step_begin_attempt(s, now_ms, &timeout, &stop);
    out->ms = (double)timeout;
    out->reason = (int32_t)stop;
    return rc;
}

/* rfl_ffi_abi_v4.step_after. Runs inside an FFI call. */
static int ffi_step_after(void *step, double status, int transport, bool not_sent, const char *error, const char *date,
                          const char **hints, int n_hints, const char *peer, size_t peer_len, double now_ms,
                          double wall_ms, rfl_ffi_step_v4 *out) {
    void *s = rfl_object_at(step, RFL_STEP);
    if (s == NULL || out == NULL) return -1;
    int64_t delay = 0;
    rf_reason stop = RF_REASON_COUNT;
    int rc = rfl_step_after_attempt(s, status, transport, not_sent, error, date, hints, n_hints, peer, peer_len, now_ms,
                                    wall_ms, &delay, &stop);
    out->ms = (double)delay;
    out->reason = (int32_t)stop;
    return rc;
}

/* rfl_ffi_abi_v4.step_end. Runs inside an FFI call. */
static int ffi_step_end(void *step, double reason, double now_ms, double wall_ms) {
    void *s = rfl_object_at(step, RFL_STEP);
    if (s == NULL) return -1;
    return rfl_step_end_request(s, reason, now_ms, wall_ms);
}

/* rfl_ffi_abi_v4.step_propagation. Runs inside an FFI call. */
static int ffi_step_propagation(void *step, rfl_ffi_step_v4 *attempt, rfl_ffi_step_v4 *deadline) {
    void *s = rfl_object_at(step, RFL_STEP);
    if (s == NULL || attempt == NULL || deadline == NULL) return -1;
    return rfl_step_propagation_values(s, &attempt->ms, &deadline->ms);
}

/* rfl_ffi_abi_v4.step_reuse. Runs inside an FFI call. */
static int ffi_step_reuse(void *step, const char *method, size_t method_len, const char *path, size_t path_len,
                          const char *key, size_t key_len, const uint8_t *serve, size_t n_serve, double now_ms,
                          int32_t *route) {
    void *s = rfl_object_at(step, RFL_STEP);
    if (route == NULL) return -1;
    *route = -1;
    if (s == NULL) return -1;
    long r = -1;
    int rc = rfl_step_reuse(s, method, method_len, path, path_len, key, key_len, serve, n_serve, now_ms, &r);
    *route = (int32_t)r; /* a policy's routes are far fewer than 2^31 */
    return rc;
}

/* rfl_ffi_abi_v4.monotonic_ms and wall_ms: the clocks of core.monotonic_ms and core.wall_ms (exact in a double). */
static double ffi_monotonic_ms(void) { return (double)rfi_mono_ms(); }
static double ffi_wall_ms(void) { return (double)rfi_wall_ms(); }

static const rfl_ffi_abi_v4 ffi_abi = {
    sizeof(rfl_ffi_abi_v4), RFL_FFI_ABI_VERSION,  ffi_decide,     ffi_step_begin,   ffi_step_after,
    ffi_step_end,           ffi_step_propagation, ffi_step_reuse, ffi_monotonic_ms, ffi_wall_ms};

/* class_name(status, transport) → rf_classify's class name (the Lua half caches each). */
static int l_class_name(lua_State *L) {
    lua_Integer status = luaL_checkinteger(L, 1), transport = luaL_checkinteger(L, 2);
    luaL_argcheck(L, transport >= 0 && transport < RF_TRANSPORT_COUNT, 2, "an rf_transport");
    char buf[RF_CLASS_NAME_MAX];
    rf_classify((int)status, (rf_transport)transport, buf);
    lua_pushstring(L, buf);
    return 1;
}

/* Whether RF_NO_FFI asks for the classic path: set, non-empty and not "0". */
static bool ffi_refused(void) {
    const char *v = getenv("RF_NO_FFI");
    return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

/* Runs the Lua half with the module table at module: holds its decider wrap in the binding's state (RFL_STATE_FFI)
 * and sets core.ffi_step_begin and core.ffi_step_after (rf.flow's, io_flow.lua), and the gateway's core.ffi_step_end,
 * core.ffi_step_propagation, core.ffi_step_reuser, core.ffi_monotonic_ms and core.ffi_wall_ms.
 * Returns whether the path is on (false: no FFI in this Lua). An error of the Lua half is raised: it is a bug, never an
 * expected state. */
static bool install(lua_State *L, int module) {
    if (luaL_loadbuffer(L, (const char *)rfl_ffi_chunk, sizeof rfl_ffi_chunk - 1, "=retryfreeze.ffi") != 0)
        lua_error(L);
    lua_pushliteral(L, "_LOADED");
    lua_rawget(L, LUA_REGISTRYINDEX);
    lua_pushstring(L, ffi_cdef);
    lua_pushlightuserdata(L, (void *)(uintptr_t)&ffi_abi);
    lua_pushinteger(L, RFL_FFI_ABI_VERSION);
    lua_getfield(L, module, "reasons");
    lua_getfield(L, module, "transports");
    lua_getfield(L, module, "wait_headers");
    lua_pushcfunction(L, l_class_name);
    lua_call(L, 8, 1);
    if (lua_type(L, -1) != LUA_TTABLE) {
        lua_pop(L, 1);
        return false;
    }
    int made = lua_gettop(L); /* {decider = wrap, step_begin = f, step_after = f, step_end = f} */
    lua_getfield(L, made, "decider");
    if (lua_type(L, -1) != LUA_TFUNCTION) luaL_error(L, "retryfreeze.ffi: the Lua half made no decider");
    rfl_hold(L, rfl_state_get(L), RFL_STATE_FFI);
    lua_getfield(L, made, "step_begin");
    lua_setfield(L, module, "ffi_step_begin");
    lua_getfield(L, made, "step_after");
    lua_setfield(L, module, "ffi_step_after");
    lua_getfield(L, made, "step_end");
    lua_setfield(L, module, "ffi_step_end");
    lua_getfield(L, made, "step_propagation");
    lua_setfield(L, module, "ffi_step_propagation");
    lua_getfield(L, made, "step_reuser");
    lua_setfield(L, module, "ffi_step_reuser");
    lua_getfield(L, made, "monotonic_ms");
    lua_setfield(L, module, "ffi_monotonic_ms");
    lua_getfield(L, made, "wall_ms");
    lua_setfield(L, module, "ffi_wall_ms");
    lua_pop(L, 1);
    return true;
}
#endif

void rfl_open_ffi(lua_State *L) {
    bool on = false;
#if LUA_VERSION_NUM == 501
    if (!ffi_refused()) on = install(L, lua_gettop(L));
#endif
    lua_pushboolean(L, on);
    lua_setfield(L, -2, "ffi");
}
