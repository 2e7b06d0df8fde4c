/* dataset.c — load prompt sets (see dataset.h for the formats and the name resolution).
 * A file is read whole (db_dataset_load), split into lines and each line parsed on its own with
 * cJSON, so that an error can name its line (db_dataset_parse). */
#include "text/dataset.h"
#include "text/utf8.h"
#include "base/paths.h"
#include "base/util.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const db_dataset_builtins[] = {"math", "math-hard", "code", "code-basic", "chat", NULL};

static const char MATH_SUFFIX[] = "\nPlease reason step by step, and put your final answer within \\boxed{}.";
static const char CODE_PREFIX[] =
    "Write a solution to the following problem and make sure that it passes the tests:\n```python\n";
static const char CODE_SUFFIX[] = "\n```";

/* ---------------------------------------------------------------- name resolution */

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int db_dataset_resolve(const char *spec, char *path, size_t n, char *err, size_t errlen)
{
    if (is_file(spec)) {
        if (snprintf(path, n, "%s", spec) >= (int)n) return db_fail(err, errlen, DB_EINPUT, "%s: path too long", spec);
        return DB_OK;
    }
    int builtin = 0;
    for (int i = 0; db_dataset_builtins[i]; i++) builtin |= strcmp(spec, db_dataset_builtins[i]) == 0;
    char rel[64], e[1024];
    if (!builtin && strchr(spec, '/') && db_data_path(spec, path, n, e, sizeof e) == DB_OK && is_file(path))
        return DB_OK; /* datasets/x.jsonl from another directory: the data root's */
    struct stat st;
    if (!builtin && stat(spec, &st) == 0) { /* a FIFO, device or directory: the reader says which */
        if (snprintf(path, n, "%s", spec) >= (int)n) return db_fail(err, errlen, DB_EINPUT, "%s: path too long", spec);
        return DB_OK;
    }
    if (!builtin)
        return db_fail(err, errlen, DB_EINPUT, "dataset '%s': no such file, and not a built-in name (math, "
                       "math-hard, code, code-basic, chat)", spec);
    snprintf(rel, sizeof rel, "datasets/%s.jsonl", spec);
    if (db_data_path(rel, path, n, e, sizeof e) == DB_OK) return DB_OK;
    return db_fail(err, errlen, DB_EINPUT, "built-in dataset '%s': %s", spec, e);
}

/* ---------------------------------------------------------------- records */

static char *concat3(const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = strlen(c);
    char *s = db_malloc(la + lb + lc + 1);
    if (!s) return NULL;
    memcpy(s, a, la);
    memcpy(s + la, b, lb);
    memcpy(s + la + lb, c, lc + 1);
    return s;
}

