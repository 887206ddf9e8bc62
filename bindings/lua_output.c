/*
 * core.write_file(path, text [, what]), core.append_file(path, text [, what]) and core.check_output(path, mode
 * [, what]): the one writer of output files for the Lua library (reports, metrics, pairing logs), over
 * rf_output_write, rf_output_open_append and rf_output_check (retryfreeze/output.h): through symlinks, never over a
 * directory, FIFO, socket or device, "-" for standard output where a whole file is written.
 */
#define _POSIX_C_SOURCE 200809L
#include "lua_retryfreeze.h"
#include "retryfreeze/output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* nil, message, kind: kind "refused" (not a file that may be written: RF_EINVAL) or "failed" (a system call). */
static int push_failure(lua_State *L, rf_status st, const char *message) {
    lua_pushnil(L);
    lua_pushstring(L, message);
    lua_pushstring(L, st == RF_EINVAL ? "refused" : "failed");
    return 3;
}

/* The path argument: a string without NUL bytes (C would cut it there), else nil, message, "refused". */
static const char *path_arg(lua_State *L, const char *what) {
    bool nul;
    const char *path = rfl_check_path(L, 1, &nul);
    if (!nul) return path;
    lua_pushfstring(L, "cannot write %s %s: the path contains a NUL byte", what, path);
    return NULL;
}

/* The arguments core.write_file and core.append_file share: path (1), text (2, any bytes), what (3). */
typedef struct write_args {
    const char *what, *path, *text;
    size_t len;
} write_args;

/* Reads them, raising on a bad text or what; false, with nil, message, "refused" pushed, for a path with a NUL. */
static bool get_write_args(lua_State *L, write_args *a) {
    a->what = luaL_optstring(L, 3, "output");
    a->path = path_arg(L, a->what);
    a->text = luaL_checklstring(L, 2, &a->len);
    if (a->path != NULL) return true;
    push_failure(L, RF_EINVAL, lua_tostring(L, -1));
    return false;
}

/*
 * core.write_file(path, text [, what = "output"]) → true, or nil, message, kind. Replaces the whole content of
 * the file at path with text (any bytes) atomically, through a symlink to its target; "-" writes to standard
 * output (Lua's buffered io.stdout is flushed first, so the order of what was printed holds). message names
 * the file ("cannot write report x: it is a directory, not a regular file"); kind is "refused" (a directory,
 * FIFO, socket or device, a path ending in "/", a NUL in the path) or "failed" (e.g. "No space left on
 * device"). Raises on a bad argument.
 */
static int l_write_file(lua_State *L) {
    write_args a;
    if (!get_write_args(L, &a)) return 3;
    if (strcmp(a.path, "-") == 0) fflush(stdout);
    rf_error err;
    rf_status st = rf_output_write(a.path, a.text, a.len, a.what, &err);
    if (st != RF_OK) return push_failure(L, st, err.message);
    lua_pushboolean(L, 1);
    return 1;
}

/*
 * core.append_file(path, text [, what = "output"]) → true, or nil, message, kind. Appends text to the file at
 * path (created, mode 0644, when missing) with one write(2) on an O_APPEND descriptor, so concurrent writers'
 * lines never interleave within a line; a short write (a full disk) is an error naming the path. Refuses "-",
 * a directory, FIFO, socket or device, like core.write_file. Raises on a bad argument.
 */
static int l_append_file(lua_State *L) {
    write_args a;
    if (!get_write_args(L, &a)) return 3;
    rf_error err;
    int fd;
    rf_status st = rf_output_open_append(a.path, O_WRONLY, a.what, &fd, &err);
    if (st != RF_OK) return push_failure(L, st, err.message);
    ssize_t n;
    do {
        n = write(fd, a.text, a.len);
    } while (n < 0 && errno == EINTR);
    int e = n < 0 ? errno : 0;
    close(fd);
    if (n < 0 || (size_t)n != a.len) {
        char text_of_e[128];
        if (n < 0 && strerror_r(e, text_of_e, sizeof text_of_e) != 0)
            snprintf(text_of_e, sizeof text_of_e, "error %d", e);
        lua_pushnil(L);
        if (n < 0)
            lua_pushfstring(L, "cannot append to %s %s: %s", a.what, a.path, text_of_e);
        else
            lua_pushfstring(L, "cannot append to %s %s: only %d of %d bytes written (is the disk full?)", a.what,
                            a.path, (int)n, (int)a.len);
        lua_pushliteral(L, "failed");
        return 3;
    }
    lua_pushboolean(L, 1);
    return 1;
}

/*
 * core.check_output(path, mode [, what = "output"]) → true, or nil, message, kind: whether path may be written
 * ("replace": a whole file, as core.write_file; "append": as core.append_file and rf.ledger.open), checked
 * before a command's long run so that it fails at once on a bad output path, without writing anything
 * (rf_output_check). kind as core.write_file's. Raises on a bad argument.
 */
static int l_check_output(lua_State *L) {
    static const char *const modes[] = {"replace", "append", NULL};
    const char *what = luaL_optstring(L, 3, "output");
    const char *path = path_arg(L, what);
    int mode = luaL_checkoption(L, 2, NULL, modes);
    if (path == NULL) return push_failure(L, RF_EINVAL, lua_tostring(L, -1));
    rf_error err;
    rf_status st = rf_output_check(path, mode == 0 ? RF_OUTPUT_REPLACE : RF_OUTPUT_APPEND, what, &err);
    if (st != RF_OK) return push_failure(L, st, err.message);
    lua_pushboolean(L, 1);
    return 1;
}

void rfl_open_output(lua_State *L) {
    static const luaL_Reg funcs[] = {
        {"check_output", l_check_output}, {"write_file", l_write_file}, {"append_file", l_append_file}, {NULL, NULL}};
    luaL_setfuncs(L, funcs, 0);
}
