/*
 * The lock field retryAfter.headers (docs/lock.md#wait-headers): an ordered, non-empty list of distinct wait
 * header names (RF_WAIT_HEADERS), matched case-insensitively and kept lowercase. Default ["retry-after"].
 */
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

bool rfi_wait_headers_parse(const cJSON *array, const char *path, rfi_route *r, rf_error *err) {
    if (!cJSON_IsArray(array) || cJSON_GetArraySize(array) < 1) {
        rfi_fail(err, path, "must be a non-empty array of header names (e.g. [\"retry-after\", \"retry-after-ms\"])");
        return false;
    }
    r->n_wait_headers = 0;
    int i = 0;
    for (const cJSON *c = array->child; c != NULL; c = c->next, i++) {
        char sub[RFI_PATH_CAP];
        rfi_path_index(sub, path, i);
        if (!cJSON_IsString(c) || c->valuestring == NULL) {
            rfi_fail(err, sub, "must be a header name string");
            return false;
        }
        rf_wait_header h;
        if (rf_wait_header_parse_name(c->valuestring, strlen(c->valuestring), &h) != 0) {
            char names[RFI_NAMES_TEXT_MAX];
            rfi_wait_header_names_text(names, sizeof names);
            rfi_fail(err, sub, "unknown wait header \"%.40s\" (supported: %s)", c->valuestring, names);
            return false;
        }
        for (size_t k = 0; k < r->n_wait_headers; k++) {
            if (r->wait_headers[k] == h) {
                rfi_fail(err, sub, "header \"%s\" is listed twice", rf_wait_header_name(h));
                return false;
            }
        }
        r->wait_headers[r->n_wait_headers++] = h; /* at most RF_WAIT_HEADER_COUNT: duplicates are refused */
    }
    return true;
}

void rfi_wait_headers_default(rfi_route *r) {
    r->n_wait_headers = 1;
    r->wait_headers[0] = RF_WAIT_RETRY_AFTER;
}

bool rfi_wait_headers_is_default(const rfi_route *r) {
    return r->n_wait_headers == 1 && r->wait_headers[0] == RF_WAIT_RETRY_AFTER;
}
