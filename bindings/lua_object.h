/*
 * The binding's objects: which userdata they are (identity) and how long they live (lifetime). One module, so
 * that no object can follow rules of its own. docs/reliability.md, "Object identity" and "Lifetimes".
 *
 * Identity. Every object the binding hands out is made by rfl_newobject: a hidden header before the object holds
 * a tag, a per-process secret mixed with the object's type name. A userdata is taken for an object of a type only
 * when it carries that type's tag, never for its metatable: debug.setmetatable can give any userdata (an io file,
 * a light userdata) one of ours, and debug.getregistry can replace the registry's, but no script can read the
 * secret or write a userdata's bytes. The metatable only finds the methods.
 *
 * Lifetime. The header also holds what every object's lifetime needs: open (its C resource exists), busy (a call
 * of it is running), users (objects that borrow it: a client, a step, a retry budget or a decider its policy, a
 * client and a step their ledger and retry budget) and
 * holdings (the Lua values it borrows, anchored through a registry reference kept in C, which the debug library
 * cannot reach as it reaches user values and upvalues). The rule, by kind of entry point:
 *
 *  1. Methods of an object that can close or change under C (client, ledger, ledger reader, ledger tally, retry
 *     budget, step)
 *     enter through rfl_method: it checks the tag, whether the object is open (RFL_OPEN) and not busy, and marks it
 *     busy, before anything else, before any read of an argument, allocation or call that can run Lua (a
 *     metamethod: __index, __len, __tostring…; or a finalizer, which the collector may run on any allocation).
 *     The body runs under lua_pcall; rfl_method clears busy when it returns and when it raises, then returns or
 *     re-raises. While busy, every method of the object raises (close and __close too): nothing the call runs, no
 *     hook, metamethod or finalizer, can close, finish or re-enter it. A method that yields (client:request in a
 *     scheduled flow) asks rfl_method to (rfl_yield), after leaving.
 *  2. Functions that make an object (rf.client, core.step, rf.retry_budget, rf.ledger.open, rf.ledger.read) enter
 *     through rfl_function and make it with rfl_make, closed. What the new object takes from the arguments (a
 *     ledger, a retry budget: rfl_take) is taken the moment it is read, before the next read can run Lua, so no
 *     metamethod can close it between its read and its use; if the body raises, rfl_function releases the
 *     half-made object at once (its type's release), so a failed constructor leaves nothing taken.
 *  3. Objects that never close (policy, rng, decider) are freed by __gc only, which cannot run while a call holds
 *     them on its stack: their calls pin nothing, and read their table arguments raw (lua_next, lua_rawget), so
 *     the decision path runs no Lua and pays no protected call.
 *  4. Functions without such objects (json, glob, read_file, sha256, parse_*, ledger_bucket, …) pin nothing.
 *
 * Which entry point follows which rule is read from the code, not from a list here (a list drifts as entry points
 * are added): rule 1 is every function whose body rfl_method runs, rule 2 every one whose body rfl_function runs
 * (each file's registration table names them); rule 3 is the policy's, the rng's and the decider's (lua_policy.c,
 * and lua_ffi.c for LuaJIT's FFI), which call neither; rule 4 is every other function of the module and the CLI
 * host's exec (cli_main.c).
 *
 * __gc of every type runs only once the object is unreachable, so never during one of its calls nor while
 * something took it; each that frees a resource checks so (rfl_collectable), which makes a __gc called by hand
 * through the debug library on an object in use free nothing.
 *
 * In every case C uses a pointer into a Lua string only while the string is anchored where no Lua code can reach
 * it: on the function's own stack or in a table the call made (a keeper), never only in a caller's table, which a
 * metamethod or finalizer may change.
 */
#ifndef RETRYFREEZE_LUA_OBJECT_H
#define RETRYFREEZE_LUA_OBJECT_H

#include "lua_compat.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The object types: X(ENUM, metatable name, message when closed, message when busy). A NULL message: the type
 * never closes (or has no methods), or is never busy. The metatable name is also the type's name in messages.
 */
