/* prompt_set.c — prompt sets: datasets rendered to ids, id files, random ids (prompt_set.h). */
#include "bench/prompt_set.h"

#include "base/util.h"
#include "engine/session.h"
#include "model/synthetic.h"
#include "model/gguf_model.h"
#include "text/prompt.h"

#include <cjson/cJSON.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the arrays of n prompts, each sample one empty turn (random and id prompts have no text) */
static int alloc_untexted(db_prompt_set *ps, int n, char *err, size_t errlen)
{
    ps->synthetic = 1;
    snprintf(ps->ds.name, sizeof ps->ds.name, "%s", ps->name);
    ps->ds.samples = db_calloc((size_t)(n > 0 ? n : 1), sizeof *ps->ds.samples);
    ps->ids = db_calloc((size_t)(n > 0 ? n : 1), sizeof(int *));
    ps->len = db_calloc((size_t)(n > 0 ? n : 1), sizeof(int));
    if (!ps->ds.samples || !ps->ids || !ps->len) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for the prompts of %s", ps->name);
    return DB_OK;
}

/* sample j of an untexted set: one empty turn */
static int add_untexted(db_prompt_set *ps, int j, char *err, size_t errlen)
{
    db_sample *sm = &ps->ds.samples[j];
    ps->ds.n = j + 1; /* freed with the set from here on */
    sm->line = j + 1;
    sm->turns = db_calloc(1, sizeof(char *));
    if (sm->turns) sm->n_turns = 1, sm->turns[0] = db_calloc(1, 1);
    if (!sm->turns || !sm->turns[0]) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for the prompts of %s", ps->name);
    return DB_OK;
}

int db_prompt_set_random(db_prompt_set *ps, const char *name, int n, int len, int len_max, int vocab,
                         uint64_t seed, char *err, size_t errlen)
{
    memset(ps, 0, sizeof *ps);
    snprintf(ps->name, sizeof ps->name, "%s", name);
    if (n < 0 || len < 1 || len_max < len || vocab < 1)
        return db_fail(err, errlen, DB_EINPUT, "%s: %d random prompts of %d..%d ids from %d", name, n, len, len_max, vocab);
    int rc = alloc_untexted(ps, n, err, errlen);
    ps->random_vocab = vocab;
    for (int j = 0; j < n && !rc; j++) {
        if ((rc = add_untexted(ps, j, err, errlen))) break;
        db_rng r;
        db_rng_seed(&r, db_synth_mix(seed ^ db_synth_fnv1a("synthetic-prompts")) + (uint64_t)j);
        int L = len_max > len ? len + (int)(db_rng_next(&r) % (uint64_t)(len_max - len + 1)) : len;
        if (!(ps->ids[j] = db_malloc(sizeof(int) * (size_t)L)))
            return db_fail(err, errlen, DB_ERUNTIME, "out of memory for the prompts of %s", name);
        for (int t = 0; t < L; t++) ps->ids[j][t] = (int)(db_rng_next(&r) % (uint64_t)vocab);
        ps->len[j] = L;
    }
    return rc;
}

int db_prompt_set_dataset(db_prompt_set *ps, const char *spec, int max_samples, uint64_t seed,
                          const db_tokenizer *tok, db_chat_template tmpl, int thinking, int vocab,
                          const char *model_path, char *err, size_t errlen)
{
    memset(ps, 0, sizeof *ps);
    snprintf(ps->name, sizeof ps->name, "%s", spec);
    int rc = db_dataset_load(&ps->ds, spec, max_samples, seed, err, errlen);
    if (rc) return rc;
    ps->ids = db_calloc((size_t)(ps->ds.n > 0 ? ps->ds.n : 1), sizeof(int *));
    ps->len = db_calloc((size_t)(ps->ds.n > 0 ? ps->ds.n : 1), sizeof(int));
    if (!ps->ids || !ps->len) return db_fail(err, errlen, DB_ERUNTIME, "out of memory for the prompts of %s", spec);
    for (int j = 0; j < ps->ds.n; j++) {
        rc = db_prompt_render(tok, tmpl, thinking, &ps->ds.samples[j], 0, NULL, &ps->ids[j], &ps->len[j], err, errlen);
        if (rc) return rc;
        for (int t = 0; t < ps->len[j]; t++)
            if (ps->ids[j][t] < 0 || ps->ids[j][t] >= vocab)
                return db_fail(err, errlen, DB_EINPUT, "%s: prompt %d: token id %d outside the vocabulary (%d) of %s",
                               ps->name, j, ps->ids[j][t], vocab, model_path);
    }
    return DB_OK;
}

