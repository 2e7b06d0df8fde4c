/* drafter_set.c — see drafter_set.h. */
#include "bench/drafter_set.h"
#include "base/util.h"
#include "engine/variant.h"

#include <stdio.h>
#include <string.h>

/* the checkpoint the point k runs ("" for `ar`); synthetic weights with drafter_config take
 * that config for every variant */
static const char *db_drafter_set_path(const db_sweep *sw, const db_point_key *k)
{
    const char *p = db_sweep_drafter(sw, k->variant, k->drafter_i);
    return p[0] && sw->synthetic && sw->drafter_config[0] ? sw->drafter_config : p;
}

int db_drafter_set_of(const db_drafter_set *ds, const db_sweep *sw, const db_point_key *k)
{
    const char *p = db_drafter_set_path(sw, k);
    for (int i = 0; p[0] && i < ds->n; i++)
        if (!strcmp(ds->slot[i].path, p)) return i;
    return -1;
}

int db_drafter_set_plan(db_drafter_set *ds, const db_sweep *sw, const db_point_key *keys, int n,
                        int target_layers, char *err, size_t errlen)
{
    memset(ds, 0, sizeof *ds);
    for (int i = 0; i < n; i++) {
        const char *p = db_drafter_set_path(sw, &keys[i]);
        if (!p[0]) continue;
        int s = db_drafter_set_of(ds, sw, &keys[i]);
        if (s < 0) {
            if (ds->n == DB_SWEEP_VARIANTS) return db_fail(err, errlen, DB_EINPUT, "too many drafters");
            s = ds->n++;
            snprintf(ds->slot[s].path, sizeof ds->slot[s].path, "%s", p);
            int rc = db_drafter_config_load(&ds->slot[s].cfg, p, target_layers, err, errlen);
            if (rc) return rc;
        }
        db_drafter_slot *sl = &ds->slot[s];
        if (keys[i].block_size > sl->maxb) sl->maxb = keys[i].block_size;
        db_variant v;
        if (db_variant_parse(keys[i].variant, &v) == 0) {
            int rc = db_variant_check_kind(v, sl->cfg.kind, p, err, errlen);
            if (rc) return rc;
        }
    }
    return DB_OK;
}

int db_drafter_set_load(db_drafter_set *ds, const db_sweep *sw, const db_point_key *keys, int n,
                        db_backend *be, const db_target *target, const db_synth_opts *syn,
                        char *err, size_t errlen)
{
    int rc = DB_OK;
    for (int s = 0; s < ds->n && !rc; s++) {
        db_drafter_slot *sl = &ds->slot[s];
        rc = db_drafter_load_ex(&sl->d, be, sl->path, target, syn, err, errlen);
        sl->loaded = rc == DB_OK;
        if (!rc && sl->maxb > sl->d.cfg.block_size)
            rc = db_fail(err, errlen, DB_EINPUT, "block size %d above the drafter's block_size %d (%s)", sl->maxb,
                         sl->d.cfg.block_size, sl->d.cfg.base.path);
    }
    for (int i = 0; i < n && !rc; i++) {
        int s = db_drafter_set_of(ds, sw, &keys[i]);
        db_variant v;
        if (s >= 0 && db_variant_parse(keys[i].variant, &v) == 0) rc = db_variant_check(v, &ds->slot[s].d, err, errlen);
    }
    return rc;
}

void db_drafter_set_free(db_drafter_set *ds)
{
    for (int s = 0; s < ds->n; s++)
        if (ds->slot[s].loaded) db_drafter_free(&ds->slot[s].d);
    memset(ds, 0, sizeof *ds);
}
