/* engine_test.h — hooks for the tests that must see a check fail: check-lossless's planted
 * mismatch (its hidden `--debug-plant-mismatch`, exercised by tests/cli_run.sh), the sampling
 * test's deliberately wrong acceptance rule, a NaN planted in the logits of a chosen call (the
 * non-finite checks past the prefill, tests/test_gpu.c), and the host sampling path forced for
 * comparison with the device path (tests/test_gpu.c). Not part of the engine's interface
 * (engine.h knows nothing of them): only cli_check.c and those tests include this header. */
#ifndef DB_ENGINE_TEST_H
#define DB_ENGINE_TEST_H

#include "engine/engine.h"

struct db_engine_test_hooks {
    int plant_mismatch; /* > 0: corrupt the N-th committed token of request 0 (drafting variants) */
    int broken_accept;  /* sampling: accept every draft whatever p and q say (host path) */
    int host_path;      /* sampling on the host even where the backend has the sample / accept
                         * ops: the reference the device path is compared with */
    int nan_target_call;  /* > 0: one logit (the middle one) of the last logits row of the N-th
                           * target call set to NaN, through the backend's upload */
    int nan_drafter_call; /* > 0: the same in the N-th drafter call's logits */
};

/* The hooks of the engines db_engine_create makes from now on in this process: each engine
 * copies them once, when it is created (NULL: none, the default). Set them before creating the
 * engine, from one thread. */
void db_engine_set_test_hooks(const struct db_engine_test_hooks *h);

#endif
