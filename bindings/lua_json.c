/* JSON for the Lua library (retryfreeze.json) through cJSON, the parser the lock loader uses: no second parser.
 * Around cJSON, the checks the governance files need (RFC 8259 leaves them to the implementation, §4 and §9):
 * a NUL byte or a \u0000 escape is refused (a C string would cut the value short), duplicate object keys are
 * refused (cJSON keeps both, and one would shadow the other), nesting deeper than RFL_JSON_MAX_DEPTH is refused,
 * and so are numbers out of the double range and control characters outside strings.
 * The cJSON tree lives in a userdata box with a __gc, so a Lua error (out of memory) while converting frees it. */
#include "lua_retryfreeze.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RFL_JSON_MAX_DEPTH 128
#define PATH_CAP 256

/* Upvalues of the decode and encode closures: the null sentinel and the array metatable of retryfreeze.json.
 * decode checks the metatable once (rfl_upvalue: debug.setupvalue may have replaced it) and copies both to its stack,
 * so that a finalizer changing the upvalues while it runs changes nothing it uses. */
#define UV_NULL 1
#define UV_ARRAY_MT 2

typedef struct {
    cJSON *root;
} tree_box;

static int box_gc(lua_State *L) {
    tree_box *b = rfl_checkobject(L, 1, RFL_JSON_TREE);
    cJSON_Delete(b->root);
    b->root = NULL;
    return 0;
}

static tree_box *push_box(lua_State *L) { return rfl_newobject(L, RFL_JSON_TREE, sizeof(tree_box)); }

/* 2^53: below it every integer is exact in a double (RFC 8259 §6: the interoperable range). */
static const double exact_limit = 9007199254740992.0;

typedef struct {
    char path[PATH_CAP];
    char why[PATH_CAP + 128];
    int null_idx, array_mt_idx; /* stack indices of the null sentinel and the array metatable (a table) */
} walk_state;

static void path_key(char *dst, const char *base, const char *key) { snprintf(dst, PATH_CAP, "%s.%s", base, key); }

static void path_index(char *dst, const char *base, int i) { snprintf(dst, PATH_CAP, "%s[%d]", base, i); }

/* Pushes the Lua value of node; false (with st->why) on a refused value. Stack: +1 on success, 0 on failure. */
static bool push_node(lua_State *L, const cJSON *node, const char *path, int depth, walk_state *st) {
    luaL_checkstack(L, 4, "JSON nesting");
    if (cJSON_IsNull(node)) {
        lua_pushvalue(L, st->null_idx);
    } else if (cJSON_IsFalse(node)) {
        lua_pushboolean(L, 0);
    } else if (cJSON_IsTrue(node)) {
        lua_pushboolean(L, 1);
    } else if (cJSON_IsNumber(node)) {
        double d = node->valuedouble;
        if (!isfinite(d)) {
            snprintf(st->why, sizeof st->why, "%s: number out of range", path);
            return false;
        }
        if (d > -exact_limit && d < exact_limit && (double)(lua_Integer)d == d) {
            lua_pushinteger(L, (lua_Integer)d);
        } else {
            lua_pushnumber(L, d);
        }
    } else if (cJSON_IsString(node)) {
        lua_pushstring(L, node->valuestring);
    } else if (cJSON_IsArray(node) || cJSON_IsObject(node)) {
        if (depth >= RFL_JSON_MAX_DEPTH) {
            snprintf(st->why, sizeof st->why, "nesting deeper than %d", RFL_JSON_MAX_DEPTH);
            return false;
        }
        bool array = cJSON_IsArray(node);
        lua_newtable(L);
        if (array) {
            lua_pushvalue(L, st->array_mt_idx);
            lua_setmetatable(L, -2);
        }
        char sub[PATH_CAP];
        int i = 0;
        for (const cJSON *c = node->child; c != NULL; c = c->next, i++) {
            if (array) {
                path_index(sub, path, i);
            } else {
                path_key(sub, path, c->string);
                lua_pushstring(L, c->string);
                if (lua_rawget(L, -2) != LUA_TNIL) {
                    snprintf(st->why, sizeof st->why, "%s: duplicate key \"%s\"", sub, c->string);
                    lua_pop(L, 2);
                    return false;
                }
                lua_pop(L, 1);
            }
            if (!push_node(L, c, sub, depth + 1, st)) {
                lua_pop(L, 1);
                return false;
            }
            if (array) {
                lua_rawseti(L, -2, (lua_Integer)i + 1);
            } else {
                lua_setfield(L, -2, c->string);
            }
        }
    } else {
        snprintf(st->why, sizeof st->why, "%s: unsupported JSON value", path);
        return false;
    }
    return true;
}

