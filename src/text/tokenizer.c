/* tokenizer.c — byte-level BPE encode and decode (see tokenizer.h for the pipeline; the file
 * is read by tokenizer_load.c).
 *
 * Merging one pre-token ("word") of n bytes: the symbols form a linked list and every adjacent
 * pair that has a merge sits in a min-heap keyed by (rank, position). Popping the best pair,
 * checking it is still current, merging it and pushing the two pairs it creates costs
 * O(log n) per merge, so a word costs O(n log n), the same order as Hugging Face's
 * `Word::merge_all`, whose tie-breaking (lowest rank, then leftmost) this follows. Results are
 * cached per pre-token: natural text repeats its words. */
#include "text/tokenizer_impl.h"
#include "text/tokenizer_test.h"
#include "text/unicode_nfc.h"
#include "text/utf8.h"
#include "base/sha256.h"
#include "base/util.h"

#include <stdlib.h>
#include <string.h>

enum { CACHE_MAX_ENTRIES = 1 << 16, CACHE_MAX_IDS = 1 << 22 };

typedef struct {
    int *v;
    size_t n, cap;
} ivec;

static int ivec_reserve(ivec *a, size_t extra)
{
    if (a->n + extra <= a->cap) return DB_OK;
    size_t c = a->cap ? a->cap : 256;
    while (c < a->n + extra) c *= 2;
    int *nv = db_realloc(a->v, c * sizeof *nv);
    if (!nv) return DB_ERUNTIME;
    a->v = nv;
    a->cap = c;
    return DB_OK;
}

static int ivec_append(ivec *a, const int *ids, size_t n)
{
    if (ivec_reserve(a, n)) return DB_ERUNTIME;
    memcpy(a->v + a->n, ids, n * sizeof *ids);
    a->n += n;
    return DB_OK;
}

/* ---------------------------------------------------------------- BPE of one word */

