/* JSON paths of the loader's reports (json_path.h). */
#include "json_path.h"

#include <stdio.h>
#include <string.h>

/* n is what snprintf wanted to write: when it did not fit, the last bytes become "…" (U+2026 and NUL). */
static void mark_cut(char *dst, int n) {
    if (n >= RFI_PATH_CAP) memcpy(dst + RFI_PATH_CAP - 4, "\xE2\x80\xA6", 4);
}

void rfi_path_child(char *dst, const char *parent, const char *key) {
    mark_cut(dst, snprintf(dst, RFI_PATH_CAP, "%s.%s", parent, key));
}

void rfi_path_index(char *dst, const char *parent, int i) {
    mark_cut(dst, snprintf(dst, RFI_PATH_CAP, "%s[%d]", parent, i));
}
