/* tokenizer_load.c — read a Hugging Face tokenizer.json into the tokenizer state: vocabulary,
 * merges, added tokens, normalizer and pre-tokenizer (compiled with PCRE2), and each token's
 * raw bytes through the GPT-2 byte-to-unicode table.
 *
 * The GPT-2 table: bytes that are printable Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for
 * themselves; the other 68 bytes, in order, are U+0100, U+0101, ... So "Ġ" (U+0120) is a space
 * and "Ċ" (U+010A) a newline. Every byte-level vocabulary holds all 256 of these symbols. */
#include "text/tokenizer_impl.h"
#include "text/utf8.h"
#include "base/util.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The pattern a ByteLevel pre-tokenizer with use_regex = true applies (GPT-2). */
static const char GPT2_REGEX[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static uint32_t byte_to_unicode(int b)
{
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return (uint32_t)b;
    int n = 0; /* rank of b among the bytes that are remapped */
    for (int c = 0; c < b; c++)
        if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) n++;
    return 256u + (uint32_t)n;
}

/* unicode -> byte for the 256 symbols, -1 otherwise */
static int unicode_to_byte(uint32_t cp)
{
    if (cp < 256) {
        int b = (int)cp;
        if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return b;
        return -1;
    }
    if (cp >= 256 + 68) return -1;
    int n = (int)cp - 256;
    for (int c = 0; c < 256; c++)
        if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)) && n-- == 0)
            return c;
    return -1;
}

/* The raw bytes of a spelling, as the Hugging Face ByteLevel decoder computes them: every
 * character mapped back through the table, or, when one of them is not in the table (an
 * added token such as "<｜begin▁of▁sentence｜>"), the spelling's own UTF-8 bytes. */
static int spelling_bytes(const char *sp, char **out, uint32_t *n)
{
    size_t len = strlen(sp);
    char *b = db_malloc(len + 1);
    if (!b) return DB_ERUNTIME;
    size_t k = 0, i = 0;
    const unsigned char *p = (const unsigned char *)sp;
    while (i < len) {
        uint32_t cp;
        int q = db_utf8_seq(p + i, len - i, &cp);
        int byte = q > 0 ? unicode_to_byte(cp) : -1;
        if (byte < 0) {
            memcpy(b, sp, len);
            k = len;
            break;
        }
        b[k++] = (char)byte;
        i += (size_t)q;
    }
    b[k] = 0;
    *out = b;
    *n = (uint32_t)k;
    return DB_OK;
}

/* ---------------------------------------------------------------- merges table */

static size_t merge_slot(const struct db_tok_state *s, uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    return (size_t)(h ^ (h >> 29)) & s->mmask;
}

int tok_merge_get(const struct db_tok_state *s, int left, int right, int *rank, int *id)
{
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (size_t j = merge_slot(s, key);; j = (j + 1) & s->mmask) {
        if (s->mkey[j] == ~0ull) return 0;
        if (s->mkey[j] == key) {
            *rank = s->mrank[j];
            *id = s->mnew[j];
            return 1;
        }
    }
}

/* later duplicates overwrite earlier ones, as a Hugging Face HashMap built from the list does */
static void merge_put(struct db_tok_state *s, int left, int right, int rank, int id)
{
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    size_t j = merge_slot(s, key);
    while (s->mkey[j] != ~0ull && s->mkey[j] != key) j = (j + 1) & s->mmask;
    s->mkey[j] = key;
    s->mrank[j] = rank;
    s->mnew[j] = id;
}

/* ---------------------------------------------------------------- JSON helpers */

static const char *type_of(const cJSON *o)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

static int flag_of(const cJSON *o, const char *key, int dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v);
    return dflt;
}

/* a JSON id: an integer in [0, 2^24) (larger would be a corrupt file, not a vocabulary) */
static int id_of(const cJSON *v)
{
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (d < 0 || d >= (double)(1 << 24) || d != (double)(int)d) return -1;
    return (int)d;
}

/* ---------------------------------------------------------------- pre-tokenizer, normalizer */

