/* replay_main.c — run a harness over files instead of under libFuzzer: every file of the
 * directories (or the files) given on the command line is one input. The regression corpus
 * (tests/data/fuzz-regress/<harness>/: every crash ever found, minimised) and the seed corpus
 * replay this way in every build, gcc and sanitizer builds included. Prints TAP: one line per
 * directory with the number of inputs; a crash or sanitizer report ends the program instead. */
#include "base/util.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t cap = 1 << 16, n = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (!buf) return -1;
    /* an exact-size copy so ASan sees a read past the end of the input */
    uint8_t *in = malloc(n ? n : 1);
    memcpy(in, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(in, n);
    free(in);
    return 0;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* the inputs of a directory in name order (reproducible), or the file itself; -1 if unreadable */
static int run_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) return run_file(path) == 0 ? 1 : -1;
    DIR *d = opendir(path);
    if (!d) return -1;
    char **names = NULL;
    int n = 0, ran = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        names = realloc(names, sizeof *names * (size_t)(n + 1));
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n > 1) qsort(names, (size_t)n, sizeof *names, cmp); /* names is NULL for an empty directory */
    for (int i = 0; i < n; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, names[i]);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && run_file(p) == 0) ran++;
        free(names[i]);
    }
    free(names);
    return ran;
}

int main(int argc, char **argv)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    int failed = 0;
    printf("1..%d\n", argc - 1);
    for (int i = 1; i < argc; i++) {
        int n = run_path(argv[i]);
        if (n < 0) failed++;
        printf("%s %d - %s: %d inputs replayed\n", n < 0 ? "not ok" : "ok", i, argv[i], n < 0 ? 0 : n);
        fflush(stdout);
    }
    return failed ? 1 : 0;
}
