# The Lua binding (module retryfreeze.core) and the `retryfreeze` CLI host. Output layout mirrors an install
# tree: bin/retryfreeze, lib/lua/5.4/retryfreeze/core.so; the Lua library stays in the source tree's lua/.
set(RF_LUA_BINDING_SOURCES bindings/lua_module.c bindings/lua_policy.c bindings/lua_lock_schema.c bindings/lua_ledger.c
  bindings/lua_ledger_tally.c bindings/lua_replay.c bindings/lua_client.c bindings/lua_response.c bindings/lua_client_generated.c
  bindings/lua_client_network.c bindings/lua_input.c bindings/lua_output.c bindings/lua_compat.c
  bindings/lua_object.c bindings/lua_state.c bindings/lua_result.c bindings/lua_json.c
  bindings/lua_glob.c bindings/lua_step.c bindings/lua_retry_budget.c bindings/lua_ffi.c
  bindings/lua_budget_shdict.c ${RF_UTIL_OS_SOURCES} ${RF_UTIL_SUGGEST_SOURCES})

# bindings/lua_ffi.lua, the FFI path's Lua half, embedded in the module as a C string (lua_ffi_chunk.h): written at
# configure time, and again whenever the .lua changes (a configure dependency), only when its text changed.
set(RF_GENERATED_DIR ${CMAKE_BINARY_DIR}/generated)
file(READ ${CMAKE_SOURCE_DIR}/bindings/lua_ffi.lua rf_chunk_hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," rf_chunk_bytes "${rf_chunk_hex}")
file(CONFIGURE OUTPUT ${RF_GENERATED_DIR}/lua_ffi_chunk.h
  CONTENT "/* Generated from bindings/lua_ffi.lua by cmake/bindings.cmake: do not edit. */\nstatic const unsigned char rfl_ffi_chunk[] = {${rf_chunk_bytes} 0};\n"
  @ONLY)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/bindings/lua_ffi.lua)

# The libraries the binding calls: the libcurl client (rf.client), the Redis-shared retry budget (rf.retry_budget),
# the attempt loop (core.step: rf.flow and the gateway) and the engine; shared, for the command and the programs
# that embed the binding's objects (the module picks shared or static below).
set(RF_BINDING_LIBS retryfreeze_client retryfreeze_budget_redis retryfreeze_attempt retryfreeze)

# The binding compiled against Lua 5.4 for the `retryfreeze` command (and the 5.4 module, embed_host, the fuzz
# targets); a rock compiles it only for LuaRocks' Lua, below.
if(NOT RF_ROCK)
  add_library(retryfreeze_lua OBJECT ${RF_LUA_BINDING_SOURCES})
  target_compile_options(retryfreeze_lua PRIVATE ${RF_WARNINGS})
  target_include_directories(retryfreeze_lua PRIVATE ${LUA_INCLUDE_DIRS} bindings ${RF_GENERATED_DIR})
  target_link_libraries(retryfreeze_lua PRIVATE ${RF_BINDING_LIBS} PkgConfig::CJSON) # for the include directories
endif()

