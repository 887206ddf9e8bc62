/* The closest allowed word to a misspelt one (suggest.h). */
#include "suggest.h"

#include <ctype.h>
#include <stdint.h>
#include <string.h>

/* Case-insensitive edit distance (Levenshtein) of two short words; a large number when either is over 64. */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb) {
    enum { MAX = 64 };
    if (la > MAX || lb > MAX) return SIZE_MAX;
    size_t row[MAX + 1], prev;
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        prev = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t keep = row[j];
            size_t cost = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]) ? 0 : 1;
            size_t best = prev + cost;
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            prev = keep;
        }
    }
    return row[lb];
}

void rfi_did_you_mean(const char *word, const char *list, char *out, size_t cap) {
    size_t lw = strlen(word), best = SIZE_MAX;
    out[0] = '\0';
    for (const char *p = list; *p;) {
        const char *end = strstr(p, ", ");
        size_t len = end ? (size_t)(end - p) : strlen(p);
        size_t d = edit_distance(word, lw, p, len);
        if (d < best && len < cap) {
            best = d;
            memcpy(out, p, len);
            out[len] = '\0';
        }
        p += len + (end ? 2 : 0);
    }
    size_t limit = lw / 3 > 1 ? lw / 3 : 1;
    if (best > limit) out[0] = '\0';
}