typedef struct {
    const char *pattern[TOK_MAX_STEPS];
    int literal[TOK_MAX_STEPS];
    int n;
    int byte_level; /* a ByteLevel step was seen (here or in the decoder) */
} pretok_plan;

static int add_step(pretok_plan *p, const char *pattern, int literal, const char *file, char *err,
                    size_t errlen)
{
    if (p->n == TOK_MAX_STEPS)
        return db_fail(err, errlen, DB_EINPUT, "%s: more than %d pre-tokenizer steps", file, TOK_MAX_STEPS);
    p->pattern[p->n] = pattern;
    p->literal[p->n++] = literal;
    return DB_OK;
}

static int plan_pretok(const cJSON *pt, pretok_plan *p, struct db_tok_state *s, const char *file,
                       char *err, size_t errlen)
{
    if (!pt || cJSON_IsNull(pt)) return DB_OK;
    const char *type = type_of(pt);
    if (!type) return db_fail(err, errlen, DB_EINPUT, "%s: pre_tokenizer without a type", file);
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(pt, "pretokenizers");
        if (!cJSON_IsArray(list))
            return db_fail(err, errlen, DB_EINPUT, "%s: Sequence pre_tokenizer without pretokenizers", file);
        const cJSON *e;
        cJSON_ArrayForEach(e, list)
        {
            int rc = plan_pretok(e, p, s, file, err, errlen);
            if (rc) return rc;
        }
        return DB_OK;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        p->byte_level = 1;
        if (flag_of(pt, "add_prefix_space", 0)) s->add_prefix_space = 1;
        return flag_of(pt, "use_regex", 1) ? add_step(p, GPT2_REGEX, 0, file, err, errlen) : DB_OK;
    }
    if (strcmp(type, "Digits") == 0)
        return add_step(p, flag_of(pt, "individual_digits", 0) ? "\\p{N}" : "\\p{N}+", 0, file, err, errlen);
    if (strcmp(type, "Split") == 0) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(pt, "pattern");
        const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
        const cJSON *str = cJSON_GetObjectItemCaseSensitive(pat, "String");
        const cJSON *beh = cJSON_GetObjectItemCaseSensitive(pt, "behavior");
        if (!cJSON_IsString(re) && !cJSON_IsString(str))
            return db_fail(err, errlen, DB_EINPUT, "%s: Split pre_tokenizer without a Regex or String pattern", file);
        if (cJSON_IsString(beh) && strcmp(beh->valuestring, "Isolated") != 0)
            return db_fail(err, errlen, DB_EINPUT, "%s: unsupported Split behavior '%s' (only Isolated)", file,
                           beh->valuestring);
        if (flag_of(pt, "invert", 0))
            return db_fail(err, errlen, DB_EINPUT, "%s: unsupported Split with invert = true", file);
        return cJSON_IsString(re) ? add_step(p, re->valuestring, 0, file, err, errlen)
                                  : add_step(p, str->valuestring, 1, file, err, errlen);
    }
    return db_fail(err, errlen, DB_EINPUT, "%s: unsupported pre_tokenizer type '%s' (byte-level BPE needs "
                   "Split/ByteLevel/Digits)", file, type);
}

static int plan_normalizer(const cJSON *nm, struct db_tok_state *s, const char *file, char *err,
                           size_t errlen)
{
    if (!nm || cJSON_IsNull(nm)) return DB_OK;
    const char *type = type_of(nm);
    if (!type) return db_fail(err, errlen, DB_EINPUT, "%s: normalizer without a type", file);
    if (strcmp(type, "NFC") == 0) {
        s->nfc = 1;
        return DB_OK;
    }
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *e, *list = cJSON_GetObjectItemCaseSensitive(nm, "normalizers");
        cJSON_ArrayForEach(e, list)
        {
            int rc = plan_normalizer(e, s, file, err, errlen);
            if (rc) return rc;
        }
        return DB_OK;
    }
    return db_fail(err, errlen, DB_EINPUT, "%s: unsupported normalizer type '%s' (only NFC)", file, type);
}

