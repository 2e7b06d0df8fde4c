/* gguf_tokenizer.c — a GGUF file's tokenizer.ggml.* metadata as the tokenizer.json it stands
 * for (a cJSON object that text/tokenizer.h's db_tokenizer_from_json loads), so a GGUF model
 * encodes exactly like the tokenizer.json of the same model.
 *
 * Read: tokenizer.ggml.model (must be "gpt2": byte-level BPE), .pre (the pre-tokenizer:
 * "qwen2" -> the Qwen2 split regex; "llama-bpe" -> the LLaMA-3 regex, digits in runs of 1-3,
 * and ignore_merges as LLaMA-3's tokenizer.json sets it; "gpt2" / "default" -> the GPT-2 regex
 * of the ByteLevel pre-tokenizer), .tokens (id order), .token_type (1 normal, 2 unknown,
 * 6 byte -> vocabulary; 3 control -> special added token; 4 user-defined -> added token;
 * 5 unused -> a gap, as the converter's [PADn] fillers), .merges ("left right").
 * No normalizer, like llama.cpp. */
#include "model/gguf_model.h"
#include "base/json_build.h"
#include "base/util.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static const char QWEN2_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char LLAMA3_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* Every cJSON result goes through J() / JADD() (base/json_build.h): the first NULL (out of
 * memory) sets *oom, and the tokenizer fails rather than missing tokens or merges. */

/* the pre_tokenizer object for `pre`; NULL when unknown (or *oom set) */
static cJSON *pre_tokenizer(const char *pre, size_t len, int *ignore_merges, int *oom)
{
    const char *re = NULL;
    *ignore_merges = 0;
    if (len == 5 && memcmp(pre, "qwen2", 5) == 0) re = QWEN2_RE;
    else if (len == 9 && memcmp(pre, "llama-bpe", 9) == 0) re = LLAMA3_RE, *ignore_merges = 1;
    else if (!((len == 4 && memcmp(pre, "gpt2", 4) == 0) || (len == 7 && memcmp(pre, "default", 7) == 0)))
        return NULL;
    cJSON *bl = J(cJSON_CreateObject());
    J(cJSON_AddStringToObject(bl, "type", "ByteLevel"));
    J(cJSON_AddBoolToObject(bl, "add_prefix_space", 0));
    J(cJSON_AddBoolToObject(bl, "use_regex", re == NULL));
    if (!re) return bl;
    cJSON *split = J(cJSON_CreateObject()), *pat = J(cJSON_CreateObject()), *seq = J(cJSON_CreateObject());
    cJSON *list = J(cJSON_CreateArray());
    J(cJSON_AddStringToObject(pat, "Regex", re));
    J(cJSON_AddStringToObject(split, "type", "Split"));
    JADD(split, "pattern", pat);
    J(cJSON_AddStringToObject(split, "behavior", "Isolated"));
    J(cJSON_AddBoolToObject(split, "invert", 0));
    JADD(list, NULL, split);
    JADD(list, NULL, bl);
    J(cJSON_AddStringToObject(seq, "type", "Sequence"));
    JADD(seq, "pretokenizers", list);
    return seq;
}

/* a NUL-terminated copy of a GGUF string into buf (grown as needed); NULL if it holds a NUL or
 * (*oom set) the buffer cannot grow */
static const char *cstr(const char *s, size_t len, char **buf, size_t *cap, int *oom)
{
    if (memchr(s, 0, len)) return NULL;
    if (len + 1 > *cap) {
        char *nb = db_realloc(*buf, len + 1);
        if (!nb) {
            *oom = 1;
            return NULL;
        }
        *buf = nb, *cap = len + 1;
    }
    memcpy(*buf, s, len);
    (*buf)[len] = 0;
    return *buf;
}

