# The HTTP client: libretryfreeze_client = the engine + libcurl. A C program that only decides links
# libretryfreeze alone.
# Compiled once, into retryfreeze_client_objects, as the engine is (cmake/core.cmake).
add_library(retryfreeze_client_objects OBJECT
  core/src/client/client.c
  core/src/client/client_flow.c
  core/src/client/attempt_step.c
  core/src/client/response_head.c
  core/src/client/client_redirect.c
  core/src/client/client_network.c
  core/src/client/client_limits.c
  core/src/client/retry_budget_redis.c
  ${RF_UTIL_OS_SOURCES} # core/src/util's helpers it uses (cmake/util.cmake)
)
target_compile_options(retryfreeze_client_objects PRIVATE ${RF_WARNINGS})
# for the include directories
target_link_libraries(retryfreeze_client_objects PRIVATE retryfreeze_objects PkgConfig::CURL PkgConfig::HIREDIS
  PkgConfig::SSL)
add_library(retryfreeze_client SHARED $<TARGET_OBJECTS:retryfreeze_client_objects> $<TARGET_OBJECTS:rf_util_report>)
target_include_directories(retryfreeze_client PUBLIC
  $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/core/include>
  $<INSTALL_INTERFACE:include>)
target_link_libraries(retryfreeze_client PUBLIC retryfreeze PRIVATE PkgConfig::CURL PkgConfig::HIREDIS PkgConfig::SSL Threads::Threads)
set_target_properties(retryfreeze_client PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})

if(NOT RF_TESTS)
  return()
endif()

# A hostile Redis (drips, stalls mid-reply, garbage, silence, a full listen queue) for the deadline of the
# shared retry budget: started by test_retry_budget_store and by spec/50-fleet_spec.lua (build/fake_resp).
add_executable(fake_resp spec/core/fake_resp.c)
target_compile_options(fake_resp PRIVATE ${RF_WARNINGS})
target_link_libraries(fake_resp PRIVATE Threads::Threads)

# The shared retry budget's store: semantics with a fake store, 8 threads on one bucket in a real Redis
# (started by the test; skipped without redis-server), and every decision's deadline against fake_resp.
# .ci/tsan runs it under ThreadSanitizer.
add_executable(test_retry_budget_store spec/core/test_retry_budget_store.c)
target_compile_options(test_retry_budget_store PRIVATE ${RF_WARNINGS})
target_compile_definitions(test_retry_budget_store PRIVATE RF_FAKE_RESP="$<TARGET_FILE:fake_resp>")
target_link_libraries(test_retry_budget_store PRIVATE retryfreeze_client retryfreeze PkgConfig::CMOCKA Threads::Threads)
add_dependencies(test_retry_budget_store fake_resp)
add_test(NAME c_test_retry_budget_store COMMAND test_retry_budget_store)
# TIMEOUT: a guard against a hang, not a bound on speed (under ASan on a loaded machine the test takes over 60 s).
set_tests_properties(c_test_retry_budget_store PROPERTIES LABELS "c;wall_clock" TIMEOUT 300)

# Propagation on the wire: every attempt's number and deadline at a loopback upstream the test forks, an overloaded
# 503 not retried, the caller's headers narrowing only.
add_executable(test_client_propagation spec/core/test_client_propagation.c)
target_compile_options(test_client_propagation PRIVATE ${RF_WARNINGS})
target_link_libraries(test_client_propagation PRIVATE retryfreeze_client retryfreeze PkgConfig::CMOCKA)
add_test(NAME c_test_client_propagation COMMAND test_client_propagation)
set_tests_properties(c_test_client_propagation PROPERTIES LABELS "c;wall_clock" TIMEOUT 60)

# The response head's grpc-status (a header or a trailer), read as the client reads it; response_head.c alone.
add_executable(test_response_head_grpc spec/core/test_response_head_grpc.c core/src/client/response_head.c)
target_compile_options(test_response_head_grpc PRIVATE ${RF_WARNINGS})
target_link_libraries(test_response_head_grpc PRIVATE retryfreeze PkgConfig::CMOCKA)
add_test(NAME c_test_response_head_grpc COMMAND test_response_head_grpc)
set_tests_properties(c_test_response_head_grpc PROPERTIES LABELS "c")
