/* drafter_set.h — the drafters a sweep runs: one per distinct checkpoint its variants name
 * (sweep.h db_sweep_drafter: `dflash` on a DFlash 1 checkpoint, the DFlash 2 variants on a
 * DFlash 2 one), each loaded once and shared by every point that runs it.
 *
 * Notation: a slot is one checkpoint (its directory, or with synthetic weights the config
 * that stands for it), its config, the loaded drafter and the largest block size drafted with
 * it. */
#ifndef DB_DRAFTER_SET_H
#define DB_DRAFTER_SET_H

#include "bench/sweep.h"
#include "model/drafter.h"
#include "model/synthetic.h"
#include "model/target.h"

typedef struct {
    char path[1024];          /* checkpoint directory, or (synthetic) its config */
    db_drafter_config cfg;    /* read before any weight loads */
    db_drafter d;
    int loaded;
    int maxb;                 /* largest block size of a point that runs it */
} db_drafter_slot;

typedef struct {
    db_drafter_slot slot[DB_SWEEP_VARIANTS];
    int n;
} db_drafter_set;

/* the slots of keys[n] and their configs (checked against each variant's checkpoint kind) */
int db_drafter_set_plan(db_drafter_set *ds, const db_sweep *sw, const db_point_key *keys, int n,
                        int target_layers, char *err, size_t errlen);
/* the slot index of point k, -1 for none */
int db_drafter_set_of(const db_drafter_set *ds, const db_sweep *sw, const db_point_key *k);
/* load every slot onto be for target; checks each point's variant against the loaded tensors
 * and its block size against the checkpoint's block_size */
int db_drafter_set_load(db_drafter_set *ds, const db_sweep *sw, const db_point_key *keys, int n,
                        db_backend *be, const db_target *target, const db_synth_opts *syn,
                        char *err, size_t errlen);
void db_drafter_set_free(db_drafter_set *ds);

#endif
