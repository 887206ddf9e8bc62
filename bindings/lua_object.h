/*
 * Which userdata are the binding's objects. Every object the binding hands out (policy, rng, decider, client,
 * ledger, reader, retry budget, step, …) is made by rfl_newobject: a hidden header before the object holds a tag,
 * a per-process secret mixed with the object's type name. A userdata is taken for an object of that type only
 * when it carries that tag, never for its metatable: debug.setmetatable can give any userdata (an io file, a
 * light userdata) one of ours, and debug.getregistry can replace the registry's, but no script can read the
 * secret or write a userdata's bytes. The metatable only finds the methods. docs/reliability.md, "Object
 * identity".
 */
#ifndef RETRYFREEZE_LUA_OBJECT_H
#define RETRYFREEZE_LUA_OBJECT_H

#include "lua_compat.h"

#include <stddef.h>
#include <stdint.h>

/* The tag objects of type tname carry: the per-process secret mixed with tname's FNV-1a hash. Reads the secret
 * from getrandom(2) on first use (pthread_once; write-once, read-only after). */
uint64_t rfl_object_tag(const char *tname);

/* Pushes a new object of type tname: size bytes (zeroed) after the header, nuv user values, the registry's
 * metatable tname (luaL_newmetatable must have made it). Returns the object's bytes. Raises on out of memory, or
 * when the registry's tname is no table (replaced through debug.getregistry). */
void *rfl_newobject(lua_State *L, size_t size, int nuv, const char *tname);

/* The object at idx when it carries tag (rfl_object_tag), else NULL; two API calls, for the hot paths that keep
 * their tags. idx may be a pseudo-index (an upvalue). */
void *rfl_testobject(lua_State *L, int idx, uint64_t tag);

/* The object at idx of type tname, or NULL (rfl_testobject with tname's tag). */
void *rfl_testudata(lua_State *L, int idx, const char *tname);

/* The object at idx of type tname; raises naming argument idx otherwise: "TNAME expected, got light userdata",
 * "TNAME expected, got a forged one" (a userdata wearing the metatable without the tag), or luaL_checkudata's
 * "TNAME expected, got TYPE". */
void *rfl_checkudata(lua_State *L, int idx, const char *tname);

#endif
