/* engine_test.h — hooks for the tests that must see a check fail: check-lossless's planted
 * mismatch (`--debug-plant-mismatch`, exercised by tests/cli_run.sh) and the sampling test's
 * deliberately wrong acceptance rule, and the host sampling path forced for comparison with the
 * device path (tests/test_gpu.c). Not part of the engine's interface: only those two include
 * this header and point db_gen_params.test_hooks at one of these. */
#ifndef DB_ENGINE_TEST_H
#define DB_ENGINE_TEST_H

#include "engine/engine.h"

struct db_engine_test_hooks {
    int plant_mismatch; /* > 0: corrupt the N-th committed token of request 0 (drafting variants) */
    int broken_accept;  /* sampling: accept every draft whatever p and q say (host path) */
    int host_path;      /* sampling on the host even where the backend has the sample / accept
                         * ops: the reference the device path is compared with */
};

#endif
