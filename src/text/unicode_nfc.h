/* unicode_nfc.h — Unicode Normalization Form C, the normalizer Qwen2/Qwen3 tokenizer.json files
 * declare ({"type": "NFC"}). Tables come from scripts/reference/make_unicode_tables.py. */
#ifndef DB_UNICODE_NFC_H
#define DB_UNICODE_NFC_H

#include <stddef.h>

/* 1 when NFC(s) == s for well-formed UTF-8 s[0..n) (quick check: no combining mark, no code
 * point that NFC changes or may compose); most text takes this path and is not copied. */
int db_nfc_is_stable(const char *s, size_t n);

/* NFC of well-formed UTF-8 s[0..n) into a malloc'd NUL-terminated buffer (*out, *out_len).
 * Returns 0 or DB_ERUNTIME (out of memory). */
int db_nfc(const char *s, size_t n, char **out, size_t *out_len);

#endif
