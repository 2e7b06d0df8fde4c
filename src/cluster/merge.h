/* merge.h — `dflash-bench merge OUT DIR...`: one results directory from the directories of a
 * sharded sweep (shard.h), or of any runs of the same sweep.
 *
 * Checks, each a refusal (DB_EINPUT, exit 2) naming the directory and the problem, with nothing
 * written:
 *   - every DIR has a meta.json with the recorded sweep, and every sweep hash (shard.h) is the
 *     same (the differing keys are named); a recorded shard.sweep_hash matches its own sweep;
 *   - every table has the same header in every DIR (one schema) and the same schema_version;
 *   - torn files: points.done or a table whose last record is cut short, a record whose field
 *     count differs from the header, a row of a point points.done does not list (a run killed
 *     or still going: `run --resume DIR` cleans it up), a completed point without its summary
 *     row, a row of acceptance.csv (point, position), histogram.csv (point, accept_length) or
 *     requests.csv (point, prompt_index, repetition) twice;
 *   - a merged directory as input (its rows have their host column already);
 *   - no point completed in two directories, no point outside the sweep's partition.
 * Missing points: the shard partition recorded in meta.json lists every point of the sweep;
 * points no DIR completed are named and the merge fails with DB_ERUNTIME (exit 1) unless
 * allow_partial. Without any shard record the points present are the sweep.
 *
 * Output: OUT (absent, or an empty directory) is written as a temporary sibling directory and
 * renamed into place, so it is whole or absent. The four tables hold the union of the rows, in
 * the sweep's point order (directory order without a partition), each row with one more column
 * last, `host`: the machine.hostname of the meta.json of the directory it came from.
 * points.done lists the points in the same order; meta.json holds the sweep, its hash, the
 * missing points and per source directory its path, host, shard and whole meta.json. */
#ifndef DB_MERGE_H
#define DB_MERGE_H

#include <stddef.h>

typedef struct {
    int points, missing, sources;
} db_merge_result;

int db_merge(const char *out, char *const *dirs, int n, int allow_partial, db_merge_result *res, char *err,
             size_t errlen);

#endif
