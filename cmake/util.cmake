# Small shared helpers (core/src/util/, prefix rfi_), as curl's curlx/ serves libcurl and the curl tool: each library
# compiles the ones it uses, hidden by CMAKE_C_VISIBILITY_PRESET, so no library exports them. Three sets, by what
# they need and who may have them:
#   RF_UTIL_REPORT_SOURCES  the one error report (rfi_report, rfi_fail): the engine (with the ledger), the attempt
#                           loop, the Redis store and the client;
#   RF_UTIL_ENGINE_SOURCES  JSON paths, JSON values in words, "did you mean": the engine only (json_text.c needs
#                           cJSON, which the client does not link);
#   RF_UTIL_OS_SOURCES      the clocks in ms and the OS's randomness: the client, the Redis store and the binding, so
#                           that the engine and the attempt loop stay without clocks;
#   RF_UTIL_SUGGEST_SOURCES "did you mean" alone, for the binding (an unknown option of rf.client and the like).
# Absolute paths: a test that links two libraries' sources (test_client_alloc) drops the copy both compile.
set(RF_UTIL_DIR ${CMAKE_CURRENT_SOURCE_DIR}/core/src/util)
set(RF_UTIL_REPORT_SOURCES ${RF_UTIL_DIR}/report.c)
set(RF_UTIL_ENGINE_SOURCES ${RF_UTIL_DIR}/json_path.c ${RF_UTIL_DIR}/json_text.c ${RF_UTIL_DIR}/suggest.c)
set(RF_UTIL_OS_SOURCES ${RF_UTIL_DIR}/clock_ms.c ${RF_UTIL_DIR}/os_random.c)
set(RF_UTIL_SUGGEST_SOURCES ${RF_UTIL_DIR}/suggest.c)
# The error report is compiled once and linked into both libraries (and the failing allocator's tests, once).
add_library(rf_util_report OBJECT ${RF_UTIL_REPORT_SOURCES})
target_include_directories(rf_util_report PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/core/include)
target_compile_options(rf_util_report PRIVATE ${RF_WARNINGS})

if(NOT RF_TESTS)
  return()
endif()
# getrandom(2) wrapped (-Wl,--wrap), so the test can make it fail, be interrupted or return short reads.
add_executable(test_util spec/core/test_util.c ${RF_UTIL_OS_SOURCES})
target_include_directories(test_util PRIVATE core/src)
target_compile_options(test_util PRIVATE ${RF_WARNINGS})
target_link_options(test_util PRIVATE "LINKER:--wrap=getrandom")
target_link_libraries(test_util PRIVATE PkgConfig::CMOCKA)
add_test(NAME c_test_util COMMAND test_util)
set_tests_properties(c_test_util PROPERTIES LABELS "c")
