-- LuaRocks package: `luarocks --lua-version=5.4 make` (or 5.3, 5.2, 5.1; LuaJIT uses 5.1's) builds with CMake,
-- without tests or benchmarks (RF_TESTS=OFF, RF_BENCH=OFF), only the C module for the Lua whose headers
-- LuaRocks names (RF_LUA_INCDIR), linked against the static libraries (the engine, the attempt loop, the Redis
-- retry budget store, the client) so that the rock needs no shared library of its own. It installs the Lua modules, the C module and the `retryfreeze` command (a Lua script run
-- by the tree's Lua, bindings/cli_main.lua; `demo`, `serve` and `soak` need retryfreeze-serve from a CMake
-- build, named by $RF_SERVE).
-- System packages needed: cmake, pkg-config, gcc, make, libcjson-dev, libcurl4-openssl-dev, libssl-dev,
-- libhiredis-dev and the Lua's headers (liblua5.4-dev, ...); for Lua 5.1/5.2/LuaJIT also lua-compat53-dev (the
-- Lua 5.3 C API) and lua-compat53 (its Lua half). The argparse rock may come from Debian's lua-argparse
-- (.ci/rock declares it provided, offline).
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
dependencies = { "lua >= 5.1, < 5.5", "argparse >= 0.7" } -- argparse: the CLI's parser (0.7: summary, help)
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
    RF_TESTS = "OFF",
    RF_BENCH = "OFF",
  },
  install = {
    bin = { retryfreeze = "bindings/cli_main.lua" },
  },
}