static int add_tokens(const db_gguf *g, cJSON *vocab, cJSON *added, int *oom, char *err, size_t errlen)
{
    const db_gguf_kv *toks, *types;
    int rc;
    if ((rc = db_gguf_array(g, "tokenizer.ggml.tokens", 1, DB_GGUF_STRING, &toks, err, errlen)) ||
        (rc = db_gguf_array(g, "tokenizer.ggml.token_type", 0, -1, &types, err, errlen)))
        return rc;
    if (types && types->n != toks->n)
        return db_fail(err, errlen, DB_EINPUT, "%s: tokenizer.ggml.token_type has %llu entries for %llu tokens",
                       g->path, (unsigned long long)types->n, (unsigned long long)toks->n);
    if (toks->n > (1u << 24)) return db_fail(err, errlen, DB_EINPUT, "%s: %llu tokens", g->path, (unsigned long long)toks->n);
    const unsigned char *p = toks->val;
    char *buf = NULL;
    size_t cap = 0;
    for (uint64_t i = 0; i < toks->n && !rc && !*oom; i++) {
        const char *s, *c;
        size_t len;
        db_gguf_next_str(&p, &s, &len);
        int64_t type = types ? db_gguf_arr_int(types, i) : 1;
        if (type == 5) continue;
        if (!(c = cstr(s, len, &buf, &cap, oom))) {
            if (!*oom)
                rc = db_fail(err, errlen, DB_EINPUT, "%s: tokenizer.ggml.tokens[%llu] holds a NUL byte", g->path,
                             (unsigned long long)i);
        } else if (type == 3 || type == 4) {
            cJSON *a = J(cJSON_CreateObject());
            J(cJSON_AddNumberToObject(a, "id", (double)i));
            J(cJSON_AddStringToObject(a, "content", c));
            J(cJSON_AddBoolToObject(a, "special", type == 3));
            JADD(added, NULL, a);
        } else if (type == 1 || type == 2 || type == 6) {
            J(cJSON_AddNumberToObject(vocab, c, (double)i));
        } else {
            rc = db_fail(err, errlen, DB_EINPUT, "%s: tokenizer.ggml.token_type[%llu] is %lld (1..6)", g->path,
                         (unsigned long long)i, (long long)type);
        }
    }
    free(buf);
    return rc;
}

static int add_merges(const db_gguf *g, cJSON *merges, int *oom, char *err, size_t errlen)
{
    const db_gguf_kv *m;
    int rc = db_gguf_array(g, "tokenizer.ggml.merges", 0, DB_GGUF_STRING, &m, err, errlen);
    if (rc || !m) return rc;
    const unsigned char *p = m->val;
    char *buf = NULL;
    size_t cap = 0;
    for (uint64_t i = 0; i < m->n && !rc && !*oom; i++) {
        const char *s, *c;
        size_t len;
        db_gguf_next_str(&p, &s, &len);
        if (!(c = cstr(s, len, &buf, &cap, oom))) {
            if (!*oom)
                rc = db_fail(err, errlen, DB_EINPUT, "%s: tokenizer.ggml.merges[%llu] holds a NUL byte", g->path,
                             (unsigned long long)i);
        } else {
            JADD(merges, NULL, cJSON_CreateString(c));
        }
    }
    free(buf);
    return rc;
}

int db_gguf_tokenizer_json(const char *path, cJSON **out, char *err, size_t errlen)
{
    *out = NULL;
    db_gguf g;
    int rc = db_gguf_open(&g, path, err, errlen);
    if (rc) return rc;
    const char *model, *pre;
    size_t ml, pl;
    if ((rc = db_gguf_str(&g, "tokenizer.ggml.model", 1, &model, &ml, err, errlen)) ||
        (rc = db_gguf_str(&g, "tokenizer.ggml.pre", 0, &pre, &pl, err, errlen)))
        goto done;
    if (!(ml == 4 && memcmp(model, "gpt2", 4) == 0)) {
        rc = db_fail(err, errlen, DB_EINPUT, "%s: tokenizer.ggml.model '%.*s' is not supported (only gpt2: byte-level BPE)",
                     path, (int)(ml > 32 ? 32 : ml), model);
        goto done;
    }
    if (!pre) pre = "default", pl = 7;
    int ignore_merges, oom_flag = 0, *oom = &oom_flag;
    cJSON *pt = pre_tokenizer(pre, pl, &ignore_merges, oom);
    if (!pt && !oom_flag) {
        rc = db_fail(err, errlen, DB_EINPUT, "%s: tokenizer.ggml.pre '%.*s' is not supported (qwen2, llama-bpe, gpt2, default)",
                     path, (int)(pl > 32 ? 32 : pl), pre);
        goto done;
    }
    cJSON *root = J(cJSON_CreateObject()), *m = J(cJSON_CreateObject()), *dec = J(cJSON_CreateObject());
    cJSON *vocab = J(cJSON_CreateObject()), *merges = J(cJSON_CreateArray()), *added = J(cJSON_CreateArray());
    J(cJSON_AddStringToObject(m, "type", "BPE"));
    J(cJSON_AddBoolToObject(m, "ignore_merges", ignore_merges));
    JADD(m, "vocab", vocab);
    JADD(m, "merges", merges);
    JADD(root, "model", m);
    JADD(root, "added_tokens", added);
    JADD(root, "pre_tokenizer", pt);
    J(cJSON_AddStringToObject(dec, "type", "ByteLevel"));
    JADD(root, "decoder", dec);
    if (!oom_flag && !(rc = add_tokens(&g, vocab, added, oom, err, errlen)) &&
        !(rc = add_merges(&g, merges, oom, err, errlen)) && !oom_flag)
        *out = root;
    else
        cJSON_Delete(root);
    if (!rc && oom_flag) rc = db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory building its tokenizer", path);
done:
    db_gguf_close(&g);
    return rc;
}
