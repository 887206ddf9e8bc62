# The engine: libretryfreeze (C11, cJSON, libcrypto). No Lua, no curl.
# Its sources are compiled once, into retryfreeze_objects: the shared and the static library (cmake/install.cmake)
# and the failing allocator's test (cmake/hardening.cmake) link those objects, each with rf_util_report's
# (cmake/util.cmake).
add_library(retryfreeze_objects OBJECT
  ${RF_UTIL_ENGINE_SOURCES} # core/src/util's helpers it uses (cmake/util.cmake)
  core/src/engine/version.c
  core/src/engine/error_text.c
  core/src/engine/input_file.c
  core/src/engine/output_file.c
  core/src/engine/vocabulary.c
  core/src/engine/outcome.c
  core/src/engine/failure_class.c
  core/src/engine/endpoint.c
  core/src/engine/lock_schema.c
  core/src/engine/lock_fields.c
  core/src/engine/lock_load.c
  core/src/engine/lock_canonical.c
  core/src/engine/policy.c
  core/src/engine/route_index.c
  core/src/engine/rng.c
  core/src/engine/backoff.c
  core/src/engine/retry_budget.c
  core/src/engine/decide.c
  core/src/engine/hedge.c
  core/src/engine/redirect.c
  core/src/engine/retry_after.c
  core/src/engine/wait_headers.c
  core/src/engine/wait_hints.c
  core/src/engine/class_limits.c
  core/src/engine/propagation.c
  core/src/engine/gateway_routes.c
)
target_include_directories(retryfreeze_objects PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/core/include)
target_compile_options(retryfreeze_objects PRIVATE ${RF_WARNINGS})
target_compile_definitions(retryfreeze_objects PRIVATE RF_VERSION_STRING="${PROJECT_VERSION}")
target_link_libraries(retryfreeze_objects PRIVATE PkgConfig::CJSON PkgConfig::CRYPTO) # for the include directories
add_library(retryfreeze SHARED $<TARGET_OBJECTS:retryfreeze_objects> $<TARGET_OBJECTS:rf_util_report>)
target_include_directories(retryfreeze PUBLIC
  $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/core/include>
  $<INSTALL_INTERFACE:include>)
target_link_libraries(retryfreeze PRIVATE PkgConfig::CJSON PkgConfig::CRYPTO m)
# The engine's public functions call each other on the decision path (rf_decide -> rf_retry_after_parse ->
# rf_http_date_parse): without interposition of its own exported symbols (as Python and glibc build) those
# calls are direct and may be inlined. An interposer of rf_* symbols is not a supported use.
include(CheckCCompilerFlag)
check_c_compiler_flag(-fno-semantic-interposition rf_has_no_interposition)
if(rf_has_no_interposition)
  target_compile_options(retryfreeze_objects PRIVATE -fno-semantic-interposition)
endif()
set_target_properties(retryfreeze PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})

# rf_add_c_test(NAME SOURCE [LIBS...]): one cmocka executable per area, registered with ctest.
function(rf_add_c_test name source)
  add_executable(${name} ${source})
  target_compile_options(${name} PRIVATE ${RF_WARNINGS})
  target_link_libraries(${name} PRIVATE retryfreeze PkgConfig::CMOCKA ${ARGN})
  add_test(NAME c_${name} COMMAND ${name})
  set_tests_properties(c_${name} PROPERTIES LABELS "c")
endfunction()

if(NOT RF_TESTS)
  return()
endif()
rf_add_c_test(test_retry_after spec/core/test_retry_after.c)
rf_add_c_test(test_wait_headers spec/core/test_wait_headers.c)
rf_add_c_test(test_wait_decide spec/core/test_wait_decide.c)
rf_add_c_test(test_propagation spec/core/test_propagation.c)
rf_add_c_test(test_gateway_routes spec/core/test_gateway_routes.c)
rf_add_c_test(test_lock spec/core/test_lock.c)
rf_add_c_test(test_vocabulary_lists spec/core/test_vocabulary_lists.c)
rf_add_c_test(test_lock_schema spec/core/test_lock_schema.c)
rf_add_c_test(test_output spec/core/test_output.c)
rf_add_c_test(test_route_index spec/core/test_route_index.c)
rf_add_c_test(test_decide spec/core/test_decide.c)
rf_add_c_test(test_network_verdicts spec/core/test_network_verdicts.c)