static const cJSON *field(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static int detect(const cJSON *o, db_dataset_format *f)
{
    const cJSON *prompt = field(o, "prompt");
    if (cJSON_IsArray(field(o, "turns")))
        *f = field(o, "question_id") || field(o, "category") ? DB_DS_MTBENCH : DB_DS_TURNS;
    else if (cJSON_IsArray(prompt)) *f = DB_DS_MTBENCH;
    else if (field(o, "question")) *f = DB_DS_GSM8K;
    else if (field(o, "problem")) *f = DB_DS_MATH500;
    else if (field(o, "test_list") && (prompt || field(o, "text"))) *f = DB_DS_MBPP;
    else if (prompt) *f = DB_DS_HUMANEVAL;
    else if (field(o, "text")) *f = DB_DS_MBPP;
    else
        return 0;
    return 1;
}

typedef struct {
    const char *file;
    int line;
    char *err;
    size_t errlen;
} where;

static int bad(const where *w, const char *what, const char *name)
{
    return db_fail(w->err, w->errlen, DB_EINPUT, "%s:%d: %s '%s'", w->file, w->line, what, name);
}

static int check_text(const where *w, const char *name, const char *s)
{
    size_t len = strlen(s), at = db_utf8_check(s, len);
    if (at != len)
        return db_fail(w->err, w->errlen, DB_EINPUT, "%s:%d: invalid UTF-8 in '%s' at byte %zu", w->file, w->line,
                       name, at);
    return DB_OK;
}

static int add_turn(db_sample *s, char *t)
{
    if (!t) return DB_ERUNTIME;
    char **nt = db_realloc(s->turns, sizeof *nt * (size_t)(s->n_turns + 1));
    if (!nt) {
        free(t);
        return DB_ERUNTIME;
    }
    s->turns = nt;
    s->turns[s->n_turns++] = t;
    return DB_OK;
}

static void free_sample(db_sample *s)
{
    for (int i = 0; i < s->n_turns; i++) free(s->turns[i]);
    free(s->turns);
    memset(s, 0, sizeof *s);
}

/* one JSON record of format f -> sample */
static int record(const where *w, const cJSON *o, db_dataset_format f, db_sample *s)
{
    const char *name = f == DB_DS_GSM8K ? "question" : f == DB_DS_MATH500 ? "problem" : f == DB_DS_HUMANEVAL ? "prompt"
                       : f == DB_DS_MBPP ? (field(o, "prompt") ? "prompt" : "text")
                       : cJSON_IsArray(field(o, "turns")) || f == DB_DS_TURNS ? "turns" : "prompt";
    const cJSON *v = field(o, name);
    if (!v) return bad(w, "missing field", name);
    if (f == DB_DS_MTBENCH || f == DB_DS_TURNS) {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0) return bad(w, "needs a non-empty list of strings in", name);
        const cJSON *t;
        cJSON_ArrayForEach(t, v)
        {
            if (!cJSON_IsString(t)) return bad(w, "needs a list of strings in", name);
            int rc = check_text(w, name, t->valuestring);
            if (rc) return rc;
            if (add_turn(s, db_strdup(t->valuestring))) return db_fail(w->err, w->errlen, DB_ERUNTIME, "%s:%d: out of memory copying the turns", w->file, w->line);
        }
        return DB_OK;
    }
    if (!cJSON_IsString(v)) return bad(w, "needs a string in", name);
    int rc = check_text(w, name, v->valuestring);
    if (rc) return rc;
    char *t = f == DB_DS_GSM8K || f == DB_DS_MATH500 ? concat3("", v->valuestring, MATH_SUFFIX)
              : f == DB_DS_HUMANEVAL                 ? concat3(CODE_PREFIX, v->valuestring, CODE_SUFFIX)
                                                     : db_strdup(v->valuestring);
    return add_turn(s, t) ? db_fail(w->err, w->errlen, DB_ERUNTIME, "%s:%d: out of memory copying the prompt", w->file, w->line) : DB_OK;
}

static int push_sample(db_dataset *ds, db_sample *s, int *cap)
{
    if (ds->n == *cap) {
        int c = *cap ? *cap * 2 : 64;
        db_sample *ns = db_realloc(ds->samples, sizeof *ns * (size_t)c);
        if (!ns) return DB_ERUNTIME;
        ds->samples = ns;
        *cap = c;
    }
    ds->samples[ds->n++] = *s;
    memset(s, 0, sizeof *s);
    return DB_OK;
}

/* a JSON \u0000 escape in line[0..n) (an odd run of backslashes before "u0000"): cJSON would
 * hand over the string cut there */
static int has_nul_escape(const char *line, size_t n)
{
    for (size_t i = 0; i + 6 <= n; i++) {
        if (line[i] != '\\' || memcmp(line + i + 1, "u0000", 5) != 0) continue;
        size_t b = 0;
        while (b < i && line[i - 1 - b] == '\\') b++;
        if (b % 2 == 0) return 1;
    }
    return 0;
}

