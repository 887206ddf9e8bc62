/*
 * core.read_file(path, cap [, what]) → text, or nil, message, kind: the one reader of whole input files for the
 * Lua library (decision tables, pairing logs, locks read as text), over rf_input_read (retryfreeze/input.h):
 * regular files only, never more than cap bytes. core.sha256_file(path [, what]): a file's digest, read in pieces. Also
 * the caps: core.LOCK_MAX_BYTES, core.TABLE_MAX_BYTES, core.LOG_MAX_BYTES, core.SCRIPT_MAX_BYTES.
 */
#define _POSIX_C_SOURCE 200809L
#include "lua_retryfreeze.h"
#include "retryfreeze/input.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

/* The buffer rf_input_read returned, owned by a userdata until its bytes are a Lua string: if pushing the
 * string raises (out of memory), __gc frees it. */
typedef struct text_box {
    char *text;
} text_box;

static int l_text_gc(lua_State *L) {
    text_box *b = rfl_checkobject(L, 1, RFL_TEXT);
    rf_input_free(b->text);
    b->text = NULL;
    return 0;
}

/*
 * core.read_file(path, cap [, what]): path a string without NUL bytes, cap a byte count ≥ 0, what the input's
 * name in messages (default "file"). Returns the whole text (NUL bytes kept), or nil, message, kind where
 * message names the file ("cannot open pairing log x: No such file or directory", "… it is a FIFO, not a
 * regular file", "decision table x is over the 4194304 byte limit") and kind is "missing" (no such file),
 * "refused" (not a regular file, or over the cap) or "unreadable" (another I/O error). Raises on a bad
 * argument or when out of memory.
 */
const char *rfl_check_path(lua_State *L, int idx, bool *nul) {
    size_t len;
    const char *path = luaL_checklstring(L, idx, &len);
    *nul = strlen(path) != len;
    return path;
}

const char *rfl_tostring_nonul(lua_State *L, int idx, const char *what) {
    size_t len = 0;
    const char *s = lua_tolstring(L, idx, &len);
    if (s != NULL && memchr(s, '\0', len) != NULL)
        rfl_error(L, "%s must not contain a NUL byte (C would cut the string there)", what);
    return s;
}

static int l_read_file(lua_State *L) {
    bool nul;
    const char *path = rfl_check_path(L, 1, &nul);
    lua_Integer cap = rfl_checkinteger(L, 2);
    const char *what = luaL_optstring(L, 3, "file");
    luaL_argcheck(L, cap >= 0, 2, "the cap must be at least 0");
    if (nul)
        return rfl_fail(L, lua_pushfstring(L, "cannot open %s %s: the path contains a NUL byte", what, path),
                        "refused");
    text_box *box = rfl_newobject(L, RFL_TEXT, sizeof *box);
    size_t len = 0;
    rf_error err;
    rf_status st = rf_input_read(path, (size_t)cap, what, &box->text, &len, &err);
    if (st == RF_ENOMEM) return rfl_error(L, "%s", err.message);
    if (st != RF_OK) {
        struct stat sb;
        bool missing = st == RF_EIO && stat(path, &sb) != 0 && errno == ENOENT;
        return rfl_fail(L, err.message, missing ? "missing" : st == RF_EINVAL ? "refused" : "unreadable");
    }
    lua_pushlstring(L, box->text, len);
    rf_input_free(box->text);
    box->text = NULL;
    return 1;
}

/*
 * core.sha256_file(path [, what]) → "sha256:<64 lowercase hex>", lines; or nil, message, kind (as read_file's):
 * the SHA-256 of a regular file of any length, read in pieces (rf_input_sha256), and its lines as the ledger reader
 * counts them. what names the input in messages (default "file"). Raises on a bad argument.
 */
static int l_sha256_file(lua_State *L) {
    bool nul;
    const char *path = rfl_check_path(L, 1, &nul);
    const char *what = luaL_optstring(L, 2, "file");
    if (nul)
        return rfl_fail(L, lua_pushfstring(L, "cannot open %s %s: the path contains a NUL byte", what, path),
                        "refused");
    char digest[RF_SHA256_TEXT_LEN + 1];
    int64_t lines = 0;
    rf_error err;
    rf_status st = rf_input_sha256(path, what, digest, &lines, &err);
    if (st != RF_OK) {
        struct stat sb;
        bool missing = st == RF_EIO && stat(path, &sb) != 0 && errno == ENOENT;
        return rfl_fail(L, err.message, missing ? "missing" : st == RF_EINVAL ? "refused" : "unreadable");
    }
    lua_pushstring(L, digest);
    lua_pushinteger(L, (lua_Integer)lines);
    return 2;
}

void rfl_open_input(lua_State *L) {
    static const luaL_Reg meta[] = {{"__gc", l_text_gc}, {NULL, NULL}};
    static const luaL_Reg funcs[] = {{"read_file", l_read_file}, {"sha256_file", l_sha256_file}, {NULL, NULL}};
    rfl_new_type(L, RFL_TEXT, NULL, meta);
    luaL_setfuncs(L, funcs, 0);
    rfl_set_int(L, "LOCK_MAX_BYTES", RF_LOCK_MAX_BYTES);
    rfl_set_int(L, "TABLE_MAX_BYTES", RF_TABLE_MAX_BYTES);
    rfl_set_int(L, "LOG_MAX_BYTES", RF_LOG_MAX_BYTES);
    rfl_set_int(L, "SCRIPT_MAX_BYTES", RF_SCRIPT_MAX_BYTES);
}
