/*
 * The lock schema as data: one row per lock field (its JSON path, type, range, default, whether the canonical form
 * writes it, and which change of it widens the policy). The loader parses, fills defaults and writes the canonical
 * JSON (the digest's input) from these rows; the Lua views of a policy, the CLI's threshold options, retryfreeze
 * diff and the check of docs/lock.md read the same rows, so a range, a name or a default is written once.
 */
#ifndef RETRYFREEZE_LOCK_SCHEMA_H
#define RETRYFREEZE_LOCK_SCHEMA_H

#include "retryfreeze/common.h"
#include "retryfreeze/policy.h"
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a field holds (X(C name, string)). min and max of a row bound: an integer's value, a decimal's value × 1000,
 * a list's number of items, an endpoint's, a name's or a header's number of characters, and each limit of
 * class-limits. */
#define RF_FIELD_TYPES(X)                                                                                    \
    X(RF_FIELD_OBJECT, "object")             /* an object of fields: the rows whose parent it is */          \
    X(RF_FIELD_INTEGER, "integer")           /* an integer in [min, max] */                                  \
    X(RF_FIELD_DECIMAL, "decimal")           /* a number, at most 3 decimal places, × 1000 in [min, max] */ \
    X(RF_FIELD_BOOLEAN, "boolean")           /* true or false */                                             \
    X(RF_FIELD_ENDPOINT, "endpoint")         /* "METHOD /path" (docs/lock.md, Endpoints) */                  \
    X(RF_FIELD_CLASSES, "classes")           /* an array of failure class tokens, aliases expanded */        \
    X(RF_FIELD_METHODS, "methods")           /* an array of distinct methods, 1..16 uppercase letters */     \
    X(RF_FIELD_JITTER, "jitter")             /* one of RF_JITTERS */                                         \
    X(RF_FIELD_WAIT_HEADERS, "wait-headers") /* an array of distinct RF_WAIT_HEADERS, in reading order */    \
    X(RF_FIELD_CLASS_LIMITS, "class-limits") /* an object {class token: attempts} */                         \
    X(RF_FIELD_REASONS, "reasons")           /* an array of distinct RF_REASONS */                           \
    X(RF_FIELD_NAME, "name")                 /* a string of A-Z a-z 0-9 . _ - */                             \
    X(RF_FIELD_ROUTES, "routes")             /* the array of route objects */                                \
    X(RF_FIELD_HEADER, "header")             /* an HTTP field name (RFC 9110 §5.1 token), kept lowercase */

/* Where a field may be written (X(C name, string)). */
#define RF_FIELD_PLACES(X)                                                                                          \
    X(RF_PLACE_ROUTE, "route") /* a route's: a flat lock's top level, each of routes and (but endpoint) defaults */ \
    X(RF_PLACE_LOCK, "lock")   /* the lock's top level, in both forms */                                            \
    X(RF_PLACE_MULTI, "multi") /* the top level of a multi-route lock only */

/* What an absent field means (X(C name, string)). */
#define RF_FIELD_DEFAULTS(X)                                                                     \
    X(RF_DEFAULT_REQUIRED, "required") /* nothing: a lock without it is refused */               \
    X(RF_DEFAULT_VALUE, "value")       /* default_json, read as the lock's own value would be */ \
    X(RF_DEFAULT_NONE, "none") /* not set: no budget, a threshold not checked; compared as default_json if any */

/* How the canonical form (the digest's input) writes a field (X(C name, string)). */
#define RF_FIELD_CANONICAL(X)                                                                                     \
    X(RF_CANON_ALWAYS, "always") /* always (when its object is written) */                                        \
    X(RF_CANON_UNLESS_DEFAULT,                                                                                    \
      "unless-default") /* left out at its default: locks written before it keep their digest */                  \
    X(RF_CANON_NULL_WHEN_NONE, "null-when-none") /* written as null when absent (the lock may write null, too) */ \
    X(RF_CANON_NEVER, "never")                   /* never: defaults, whose values every route carries */

/*
 * Which change of a field widens the policy, as retryfreeze diff judges it (docs/governance.md; the reverse change
 * narrows). X(C name, string).
 */
