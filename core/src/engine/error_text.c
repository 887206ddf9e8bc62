/*
 * An rf_error as one line for people (retryfreeze/common.h): how the Lua binding, the CLI and the nginx module name
 * a bad input, in one place.
 */
#include "retryfreeze/common.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

size_t rf_error_text(const rf_error *err, const char *source, char *out, size_t cap) {
    if (!source) source = "";
    bool whole_file = *source && err->line == 0 && strcmp(err->path, source) == 0;
    if (whole_file) {
        int n = snprintf(out, cap, "%s", err->message);
        return n < 0 ? 0 : (size_t)n;
    }
    bool named = err->path[0] && strcmp(err->path, source) != 0;
    char pos[64] = "";
    if (err->line > 0) snprintf(pos, sizeof pos, " (line %d, column %d)", err->line, err->column);
    int n = snprintf(out, cap, "%s%s%s%s%s%s", source, *source ? ": " : "", named ? err->path : "", named ? ": " : "",
                     err->message, pos);
    return n < 0 ? 0 : (size_t)n;
}