/* The 1-based position of the first byte the checks around cJSON refuse, with the reason; 0 when none.
 * Lexical checks only: a NUL byte; a control character (cJSON skips every byte up to ' ' as whitespace, RFC
 * 8259 §2 allows only space, tab, LF and CR); a \u0000 escape (a backslash run of odd length before "u0000"). */
static size_t refused_byte(const char *s, size_t len, const char **why) {
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0) {
            *why = "NUL byte (JSON text holds none)";
            return i + 1;
        }
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            *why = "control character";
            return i + 1;
        }
        if (c == '\\') {
            size_t run = 0;
            while (i < len && s[i] == '\\') {
                run++;
                i++;
            }
            if (run % 2 == 1 && len - i >= 5 && memcmp(s + i, "u0000", 5) == 0) {
                *why = "\\u0000 escape (a NUL in a string is refused)";
                return i;
            }
            i--;
        }
    }
    return 0;
}

/*
 * The first number token of JSON text s that a double cannot hold as written, as a 1-based byte offset (0: none),
 * with *why: an integer beyond ±2^53 (RFC 8259 §6: 9007199254740993 would read back as ...992, silently), or a
 * nonzero number that underflows to 0 (1e-400). Strings are skipped; what is no valid number is left to cJSON.
 */
static size_t inexact_number(const char *s, size_t len, const char **why) {
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
            continue;
        }
        if (!(c == '-' || (c >= '0' && c <= '9'))) continue;
        size_t start = i, j = i + (c == '-');
        size_t first = j;
        while (j < len && s[j] >= '0' && s[j] <= '9') j++;
        size_t int_end = j;
        bool fractional = false, nonzero = false;
        for (size_t k = first; k < int_end; k++) nonzero = nonzero || s[k] != '0';
        if (j < len && s[j] == '.') {
            fractional = true;
            for (j++; j < len && s[j] >= '0' && s[j] <= '9'; j++) nonzero = nonzero || s[j] != '0';
        }
        if (j < len && (s[j] == 'e' || s[j] == 'E')) {
            fractional = true;
            j++;
            if (j < len && (s[j] == '+' || s[j] == '-')) j++;
            while (j < len && s[j] >= '0' && s[j] <= '9') j++;
        }
        if (!fractional) {
            size_t lead = first;
            while (lead + 1 < int_end && s[lead] == '0') lead++;
            size_t digits = int_end - lead;
            if (digits > 16 || (digits == 16 && memcmp(s + lead, "9007199254740992", 16) > 0)) {
                *why = "integer beyond 2^53 (RFC 8259 \xc2\xa7"
                       "6): a double cannot hold it exactly";
                return start + 1;
            }
        } else if (nonzero) {
            char buf[512];
            size_t n = j - start < sizeof buf - 1 ? j - start : sizeof buf - 1;
            memcpy(buf, s + start, n);
            buf[n] = '\0';
            if (strtod(buf, NULL) == 0.0) {
                *why = "nonzero number that underflows to 0";
                return start + 1;
            }
        }
        i = j - 1;
    }
    return 0;
}

/* decode(text) → value, or nil, "byte N: message" / "$.path: message". */
static int l_decode(lua_State *L) {
    size_t len;
    const char *text = luaL_checklstring(L, 1, &len);
    /* lua_setmetatable must never get a non-table. */
    lua_settop(L, 1);
    if (rfl_upvalue(L, UV_ARRAY_MT, LUA_TTABLE) == 0)
        return rfl_error(L, "retryfreeze.json: the array metatable was replaced (debug.setupvalue)");
    lua_pushvalue(L, lua_upvalueindex(UV_NULL));     /* at 2 */
    lua_pushvalue(L, lua_upvalueindex(UV_ARRAY_MT)); /* at 3 */
    const char *why = NULL;
    size_t at = refused_byte(text, len, &why);
    if (at == 0) at = inexact_number(text, len, &why);
    if (at != 0) return rfl_fail(L, lua_pushfstring(L, "byte %d: %s", (int)at, why), NULL);
    tree_box *box = push_box(L);
    const char *end = NULL;
    /* len + 1: the NUL Lua keeps after every string, counted as cJSON_Parse counts it, so that cJSON's error
     * position can point past the last byte rather than stick to it. */
    box->root = cJSON_ParseWithLengthOpts(text, len + 1, &end, 0);
    if (box->root == NULL) {
        /* cJSON's position is near the fault, not always on it; clamped to the text. */
        size_t pos = end != NULL && end >= text ? (size_t)(end - text) : 0;
        size_t blank = strspn(text, " \t\r\n");
        if (blank >= len) return rfl_fail(L, lua_pushfstring(L, "byte %d: unexpected end of text", (int)len + 1), NULL);
        return rfl_fail(L, lua_pushfstring(L, "byte %d: not valid JSON (RFC 8259)", (int)(pos < len ? pos + 1 : len)),
                        NULL);
    }
    size_t used = (size_t)(end - text);
    while (used < len && (text[used] == ' ' || text[used] == '\t' || text[used] == '\n' || text[used] == '\r')) used++;
    if (used < len)
        return rfl_fail(L, lua_pushfstring(L, "byte %d: trailing data after the JSON value", (int)used + 1), NULL);
    walk_state st;
    st.why[0] = '\0';
    st.null_idx = 2;
    st.array_mt_idx = 3;
    if (!push_node(L, box->root, "$", 0, &st)) return rfl_fail(L, st.why, NULL);
    return 1;
}

