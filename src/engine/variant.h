/* variant.h — the variants of the cycle, in one table: the checkpoint each needs and the parts
 * of the cycle it runs. The engine, the sweep parser, the CLI help (`run --help` prints the
 * table) and the README's variant table all read it; a test checks the README against it.
 *
 * Adding a variant is one line of DB_VARIANTS (the enum constant and the row come from it).
 * Columns: enum suffix, name, checkpoint it needs, two-tap convolutions on, path selector on,
 * in the default sweep, meaning. A variant without a drafter (needs DB_NEEDS_NOTHING) is the `ar`
 * baseline; one needing DB_NEEDS_DSPARK runs the DSpark sequential correction (dspark.h); one
 * needing DB_NEEDS_EAGLE3 or DB_NEEDS_MTP drafts by B-1 sequential drafter steps (chain.h). */
#ifndef DB_VARIANT_H
#define DB_VARIANT_H

#include "model/drafter.h"

#include <stddef.h>

typedef enum {
    DB_NEEDS_NOTHING, /* no drafter: the target alone */
    DB_NEEDS_DRAFTER, /* a DFlash 1 or DFlash 2 checkpoint */
    DB_NEEDS_DFLASH1, /* a DFlash 1 checkpoint */
    DB_NEEDS_DFLASH2, /* a DFlash 2 checkpoint */
    DB_NEEDS_DSPARK,  /* a DSpark checkpoint */
    DB_NEEDS_EAGLE3,  /* an EAGLE-3 checkpoint */
    DB_NEEDS_MTP,     /* an MTP head */
} db_variant_needs;

/* clang-format off */
#define DB_VARIANTS(X) \
    X(AR,           "ar",           DB_NEEDS_NOTHING, 0, 0, 1, "target alone, one token per step: the speedup baseline") \
    X(DFLASH,       "dflash",       DB_NEEDS_DFLASH1, 0, 0, 1, "DFlash 1: a v1 checkpoint, its own cycle (the DFlash 1 baseline)") \
    X(SELECTOR_OFF, "selector-off", DB_NEEDS_DFLASH2, 1, 0, 0, "DFlash 2 without the path selector") \
    X(CONV_OFF,     "conv-off",     DB_NEEDS_DFLASH2, 0, 1, 0, "DFlash 2 without the two-tap convolutions") \
    X(DFLASH2,      "dflash2",      DB_NEEDS_DFLASH2, 1, 1, 1, "full DFlash 2") \
    X(DFLASH2_BARE, "dflash2-bare", DB_NEEDS_DFLASH2, 0, 0, 0, "DFlash 2 checkpoint, convolutions and selector off (not DFlash 1)") \
    X(DSPARK,       "dspark",       DB_NEEDS_DSPARK,  0, 0, 1, "DSpark: a DFlash 1 drafter whose block positions are corrected one by one by the previous pick (low-rank Markov head)") \
    X(EAGLE3,       "eagle3",       DB_NEEDS_EAGLE3,  0, 0, 1, "EAGLE-3: an autoregressive drafter on three target taps, B-1 sequential steps per cycle (chain, top-1)") \
    X(MTP,          "mtp",          DB_NEEDS_MTP,     0, 0, 1, "MTP: a multi-token-prediction head on the target's last hidden, B-1 sequential steps per cycle (chain, top-1)")
/* clang-format on */

#define DB_VARIANT_ENUM_(e, ...) DB_VAR_##e,
typedef enum { DB_VARIANTS(DB_VARIANT_ENUM_) DB_VAR_COUNT } db_variant;

typedef struct {
    const char *name;
    db_variant_needs needs;
    int conv, selector; /* parts of the cycle it runs */
    int in_default;     /* in the default sweep's variant list */
    const char *meaning;
} db_variant_info;

extern const db_variant_info db_variant_table[DB_VAR_COUNT];

/* 0, or -1 for an unknown name */
int db_variant_parse(const char *s, db_variant *v);
/* the variant named s; DB_VAR_COUNT for an unknown name, for which every property below is 0 */
db_variant db_variant_lookup(const char *s);
const char *db_variant_name(db_variant v);
/* the baseline the speedups divide by (`ar`: no drafter) */
int db_variant_is_baseline(db_variant v);
int db_variant_uses_drafter(db_variant v);
int db_variant_uses_conv(db_variant v);
int db_variant_uses_selector(db_variant v);
/* the DSpark sequential correction (the variant needs a DSpark checkpoint) */
int db_variant_uses_markov(db_variant v);
/* chain drafting: one drafter step per drafted token (EAGLE-3, MTP) */
int db_variant_uses_chain(db_variant v);
/* DB_EINPUT naming the checkpoint kind v needs when a drafter of this kind (config at path) is
 * not it; checkable from the config alone, before any weight loads */
int db_variant_check_kind(db_variant v, db_drafter_kind kind, const char *path, char *err,
                          size_t errlen);
/* DB_EINPUT naming the missing tensor or checkpoint kind when the loaded drafter cannot run v */
int db_variant_check(db_variant v, const db_drafter *d, char *err, size_t errlen);
/* the checkpoint v needs, in words: "none", "DFlash 1 or 2", "DFlash 1", "DFlash 2", "DSpark",
 * "EAGLE-3", "MTP" */
const char *db_variant_checkpoint(db_variant v);
/* the names, comma separated ("ar, dflash, ..."); drafter_only leaves out `ar` */
const char *db_variant_names(char *buf, size_t n, int drafter_only);

#endif
