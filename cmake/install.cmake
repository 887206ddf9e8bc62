# Installation: libraries (shared with a versioned SONAME, and static), headers, pkg-config and CMake package
# files, the Lua C module and Lua modules at overridable paths (LuaRocks passes LIBDIR/LUADIR), the CLI and the
# fault-injecting upstream (which the CLI starts), and the examples the demo runs.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# One module per Lua of RF_LUA, each under its ABI's directories (LuaJIT's is 5.1's). With a single Lua,
# RF_LUA_CMOD_DIR/RF_LUA_LMOD_DIR may name the directories (LuaRocks passes its LIBDIR and LUADIR).
set(RF_LUA_CMOD_DIR "" CACHE PATH "Where the Lua C module goes (retryfreeze/core.so); default lib/lua/<abi>")
set(RF_LUA_LMOD_DIR "" CACHE PATH "Where the Lua modules go (retryfreeze/*.lua); default share/lua/<abi>")
list(LENGTH RF_LUA_MODULES rf_n_lua)
if(rf_n_lua GREATER 1 AND (RF_LUA_CMOD_DIR OR RF_LUA_LMOD_DIR))
  message(FATAL_ERROR "RF_LUA_CMOD_DIR/RF_LUA_LMOD_DIR name one directory: build for one Lua (RF_LUA) with them")
endif()

# Static twins of the shared libraries, archives of the same objects.
add_library(retryfreeze_static STATIC $<TARGET_OBJECTS:retryfreeze_objects> $<TARGET_OBJECTS:rf_util_report>)
add_library(retryfreeze_attempt_static STATIC $<TARGET_OBJECTS:retryfreeze_attempt_objects>
                                              $<TARGET_OBJECTS:rf_util_report>)
add_library(retryfreeze_budget_redis_static STATIC $<TARGET_OBJECTS:retryfreeze_budget_redis_objects>
                                                   $<TARGET_OBJECTS:rf_util_report>)
add_library(retryfreeze_client_static STATIC $<TARGET_OBJECTS:retryfreeze_client_objects>
                                             $<TARGET_OBJECTS:rf_util_report>)
# The module links them (cmake/bindings.cmake); their objects are fat (machine code too), so a link without LTO
# uses them as well.
rf_lto(retryfreeze_objects retryfreeze_attempt_objects retryfreeze_budget_redis_objects retryfreeze_client_objects
  rf_util_report retryfreeze_static retryfreeze_attempt_static retryfreeze_budget_redis_static retryfreeze_client_static)
# The shared engine too: rf_decide's calls into the matcher, the wait headers and the backoff cross files
# (bench/engine/c_instructions.sh: rf_decide 482 -> 455 instructions per decision with this and the flag in core.cmake).
rf_lto(retryfreeze)
set(rf_static_libs retryfreeze_static retryfreeze_attempt_static retryfreeze_budget_redis_static retryfreeze_client_static)
if(NOT RF_ROCK) # the binding as a static library, for C programs embedding Lua 5.4 (a rock has no Lua 5.4)
  add_library(retryfreeze_lua_static STATIC $<TARGET_OBJECTS:retryfreeze_lua>) # the command's objects
  target_link_libraries(retryfreeze_lua_static PUBLIC retryfreeze_client_static retryfreeze_budget_redis_static
                        PRIVATE PkgConfig::CJSON)
  set_target_properties(retryfreeze_lua_static PROPERTIES OUTPUT_NAME retryfreeze_lua)
  list(APPEND rf_static_libs retryfreeze_lua_static)
endif()
foreach(t IN LISTS rf_static_libs)
  target_include_directories(${t} PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/core/include>
                                         $<INSTALL_INTERFACE:include>)
  target_compile_options(${t} PRIVATE ${RF_WARNINGS})
endforeach()
# Each static library names the one below it, so a consumer links one target (docs/c-api.md "Linking").
target_link_libraries(retryfreeze_static PRIVATE PkgConfig::CJSON PkgConfig::CRYPTO m)
target_link_libraries(retryfreeze_attempt_static PUBLIC retryfreeze_static)
target_link_libraries(retryfreeze_budget_redis_static PUBLIC retryfreeze_static
                      PRIVATE PkgConfig::CURL PkgConfig::HIREDIS PkgConfig::SSL Threads::Threads)