/* ---- encoding ---------------------------------------------------------------------------------------------- */

static void add_item(lua_State *L, cJSON *parent, const char *key, cJSON *item) {
    if (item == NULL) rfl_error(L, "out of memory");
    bool ok = key != NULL ? cJSON_AddItemToObject(parent, key, item) : cJSON_AddItemToArray(parent, item);
    if (!ok) {
        cJSON_Delete(item);
        rfl_error(L, "out of memory");
    }
}

/* A non-empty sequence: keys exactly 1..n. */
static bool is_sequence(lua_State *L, int idx) {
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx), count = 0;
    if (n == 0) return false;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        lua_pop(L, 1);
        if (!lua_isinteger(L, -1)) {
            lua_pop(L, 1);
            return false;
        }
        lua_Integer k = lua_tointeger(L, -1);
        if (k < 1 || k > n) {
            lua_pop(L, 1);
            return false;
        }
        count++;
    }
    return count == n;
}

static int compare_keys(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void encode_value(lua_State *L, int idx, int order, cJSON *parent, const char *key, int depth);

/* Encodes the object at idx: the keys named in the order table first (in that order), the rest sorted. */
static void encode_object(lua_State *L, int idx, int order, cJSON *obj, int depth) {
    size_t n = 0;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) rfl_error(L, "cannot encode a non-string object key");
        size_t klen;
        const char *k = lua_tolstring(L, -1, &klen);
        if (strlen(k) != klen) rfl_error(L, "cannot encode an object key holding a NUL byte");
        n++;
    }
    /* The keys to sort are kept in a table of this call (names) as they are collected, so their strings stay
     * alive whatever happens to the table at idx: a finalizer run by an allocation below may change it. */
    const char **keys = lua_newuserdatauv(L, (n ? n : 1) * sizeof *keys, 0);
    int keys_idx = lua_gettop(L);
    lua_newtable(L); /* the keys already written */
    int seen = lua_gettop(L);
    lua_createtable(L, (int)n, 0); /* the names of keys[] */
    int names = lua_gettop(L);
    size_t m = 0;
    if (order != 0) {
        lua_Integer on = (lua_Integer)lua_rawlen(L, order);
        for (lua_Integer i = 1; i <= on; i++) {
            if (lua_rawgeti(L, order, i) == LUA_TSTRING) {
                lua_pushvalue(L, -1);
                bool present = lua_rawget(L, idx) != LUA_TNIL;
                lua_pop(L, 1);
                lua_pushvalue(L, -1);
                bool done = lua_rawget(L, seen) != LUA_TNIL;
                lua_pop(L, 1);
                if (present && !done) {
                    lua_pushvalue(L, -1);
                    lua_pushboolean(L, 1);
                    lua_rawset(L, seen);
                    lua_pushvalue(L, -1);
                    lua_rawget(L, idx);
                    encode_value(L, lua_gettop(L), order, obj, lua_tostring(L, -2), depth + 1);
                    lua_pop(L, 1);
                }
            }
            lua_pop(L, 1);
        }
    }
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        bool done = lua_rawget(L, seen) != LUA_TNIL;
        lua_pop(L, 1);
        if (!done && m < n && lua_type(L, -1) == LUA_TSTRING) {
            lua_pushvalue(L, -1);
            keys[m++] = lua_tostring(L, -1);
            lua_rawseti(L, names, (lua_Integer)m);
        }
    }
    qsort(keys, m, sizeof *keys, compare_keys);
    for (size_t i = 0; i < m; i++) {
        lua_pushstring(L, keys[i]);
        lua_rawget(L, idx);
        encode_value(L, lua_gettop(L), order, obj, keys[i], depth + 1);
        lua_pop(L, 1);
    }
    lua_settop(L, keys_idx - 1);
}

