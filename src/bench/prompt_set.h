/* prompt_set.h — the prompts a measurement runs: a dataset's samples rendered to first-turn ids
 * (a multi-turn sample's later turns are rendered during the pass, with the answers decoded so
 * far: runner.h), a file of token ids, or random ids. One random generator serves every command
 * (run's synthetic-N sets, plan's synthetic run, check-lossless's random prompts).
 *
 * Notation: n = prompts (samples), L = a prompt's length in tokens, V = the vocabulary size. */
#ifndef DB_PROMPT_SET_H
#define DB_PROMPT_SET_H

#include "text/chat_template.h"
#include "text/dataset.h"
#include "text/tokenizer.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char name[64];  /* the dataset as the sweep names it, synthetic-L, or what the caller chose */
    db_dataset ds;  /* the samples (random and id prompts: one empty turn each) */
    int **ids;      /* [ds.n][len[j]] first-turn prompt ids */
    int *len;       /* [ds.n] */
    int synthetic;  /* ids without text: one turn, no chat template */
    int random_vocab; /* random ids (db_prompt_set_random): their vocabulary; 0 otherwise */
    int depth;      /* every ids[j] starts with depth tokens of context (db_prompt_set_depth);
                     * a later turn gets the same ids[j][0, depth) before it:
                     * db_prompt_set_turn) */
} db_prompt_set;

/* n prompts of ids drawn uniformly from [0, V). Prompt j has its own stream, seeded from seed
 * and j, so the prompts are the same for every point and variant whatever n is; its length is
 * len, or with len_max > len first drawn from [len, len_max]. */
int db_prompt_set_random(db_prompt_set *ps, const char *name, int n, int len, int len_max, int vocab,
                         uint64_t seed, char *err, size_t errlen);
/* a dataset (text/dataset.h spec): up to max_samples samples in seed's order, first turns
 * through the chat template and the tokenizer; an id outside [0, vocab) is refused naming the
 * model (model_path) */
int db_prompt_set_dataset(db_prompt_set *ps, const char *spec, int max_samples, uint64_t seed,
                          const db_tokenizer *tok, db_chat_template tmpl, int thinking, int vocab,
                          const char *model_path, char *err, size_t errlen);
/* one prompt of token ids per non-empty line of path (commas or whitespace between ids) */
int db_prompt_set_ids_file(db_prompt_set *ps, const char *path, char *err, size_t errlen);
void db_prompt_set_free(db_prompt_set *ps);
/* Put `depth` tokens of context before every first turn of ps (once per set; depth 0 changes
 * nothing), so that a request runs at a context depth of real content (run --depth):
 * - a set of text samples: the other samples' first turns as plain text (no chat template, no
 *   special tokens), each followed by a blank line, in order from sample j+1 on, wrapping (and
 *   repeating when the set holds fewer than depth tokens; a set of one sample repeats itself),
 *   cut at depth tokens; then sample j's prompt, template and all;
 * - random ids (db_prompt_set_random): depth more random ids of sample j's own stream;
 * - ids from a file: the other prompts' ids concatenated, as for text.
 * tok is needed for text samples only; an id outside [0, vocab) is refused. */
int db_prompt_set_depth(db_prompt_set *ps, int depth, const db_tokenizer *tok, int vocab, uint64_t seed,
                        char *err, size_t errlen);
/* A tokenizer from `path`: a tokenizer.json, a directory holding one, or a GGUF model (file or
 * directory) whose tokenizer.ggml.* metadata stands in for it. */
int db_prompt_tokenizer_load(db_tokenizer *tok, const char *path, char *err, size_t errlen);

int db_prompt_set_turns(const db_prompt_set *ps);     /* requests per pass: every sample's turns */
int db_prompt_set_max_turns(const db_prompt_set *ps); /* the most turns of a sample, >= 1 */
int db_prompt_set_max_len(const db_prompt_set *ps);   /* the longest first turn, >= 1 */
/* Turn `turn` (>= 1) of sample j rendered with the answers of its earlier turns (text/prompt.h
 * db_prompt_render), behind the same depth tokens of context as its first turn: *ids (malloc'd,
 * the caller frees) and *n. */
int db_prompt_set_turn(const db_prompt_set *ps, const db_tokenizer *tok, db_chat_template tmpl, int thinking, int j,
                       int turn, const char *const *answers, int **ids, int *n, char *err, size_t errlen);
/* The longest prompt a pass surely reaches: the longest first turn, and each later turn rendered
 * with empty answers (real answers only add to it) after the set's context; *len. Sets of one
 * turn: db_prompt_set_max_len. */
int db_prompt_set_floor_len(const db_prompt_set *ps, const db_tokenizer *tok, db_chat_template tmpl, int thinking,
                            int *len, char *err, size_t errlen);
double db_prompt_set_mean_len(const db_prompt_set *ps); /* mean first-turn length (1 when empty) */

#endif
