/* test_bad_dspark.c — malformed DSpark drafters (docs/checkpoints.md, "DSpark drafter") are
 * refused with DB_EINPUT and a one-line message naming the file and the offending tensor / key.
 *
 * Every case is a copy of the fixture tests/data/dspark-v16-f32 (draft vocabulary 12 of 16: d2t,
 * its own lm_head, the scale, a confidence head, `model.`-prefixed Markov tensors) written at run
 * time in a mkdtemp() directory: the fixture's tensors re-serialised by a small safetensors
 * writer with one tensor dropped or replaced, or the config with one key changed. The untouched
 * copy (and the accepted variations: I32 d2t, the architecture aliases) must load, so a broken
 * writer cannot make the "refused" checks pass vacuously. */
#include "model/drafter.h"
#include "model/model_test.h"
#include "tap.h"
#include "test_util.h"
#include "base/util.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static db_backend *be;
static db_target target;
static db_tensor_set fix;      /* the fixture's tensors */
static cJSON *fix_cfg;     /* its config.json */
static char root[512], err[1024];

/* a replacement tensor: dtype string, shape, raw little-endian bytes; NULL name = none */
typedef struct {
    const char *name, *dtype;
    int ndim;
    int64_t shape[2];
    const void *data;
    size_t nbytes;
} tensor_edit;

static const char *dtype_str(const db_tensor *t)
{
    if (t->int_bytes) return t->int_bytes == 8 ? "I64" : "I32";
    return t->dtype == DB_BF16 ? "BF16" : t->dtype == DB_F16 ? "F16" : "F32";
}

/* model.safetensors of dir: the fixture's tensors but `drop`, with `put` added / replacing */
static void write_tensors(const char *dir, const char *drop, const tensor_edit *put)
{
    cJSON *h = cJSON_CreateObject();
    size_t off = 0;
    const void *blob[64];
    size_t blen[64];
    int nb = 0;
    for (int i = 0; i <= fix.ntensors && nb < 64; i++) {
        const db_tensor *t = i < fix.ntensors ? &fix.tensors[i] : NULL;
        const char *name = t ? t->name : put ? put->name : NULL;
        if (!name || (drop && !strcmp(name, drop)) || (t && put && put->name && !strcmp(name, put->name)))
            continue;
        int replaced = !t;
        cJSON *e = cJSON_AddObjectToObject(h, name);
        cJSON_AddStringToObject(e, "dtype", replaced ? put->dtype : dtype_str(t));
        cJSON *sh = cJSON_AddArrayToObject(e, "shape");
        int nd = replaced ? put->ndim : t->ndim;
        for (int d = 0; d < nd; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)(replaced ? put->shape[d] : t->shape[d])));
        size_t n = replaced ? put->nbytes : t->nbytes;
        cJSON *o = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(off + n)));
        blob[nb] = replaced ? put->data : t->data;
        blen[nb++] = n;
        off += n;
    }
    char *txt = cJSON_PrintUnformatted(h), path[700];
    size_t hl = strlen(txt), pad = (8 - hl % 8) % 8;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    if (f) {
        uint64_t len = hl + pad;
        unsigned char lb[8];
        for (int i = 0; i < 8; i++) lb[i] = (unsigned char)(len >> (8 * i));
        fwrite(lb, 1, 8, f);
        fwrite(txt, 1, hl, f);
        fwrite("        ", 1, pad, f);
        for (int i = 0; i < nb; i++) fwrite(blob[i], 1, blen[i], f);
        fclose(f);
    }
    cJSON_free(txt);
    cJSON_Delete(h);
}