#define RFL_OBJECT_TYPES(X)                                                                                       \
    X(RFL_POLICY, "retryfreeze.Policy", "attempt to use a freed policy", NULL)                                    \
    X(RFL_RNG, "retryfreeze.Rng", NULL, NULL)                                                                     \
    X(RFL_DECIDER, "retryfreeze.Decider", "retryfreeze: decider is closed", NULL)                                 \
    X(RFL_CLIENT, "retryfreeze.Client", "attempt to use a closed client",                                         \
      "client is busy (called from its own on_attempt hook)")                                                     \
    X(RFL_PENDING, "retryfreeze.PendingRequest", NULL, NULL)                                                      \
    X(RFL_RESPONSES, "retryfreeze.Responses", NULL, NULL)                                                         \
    X(RFL_LEDGER, "retryfreeze.Ledger", "attempt to use a closed ledger",                                         \
      "ledger is busy (called from code one of its own calls runs)")                                              \
    X(RFL_READER, "retryfreeze.LedgerReader", NULL, "ledger reader is busy (called from code its own step runs)") \
    X(RFL_TALLY, "retryfreeze.LedgerTally", NULL, "ledger tally is busy (called from code its own call runs)")    \
    X(RFL_REPLAY, "retryfreeze.LedgerReplay", NULL, NULL)                                                         \
    X(RFL_BUDGET, "retryfreeze.RetryBudget", "attempt to use a closed retry budget",                              \
      "retry budget is busy (called from code one of its own calls runs)")                                        \
    X(RFL_STEP, "retryfreeze.Step", "rf.flow: this request has already finished",                                 \
      "rf.flow: step is busy (called from its own on_attempt hook)")                                              \
    X(RFL_TEXT, "retryfreeze.InputText", NULL, NULL)                                                              \
    X(RFL_JSON_TREE, "retryfreeze.json_tree", NULL, NULL)                                                         \
    X(RFL_GLOB, "retryfreeze.glob_result", NULL, NULL)                                                            \
    X(RFL_STATE, "retryfreeze.State", NULL, NULL)

#define RFL_X_ENUM(e, name, closed, busy) e,
typedef enum rfl_type { RFL_OBJECT_TYPES(RFL_X_ENUM) RFL_TYPE_COUNT } rfl_type;
#undef RFL_X_ENUM

/* The metatable name of type t ("retryfreeze.Client"). */
const char *rfl_type_name(rfl_type t);

/* ---- identity ------------------------------------------------------------------------------------ */

/* Makes the registry's metatable of type t (luaL_newmetatable): __metatable is its name (getmetatable gives the
 * name, not the table), with methods (NULL: none) __index is a table of them, and the metamethods in meta (NULL:
 * none; __gc, __close, __tostring, …) are set on it. Leaves it on the stack. */
void rfl_new_metatable(lua_State *L, rfl_type t, const luaL_Reg *methods, const luaL_Reg *meta);

/* rfl_new_metatable, then pops it: how a type whose metatable needs nothing else is registered. */
void rfl_new_type(lua_State *L, rfl_type t, const luaL_Reg *methods, const luaL_Reg *meta);

/* The tag objects of type t carry: the per-process secret mixed with t's name (FNV-1a). The secret comes from
 * the OS (rfi_os_random) on first use, with the tags of every type (pthread_once; write-once, read-only after). */
uint64_t rfl_object_tag(rfl_type t);

/* Pushes a new object of type t: size bytes (zeroed) after the header, the registry's metatable of t
 * (rfl_new_metatable must have made it), no user values (what an object borrows it holds: rfl_hold). It starts
 * closed, not busy, with no users and no holdings. Returns the object's bytes. Raises on out of memory, when the
 * registry's metatable is no table (debug.getregistry), or when the OS gave no randomness for the tags (then
 * luaopen's first object raises, and the module does not load). */
void *rfl_newobject(lua_State *L, rfl_type t, size_t size);

/* The object of type t at idx, or NULL (anything else, a forged one included). Two API calls: for hot paths.
 * idx may be a pseudo-index (an upvalue). */
void *rfl_testobject(lua_State *L, int idx, rfl_type t);

