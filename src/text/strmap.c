/* strmap.c — see strmap.h. Linear probing over a slot table kept at most half full; the hash
 * reads 8 bytes at a time (keys are short pre-tokens and vocabulary strings). */
#include "text/strmap.h"
#include "base/util.h"

#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t x)
{
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    return x ^ (x >> 32);
}

static uint64_t hash_bytes(const char *k, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, k, 8);
        h = mix(h ^ w);
        k += 8;
        n -= 8;
    }
    uint64_t w = 0;
    if (n) memcpy(&w, k, n);
    return mix(h ^ w ^ ((uint64_t)n << 56));
}

static int grow_slots(db_strmap *m)
{
    size_t cap = m->slot ? (m->mask + 1) * 2 : 64;
    uint32_t *s = db_calloc(cap, sizeof *s);
    if (!s) return DB_ERUNTIME;
    for (size_t i = 0; i < m->n; i++) {
        size_t j = m->ent[i].hash & (cap - 1);
        while (s[j]) j = (j + 1) & (cap - 1);
        s[j] = (uint32_t)(i + 1);
    }
    free(m->slot);
    m->slot = s;
    m->mask = cap - 1;
    return DB_OK;
}

const db_strmap_ent *db_strmap_get(const db_strmap *m, const char *key, size_t len)
{
    if (!m->slot) return NULL;
    uint64_t h = hash_bytes(key, len);
    for (size_t j = h & m->mask;; j = (j + 1) & m->mask) {
        uint32_t s = m->slot[j];
        if (!s) return NULL;
        const db_strmap_ent *e = &m->ent[s - 1];
        if (e->hash == h && e->len == len && memcmp(m->keys + e->off, key, len) == 0) return e;
    }
}

int db_strmap_put(db_strmap *m, const char *key, size_t len, int a, int b)
{
    if (len > UINT32_MAX || m->n >= UINT32_MAX - 1) return DB_ERUNTIME;
    if ((m->n + 1) * 2 > (m->slot ? m->mask + 1 : 0) && grow_slots(m)) return DB_ERUNTIME;
    uint64_t h = hash_bytes(key, len);
    size_t j = h & m->mask;
    for (;; j = (j + 1) & m->mask) {
        uint32_t s = m->slot[j];
        if (!s) break;
        db_strmap_ent *e = &m->ent[s - 1];
        if (e->hash == h && e->len == len && memcmp(m->keys + e->off, key, len) == 0) {
            e->a = a;
            e->b = b;
            return DB_OK;
        }
    }
    if (m->n == m->ent_cap) {
        size_t c = m->ent_cap ? m->ent_cap * 2 : 64;
        db_strmap_ent *ne = db_realloc(m->ent, c * sizeof *ne);
        if (!ne) return DB_ERUNTIME;
        m->ent = ne;
        m->ent_cap = c;
    }
    if (m->keys_len + len + 1 > m->keys_cap) {
        size_t c = m->keys_cap ? m->keys_cap : 1024;
        while (c < m->keys_len + len + 1) c *= 2;
        char *nk = db_realloc(m->keys, c);
        if (!nk) return DB_ERUNTIME;
        m->keys = nk;
        m->keys_cap = c;
    }
    if (len) memcpy(m->keys + m->keys_len, key, len);
    m->ent[m->n] = (db_strmap_ent){.hash = h, .off = m->keys_len, .len = (uint32_t)len, .a = a, .b = b};
    m->keys_len += len;
    m->slot[j] = (uint32_t)(++m->n);
    return DB_OK;
}

void db_strmap_clear(db_strmap *m)
{
    if (m->slot) memset(m->slot, 0, (m->mask + 1) * sizeof *m->slot);
    m->n = 0;
    m->keys_len = 0;
}

void db_strmap_free(db_strmap *m)
{
    free(m->slot);
    free(m->ent);
    free(m->keys);
    memset(m, 0, sizeof *m);
}