/* config.json of dir: the fixture's with key set to json (NULL: deleted; key NULL: unchanged) */
static void write_config(const char *dir, const char *key, const char *json)
{
    cJSON *c = cJSON_Duplicate(fix_cfg, 1), *obj = c;
    if (key && !strncmp(key, "dflash_config.", 14)) {
        obj = cJSON_GetObjectItemCaseSensitive(c, "dflash_config");
        key += 14;
    }
    if (key) {
        cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
        if (json) cJSON_AddItemToObject(obj, key, cJSON_Parse(json));
    }
    char *txt = cJSON_Print(c), path[700];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(txt, f);
        fclose(f);
    }
    cJSON_free(txt);
    cJSON_Delete(c);
}

static const char *new_dir(void)
{
    static char d[600];
    static int serial;
    snprintf(d, sizeof d, "%s/c%03d", root, serial++);
    if (mkdir(d, 0700) != 0) tap_diag("mkdir %s failed", d);
    return d;
}

static int load(const char *dir)
{
    db_drafter d;
    err[0] = 0;
    int rc = db_drafter_load(&d, be, dir, &target, err, sizeof err);
    if (rc == DB_OK) db_drafter_free(&d);
    return rc;
}

/* one case: refused naming dir's file and `needle` (or loads, when needle is NULL) */
static void check(const char *what, const char *drop, const tensor_edit *put, const char *key,
                  const char *json, const char *needle, const char *file)
{
    const char *dir = new_dir();
    write_tensors(dir, drop, put);
    write_config(dir, key, json);
    int rc = load(dir);
    if (!needle) {
        tap_ok(rc == DB_OK, "%s: loads", what);
        if (rc) tap_diag("%s", err);
        return;
    }
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int ok = rc == DB_EINPUT && !strchr(err, '\n') && strstr(err, needle) && strstr(err, file[0] ? path : dir);
    tap_ok(ok, "%s: refused (DB_EINPUT), one line naming %s and '%s'", what, file[0] ? file : "the directory", needle);
    if (!ok) tap_diag("rc %d: %s", rc, err);
}

