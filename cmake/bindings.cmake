# The Lua binding (module retryfreeze.core) and the `retryfreeze` CLI host. Output layout mirrors an install
# tree: bin/retryfreeze, lib/lua/5.4/retryfreeze/core.so; the Lua library stays in the source tree's lua/.
set(RF_LUA_BINDING_SOURCES bindings/lua_module.c bindings/lua_policy.c bindings/lua_ledger.c
  bindings/lua_ledger_tally.c bindings/lua_client.c
  bindings/lua_client_network.c bindings/lua_input.c)

add_library(retryfreeze_lua OBJECT ${RF_LUA_BINDING_SOURCES})
target_compile_options(retryfreeze_lua PRIVATE ${RF_WARNINGS})
target_include_directories(retryfreeze_lua PRIVATE ${LUA_INCLUDE_DIRS} bindings)
target_link_libraries(retryfreeze_lua PRIVATE retryfreeze retryfreeze_client) # for the include directories

# The module links the shared libraries, or with RF_MODULE_STATIC (the rockspec) the static ones, so that a
# rock's core.so needs no libretryfreeze*.so beside it.
option(RF_MODULE_STATIC "Link the Lua module against the static libraries" OFF)
add_library(retryfreeze_lua_module MODULE $<TARGET_OBJECTS:retryfreeze_lua>)
if(RF_MODULE_STATIC)
  target_link_libraries(retryfreeze_lua_module PRIVATE retryfreeze_client_static retryfreeze_static)
else()
  target_link_libraries(retryfreeze_lua_module PRIVATE retryfreeze_client retryfreeze)
endif()
set_target_properties(retryfreeze_lua_module PROPERTIES
  PREFIX "" OUTPUT_NAME core
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib/lua/5.4/retryfreeze)

add_executable(retryfreeze_cli bindings/cli_main.c $<TARGET_OBJECTS:retryfreeze_lua>)
target_compile_options(retryfreeze_cli PRIVATE ${RF_WARNINGS})
target_include_directories(retryfreeze_cli PRIVATE bindings)
target_compile_definitions(retryfreeze_cli PRIVATE RF_BUILD_LUA_DIR="${CMAKE_SOURCE_DIR}/lua")
target_link_libraries(retryfreeze_cli PRIVATE retryfreeze_client retryfreeze PkgConfig::LUA)
set_target_properties(retryfreeze_cli PROPERTIES
  OUTPUT_NAME retryfreeze RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)

# busted specs (spec/*_spec.lua) against this build: .busted reads RF_BUILD_DIR for its cpath.
find_program(LUA54 NAMES lua5.4 REQUIRED)
find_program(BUSTED NAMES busted REQUIRED)
add_test(NAME busted COMMAND ${LUA54} ${BUSTED} --output=plainTerminal WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(busted PROPERTIES LABELS "lua"
  ENVIRONMENT "RF_CLI=${CMAKE_BINARY_DIR}/bin/retryfreeze;RF_BUILD_DIR=${CMAKE_BINARY_DIR}")

# The randomized misuse harness (spec/harness/misuse.lua), a short run; .ci/run runs it longer under ASan.
if(TARGET retryfreeze-serve)
  add_test(NAME misuse_short COMMAND ${LUA54} ${CMAKE_SOURCE_DIR}/spec/harness/misuse.lua
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(misuse_short PROPERTIES LABELS "lua" TIMEOUT 120
    ENVIRONMENT "RF_MISUSE_SECONDS=4;RF_BUILD_DIR=${CMAKE_BINARY_DIR};RF_SERVE=$<TARGET_FILE:retryfreeze-serve>")
endif()

# examples/embed_host.c: a C program embedding Lua and the module, run as a test.
add_executable(embed_host examples/embed_host.c $<TARGET_OBJECTS:retryfreeze_lua>)
target_compile_options(embed_host PRIVATE ${RF_WARNINGS})
target_link_libraries(embed_host PRIVATE retryfreeze_client retryfreeze PkgConfig::LUA)
add_test(NAME embed_host COMMAND embed_host ${CMAKE_SOURCE_DIR}/lua ${CMAKE_SOURCE_DIR}/examples/retry-budget.lock.json)
set_tests_properties(embed_host PROPERTIES LABELS "c"
  PASS_REGULAR_EXPRESSION "^sha256:[0-9a-f]+ true pinned-status delay_ms=1000 timeout_ms=1400\n$")
