/* strmap.h — a byte-string → (int a, int b) hash map with open addressing, for the tokenizer's
 * vocabulary lookups and its cache of pre-token encodings. Keys are copied into the map;
 * entries are never removed one by one, only all at once (db_strmap_clear). */
#ifndef DB_STRMAP_H
#define DB_STRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t hash;
    size_t off;   /* key bytes at keys + off */
    uint32_t len;
    int a, b;     /* the values */
} db_strmap_ent;

typedef struct {
    uint32_t *slot;     /* 0 = empty, else index + 1 into ent; a power of two in size */
    size_t mask;
    db_strmap_ent *ent;
    size_t n, ent_cap;
    char *keys;
    size_t keys_len, keys_cap;
} db_strmap;

/* insert, or overwrite the values of an existing key; 0 or DB_ERUNTIME (out of memory) */
int db_strmap_put(db_strmap *m, const char *key, size_t len, int a, int b);
/* NULL when absent */
const db_strmap_ent *db_strmap_get(const db_strmap *m, const char *key, size_t len);
void db_strmap_clear(db_strmap *m); /* forget every key, keep the memory */
void db_strmap_free(db_strmap *m);

#endif