static int decoder_is_byte_level(const cJSON *d)
{
    const char *type = type_of(d);
    if (!type) return 0;
    if (strcmp(type, "ByteLevel") == 0) return 1;
    const cJSON *e, *list = cJSON_GetObjectItemCaseSensitive(d, "decoders");
    if (strcmp(type, "Sequence") == 0)
        cJSON_ArrayForEach(e, list) if (decoder_is_byte_level(e)) return 1;
    return 0;
}

static int compile_steps(struct db_tok_state *s, const pretok_plan *p, const char *file, char *err,
                         size_t errlen)
{
    s->jit_stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
    s->mctx = pcre2_match_context_create(NULL);
    if (!s->mctx) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory compiling its pre-tokenizer", file);
    if (s->jit_stack) pcre2_jit_stack_assign(s->mctx, NULL, s->jit_stack);
    for (int i = 0; i < p->n; i++) {
        int code;
        PCRE2_SIZE off;
        uint32_t opts = PCRE2_UTF | (p->literal[i] ? PCRE2_LITERAL : PCRE2_UCP); /* LITERAL refuses UCP */
        s->re[i] = pcre2_compile((PCRE2_SPTR)p->pattern[i], PCRE2_ZERO_TERMINATED, opts, &code, &off, NULL);
        if (!s->re[i]) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(code, msg, sizeof msg);
            return db_fail(err, errlen, DB_EINPUT, "%s: pre-tokenizer regex rejected by PCRE2 at offset %zu: %s",
                           file, (size_t)off, (const char *)msg);
        }
        s->n_re = i + 1;
        pcre2_jit_compile(s->re[i], PCRE2_JIT_COMPLETE); /* optional: the interpreter is the fallback */
        s->md[i] = pcre2_match_data_create_from_pattern(s->re[i], NULL);
        if (!s->md[i]) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory compiling its pre-tokenizer", file);
    }
    return DB_OK;
}

/* ---------------------------------------------------------------- vocabulary */

static int set_token(struct db_tok_state *s, int id, const char *spelling)
{
    free(s->spell[id]);
    free(s->bytes[id]);
    s->spell[id] = db_strdup(spelling);
    if (!s->spell[id]) return DB_ERUNTIME;
    return spelling_bytes(spelling, &s->bytes[id], &s->nbytes[id]);
}

static int cmp_added(const void *a, const void *b)
{
    const tok_added *x = a, *y = b;
    unsigned char fx = (unsigned char)x->text[0], fy = (unsigned char)y->text[0];
    if (fx != fy) return fx < fy ? -1 : 1;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id - y->id;
}

static int load_added(struct db_tok_state *s, const cJSON *list, const char *file, char *err, size_t errlen)
{
    int n = cJSON_GetArraySize(list);
    s->added = db_calloc((size_t)(n > 0 ? n : 1), sizeof *s->added);
    if (!s->added) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory listing %d added tokens", file, n);
    const cJSON *e;
    int k = -1;
    cJSON_ArrayForEach(e, list)
    {
        k++;
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        int id = id_of(cJSON_GetObjectItemCaseSensitive(e, "id"));
        if (!cJSON_IsString(content) || id < 0)
            return db_fail(err, errlen, DB_EINPUT, "%s: added_tokens[%d] needs a string content and an id", file, k);
        size_t len = strlen(content->valuestring);
        if (db_utf8_check(content->valuestring, len) != len)
            return db_fail(err, errlen, DB_EINPUT, "%s: added_tokens[%d] is not valid UTF-8", file, k);
        if (len == 0) continue; /* an empty token can never match */
        tok_added *a = &s->added[s->n_added++];
        a->text = db_strdup(content->valuestring);
        if (!a->text) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory copying added token %d", file, k);
        a->len = len;
        a->id = id;
        a->special = flag_of(e, "special", 0);
        a->lstrip = flag_of(e, "lstrip", 0);
        a->rstrip = flag_of(e, "rstrip", 0);
    }
    qsort(s->added, (size_t)s->n_added, sizeof *s->added, cmp_added);
    for (int i = s->n_added - 1; i >= 0; i--) {
        unsigned char f = (unsigned char)s->added[i].text[0];
        s->first_beg[f] = i;
        s->first_cnt[f]++;
    }
    return DB_OK;
}

