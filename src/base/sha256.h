/* sha256.h — SHA-256 (FIPS 180-4) of memory and files, for the weight-file hashes every result
 * row carries. Incremental: init, update any number of times, final. */
#ifndef DB_SHA256_H
#define DB_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t bytes;        /* message length so far */
    unsigned char buf[64]; /* partial block */
    size_t nbuf;
} db_sha256;

void db_sha256_init(db_sha256 *s);
void db_sha256_update(db_sha256 *s, const void *data, size_t n);
void db_sha256_final(db_sha256 *s, unsigned char digest[32]);
/* digest as 64 lowercase hex digits + NUL */
void db_sha256_hex(const unsigned char digest[32], char hex[65]);
/* the hex digest of a file */
int db_sha256_file(const char *path, char hex[65], char *err, size_t errlen);

#endif
