/* variant.c — the variant table of variant.h and its lookups. */
#include "engine/variant.h"
#include "base/util.h"

#include <stdio.h>
#include <string.h>

#define DB_VARIANT_ROW_(e, name, needs, conv, sel, dflt, meaning) {name, needs, conv, sel, dflt, meaning},
const db_variant_info db_variant_table[DB_VAR_COUNT] = {DB_VARIANTS(DB_VARIANT_ROW_)};

int db_variant_parse(const char *s, db_variant *v)
{
    for (int i = 0; i < DB_VAR_COUNT; i++)
        if (strcmp(s, db_variant_table[i].name) == 0) {
            *v = (db_variant)i;
            return 0;
        }
    return -1;
}

db_variant db_variant_lookup(const char *s)
{
    db_variant v;
    return db_variant_parse(s, &v) == 0 ? v : DB_VAR_COUNT;
}

static int known(db_variant v) { return (unsigned)v < DB_VAR_COUNT; }

const char *db_variant_name(db_variant v) { return known(v) ? db_variant_table[v].name : "?"; }
int db_variant_is_baseline(db_variant v)
{
    return known(v) && db_variant_table[v].needs == DB_NEEDS_NOTHING;
}
int db_variant_uses_drafter(db_variant v)
{
    return known(v) && db_variant_table[v].needs != DB_NEEDS_NOTHING;
}
int db_variant_uses_conv(db_variant v) { return known(v) && db_variant_table[v].conv; }
int db_variant_uses_selector(db_variant v) { return known(v) && db_variant_table[v].selector; }
int db_variant_uses_markov(db_variant v) { return known(v) && db_variant_table[v].needs == DB_NEEDS_DSPARK; }
int db_variant_uses_chain(db_variant v)
{
    return known(v) && (db_variant_table[v].needs == DB_NEEDS_EAGLE3 || db_variant_table[v].needs == DB_NEEDS_MTP);
}

static int fits_kind(db_variant v, db_drafter_kind kind)
{
    switch (known(v) ? db_variant_table[v].needs : DB_NEEDS_NOTHING) {
    case DB_NEEDS_DRAFTER: return 1;
    case DB_NEEDS_DFLASH1: return kind == DB_DRAFTER_V1;
    case DB_NEEDS_DFLASH2: return kind == DB_DRAFTER_V2;
    case DB_NEEDS_DSPARK: return kind == DB_DRAFTER_DSPARK;
    case DB_NEEDS_EAGLE3: return kind == DB_DRAFTER_EAGLE3;
    case DB_NEEDS_MTP: return kind == DB_DRAFTER_MTP;
    default: return 0;
    }
}

int db_variant_check_kind(db_variant v, db_drafter_kind kind, const char *path, char *err,
                          size_t errlen)
{
    if (!db_variant_uses_drafter(v) || fits_kind(v, kind)) return DB_OK;
    static const char *const kinds[] = {"?", "DFlash 1", "DFlash 2", "DSpark", "EAGLE-3", "MTP"};
    const char *need = db_variant_checkpoint(v), *an = need[0] == 'E' || need[0] == 'M' ? "an" : "a";
    return db_fail(err, errlen, DB_EINPUT, "variant %s needs %s %s checkpoint; %s is %s", db_variant_name(v), an,
                   need, path, kinds[kind >= 1 && kind <= 5 ? kind : 0]);
}

int db_variant_check(db_variant v, const db_drafter *d, char *err, size_t errlen)
{
    if (!db_variant_uses_drafter(v)) return DB_OK;
    const char *name = db_variant_name(v);
    if (!d) return db_fail(err, errlen, DB_EINPUT, "variant %s needs a drafter (--drafter DIR)", name);
    if (db_variant_uses_conv(v) && !d->has_conv)
        return db_fail(err, errlen, DB_EINPUT, "variant %s needs the DFlash 2 convolutions, but %s lacks tensor '%s'",
                       name, d->cfg.base.path, d->missing_conv);
    if (db_variant_uses_selector(v) && !d->has_selector)
        return db_fail(err, errlen, DB_EINPUT, "variant %s needs the path selector, but %s lacks tensor '%s'",
                       name, d->cfg.base.path, d->missing_selector);
    return db_variant_check_kind(v, d->cfg.kind, d->cfg.base.path, err, errlen);
}

const char *db_variant_checkpoint(db_variant v)
{
    static const char *const words[] = {"none", "DFlash 1 or 2", "DFlash 1", "DFlash 2", "DSpark", "EAGLE-3", "MTP"};
    return words[known(v) ? db_variant_table[v].needs : DB_NEEDS_NOTHING];
}

const char *db_variant_names(char *buf, size_t n, int drafter_only)
{
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < DB_VAR_COUNT; i++) {
        if (drafter_only && !db_variant_uses_drafter((db_variant)i)) continue;
        int w = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", db_variant_table[i].name);
        if (w < 0 || (size_t)w >= n - len) break;
        len += (size_t)w;
    }
    return buf;
}
