/* test_bad_input.c — malformed checkpoints and configs are refused with DB_EINPUT and a one-line
 * message naming the file and the offending tensor / key; nothing crashes or reads out of bounds
 * (the ASan + UBSan build runs this test too).
 *
 * Every corrupt checkpoint is built at run time in a mkdtemp() directory by copying and patching
 * the fixtures tests/data/qwen3-f32-tied (target), qwen3-f32-sharded (index + shards),
 * dflash2-f32 and dflash-v1-f32 (drafters): safetensors headers are parsed with cJSON, edited
 * and re-serialised in front of the original data section (offsets are relative to it).
 *
 * Each case also runs an untouched copy first (positive control), so a broken helper cannot
 * make the "refused" checks pass vacuously.
 */
#include "model/drafter.h"
#include "model/model_test.h"
#include "model/model_config.h"
#include "model/safetensors.h"
#include "tap.h"
#include "model/target.h"
#include "test_util.h"
#include "base/util.h"

#include <cjson/cJSON.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static db_backend *be;
static char err[1024];
static char root[512]; /* the mkdtemp() directory */

/* ---------------------------------------------------------------- TAP extras */

/* ---------------------------------------------------------------- files */

static unsigned char *slurp(const char *path, size_t *len)
{
    char *b, err[512];
    if (db_read_file(path, &b, len, err, sizeof err) != 0) {
        tap_diag("cannot open fixture: %s", err);
        return NULL;
    }
    return (unsigned char *)b;
}

static void spit(const char *path, const void *a, size_t na, const void *b, size_t nb)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        tap_diag("cannot write %s", path);
        return;
    }
    if (na) fwrite(a, 1, na, f);
    if (nb) fwrite(b, 1, nb, f);
    fclose(f);
}

static void spit_json(const char *path, const cJSON *j)
{
    char *s = cJSON_Print(j);
    spit(path, s, strlen(s), NULL, 0);
    cJSON_free(s);
}

/* a fresh directory root/cNNN for case `name`; returned from a ring of buffers. The path
 * never contains the case name, so a message cannot name a key just by quoting the path. */
static const char *new_dir(const char *name)
{
    static char buf[8][700];
    static int k, serial;
    char *d = buf[k++ % 8];
    snprintf(d, sizeof buf[0], "%s/c%03d", root, serial++);
    if (getenv("DB_KEEP_TMP")) tap_diag("%s: %s", name, d);
    if (mkdir(d, 0700) != 0) tap_diag("mkdir %s failed", d);
    return d;
}

static const char *in_dir(const char *dir, const char *file)
{
    static char buf[8][900];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", dir, file);
    return p;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

/* ---------------------------------------------------------------- safetensors building */

typedef struct {
    cJSON *hdr;                 /* parsed header */
    const unsigned char *data;  /* data section */
    size_t data_len;
    unsigned char *file;        /* the whole fixture file */
    size_t file_len;
} st_image;

static int st_load(st_image *im, const char *path)
{
    memset(im, 0, sizeof *im);
    im->file = slurp(path, &im->file_len);
    if (!im->file || im->file_len < 8) return -1;
    uint64_t h = 0;
    for (int i = 0; i < 8; i++) h |= (uint64_t)im->file[i] << (8 * i);
    if (h > im->file_len - 8) return -1;
    im->hdr = cJSON_ParseWithLength((const char *)im->file + 8, (size_t)h);
    im->data = im->file + 8 + h;
    im->data_len = im->file_len - 8 - (size_t)h;
    return im->hdr ? 0 : -1;
}

static void st_free(st_image *im)
{
    cJSON_Delete(im->hdr);
    free(im->file);
    memset(im, 0, sizeof *im);
}

static void put_u64(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
}

/* header `hdr` + data[0..dlen) (+ `extra` zero bytes) into path */
static void st_write(const char *path, const cJSON *hdr, const unsigned char *data, size_t dlen,
                     size_t extra)
{
    char *h = cJSON_PrintUnformatted(hdr);
    size_t hl = strlen(h);
    unsigned char *b = calloc(1, 8 + hl + dlen + extra);
    put_u64(b, hl);
    memcpy(b + 8, h, hl);
    memcpy(b + 8 + hl, data, dlen);
    spit(path, b, 8 + hl + dlen + extra, NULL, 0);
    free(b);
    cJSON_free(h);
}

/* raw: 8-byte length field `hlen`, then `hdr` bytes, then data */
static void st_write_raw(const char *path, uint64_t hlen, const char *hdr, size_t hdr_len,
                         const unsigned char *data, size_t dlen)
{
    unsigned char *b = malloc(8 + hdr_len + dlen + 1);
    put_u64(b, hlen);
    memcpy(b + 8, hdr, hdr_len);
    if (dlen) memcpy(b + 8 + hdr_len, data, dlen);
    spit(path, b, 8 + hdr_len + dlen, NULL, 0);
    free(b);
}

static cJSON *ints2(long long a, long long b)
{
    cJSON *arr = cJSON_CreateArray();
    cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)a));
    cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)b));
    return arr;
}

static void set_item(cJSON *obj, const char *key, cJSON *v)
{
    if (cJSON_GetObjectItemCaseSensitive(obj, key))
        cJSON_ReplaceItemInObjectCaseSensitive(obj, key, v);
    else
        cJSON_AddItemToObject(obj, key, v);
}