/* The object of type t whose userdata bytes start at payload (what LuaJIT's FFI passes for a userdata given to a
 * pointer parameter: lua_ffi.c), or NULL when payload is NULL or carries another tag. Unlike rfl_testobject it
 * cannot see the userdata's length, so payload must point at readable memory of at least the header's size: a
 * userdata's bytes do, and so does an io file's FILE. No Lua C API call: it runs inside an FFI call. */
void *rfl_object_at(void *payload, rfl_type t);

/* The object of type t at idx; raises naming argument idx otherwise: "NAME expected, got light userdata",
 * "NAME expected, got a forged one" (a userdata wearing the metatable without the tag), or "NAME expected, got
 * TYPE". */
void *rfl_checkobject(lua_State *L, int idx, rfl_type t);

/* The pseudo-index of upvalue i of the running C function when it holds a value of type `type`, else 0:
 * debug.setupvalue can put any value there, so every upvalue the binding reads is checked here first (the one
 * place that distrusts them; a caller falls back to a slower path or raises). */
int rfl_upvalue(lua_State *L, int i, int type);

/* ---- lifetime ------------------------------------------------------------------------------------ */

/* Whether obj (an object's bytes) is open; marks it open or closed. Closing does not release anything: each
 * type's close does, then marks it. */
bool rfl_is_open(const void *obj);
void rfl_set_open(void *obj, bool open);

/* The open object of type t at idx, taken by one more user (its close is refused while it has users: each type
 * says how); raises naming argument idx when it is not one, or with the type's closed message. */
void *rfl_take(lua_State *L, int idx, rfl_type t);
/* Gives back what rfl_take took (NULL: nothing). Never raises. */
void rfl_give_back(void *obj);
/* rfl_take for an FFI entry, which may not raise: obj (an object's bytes, of a type the caller knows) taken by one
 * more user when it is open; false (nothing taken) when it is closed or already has 2^32 - 1 users. No Lua C API
 * call. */
bool rfl_take_again(void *obj);
/* The number of users obj has. */
unsigned rfl_users(const void *obj);

/* Whether a collection may release obj: it is not busy and nothing took it. A real collection always finds so
 * (an object in use is reachable from its users and its call); a __gc called by hand (debug.getmetatable) on an
 * object in use does not, and then releases nothing. Every __gc that frees a resource asks this first. */
bool rfl_collectable(const void *obj);
/* Whether obj is open and no call of it is running (not busy): what rfl_method checks before a body, for the FFI's
 * entries (lua_ffi.c), which run no Lua and so need not mark it busy. */
bool rfl_is_idle(const void *obj);
/* The end of an object's life (its close, its __gc, a constructor that raised): gives back each object in
 * taken[0..n-1] that it took with rfl_take (a NULL one is skipped; each is set to NULL), drops its holdings and
 * marks it closed. Safe twice; never raises. */
void rfl_retire(lua_State *L, void *obj, void **taken, size_t n);
/* Pops the value on top into obj's holdings at slot (>= 1): it stays alive as long as the holdings do. The first
 * hold makes the holdings (a table, referenced from the registry by the header). */
void rfl_hold(lua_State *L, void *obj, int slot);
/* Pushes obj's holding at slot (nil when none) and returns its type. Raw reads only: no Lua runs. */
int rfl_held(lua_State *L, const void *obj, int slot);
/* Drops every holding of obj (its close and __gc). Never raises. */
void rfl_release_holdings(lua_State *L, void *obj);
/* Whether obj still has its holdings (rfl_hold made them and rfl_release_holdings has not dropped them): what an FFI
 * entry checks before it uses a pointer into what they hold. No Lua C API call. */
bool rfl_has_holdings(const void *obj);

/* ---- calls --------------------------------------------------------------------------------------- */

typedef struct rfl_state rfl_state;
typedef struct rfl_call rfl_call;
/* A method's or function's body: runs under lua_pcall with the caller's arguments at 1..n. */
typedef int (*rfl_body)(lua_State *L, rfl_call *call);
/* Releases a half-made object (rfl_make) after its constructor raised. Must not raise. */
typedef void (*rfl_release)(lua_State *L, void *obj);