static int parse_lines(db_dataset *ds, char *text, size_t len, int plain, char *err, size_t errlen)
{
    int cap = 0, rc = DB_OK, detected = 0;
    where w = {ds->path, 0, err, errlen};
    char *p = text, *end = text + len;
    while (!rc && p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *e = nl ? nl : end;
        w.line++;
        size_t n = (size_t)(e - p);
        if (n && p[n - 1] == '\r') n--;
        char *line = p;
        p = nl ? nl + 1 : end;
        size_t k = 0;
        while (k < n && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r')) k++;
        if (k == n) continue; /* blank lines separate nothing */
        /* a NUL ends every C string: the prompt would silently lose the rest of its text */
        if (memchr(line, 0, n) || (!plain && has_nul_escape(line, n))) {
            rc = db_fail(err, errlen, DB_EINPUT, "%s:%d: a NUL character in the line (a prompt cannot hold one)",
                         ds->path, w.line);
            break;
        }
        line[n] = 0;
        db_sample s = {0};
        s.line = w.line;
        if (plain) {
            rc = check_text(&w, "text", line);
            if (!rc && add_turn(&s, db_strdup(line))) rc = db_fail(err, errlen, DB_ERUNTIME, "%s:%d: out of memory copying the prompt", ds->path, w.line);
        } else {
            int oom;
            cJSON *o = db_json_parse(line, n, &oom);
            if (oom)
                rc = db_fail(err, errlen, DB_ERUNTIME, "%s:%d: out of memory parsing the line", ds->path, w.line);
            else if (!cJSON_IsObject(o))
                rc = db_fail(err, errlen, DB_EINPUT, "%s:%d: not a JSON object", ds->path, w.line);
            else if (!detected && !(detected = detect(o, &ds->format)))
                rc = db_fail(err, errlen, DB_EINPUT, "%s:%d: no prompt field (expected question, problem, prompt, "
                             "text or turns)", ds->path, w.line);
            else
                rc = record(&w, o, ds->format, &s);
            cJSON_Delete(o);
        }
        if (!rc && push_sample(ds, &s, &cap)) rc = db_fail(err, errlen, DB_ERUNTIME, "%s:%d: out of memory adding the sample", ds->path, w.line);
        free_sample(&s);
    }
    if (!rc && ds->n == 0) rc = db_fail(err, errlen, DB_EINPUT, "%s: no samples", ds->path);
    return rc;
}

int db_dataset_parse(db_dataset *ds, const char *path, char *text, size_t len, int max_samples, uint64_t seed,
                     char *err, size_t errlen)
{
    memset(ds, 0, sizeof *ds);
    if (max_samples < 0) return db_fail(err, errlen, DB_EINPUT, "max samples must be >= 0 (got %d)", max_samples);
    if (snprintf(ds->path, sizeof ds->path, "%s", path) >= (int)sizeof ds->path)
        return db_fail(err, errlen, DB_EINPUT, "%s: path too long", path);
    const char *base = strrchr(ds->path, '/');
    base = base ? base + 1 : ds->path;
    size_t bl = strlen(base);
    const char *dot = strrchr(base, '.');
    int plain = dot && strcmp(dot, ".txt") == 0;
    snprintf(ds->name, sizeof ds->name, "%.*s", (int)(dot ? (size_t)(dot - base) : bl), base);
    if (plain) ds->format = DB_DS_TEXT;
    int rc = parse_lines(ds, text, len, plain, err, errlen);
    if (!rc && max_samples > 0) {
        db_rng r;
        db_rng_seed(&r, seed);
        for (int i = ds->n - 1; i > 0; i--) { /* Fisher-Yates */
            int j = (int)(db_rng_next(&r) % (uint64_t)(i + 1));
            db_sample t = ds->samples[i];
            ds->samples[i] = ds->samples[j];
            ds->samples[j] = t;
        }
        while (ds->n > max_samples) free_sample(&ds->samples[--ds->n]);
    }
    if (rc) db_dataset_free(ds);
    return rc;
}

int db_dataset_load(db_dataset *ds, const char *spec, int max_samples, uint64_t seed, char *err,
                    size_t errlen)
{
    memset(ds, 0, sizeof *ds);
    if (max_samples < 0) return db_fail(err, errlen, DB_EINPUT, "max samples must be >= 0 (got %d)", max_samples);
    char path[sizeof ds->path];
    int rc = db_dataset_resolve(spec, path, sizeof path, err, errlen);
    if (rc) return rc;
    char *text = NULL;
    size_t len = 0;
    if ((rc = db_read_file_max(path, DB_MAX_TEXT_BYTES, &text, &len, err, errlen))) return rc;
    rc = db_dataset_parse(ds, path, text, len, max_samples, seed, err, errlen);
    free(text);
    return rc;
}

void db_dataset_free(db_dataset *ds)
{
    for (int i = 0; i < ds->n; i++) free_sample(&ds->samples[i]);
    free(ds->samples);
    ds->samples = NULL;
    ds->n = 0;
}