target_link_libraries(retryfreeze_client_static PUBLIC retryfreeze_attempt_static retryfreeze_static
                      INTERFACE retryfreeze_budget_redis_static PRIVATE PkgConfig::CURL)
set_target_properties(retryfreeze_static PROPERTIES OUTPUT_NAME retryfreeze)
set_target_properties(retryfreeze_attempt_static PROPERTIES OUTPUT_NAME retryfreeze_attempt)
set_target_properties(retryfreeze_budget_redis_static PROPERTIES OUTPUT_NAME retryfreeze_budget_redis)
set_target_properties(retryfreeze_client_static PROPERTIES OUTPUT_NAME retryfreeze_client)

# Installed programs and the module find the shared libraries relative to themselves (a RUNPATH of $ORIGIN/...),
# so an install under any prefix needs no ldconfig and no LD_LIBRARY_PATH; spec/install_spec.sh checks it.
if(TARGET retryfreeze_cli)
  set_target_properties(retryfreeze_cli PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
endif()
foreach(mod IN LISTS RF_LUA_MODULES)
  set_target_properties(${mod} PROPERTIES INSTALL_RPATH "$ORIGIN/../../../../${CMAKE_INSTALL_LIBDIR};$ORIGIN/../../..")
endforeach()
set_target_properties(retryfreeze_attempt retryfreeze_budget_redis retryfreeze_client PROPERTIES INSTALL_RPATH "$ORIGIN")

# A test installs into a temporary prefix and uses the result as a new user would.
if(RF_TESTS)
  add_test(NAME install_tree COMMAND bash ${CMAKE_SOURCE_DIR}/spec/install_spec.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
  set_tests_properties(install_tree PROPERTIES LABELS "install" TIMEOUT 300)
endif()

# A rock (retryfreeze-scm-1.rockspec sets RF_ROCK) installs only the Lua modules and the C module: LuaRocks
# owns its LIBDIR and treats every file there as a Lua C module. The rockspec installs the `retryfreeze`
# command itself (build.install.bin: bindings/cli_main.lua). The shared libraries are built only if the module
# links them (RF_MODULE_STATIC=OFF).
if(RF_ROCK)
  set_target_properties(retryfreeze retryfreeze_attempt retryfreeze_budget_redis retryfreeze_client
    PROPERTIES EXCLUDE_FROM_ALL ON)
endif()
set(rf_abis_done "")
foreach(mod IN LISTS RF_LUA_MODULES)
  get_target_property(abi ${mod} RF_LUA_ABI)
  if(abi IN_LIST rf_abis_done)
    # 5.1 and luajit share lib/lua/5.1: the first listed is installed there (either loads in both).
    message(STATUS "retryfreeze: ${mod} not installed: another module already goes to lib/lua/${abi}")
    continue()
  endif()
  list(APPEND rf_abis_done ${abi})
  set(cmod "${RF_LUA_CMOD_DIR}")
  set(lmod "${RF_LUA_LMOD_DIR}")
  if(NOT cmod)
    set(cmod "${CMAKE_INSTALL_LIBDIR}/lua/${abi}")
  endif()
  if(NOT lmod)
    set(lmod "${CMAKE_INSTALL_DATADIR}/lua/${abi}")
  endif()
  install(TARGETS ${mod} LIBRARY DESTINATION ${cmod}/retryfreeze)
  # The report's vendored chart library (minified JavaScript and its licences) goes beside the Lua modules.
  install(DIRECTORY lua/retryfreeze DESTINATION ${lmod} FILES_MATCHING PATTERN "*.lua"
          PATTERN "vendor/vega/*.min.js" PATTERN "vendor/vega/LICENSE.*")
endforeach()
if(RF_ROCK)
  return()
endif()
# The `retryfreeze` command embeds Lua 5.4 and reads the Lua library from share/lua/5.4 beside it, whatever RF_LUA
# builds modules for: a build without the 5.4 module (RF_LUA=luajit) installs the library there too.
if(NOT "5.4" IN_LIST rf_abis_done)
  install(DIRECTORY lua/retryfreeze DESTINATION ${CMAKE_INSTALL_DATADIR}/lua/5.4 FILES_MATCHING PATTERN "*.lua"
          PATTERN "vendor/vega/*.min.js" PATTERN "vendor/vega/LICENSE.*")
endif()

install(TARGETS retryfreeze retryfreeze_attempt retryfreeze_budget_redis retryfreeze_client retryfreeze_static
  retryfreeze_attempt_static retryfreeze_budget_redis_static retryfreeze_client_static retryfreeze_lua_static
  EXPORT retryfreezeTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY core/include/retryfreeze DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS retryfreeze_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET retryfreeze-serve)
  install(TARGETS retryfreeze-serve RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(FILES examples/retry-budget.lock.json examples/service.lock.json examples/jobs_flow.lua
              examples/refund_flow.lua examples/embed_host.c examples/decide_host.c
        DESTINATION ${CMAKE_INSTALL_DATADIR}/retryfreeze/examples)

install(EXPORT retryfreezeTargets NAMESPACE retryfreeze:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/retryfreeze)
# The static targets' link interfaces name PkgConfig::CJSON, ::CRYPTO, ::CURL, ::HIREDIS, ::SSL and Threads::Threads: the
# config defines them when it can (quietly: a consumer of the shared targets needs none of their -dev packages; a
# consumer of a static target without them gets CMake's "target not found" naming the missing one).
file(WRITE ${CMAKE_BINARY_DIR}/retryfreezeConfig.cmake.in [=[
@PACKAGE_INIT@
find_package(PkgConfig QUIET)
find_package(Threads QUIET)
if(PKG_CONFIG_FOUND)
  foreach(rf_dep CJSON=libcjson CRYPTO=libcrypto CURL=libcurl HIREDIS=hiredis SSL=libssl)
    string(REPLACE "=" ";" rf_dep "${rf_dep}")
    list(GET rf_dep 0 rf_var)
    list(GET rf_dep 1 rf_module)
    if(NOT TARGET PkgConfig::${rf_var})
      pkg_check_modules(${rf_var} QUIET IMPORTED_TARGET ${rf_module})
    endif()
  endforeach()
endif()
include("${CMAKE_CURRENT_LIST_DIR}/retryfreezeTargets.cmake")
]=])
configure_package_config_file(${CMAKE_BINARY_DIR}/retryfreezeConfig.cmake.in
  ${CMAKE_BINARY_DIR}/retryfreezeConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/retryfreeze)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/retryfreezeConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/retryfreezeConfig.cmake ${CMAKE_BINARY_DIR}/retryfreezeConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/retryfreeze)

# pkg-config: the engine, the attempt loop, the Redis-shared retry budget, the client and the Lua binding (for
# programs that embed Lua and the module). The binding calls cJSON itself (retryfreeze.json), so libcjson is a
# public requirement.
file(WRITE ${CMAKE_BINARY_DIR}/retryfreeze.pc.in [=[
prefix=${pcfiledir}/../..
libdir=${prefix}/@CMAKE_INSTALL_LIBDIR@
includedir=${prefix}/@CMAKE_INSTALL_INCLUDEDIR@

Name: retryfreeze
Description: Retry decisions from a pinned policy and transport facts (engine, attempt loop, Redis budget, libcurl client, Lua binding)
Version: @PROJECT_VERSION@
Requires: libcjson
Requires.private: libcrypto libcurl hiredis libssl
Libs: -L${libdir} -lretryfreeze_lua -lretryfreeze_client -lretryfreeze_budget_redis -lretryfreeze_attempt -lretryfreeze
Cflags: -I${includedir}
]=])
configure_file(${CMAKE_BINARY_DIR}/retryfreeze.pc.in ${CMAKE_BINARY_DIR}/retryfreeze.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/retryfreeze.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# `cmake --build build --target uninstall` removes every file the last `cmake --install` of this build tree
# wrote (CMake records them in install_manifest.txt); directories it created are left.
file(WRITE ${CMAKE_BINARY_DIR}/cmake_uninstall.cmake [=[
set(manifest "${CMAKE_CURRENT_LIST_DIR}/install_manifest.txt")
if(NOT EXISTS "${manifest}")
  message(FATAL_ERROR "no ${manifest}: nothing was installed from this build tree (run cmake --install first)")
endif()
file(STRINGS "${manifest}" files)
foreach(f IN LISTS files)
  if(EXISTS "${f}" OR IS_SYMLINK "${f}")
    message(STATUS "Removing ${f}")
    file(REMOVE "${f}")
  endif()
endforeach()
]=])
add_custom_target(uninstall COMMAND ${CMAKE_COMMAND} -P ${CMAKE_BINARY_DIR}/cmake_uninstall.cmake
  COMMENT "Removing the files of install_manifest.txt")
