# The retry budget shared by a fleet, kept in Redis: libretryfreeze_budget_redis = retryfreeze/retry_budget_redis.h
# over the engine's store interface (rf_retry_budget_set_store), with hiredis, OpenSSL for rediss:// (hiredis 0.14
# has no TLS) and libcurl's URL parser (curl_url: the redis[s]:// URL, RFC 3986), no HTTP client. The Lua module
# (core.retry_budget) and any C program that shares a budget link it; the libcurl client does not need it.
# Compiled once, into retryfreeze_budget_redis_objects, as the engine is (cmake/core.cmake).
add_library(retryfreeze_budget_redis_objects OBJECT
  core/src/budget_store/retry_budget_redis.c
  ${RF_UTIL_OS_SOURCES} # core/src/util's clocks it uses (cmake/util.cmake)
)
target_compile_options(retryfreeze_budget_redis_objects PRIVATE ${RF_WARNINGS})
# for the include directories
target_link_libraries(retryfreeze_budget_redis_objects PRIVATE retryfreeze_objects PkgConfig::CURL PkgConfig::HIREDIS
  PkgConfig::SSL)
add_library(retryfreeze_budget_redis SHARED $<TARGET_OBJECTS:retryfreeze_budget_redis_objects>
                                            $<TARGET_OBJECTS:rf_util_report>)
target_include_directories(retryfreeze_budget_redis PUBLIC
  $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/core/include>
  $<INSTALL_INTERFACE:include>)
target_link_libraries(retryfreeze_budget_redis PUBLIC retryfreeze
  PRIVATE PkgConfig::CURL PkgConfig::HIREDIS PkgConfig::SSL Threads::Threads)
set_target_properties(retryfreeze_budget_redis PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})

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
target_link_libraries(test_retry_budget_store PRIVATE retryfreeze_budget_redis retryfreeze PkgConfig::CMOCKA
  Threads::Threads)
add_dependencies(test_retry_budget_store fake_resp)
add_test(NAME c_test_retry_budget_store COMMAND test_retry_budget_store)
# TIMEOUT: a guard against a hang, not a bound on speed (under ASan on a loaded machine the test takes over 60 s).
set_tests_properties(c_test_retry_budget_store PROPERTIES LABELS "c;wall_clock" TIMEOUT 300)
