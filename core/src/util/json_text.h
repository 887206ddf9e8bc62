/*
 * How a JSON value is named in a refusal ("got a string", "got 1.2345"): one wording for the lock loader and
 * the ledger reader.
 */
#ifndef RETRYFREEZE_UTIL_JSON_TEXT_H
#define RETRYFREEZE_UTIL_JSON_TEXT_H

struct cJSON;

/* "null", "a boolean", "a number", "a string", "an array", "an object" (or "an invalid value"): a static string. */
const char *rfi_json_type_name(const struct cJSON *item);

/* A number as the user wrote it: the shortest of %.15g and %.17g that reads back as the same double (1.2345, not
 * 1.2344999999999999), as JSON serialisers print doubles. buf needs RFI_NUMBER_TEXT_MAX bytes. Returns buf. */
#define RFI_NUMBER_TEXT_MAX 32
const char *rfi_number_text(char buf[RFI_NUMBER_TEXT_MAX], double v);

#endif