static long long off_of(const cJSON *hdr, const char *tensor, int which)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(hdr, tensor);
    return (long long)cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(t, "data_offsets"), which)
        ->valuedouble;
}

/* ---------------------------------------------------------------- expectations */

/* rc == DB_EINPUT, one line, and every needle (NULL-terminated) appears in err */
static int refused(int rc, const char *what, ...)
{
    int ok = rc == DB_EINPUT && err[0] && !strchr(err, '\n');
    va_list ap;
    va_start(ap, what);
    const char *missing = NULL;
    for (const char *n; (n = va_arg(ap, const char *));)
        if (!strstr(err, n) && !missing) missing = n;
    va_end(ap);
    ok = ok && !missing;
    tap_ok(ok, "%s: refused (DB_EINPUT) naming the file and the culprit", what);
    if (ok && getenv("DB_TEST_VERBOSE")) tap_diag("%s", err);
    if (!ok) {
        tap_diag("rc %d, message: %s", rc, err);
        if (missing) tap_diag("message lacks '%s'", missing);
    }
    return ok;
}

static const char *T_DIR;   /* fixture target dir */
static char *cfg_text;      /* its config.json */
static st_image fix;        /* its model.safetensors */

static int load_target_dir(const char *dir)
{
    db_target t;
    err[0] = 0;
    int rc = db_target_load(&t, be, dir, err, sizeof err);
    if (rc == DB_OK) db_target_free(&t);
    return rc;
}

/* a target dir with the fixture config and model.safetensors built from `hdr` */
static const char *target_case(const char *name, const cJSON *hdr, size_t data_len)
{
    const char *d = new_dir(name);
    spit(in_dir(d, "config.json"), cfg_text, strlen(cfg_text), NULL, 0);
    st_write(in_dir(d, "model.safetensors"), hdr, fix.data, data_len, 0);
    return d;
}

#define QP "model.layers.0.self_attn.q_proj.weight"
#define QN "model.layers.0.self_attn.q_norm.weight"
#define OP "model.layers.0.self_attn.o_proj.weight"
#define NW "model.norm.weight"
#define EMB "model.embed_tokens.weight"

/* one edited copy of the fixture header: duplicate, apply edit to tensor `tensor`, write,
 * load, expect refusal naming the file and `tensor` (plus extra needle) */
typedef void (*hdr_edit)(cJSON *entry, cJSON *hdr);

static void edit_case(const char *name, const char *tensor, hdr_edit fn, const char *extra)
{
    cJSON *h = cJSON_Duplicate(fix.hdr, 1);
    fn(cJSON_GetObjectItemCaseSensitive(h, tensor), h);
    const char *d = target_case(name, h, fix.data_len);
    cJSON_Delete(h);
    refused(load_target_dir(d), name, in_dir(d, "model.safetensors"), tensor, extra, NULL);
}

static void e_no_dtype(cJSON *e, cJSON *h) { (void)h; cJSON_DeleteItemFromObjectCaseSensitive(e, "dtype"); }
static void e_no_shape(cJSON *e, cJSON *h) { (void)h; cJSON_DeleteItemFromObjectCaseSensitive(e, "shape"); }
static void e_no_offsets(cJSON *e, cJSON *h) { (void)h; cJSON_DeleteItemFromObjectCaseSensitive(e, "data_offsets"); }
static void e_not_object(cJSON *e, cJSON *h) { (void)e; set_item(h, QP, cJSON_CreateNumber(7)); }
static void e_dtype_i8(cJSON *e, cJSON *h) { (void)h; set_item(e, "dtype", cJSON_CreateString("I8")); }
static void e_dtype_f64(cJSON *e, cJSON *h) { (void)h; set_item(e, "dtype", cJSON_CreateString("F64")); }
static void e_dtype_num(cJSON *e, cJSON *h) { (void)h; set_item(e, "dtype", cJSON_CreateNumber(1)); }
static void e_shape_neg(cJSON *e, cJSON *h) { (void)h; set_item(e, "shape", ints2(64, -32)); }
static void e_shape_frac(cJSON *e, cJSON *h)
{
    (void)h;
    cJSON *s = cJSON_CreateArray();
    cJSON_AddItemToArray(s, cJSON_CreateNumber(64));
    cJSON_AddItemToArray(s, cJSON_CreateNumber(32.5));
    set_item(e, "shape", s);
}
static void e_shape_5d(cJSON *e, cJSON *h)
{
    (void)h;
    int d[5] = {1, 1, 1, 64, 32};
    set_item(e, "shape", cJSON_CreateIntArray(d, 5));
}
static void e_offsets_3(cJSON *e, cJSON *h)
{
    (void)h;
    int d[3] = {49536, 57728, 57728};
    set_item(e, "data_offsets", cJSON_CreateIntArray(d, 3));
}
static void e_offsets_neg(cJSON *e, cJSON *h) { (void)h; set_item(e, "data_offsets", ints2(-8192, 0)); }
static void e_begin_gt_end(cJSON *e, cJSON *h)
{
    set_item(e, "data_offsets", ints2(off_of(h, QP, 1), off_of(h, QP, 0)));
}
static void e_past_end(cJSON *e, cJSON *h)
{
    /* the right byte count, but the last 4 KiB lie past the data section */
    (void)h;
    long long end = (long long)fix.data_len;
    set_item(e, "data_offsets", ints2(end - 4096, end + 4096));
}
static void e_count_short(cJSON *e, cJSON *h)
{
    (void)h;
    int d[1] = {31};
    set_item(e, "shape", cJSON_CreateIntArray(d, 1));
}
static void e_count_bf16(cJSON *e, cJSON *h) { (void)h; set_item(e, "dtype", cJSON_CreateString("BF16")); }
static void e_overlap(cJSON *e, cJSON *h)
{
    /* q_norm (64 bytes) moved 32 bytes back: its first half is o_proj's tail */
    long long b = off_of(h, QN, 0) - 32;
    set_item(e, "data_offsets", ints2(b, b + 64));
}
static void e_wrong_rows(cJSON *e, cJSON *h)
{
    long long b = off_of(h, QP, 0);
    set_item(e, "shape", ints2(48, 32));
    set_item(e, "data_offsets", ints2(b, b + 48 * 32 * 4));
}
static void e_wrong_rank(cJSON *e, cJSON *h)
{
    (void)h;
    int d[3] = {2, 32, 32};
    set_item(e, "shape", cJSON_CreateIntArray(d, 3));
}
static void e_missing(cJSON *e, cJSON *h) { (void)e; cJSON_DeleteItemFromObjectCaseSensitive(h, "model.layers.3.mlp.up_proj.weight"); }

