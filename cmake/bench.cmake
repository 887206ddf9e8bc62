# Benchmarks (not tests): `cmake --build build --target bench` builds and runs them.
add_executable(bench_decide bench/bench_decide.c)
target_compile_options(bench_decide PRIVATE ${RF_WARNINGS})
target_link_libraries(bench_decide PRIVATE retryfreeze)

add_library(rf_bench_floor MODULE bench/lua_floor.c)
target_include_directories(rf_bench_floor PRIVATE ${LUA_INCLUDE_DIRS})
set_target_properties(rf_bench_floor PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)

add_custom_target(bench
  COMMAND bash ${CMAKE_SOURCE_DIR}/bench/run ${CMAKE_BINARY_DIR}
  DEPENDS bench_decide rf_bench_floor retryfreeze_lua_module
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} VERBATIM)
