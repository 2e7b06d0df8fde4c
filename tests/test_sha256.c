/* test_sha256.c — SHA-256 against the FIPS 180-2 appendix vectors, incremental updates, and the
 * model-directory hash (one file = its hash; shards = hash of the sha256sum listing). */
#include "result/run_meta.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include "base/sha256.h"
#include "tap.h"
#include "test_util.h"
#include "base/util.h"

#include <string.h>

/* one shot: init, one update, final */
static void sha256_buf(const void *data, size_t n, char hex[65])
{
    db_sha256 s;
    unsigned char d[32];
    db_sha256_init(&s);
    db_sha256_update(&s, data, n);
    db_sha256_final(&s, d);
    db_sha256_hex(d, hex);
}

int main(void)
{
    db_json_init(); /* cJSON allocates through the fault-injecting wrappers */
    char hex[65];
    sha256_buf("abc", 3, hex);
    tap_ok(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
           "FIPS 180-2 B.1 'abc'");
    const char *m2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_buf(m2, strlen(m2), hex);
    tap_ok(!strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
           "FIPS 180-2 B.2 two-block message");
    static char a[1000000];
    memset(a, 'a', sizeof a);
    sha256_buf(a, sizeof a, hex);
    tap_ok(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
           "FIPS 180-2 B.3 one million 'a'");
    sha256_buf("", 0, hex);
    tap_ok(!strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
           "empty message");
    /* odd chunk sizes across block boundaries give the same digest */
    db_sha256 s;
    unsigned char d[32];
    db_sha256_init(&s);
    size_t off = 0, step = 1;
    while (off < sizeof a) {
        size_t n = step < sizeof a - off ? step : sizeof a - off;
        db_sha256_update(&s, a + off, n);
        off += n;
        step = step * 7 % 997 + 1;
    }
    db_sha256_final(&s, d);
    db_sha256_hex(d, hex);
    tap_ok(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
           "incremental updates in odd chunks");
    /* 55/56/63/64-byte messages exercise both padding branches */
    char m[64];
    memset(m, 'x', sizeof m);
    char h1[65], h2[65];
    int pad_ok = 1;
    for (size_t n = 55; n <= 64; n++) {
        sha256_buf(m, n, h1);
        db_sha256_init(&s);
        db_sha256_update(&s, m, n / 2);
        db_sha256_update(&s, m + n / 2, n - n / 2);
        db_sha256_final(&s, d);
        db_sha256_hex(d, h2);
        if (strcmp(h1, h2)) pad_ok = 0;
    }
    tap_ok(pad_ok, "split and one-shot agree for lengths 55..64");
    sha256_buf(m, 56, hex);
    tap_ok(!strcmp(hex, "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e"),
           "56 bytes: the length spills into a second block");
    sha256_buf(m, 64, hex);
    tap_ok(!strcmp(hex, "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c"),
           "64 bytes: exactly one block before padding");

    /* model hashes */
    db_model_meta mm = {0};
    char err[512] = "", one[65], listing[300];
    const char *tied = tu_data("qwen3-f32-tied");
    int rc = db_model_meta_hash(&mm, tied, err, sizeof err);
    db_sha256_file(tu_data("qwen3-f32-tied/model.safetensors"), one, err, sizeof err);
    tap_ok(rc == 0 && mm.n_files == 1 && !strcmp(mm.sha256, one) &&
               !strcmp(mm.name, "qwen3-f32-tied"),
           "one weight file: the model hash is that file's sha256 (%s)", err);
    rc = db_model_meta_hash(&mm, tu_data("qwen3-f32-sharded"), err, sizeof err);
    char h[2][65];
    db_sha256_file(tu_data("qwen3-f32-sharded/model-00001-of-00002.safetensors"), h[0], err,
                   sizeof err);
    db_sha256_file(tu_data("qwen3-f32-sharded/model-00002-of-00002.safetensors"), h[1], err,
                   sizeof err);
    int n = snprintf(listing, sizeof listing, "%s  model-00001-of-00002.safetensors\n%s  model-00002-of-00002.safetensors\n", h[0], h[1]);
    sha256_buf(listing, (size_t)n, one);
    tap_ok(rc == 0 && mm.n_files == 2 && !strcmp(mm.sha256, one),
           "shards: the hash of the sha256sum listing in name order");
    rc = db_model_meta_hash(&mm, tu_data("qwen3-f32-tied/model.safetensors"), err, sizeof err);
    tap_ok(rc == 0 && mm.n_files == 1, "a weight file path works too");
    rc = db_model_meta_hash(&mm, tu_data("no-such-model"), err, sizeof err);
    tap_ok(rc == DB_EINPUT, "missing model directory: DB_EINPUT (%s)", err);
    free(mm.files);

    /* run metadata: models, command line, meta.json */
    db_run_meta meta;
    char *argv[] = {"dflash-bench", "run", "--dataset", "my set", "it's", "--block-size=8,16"};
    db_run_meta_init(&meta, 6, argv, 7, "lbl", (time_t)1795917600);
    rc = db_run_meta_add_model(&meta, tu_data("qwen3-f32-sharded"), "f32", NULL, err, sizeof err);
    if (!rc) rc = db_run_meta_add_model(&meta, tu_data("dflash2-v16-f32"), "f32", NULL, err, sizeof err);
    if (!rc) rc = db_run_meta_add_model(&meta, tu_data("qwen3-f32-sharded"), "f32", NULL, err, sizeof err);
    tap_ok(rc == 0 && meta.n_models == 2 && db_run_meta_model(&meta, "qwen3-f32-sharded")->n_files == 2 &&
               db_run_meta_model(&meta, "dflash2-v16-f32")->n_files == 1 &&
               !strcmp(db_run_meta_model(&meta, "dflash2-v16-f32")->dtype, "f32"),
           "models hashed once per path, found by name (%s)", err);
    tap_ok(meta.command_line &&
               !strcmp(meta.command_line,
                       "dflash-bench run --dataset 'my set' 'it'\\''s' --block-size=8,16"),
           "command line quoted for a shell: %s", meta.command_line ? meta.command_line : "");
    tap_ok(!strcmp(meta.test_time, "2026-11-29T02:00:00Z") && meta.schema_version == DB_SCHEMA_VERSION &&
               meta.cpu.cores >= 1 && meta.cpu.pus >= meta.cpu.cores,
           "time, schema, CPU facts");
    db_run_meta_set_backend(&meta, "cpu", "dev", "avx2", 2);
    db_run_meta_set_backend(&meta, "cuda", "H200", "", 0);
    db_run_meta_set_backend(&meta, "cpu", "dev", "avx2", 4);
    tap_ok(meta.n_backends == 2 && meta.cur == 0 && db_run_meta_backend(&meta)->threads == 4,
           "backends are listed once, the current one selected");
    cJSON *j = db_run_meta_json(&meta);
    cJSON *models = cJSON_GetObjectItem(j, "models");
    cJSON *tf = cJSON_GetObjectItem(cJSON_GetArrayItem(models, 0), "files");
    cJSON *feat = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "build"), "features");
    tap_ok(cJSON_GetArraySize(tf) == 2 &&
               !strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(tf, 0), "name")->valuestring,
                       "model-00001-of-00002.safetensors") &&
               cJSON_GetObjectItem(feat, "hwloc") && !strcmp(cJSON_GetObjectItem(j, "seed")->valuestring, "7") &&
               cJSON_GetArraySize(cJSON_GetObjectItem(j, "backends")) == 2,
           "meta.json lists weight files, features, backends, seed");
    char *txt = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "machine"), "cpu"));
    tap_diag("machine.cpu: %s", txt);
    free(txt);
    cJSON_Delete(j);
    tap_ok(db_run_meta_model(&meta, "")->name[0] == 0 && db_run_meta_model(&meta, "qwen3-f32-tied")->sha256[0] == 0,
           "no drafter (an ar row), or a model not listed: an empty entry");
    db_run_meta_free(&meta);
    return tap_done();
}