static int cand_less(const tok_cand *a, const tok_cand *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(tok_cand *h, size_t *n, tok_cand c)
{
    size_t i = (*n)++;
    while (i > 0 && cand_less(&c, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

static tok_cand heap_pop(tok_cand *h, size_t *n)
{
    tok_cand top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && cand_less(&h[c + 1], &h[c])) c++;
        if (!cand_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static int cache_store(struct db_tok_state *s, const unsigned char *p, size_t n, const int *ids, size_t k)
{
    if (s->cache.n >= CACHE_MAX_ENTRIES || s->cache_n + k > CACHE_MAX_IDS) {
        db_strmap_clear(&s->cache); /* simplest bounded policy: start over */
        s->cache_n = 0;
    }
    if (s->cache_n + k > s->cache_cap) {
        size_t c = s->cache_cap ? s->cache_cap * 2 : 4096;
        while (c < s->cache_n + k) c *= 2;
        int *nv = db_realloc(s->cache_ids, c * sizeof *nv);
        if (!nv) return DB_ERUNTIME;
        s->cache_ids = nv;
        s->cache_cap = c;
    }
    memcpy(s->cache_ids + s->cache_n, ids, k * sizeof *ids);
    if (db_strmap_put(&s->cache, (const char *)p, n, (int)s->cache_n, (int)k)) return DB_ERUNTIME;
    s->cache_n += k;
    return DB_OK;
}

static int bpe_word(struct db_tok_state *s, const unsigned char *p, size_t n, ivec *out)
{
    if (n == 1) return ivec_append(out, &s->byte_id[p[0]], 1);
    const db_strmap_ent *e;
    if (s->ignore_merges && (e = db_strmap_get(&s->by_bytes, (const char *)p, n)))
        return ivec_append(out, &e->a, 1);
    int cacheable = n <= TOK_CACHE_MAX_PIECE;
    if (cacheable && (e = db_strmap_get(&s->cache, (const char *)p, n)))
        return ivec_append(out, s->cache_ids + e->a, (size_t)e->b);
    if (n > s->sym_cap) {
        size_t c = n < 256 ? 256 : n;
        tok_sym *ns = db_realloc(s->sym, c * sizeof *ns);
        if (!ns) return DB_ERUNTIME;
        s->sym = ns;
        tok_cand *nh = db_realloc(s->heap, 3 * c * sizeof *nh); /* n-1 initial + 2 per merge */
        if (!nh) return DB_ERUNTIME;
        s->heap = nh;
        s->sym_cap = c;
    }
    tok_sym *sym = s->sym;
    tok_cand *heap = s->heap;
    size_t nh = 0;
    int rank, id;
    for (size_t i = 0; i < n; i++)
        sym[i] = (tok_sym){s->byte_id[p[i]], (int)i - 1, i + 1 < n ? (int)i + 1 : -1};
    for (size_t i = 0; i + 1 < n; i++)
        if (tok_merge_get(s, sym[i].id, sym[i + 1].id, &rank, &id))
            heap_push(heap, &nh, (tok_cand){rank, (int)i, id});
    while (nh) {
        tok_cand c = heap_pop(heap, &nh);
        tok_sym *l = &sym[c.pos];
        if (l->id < 0 || l->next < 0) continue; /* merged away, or now the last symbol */
        tok_sym *r = &sym[l->next];
        if (!tok_merge_get(s, l->id, r->id, &rank, &id) || id != c.id) continue; /* stale */
        l->id = id;
        r->id = -1;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = c.pos;
        if (l->prev >= 0 && tok_merge_get(s, sym[l->prev].id, l->id, &rank, &id))
            heap_push(heap, &nh, (tok_cand){rank, l->prev, id});
        if (l->next >= 0 && tok_merge_get(s, l->id, sym[l->next].id, &rank, &id))
            heap_push(heap, &nh, (tok_cand){rank, c.pos, id});
    }
    size_t start = out->n;
    for (int i = 0; i >= 0; i = sym[i].next) /* symbol 0 always survives: merges keep the left */
        if (ivec_append(out, &sym[i].id, 1)) return DB_ERUNTIME;
    if (cacheable) return cache_store(s, p, n, out->v + start, out->n - start);
    return DB_OK;
}

/* ---------------------------------------------------------------- pre-tokenization */

/* Split str[0..n) with regex `step` (matches and the gaps between them both become pieces,
 * Hugging Face's "Isolated" behaviour), handing each piece to the next step; after the last
 * step a piece is a word for BPE. */
static int pretok(struct db_tok_state *s, int step, const char *str, size_t n, ivec *out, char *err,
                  size_t errlen)
{
    if (step == s->n_re)
        return bpe_word(s, (const unsigned char *)str, n, out) ? db_fail(err, errlen, DB_ERUNTIME, "out of memory merging a word of %zu bytes", n)
                                                               : DB_OK;
    pcre2_code *re = s->re[step];
    pcre2_match_data *md = s->md[step];
    size_t off = 0, last = 0;
    int rc;
    while (off < n) {
        int m = pcre2_match(re, (PCRE2_SPTR)str, n, off, PCRE2_NO_UTF_CHECK, md, s->mctx);
        if (m == PCRE2_ERROR_NOMATCH) break;
        if (m < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(m, msg, sizeof msg);
            return db_fail(err, errlen, DB_ERUNTIME, "pre-tokenizer regex failed: %s", (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) { /* an empty match splits nothing: step over one character */
            off = ms + 1;
            while (off < n && ((unsigned char)str[off] & 0xC0) == 0x80) off++;
            continue;
        }
        if (ms > last && (rc = pretok(s, step + 1, str + last, ms - last, out, err, errlen))) return rc;
        if ((rc = pretok(s, step + 1, str + ms, me - ms, out, err, errlen))) return rc;
        last = off = me;
    }
    if (last < n) return pretok(s, step + 1, str + last, n - last, out, err, errlen);
    return DB_OK;
}

/* one stretch of text between added tokens: normalize, prefix a space, pre-tokenize */
static int encode_segment(struct db_tok_state *s, const char *str, size_t n, ivec *out, char *err,
                          size_t errlen)
{
    char *norm = NULL, *pref = NULL;
    size_t nn;
    if (s->nfc && !db_nfc_is_stable(str, n)) {
        if (db_nfc(str, n, &norm, &nn)) return db_fail(err, errlen, DB_ERUNTIME, "out of memory normalizing %zu bytes of text", n);
        str = norm;
        n = nn;
    }
    if (s->add_prefix_space && n && str[0] != ' ') {
        pref = db_malloc(n + 1);
        if (!pref) {
            free(norm);
            return db_fail(err, errlen, DB_ERUNTIME, "out of memory prefixing %zu bytes of text", n);
        }
        pref[0] = ' ';
        memcpy(pref + 1, str, n);
        str = pref;
        n++;
    }
    int rc = pretok(s, 0, str, n, out, err, errlen);
    free(norm);
    free(pref);
    return rc;
}

static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

int db_tokenizer_encode(const db_tokenizer *tok, const char *text, size_t len, int allow_special,
                        int **ids, int *n, char *err, size_t errlen)
{
    *ids = NULL;
    *n = 0;
    struct db_tok_state *s = tok->s;
    if (!s) return db_fail(err, errlen, DB_EINPUT, "tokenizer not loaded");
    size_t bad = db_utf8_check(text, len);
    if (bad != len)
        return db_fail(err, errlen, DB_EINPUT, "invalid UTF-8 in the text at byte %zu (0x%02X)", bad,
                       (unsigned)(unsigned char)text[bad]);
    if (len > (size_t)1 << 31) return db_fail(err, errlen, DB_EINPUT, "text too long (%zu bytes)", len);
    ivec out = {0};
    int rc = ivec_reserve(&out, len / 3 + 16) ? db_fail(err, errlen, DB_ERUNTIME, "out of memory tokenizing %zu bytes of text", len) : DB_OK;
    size_t seg = 0, i = 0;
    while (!rc && s->n_added && i < len) {
        unsigned char c = (unsigned char)text[i];
        const tok_added *hit = NULL;
        for (int k = s->first_beg[c], end = k + s->first_cnt[c]; k < end; k++) {
            const tok_added *a = &s->added[k];
            if (a->special && !allow_special) continue;
            if (a->len <= len - i && memcmp(text + i, a->text, a->len) == 0) {
                hit = a; /* longest first: the first that fits wins */
                break;
            }
        }
        if (!hit) {
            i++;
            continue;
        }
        size_t ms = i, me = i + hit->len;
        if (hit->lstrip)
            while (ms > seg && is_space(text[ms - 1])) ms--;
        if (hit->rstrip)
            while (me < len && is_space(text[me])) me++;
        if (ms > seg) rc = encode_segment(s, text + seg, ms - seg, &out, err, errlen);
        if (!rc && ivec_append(&out, &hit->id, 1)) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory tokenizing %zu bytes of text", len);
        seg = i = me;
    }
    if (!rc && seg < len) rc = encode_segment(s, text + seg, len - seg, &out, err, errlen);
    if (!rc && out.n > (size_t)1 << 30) rc = db_fail(err, errlen, DB_EINPUT, "text too long");
    if (rc) {
        free(out.v);
        return rc;
    }
    *ids = out.v;
    *n = (int)out.n;
    return DB_OK;
}

/* ---------------------------------------------------------------- decode */

int db_tokenizer_token_id(const db_tokenizer *tok, const char *token)
{
    if (!tok->s || !token) return -1;
    const db_strmap_ent *e = db_strmap_get(&tok->s->by_spell, token, strlen(token));
    return e ? e->a : -1;
}

const char *db_tokenizer_token_bytes(const db_tokenizer *tok, int id, size_t *len)
{
    *len = 0;
    if (!tok->s || id < 0 || id >= tok->n_vocab || !tok->s->bytes[id]) return NULL;
    *len = tok->s->nbytes[id];
    return tok->s->bytes[id];
}

int db_tokenizer_is_special(const db_tokenizer *tok, int id)
{
    return tok->s && id >= 0 && id < tok->n_vocab && (tok->s->flags[id] & TOK_SPECIAL);
}

/* append the bytes of ids to raw (growing it); ids are checked */
static int gather(const db_tokenizer *tok, const int *ids, int n, int skip_special, char **raw,
                  size_t *len, size_t *cap, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        int id = ids[i];
        if (id < 0 || id >= tok->n_vocab)
            return db_fail(err, errlen, DB_EINPUT, "token id %d outside the vocabulary (0..%d)", id, tok->n_vocab - 1);
        if (skip_special && (tok->s->flags[id] & TOK_SPECIAL)) continue;
        size_t k = tok->s->nbytes[id];
        if (*len + k + 1 > *cap) {
            size_t c = *cap ? *cap : 256;
            while (c < *len + k + 1) c *= 2;
            char *nb = db_realloc(*raw, c);
            if (!nb) return db_fail(err, errlen, DB_ERUNTIME, "out of memory decoding %d tokens", n);
            *raw = nb;
            *cap = c;
        }
        if (k) memcpy(*raw + *len, tok->s->bytes[id], k);
        *len += k;
    }
    return DB_OK;
}

int db_tokenizer_decode(const db_tokenizer *tok, const int *ids, int n, int skip_special,
                        char **text, size_t *len, char *err, size_t errlen)
{
    *text = NULL;
    if (len) *len = 0;
    if (!tok->s) return db_fail(err, errlen, DB_EINPUT, "tokenizer not loaded");
    char *raw = NULL, *out = NULL;
    size_t rlen = 0, rcap = 0, olen = 0, ocap = 0;
    int rc = gather(tok, ids, n, skip_special, &raw, &rlen, &rcap, err, errlen);
    if (!rc && db_utf8_repair(raw ? raw : "", rlen, 1, &out, &olen, &ocap, NULL))
        rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory decoding %d tokens", n);
    free(raw);
    if (rc) {
        free(out);
        return rc;
    }
    *text = out;
    if (len) *len = olen;
    return DB_OK;
}

void db_detok_init(db_detok *d, const db_tokenizer *tok, int skip_special)
{
    memset(d, 0, sizeof *d);
    d->tok = tok;
    d->skip_special = skip_special;
}

static int detok_run(db_detok *d, const int *ids, int n, int final, const char **text, size_t *len,
                     char *err, size_t errlen)
{
    size_t in_len = d->n_pending;
    if (d->n_pending) {
        if (d->in_cap < 8) {
            char *ni = db_realloc(d->in, 256);
            if (!ni) return db_fail(err, errlen, DB_ERUNTIME, "out of memory decoding %d tokens", n);
            d->in = ni;
            d->in_cap = 256;
        }
        memcpy(d->in, d->pending, d->n_pending);
    }
    int rc = gather(d->tok, ids, n, d->skip_special, &d->in, &in_len, &d->in_cap, err, errlen);
    if (rc) return rc;
    size_t rest = 0;
    d->len = 0;
    if (db_utf8_repair(d->in ? d->in : "", in_len, final, &d->buf, &d->len, &d->cap, &rest))
        return db_fail(err, errlen, DB_ERUNTIME, "out of memory decoding %d tokens", n);
    if (rest) memcpy(d->pending, d->in + in_len - rest, rest); /* a cut-off sequence: <= 3 bytes */
    d->n_pending = rest;
    *text = d->buf;
    if (len) *len = d->len;
    return DB_OK;
}

int db_detok_push(db_detok *d, int id, const char **text, size_t *len, char *err, size_t errlen)
{
    return detok_run(d, &id, 1, 0, text, len, err, errlen);
}

int db_detok_flush(db_detok *d, const char **text, size_t *len, char *err, size_t errlen)
{
    return detok_run(d, NULL, 0, 1, text, len, err, errlen);
}

void db_detok_free(db_detok *d)
{
    free(d->buf);
    free(d->in);
    memset(d, 0, sizeof *d);
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void db_tokenizer_hash(const db_tokenizer *tok, char hex[65])
{
    const struct db_tok_state *s = tok->s;
    db_sha256 h;
    db_sha256_init(&h);
    uint32_t nv = (uint32_t)tok->n_vocab;
    db_sha256_update(&h, &nv, sizeof nv);
    for (int i = 0; i < tok->n_vocab; i++) {
        uint32_t n = s->bytes[i] ? s->nbytes[i] : UINT32_MAX; /* a gap differs from an empty token */
        unsigned char f = s->flags[i];
        db_sha256_update(&h, &n, sizeof n);
        db_sha256_update(&h, &f, 1);
        if (s->bytes[i]) db_sha256_update(&h, s->bytes[i], s->nbytes[i]);
    }
    /* the merge table's slots depend on insertion order: a sum of one mix per merge does not */
    uint64_t sum = 0, count = 0;
    for (size_t j = 0; s->mkey && j <= s->mmask; j++)
        if (s->mkey[j] != ~0ull) {
            sum += mix64(s->mkey[j] ^ mix64(((uint64_t)(uint32_t)s->mrank[j] << 32) | (uint32_t)s->mnew[j]));
            count++;
        }
    db_sha256_update(&h, &sum, sizeof sum);
    db_sha256_update(&h, &count, sizeof count);
    unsigned char d[32];
    db_sha256_final(&h, d);
    db_sha256_hex(d, hex);
}
