/* utf8.c — UTF-8 checking and lossy repair (see utf8.h). The byte ranges are Table 3-7 of the
 * Unicode standard: the second byte's range depends on the lead (E0, ED, F0, F4 are narrower),
 * which is what excludes overlong forms, surrogates and code points above U+10FFFF. */
#include "text/utf8.h"
#include "base/util.h"

#include <stdlib.h>
#include <string.h>

int db_utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    if (c < 0x80) {
        if (cp) *cp = c;
        return 1;
    }
    int len;
    unsigned lo = 0x80, hi = 0xBF; /* range of the second byte */
    uint32_t v;
    if (c >= 0xC2 && c <= 0xDF) len = 2, v = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, v = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return -1; /* 80..C1, F5..FF never start a sequence */
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return 0;
        unsigned b = s[i];
        if (b < lo || b > hi) return -i;
        v = (v << 6) | (b & 0x3F);
        lo = 0x80, hi = 0xBF;
    }
    if (cp) *cp = v;
    return len;
}

size_t db_utf8_check(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) { /* ASCII runs are the common case */
            i++;
            continue;
        }
        int k = db_utf8_seq(p + i, n - i, NULL);
        if (k <= 0) return i;
        i += (size_t)k;
    }
    return n;
}

int db_utf8_put(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

static int reserve(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap) return DB_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    char *nb = db_realloc(*buf, c);
    if (!nb) return DB_ERUNTIME;
    *buf = nb;
    *cap = c;
    return DB_OK;
}

int db_utf8_repair(const char *s, size_t n, int final, char **buf, size_t *len, size_t *cap,
                   size_t *rest)
{
    /* worst case: every byte becomes U+FFFD (3 bytes), plus the NUL */
    if (reserve(buf, cap, *len + 3 * n + 1)) return DB_ERUNTIME;
    const unsigned char *p = (const unsigned char *)s;
    char *o = *buf + *len;
    size_t i = 0;
    if (rest) *rest = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            *o++ = (char)p[i++];
            continue;
        }
        int k = db_utf8_seq(p + i, n - i, NULL);
        if (k > 0) {
            memcpy(o, p + i, (size_t)k);
            o += k;
            i += (size_t)k;
            continue;
        }
        if (k == 0 && !final) { /* cut off: the next call may complete it */
            if (rest) *rest = n - i;
            break;
        }
        memcpy(o, "\xEF\xBF\xBD", 3); /* U+FFFD */
        o += 3;
        i += k == 0 ? n - i : (size_t)-k;
    }
    *o = 0;
    *len = (size_t)(o - *buf);
    return DB_OK;
}
