-- LuaRocks package: `luarocks --lua-version=5.4 make` builds with CMake and installs the Lua modules and the
-- C module (linked against the static engine and client, so the rock needs no shared library of its own).
-- System packages needed: lua-argparse, libcjson-dev, libcurl4-openssl-dev, libssl-dev, liblua5.4-dev, cmake, pkg-config.
rockspec_format = "3.0"
package = "retryfreeze"
version = "scm-1"
source = { url = "git+file://." }
description = {
  summary = "Retry decisions from a pinned policy and transport facts, and request flows that obey them",
  detailed = "A C11 engine that decides whether a failed HTTP attempt may be retried, from a frozen lock "
    .. "(*.lock.json) and transport facts alone, with Lua 5.4 bindings and a libcurl client.",
  license = "MIT",
}
dependencies = { "lua >= 5.4, < 5.5" }
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    RF_LUA_CMOD_DIR = "$(LIBDIR)",
    RF_LUA_LMOD_DIR = "$(LUADIR)",
    RF_MODULE_STATIC = "ON",
    RF_ROCK = "ON",
  },
}