static int load_merges(struct db_tok_state *s, const cJSON *merges, const char *file, char *err,
                       size_t errlen)
{
    size_t n = (size_t)cJSON_GetArraySize(merges), cap = 16;
    while (cap < 2 * n + 2) cap *= 2;
    s->mkey = db_malloc(cap * sizeof *s->mkey);
    s->mrank = db_malloc(cap * sizeof *s->mrank);
    s->mnew = db_malloc(cap * sizeof *s->mnew);
    if (!s->mkey || !s->mrank || !s->mnew) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory allocating the table of %zu merges", file, n);
    memset(s->mkey, 0xFF, cap * sizeof *s->mkey);
    s->mmask = cap - 1;
    char *joined = NULL;
    size_t jcap = 0;
    int rank = 0, rc = DB_OK;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges)
    {
        const char *a = NULL, *b = NULL;
        char *sp = NULL;
        if (cJSON_IsString(m)) { /* "a b" */
            sp = strchr(m->valuestring, ' ');
            if (sp && !strchr(sp + 1, ' ')) {
                *sp = 0; /* split in place; restored below */
                a = m->valuestring;
                b = sp + 1;
            }
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
                   cJSON_IsString(m->child->next)) { /* ["a", "b"] */
            a = m->child->valuestring;
            b = m->child->next->valuestring;
        }
        if (!a) {
            rc = db_fail(err, errlen, DB_EINPUT, "%s: merges[%d] is neither \"a b\" nor [\"a\", \"b\"]", file, rank);
            break;
        }
        size_t la = strlen(a), lb = strlen(b);
        if (la + lb + 1 > jcap) {
            jcap = 2 * (la + lb + 1);
            char *nj = db_realloc(joined, jcap);
            if (!nj) {
                rc = db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory joining a merge", file);
                break;
            }
            joined = nj;
        }
        memcpy(joined, a, la);
        memcpy(joined + la, b, lb + 1);
        const db_strmap_ent *ea = db_strmap_get(&s->by_spell, a, la), *eb = db_strmap_get(&s->by_spell, b, lb),
                            *ej = db_strmap_get(&s->by_spell, joined, la + lb);
        const char *missing = !ea ? a : !eb ? b : !ej ? joined : NULL;
        if (missing) {
            rc = db_fail(err, errlen, DB_EINPUT, "%s: merges[%d] uses '%s', which is not in the vocabulary", file,
                         rank, missing);
        } else
            merge_put(s, ea->a, eb->a, rank, ej->a);
        if (sp) *sp = ' ';
        if (rc) break;
        rank++;
    }
    free(joined);
    return rc;
}

