/* test_bad_chain.c — malformed EAGLE-3 drafters and MTP heads (docs/checkpoints.md, "EAGLE-3
 * drafter", "MTP head") are refused with DB_EINPUT (exit 2 from the commands) and a one-line
 * message naming the file and the offending tensor / key: a missing fc, a d2t out of range or
 * repeated, tap ids beyond the target's layers (either convention), a hidden size that is not the
 * target's, the wrong layer shapes, an MTP head without its tensors, more than one MTP layer, a
 * hybrid model_type.
 *
 * Every case is a copy of a fixture (tests/data/eagle3-v16-f32: `midlayer.*`, draft vocabulary 12
 * with d2t; mtp-v16-f32: `mtp.*`) written at run time in a mkdtemp() directory, the tensors
 * re-serialised with one dropped or replaced, or the config with one key changed; the untouched
 * copy and the accepted variations (a BOOL t2d, the speculators' ids convention, the DeepSeek
 * names) must load, so a broken writer cannot make the "refused" checks pass vacuously. */
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
    if (t->int_bytes) return t->int_bytes == 8 ? "I64" : t->int_bytes == 4 ? "I32" : "BOOL";
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
    if (key && !strncmp(key, "eagle_config.", 13)) {
        obj = cJSON_GetObjectItemCaseSensitive(c, "eagle_config");
        key += 13;
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

static void open_fixture(const char *name)
{
    if (fix_cfg) {
        db_tensors_close(&fix);
        cJSON_Delete(fix_cfg);
    }
    char cp[700];
    snprintf(cp, sizeof cp, "%s/config.json", tu_data(name));
    fix_cfg = tu_json_file(cp);
    if (!fix_cfg || db_tensors_open_dir(&fix, tu_data(name), err, sizeof err) != 0) {
        printf("Bail out! fixture %s: %s\n", name, err);
        exit(1);
    }
}

static void eagle3_cases(void)
{
    static const char *ST = "model.safetensors", *CF = "config.json";
    open_fixture("eagle3-v16-f32");
    const db_tensor *t = db_tensors_find(&fix, "d2t");
    if (!t || t->int_bytes != 8) {
        tap_ok(0, "fixture has an I64 d2t");
        return;
    }
    int64_t d2t[12], dup[12], out[12];
    memcpy(d2t, t->data, sizeof d2t);
    for (int i = 0; i < 12; i++) dup[i] = out[i] = d2t[i];
    dup[5] = d2t[4] + 4 - 5; /* draft id 5 -> the target id of draft id 4 */
    out[11] = 100;
    static float zeros[64 * 96];
    static unsigned char mask[16];
    const tensor_edit e_dup = {"d2t", "I64", 1, {12}, dup, sizeof dup},
                      e_out = {"d2t", "I64", 1, {12}, out, sizeof out},
                      t2d = {"t2d", "BOOL", 1, {16}, mask, sizeof mask},
                      fc2 = {"fc.weight", "F32", 2, {32, 64}, zeros, 32 * 64 * 4},
                      q1 = {"midlayer.self_attn.q_proj.weight", "F32", 2, {64, 32}, zeros, 64 * 32 * 4},
                      head = {"lm_head.weight", "F32", 2, {16, 32}, zeros, 16 * 32 * 4};
    check("eagle3: untouched copy", NULL, NULL, NULL, NULL, NULL, "");
    check("eagle3: a BOOL t2d (ignored)", NULL, &t2d, NULL, NULL, NULL, "");
    check("eagle3: architectures Eagle3LlamaForCausalLM", NULL, NULL, "architectures", "[\"Eagle3LlamaForCausalLM\"]", NULL, "");
    check("eagle3: ids [2, 4, 6] as inputs of layers", NULL, NULL, "eagle_config.eagle_aux_hidden_state_layer_ids",
          "[2, 4, 6]", NULL, "");
    check("eagle3: no fc", "fc.weight", NULL, NULL, NULL, "fc.weight", "");
    check("eagle3: fc [32, 64] (3 taps of 32)", NULL, &fc2, NULL, NULL, "fc.weight", ST);
    check("eagle3: q_proj over H, not 2H", NULL, &q1, NULL, NULL, "midlayer.self_attn.q_proj.weight", ST);
    check("eagle3: no hidden_norm (neither layout)", "midlayer.hidden_norm.weight", NULL, NULL, NULL,
          "midlayer.hidden_norm.weight", "");
    check("eagle3: d2t mapping outside the vocabulary", NULL, &e_out, NULL, NULL, "d2t", ST);
    check("eagle3: d2t mapping twice to one id", NULL, &e_dup, NULL, NULL, "twice", ST);
    check("eagle3: no d2t with a reduced vocabulary", "d2t", NULL, NULL, NULL, "d2t", "");
    check("eagle3: lm_head [16, 32] (draft vocabulary 12)", NULL, &head, NULL, NULL, "lm_head.weight", ST);
    check("eagle3: tap id 9 (output of layer) of a 6-layer target", NULL, NULL,
          "eagle_config.eagle_aux_hidden_state_layer_ids", "[1, 3, 9]", "eagle_aux_hidden_state_layer_ids", CF);
    check("eagle3: tap id 7 (input of layer) of a 6-layer target", NULL, NULL,
          "eagle_config.eagle_aux_hidden_state_layer_ids", "[2, 4, 7]", "eagle_aux_hidden_state_layer_ids", CF);
    check("eagle3: tap id 0 (input of layer 0: the embedding)", NULL, NULL,
          "eagle_config.eagle_aux_hidden_state_layer_ids", "[0, 3, 5]", "eagle_aux_hidden_state_layer_ids", CF);
    check("eagle3: target_hidden_size 48 (the target's is 32)", NULL, NULL, "target_hidden_size", "48",
          "target_hidden_size", CF);
    check("eagle3: two layers", NULL, NULL, "num_hidden_layers", "2", "num_hidden_layers", CF);
    check("eagle3: draft_vocab_size 17 (vocab 16)", NULL, NULL, "draft_vocab_size", "17", "draft_vocab_size", CF);
    check("eagle3: vocab_size 32 (the target's is 16)", NULL, NULL, "vocab_size", "32", "vocab_size", CF);
}

static void mtp_cases(void)
{
    static const char *CF = "config.json";
    open_fixture("mtp-v16-f32");
    check("mtp: untouched copy", NULL, NULL, NULL, NULL, NULL, "");
    check("mtp: mtp_feedback pre_norm", NULL, NULL, "mtp_feedback", "\"pre_norm\"", NULL, "");
    check("mtp: no mtp.fc (nor DeepSeek's eh_proj)", "mtp.fc.weight", NULL, NULL, NULL, "mtp.fc.weight", "");
    check("mtp: no mtp.norm", "mtp.norm.weight", NULL, NULL, NULL, "mtp.norm.weight", "");
    check("mtp: no layer k_proj", "mtp.layers.0.self_attn.k_proj.weight", NULL, NULL, NULL,
          "mtp.layers.0.self_attn.k_proj.weight", "");
    check("mtp: two MTP layers", NULL, NULL, "mtp_num_hidden_layers", "2", "MTP layers", CF);
    check("mtp: hidden_size 48 (the target's is 32)", NULL, NULL, "hidden_size", "48", "hidden_size", CF);
    check("mtp: num_hidden_layers 4 (the target has 6)", NULL, NULL, "num_hidden_layers", "4", "num_hidden_layers", CF);
    check("mtp: mtp_feedback \"norm\"", NULL, NULL, "mtp_feedback", "\"norm\"", "mtp_feedback", CF);
    check("mtp: model_type qwen3_next (hybrid)", NULL, NULL, "model_type", "\"qwen3_next\"", "qwen3_next", CF);
}

static int rm_case_dirs(void)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd);
}

int main(void)
{
    db_json_init();
    db_backend_opts o = {.threads = 1};
    if (db_backend_create("cpu", &o, &be, err, sizeof err) != 0) {
        printf("Bail out! %s\n", err);
        return 1;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/db-bad-chain-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(root) || db_target_load(&target, be, tu_data("qwen3-v16-f32"), err, sizeof err) != 0) {
        printf("Bail out! fixtures: %s\n", err);
        return 1;
    }
    eagle3_cases();
    mtp_cases();
    db_target_free(&target);
    db_tensors_close(&fix);
    cJSON_Delete(fix_cfg);
    db_backend_destroy(be);
    if (!getenv("DB_KEEP_TMP") && rm_case_dirs() != 0) tap_diag("cannot remove %s", root);
    return tap_done();
}
