/* prompt.h — one turn of a dataset sample as the token ids a model is prompted with: the
 * conversation so far (user turns 0..turn, with the model's earlier answers in between) through
 * a chat template (chat_template.h), encoded with special tokens recognised.
 *
 * A single prompt string (generate --prompt TEXT) is a sample of one turn:
 *     char *turns[] = {text};
 *     db_sample s = {.turns = turns, .n_turns = 1};
 *     db_prompt_render(&tok, DB_CHAT_AUTO, 0, &s, 0, NULL, &ids, &n, err, errlen); */
#ifndef DB_PROMPT_H
#define DB_PROMPT_H

#include <stddef.h>

#include "text/chat_template.h"
#include "text/dataset.h"
#include "text/tokenizer.h"

/* The text of turn `turn` (0-based, < s->n_turns) of sample s: previous_answers[k] is the
 * model's decoded answer to turn k, for k < turn (NULL allowed when turn == 0). tmpl
 * DB_CHAT_AUTO is resolved with db_chat_template_detect(tok, NULL). thinking: 1 on, 0 off
 * (chatml only: off adds the empty <think> block). *text is malloc'd, NUL-terminated. */
int db_prompt_text(const db_tokenizer *tok, db_chat_template tmpl, int thinking, const db_sample *s,
                   int turn, const char *const *previous_answers, char **text, size_t *len, char *err,
                   size_t errlen);

/* The same, encoded (allow_special = 1): *ids malloc'd, *n ids. */
int db_prompt_render(const db_tokenizer *tok, db_chat_template tmpl, int thinking, const db_sample *s,
                     int turn, const char *const *previous_answers, int **ids, int *n, char *err,
                     size_t errlen);

#endif
