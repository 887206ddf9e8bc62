/*
 * The lock schema in Lua (retryfreeze/lock_schema.h): core.lock_schema() (the rows), core.lock_field_check (one
 * value checked as the loader checks it) and the policy's read-only views, pushed field by field from the rows
 * (policy:routes(), policy.gate, policy.retry_budget). It marshals; the rows and the checks are the engine's.
 */
#include "lua_retryfreeze.h"

#include "retryfreeze/lock_schema.h"

#include <string.h>

#define RF_X_STR(name, str) str,
static const char *const type_names[] = {RF_FIELD_TYPES(RF_X_STR)};
static const char *const place_names[] = {RF_FIELD_PLACES(RF_X_STR)};
static const char *const default_names[] = {RF_FIELD_DEFAULTS(RF_X_STR)};
static const char *const canonical_names[] = {RF_FIELD_CANONICAL(RF_X_STR)};
static const char *const widens_names[] = {RF_FIELD_WIDENINGS(RF_X_STR)};
#undef RF_X_STR

/* A bound in the field's own unit: a decimal's as a number (× 1000 undone), every other as an integer. */
static void set_bound(lua_State *L, const char *k, const rf_lock_field *f, int64_t v) {
    if (f->type == RF_FIELD_DECIMAL)
        lua_pushnumber(L, (lua_Number)v / 1000.0);
    else
        lua_pushinteger(L, (lua_Integer)v);
    lua_setfield(L, -2, k);
}

/*
 * core.lock_schema() → a fresh array of the schema's rows, in their order: {path, key, parent (the object's path,
 * nil at the top), place, type, min, max (a decimal's in its own unit), decimals (3 for a decimal, else 0),
 * if_absent, default_json (nil: none), canonical, widens, view (nil: none), about (nil: none)}; the strings of
 * rf_lock_field's enums. A copy: changing it changes nothing.
 */
