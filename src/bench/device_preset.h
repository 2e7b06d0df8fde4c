/* device_preset.h — device presets (configs/devices/NAME.json): the figures a roofline needs, each
 * naming its source, read into db_hw (capacity.h) by `plan --device-config`, `run --predict` and
 * `run --shard`, and written for the measured CPU by `bench --write-device-config`.
 *
 * A preset (every key required unless marked optional; numbers are JSON numbers):
 *   name                     text: the device
 *   peak_bandwidth_gbs       published (or measured) memory bandwidth, GB/s
 *   bandwidth_efficiency     the fraction of it that streaming code reaches, (0, 1]
 *   peak_matmul_gflops       published dense matmul rate of the weights' dtype, GFLOP/s
 *   matmul_efficiency        {"ROWS": fraction, ...}: the fraction of the peak a GEMM of ROWS
 *                            activation rows reaches (1, 8, 16, 64, 256, 1024 rows; log-linear
 *                            between them, flat beyond the ends), each in (0, 1]
 *   forward_fixed_us         seconds x 1e6 of one forward beyond its bytes and FLOPs (kernel
 *                            launches, synchronisation, host work), >= 0
 *   sampled_token_us         seconds x 1e6 of one sampled row at T > 0 (softmax, top-k / top-p
 *                            over the vocabulary, the draw), >= 0
 *   attention_efficiency     optional {"QUERY_ROWS": fraction}: attention of that many query
 *                            rows per request at that fraction of the peak, K/V read inside the
 *                            figure (1, 2, 4, 8, 16); absent: attention is counted in the
 *                            forward's one roofline (its K/V bytes at the bandwidth)
 *   small_op_us              optional: one small elementwise op (8 a layer), >= 0
 *   sources                  {"KEY": "where the number comes from", ...}: one for every number
 *                            above (a datasheet, a published measurement, a `bench` run)
 * A missing key, a wrong type, a value out of range or a number without a source: DB_EINPUT,
 * "<path>: <key>: ..." (exit 2). */
#ifndef DB_DEVICE_PRESET_H
#define DB_DEVICE_PRESET_H

#include "bench/capacity.h"

int db_device_preset_load(const char *path, db_hw *hw, char *err, size_t errlen);
/* the same from the text of a preset (`path` names it in messages) */
int db_device_preset_parse(const char *text, const char *path, db_hw *hw, char *err, size_t errlen);
/* write hw as a preset (the inverse of the parse; sources given per key, NULL = "bench run"):
 * DB_EINPUT when the file cannot be written */
int db_device_preset_write(const char *path, const db_hw *hw, const char *source, char *err, size_t errlen);

#endif