int db_prompt_set_ids_file(db_prompt_set *ps, const char *path, char *err, size_t errlen)
{
    memset(ps, 0, sizeof *ps);
    snprintf(ps->name, sizeof ps->name, "%s", path);
    char *txt;
    int rc = db_read_file_max(path, DB_MAX_TEXT_BYTES, &txt, NULL, err, errlen);
    if (rc) return rc;
    int lines = 1;
    for (const char *s = txt; *s; s++) lines += *s == '\n';
    rc = alloc_untexted(ps, lines, err, errlen);
    int line = 0;
    for (char *save = NULL, *l = rc ? NULL : strtok_r(txt, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        line++;
        int *ids, n;
        if (db_parse_ids(l, &ids, &n, err, errlen) != 0) {
            char why[256];
            snprintf(why, sizeof why, "%s", err);
            rc = db_fail(err, errlen, DB_EINPUT, "%s:%d: %s", path, line, why);
            break;
        }
        if (n == 0) {
            free(ids);
            continue;
        }
        int j = ps->ds.n;
        if ((rc = add_untexted(ps, j, err, errlen))) {
            free(ids);
            break;
        }
        ps->ids[j] = ids;
        ps->len[j] = n;
    }
    free(txt);
    if (!rc && ps->ds.n == 0) rc = db_fail(err, errlen, DB_EINPUT, "%s: no prompts", path);
    return rc;
}

int db_prompt_tokenizer_load(db_tokenizer *tok, const char *path, char *err, size_t errlen)
{
    char gp[1024], tj[1100];
    struct stat sb;
    /* a directory with its own tokenizer.json keeps it, GGUF or not */
    int dir_json = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) &&
                   db_path_join(tj, sizeof tj, path, "tokenizer.json") == 0 && access(tj, F_OK) == 0;
    int g = dir_json ? 0 : db_gguf_resolve(path, gp, sizeof gp, err, errlen);
    if (g < 0) return g;
    if (!g) return db_tokenizer_load(tok, path, err, errlen);
    memset(tok, 0, sizeof *tok);
    cJSON *root;
    int rc = db_gguf_tokenizer_json(gp, &root, err, errlen);
    if (rc) return rc;
    rc = db_tokenizer_from_json(tok, root, gp, err, errlen);
    cJSON_Delete(root);
    return rc;
}

/* the context of every sample, before its prompt: what db_prompt_set_depth takes from sample j
 * (its plain text's ids, or its prompt's ids in an untexted set); *ids malloc'd */
static int context_source(const db_prompt_set *ps, int j, const db_tokenizer *tok, int **ids, int *n, char *err,
                          size_t errlen)
{
    if (ps->synthetic) {
        *n = ps->len[j];
        if (!(*ids = db_malloc(sizeof(int) * (size_t)(*n > 0 ? *n : 1)))) return db_fail(err, errlen, DB_ERUNTIME, "out of memory");
        memcpy(*ids, ps->ids[j], sizeof(int) * (size_t)*n);
        return DB_OK;
    }
    const char *t = ps->ds.samples[j].n_turns > 0 ? ps->ds.samples[j].turns[0] : "";
    size_t tl = strlen(t);
    char *text = db_malloc(tl + 3);
    if (!text) return db_fail(err, errlen, DB_ERUNTIME, "out of memory");
    memcpy(text, t, tl);
    memcpy(text + tl, "\n\n", 3);
    int rc = db_tokenizer_encode(tok, text, tl + 2, 0, ids, n, err, errlen);
    free(text);
    return rc;
}

