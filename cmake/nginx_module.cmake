# The nginx module (bindings/nginx: the gateway with no Lua phase), built against the installed nginx from
# nginx-dev's sources (RF_NGINX_SRC: its configure, auto/ and headers, and the installed nginx's configure flags) so
# that nginx loads it. It links the engine's static libraries with their symbols hidden (--exclude-libs), so a Lua
# module loaded in the same nginx keeps its own. Built when RF_NGINX_SRC is there (RF_NGINX_MODULE=AUTO), or
# required (ON), or not (OFF); lib/nginx/ngx_http_retryfreeze_module.so in the build tree.
set(RF_NGINX_MODULE AUTO CACHE STRING "Build the nginx module: AUTO (when nginx-dev is installed), ON or OFF")
set(RF_NGINX_SRC /usr/share/nginx/src CACHE PATH "nginx-dev's nginx sources (configure, conf_flags)")
set(rf_nginx_found FALSE)
if(EXISTS ${RF_NGINX_SRC}/configure AND EXISTS ${RF_NGINX_SRC}/conf_flags)
  set(rf_nginx_found TRUE)
endif()
if(RF_NGINX_MODULE STREQUAL "OFF")
  message(STATUS "retryfreeze: the nginx module is not built (RF_NGINX_MODULE=OFF)")
  return()
endif()
if(RF_NGINX_MODULE STREQUAL "AUTO" AND NOT rf_nginx_found)
  message(STATUS "retryfreeze: the nginx module is not built: no nginx-dev sources at RF_NGINX_SRC (${RF_NGINX_SRC}; "
                 "install nginx-dev, e.g. bash .ci/deps --tests)")
  return()
endif()
message(STATUS "retryfreeze: the nginx module is built against ${RF_NGINX_SRC}: lib/nginx/ngx_http_retryfreeze_module.so")
if(NOT rf_nginx_found)
  message(FATAL_ERROR "RF_NGINX_MODULE=ON needs nginx-dev's sources at RF_NGINX_SRC (${RF_NGINX_SRC}): install "
                      "nginx-dev (bash .ci/deps --tests)")
endif()
find_program(RF_BASH bash REQUIRED)
set(RF_NGINX_MODULE_SO ${CMAKE_BINARY_DIR}/lib/nginx/ngx_http_retryfreeze_module.so)
set(rf_ngx_libs "-Wl,--exclude-libs,ALL $<TARGET_FILE:retryfreeze_attempt_static> $<TARGET_FILE:retryfreeze_static>")
list(JOIN CJSON_LINK_LIBRARIES " " rf_ngx_cjson)
list(JOIN CRYPTO_LINK_LIBRARIES " " rf_ngx_crypto)
string(APPEND rf_ngx_libs " ${rf_ngx_cjson} ${rf_ngx_crypto} -lm")
add_custom_command(OUTPUT ${RF_NGINX_MODULE_SO}
  COMMAND ${RF_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/bindings/nginx/build_module.sh ${RF_NGINX_SRC}
          ${CMAKE_BINARY_DIR}/nginx-module ${CMAKE_CURRENT_SOURCE_DIR}/bindings/nginx
          ${CMAKE_CURRENT_SOURCE_DIR}/core/include "${rf_ngx_libs}" ${RF_NGINX_MODULE_SO}
  DEPENDS bindings/nginx/ngx_http_retryfreeze_module.c bindings/nginx/config bindings/nginx/build_module.sh
          retryfreeze_attempt_static retryfreeze_static
  COMMENT "Building the nginx module against ${RF_NGINX_SRC}"
  VERBATIM)
add_custom_target(nginx_module ALL DEPENDS ${RF_NGINX_MODULE_SO})
# Installed beside the libraries, for a load_module line (it needs none of them: the engine is linked in).
install(FILES ${RF_NGINX_MODULE_SO} DESTINATION ${CMAKE_INSTALL_LIBDIR}/retryfreeze/nginx)
