# Hardening tests (docs/reliability.md), registered with ctest under the label "c" so the sanitizer and
# valgrind passes of .ci/run run them too:
#   - fuzz_replay_<target>: each fuzz target (fuzz/*.c) built with an ordinary main that replays its seed
#     corpus fuzz/corpus/<target>/ and its past findings fuzz/regressions/<target>/, checking the same
#     invariants as the libFuzzer build (fuzz/CMakeLists.txt, .ci/fuzz) — every finding stays a test;
#   - test_alloc_failure: the failing allocator over the loader, the retry budget and the ledger writer;
#   - test_budget_threads: one retry budget shared by 8 deciding threads (.ci/tsan builds it with TSan).
find_package(Threads REQUIRED)

set(RF_FUZZ_TARGETS fuzz_lock fuzz_retry_after fuzz_decide fuzz_ledger_read fuzz_response_head
  fuzz_pairing_log fuzz_decision_table fuzz_route_index)
# The client's pure response-head reader is private to libretryfreeze_client: its target compiles it in.
set(fuzz_response_head_sources core/src/client/response_head.c)
# fuzz_ledger_read checks the writer's lines with cJSON as well as with the ledger's own reader.
set(fuzz_ledger_read_libs PkgConfig::CJSON)
# The Lua readers' targets embed Lua 5.4 with the binding (retryfreeze.core) linked in; the binding calls cJSON.
set(fuzz_pairing_log_sources $<TARGET_OBJECTS:retryfreeze_lua>)
set(fuzz_pairing_log_libs ${RF_BINDING_LIBS} PkgConfig::LUA PkgConfig::CJSON)
set(fuzz_decision_table_sources $<TARGET_OBJECTS:retryfreeze_lua>)
set(fuzz_decision_table_libs ${RF_BINDING_LIBS} PkgConfig::LUA PkgConfig::CJSON)
foreach(t IN LISTS RF_FUZZ_TARGETS)
  add_executable(${t}_replay fuzz/${t}.c fuzz/replay_main.c ${${t}_sources})
  target_compile_options(${t}_replay PRIVATE ${RF_WARNINGS})
  target_compile_definitions(${t}_replay PRIVATE RF_EXAMPLES_DIR="${CMAKE_CURRENT_SOURCE_DIR}/examples"
    RF_LUA_DIR="${CMAKE_CURRENT_SOURCE_DIR}/lua")
  target_link_libraries(${t}_replay PRIVATE retryfreeze ${${t}_libs})
  rf_no_lto_link(${t}_replay)
  set(inputs "${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${t}")
  if(EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/fuzz/regressions/${t}")
    list(APPEND inputs "${CMAKE_CURRENT_SOURCE_DIR}/fuzz/regressions/${t}")
  endif()
  add_test(NAME c_${t}_replay COMMAND ${t}_replay ${inputs})
  set_tests_properties(c_${t}_replay PROPERTIES LABELS "c;fuzz")
endforeach()

# The failing allocator needs the engine's objects in the executable, so that -Wl,--wrap reaches their
# malloc calls (calls inside libretryfreeze.so would bind to libc's malloc directly).
set(rf_engine_objects $<TARGET_OBJECTS:retryfreeze_objects> $<TARGET_OBJECTS:rf_util_report>)
add_executable(test_alloc_failure spec/core/test_alloc_failure.c ${rf_engine_objects})
target_include_directories(test_alloc_failure PRIVATE core/include core/src)
target_compile_options(test_alloc_failure PRIVATE ${RF_WARNINGS})
target_compile_definitions(test_alloc_failure PRIVATE RF_EXAMPLES_DIR="${CMAKE_CURRENT_SOURCE_DIR}/examples")
target_link_options(test_alloc_failure PRIVATE "LINKER:--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free")
target_link_libraries(test_alloc_failure PRIVATE PkgConfig::CMOCKA PkgConfig::CJSON PkgConfig::CRYPTO m)
rf_no_lto_link(test_alloc_failure)
add_test(NAME c_test_alloc_failure COMMAND test_alloc_failure)
set_tests_properties(c_test_alloc_failure PROPERTIES LABELS "c")

add_executable(test_budget_threads spec/core/test_budget_threads.c)
target_compile_options(test_budget_threads PRIVATE ${RF_WARNINGS})
target_link_libraries(test_budget_threads PRIVATE retryfreeze PkgConfig::CMOCKA Threads::Threads)
add_test(NAME c_test_budget_threads COMMAND test_budget_threads)
set_tests_properties(c_test_budget_threads PROPERTIES LABELS "c")

# The client under the failing allocator: its, the attempt loop's and the engine's objects linked in (so --wrap
# reaches their allocations), libcurl's allocations through curl_global_init_mem, against the project's upstream.
if(TARGET retryfreeze-serve)
  add_executable(test_client_alloc spec/core/test_client_alloc.c ${rf_engine_objects}
    $<TARGET_OBJECTS:retryfreeze_attempt_objects> $<TARGET_OBJECTS:retryfreeze_client_objects>)
  target_include_directories(test_client_alloc PRIVATE core/include core/src)
  target_compile_options(test_client_alloc PRIVATE ${RF_WARNINGS})
  target_compile_definitions(test_client_alloc PRIVATE
    RF_SERVE_PATH="$<TARGET_FILE:retryfreeze-serve>"
    RF_LOCK_PATH="${CMAKE_CURRENT_SOURCE_DIR}/examples/retry-budget.lock.json")
  target_link_options(test_client_alloc PRIVATE
    "LINKER:--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free,--wrap=strdup")
  target_link_libraries(test_client_alloc PRIVATE PkgConfig::CURL PkgConfig::CJSON PkgConfig::CRYPTO m)
  rf_no_lto_link(test_client_alloc)
  add_test(NAME c_test_client_alloc
    COMMAND test_client_alloc $<TARGET_FILE:retryfreeze-serve> ${CMAKE_CURRENT_SOURCE_DIR}/examples/retry-budget.lock.json)
  set_tests_properties(c_test_client_alloc PROPERTIES LABELS "c;wall_clock" TIMEOUT 300)

  # rf_client_all's window of RF_ALL_CONCURRENCY, its refusal beside started requests, rf_pending_done.
  add_executable(test_client_flow spec/core/test_client_flow.c)
  target_compile_options(test_client_flow PRIVATE ${RF_WARNINGS})
  target_compile_definitions(test_client_flow PRIVATE RF_SERVE_PATH="$<TARGET_FILE:retryfreeze-serve>")
  target_link_libraries(test_client_flow PRIVATE retryfreeze_client retryfreeze PkgConfig::CMOCKA)
  add_test(NAME c_test_client_flow COMMAND test_client_flow $<TARGET_FILE:retryfreeze-serve>)
  set_tests_properties(c_test_client_flow PROPERTIES LABELS "c;wall_clock" TIMEOUT 120)
endif()