int db_prompt_set_depth(db_prompt_set *ps, int depth, const db_tokenizer *tok, int vocab, uint64_t seed,
                        char *err, size_t errlen)
{
    int n = ps->ds.n, rc = DB_OK;
    if (depth <= 0 || n == 0) return DB_OK;
    if (ps->depth) return db_fail(err, errlen, DB_EINPUT, "%s: context depth set twice", ps->name);
    if (!ps->synthetic && !tok) return db_fail(err, errlen, DB_EINPUT, "%s: a context depth of text needs a tokenizer", ps->name);
    int **src = NULL, *srcn = NULL;
    long total = 0;
    if (!ps->random_vocab) { /* every sample's context source, once */
        src = db_calloc((size_t)n, sizeof *src);
        srcn = db_calloc((size_t)n, sizeof *srcn);
        if (!src || !srcn) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory for the context of %s", ps->name);
        for (int j = 0; j < n && !rc; j++) {
            rc = context_source(ps, j, tok, &src[j], &srcn[j], err, errlen);
            for (int t = 0; !rc && t < srcn[j]; t++)
                if (src[j][t] < 0 || src[j][t] >= vocab)
                    rc = db_fail(err, errlen, DB_EINPUT, "%s: context of prompt %d: token id %d outside the vocabulary (%d)",
                                 ps->name, j, src[j][t], vocab);
            total += rc ? 0 : srcn[j];
        }
        if (!rc && total == 0) rc = db_fail(err, errlen, DB_EINPUT, "%s: no text to take a context depth from", ps->name);
    }
    for (int j = 0; j < n && !rc; j++) {
        int *ids = db_malloc(sizeof(int) * ((size_t)depth + (size_t)ps->len[j]));
        if (!ids) {
            rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory for the context of %s", ps->name);
            break;
        }
        if (ps->random_vocab) { /* a stream apart from the prompt's (prompt_set_random) */
            db_rng r;
            db_rng_seed(&r, db_synth_mix(seed ^ db_synth_fnv1a("synthetic-depth")) + (uint64_t)j);
            for (int t = 0; t < depth; t++) ids[t] = (int)(db_rng_next(&r) % (uint64_t)ps->random_vocab);
        } else {
            /* samples j+1, j+2, ... wrapping past j; j itself only when the others hold nothing */
            int self = total == srcn[j];
            for (int t = 0, k = self ? j : (j + 1) % n; t < depth; k = self ? j : (k + 1) % n == j ? (j + 1) % n : (k + 1) % n) {
                int m = srcn[k] < depth - t ? srcn[k] : depth - t;
                memcpy(ids + t, src[k], sizeof(int) * (size_t)m);
                t += m;
            }
        }
        memcpy(ids + depth, ps->ids[j], sizeof(int) * (size_t)ps->len[j]);
        free(ps->ids[j]);
        ps->ids[j] = ids;
        ps->len[j] += depth;
    }
    for (int j = 0; src && j < n; j++) free(src[j]);
    free(src), free(srcn);
    if (!rc) ps->depth = depth;
    return rc;
}

void db_prompt_set_free(db_prompt_set *ps)
{
    for (int j = 0; j < ps->ds.n && ps->ids; j++) free(ps->ids[j]);
    free(ps->ids);
    free(ps->len);
    db_dataset_free(&ps->ds);
    memset(ps, 0, sizeof *ps);
}

int db_prompt_set_turns(const db_prompt_set *ps)
{
    int n = 0;
    for (int j = 0; j < ps->ds.n; j++) n += ps->ds.samples[j].n_turns;
    return n;
}

int db_prompt_set_max_turns(const db_prompt_set *ps)
{
    int m = 1;
    for (int j = 0; j < ps->ds.n; j++) m = ps->ds.samples[j].n_turns > m ? ps->ds.samples[j].n_turns : m;
    return m;
}

int db_prompt_set_max_len(const db_prompt_set *ps)
{
    int m = 1;
    for (int j = 0; j < ps->ds.n; j++) m = ps->len[j] > m ? ps->len[j] : m;
    return m;
}

int db_prompt_set_turn(const db_prompt_set *ps, const db_tokenizer *tok, db_chat_template tmpl, int thinking, int j,
                       int turn, const char *const *answers, int **ids, int *n, char *err, size_t errlen)
{
    int *r, nr, rc = db_prompt_render(tok, tmpl, thinking, &ps->ds.samples[j], turn, answers, &r, &nr, err, errlen);
    if (rc || !ps->depth) {
        *ids = rc ? NULL : r, *n = rc ? 0 : nr;
        return rc;
    }
    int *w = db_malloc(sizeof(int) * ((size_t)ps->depth + (size_t)nr));
    if (!w) {
        free(r);
        return db_fail(err, errlen, DB_ERUNTIME, "out of memory for a later turn of %s", ps->name);
    }
    memcpy(w, ps->ids[j], sizeof(int) * (size_t)ps->depth); /* the first turn's context */
    memcpy(w + ps->depth, r, sizeof(int) * (size_t)nr);
    free(r);
    *ids = w, *n = ps->depth + nr;
    return DB_OK;
}

int db_prompt_set_floor_len(const db_prompt_set *ps, const db_tokenizer *tok, db_chat_template tmpl, int thinking,
                            int *len, char *err, size_t errlen)
{
    int rc = DB_OK, turns = db_prompt_set_max_turns(ps);
    *len = db_prompt_set_max_len(ps);
    const char *none[64] = {0}; /* empty answers: "" for every earlier turn */
    for (int i = 0; i < 64; i++) none[i] = "";
    for (int j = 0; j < ps->ds.n && !rc && turns > 1 && tok; j++)
        for (int t = 1; t < ps->ds.samples[j].n_turns && t < 64 && !rc; t++) {
            int *ids, n;
            if ((rc = db_prompt_set_turn(ps, tok, tmpl, thinking, j, t, none, &ids, &n, err, errlen))) break;
            free(ids);
            if (n > *len) *len = n;
        }
    return rc;
}

double db_prompt_set_mean_len(const db_prompt_set *ps)
{
    double s = 0;
    for (int j = 0; j < ps->ds.n; j++) s += ps->len[j];
    return ps->ds.n ? s / ps->ds.n : 1;
}
