/*
 * The lock schema's rows (lock_schema.c) with what only the engine needs: where each value lives. The loader
 * (lock_load.c, lock_fields.c), the canonical form (lock_canonical.c) and rf_policy_field read a field through its
 * row, so that a field is written once: its row, the engine code that uses its value, and its line in docs/lock.md.
 */
#ifndef RETRYFREEZE_LOCK_SCHEMA_INTERNAL_H
#define RETRYFREEZE_LOCK_SCHEMA_INTERNAL_H

#include "internal.h"
#include "retryfreeze/lock_schema.h"

struct cJSON;

/* The rows by name, in the table's order: docs/lock.md's, an object's rows right after it. The refusals' "allowed
 * here" lists name the keys in this order. */
typedef enum rfi_field_id {
    RFI_F_VERSION,
    RFI_F_DEFAULTS,
    RFI_F_ROUTES,
    RFI_F_RETRY_BUDGET,
    RFI_F_BUDGET_MAX_TOKENS,
    RFI_F_BUDGET_TOKEN_RATIO,
    RFI_F_BUDGET_RETRY_RATIO,
    RFI_F_BUDGET_MIN_PER_SECOND,
    RFI_F_BUDGET_TTL,
    RFI_F_BUDGET_SHARED,
    RFI_F_BUDGET_SHARED_NAME,
    RFI_F_GATE,
    RFI_F_GATE_MAX_RETRIED_SUCCESS,
    RFI_F_GATE_MAX_ATTEMPTS_PER_SUCCESS,
    RFI_F_GATE_MAX_TERMINAL_RATE,
    RFI_F_GATE_MAX_RETRY_RATIO,
    RFI_F_GATE_MIN_SUCCESS_RATE,
    RFI_F_GATE_MIN_SUCCESSES,
    RFI_F_GATE_FORBID_REASONS,
    RFI_F_TRANSPARENT_RETRY,
    RFI_F_ENDPOINT,
    RFI_F_MAX_ATTEMPTS,
    RFI_F_PER_ATTEMPT_TIMEOUT,
    RFI_F_TOTAL_BUDGET,
    RFI_F_MIN_ATTEMPT,
    RFI_F_RETRYABLE,
    RFI_F_NOT_RETRYABLE,
    RFI_F_IDEMPOTENCY_REQUIRED,
    RFI_F_BACKOFF,
    RFI_F_BACKOFF_BASE,
    RFI_F_BACKOFF_MULTIPLIER,
    RFI_F_BACKOFF_MAX,
    RFI_F_BACKOFF_JITTER,
    RFI_F_RETRY_AFTER,
    RFI_F_RETRY_AFTER_HONOR,
    RFI_F_RETRY_AFTER_MAX,
    RFI_F_RETRY_AFTER_HEADERS,
    RFI_F_CLASS_LIMITS,
    RFI_F_HEDGING,
    RFI_F_HEDGING_MAX_ATTEMPTS,
    RFI_F_HEDGING_DELAY,
    RFI_F_HEDGING_NON_FATAL,
    RFI_F_PROPAGATION,
    RFI_F_PROPAGATION_ATTEMPT_HEADER,
    RFI_F_PROPAGATION_DEADLINE_HEADER,
    RFI_F_PROPAGATION_OVERLOADED_HEADER,
    RFI_F_PROPAGATION_INBOUND_DEADLINE,
    RFI_F_PROPAGATION_INBOUND_ATTEMPT,
    RFI_FIELD_COUNT
} rfi_field_id;

/* Which fields are set: bit i for row i (a route's spec while it loads, rf_policy.has for the lock's fields). */
typedef uint64_t rfi_field_set;
_Static_assert(RFI_FIELD_COUNT <= 64, "rfi_field_set has a bit per row");
#define RFI_BIT(id) ((rfi_field_set)1 << (id))

typedef struct rfi_field {
    rf_lock_field pub;
    /* The value in its holder (rfi_route for a route's field, rf_policy for the lock's): the bytes a route inherits
     * from defaults and that are compared with the default (RF_CANON_UNLESS_DEFAULT). */
    size_t at, size;
    /* A list's view, built at load: its count (a size_t) and its items (const char *[]) in the holder, or with
     * items_ref a pointer to them (a route's class lists lie in the policy's view block: policy.c). */
    size_t n_at, items_at;
    bool items_ref;
    /* 1 + the offset of a bool in the holder the loader sets with the field (rf_gate_view's has_*, a route's
     * has_hedging); 0: none. A route's row with one (or inside an object with one) is present only when it is set. */
    size_t has_at;
    /* An object's shape, as its refusal names it ("of gate thresholds"); NULL: "{its required rows}", or
     * "{its rows}" when none is required. */
    const char *shape;
    /* The refusal of the field written in a route (it is not a route's); NULL: an unknown key there. */
    const char *in_route;
    /* The canonical form writes it after its object's other keys (which it sorts), as it did before they were
     * sorted: a signed digest must not change. */
    bool canonical_last;
    /* A rule of this field alone, checked once it is read (an object's: once its members are, and it may fill in
     * their defaults); NULL: none. */
    bool (*check)(void *holder, const char *path, rf_error *err);
} rfi_field;

