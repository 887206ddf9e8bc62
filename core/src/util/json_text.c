/* JSON values as a refusal names them (json_text.h). */
#include "json_text.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

const char *rfi_json_type_name(const cJSON *item) {
    if (cJSON_IsNull(item)) return "null";
    if (cJSON_IsBool(item)) return "a boolean";
    if (cJSON_IsNumber(item)) return "a number";
    if (cJSON_IsString(item)) return "a string";
    if (cJSON_IsArray(item)) return "an array";
    if (cJSON_IsObject(item)) return "an object";
    return "an invalid value";
}

const char *rfi_number_text(char buf[RFI_NUMBER_TEXT_MAX], double v) {
    snprintf(buf, RFI_NUMBER_TEXT_MAX, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, RFI_NUMBER_TEXT_MAX, "%.17g", v);
    return buf;
}
