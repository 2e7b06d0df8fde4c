/* decode.h — plain autoregressive decoding with the target alone (the `ar` baseline and the
 * reference the speculative cycle must reproduce token for token when greedy). */
#ifndef DB_DECODE_H
#define DB_DECODE_H

#include "model/target.h"

/* Prefill prompt[0..n) into `slot` in chunks of the target's max_rows; on return the target's
 * s.logits[0] holds the last prompt row's logits. */
int db_prefill(db_target *t, int slot, const int *prompt, int n, char *err, size_t errlen);

/* Greedy decode up to max_new tokens into out (capacity max_new); stops after an EOS token,
 * which is included. *n_out = tokens written. */
int db_decode_greedy(db_target *t, int slot, const int *prompt, int n_prompt, int max_new,
                     int *out, int *n_out, char *err, size_t errlen);

/* Parse "1,2,3" (commas and/or whitespace) into a malloc'd array. */
int db_parse_ids(const char *s, int **ids, int *n, char *err, size_t errlen);

#endif
