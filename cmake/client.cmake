# The HTTP client: libretryfreeze_client = libcurl carrying the attempts of the attempt loop (libretryfreeze_attempt,
# cmake/attempt.cmake) over the engine. A C program that only decides links libretryfreeze alone; one with its own
# transport links libretryfreeze_attempt; the Redis-shared retry budget is libretryfreeze_budget_redis
# (cmake/budget_store.cmake), which the client's consumers get with it (an interface link: the client calls none of
# it, so libretryfreeze_client.so does not need it).
# Compiled once, into retryfreeze_client_objects, as the engine is (cmake/core.cmake).
add_library(retryfreeze_client_objects OBJECT
  core/src/client/client.c
  core/src/client/client_flow.c
  core/src/client/response_head.c
  core/src/client/client_redirect.c
  core/src/client/client_network.c
  ${RF_UTIL_OS_SOURCES} # core/src/util's helpers it uses (cmake/util.cmake)
)
target_compile_options(retryfreeze_client_objects PRIVATE ${RF_WARNINGS})
# for the include directories
target_link_libraries(retryfreeze_client_objects PRIVATE retryfreeze_objects PkgConfig::CURL)
add_library(retryfreeze_client SHARED $<TARGET_OBJECTS:retryfreeze_client_objects> $<TARGET_OBJECTS:rf_util_report>)
target_include_directories(retryfreeze_client PUBLIC
  $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/core/include>
  $<INSTALL_INTERFACE:include>)
# The attempt loop's rfi_ functions it calls are the attempt library's internal ABI (core/src/attempt/attempt_abi.h).
target_link_libraries(retryfreeze_client PUBLIC retryfreeze_attempt retryfreeze INTERFACE retryfreeze_budget_redis
  PRIVATE PkgConfig::CURL)
set_target_properties(retryfreeze_client PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})

if(NOT RF_TESTS)
  return()
endif()

# The library graph, from the built files: the attempt library needs no libcurl, hiredis or OpenSSL (the headers its
# sources include, its NEEDED entries and what ldd loads, its undefined symbols), exports its rfi_ functions exactly as
# attempt_abi.h says (the RFI_ABI declarations, under the private version node) and nothing else rfi_; the
# client needs the attempt library's private node and neither hiredis nor OpenSSL of its own; the Redis store
# needs neither the client nor the attempt loop; no public header names an rfi_ symbol.
add_test(NAME c_library_graph COMMAND bash ${CMAKE_SOURCE_DIR}/spec/core/library_graph.sh ${CMAKE_SOURCE_DIR}
  ${CMAKE_C_COMPILER} $<TARGET_FILE:retryfreeze_attempt> $<TARGET_FILE:retryfreeze_client> $<TARGET_FILE:retryfreeze_budget_redis>
  ${RF_ATTEMPT_ABI_NODE})
set_tests_properties(c_library_graph PROPERTIES LABELS "c")

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
