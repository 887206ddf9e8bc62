# The attempt ledger: append-only JSONL (core/include/retryfreeze/ledger.h), part of libretryfreeze.
target_sources(retryfreeze_objects PRIVATE
  core/src/ledger/ledger_error.c
  core/src/ledger/ledger_text.c
  core/src/ledger/ledger_ts.c
  core/src/ledger/ledger_format.c
  core/src/ledger/ledger_fast.c
  core/src/ledger/ledger_parse.c
  core/src/ledger/ledger_write.c
  core/src/ledger/ledger_read.c
  core/src/ledger/ledger_wait_use.c
  core/src/ledger/ledger_tally.c
  core/src/ledger/ledger_tally_read.c
)

if(NOT RF_TESTS)
  return()
endif()
rf_add_c_test(test_ledger spec/core/test_ledger.c)
rf_add_c_test(test_ledger_format spec/core/test_ledger_format.c PkgConfig::CJSON)
rf_add_c_test(test_ledger_escape spec/core/test_ledger_escape.c)
rf_add_c_test(test_utf8_repair spec/core/test_utf8_repair.c)
rf_add_c_test(test_ledger_tally spec/core/test_ledger_tally.c)
rf_add_c_test(test_ledger_hold spec/core/test_ledger_hold.c)

# Several processes appending to one file, then a writer killed mid-stream (see the file's header).
add_executable(ledger_stress spec/core/ledger_stress.c)
target_compile_options(ledger_stress PRIVATE ${RF_WARNINGS})
target_link_libraries(ledger_stress PRIVATE retryfreeze)
add_test(NAME c_ledger_stress COMMAND ledger_stress ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(c_ledger_stress PROPERTIES LABELS "c" TIMEOUT 120)
