/* paths.h — where the project's files are, so the binary runs from any directory: the data
 * (models/, datasets/, configs/) and the default results directory. Every default path of the
 * CLI goes through these two functions.
 *
 * Data. A path like "models/tiny-qwen3", "datasets/math.jsonl" or "configs/profiles/x.csv" is
 * used as it is when it exists (absolute, or relative to the current directory); otherwise it
 * is looked up under the first data root that holds it:
 *   1. $DFLASH_BENCH_DATA                  a directory holding models/ datasets/ configs/
 *   2. <executable's dir>/DB_DATADIR_REL   an install: bin/../share/dflash-bench
 *   3. <executable's dir> or one of its 3 parents, the first holding configs/default.ini:
 *      a build tree (build/dflash-bench and build/tests/test-x find the source root)
 *   4. for an executable inside the build directory it was built in (DB_BUILD_DIR), the source
 *      tree that build was configured from (DB_SOURCE_DIR, while it holds configs/default.ini):
 *      a build directory outside the tree (meson setup ../build). Not for an installed binary,
 *      nor one copied elsewhere.
 *
 * Results. --out DIR when given; else results/<UTC time>[-label] under the current directory,
 * or, when the current directory is not writable (`cd / && dflash-bench run` as a user), under
 * $XDG_DATA_HOME/dflash-bench (default ~/.local/share/dflash-bench). */
#ifndef DB_PATHS_H
#define DB_PATHS_H

#include <stddef.h>

/* out = the path to use for `path`; DB_EINPUT naming the path and the places searched when
 * none holds it (out = path then, so a caller may still report its own error) */
int db_data_path(const char *path, char *out, size_t n, char *err, size_t errlen);

/* the same for a path given by the user: buf when found through a data root, else path
 * itself (NULL stays NULL), so the caller's loader reports a missing file as usual */
const char *db_data_find(const char *path, char *buf, size_t n);

/* the directory that holds the default results directories ("results" or the XDG one) */
int db_results_base(char *out, size_t n);

#endif
