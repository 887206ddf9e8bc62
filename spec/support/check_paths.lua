-- Where a ctest check script (run as SCRIPT BUILD_DIR SOURCE_DIR, by LuaJIT or any Lua 5.x) finds its modules: the
-- source tree's Lua files and spec helpers, and the build's C module for the Lua running it. Loaded with dofile,
-- since package.path cannot find it before it ran.
return function(build, src)
  package.path = src .. "/lua/?.lua;" .. src .. "/lua/?/init.lua;" .. src .. "/?.lua;" .. package.path
  package.cpath = build .. "/lib/lua/" .. (rawget(_G, "jit") and "luajit" or _VERSION:match("%d+%.%d+")) .. "/?.so;"
    .. package.cpath
end
