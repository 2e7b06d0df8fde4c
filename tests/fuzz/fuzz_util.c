/* fuzz_util.c — scratch files and input splitting for the harnesses (see fuzz.h). */
#include "fuzz.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char scratch[256];

static void remove_scratch(void)
{
    fuzz_clear();
    rmdir(scratch);
}

const char *fuzz_dir(void)
{
    if (scratch[0]) return scratch;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
    snprintf(scratch, sizeof scratch, "%s/db-fuzz-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(scratch)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    atexit(remove_scratch);
    return scratch;
}

/* open / write / close: no stdio buffer (whose sizing costs an fstat per file) */
const char *fuzz_file(const char *name, const void *data, size_t n, char *path, size_t pathlen)
{
    snprintf(path, pathlen, "%s/%s", fuzz_dir(), name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const char *p = data;
    size_t left = n;
    while (fd >= 0 && left) {
        ssize_t w = write(fd, p, left);
        if (w <= 0) break;
        p += w;
        left -= (size_t)w;
    }
    if (fd < 0 || left || close(fd) != 0) {
        perror(path);
        abort();
    }
    return path;
}

/* depth-first: the resume reader leaves temporary files, a harness may make subdirectories */
static void clear_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[1024];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st; /* the entry's type from readdir where the file system gives it */
        if (e->d_type == DT_DIR || (e->d_type == DT_UNKNOWN && lstat(p, &st) == 0 && S_ISDIR(st.st_mode))) {
            clear_dir(p);
            rmdir(p);
        } else {
            unlink(p);
        }
    }
    closedir(d);
}

void fuzz_clear(void) { clear_dir(fuzz_dir()); }

int fuzz_split(const uint8_t *data, size_t n, fuzz_part *parts, int max)
{
    size_t sl = strlen(FUZZ_SEP);
    int k = 0;
    const uint8_t *p = data, *end = data + n;
    while (k < max - 1) {
        const uint8_t *q = end - p >= (ptrdiff_t)sl ? memmem(p, (size_t)(end - p), FUZZ_SEP, sl) : NULL;
        if (!q) break;
        parts[k++] = (fuzz_part){p, (size_t)(q - p)};
        p = q + sl;
    }
    parts[k++] = (fuzz_part){p, (size_t)(end - p)};
    return k;
}

char *fuzz_str(const uint8_t *data, size_t n)
{
    char *s = malloc(n + 1);
    if (!s) abort();
    if (n) memcpy(s, data, n);
    s[n] = 0;
    return s;
}
