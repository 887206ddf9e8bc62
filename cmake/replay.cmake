# The replay of recorded ledgers under a candidate lock (core/include/retryfreeze/replay.h), part of libretryfreeze:
# the engine's decisions over the ledger's reader and tally.
target_sources(retryfreeze_objects PRIVATE
  core/src/replay/replay.c
  core/src/replay/replay_walk.c
  core/src/replay/replay_model.c
  core/src/replay/replay_interval.c
)

if(NOT RF_TESTS)
  return()
endif()
rf_add_c_test(test_replay spec/core/test_replay.c)
