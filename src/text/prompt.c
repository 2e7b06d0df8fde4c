/* prompt.c — dataset sample + chat template + tokenizer -> prompt ids (see prompt.h). */
#include "text/prompt.h"
#include "base/util.h"

#include <stdlib.h>

int db_prompt_text(const db_tokenizer *tok, db_chat_template tmpl, int thinking, const db_sample *s,
                   int turn, const char *const *previous_answers, char **text, size_t *len, char *err,
                   size_t errlen)
{
    *text = NULL;
    if (!s || turn < 0 || turn >= s->n_turns)
        return db_fail(err, errlen, DB_EINPUT, "turn %d outside the sample's %d turns", turn, s ? s->n_turns : 0);
    if (turn > 0 && !previous_answers)
        return db_fail(err, errlen, DB_EINPUT, "turn %d needs the answers to the earlier turns", turn);
    if (tmpl == DB_CHAT_AUTO) tmpl = db_chat_template_detect(tok, NULL);
    db_chat_msg *msgs = db_malloc(sizeof *msgs * (size_t)(2 * turn + 1));
    if (!msgs) return db_fail(err, errlen, DB_ERUNTIME, "out of memory allocating the %d messages of turn %d", 2 * turn + 1, turn);
    int n = 0;
    for (int t = 0; t <= turn; t++) {
        msgs[n++] = (db_chat_msg){"user", s->turns[t]};
        if (t < turn) msgs[n++] = (db_chat_msg){"assistant", previous_answers[t] ? previous_answers[t] : ""};
    }
    int rc = db_chat_render(tmpl, msgs, n, 1, thinking, text, len, err, errlen);
    free(msgs);
    return rc;
}

int db_prompt_render(const db_tokenizer *tok, db_chat_template tmpl, int thinking, const db_sample *s,
                     int turn, const char *const *previous_answers, int **ids, int *n, char *err,
                     size_t errlen)
{
    *ids = NULL;
    *n = 0;
    char *text;
    size_t len;
    int rc = db_prompt_text(tok, tmpl, thinking, s, turn, previous_answers, &text, &len, err, errlen);
    if (rc) return rc;
    rc = db_tokenizer_encode(tok, text, len, 1, ids, n, err, errlen);
    free(text);
    return rc;
}