static int load_json(db_tokenizer *tok, const cJSON *root, const char *file, char *err, size_t errlen)
{
    struct db_tok_state *s = tok->s;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model))
        return db_fail(err, errlen, DB_EINPUT, "%s: no \"model\" object (not a Hugging Face tokenizer.json?)", file);
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const char *type = type_of(model);
    if (!type && cJSON_IsObject(vocab) && cJSON_IsArray(merges)) type = "BPE"; /* older files omit it */
    if (!type) return db_fail(err, errlen, DB_EINPUT, "%s: model without a type", file);
    if (strcmp(type, "BPE") != 0)
        return db_fail(err, errlen, DB_EINPUT, "%s: unsupported tokenizer type '%s' (only byte-level BPE: "
                       "GPT-2, Qwen2/Qwen3, LLaMA-3 families)", file, type);
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges))
        return db_fail(err, errlen, DB_EINPUT, "%s: BPE model needs a vocab object and a merges list", file);
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix");
    const cJSON *suffix = cJSON_GetObjectItemCaseSensitive(model, "end_of_word_suffix");
    if ((cJSON_IsString(prefix) && prefix->valuestring[0]) || (cJSON_IsString(suffix) && suffix->valuestring[0]))
        return db_fail(err, errlen, DB_EINPUT, "%s: unsupported BPE with a subword prefix/suffix (not byte-level)", file);
    s->ignore_merges = flag_of(model, "ignore_merges", 0);

    pretok_plan plan = {0};
    int rc = plan_normalizer(cJSON_GetObjectItemCaseSensitive(root, "normalizer"), s, file, err, errlen);
    if (!rc) rc = plan_pretok(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), &plan, s, file, err, errlen);
    if (rc) return rc;
    if (!plan.byte_level && !decoder_is_byte_level(cJSON_GetObjectItemCaseSensitive(root, "decoder")))
        return db_fail(err, errlen, DB_EINPUT, "%s: unsupported tokenizer: not byte-level BPE (no ByteLevel "
                       "pre_tokenizer or decoder)", file);

    /* vocabulary size: the largest id of the model vocabulary and the added tokens */
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    int max_id = -1, count = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab)
    {
        int id = id_of(e);
        if (id < 0) return db_fail(err, errlen, DB_EINPUT, "%s: vocab entry '%s' has a bad id", file, e->string);
        if (id > max_id) max_id = id;
        count++;
    }
    cJSON_ArrayForEach(e, added)
    {
        int id = id_of(cJSON_GetObjectItemCaseSensitive(e, "id"));
        if (id > max_id) max_id = id;
        count++;
    }
    if (max_id < 0) return db_fail(err, errlen, DB_EINPUT, "%s: empty vocabulary", file);
    /* the tables below are indexed by id: a file naming a few tokens at ids in the millions would
     * cost hundreds of MB (real vocabularies number their tokens 0, 1, 2, ... with few gaps) */
    if ((double)max_id > 2.0 * count + 4096) /* twice the count, and room for gaps in small ones */
        return db_fail(err, errlen, DB_EINPUT, "%s: token ids are not dense: the largest is %d for %d tokens",
                       file, max_id, count);
    tok->n_vocab = max_id + 1;
    size_t nv = (size_t)tok->n_vocab;
    s->spell = db_calloc(nv, sizeof *s->spell);
    s->bytes = db_calloc(nv, sizeof *s->bytes);
    s->nbytes = db_calloc(nv, sizeof *s->nbytes);
    s->flags = db_calloc(nv, 1);
    if (!s->spell || !s->bytes || !s->nbytes || !s->flags) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory allocating the vocabulary (%zu tokens)", file, nv);
    cJSON_ArrayForEach(e, vocab)
    {
        int id = id_of(e);
        size_t len = strlen(e->string);
        if (db_utf8_check(e->string, len) != len)
            return db_fail(err, errlen, DB_EINPUT, "%s: vocab entry %d is not valid UTF-8", file, id);
        if (set_token(s, id, e->string) || db_strmap_put(&s->by_spell, e->string, len, id, 0) ||
            db_strmap_put(&s->by_bytes, s->bytes[id], s->nbytes[id], id, 0))
            return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory adding vocab entry %d", file, id);
    }
    for (int b = 0; b < 256; b++) {
        char sym[4];
        int k = db_utf8_put(byte_to_unicode(b), sym);
        const db_strmap_ent *be = db_strmap_get(&s->by_spell, sym, (size_t)k);
        if (!be)
            return db_fail(err, errlen, DB_EINPUT, "%s: vocabulary lacks the byte-level symbol of byte 0x%02X "
                           "(not a byte-level BPE vocabulary)", file, b);
        s->byte_id[b] = be->a;
    }
    if ((rc = load_merges(s, merges, file, err, errlen))) return rc;
    if (added && (rc = load_added(s, added, file, err, errlen))) return rc;
    for (int i = 0; i < s->n_added; i++) {
        tok_added *a = &s->added[i];
        if (set_token(s, a->id, a->text) || db_strmap_put(&s->by_spell, a->text, a->len, a->id, 0))
            return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory adding added token %d", file, a->id);
        s->flags[a->id] = (unsigned char)(TOK_ADDED | (a->special ? TOK_SPECIAL : 0));
    }
    tok->n_added = s->n_added;
    return compile_steps(s, &plan, file, err, errlen);
}

