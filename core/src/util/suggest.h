/*
 * "Did you mean …?": the closest of a list of allowed words to a word that is not one of them (a misspelt key, a
 * misspelt class token), so that a refusal can name the likely intended word.
 */
#ifndef RETRYFREEZE_UTIL_SUGGEST_H
#define RETRYFREEZE_UTIL_SUGGEST_H

#include <stddef.h>

/*
 * The entry of list (", "-separated) closest to word, when it is close enough to be a likely typo: at most a third
 * of the word's length, and at least one edit, away (case-insensitive Levenshtein distance). Writes it into out,
 * or "" when none is.
 */
void rfi_did_you_mean(const char *word, const char *list, char *out, size_t cap);

#endif
