/* cli_run_resume.h — what `run` checks before it writes into a results directory it did not
 * just create: the directory's lock and recorded sweep (--resume), the recorded shard, and the
 * inputs (datasets, checkpoints) meta.json records, which must hash the same when it resumes.
 * It joins the sweep record (bench), the results directory (report) and the shard (cluster),
 * so it sits in cli beside cli_run.c. */
#ifndef DB_CLI_RUN_RESUME_H
#define DB_CLI_RUN_RESUME_H

#include "bench/sweep.h"
#include "cluster/shard.h"
#include "result/run_meta.h"

#include <stddef.h>

/* --resume DIR: refused (DB_EINPUT, nothing written) unless DIR holds this tool's results (a
 * meta.json or a points.done); then DIR's lock taken before DIR is read (*lock_fd; a second resume of it, as a
 * requeued job, exits 2 naming the holder), then the sweep DIR/meta.json records into *rec
 * (*have_rec). A directory whose meta.json records no sweep is resumed with the flags given
 * only when points.done lists no point. */
int db_run_resume_begin(const char *dir, int *lock_fd, db_sweep *rec, int *have_rec, char *err,
                        size_t errlen);
/* the shard to run: --shard K/N (shard_arg, may be NULL), or the one a resumed directory
 * records; both given must agree */
int db_run_resume_shard(const char *shard_arg, const char *resume, db_shard *shard, char *err,
                        size_t errlen);
/* meta.json's inputs: the sweep's dataset files (hashed here) and the checkpoints m lists
 * (hashed as models), each as given, with its absolute path and sha256 */
int db_run_inputs_record(db_run_meta *m, const db_sweep *sw, char *err, size_t errlen);
/* --resume: every input DIR/meta.json recorded (an older run's records none) must hash the
 * same now, or the directory would mix results of different files (DB_EINPUT naming it);
 * allow_changed turns that into a warning */
int db_run_inputs_check(const db_run_meta *m, const char *dir, int allow_changed, char *err,
                        size_t errlen);

#endif