static int l_lock_schema(lua_State *L) {
    size_t n = rf_lock_schema_count();
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        const rf_lock_field *f = rf_lock_schema_field(i);
        lua_createtable(L, 0, 14);
        rfl_set_str(L, "path", f->path);
        rfl_set_str(L, "key", f->key);
        if (f->parent >= 0) rfl_set_str(L, "parent", rf_lock_schema_field((size_t)f->parent)->path);
        rfl_set_str(L, "place", place_names[f->place]);
        rfl_set_str(L, "type", type_names[f->type]);
        set_bound(L, "min", f, f->min);
        set_bound(L, "max", f, f->max);
        rfl_set_int(L, "decimals", f->type == RF_FIELD_DECIMAL ? 3 : 0);
        rfl_set_str(L, "if_absent", default_names[f->if_absent]);
        rfl_set_str(L, "default_json", f->default_json);
        rfl_set_str(L, "canonical", canonical_names[f->canonical]);
        rfl_set_str(L, "widens", widens_names[f->widens]);
        rfl_set_str(L, "view", f->view);
        rfl_set_str(L, "about", f->about);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* The row of argument idx, a field's path ("gate.maxRetriedSuccess"); raises when no row has it. */
static size_t check_row(lua_State *L, int idx) {
    size_t len;
    const char *path = luaL_checklstring(L, idx, &len);
    long i = strlen(path) == len ? rf_lock_schema_find(path) : -1;
    if (i < 0) luaL_argerror(L, idx, lua_pushfstring(L, "no lock field '%s'", path));
    return (size_t)i;
}

/*
 * core.lock_field_check(path, value) → true, or nil, message ("must be a number from 1 to 10, got 0.5"): value
 * checked as the loader checks that field in a lock (rf_lock_field_check). Raises for a path no row has, a field
 * that is not a number, or a value that is not a number.
 */
static int l_lock_field_check(lua_State *L) {
    size_t i = check_row(L, 1);
    lua_Number v = luaL_checknumber(L, 2);
    rf_field_type t = rf_lock_schema_field(i)->type;
    luaL_argcheck(L, t == RF_FIELD_INTEGER || t == RF_FIELD_DECIMAL, 1, "not a number field");
    rf_error err;
    if (rf_lock_field_check(i, (double)v, &err) != RF_OK) return rfl_fail(L, err.message, NULL);
    lua_pushboolean(L, 1);
    return 1;
}

/* The last part of a view's key ("base_ms" of "backoff.base_ms"): the key in its table. */
static const char *view_key(const char *view) {
    const char *dot = strrchr(view, '.');
    return dot != NULL ? dot + 1 : view;
}

static void push_value(lua_State *L, const rf_lock_field *f, const rf_field_value *v) {
    switch (f->type) {
    case RF_FIELD_INTEGER: lua_pushinteger(L, (lua_Integer)v->number); return;
    case RF_FIELD_DECIMAL: lua_pushnumber(L, (lua_Number)v->number / 1000.0); return;
    case RF_FIELD_BOOLEAN: lua_pushboolean(L, v->number != 0); return;
    case RF_FIELD_ENDPOINT:
    case RF_FIELD_JITTER:
    case RF_FIELD_NAME:
    case RF_FIELD_HEADER: lua_pushstring(L, v->text); return;
    case RF_FIELD_CLASS_LIMITS:
        lua_createtable(L, 0, (int)v->n);
        for (size_t k = 0; k < v->n; k++) {
            lua_pushinteger(L, v->limits[k]);
            lua_setfield(L, -2, v->items[k]);
        }
        return;
    case RF_FIELD_CLASSES:
    case RF_FIELD_METHODS:
    case RF_FIELD_WAIT_HEADERS:
    case RF_FIELD_REASONS:
        lua_createtable(L, (int)v->n, 0);
        for (size_t k = 0; k < v->n; k++) {
            lua_pushstring(L, v->items[k]);
            lua_rawseti(L, -2, (lua_Integer)k + 1);
        }
        return;
    case RF_FIELD_OBJECT:
    case RF_FIELD_ROUTES:
    case RF_FIELD_TYPE_COUNT: break;
    }
    lua_pushnil(L);
}

void rfl_push_fields(lua_State *L, const rf_policy *p, size_t route, long parent, int place) {
    luaL_checkstack(L, 4, "retryfreeze: policy view"); /* a table, a nested table, a key and a value */
    size_t n = rf_lock_schema_count();
    for (size_t i = 0; i < n; i++) {
        const rf_lock_field *f = rf_lock_schema_field(i);
        if (f->parent != parent || (int)f->place != place) continue;
        rf_field_value v;
        if (rf_policy_field(p, route, i, &v) != RF_OK || !v.present) continue;
        if (f->type == RF_FIELD_OBJECT) {
            if (f->view == NULL) { /* no table of its own: its fields stand in its place */
                rfl_push_fields(L, p, route, (long)i, place);
                continue;
            }
            lua_newtable(L);
            rfl_push_fields(L, p, route, (long)i, place);
        } else if (f->view != NULL) {
            push_value(L, f, &v);
        } else {
            continue;
        }
        lua_setfield(L, -2, view_key(f->view));
    }
}

bool rfl_push_lock_view(lua_State *L, const rf_policy *p, const char *path) {
    long i = rf_lock_schema_find(path);
    rf_field_value v;
    if (i < 0 || rf_policy_field(p, 0, (size_t)i, &v) != RF_OK || !v.present) return false;
    lua_newtable(L);
    rfl_push_fields(L, p, 0, i, (int)rf_lock_schema_field((size_t)i)->place);
    return true;
}

void rfl_open_lock_schema(lua_State *L) {
    static const luaL_Reg funcs[] = {
        {"lock_schema", l_lock_schema}, {"lock_field_check", l_lock_field_check}, {NULL, NULL}};
    luaL_setfuncs(L, funcs, 0);
}
