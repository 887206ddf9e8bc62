-- luacheck configuration: Lua 5.4 everywhere; busted's globals in specs.
std = "lua54"
max_line_length = 150
files["spec/**/*_spec.lua"] = { std = "+busted" }
files["examples/policy_spec.lua"] = { std = "+busted" }
files["spec/helper.lua"] = { globals = { "rf_spec_helper" } }
files["examples/nginx/*.lua"] = { globals = { "ngx" } } -- lua-nginx-module's API table
files["bindings/lua_ffi.lua"] = { std = "luajit" } -- the FFI path's Lua half runs under LuaJIT only
files["bench/lua/bench_luajit.lua"] = { std = "luajit" }
exclude_files = { "build*/**", ".luarocks/**" }