#define RF_FIELD_WIDENINGS(X)                                                                                          \
    X(RF_WIDENS_GROWS, "grows")                           /* a larger value; for an optional one, also dropping it */  \
    X(RF_WIDENS_SHRINKS, "shrinks")                       /* a smaller value; for an optional one, also dropping it */ \
    X(RF_WIDENS_TRUE_TO_FALSE, "true-to-false")           /* a protection turned off */                                \
    X(RF_WIDENS_FALSE_TO_TRUE, "false-to-true")           /* a permission turned on */                                 \
    X(RF_WIDENS_REMOVED, "removed")                       /* the whole object dropped */                               \
    X(RF_WIDENS_CHANGED_OR_REMOVED, "changed-or-removed") /* any other value, or none (a fresh shared bucket) */       \
    X(RF_WIDENS_ANY_CHANGE, "any-change")                 /* any change at all */                                      \
    X(RF_WIDENS_ITEM_REMOVED, "item-removed")             /* an item of the list dropped */                            \
    X(RF_WIDENS_DELAY_WINDOW, "delay-window")             /* a retry's delay window starts earlier or spreads less */  \
    X(RF_WIDENS_RETRYABLE, "retryable")                   /* a failure class becomes retryable */                      \
    X(RF_WIDENS_OWN_METHOD, "own-method")                 /* the route's own method no longer needs a key */           \
    X(RF_WIDENS_CLASS_ATTEMPTS, "class-attempts")         /* a class gets more attempts */                             \
    X(RF_WIDENS_REQUESTS, "requests")                     /* some request reaches a route that gives it more */        \
    X(RF_WIDENS_HEDGES, "hedges")                         /* a request gets more hedged attempts, or sooner */         \
    X(RF_WIDENS_FIELDS, "fields")                         /* judged field by field (its rows) */                       \
    X(RF_WIDENS_NEVER, "never")                           /* no change of it widens (a renamed {param} is neutral) */

typedef enum rf_field_type { RF_FIELD_TYPES(RF_X_ENUM2) RF_FIELD_TYPE_COUNT } rf_field_type;
typedef enum rf_field_place { RF_FIELD_PLACES(RF_X_ENUM2) RF_FIELD_PLACE_COUNT } rf_field_place;
typedef enum rf_field_default { RF_FIELD_DEFAULTS(RF_X_ENUM2) RF_FIELD_DEFAULT_COUNT } rf_field_default;
typedef enum rf_field_canonical { RF_FIELD_CANONICAL(RF_X_ENUM2) RF_FIELD_CANONICAL_COUNT } rf_field_canonical;
typedef enum rf_field_widens { RF_FIELD_WIDENINGS(RF_X_ENUM2) RF_FIELD_WIDENS_COUNT } rf_field_widens;

/* One row of the schema. Rows come in docs/lock.md's order: an object's rows right after it. */
typedef struct rf_lock_field {
    const char *path;           /* from its place: "maxAttempts", "backoff.baseMs", "gate.maxRetriedSuccess" */
    const char *key;            /* its key in its object: the last part of path ("baseMs") */
    long parent;                /* the row of the object that holds it, -1 at its place's top level */
    rf_field_place place;       /* where it may be written */
    rf_field_type type;         /* what it holds */
    int64_t min, max;           /* its bounds (see RF_FIELD_TYPES) */
    rf_field_default if_absent; /* what its absence means */
    const char *default_json;   /* the default (or, for RF_DEFAULT_NONE, what absence counts as) as JSON; NULL: none */
    rf_field_canonical canonical; /* how the canonical form writes it */
    rf_field_widens widens;       /* which change widens */
    const char *view;             /* its key in the Lua views (policy:routes(), policy.gate): "backoff.base_ms" */
    const char *about;            /* what it means, in a few words (docs/lock.md, the CLI's --help); NULL: none */
} rf_lock_field;

/* The number of rows. */
RF_API size_t rf_lock_schema_count(void);

/* Row i (0-based, i < rf_lock_schema_count()), a static row never freed; NULL when i is out of range. Thread-safe. */
RF_API const rf_lock_field *rf_lock_schema_field(size_t i);

/* The row whose path is path ("backoff.baseMs"), or -1. */
RF_API long rf_lock_schema_find(const char *path);

/*
 * Checks value as the loader checks field i's value in a lock: for an integer or decimal row, the same range, the
 * same whole-number or 3-decimal-place rule and the same message (err->path is the field's JSON path,
 * "$.gate.maxRetriedSuccess"), so that a threshold given elsewhere (the CLI) means the same. RF_OK, or RF_EINVAL
 * with err; RF_EINVAL without err for an i out of range or a row of another type.
 */
RF_API rf_status rf_lock_field_check(size_t i, double value, rf_error *err);

/* The value of one field in a loaded policy (rf_policy_field). Pointers are owned by the policy. */
typedef struct rf_field_value {
    bool present;             /* false: absent (RF_DEFAULT_NONE, or inside an absent object) */
    int64_t number;           /* integer; decimal × 1000; boolean 0 or 1; routes and lists: the count */
    const char *text;         /* endpoint, jitter, name, header */
    size_t n;                 /* lists, class-limits: the number of items */
    const char *const *items; /* lists: the canonical strings (classes sorted, aliases expanded); class-limits:
                                 the classes, sorted */
    const int *limits;        /* class-limits: the limit of items[k] */
} rf_field_value;

/*
 * Fills *out with field i of the effective policy: for a route's field, of route `route` (rf_policy_route's order);
 * for the lock's, `route` is ignored. RF_EINVAL (no rf_error) for a NULL argument, an i or route out of range.
 * No allocation; thread-safe.
 */
RF_API rf_status rf_policy_field(const rf_policy *p, size_t route, size_t i, rf_field_value *out);

#ifdef __cplusplus
}
#endif
#endif