static void safetensors_cases(void)
{
    /* positive control: the untouched header re-serialised */
    const char *ok = target_case("st_control", fix.hdr, fix.data_len);
    int rc = load_target_dir(ok);
    tap_ok(rc == DB_OK, "control: re-serialised fixture loads");
    if (rc) tap_diag("%s", err);

    /* file too short for the header length */
    static const int short_lens[] = {0, 1, 7};
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "st_short%d", short_lens[i]);
        const char *d = new_dir(name);
        spit(in_dir(d, "config.json"), cfg_text, strlen(cfg_text), NULL, 0);
        spit(in_dir(d, "model.safetensors"), fix.file, (size_t)short_lens[i], NULL, 0);
        refused(load_target_dir(d), name, in_dir(d, "model.safetensors"), NULL);
    }

    /* header length field past the end of the file */
    char *hdr_txt = cJSON_PrintUnformatted(fix.hdr);
    size_t hl = strlen(hdr_txt);
    static const struct {
        const char *name;
        int delta; /* hlen = (file size - 8) + delta; 0 = 2^64 - 1 */
    } past[] = {{"st_hlen_past_eof_by1", 1}, {"st_hlen_past_eof_max", 0}};
    for (int i = 0; i < 2; i++) {
        const char *d = new_dir(past[i].name);
        spit(in_dir(d, "config.json"), cfg_text, strlen(cfg_text), NULL, 0);
        uint64_t h = past[i].delta ? (uint64_t)(hl + fix.data_len) + (uint64_t)past[i].delta
                                   : UINT64_MAX;
        st_write_raw(in_dir(d, "model.safetensors"), h, hdr_txt, hl, fix.data, fix.data_len);
        refused(load_target_dir(d), past[i].name, in_dir(d, "model.safetensors"), NULL);
    }
    cJSON_free(hdr_txt);

    /* header bytes that are not a JSON object */
    static const struct {
        const char *name, *text;
    } notjson[] = {
        {"st_header_garbage", "this is { not json"},
        {"st_header_array", "[1, 2, 3]"},
        {"st_header_truncated_json", "{\"" QP "\": {\"dtype\": \"F32\", \"shape\": [64, 32"},
        {"st_header_empty", ""},
        {"st_header_one_byte", "{"},
    };
    for (size_t i = 0; i < sizeof notjson / sizeof *notjson; i++) {
        const char *d = new_dir(notjson[i].name);
        spit(in_dir(d, "config.json"), cfg_text, strlen(cfg_text), NULL, 0);
        size_t n = strlen(notjson[i].text);
        st_write_raw(in_dir(d, "model.safetensors"), n, notjson[i].text, n, fix.data,
                     fix.data_len);
        refused(load_target_dir(d), notjson[i].name, in_dir(d, "model.safetensors"), NULL);
    }

    /* per-entry defects: the message names the file and the tensor */
    edit_case("st_no_dtype", QP, e_no_dtype, NULL);
    edit_case("st_no_shape", QP, e_no_shape, NULL);
    edit_case("st_no_data_offsets", QP, e_no_offsets, NULL);
    edit_case("st_entry_not_object", QP, e_not_object, NULL);
    edit_case("st_dtype_I8", QP, e_dtype_i8, "I8");
    edit_case("st_dtype_F64", QP, e_dtype_f64, "F64");
    edit_case("st_dtype_number", QP, e_dtype_num, NULL);
    edit_case("st_shape_negative", QP, e_shape_neg, NULL);
    edit_case("st_shape_fraction", QP, e_shape_frac, NULL);
    edit_case("st_shape_5d", QP, e_shape_5d, NULL);
    edit_case("st_offsets_three", QP, e_offsets_3, NULL);
    edit_case("st_offsets_negative", QP, e_offsets_neg, NULL);
    edit_case("st_begin_gt_end", QP, e_begin_gt_end, NULL);
    edit_case("st_offsets_past_data", QP, e_past_end, NULL);
    edit_case("st_bytes_vs_shape", NW, e_count_short, NULL);
    edit_case("st_bytes_vs_dtype", NW, e_count_bf16, NULL);
    edit_case("st_overlap", QN, e_overlap, OP); /* names both tensors */
    edit_case("st_shape_vs_config", QP, e_wrong_rows, "[48,32]");
    edit_case("st_rank_vs_config", QP, e_wrong_rank, "[2,32,32]");
    {
        /* absent from every file: the message names the checkpoint directory */
        cJSON *h = cJSON_Duplicate(fix.hdr, 1);
        e_missing(NULL, h);
        const char *d = target_case("st_missing_tensor", h, fix.data_len);
        cJSON_Delete(h);
        refused(load_target_dir(d), "st_missing_tensor", d, "model.layers.3.mlp.up_proj.weight",
                NULL);
    }

    /* q_proj with wrong rows: the message names both shapes */
    {
        cJSON *h = cJSON_Duplicate(fix.hdr, 1);
        e_wrong_rows(cJSON_GetObjectItemCaseSensitive(h, QP), h);
        const char *d = target_case("st_shape_vs_config2", h, fix.data_len);
        cJSON_Delete(h);
        refused(load_target_dir(d), "q_proj [48,32] vs config [64,32]", QP, "[48,32]", "[64,32]",
                NULL);
    }

    /* data section cut short: the last tensor (model.norm.weight) runs past the end */
    {
        const char *d = target_case("st_truncated_data", fix.hdr, fix.data_len - 100);
        refused(load_target_dir(d), "st_truncated_data", in_dir(d, "model.safetensors"), NW,
                NULL);
        /* ... and cut inside the header: the length field now runs past the end */
        const char *d2 = new_dir("st_truncated_header");
        spit(in_dir(d2, "config.json"), cfg_text, strlen(cfg_text), NULL, 0);
        spit(in_dir(d2, "model.safetensors"), fix.file, 100, NULL, 0);
        refused(load_target_dir(d2), "st_truncated_header", in_dir(d2, "model.safetensors"),
                NULL);
    }

    /* a tensor name twice (in a region of its own, so only the name clashes) */
    {
        cJSON *h = cJSON_Duplicate(fix.hdr, 1);
        cJSON *dup = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(h, NW), 1);
        set_item(dup, "data_offsets", ints2((long long)fix.data_len, (long long)fix.data_len + 128));
        cJSON_AddItemToObject(h, NW, dup);
        const char *d = new_dir("st_duplicate_name");
        spit(in_dir(d, "config.json"), cfg_text, strlen(cfg_text), NULL, 0);
        st_write(in_dir(d, "model.safetensors"), h, fix.data, fix.data_len, 128);
        cJSON_Delete(h);
        refused(load_target_dir(d), "st_duplicate_name", d, NW, NULL);
    }

    /* overlap hidden behind a zero-byte tensor: embed [0, 12288) and norm moved to [200, 328);
     * an empty tensor at 100 sits between them in begin order */
    {
        cJSON *h = cJSON_Duplicate(fix.hdr, 1);
        set_item(cJSON_GetObjectItemCaseSensitive(h, NW), "data_offsets", ints2(200, 328));
        const char *d0 = target_case("st_overlap_plain", h, fix.data_len);
        refused(load_target_dir(d0), "st_overlap (norm inside embed)", in_dir(d0, "model.safetensors"),
                NW, EMB, NULL);
        cJSON *z = cJSON_CreateObject();
        cJSON_AddStringToObject(z, "dtype", "F32");
        int zero[1] = {0};
        cJSON_AddItemToObject(z, "shape", cJSON_CreateIntArray(zero, 1));
        cJSON_AddItemToObject(z, "data_offsets", ints2(100, 100));
        cJSON_AddItemToObject(h, "zz.empty", z);
        const char *d = new_dir("st_overlap_behind_empty");
        spit(in_dir(d, "config.json"), cfg_text, strlen(cfg_text), NULL, 0);
        st_write(in_dir(d, "model.safetensors"), h, fix.data, fix.data_len, 0);
        cJSON_Delete(h);
        rc = load_target_dir(d);
        tap_ok(rc == DB_EINPUT && strstr(err, NW) && strstr(err, EMB), "st_overlap_behind_empty: overlap still found with a zero-byte tensor "
                      "between (rc %d)", rc);
    }

    /* shape x dtype size overflowing 64 bits: [2^40, 2^22] F32 = 2^64 bytes, wraps to 0 */
    {
        cJSON *h = cJSON_CreateObject();
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "dtype", "F32");
        cJSON_AddItemToObject(e, "shape", ints2(1LL << 40, 1LL << 22));
        cJSON_AddItemToObject(e, "data_offsets", ints2(0, 0));
        cJSON_AddItemToObject(h, "huge", e);
        const char *d = new_dir("st_size_overflow");
        const char *p = in_dir(d, "model.safetensors");
        st_write(p, h, fix.data, 64, 0);
        cJSON_Delete(h);
        db_tensor_set s;
        err[0] = 0;
        rc = db_tensors_open_file(&s, p, err, sizeof err);
        int bad = rc == DB_EINPUT && strstr(err, "huge") != NULL;
        if (rc == DB_OK) {
            const db_tensor *t = db_tensors_find(&s, "huge");
            tap_diag("accepted: 'huge' shape [%lld, %lld], nbytes %zu", t ? (long long)t->shape[0] : -1,
                     t ? (long long)t->shape[1] : -1, t ? t->nbytes : 0);
            db_tensors_close(&s);
        }
        tap_ok(bad, "st_size_overflow: shape [2^40, 2^22] F32 with 0 data bytes refused (rc %d)",
                      rc);
    }
}

