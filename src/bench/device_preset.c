/* device_preset.c — device presets (configs/devices/NAME.json) to and from db_hw (device_preset.h). */
#include "bench/device_preset.h"
#include "base/util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PRESET_MAX_BYTES (1 << 20)

/* a number under `key` in [lo, hi] with a source text in `src` */
static int number(const cJSON *root, const cJSON *src, const char *key, double lo, double hi, const char *path,
                  double *out, char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v) return db_fail(err, errlen, DB_EINPUT, "%s: %s: missing", path, key);
    if (!cJSON_IsNumber(v)) return db_fail(err, errlen, DB_EINPUT, "%s: %s: not a number", path, key);
    if (!(v->valuedouble >= lo && v->valuedouble <= hi))
        return db_fail(err, errlen, DB_EINPUT, "%s: %s: %g outside [%g, %g]", path, key, v->valuedouble, lo, hi);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(src, key);
    if (!cJSON_IsString(s) || !s->valuestring[0])
        return db_fail(err, errlen, DB_EINPUT, "%s: sources.%s: missing (every number names its source)", path, key);
    *out = v->valuedouble;
    return DB_OK;
}

/* {"ROWS": fraction, ...} into rows[] / val[] ascending; at most max entries; *n 0 when absent and
 * optional */
static int table(const cJSON *root, const cJSON *src, const char *key, int optional, int max, const char *path,
                 double *rows, double *val, int *n, char *err, size_t errlen)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, key);
    *n = 0;
    if (!t && optional) return DB_OK;
    if (!t) return db_fail(err, errlen, DB_EINPUT, "%s: %s: missing", path, key);
    if (!cJSON_IsObject(t) || !t->child)
        return db_fail(err, errlen, DB_EINPUT, "%s: %s: not an object of {\"ROWS\": fraction}", path, key);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(src, key);
    if (!cJSON_IsString(s) || !s->valuestring[0])
        return db_fail(err, errlen, DB_EINPUT, "%s: sources.%s: missing (every number names its source)", path, key);
    for (const cJSON *e = t->child; e; e = e->next) {
        char *end;
        long r = strtol(e->string, &end, 10);
        if (*n >= max) return db_fail(err, errlen, DB_EINPUT, "%s: %s: more than %d rows", path, key, max);
        if (end == e->string || *end || r < 1 || r > (1 << 20))
            return db_fail(err, errlen, DB_EINPUT, "%s: %s.%s: not a row count (1 .. 1048576)", path, key, e->string);
        if (*n > 0 && r <= rows[*n - 1])
            return db_fail(err, errlen, DB_EINPUT, "%s: %s.%s: rows must ascend", path, key, e->string);
        if (!cJSON_IsNumber(e)) return db_fail(err, errlen, DB_EINPUT, "%s: %s.%s: not a number", path, key, e->string);
        if (!(e->valuedouble > 0 && e->valuedouble <= 1))
            return db_fail(err, errlen, DB_EINPUT, "%s: %s.%s: %g outside (0, 1]", path, key, e->string, e->valuedouble);
        rows[*n] = (double)r;
        val[(*n)++] = e->valuedouble;
    }
    return DB_OK;
}

int db_device_preset_parse(const char *text, const char *path, db_hw *hw, char *err, size_t errlen)
{
    cJSON *root = cJSON_Parse(text);
    if (!root) return db_fail(err, errlen, DB_EINPUT, "%s: not valid JSON", path);
    int rc = DB_OK;
    db_hw h = {0};
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(root, "sources");
    double bw, gf, fwd_us, tok_us, op_us = 0, arows[DB_HW_ATTN_ROWS], aeff[DB_HW_ATTN_ROWS];
    int na = 0;
    if (!cJSON_IsObject(root)) rc = db_fail(err, errlen, DB_EINPUT, "%s: not a JSON object", path);
    else if (!name) rc = db_fail(err, errlen, DB_EINPUT, "%s: name: missing", path);
    else if (!cJSON_IsString(name)) rc = db_fail(err, errlen, DB_EINPUT, "%s: name: not a string", path);
    else if (!src) rc = db_fail(err, errlen, DB_EINPUT, "%s: sources: missing", path);
    else if (!cJSON_IsObject(src)) rc = db_fail(err, errlen, DB_EINPUT, "%s: sources: not an object", path);
    if (!rc) rc = number(root, src, "peak_bandwidth_gbs", 1e-3, 1e9, path, &bw, err, errlen);
    if (!rc) rc = number(root, src, "bandwidth_efficiency", 1e-6, 1, path, &h.bw_eff, err, errlen);
    if (!rc) rc = number(root, src, "peak_matmul_gflops", 1e-3, 1e12, path, &gf, err, errlen);
    if (!rc) rc = table(root, src, "matmul_efficiency", 0, DB_HW_EFF_MAX, path, h.eff_rows, h.eff, &h.n_eff, err, errlen);
    if (!rc) rc = number(root, src, "forward_fixed_us", 0, 1e9, path, &fwd_us, err, errlen);
    if (!rc) rc = number(root, src, "sampled_token_us", 0, 1e9, path, &tok_us, err, errlen);
    if (!rc) rc = table(root, src, "attention_efficiency", 1, DB_HW_ATTN_ROWS, path, arows, aeff, &na, err, errlen);
    if (!rc && cJSON_GetObjectItemCaseSensitive(root, "small_op_us"))
        rc = number(root, src, "small_op_us", 0, 1e9, path, &op_us, err, errlen);
    for (int i = 0; !rc && i < na; i++)
        if (arows[i] != (double)(1 << i))
            rc = db_fail(err, errlen, DB_EINPUT, "%s: attention_efficiency: rows must be 1, 2, 4, 8, 16 in turn", path);
    if (!rc) {
        h.peak_bw = bw * 1e9;
        h.peak_flops = gf * 1e9;
        h.bw = h.peak_bw * h.bw_eff;
        h.flops = h.peak_flops * h.eff[h.n_eff - 1];
        h.fwd_s = fwd_us * 1e-6;
        h.sample_s = tok_us * 1e-6;
        h.op_s = op_us * 1e-6;
        for (int i = 0; i < na; i++) h.attn_rate[i] = h.peak_flops * aeff[i];
        for (int i = na; na > 0 && i < DB_HW_ATTN_ROWS; i++) h.attn_rate[i] = h.attn_rate[na - 1];
        snprintf(h.name, sizeof h.name, "%s", name->valuestring);
        snprintf(h.preset, sizeof h.preset, "%s", path);
        snprintf(h.bw_source, sizeof h.bw_source, "preset %s: %.0f GB/s x %.3f", path, bw, h.bw_eff);
        snprintf(h.flops_source, sizeof h.flops_source, "preset %s: %.0f GFLOP/s peak", path, gf);
        *hw = h;
    }
    cJSON_Delete(root);
    return rc;
}

