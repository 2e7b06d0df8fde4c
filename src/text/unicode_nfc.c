/* unicode_nfc.c — NFC = canonical decomposition, canonical ordering, canonical composition
 * (Unicode Standard Annex #15), with Hangul syllables done algorithmically.
 *
 * Notation: cp = code point; ccc = canonical combining class (0 for starters). The composition
 * step is the one of the UAX #15 sample code: a mark composes with the last starter unless a
 * mark of the same or higher class stands between them ("blocked"). */
#include "text/unicode_nfc.h"
#include "text/utf8.h"
#include "base/util.h"

#include <stdint.h>
#include <stdlib.h>

#include "text/unicode_nfc_tables.h"

enum { S0 = 0xAC00, L0 = 0x1100, V0 = 0x1161, T0 = 0x11A7, NL = 19, NV = 21, NT = 28,
       NS = NL * NV * NT };

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int ccc_of(uint32_t cp)
{
    if (cp < 0x300) return 0;
    size_t lo = 0, hi = COUNT(nfc_ccc);
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (cp < nfc_ccc[m][0]) hi = m;
        else if (cp > nfc_ccc[m][1]) lo = m + 1;
        else return (int)nfc_ccc[m][2];
    }
    return 0;
}

static int is_unstable(uint32_t cp)
{
    size_t lo = 0, hi = COUNT(nfc_unstable);
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (cp < nfc_unstable[m][0]) hi = m;
        else if (cp > nfc_unstable[m][1]) lo = m + 1;
        else return 1;
    }
    return 0;
}

/* one level of canonical decomposition: 0 parts (none), 1 or 2 */
static int decomp_of(uint32_t cp, uint32_t *a, uint32_t *b)
{
    if (cp < 0xC0) return 0;
    size_t lo = 0, hi = COUNT(nfc_decomp);
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (cp < nfc_decomp[m][0]) hi = m;
        else if (cp > nfc_decomp[m][0]) lo = m + 1;
        else {
            *a = nfc_decomp[m][1];
            *b = nfc_decomp[m][2];
            return *b ? 2 : 1;
        }
    }
    return 0;
}

/* primary composite of a + b, or 0 */
static uint32_t compose(uint32_t a, uint32_t b)
{
    if (a >= L0 && a < L0 + NL && b >= V0 && b < V0 + NV)
        return S0 + ((a - L0) * NV + (b - V0)) * NT;
    if (a >= S0 && a < S0 + NS && (a - S0) % NT == 0 && b > T0 && b < T0 + NT) return a + (b - T0);
    uint64_t key = (uint64_t)a << 32 | b;
    size_t lo = 0, hi = COUNT(nfc_compose);
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        uint64_t k = (uint64_t)nfc_compose[m][0] << 32 | nfc_compose[m][1];
        if (key < k) hi = m;
        else if (key > k) lo = m + 1;
        else return nfc_compose[m][2];
    }
    return 0;
}

int db_nfc_is_stable(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0xCC) { /* lead bytes below CC encode code points below U+0300: all stable */
            i++;
            continue;
        }
        uint32_t cp;
        int k = db_utf8_seq(p + i, n - i, &cp);
        if (k <= 0) return 0;
        if (is_unstable(cp)) return 0;
        i += (size_t)k;
    }
    return 1;
}

typedef struct {
    uint32_t *v;
    size_t n, cap;
} cpvec;

static int push(cpvec *c, uint32_t cp)
{
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 64;
        uint32_t *nv = db_realloc(c->v, nc * sizeof *nv);
        if (!nv) return DB_ERUNTIME;
        c->v = nv;
        c->cap = nc;
    }
    c->v[c->n++] = cp;
    return DB_OK;
}

static int decompose(cpvec *c, uint32_t cp)
{
    if (cp >= S0 && cp < S0 + NS) {
        uint32_t si = cp - S0, t = si % NT;
        if (push(c, L0 + si / (NV * NT)) || push(c, V0 + (si % (NV * NT)) / NT)) return DB_ERUNTIME;
        return t ? push(c, T0 + t) : DB_OK;
    }
    uint32_t a, b;
    int k = decomp_of(cp, &a, &b);
    if (k == 0) return push(c, cp);
    if (decompose(c, a)) return DB_ERUNTIME; /* depth is bounded by the data (<= 4) */
    return k == 2 ? decompose(c, b) : DB_OK;
}

int db_nfc(const char *s, size_t n, char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    cpvec c = {0};
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = db_utf8_seq(p + i, n - i, &cp);
        if (k <= 0) cp = 0xFFFD, k = 1; /* callers pass checked text; stay safe regardless */
        if (decompose(&c, cp)) goto oom;
        i += (size_t)k;
    }
    /* canonical ordering: stable insertion sort of each run of marks by class */
    for (size_t i = 1; i < c.n; i++) {
        int ci = ccc_of(c.v[i]);
        if (ci == 0) continue;
        size_t j = i;
        uint32_t x = c.v[i];
        while (j > 0 && ccc_of(c.v[j - 1]) > ci) {
            c.v[j] = c.v[j - 1];
            j--;
        }
        c.v[j] = x;
    }
    /* canonical composition */
    size_t w = 0;
    if (c.n) {
        size_t starter = 0;
        int last = ccc_of(c.v[0]) ? 256 : 0;
        w = 1;
        for (size_t i = 1; i < c.n; i++) {
            uint32_t ch = c.v[i];
            int cc = ccc_of(ch);
            uint32_t comp = compose(c.v[starter], ch);
            if (comp && (last < cc || last == 0)) {
                c.v[starter] = comp;
                continue;
            }
            if (cc == 0) starter = w;
            last = cc;
            c.v[w++] = ch;
        }
    }
    char *o = db_malloc(4 * w + 1);
    if (!o) goto oom;
    size_t len = 0;
    for (size_t i = 0; i < w; i++) len += (size_t)db_utf8_put(c.v[i], o + len);
    o[len] = 0;
    free(c.v);
    *out = o;
    *out_len = len;
    return DB_OK;
oom:
    free(c.v);
    return DB_ERUNTIME;
}
