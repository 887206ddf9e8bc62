# The HTTP client: libretryfreeze_client = the engine + libcurl. A C program that only decides links
# libretryfreeze alone.
add_library(retryfreeze_client SHARED
  core/src/client/client.c
  core/src/client/client_flow.c
  core/src/client/attempt_step.c
  core/src/client/response_head.c
  core/src/client/client_redirect.c
  core/src/client/client_network.c
  core/src/client/client_limits.c
  core/src/client/client_vocabulary.c
)
target_include_directories(retryfreeze_client PUBLIC
  $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/core/include>
  $<INSTALL_INTERFACE:include>)
target_compile_options(retryfreeze_client PRIVATE ${RF_WARNINGS})
target_link_libraries(retryfreeze_client PUBLIC retryfreeze PRIVATE PkgConfig::CURL)
set_target_properties(retryfreeze_client PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
