# Small shared helpers (core/src/util/, prefix rfi_): the clocks in ms and the OS's randomness. Like curl's curlx/,
# each library that uses them compiles them in (the client library and the binding), hidden by
# CMAKE_C_VISIBILITY_PRESET, so no library exports them and the engine stays without clocks.
set(RF_UTIL_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/core/src/util/clock_ms.c
  ${CMAKE_CURRENT_SOURCE_DIR}/core/src/util/os_random.c
)

if(NOT RF_TESTS)
  return()
endif()
# getrandom(2) wrapped (-Wl,--wrap), so the test can make it fail, be interrupted or return short reads.
add_executable(test_util spec/core/test_util.c ${RF_UTIL_SOURCES})
target_include_directories(test_util PRIVATE core/src)
target_compile_options(test_util PRIVATE ${RF_WARNINGS})
target_link_options(test_util PRIVATE "LINKER:--wrap=getrandom")
target_link_libraries(test_util PRIVATE PkgConfig::CMOCKA)
add_test(NAME c_test_util COMMAND test_util)
set_tests_properties(c_test_util PROPERTIES LABELS "c")
