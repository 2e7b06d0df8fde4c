/* decode.c — autoregressive decoding (see decode.h). */
#include "model/decode.h"
#include "base/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

int db_prefill(db_target *t, int slot, const int *prompt, int n, char *err, size_t errlen)
{
    if (n < 1) return db_fail(err, errlen, DB_EINPUT, "empty prompt");
    db_row *rows = db_malloc(sizeof *rows * (size_t)t->max_rows);
    if (!rows) return db_fail(err, errlen, DB_ERUNTIME, "out of memory");
    int rc = DB_OK, start = t->kv.len[slot];
    for (int i = 0; i < n && rc == DB_OK; i += t->max_rows) {
        int m = n - i < t->max_rows ? n - i : t->max_rows;
        for (int r = 0; r < m; r++) rows[r] = (db_row){slot, start + i + r, prompt[i + r]};
        int last = m - 1;
        rc = db_target_forward(t, rows, m, &last, i + m == n ? 1 : 0, err, errlen);
    }
    free(rows);
    return rc;
}

int db_decode_greedy(db_target *t, int slot, const int *prompt, int n_prompt, int max_new,
                     int *out, int *n_out, char *err, size_t errlen)
{
    *n_out = 0;
    int rc = db_prefill(t, slot, prompt, n_prompt, err, errlen);
    db_backend *be = t->be;
    while (rc == DB_OK && *n_out < max_new) {
        int tok;
        if (be->ops->topk(be, &tok, NULL, t->s.logits, 1, t->cfg.vocab, 1) != 0)
            return db_fail(err, errlen, DB_ERUNTIME, "%s", be->err);
        out[(*n_out)++] = tok;
        if (db_target_is_eos(t, tok) || *n_out == max_new) break;
        db_row row = {slot, t->kv.len[slot], tok};
        int zero = 0;
        rc = db_target_forward(t, &row, 1, &zero, 1, err, errlen);
    }
    return rc;
}

int db_parse_ids(const char *s, int **ids, int *n, char *err, size_t errlen)
{
    int cap = 16;
    *n = 0;
    *ids = db_malloc(sizeof(int) * (size_t)cap);
    if (!*ids) return db_fail(err, errlen, DB_ERUNTIME, "out of memory");
    const char *p = s;
    for (;;) {
        while (*p && (isspace((unsigned char)*p) || *p == ',')) p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > 0x7fffffff) {
            free(*ids);
            *ids = NULL;
            return db_fail(err, errlen, DB_EINPUT, "token id list: bad entry near '%.16s'", p);
        }
        if (*n == cap) {
            cap *= 2;
            int *ni = db_realloc(*ids, sizeof(int) * (size_t)cap);
            if (!ni) {
                free(*ids);
                *ids = NULL;
                return db_fail(err, errlen, DB_ERUNTIME, "out of memory");
            }
            *ids = ni;
        }
        (*ids)[(*n)++] = (int)v;
        p = end;
    }
    return DB_OK;
}