int db_device_preset_load(const char *path, db_hw *hw, char *err, size_t errlen)
{
    char *text;
    size_t len;
    int rc = db_read_file_max(path, PRESET_MAX_BYTES, &text, &len, err, errlen);
    if (rc) return rc;
    rc = db_device_preset_parse(text, path, hw, err, errlen);
    free(text);
    return rc;
}

/* the measured rate table (capacity.h: 2^i rows and flops from 512) as efficiencies of peak */
int db_device_preset_write(const char *path, const db_hw *hw, const char *source, char *err, size_t errlen)
{
    double peak = hw->peak_flops > 0 ? hw->peak_flops : hw->flops;
    cJSON *root = cJSON_CreateObject(), *eff = NULL, *att = NULL, *src = NULL;
    const char *s = source ? source : "bench run";
    char rows[16];
    int ok = root != NULL;
    ok = ok && cJSON_AddStringToObject(root, "name", hw->name[0] ? hw->name : "measured device");
    ok = ok && cJSON_AddNumberToObject(root, "peak_bandwidth_gbs", (hw->peak_bw > 0 ? hw->peak_bw : hw->bw) / 1e9);
    ok = ok && cJSON_AddNumberToObject(root, "bandwidth_efficiency", hw->peak_bw > 0 ? hw->bw / hw->peak_bw : 1.0);
    ok = ok && cJSON_AddNumberToObject(root, "peak_matmul_gflops", peak / 1e9);
    ok = ok && (eff = cJSON_AddObjectToObject(root, "matmul_efficiency")) != NULL;
    static const int tab_rows[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}; /* the probe's rows */
    for (int i = 0; ok && i < 10; i++) {
        snprintf(rows, sizeof rows, "%d", tab_rows[i]);
        double e = peak > 0 ? db_hw_rate(hw, tab_rows[i]) / peak : 1;
        ok = cJSON_AddNumberToObject(eff, rows, fmin(1.0, fmax(1e-6, e))) != NULL;
    }
    ok = ok && cJSON_AddNumberToObject(root, "forward_fixed_us", hw->fwd_s * 1e6);
    ok = ok && cJSON_AddNumberToObject(root, "sampled_token_us", hw->sample_s * 1e6);
    if (ok && hw->attn_rate[0] > 0) {
        ok = (att = cJSON_AddObjectToObject(root, "attention_efficiency")) != NULL;
        for (int i = 0; ok && i < DB_HW_ATTN_ROWS; i++) {
            snprintf(rows, sizeof rows, "%d", 1 << i);
            ok = cJSON_AddNumberToObject(att, rows, fmin(1.0, fmax(1e-6, hw->attn_rate[i] / peak))) != NULL;
        }
        ok = ok && cJSON_AddNumberToObject(root, "small_op_us", hw->op_s * 1e6);
    }
    ok = ok && (src = cJSON_AddObjectToObject(root, "sources")) != NULL;
    static const char *const keys[] = {"peak_bandwidth_gbs", "bandwidth_efficiency", "peak_matmul_gflops",
                                       "matmul_efficiency", "forward_fixed_us", "sampled_token_us",
                                       "attention_efficiency", "small_op_us"};
    for (int i = 0; ok && i < 8; i++)
        if (i < 6 || att) ok = cJSON_AddStringToObject(src, keys[i], s) != NULL;
    char *txt = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!txt) return db_fail(err, errlen, DB_ERUNTIME, "out of memory formatting the device preset");
    FILE *f = fopen(path, "w");
    int rc = DB_OK;
    if (!f || fprintf(f, "%s\n", txt) < 0) rc = db_fail(err, errlen, DB_EINPUT, "%s: cannot write", path);
    if (f && fclose(f) != 0 && !rc) rc = db_fail(err, errlen, DB_EINPUT, "%s: cannot write", path);
    if (rc) remove(path);
    free(txt);
    return rc;
}
