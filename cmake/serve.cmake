# retryfreeze-serve: the fault-injecting upstream (libmicrohttpd) of `retryfreeze demo`, `serve` and `soak`
# and of the tests. It never links libretryfreeze; it compiles in the engine's generator (rng.c), so that random
# faults draw from the one xoshiro256** of the project. Built in every CMake build (the demo needs it), not in a rock.

add_executable(retryfreeze-serve
  serve/main.c
  serve/handler.c
  serve/upstream.c
  serve/sequences.c
  serve/stats.c
  serve/script.c
  serve/faults.c
  serve/prng.c
  core/src/engine/rng.c
  serve/httpdate.c
  serve/stop.c
)
target_compile_options(retryfreeze-serve PRIVATE ${RF_WARNINGS})
target_include_directories(retryfreeze-serve PRIVATE core/include)
target_compile_definitions(retryfreeze-serve PRIVATE RF_VERSION_STRING="${PROJECT_VERSION}")
target_link_libraries(retryfreeze-serve PRIVATE PkgConfig::MHD Threads::Threads)
# Beside the retryfreeze CLI, which starts it for `serve`, `demo` and `soak`.
set_target_properties(retryfreeze-serve PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)

# Shell specs drive the real server with the curl CLI; each starts its own server on a free port
# with --max-seconds as a safety net and kills it on exit.
if(NOT RF_TESTS)
  return()
endif()
find_program(RF_CURL_CLI curl)
find_program(RF_BASH bash)
if(RF_CURL_CLI AND RF_BASH)
  foreach(spec cli scripted transport random stats)
    add_test(NAME serve_${spec}
      COMMAND ${RF_BASH} ${CMAKE_CURRENT_SOURCE_DIR}/spec/serve/${spec}_spec.sh)
    set_tests_properties(serve_${spec} PROPERTIES
      LABELS "serve"
      TIMEOUT 120
      ENVIRONMENT "RF_SERVE=$<TARGET_FILE:retryfreeze-serve>;RF_CURL=${RF_CURL_CLI}")
  endforeach()
else()
  message(STATUS "curl or bash not found: serve specs are skipped")
endif()
