/* JSON paths of the loader's reports (json_path.h). Built with memcpy, not snprintf: the loader extends a path
 * for every member of a lock (a report names it), so this is on the load path of every lock. */
#include "json_path.h"

#include <stdio.h>
#include <string.h>

/* dst = a + sep + b; when it does not fit, the last bytes become "…" (U+2026) and the NUL. */
static void join(char *dst, const char *a, const char *sep, const char *b, size_t b_len) {
    const size_t la = strlen(a), ls = strlen(sep), want = la + ls + b_len;
    if (want < RFI_PATH_CAP) {
        memmove(dst, a, la); /* dst may be a itself only when sep and b are empty: memmove keeps that safe */
        memcpy(dst + la, sep, ls);
        memcpy(dst + la + ls, b, b_len);
        dst[want] = '\0';
        return;
    }
    char whole[2 * RFI_PATH_CAP + 32];
    snprintf(whole, sizeof whole, "%s%s%.*s", a, sep, (int)(b_len < RFI_PATH_CAP ? b_len : RFI_PATH_CAP), b);
    memcpy(dst, whole, RFI_PATH_CAP - 4);
    memcpy(dst + RFI_PATH_CAP - 4, "\xE2\x80\xA6", 4);
}

void rfi_path_child(char *dst, const char *parent, const char *key) { join(dst, parent, ".", key, strlen(key)); }

void rfi_path_index(char *dst, const char *parent, int i) {
    char text[16];
    int n = snprintf(text, sizeof text, "[%d]", i);
    join(dst, parent, "", text, (size_t)n);
}