static void encode_value(lua_State *L, int idx, int order, cJSON *parent, const char *key, int depth) {
    char buf[64];
    luaL_checkstack(L, 8, "JSON nesting");
    switch (lua_type(L, idx)) {
    case LUA_TNIL: add_item(L, parent, key, cJSON_CreateNull()); return;
    case LUA_TBOOLEAN: add_item(L, parent, key, cJSON_CreateBool(lua_toboolean(L, idx))); return;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            lua_Integer v = lua_tointeger(L, idx);
            /* What decode would refuse (RFC 8259 §6): never written, so that every file this writes reads back. */
            if (v > (lua_Integer)exact_limit || v < -(lua_Integer)exact_limit)
                rfl_error(L, "cannot encode the integer %s: beyond 2^53 a JSON reader's double cannot hold it exactly",
                          rfl_pushint(L, v));
            snprintf(buf, sizeof buf, "%lld", (long long)v);
        } else {
            double d = lua_tonumber(L, idx);
            if (!isfinite(d)) rfl_error(L, "cannot encode a non-finite number");
            /* The shortest of 14 or 17 significant digits that reads back as the same double. */
            snprintf(buf, sizeof buf, "%.14g", d);
            if (strtod(buf, NULL) != d) snprintf(buf, sizeof buf, "%.17g", d);
        }
        add_item(L, parent, key, cJSON_CreateRaw(buf));
        return;
    case LUA_TSTRING: {
        size_t len;
        const char *s = lua_tolstring(L, idx, &len);
        if (strlen(s) != len) rfl_error(L, "cannot encode a string holding a NUL byte");
        add_item(L, parent, key, cJSON_CreateString(s));
        return;
    }
    case LUA_TTABLE: break;
    default: rfl_error(L, "cannot encode a %s", luaL_typename(L, idx)); return;
    }
    if (lua_rawequal(L, idx, lua_upvalueindex(UV_NULL))) {
        add_item(L, parent, key, cJSON_CreateNull());
        return;
    }
    if (depth >= RFL_JSON_MAX_DEPTH)
        rfl_error(L, "cannot encode nesting deeper than %d (a cycle?)", RFL_JSON_MAX_DEPTH);
    bool array = false;
    if (lua_getmetatable(L, idx)) {
        array = lua_rawequal(L, -1, lua_upvalueindex(UV_ARRAY_MT));
        lua_pop(L, 1);
    }
    if (!array) array = is_sequence(L, idx);
    cJSON *item = array ? cJSON_CreateArray() : cJSON_CreateObject();
    add_item(L, parent, key, item); /* owned by the tree from here on, so a raise below frees it */
    if (array) {
        lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, idx, i);
            encode_value(L, lua_gettop(L), order, item, NULL, depth + 1);
            lua_pop(L, 1);
        }
    } else {
        encode_object(L, idx, order, item, depth);
    }
}

/* encode(value [, order]) → string; raises on what JSON cannot hold. */
static int l_encode(lua_State *L) {
    lua_settop(L, 2);
    int order = lua_isnil(L, 2) ? 0 : 2;
    if (order != 0) luaL_checktype(L, 2, LUA_TTABLE);
    tree_box *box = push_box(L);
    box->root = cJSON_CreateArray(); /* a holder: the value is its one element */
    if (box->root == NULL) return rfl_error(L, "out of memory");
    encode_value(L, 1, order, box->root, NULL, 0);
    char *s = cJSON_PrintUnformatted(box->root->child);
    if (s == NULL) return rfl_error(L, "out of memory");
    lua_pushstring(L, s);
    cJSON_free(s);
    return 1;
}

/* json_codec(null, array_mt) → decode, encode: the two closures, bound to retryfreeze.json's sentinels. */
static int l_json_codec(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    lua_pushcclosure(L, l_decode, 2);
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    lua_pushcclosure(L, l_encode, 2);
    return 2;
}

void rfl_open_json(lua_State *L) {
    static const luaL_Reg meta[] = {{"__gc", box_gc}, {NULL, NULL}};
    static const luaL_Reg funcs[] = {{"json_codec", l_json_codec}, {NULL, NULL}};
    rfl_new_type(L, RFL_JSON_TREE, NULL, meta);
    luaL_setfuncs(L, funcs, 0);
}