/* A bf16 checkpoint whose header length is odd: every tensor's data then starts at an odd
 * address of the mapping. The loader must refuse it (the safetensors format pads the header to
 * 8 bytes) or read it without misaligned uint16_t accesses. The load runs in a child process,
 * because the UBSan build aborts on the misaligned load; the parent checks the child returned
 * DB_OK or DB_EINPUT. */
static void misaligned_case(void)
{
    st_image im;
    const char *src = tu_data("qwen3-bf16-untied");
    if (st_load(&im, in_dir(src, "model.safetensors")) != 0) {
        tap_ok(0, "st_misaligned: fixture %s readable", src);
        st_free(&im);
        return;
    }
    char *h = cJSON_PrintUnformatted(im.hdr);
    size_t hl = strlen(h);
    char *padded = malloc(hl + 2);
    memcpy(padded, h, hl);
    if (hl % 2 == 0) padded[hl++] = ' '; /* JSON allows trailing blanks */
    const char *d = new_dir("st_misaligned_bf16");
    size_t cl;
    char *cfg = (char *)slurp(in_dir(src, "config.json"), &cl);
    spit(in_dir(d, "config.json"), cfg, cl, NULL, 0);
    st_write_raw(in_dir(d, "model.safetensors"), hl, padded, hl, im.data, im.data_len);
    free(cfg);
    free(padded);
    cJSON_free(h);
    st_free(&im);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int rc = load_target_dir(d);
        _exit(rc == DB_OK ? 0 : rc == DB_EINPUT ? 2 : 1);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        tap_ok(0, "st_misaligned_bf16: fork / wait");
        return;
    }
    int ok = WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 2);
    tap_ok(ok, "st_misaligned_bf16: odd header length -> refused or loaded without UB "
                  "(child %s %d)", WIFEXITED(status) ? "exit" : "signal",
                  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

/* ---------------------------------------------------------------- sharded index */

/* the directory d read with its index and shards in memory (db_tensors_open_index_mem, what the fuzz
 * harness runs) gives what db_tensors_open_dir gives: the same tensors and bytes, or the same message */
static void same_in_memory(const char *name, const char *d, const char *ip, const char *const *files,
                           unsigned char *const *blob, const size_t *blen)
{
    char e1[512] = "", e2[512] = "";
    size_t il;
    char *itxt = (char *)slurp(ip, &il);
    db_tensor_mem_file mf[2] = {{files[1], blob[1], blen[1]}, {files[2], blob[2], blen[2]}};
    db_tensor_set a, b;
    int r1 = db_tensors_open_dir(&a, d, e1, sizeof e1);
    int r2 = itxt ? db_tensors_open_index_mem(&b, d, itxt, mf, 2, e2, sizeof e2) : -99;
    int same = r1 == r2 && (r1 ? !strcmp(e1, e2) : a.ntensors == b.ntensors && a.ntensors > 0);
    for (int i = 0; same && !r1 && i < a.ntensors; i++) {
        const db_tensor *x = &a.tensors[i], *y = &b.tensors[i];
        same = !strcmp(x->name, y->name) && x->nbytes == y->nbytes && x->file == y->file &&
               memcmp(x->data, y->data, x->nbytes) == 0 && !strcmp(db_tensors_file_of(&a, x), db_tensors_file_of(&b, y));
    }
    if (!r1) db_tensors_close(&a);
    if (!r2) db_tensors_close(&b);
    free(itxt);
    tap_ok(same, "%s: read in memory, the same set or message (%s | %s)", name, r1 ? e1 : "loads", r2 ? e2 : "loads");
}

static void sharded_cases(void)
{
    const char *src = tu_data("qwen3-f32-sharded");
    static const char *files[] = {"config.json", "model-00001-of-00002.safetensors",
                                  "model-00002-of-00002.safetensors"};
    size_t ilen;
    char *index_txt = (char *)slurp(in_dir(src, "model.safetensors.index.json"), &ilen);
    cJSON *index = index_txt ? cJSON_Parse(index_txt) : NULL;
    free(index_txt);
    if (!index) {
        tap_ok(0, "sharded fixture readable");
        return;
    }
    unsigned char *blob[3];
    size_t blen[3];
    for (int i = 0; i < 3; i++) blob[i] = slurp(in_dir(src, files[i]), &blen[i]);

    /* most cases add an entry for a tensor no shard holds, at the end of weight_map, so the
     * shards themselves parse and the defect under test is the first one met */
    enum { CONTROL, MISSING_FILE, REMAP_MISSING, SLASH, DOTDOT, NOT_STRING, ABSENT_TENSOR,
           UNMAPPED, NOT_JSON, NO_MAP, NCASES };
    static const char *names[NCASES] = {
        "idx_control", "idx_missing_file", "idx_remap_missing_file", "idx_slash", "idx_dotdot",
        "idx_not_string", "idx_absent_tensor", "idx_unmapped_tensor", "idx_not_json",
        "idx_no_weight_map"};
    const char *T = "model.layers.2.mlp.up_proj.weight"; /* in shard 1 */
    const char *X = "model.extra.weight";                /* in no shard */
    char ctrl[700] = "";
    for (int c = 0; c < NCASES; c++) {
        const char *d = new_dir(names[c]);
        if (c == CONTROL) snprintf(ctrl, sizeof ctrl, "%s", d);
        for (int i = 0; i < 3; i++) spit(in_dir(d, files[i]), blob[i], blen[i], NULL, 0);
        const char *ip = in_dir(d, "model.safetensors.index.json");
        cJSON *ix = cJSON_Duplicate(index, 1);
        cJSON *wm = cJSON_GetObjectItemCaseSensitive(ix, "weight_map");
        switch (c) {
        case MISSING_FILE: set_item(wm, X, cJSON_CreateString("model-00009-of-00009.safetensors")); break;
        case REMAP_MISSING: set_item(wm, T, cJSON_CreateString("model-00009-of-00009.safetensors")); break;
        case SLASH: set_item(wm, X, cJSON_CreateString("sub/model-00001-of-00002.safetensors")); break;
        case DOTDOT: { /* an existing file: the control case's shard */
            char rel[800];
            snprintf(rel, sizeof rel, "../%s/model-00001-of-00002.safetensors", strrchr(ctrl, '/') + 1);
            set_item(wm, X, cJSON_CreateString(rel));
            break;
        }
        case NOT_STRING: set_item(wm, X, cJSON_CreateNumber(1)); break;
        case ABSENT_TENSOR: set_item(wm, X, cJSON_CreateString("model-00002-of-00002.safetensors")); break;
        case UNMAPPED: cJSON_DeleteItemFromObjectCaseSensitive(wm, T); break;
        case NO_MAP: cJSON_DeleteItemFromObjectCaseSensitive(ix, "weight_map"); break;
        default: break;
        }
        if (c == NOT_JSON) spit(ip, "{\"weight_map\": {", 16, NULL, 0);
        else spit_json(ip, ix);
        cJSON_Delete(ix);
        if (c == SLASH) { /* the file exists there: only the name is wrong */
            mkdir(in_dir(d, "sub"), 0700);
            spit(in_dir(d, "sub/model-00001-of-00002.safetensors"), blob[1], blen[1], NULL, 0);
        }
        int rc = load_target_dir(d);
        same_in_memory(names[c], d, ip, files, blob, blen);
        switch (c) {
        case CONTROL:
            tap_ok(rc == DB_OK, "idx_control: copied sharded checkpoint loads");
            if (rc) tap_diag("%s", err);
            break;
        case MISSING_FILE:
            refused(rc, names[c], "model-00009-of-00009.safetensors", NULL);
            tap_ok(rc == DB_EINPUT && strstr(err, X) != NULL, "idx_missing_file: message also names the tensor");
            break;
        case REMAP_MISSING: refused(rc, names[c], T, NULL); break;
        case SLASH:
        case DOTDOT:
        case NOT_STRING: refused(rc, names[c], ip, X, NULL); break;
        case ABSENT_TENSOR:
            refused(rc, names[c], ip, X, "model-00002-of-00002.safetensors", NULL);
            break;
        case UNMAPPED: refused(rc, names[c], in_dir(d, "model-00001-of-00002.safetensors"), T, NULL); break;
        default: refused(rc, names[c], ip, NULL); break;
        }
    }
    for (int i = 0; i < 3; i++) free(blob[i]);
    cJSON_Delete(index);
}

/* ---------------------------------------------------------------- config.json (target) */

static void config_case(const char *name, const cJSON *cfg, const char *needle1,
                        const char *needle2)
{
    const char *d = new_dir(name);
    spit_json(in_dir(d, "config.json"), cfg);
    st_write(in_dir(d, "model.safetensors"), fix.hdr, fix.data, fix.data_len, 0);
    refused(load_target_dir(d), name, in_dir(d, "config.json"), needle1, needle2, NULL);
}

static void config_cases(void)
{
    cJSON *base = cJSON_Parse(cfg_text);
    char name[96];

    {
        const char *d = new_dir("cfg_control");
        spit_json(in_dir(d, "config.json"), base);
        st_write(in_dir(d, "model.safetensors"), fix.hdr, fix.data, fix.data_len, 0);
        int rc = load_target_dir(d);
        tap_ok(rc == DB_OK, "cfg_control: re-serialised config loads");
        if (rc) tap_diag("%s", err);
    }

    static const char *not_json[] = {"{\"hidden_size\": 32,", "[1, 2]", "", "hidden_size = 32"};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "cfg_not_json%d", i);
        const char *d = new_dir(name);
        spit(in_dir(d, "config.json"), not_json[i], strlen(not_json[i]), NULL, 0);
        st_write(in_dir(d, "model.safetensors"), fix.hdr, fix.data, fix.data_len, 0);
        refused(load_target_dir(d), name, in_dir(d, "config.json"), NULL);
    }
    {
        const char *d = new_dir("cfg_absent");
        st_write(in_dir(d, "model.safetensors"), fix.hdr, fix.data, fix.data_len, 0);
        refused(load_target_dir(d), "cfg_absent", in_dir(d, "config.json"), NULL);
    }

    static const char *required[] = {"hidden_size", "intermediate_size", "num_hidden_layers",
                                     "num_attention_heads", "vocab_size", "rms_norm_eps",
                                     "rope_theta", "model_type"};
    for (int i = 0; i < 8; i++) {
        cJSON *c = cJSON_Duplicate(base, 1);
        cJSON_DeleteItemFromObjectCaseSensitive(c, required[i]);
        snprintf(name, sizeof name, "cfg_missing_%s", required[i]);
        config_case(name, c, required[i], NULL);
        /* null is missing too */
        cJSON_AddNullToObject(c, required[i]);
        snprintf(name, sizeof name, "cfg_null_%s", required[i]);
        config_case(name, c, required[i], NULL);
        cJSON_Delete(c);
    }

    static const struct {
        const char *key, *json;
    } bad_vals[] = {
        {"hidden_size", "32.5"},        {"hidden_size", "\"32\""},   {"hidden_size", "0"},
        {"hidden_size", "-32"},         {"intermediate_size", "true"},
        {"num_hidden_layers", "6.0001"}, {"num_hidden_layers", "1e9"}, {"num_attention_heads", "[4]"},
        {"num_key_value_heads", "2.5"}, {"num_key_value_heads", "0"}, {"vocab_size", "{}"},
        {"head_dim", "16.5"},           {"rms_norm_eps", "\"1e-6\""}, {"rope_theta", "\"1e4\""},
        {"max_position_embeddings", "-1"},
    };
    for (size_t i = 0; i < sizeof bad_vals / sizeof *bad_vals; i++) {
        cJSON *c = cJSON_Duplicate(base, 1);
        set_item(c, bad_vals[i].key, cJSON_Parse(bad_vals[i].json));
        snprintf(name, sizeof name, "cfg_bad_%s=%s", bad_vals[i].key, bad_vals[i].json);
        for (char *p = name; *p; p++)
            if (*p == '"' || *p == '[' || *p == ']' || *p == '{' || *p == '}') *p = '_';
        config_case(name, c, bad_vals[i].key, NULL);
        cJSON_Delete(c);
    }

    {
        cJSON *c = cJSON_Duplicate(base, 1);
        set_item(c, "model_type", cJSON_CreateString("gpt2"));
        config_case("cfg_model_type_gpt2", c, "model_type", "gpt2");
        set_item(c, "model_type", cJSON_CreateNumber(3));
        config_case("cfg_model_type_number", c, "model_type", NULL);
        cJSON_Delete(c);
    }
    {
        /* yarn refused by name, in each of the places HF configs put it */
        static const char *yarn[] = {
            "{\"rope_type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 256}",
            "{\"type\": \"yarn\", \"factor\": 4.0}"};
        for (int i = 0; i < 2; i++) {
            cJSON *c = cJSON_Duplicate(base, 1);
            set_item(c, "rope_scaling", cJSON_Parse(yarn[i]));
            snprintf(name, sizeof name, "cfg_rope_scaling_yarn%d", i);
            config_case(name, c, "yarn", NULL);
            cJSON_Delete(c);
        }
        cJSON *c = cJSON_Duplicate(base, 1);
        cJSON_DeleteItemFromObjectCaseSensitive(c, "rope_theta");
        set_item(c, "rope_parameters",
                 cJSON_Parse("{\"rope_type\": \"yarn\", \"rope_theta\": 10000.0, \"factor\": 2}"));
        config_case("cfg_rope_parameters_yarn", c, "yarn", NULL);
        cJSON_Delete(c);
    }
    {
        cJSON *c = cJSON_Duplicate(base, 1);
        set_item(c, "num_key_value_heads", cJSON_CreateNumber(3));
        config_case("cfg_heads_not_multiple_of_kv", c, "num_key_value_heads", "num_attention_heads");
        cJSON_Delete(c);
    }
    {
        cJSON *c = cJSON_Duplicate(base, 1);
        set_item(c, "eos_token_id", cJSON_CreateNumber(96));
        config_case("cfg_eos_outside_vocab", c, "eos_token_id", NULL);
        cJSON_Delete(c);
    }
    {
        /* a fractional token id is not a token id */
        cJSON *c = cJSON_Duplicate(base, 1);
        set_item(c, "eos_token_id", cJSON_CreateNumber(94.5));
        const char *d = new_dir("cfg_eos_fraction");
        spit_json(in_dir(d, "config.json"), c);
        st_write(in_dir(d, "model.safetensors"), fix.hdr, fix.data, fix.data_len, 0);
        cJSON_Delete(c);
        int rc = load_target_dir(d);
        tap_ok(rc == DB_EINPUT && strstr(err, "eos_token_id"), "cfg_eos_fraction: eos_token_id 94.5 refused (rc %d)", rc);
    }
    cJSON_Delete(base);
}