struct rfl_call {
    rfl_state *state; /* the binding's state of this Lua state (lua_state.h) */
    void *self;       /* the object the call pinned (rfl_method), NULL for rfl_function */
    bool yieldable;   /* whether the caller may yield (lua_isyieldable before the body, which cannot: rfl_yield) */
    /* The rest is rfl_method's and rfl_function's own. */
    rfl_call *outer; /* the call this one runs inside (through a hook, a metamethod or a finalizer), or NULL */
    rfl_body body;
    bool entered;
    void *made; /* rfl_make's object, released by made_release when the body raises */
    rfl_release made_release;
    int yield_n; /* > 0: yield that many results (the top ones) after leaving (rfl_yield) */
    lua_KFunction yield_k;
    lua_KContext yield_ctx;
    int (*protected_fn)(lua_State *L, void *ud); /* rfl_pcall's function and its data, NULL when none runs */
    void *protected_ud;
    bool argerror;   /* the body raised a "bad argument" error itself (l_on_error) */
    bool passing_on; /* the body raises an error of Lua code it ran (rfl_pass_on) */
};

enum {
    RFL_OPEN = 1, /* the method refuses a closed object (the type's closed message) */
};

/* luaL_error for the binding: raises the formatted message prefixed by the position of the Lua code that called
 * the binding's function ("file:line: "), also from inside a body that rfl_method or rfl_function runs, where
 * luaL_error would name no position (its caller is C). Every raise of the binding goes through it. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
int rfl_error(lua_State *L, const char *fmt, ...);

/* Raises "<what>: unknown option '<key>'" for a key that is in neither allowed nor more (NULL-terminated name
 * lists; more may be NULL), adding "(did you mean '<name>'?)" when one of their names is a likely typo of key
 * (rfi_did_you_mean: case-insensitive edit distance). key: the key, or the type name of a key that is not a
 * string. */
int rfl_unknown_option(lua_State *L, const char *what, const char *key, const char *const *allowed,
                       const char *const *more);

/* Raises the error on top again from inside call's body: an error of Lua code the body ran (a hook's), which is
 * passed on as it is (never restated as one of the body's own arguments). */
int rfl_pass_on(lua_State *L, rfl_call *call);

/* Calls body as the method of the object of type t at stack index idx (1 for a method: self), the rule 1 above.
 * Raises (before the body) when idx holds no such object, when RFL_OPEN and it is closed, or when it is busy.
 * Returns the body's results; an error of the body is re-raised after leaving, and a "bad argument" error the
 * body itself raised (luaL_argerror, luaL_checktype…, which cannot name the body) is restated for this function
 * (its name, a method's self not counted), as luaL_argerror would have said it here. */
int rfl_method(lua_State *L, int idx, rfl_type t, unsigned flags, rfl_body body);
/* Calls body as a function that pins no object, the rule 2 above (a constructor: see rfl_make). */
int rfl_function(lua_State *L, rfl_body body);
/* Pushes a new object of type t (rfl_newobject) for the running constructor call: if the body raises later,
 * release(L, obj) runs as rfl_function leaves. */
void *rfl_make(lua_State *L, rfl_call *call, rfl_type t, size_t size, rfl_release release);
/* Asks the method's caller to yield the top n results after leaving, with continuation k and context ctx (Lua 5.3+;
 * 5.1 and LuaJIT yield without one, and resume's values become the method's results). */
void rfl_yield(rfl_call *call, int n, lua_KContext ctx, lua_KFunction k);
/* Runs fn(L, ud) under lua_pcall, from inside the body of call, with the top nargs values as its arguments at
 * 1..nargs; returns lua_pcall's code, with nresults results or the error on top. For the parts of a body that run
 * Lua while C must not be unwound: a hook called from inside the engine or libcurl, a loop that must clean up.
 * fn and ud travel in C (the call), never as Lua values, so the debug library cannot call fn with data of its
 * own. Raises nothing itself (the stack must have room for one more value). */
int rfl_pcall(lua_State *L, rfl_call *call, int (*fn)(lua_State *L, void *ud), void *ud, int nargs, int nresults);

#endif
