/* fuzz.h — what every libFuzzer harness under tests/fuzz/ shares.
 *
 * A harness defines LLVMFuzzerTestOneInput (libFuzzer calls it with each input; it must not
 * leak, crash or take long on any input). Parsers that only read a path get the input through
 * a file in a per-process scratch directory (in /dev/shm when it exists: no disk I/O per
 * execution). Inputs made of several files (a sharded checkpoint, a results directory) are
 * split at the line FUZZ_SEP; the seed corpora and dictionaries carry the separator. The same
 * harness sources are linked with replay_main.c into plain test programs that run the
 * regression corpus (tests/data/fuzz-regress/<harness>/) in every build. */
#ifndef DB_FUZZ_H
#define DB_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#define FUZZ_SEP "\n--8<--\n"

/* The scratch directory (created on first use, removed at exit). */
const char *fuzz_dir(void);
/* Write data[0..n) to <scratch>/<name>; returns the path (static buffer per call site: copy it
 * if you need two). Aborts when the file cannot be written: a broken harness, not a finding. */
const char *fuzz_file(const char *name, const void *data, size_t n, char *path, size_t pathlen);
/* Remove every file in the scratch directory (inputs of the previous execution). */
void fuzz_clear(void);

typedef struct {
    const uint8_t *p;
    size_t n;
} fuzz_part;
/* Split data at FUZZ_SEP into at most max parts (the last part keeps any further separators);
 * returns the number of parts (>= 1). */
int fuzz_split(const uint8_t *data, size_t n, fuzz_part *parts, int max);
/* data[0..n) as a malloc'd NUL-terminated string (embedded NULs stay; strlen stops there). */
char *fuzz_str(const uint8_t *data, size_t n);

#endif
