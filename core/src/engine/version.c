/* The library version, from CMake's project(VERSION) — the one place it is defined. */
#include "retryfreeze/common.h"

const char *rf_version(void) { return RF_VERSION_STRING; }