int db_tokenizer_load(db_tokenizer *tok, const char *path, char *err, size_t errlen)
{
    memset(tok, 0, sizeof *tok);
    struct stat st;
    int rc;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        if (db_path_join(tok->path, sizeof tok->path, path, "tokenizer.json"))
            return db_fail(err, errlen, DB_EINPUT, "%s: path too long", path);
    } else if (snprintf(tok->path, sizeof tok->path, "%s", path) >= (int)sizeof tok->path)
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", path);
    char *text = NULL;
    size_t len = 0;
    if ((rc = db_read_file_max(tok->path, DB_MAX_TOKENIZER_BYTES, &text, &len, err, errlen))) return rc;
    char label[sizeof tok->path];
    memcpy(label, tok->path, sizeof label);
    rc = db_tokenizer_parse(tok, label, text, len, err, errlen);
    free(text);
    return rc;
}

int db_tokenizer_parse(db_tokenizer *tok, const char *label, const char *text, size_t len, char *err,
                       size_t errlen)
{
    memset(tok, 0, sizeof *tok);
    snprintf(tok->path, sizeof tok->path, "%s", label);
    int oom;
    cJSON *root = db_json_parse(text, len, &oom);
    if (oom) return db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory parsing it", label);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : 0;
        return db_fail(err, errlen, DB_EINPUT, "%s: not valid JSON (near byte %zu)", label, off);
    }
    int rc = db_tokenizer_from_json(tok, root, label, err, errlen);
    cJSON_Delete(root);
    return rc;
}

int db_tokenizer_from_json(db_tokenizer *tok, const cJSON *root, const char *label, char *err,
                           size_t errlen)
{
    int rc;
    memset(tok, 0, sizeof *tok);
    snprintf(tok->path, sizeof tok->path, "%s", label);
    tok->s = db_calloc(1, sizeof *tok->s);
    if (!tok->s) rc = db_fail(err, errlen, DB_ERUNTIME, "%s: out of memory allocating the tokenizer", label);
    else if (!cJSON_IsObject(root))
        rc = db_fail(err, errlen, DB_EINPUT, "%s: not a JSON object", tok->path);
    else
        rc = load_json(tok, root, tok->path, err, errlen);
    if (rc) db_tokenizer_free(tok);
    return rc;
}

void db_tokenizer_free(db_tokenizer *tok)
{
    struct db_tok_state *s = tok->s;
    if (s) {
        /* ids without a token (holes up to the largest id) hold NULL: skip them, not call free */
        for (int i = 0; s->spell && i < tok->n_vocab; i++)
            if (s->spell[i]) free(s->spell[i]);
        for (int i = 0; s->bytes && i < tok->n_vocab; i++)
            if (s->bytes[i]) free(s->bytes[i]);
        free(s->spell);
        free(s->bytes);
        free(s->nbytes);
        free(s->flags);
        db_strmap_free(&s->by_spell);
        db_strmap_free(&s->by_bytes);
        free(s->mkey);
        free(s->mrank);
        free(s->mnew);
        for (int i = 0; i < s->n_added; i++) free(s->added[i].text);
        free(s->added);
        for (int i = 0; i < s->n_re; i++) {
            pcre2_match_data_free(s->md[i]);
            pcre2_code_free(s->re[i]);
        }
        pcre2_match_context_free(s->mctx);
        pcre2_jit_stack_free(s->jit_stack);
        db_strmap_free(&s->cache);
        free(s->cache_ids);
        free(s->sym);
        free(s->heap);
        free(s);
    }
    memset(tok, 0, sizeof *tok);
}
