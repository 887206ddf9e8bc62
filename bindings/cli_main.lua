#!/usr/bin/env lua
-- The `retryfreeze` command of a LuaRocks install (the rockspec's build.install.bin), the twin of
-- bindings/cli_main.c: it hands the arguments to retryfreeze.cli.main and exits with its result (0 ok, 1 a
-- check failed, 2 bad usage or bad input; an internal error also exits 2). LuaRocks wraps it in a script that
-- runs the rock tree's Lua with the tree on package.path and package.cpath, so the C module, the Lua library and
-- argparse come from the tree (or the Lua's default paths). A rock has no retryfreeze-serve: `demo`, `serve` and
-- `soak` start the one $RF_SERVE names (e.g. build/bin/retryfreeze-serve of a CMake build).
local args = { ... }

local ok, cli = pcall(require, "retryfreeze.cli")
if not ok then
  io.stderr:write("retryfreeze: cannot load the CLI: ", tostring(cli), "\n")
  os.exit(2)
end

local argv = { [0] = arg and arg[0] or "retryfreeze" }
for i = 1, #args do argv[i] = args[i] end
local status
ok, status = xpcall(function() return cli.main(argv) end, debug.traceback)
if not ok then
  io.stderr:write("retryfreeze: internal error: ", tostring(status), "\n")
  status = 2
end
os.exit(status or 0, true)
