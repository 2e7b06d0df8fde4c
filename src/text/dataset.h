/* dataset.h — prompt sets: JSONL files in the public benchmark formats, plain text, and the
 * built-in sets under datasets/.
 *
 * Formats, detected from the fields of the first record (every later record must have the
 * same field; a line that is not JSON or lacks it is DB_EINPUT naming file and line):
 *   gsm8k      {"question": ...}          MATH-500  {"problem": ...}
 *   humaneval  {"prompt": "def f(..."}    mbpp      {"text": ...} or {"prompt": ..., "test_list": [...]}
 *   mt-bench   {"turns": [t1, t2], "question_id"/"category": ...} or {"prompt": [t1, t2]} (HF H4)
 *   turns      {"turns": [...]}           (the z-lab harness cache: already formatted)
 *   text       a .txt file: one prompt per non-empty line
 * Turns are formatted as the z-lab dflash harness does: math (gsm8k, math-500) appends
 * "\nPlease reason step by step, and put your final answer within \boxed{}."; HumanEval becomes
 * "Write a solution to the following problem and make sure that it passes the tests:\n```python\n"
 * + prompt + "\n```"; MBPP, mt-bench and turns are used as they are. A sample is a list of user
 * turns: multi-turn sets (mt-bench) send turn k+1 after the model's answer to turn k.
 *
 * A dataset argument is a file path, or a built-in name (math, math-hard, code, code-basic, chat)
 * meaning datasets/<name>.jsonl, looked up as base/paths.h says: the current directory, then
 * $DFLASH_BENCH_DATA, an install's share/dflash-bench, the source tree of a build. A relative
 * path that is not there from the current directory is looked up the same way. */
#ifndef DB_DATASET_H
#define DB_DATASET_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    DB_DS_GSM8K,
    DB_DS_MATH500,
    DB_DS_HUMANEVAL,
    DB_DS_MBPP,
    DB_DS_MTBENCH,
    DB_DS_TURNS,
    DB_DS_TEXT
} db_dataset_format;

typedef struct {
    char **turns; /* formatted user turns, well-formed UTF-8; n_turns >= 1 */
    int n_turns;
    int line;     /* 1-based line in the source file */
} db_sample;

typedef struct {
    db_sample *samples;
    int n;
    db_dataset_format format;
    char name[64];    /* the built-in name, or the file name without directory and extension */
    char path[1024];  /* the file that was read */
} db_dataset;

extern const char *const db_dataset_builtins[]; /* NULL-terminated: "math", "math-hard", ... */

/* spec (a path or a built-in name, see above) -> the file to read */
int db_dataset_resolve(const char *spec, char *path, size_t n, char *err, size_t errlen);

/* Load spec. max_samples > 0: shuffle with db_rng seeded by `seed`, then keep the first
 * max_samples (the harness's shuffle-then-select); 0 keeps every sample in file order. */
int db_dataset_load(db_dataset *ds, const char *spec, int max_samples, uint64_t seed, char *err,
                    size_t errlen);
/* The same on a file's text (what db_dataset_load runs on the file it read): path names the file in
 * messages and gives the set's name and format (".txt": plain text); text[0..len] (its
 * terminator included) is split in place. */
int db_dataset_parse(db_dataset *ds, const char *path, char *text, size_t len, int max_samples, uint64_t seed,
                     char *err, size_t errlen);
void db_dataset_free(db_dataset *ds);

#endif