extern const rfi_field rfi_lock_fields[RFI_FIELD_COUNT];

/* The row's key in its object ("baseMs"). */
static inline const char *rfi_field_key(const rfi_field *f) { return f->pub.key; }

/* Whether row i is set in the policy (holder: the route, for a route's field). A lock's field is set when the lock
 * (or a default) sets it; a route's field always is (required, or defaulted), unless it or an object holding it is an
 * optional one the route leaves out (a row with has_at whose bool is false: hedging, propagation). */
static inline bool rfi_field_present(const rf_policy *p, const void *holder, size_t i) {
    if (rfi_lock_fields[i].pub.place != RF_PLACE_ROUTE) return (p->has & RFI_BIT(i)) != 0;
    for (long k = (long)i; k >= 0; k = rfi_lock_fields[k].pub.parent) {
        const size_t has_at = rfi_lock_fields[k].has_at;
        if (has_at != 0 && !*((const bool *)(const void *)((const char *)holder + has_at - 1))) return false;
    }
    return true;
}

/* The holder's value of row f (holder + f->at). */
static inline void *rfi_field_value(void *holder, const rfi_field *f) { return (char *)holder + f->at; }

/* The items of list row f's view in holder (built at load), and their count in *n. */
static inline const char *const *rfi_field_items(const void *holder, const rfi_field *f, size_t *n) {
    const char *h = holder;
    const char *const *items;
    memcpy(n, h + f->n_at, sizeof *n);
    if (f->items_ref)
        memcpy(&items, h + f->items_at, sizeof items);
    else
        items = (const char *const *)(const void *)(h + f->items_at);
    return items;
}

/* Reading a lock's fields (lock_fields.c). */

/* What reading needs: the route spec's holder and set bits, and the policy (for the lock's fields). */
typedef struct rfi_read_ctx {
    rfi_route *route;
    rfi_field_set *route_has;
    rf_policy *lock;
} rfi_read_ctx;

/*
 * Reads member c (at path) as row f's value into its holder and marks it set: the row's type and range, its own
 * rule, and for an object its members (an unknown key is refused with the keys allowed there, a missing required
 * one with its path). A null for a RF_CANON_NULL_WHEN_NONE row leaves it absent. False with err on a refusal.
 */
bool rfi_field_read(const rfi_field *f, const struct cJSON *c, const char *path, const rfi_read_ctx *ctx,
                    rf_error *err);

/* Reads row f's default_json as its value (at path, for a refusal: a bug in the table) and marks it set. RF_OK,
 * RF_ENOMEM, or RF_EINVAL with err. */
rf_status rfi_field_default(const rfi_field *f, const char *path, const rfi_read_ctx *ctx, rf_error *err);

/* The row of member key at the top of a place set (parent -1; places: bits 1 << rf_field_place) or in the object
 * of row `parent`; -1 when none. */
long rfi_field_find(long parent, unsigned places, const char *key);

/* Refuses member c at path as a key not allowed there: "unknown key … (allowed here: …)", the keys of the object
 * of row `parent`, or of the places' top level (a flat lock also names the multi-route keys), and "did you mean". */
bool rfi_field_unknown(const struct cJSON *c, const char *path, long parent, unsigned places, rf_error *err);

/* A "$comment" member must be a string. */
bool rfi_field_comment(const struct cJSON *c, const char *path, rf_error *err);

/* The canonical form (lock_canonical.c). */

/* The lock's defaults, read from the rows' default_json at each load (by the readers of the lock's own values, so
 * a default is never a value the loader would refuse): a route's and the lock's. */
typedef struct rfi_lock_defaults {
    rfi_route route;
    rfi_field_set route_has;
    rf_policy lock;
} rfi_lock_defaults;

/* Fills d (zeroed first). RF_ENOMEM, or RF_EINVAL for a default its own reader refuses (a bug in the table). */
rf_status rfi_lock_defaults_read(rfi_lock_defaults *d, rf_error *err);

/* Writes p's canonical JSON (the digest's input), its pretty form and its digest; d: the defaults it was loaded with
 * (RF_CANON_UNLESS_DEFAULT). */
rf_status rfi_policy_canonical(rf_policy *p, const rfi_lock_defaults *d, rf_error *err);

#endif
