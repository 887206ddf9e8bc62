# Benchmarks (not tests): `cmake --build build --target bench` builds and runs them.
add_executable(bench_decide bench/engine/bench_decide.c)
target_compile_options(bench_decide PRIVATE ${RF_WARNINGS})
target_link_libraries(bench_decide PRIVATE retryfreeze)

# ns per wait header parse vs Retry-After delay-seconds, and rf_decide walking seven wait headers vs one.
add_executable(bench_wait_headers bench/engine/bench_wait_headers.c)
target_compile_options(bench_wait_headers PRIVATE ${RF_WARNINGS})
target_link_libraries(bench_wait_headers PRIVATE retryfreeze)

# A ledger append (rf_ledger_append) vs a raw write(2) of the same line, same file system, same run.
add_executable(bench_ledger bench/evidence/bench_ledger.c)
target_compile_options(bench_ledger PRIVATE ${RF_WARNINGS})
target_link_libraries(bench_ledger PRIVATE retryfreeze)

add_library(rf_bench_floor MODULE bench/lua/lua_floor.c)
target_include_directories(rf_bench_floor PRIVATE ${LUA_INCLUDE_DIRS})
set_target_properties(rf_bench_floor PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)

# Requests/s through rf_client_request and client:request (bench/client/bench_client.lua in an embedded Lua state)
# vs a plain libcurl easy loop against the same loopback upstream.
add_executable(bench_client bench/client/bench_client.c)
target_compile_options(bench_client PRIVATE ${RF_WARNINGS})
target_link_libraries(bench_client PRIVATE retryfreeze_client retryfreeze PkgConfig::CURL PkgConfig::LUA)

add_custom_target(bench
  COMMAND bash ${CMAKE_SOURCE_DIR}/bench/run ${CMAKE_BINARY_DIR}
  DEPENDS bench_decide bench_wait_headers bench_ledger bench_client rf_bench_floor retryfreeze_lua_module
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} VERBATIM)
if(TARGET retryfreeze-serve)
  add_dependencies(bench retryfreeze-serve) # bench/run skips the client bench without it
endif()
if(TARGET retryfreeze_lua_module_luajit)
  add_dependencies(bench retryfreeze_lua_module_luajit) # bench/lua/bench_luajit.lua; skipped without it
endif()

# bench/evidence/bench_stats.lua's floor: the C ledger reader alone (no Lua), measured in the same run.
add_executable(bench_stats bench/evidence/bench_stats.c)
target_compile_options(bench_stats PRIVATE ${RF_WARNINGS})
target_link_libraries(bench_stats PRIVATE retryfreeze)
add_dependencies(bench bench_stats)

# bench/client/bench_soak.sh's baseline: the plain libcurl multi loop of bench/client/multi_loop.h with soak's requests and
# concurrency.
add_executable(bench_multi bench/client/bench_multi.c)
target_compile_options(bench_multi PRIVATE ${RF_WARNINGS})
target_link_libraries(bench_multi PRIVATE PkgConfig::CURL)
add_dependencies(bench bench_multi)
# The same loop as a Lua module, so that bench/client/bench_all.lua runs it in client:all's own process.
add_library(rf_bench_multi MODULE bench/client/lua_multi.c)
target_compile_options(rf_bench_multi PRIVATE ${RF_WARNINGS})
target_include_directories(rf_bench_multi PRIVATE ${LUA_INCLUDE_DIRS})
target_link_libraries(rf_bench_multi PRIVATE PkgConfig::CURL)
set_target_properties(rf_bench_multi PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
add_dependencies(bench rf_bench_multi)

# bench/fleet/bench_budget_redis.c: a decision with the retry budget in Redis vs the process's own (bench/run
# starts a redis-server on a free loopback port; skipped without one).
add_executable(bench_budget_redis bench/fleet/bench_budget_redis.c)
target_compile_options(bench_budget_redis PRIVATE ${RF_WARNINGS})
target_link_libraries(bench_budget_redis PRIVATE retryfreeze_budget_redis retryfreeze)
add_dependencies(bench bench_budget_redis)

# rf_decide as locks grow (4 to 10 000 routes) against 4 routes, and loading 10 000 routes against 1 000.
add_executable(bench_routes bench/engine/bench_routes.c)
target_compile_options(bench_routes PRIVATE ${RF_WARNINGS})
target_link_libraries(bench_routes PRIVATE retryfreeze)
add_dependencies(bench bench_routes)
