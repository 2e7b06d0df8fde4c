/* model_test.h — what of the model loaders only the tests use: a checkpoint loaded without the
 * synthetic options (db_target_load_ex / db_drafter_load_ex with syn NULL, which the engine's
 * session calls). Not part of the models' interface; target.c and drafter.c implement them. */
#ifndef DB_MODEL_TEST_H
#define DB_MODEL_TEST_H

#include "model/drafter.h"
#include "model/target.h"

int db_target_load(db_target *t, db_backend *be, const char *dir, char *err, size_t errlen);
int db_drafter_load(db_drafter *d, db_backend *be, const char *dir, const db_target *target,
                    char *err, size_t errlen);

#endif
