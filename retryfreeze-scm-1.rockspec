-- LuaRocks package: `luarocks --lua-version=5.4 make` (or 5.3, 5.1; LuaJIT uses 5.1's) builds with CMake for
-- the Lua whose headers LuaRocks names (RF_LUA_INCDIR) and installs the Lua modules and the C module (linked
-- against the static engine and client, so the rock needs no shared library of its own).
-- System packages needed: lua-argparse, libcjson-dev, libcurl4-openssl-dev, libssl-dev, liblua5.4-dev, cmake,
-- pkg-config; for Lua 5.1/5.2/LuaJIT also lua-compat53-dev (the Lua 5.3 C API) and lua-compat53 (its Lua half).
rockspec_format = "3.0"
package = "retryfreeze"
version = "scm-1"
source = { url = "git+file://." }
description = {
  summary = "Retry decisions from a pinned policy and transport facts, and request flows that obey them",
  detailed = "A C11 engine that decides whether a failed HTTP attempt may be retried, from a frozen lock "
    .. "(*.lock.json) and transport facts alone, with Lua bindings (5.1-5.4, LuaJIT) and a libcurl client.",
  license = "MIT",
}
dependencies = { "lua >= 5.1, < 5.5" }
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    RF_LUA_CMOD_DIR = "$(LIBDIR)",
    RF_LUA_LMOD_DIR = "$(LUADIR)",
    RF_LUA_INCDIR = "$(LUA_INCDIR)",
    RF_MODULE_STATIC = "ON",
    RF_ROCK = "ON",
  },
}