/* ---------------------------------------------------------------- drafter configs */

static db_target target;

static int load_drafter_dir(const char *dir)
{
    db_drafter d;
    err[0] = 0;
    int rc = db_drafter_load(&d, be, dir, &target, err, sizeof err);
    if (rc == DB_OK) db_drafter_free(&d);
    return rc;
}

typedef struct {
    const char *name;
    const char *path;  /* JSON path: "key" or "dflash_config.key" */
    const char *json;  /* new value; NULL deletes */
    const char *needle;
    int both_files;    /* message must also name the target's config.json */
} drafter_edit;

static void drafter_cases(const char *fixture)
{
    const char *src = tu_data(fixture);
    size_t cl, sl;
    char *ctext = (char *)slurp(in_dir(src, "config.json"), &cl);
    unsigned char *st = slurp(in_dir(src, "model.safetensors"), &sl);
    cJSON *base = ctext ? cJSON_Parse(ctext) : NULL;
    free(ctext);
    if (!base || !st) {
        tap_ok(0, "%s fixture readable", fixture);
        cJSON_Delete(base);
        free(st);
        return;
    }
    char tcfg[1200];
    snprintf(tcfg, sizeof tcfg, "%s", in_dir(tu_data("qwen3-f32-tied"), "config.json"));
    static const drafter_edit edits[] = {
        {"control", NULL, NULL, NULL, 0},
        {"no_dflash_config", "dflash_config", NULL, "dflash_config", 0},
        {"dflash_config_not_object", "dflash_config", "[94]", "dflash_config", 0},
        {"no_mask_token_id", "dflash_config.mask_token_id", NULL, "mask_token_id", 0},
        {"mask_token_id_vocab", "dflash_config.mask_token_id", "96", "mask_token_id", 0},
        {"mask_token_id_negative", "dflash_config.mask_token_id", "-1", "mask_token_id", 0},
        {"mask_token_id_fraction", "dflash_config.mask_token_id", "93.5", "mask_token_id", 0},
        {"target_layer_ids_6", "dflash_config.target_layer_ids", "[1, 3, 6]", "target_layer_ids", 0},
        {"target_layer_ids_negative", "dflash_config.target_layer_ids", "[-1, 3]", "target_layer_ids", 0},
        {"target_layer_ids_empty", "dflash_config.target_layer_ids", "[]", "target_layer_ids", 0},
        {"target_layer_ids_string", "dflash_config.target_layer_ids", "[\"1\"]", "target_layer_ids", 0},
        {"hidden_size_64", "hidden_size", "64", "hidden_size", 1},
        {"vocab_size_128", "vocab_size", "128", "vocab_size", 1},
        {"num_target_layers_5", "num_target_layers", "5", "num_target_layers", 1},
        {"no_architectures", "architectures", NULL, "architectures", 0},
        {"not_json", "", NULL, NULL, 0},
    };
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        const drafter_edit *e = &edits[i];
        char name[128];
        snprintf(name, sizeof name, "%s_%s", fixture, e->name);
        const char *d = new_dir(name);
        const char *cp = in_dir(d, "config.json");
        spit(in_dir(d, "model.safetensors"), st, sl, NULL, 0);
        if (e->path && !e->path[0]) {
            const char *txt = "{\"architectures\": [\"DFlash2DraftModel\"";
            spit(cp, txt, strlen(txt), NULL, 0);
        } else {
            cJSON *c = cJSON_Duplicate(base, 1), *obj = c;
            const char *key = e->path;
            if (key && strncmp(key, "dflash_config.", 14) == 0) {
                obj = cJSON_GetObjectItemCaseSensitive(c, "dflash_config");
                key += 14;
            }
            if (key && !obj) {
                tap_ok(0, "%s: fixture has no dflash_config", name);
                cJSON_Delete(c);
                continue;
            }
            if (key && e->json) set_item(obj, key, cJSON_Parse(e->json));
            else if (key) cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
            spit_json(cp, c);
            cJSON_Delete(c);
        }
        int rc = load_drafter_dir(d);
        if (!e->path) {
            tap_ok(rc == DB_OK, "%s: copied drafter loads", name);
            if (rc) tap_diag("%s", err);
        } else {
            refused(rc, name, cp, e->needle, e->both_files ? tcfg : NULL, NULL);
        }
    }

    /* a non-integer layer id is not a layer */
    {
        char name[128];
        snprintf(name, sizeof name, "%s_target_layer_ids_fraction", fixture);
        const char *d = new_dir(name);
        spit(in_dir(d, "model.safetensors"), st, sl, NULL, 0);
        cJSON *c = cJSON_Duplicate(base, 1);
        cJSON *dc = cJSON_GetObjectItemCaseSensitive(c, "dflash_config");
        if (dc) set_item(dc, "target_layer_ids", cJSON_Parse("[1.5, 3]"));
        spit_json(in_dir(d, "config.json"), c);
        cJSON_Delete(c);
        int rc = load_drafter_dir(d);
        tap_ok(rc == DB_EINPUT && strstr(err, "target_layer_ids"), "%s: refused (rc %d)", name, rc);
    }
    cJSON_Delete(base);
    free(st);
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
    snprintf(root, sizeof root, "%s/db-bad-input-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(root)) {
        printf("Bail out! mkdtemp %s failed\n", root);
        return 1;
    }
    T_DIR = tu_data("qwen3-f32-tied");
    size_t cl;
    cfg_text = (char *)slurp(in_dir(T_DIR, "config.json"), &cl);
    if (!cfg_text || st_load(&fix, in_dir(T_DIR, "model.safetensors")) != 0) {
        printf("Bail out! cannot read the fixture %s\n", T_DIR);
        return 1;
    }

    safetensors_cases();
    misaligned_case();
    sharded_cases();
    config_cases();

    if (db_target_load(&target, be, T_DIR, err, sizeof err) != 0) {
        tap_ok(0, "target %s loads: %s", T_DIR, err);
    } else {
        drafter_cases("dflash2-f32");
        drafter_cases("dflash-v1-f32");
        db_target_free(&target);
    }

    st_free(&fix);
    free(cfg_text);
    db_backend_destroy(be);
    if (!getenv("DB_KEEP_TMP")) nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    else tap_diag("kept %s", root);
    return tap_done();
}