static void cases(void)
{
    static const char *ST = "model.safetensors", *CF = "config.json";
    int64_t d2t[12], d2t_dup[12], d2t_out[12];
    int32_t d2t32[12];
    const db_tensor *t = db_tensors_find(&fix, "d2t");
    if (!t || t->int_bytes != 8) {
        tap_ok(0, "fixture has an I64 d2t");
        return;
    }
    memcpy(d2t, t->data, sizeof d2t);
    for (int i = 0; i < 12; i++) d2t_dup[i] = d2t_out[i] = d2t[i], d2t32[i] = (int32_t)d2t[i];
    d2t_dup[5] = d2t[4] + 4 - 5; /* draft id 5 -> the target id of draft id 4 */
    d2t_out[11] = 100;
    static float zeros[64 * 64];
    const tensor_edit i32 = {"d2t", "I32", 1, {12}, d2t32, sizeof d2t32},
                      f32 = {"d2t", "F32", 1, {12}, zeros, 12 * 4},
                      dup = {"d2t", "I64", 1, {12}, d2t_dup, sizeof d2t_dup},
                      out = {"d2t", "I64", 1, {12}, d2t_out, sizeof d2t_out},
                      len = {"d2t", "I64", 1, {11}, d2t, 11 * 8},
                      w1_rows = {"model.markov_head.markov_w1.weight", "F32", 2, {15, 4}, zeros, 15 * 4 * 4},
                      w2_rank = {"model.markov_head.markov_w2.weight", "F32", 2, {12, 5}, zeros, 12 * 5 * 4},
                      w2_rows = {"model.markov_head.markov_w2.weight", "F32", 2, {16, 4}, zeros, 16 * 4 * 4},
                      head = {"lm_head.weight", "F32", 2, {12, 31}, zeros, 12 * 31 * 4},
                      scale = {"model.markov_head.markov_w2.scale", "F32", 1, {2}, zeros, 8},
                      conf = {"confidence_head.proj.weight", "F32", 2, {1, 35}, zeros, 35 * 4};
    check("untouched copy", NULL, NULL, NULL, NULL, NULL, "");
    check("d2t as I32", NULL, &i32, NULL, NULL, NULL, "");
    check("architectures Qwen3DSparkModel", NULL, NULL, "architectures", "[\"Qwen3DSparkModel\"]", NULL, "");
    check("architectures DSparkSpeculator", NULL, NULL, "architectures", "[\"DSparkSpeculator\"]", NULL, "");
    check("markov_head_type absent", NULL, NULL, "markov_head_type", NULL, NULL, "");
    check("no markov_w1", "model.markov_head.markov_w1.weight", NULL, NULL, NULL, "markov_w1", "");
    check("no markov_w2", "model.markov_head.markov_w2.weight", NULL, NULL, NULL, "markov_w2", "");
    check("markov_w1 [15, 4] (vocab 16)", NULL, &w1_rows, NULL, NULL, "markov_w1", ST);
    check("markov_w2 rank 5 (markov_w1 rank 4)", NULL, &w2_rank, NULL, NULL, "markov_w2", ST);
    check("markov_w2 [16, 4] (draft vocabulary 12)", NULL, &w2_rows, NULL, NULL, "markov_w2", ST);
    check("scale of 2 values", NULL, &scale, NULL, NULL, "markov_w2.scale", ST);
    check("no d2t with a reduced vocabulary", "d2t", NULL, NULL, NULL, "d2t", "");
    check("d2t F32", NULL, &f32, NULL, NULL, "d2t", ST);
    check("d2t mapping twice to one id", NULL, &dup, NULL, NULL, "twice", ST);
    check("d2t mapping outside the vocabulary", NULL, &out, NULL, NULL, "outside", ST);
    check("d2t of 11 entries", NULL, &len, NULL, NULL, "d2t", ST);
    check("no lm_head with a reduced vocabulary", "lm_head.weight", NULL, NULL, NULL, "lm_head.weight", "");
    check("lm_head [12, 31] (hidden 32)", NULL, &head, NULL, NULL, "lm_head.weight", ST);
    check("confidence head without its bias", "confidence_head.proj.bias", NULL, NULL, NULL,
          "confidence_head.proj.bias", "");
    check("confidence weight [1, 35] (H + R = 36)", NULL, &conf, NULL, NULL, "confidence_head.proj.weight", ST);
    check("markov_head_type gated", NULL, NULL, "markov_head_type", "\"gated\"", "gated", CF);
    check("draft_vocab_size 17 (vocab 16)", NULL, NULL, "draft_vocab_size", "17", "draft_vocab_size", CF);
    check("draft_vocab_size absent (= 16; the tensors hold 12)", NULL, NULL, "draft_vocab_size", NULL,
          "markov_w2", ST);
    check("DFlash 2 conv keys", NULL, NULL, "dflash_config.conv_kernel_size", "2", "conv_kernel_size", CF);
}

static int rm_case_dirs(void)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd);
}

int main(void)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    db_backend_opts o = {.threads = 1};
    if (db_backend_create("cpu", &o, &be, err, sizeof err) != 0) {
        printf("Bail out! %s\n", err);
        return 1;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/db-bad-dspark-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    const char *src = tu_data("dspark-v16-f32");
    char cp[700];
    snprintf(cp, sizeof cp, "%s/config.json", src);
    fix_cfg = tu_json_file(cp);
    if (!mkdtemp(root) || !fix_cfg || db_tensors_open_dir(&fix, src, err, sizeof err) != 0 ||
        db_target_load(&target, be, tu_data("qwen3-v16-f32"), err, sizeof err) != 0) {
        printf("Bail out! fixtures: %s\n", err);
        return 1;
    }
    cases();
    db_target_free(&target);
    db_tensors_close(&fix);
    cJSON_Delete(fix_cfg);
    db_backend_destroy(be);
    if (!getenv("DB_KEEP_TMP") && rm_case_dirs() != 0) tap_diag("cannot remove %s", root);
    return tap_done();
}
