/* utf8.h — UTF-8 checking, one-sequence decoding and lossy repair.
 *
 * Notation: a "sequence" is one encoded code point (1..4 bytes). Invalid input is measured in
 * "maximal subparts" (Unicode 15, §3.9 U+FFFD substitution): the longest prefix of a well-formed
 * sequence that starts at the bad byte, or 1 byte. Lossy repair writes one U+FFFD per maximal
 * subpart, which is what Python's errors="replace" and Rust's from_utf8_lossy (and so Hugging
 * Face tokenizers) do; decoding the same bytes gives the same text everywhere. */
#ifndef DB_UTF8_H
#define DB_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* At s[0..n), n > 0: the length (1..4) of a well-formed sequence; -k for an invalid one whose
 * maximal subpart is k bytes; 0 when s holds a well-formed prefix cut off by the end (more
 * bytes could complete it). The code point goes to *cp when the result is > 0 (cp may be NULL). */
int db_utf8_seq(const unsigned char *s, size_t n, uint32_t *cp);

/* n when s[0..n) is well-formed UTF-8, else the offset of the first bad byte. */
size_t db_utf8_check(const char *s, size_t n);

/* Encode cp (< 0x110000, not a surrogate) into out; returns the byte count (1..4). */
int db_utf8_put(uint32_t cp, char out[4]);

/* Append the lossy repair of s[0..n) to *buf (capacity *cap, length *len, realloc'd as needed,
 * kept NUL-terminated). With `final` = 0 a trailing cut-off prefix is not written: its length is
 * returned in *rest so a stream can carry it into the next call. Returns 0 or DB_ERUNTIME. */
int db_utf8_repair(const char *s, size_t n, int final, char **buf, size_t *len, size_t *cap,
                   size_t *rest);

#endif