# RF_LTO: the Lua module, the static libraries it links and the binding's objects are built with link-time
# optimization, so that the engine's calls from the binding's hot paths are direct (bench/run: policy:decider went
# from 2.5x to 2.75x the pure-Lua port's speed, policy:decide from 1.45x to 1.35x its floor). On by default for an
# optimized GCC build; off for Debug (the sanitizer builds). The objects are "fat" (GCC's -ffat-lto-objects: IR
# and machine code), so the command, embed_host and an installed static library link them without LTO too.
include(CheckIPOSupported)
check_ipo_supported(RESULT rf_ipo_supported OUTPUT rf_ipo_why LANGUAGES C)
if(rf_ipo_supported AND CMAKE_C_COMPILER_ID STREQUAL "GNU" AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug")
  set(rf_lto_default ON)
else()
  set(rf_lto_default OFF)
endif()
option(RF_LTO "Link-time optimization for the Lua module and the static libraries it links" ${rf_lto_default})
if(RF_LTO AND NOT rf_ipo_supported)
  message(FATAL_ERROR "RF_LTO=ON: the compiler cannot do link-time optimization: ${rf_ipo_why}")
endif()
# rf_lto(TARGET...): LTO on these targets when RF_LTO (fat objects: usable without LTO as well).
function(rf_lto)
  if(RF_LTO)
    foreach(t IN LISTS ARGN)
      set_property(TARGET ${t} PROPERTY INTERPROCEDURAL_OPTIMIZATION ON)
      target_compile_options(${t} PRIVATE -ffat-lto-objects)
    endforeach()
  endif()
endfunction()
# rf_no_lto_link(TARGET...): link these programs from the fat objects' machine code. GCC's linker plugin runs LTO
# over objects that carry its IR even without -flto, which costs a test program as much as the module's link.
function(rf_no_lto_link)
  if(RF_LTO)
    foreach(t IN LISTS ARGN)
      target_link_options(${t} PRIVATE -fno-lto)
    endforeach()
  endif()
endfunction()

# The module links the static libraries (the default with RF_LTO, and the rockspec's choice, so that a rock's
# core.so needs no libretryfreeze*.so beside it) or the shared ones.
option(RF_MODULE_STATIC "Link the Lua module against the static libraries" ${RF_LTO})
if(RF_MODULE_STATIC)
  set(rf_module_libs retryfreeze_client_static retryfreeze_budget_redis_static retryfreeze_attempt_static
    retryfreeze_static Threads::Threads) # defined in cmake/install.cmake
else()
  set(rf_module_libs ${RF_BINDING_LIBS} Threads::Threads)
endif()

# RF_LUA: the Lua versions to build the module for, a list of 5.1, 5.2, 5.3, 5.4 and luajit (LuaJIT 2.1);
# e.g. -DRF_LUA="5.4;5.1;luajit". On Lua 5.1/5.2 and LuaJIT, Debian's lua-compat53 (compat-5.3.h) supplies the
# Lua 5.3 C API. The CLI and embed_host stay on Lua 5.4. Build tree: lib/lua/<version>/retryfreeze/core.so
# (luajit under lib/lua/luajit). RF_LUA_INCDIR (the rockspec passes $(LUA_INCDIR)) builds for the Lua whose
# lua.h is there instead, its version read from the header.
# The default, auto, is 5.4 plus LuaJIT and 5.1 when their pkg-config files are there, so that every build
# also runs the specs under them (ctest label lua_versions).
set(RF_LUA "auto" CACHE STRING "Lua versions to build the module for: 5.1, 5.2, 5.3, 5.4, luajit (a list), or auto")
if(RF_LUA STREQUAL "auto")
  set(RF_LUA "5.4")
  pkg_check_modules(RF_HAS_LUAJIT QUIET luajit)
  pkg_check_modules(RF_HAS_LUA51 QUIET lua5.1)
  if(RF_HAS_LUAJIT_FOUND)
    list(APPEND RF_LUA luajit)
  endif()
  if(RF_HAS_LUA51_FOUND)
    list(APPEND RF_LUA 5.1)
  endif()
  message(STATUS "retryfreeze: RF_LUA=auto builds the module for ${RF_LUA}")
endif()
set(RF_LUA_INCDIR "" CACHE PATH "Build the module for the Lua whose lua.h is here (LuaRocks), not RF_LUA")
if(RF_LUA_INCDIR)
  file(STRINGS "${RF_LUA_INCDIR}/lua.h" rf_vnum REGEX "^#define[ \t]+LUA_VERSION_NUM[ \t]+[0-9]+")
  string(REGEX MATCH "[0-9]+$" rf_vnum "${rf_vnum}")
  if(EXISTS "${RF_LUA_INCDIR}/luajit.h")
    set(RF_LUA luajit)
  elseif(rf_vnum MATCHES "^50([1-4])$")
    set(RF_LUA "5.${CMAKE_MATCH_1}")
  else()
    message(FATAL_ERROR "RF_LUA_INCDIR=${RF_LUA_INCDIR}: no Lua 5.1-5.4 lua.h there")
  endif()
endif()
set(RF_LUA_MODULES "") # module targets, one per version
foreach(v IN LISTS RF_LUA)
  if(v STREQUAL "luajit")
    set(pc luajit)
    set(abi 5.1)
  elseif(v MATCHES "^5\\.[1-4]$")
    string(REPLACE "." "" vv ${v})
    set(pc "lua${v};lua${vv};lua-${v}")
    set(abi ${v})
  else()
    message(FATAL_ERROR "RF_LUA: unknown Lua version '${v}' (want 5.1, 5.2, 5.3, 5.4 or luajit)")
  endif()
  string(REPLACE "." "" tag "${v}")
  if(RF_LUA_INCDIR)
    set(LUA${tag}_INCLUDE_DIRS ${RF_LUA_INCDIR})
  elseif(NOT TARGET retryfreeze_lua OR NOT v STREQUAL "5.4")
    pkg_search_module(LUA${tag} IMPORTED_TARGET ${pc})
    if(NOT LUA${tag}_FOUND)
      message(FATAL_ERROR "RF_LUA=${v}: no pkg-config file for Lua ${v} (${pc}); install its -dev package")
    endif()
  endif()
  if(v STREQUAL "5.4" AND NOT RF_LUA_INCDIR AND TARGET retryfreeze_lua)
    set(objects retryfreeze_lua) # the CLI's objects serve the 5.4 module too
  else()
    set(objects retryfreeze_lua_${tag})
    set(srcs ${RF_LUA_BINDING_SOURCES})
    set(incs ${LUA${tag}_INCLUDE_DIRS})
    if(v MATCHES "^5\\.[12]$|luajit")
      find_path(RF_COMPAT53_DIR_${abi} compat-5.3.h PATHS ${LUA${tag}_INCLUDE_DIRS} PATH_SUFFIXES lua${abi}
                NO_CACHE)
      if(NOT RF_COMPAT53_DIR_${abi})
        message(FATAL_ERROR "RF_LUA=${v}: compat-5.3.h not found (Debian: lua-compat53-dev)")
      endif()
      list(APPEND srcs ${RF_COMPAT53_DIR_${abi}}/compat-5.3.c) # compiled once, prefixed compat53_*
      list(APPEND incs ${RF_COMPAT53_DIR_${abi}}) # after the Lua's own dir: its lua.h wins
      set_source_files_properties(${RF_COMPAT53_DIR_${abi}}/compat-5.3.c PROPERTIES COMPILE_OPTIONS "-w")
    endif()
    add_library(${objects} OBJECT ${srcs})
    target_compile_options(${objects} PRIVATE ${RF_WARNINGS})
    target_compile_definitions(${objects} PRIVATE COMPAT53_PREFIX=compat53)
    target_include_directories(${objects} SYSTEM PRIVATE ${incs}) # third-party headers: their warnings are not ours
    target_include_directories(${objects} PRIVATE bindings ${RF_GENERATED_DIR})
    target_link_libraries(${objects} PRIVATE ${rf_module_libs} PkgConfig::CJSON) # for the include directories
  endif()
  set(mod retryfreeze_lua_module_${tag})
  if(v STREQUAL "5.4")
    set(mod retryfreeze_lua_module)
  endif()
  add_library(${mod} MODULE $<TARGET_OBJECTS:${objects}>)
  rf_lto(${objects} ${mod})
  target_link_libraries(${mod} PRIVATE ${rf_module_libs} PkgConfig::CJSON ${CMAKE_DL_LIBS}) # retryfreeze.json decodes with cJSON; dlsym: lua_budget_shdict.c
  # Exports luaopen_retryfreeze_core only (spec/install_spec.sh checks): bench/run's decider went from 2.95x to
  # 3.15x the pure-Lua port's speed once the engine's calls stopped going through the PLT.
  if(NOT APPLE AND NOT WIN32) # a GNU ld (or lld) version script
    target_link_options(${mod} PRIVATE "LINKER:--version-script=${CMAKE_SOURCE_DIR}/cmake/lua_module.map")
    set_property(TARGET ${mod} APPEND PROPERTY LINK_DEPENDS ${CMAKE_SOURCE_DIR}/cmake/lua_module.map)
  endif()
  set_target_properties(${mod} PROPERTIES PREFIX "" OUTPUT_NAME core
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib/lua/${v}/retryfreeze)
  set_property(TARGET ${mod} PROPERTY RF_LUA_ABI ${abi})
  list(APPEND RF_LUA_MODULES ${mod})
endforeach()

# The `retryfreeze` command: a C host embedding Lua 5.4 with the binding linked in. A rock installs
# bindings/cli_main.lua instead, run by LuaRocks' own Lua.
if(RF_ROCK)
  return()
endif()
add_executable(retryfreeze_cli bindings/cli_main.c $<TARGET_OBJECTS:retryfreeze_lua>)
target_compile_options(retryfreeze_cli PRIVATE ${RF_WARNINGS})
target_include_directories(retryfreeze_cli PRIVATE bindings)
target_compile_definitions(retryfreeze_cli PRIVATE RF_BUILD_LUA_DIR="${CMAKE_SOURCE_DIR}/lua")
target_link_libraries(retryfreeze_cli PRIVATE ${RF_BINDING_LIBS} PkgConfig::LUA PkgConfig::CJSON ${CMAKE_DL_LIBS})
set_target_properties(retryfreeze_cli PROPERTIES
  OUTPUT_NAME retryfreeze RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)

if(NOT RF_TESTS)
  return()
endif()
# busted specs (spec/*_spec.lua) against this build: .busted reads RF_BUILD_DIR for its cpath, and picks the module
# of the Lua that runs busted. The main run (test busted) uses the build's main Lua: 5.4 when RF_LUA lists it, else
# the first listed (a LuaJIT-only build, as OpenResty users configure, runs its suite under luajit): every build
# configuration runs its own tests with a Lua it built the module for. The interpreters: lua5.4, lua5.3, …, luajit.
find_program(BUSTED NAMES busted REQUIRED)
foreach(v IN LISTS RF_LUA)
  string(REPLACE "." "" tag "${v}")
  if(v STREQUAL "luajit")
    find_program(RF_LUA_BIN_${tag} NAMES luajit)
  else()
    find_program(RF_LUA_BIN_${tag} NAMES lua${v})
  endif()
endforeach()
if("5.4" IN_LIST RF_LUA)
  set(RF_LUA_MAIN 5.4)
else()
  list(GET RF_LUA 0 RF_LUA_MAIN)
endif()
string(REPLACE "." "" rf_main_tag "${RF_LUA_MAIN}")
set(RF_LUA_MAIN_BIN ${RF_LUA_BIN_${rf_main_tag}})
if(NOT RF_LUA_MAIN_BIN)
  message(FATAL_ERROR "RF_TESTS=ON: no interpreter for Lua ${RF_LUA_MAIN}, the build's main Lua (bash .ci/deps --tests)")
endif()
set(RF_LUAJIT ${RF_LUA_BIN_luajit})
# The engine's specs (load, decide, immutability, hostile scripts, JSON, stats): what Lua 5.1, 5.2 and 5.3 run; 5.4
# and LuaJIT run the whole suite.
set(RF_ENGINE_SPECS spec/01-load_spec.lua spec/02-decide_spec.lua spec/03-immutable_spec.lua
  spec/14-json_spec.lua spec/16-compat_spec.lua spec/20-stats_spec.lua spec/30-hostile_spec.lua spec/34-io_flow_spec.lua)
# One ctest test per spec file and Lua, named SUITE/FILE (busted/05-client, busted_luajit/05-client, busted_5.1/01-load,
# …) and labelled with its suite's name, so `ctest -j` runs the files side by side and `ctest -L busted_luajit` runs
# one suite. Each file stands alone (its own servers on random free ports, its own temporary directories); a
# timing spec judges the client net of the stall the machine imposed (spec/support/stall.lua).
# The files that take longest (seconds alone on a quiet 2-core machine), started first: ctest runs the highest
# COST first until its own timings (Testing/Temporary/CTestCostData.txt) replace these after the first run.
set(rf_spec_costs 30-hostile 40 24-report 30 25-replay 30 17-diff_partition 30 37-usage_errors 25 61-tls_proxy 15
  10-diff 15 26-replay_report 12 11-signoff 12 63-http2 12 62-transparent 12 06-nginx 10 05-client 10)
while(rf_spec_costs)
  list(POP_FRONT rf_spec_costs rf_short rf_cost)
  set(RF_SPEC_COST_${rf_short} ${rf_cost})
endwhile()
# rf_add_busted(SUITE INTERP LABELS ENV FILE...)
function(rf_add_busted suite interp labels env)
  foreach(spec IN LISTS ARGN)
    get_filename_component(file ${spec} NAME)
    string(REGEX REPLACE "_spec\\.lua$" "" short "${file}")
    set(name ${suite}/${short})
    add_test(NAME ${name} COMMAND ${interp} ${BUSTED} --output=plainTerminal spec/${file}
             WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set(vars ${env} RF_CLI=${CMAKE_BINARY_DIR}/bin/retryfreeze RF_BUILD_DIR=${CMAKE_BINARY_DIR})
    set_tests_properties(${name} PROPERTIES LABELS "${suite};${labels}" TIMEOUT 300 ENVIRONMENT "${vars}")
    if(DEFINED RF_SPEC_COST_${short})
      # Long files first: ctest starts higher COST earlier, so the run ends when the longest file does.
      set_tests_properties(${name} PROPERTIES COST ${RF_SPEC_COST_${short}})
    endif()
  endforeach()
endfunction()
file(GLOB RF_ALL_SPECS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/spec/*_spec.lua)
list(SORT RF_ALL_SPECS)
if(RF_LUA_MAIN MATCHES "^(5\\.4|luajit)$")
  set(rf_main_specs ${RF_ALL_SPECS})
else()
  set(rf_main_specs ${RF_ENGINE_SPECS})
endif()
rf_add_busted(busted ${RF_LUA_MAIN_BIN} "lua" "" ${rf_main_specs})

# The randomized misuse harness (spec/harness/misuse.lua), a short run under the main Lua, and under LuaJIT too when
# that is another (its FFI path meets the same hostile tables); .ci/run runs it longer under ASan.
if(TARGET retryfreeze-serve)
  set(rf_misuse misuse_short ${RF_LUA_MAIN_BIN})
  if(RF_LUAJIT AND NOT RF_LUA_MAIN STREQUAL "luajit")
    list(APPEND rf_misuse misuse_short_luajit ${RF_LUAJIT})
  endif()
  while(rf_misuse)
    list(POP_FRONT rf_misuse rf_name rf_interp)
    add_test(NAME ${rf_name} COMMAND ${rf_interp} ${CMAKE_SOURCE_DIR}/spec/harness/misuse.lua
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(${rf_name} PROPERTIES LABELS "lua" TIMEOUT 120
      ENVIRONMENT "RF_MISUSE_SECONDS=4;RF_BUILD_DIR=${CMAKE_BINARY_DIR};RF_SERVE=$<TARGET_FILE:retryfreeze-serve>")
  endwhile()
endif()

# examples/embed_host.c: a C program embedding Lua and the module, run as a test.
add_executable(embed_host examples/embed_host.c $<TARGET_OBJECTS:retryfreeze_lua>)
target_compile_options(embed_host PRIVATE ${RF_WARNINGS})
target_link_libraries(embed_host PRIVATE ${RF_BINDING_LIBS} PkgConfig::LUA PkgConfig::CJSON ${CMAKE_DL_LIBS})
rf_no_lto_link(embed_host)
add_test(NAME embed_host COMMAND embed_host ${CMAKE_SOURCE_DIR}/lua ${CMAKE_SOURCE_DIR}/examples/retry-budget.lock.json)
set_tests_properties(embed_host PROPERTIES LABELS "c"
  PASS_REGULAR_EXPRESSION "^sha256:[0-9a-f]+ true pinned-status delay_ms=1000 timeout_ms=1400\n$")

# The busted specs under the other Lua versions of RF_LUA (label lua_versions): the whole suite under LuaJIT,
# the engine's specs under Lua 5.1, 5.2 and 5.3.
foreach(v IN LISTS RF_LUA)
  if(v STREQUAL RF_LUA_MAIN)
    continue()
  endif()
  string(REPLACE "." "" tag "${v}")
  set(interp ${RF_LUA_BIN_${tag}})
  if(v STREQUAL "luajit")
    set(specs ${RF_ALL_SPECS})
  else()
    set(specs ${RF_ENGINE_SPECS})
  endif()
  if(NOT interp)
    message(STATUS "retryfreeze: no interpreter for Lua ${v}: its busted test is not registered")
    continue()
  endif()
  rf_add_busted(busted_${v} ${interp} "lua;lua_versions" "RF_SECONDARY_SUITE=1" ${specs})
endforeach()

# The engine's specs under LuaJIT with the FFI path off (RF_NO_FFI=1): busted_luajit runs the suite with it on, so
# policy:decider's two paths both meet them (docs/lua.md, "LuaJIT: the FFI path").
set(RF_FFI_SPECS spec/01-load_spec.lua spec/02-decide_spec.lua spec/03-immutable_spec.lua spec/12-table_spec.lua
  spec/13-assertions_spec.lua spec/15-wait_signals_spec.lua spec/80-luajit_ffi_spec.lua)
if("luajit" IN_LIST RF_LUA AND RF_LUAJIT)
  rf_add_busted(busted_luajit_no_ffi ${RF_LUAJIT} "lua;lua_versions" "RF_NO_FFI=1;RF_SECONDARY_SUITE=1"
    ${RF_FFI_SPECS})
endif()

# nginx with lua-nginx-module (LuaJIT) in front of retryfreeze-serve, every request through rf.flow
# (examples/nginx): 200 requests with curl, ~6 s. Needs the LuaJIT module (RF_LUA), nginx and the Lua module.
# `retryfreeze export --to grpc` under a real gRPC client and server (Debian's python3-grpcio, spec/grpc/grpc_calls.py):
# the attempts a grpcio server counts under each exported service config are the lock's; a few seconds.
find_program(RF_GRPC_PYTHON python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(RF_GRPC_PYTHON)
  execute_process(COMMAND ${RF_GRPC_PYTHON} -c "import grpc" RESULT_VARIABLE rf_no_grpcio OUTPUT_QUIET ERROR_QUIET)
endif()
if(RF_GRPC_PYTHON AND rf_no_grpcio EQUAL 0)
  add_test(NAME grpc COMMAND ${RF_LUA_MAIN_BIN} ${CMAKE_SOURCE_DIR}/spec/grpc_check.lua ${CMAKE_BINARY_DIR}
           ${CMAKE_SOURCE_DIR} ${RF_GRPC_PYTHON})
  set_tests_properties(grpc PROPERTIES LABELS "grpc;lua" TIMEOUT 120)
else()
  message(STATUS "retryfreeze: ctest grpc not registered (needs /usr/bin/python3 with grpcio: python3-grpcio)")
endif()

find_program(RF_NGINX nginx PATHS /usr/sbin)
if("luajit" IN_LIST RF_LUA AND RF_LUAJIT AND RF_NGINX AND EXISTS /usr/lib/nginx/modules/ngx_http_lua_module.so
   AND TARGET retryfreeze-serve)
  # The check runs under luajit with the build's LuaJIT module, which nginx loads too: a LuaJIT-only build has it.
  add_test(NAME nginx_lua COMMAND ${RF_LUAJIT} ${CMAKE_SOURCE_DIR}/spec/nginx_lua_check.lua ${CMAKE_BINARY_DIR}
           ${CMAKE_SOURCE_DIR})
  set_tests_properties(nginx_lua PROPERTIES LABELS "nginx_lua;lua" TIMEOUT 180)
  # Three layers on loopback (a client, two nginx running the proxy, an always-503 upstream): the retries
  # multiply without propagation (27 per request) and do not with it (at most 3); ~10 s.
  add_test(NAME layers COMMAND ${RF_LUAJIT} ${CMAKE_SOURCE_DIR}/spec/layers_check.lua ${CMAKE_BINARY_DIR}
           ${CMAKE_SOURCE_DIR})
  set_tests_properties(layers PROPERTIES LABELS "layers;nginx_lua;lua" TIMEOUT 180)
else()
  message(STATUS "retryfreeze: ctests nginx_lua and layers not registered (needs RF_LUA with luajit, nginx, "
                 "libnginx-mod-http-lua)")
endif()

# The gateway mode (examples/gateway, retryfreeze.gateway): nginx proxies natively through an upstream {} block whose
# balancer_by_lua runs the engine; headers both ways, exact attempts across two peers, a refused peer retried, a
# keyless POST sent once, 404 without a route, the ledger against what the upstreams saw, three gateways in a chain
# with and without propagation, a lock the gateway cannot serve refused at start; the same for the lean form and the
# nginx module; ~30 s. Needs what nginx_lua needs.
if("luajit" IN_LIST RF_LUA AND RF_LUAJIT AND RF_NGINX AND EXISTS /usr/lib/nginx/modules/ngx_http_lua_module.so)
  # the nginx module's checks too, when the build makes it (cmake/nginx_module.cmake, included later)
  add_test(NAME gateway COMMAND ${RF_LUAJIT} ${CMAKE_SOURCE_DIR}/spec/gateway_check.lua ${CMAKE_BINARY_DIR}
           ${CMAKE_SOURCE_DIR} "$<$<TARGET_EXISTS:nginx_module>:${CMAKE_BINARY_DIR}/lib/nginx/ngx_http_retryfreeze_module.so>")
  set_tests_properties(gateway PROPERTIES LABELS "gateway;lua" TIMEOUT 180 RESOURCE_LOCK busted_suite)
else()
  message(STATUS "retryfreeze: ctest gateway not registered (needs RF_LUA with luajit, nginx, libnginx-mod-http-lua)")
endif()

# `retryfreeze import --from nginx` against real nginx (plain nginx, no Lua module): for nine configurations, the
# requests always-failing retryfreeze-serve upstreams count for one request equal the attempts the imported lock
# allows (spec/import_nginx_check.lua); ~5 s. Runs under the build's main Lua.
if(RF_NGINX AND TARGET retryfreeze-serve)
  add_test(NAME import_nginx COMMAND ${RF_LUA_MAIN_BIN} ${CMAKE_SOURCE_DIR}/spec/import_nginx_check.lua
           ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
  set_tests_properties(import_nginx PROPERTIES LABELS "import;lua" TIMEOUT 120)
else()
  message(STATUS "retryfreeze: ctest import_nginx not registered (needs nginx and retryfreeze-serve)")
endif()
