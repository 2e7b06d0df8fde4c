/* parse.h — values of options and ini keys: integers, numbers, booleans, choices, and the one
 * comma-list parser every list-valued option uses (the sweep's axes, `plan -c`,
 * `check-lossless -B`).
 *
 * Values are trimmed of surrounding blanks. `key` names the option in messages (the spelling the
 * user wrote); every failure is DB_EINPUT with a one-line message and leaves *out unchanged.
 *
 * Integer lists take plain values and llama-bench style ranges, mixed: "a-b" (step 1), "a-b+s"
 * (step s), "a-b*m" (geometric, start >= 1, factor m >= 2): "1-32*2" = 1,2,4,8,16,32. A list
 * holds at most DB_LIST_MAX values, none empty, none twice. */
#ifndef DB_PARSE_H
#define DB_PARSE_H

#include <stddef.h>
#include <stdint.h>

#define DB_LIST_MAX 64 /* values per list */

/* v[0..len) without surrounding blanks into buf[n]; its length, or -1 when it does not fit */
int db_trim(const char *v, size_t len, char *buf, size_t n);

int db_parse_int(const char *key, const char *v, int lo, int hi, int *out, char *err, size_t errlen);
int db_parse_u64(const char *key, const char *v, uint64_t *out, char *err, size_t errlen);
/* a finite number (one value: a list is refused); callers check its range */
int db_parse_float(const char *key, const char *v, float *out, char *err, size_t errlen);
/* NULL (a bare flag) is true; 0/1, true/false, yes/no, on/off in any case */
int db_parse_bool(const char *key, const char *v, int *out, char *err, size_t errlen);
/* free text of at most n-1 characters, no control characters */
int db_parse_string(const char *key, const char *v, char *dst, size_t n, char *err, size_t errlen);
/* A list of names written once, as LIST(X, SEP): X("a") SEP() X("b") SEP() X("c"). It gives the
 * array the parser searches, DB_NAMES_ARRAY(LIST) = {"a", "b", "c"}, and the text of help lines
 * and messages, DB_NAMES_TEXT(LIST) = "a, b, c", a string literal (static option tables). */
#define DB_NAME_(s) s
#define DB_NAME_COMMA_() ,
#define DB_NAME_SEP_() ", "
#define DB_NAMES_ARRAY(LIST) {LIST(DB_NAME_, DB_NAME_COMMA_)}
#define DB_NAMES_TEXT(LIST) LIST(DB_NAME_, DB_NAME_SEP_)
/* the index of s in names[0..n), -1 when it is not there */
int db_name_index(const char *s, const char *const *names, int n);

/* one of set[0..nset); the message lists the choices */
int db_parse_choice(const char *key, const char *v, const char *const *set, int nset, char *dst,
                    size_t n, char *err, size_t errlen);

/* integer list (values and ranges), each in [lo, hi] */
int db_parse_int_list(const char *key, const char *v, int lo, int hi, int *dst, int *n, char *err,
                      size_t errlen);
/* list of numbers >= 0 (ranges refused: they have no natural step) */
int db_parse_float_list(const char *key, const char *v, float *dst, int *n, char *err,
                        size_t errlen);
/* list of names, each at most width-1 (<= 127) characters, stored width apart from dst;
 * set == NULL allows any text */
int db_parse_name_list(const char *key, const char *v, const char *const *set, int nset, char *dst,
                       size_t width, int *n, char *err, size_t errlen);

/* index of the name in names[0..n) closest to s by edit distance (insertions, deletions,
 * substitutions, swaps of neighbours), when close enough to be a typo of it (at most 2 edits, and
 * at most a third of s); -1 otherwise. For "did you mean ...?" */
int db_closest(const char *s, const char *const *names, int n);

#endif
