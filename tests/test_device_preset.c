/* test_device_preset.c — device presets and the whole-request cost (issue 40):
 *   presets: a good one parses to bandwidth = peak x efficiency and the matmul rate of its
 *     table (exact at its rows, log-linear between, flat beyond); every required key removed in
 *     turn, a wrong type, a value out of range, a number without a source, invalid JSON: DB_EINPUT
 *     naming the file and the key; `plan --device-config BAD` exits 2 with that one line; every
 *     preset of configs/devices/ parses;
 *   the whole request: the context integrated from prompt to prompt + n equals the closed-form
 *     sum of the per-step costs (a memory-bound step is linear in its context), and differs from
 *     the one-midpoint estimate only where the model is not linear; fixed costs per forward and
 *     per sampled row add exactly what they say;
 *   scripts/plan-validate: 15 cells, the table's columns, a summary line. */
#include "bench/capacity.h"
#include "bench/device_preset.h"
#include "bench/sweep.h"
#include "tap.h"
#include "base/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *GOOD =
    "{\"name\": \"test device\", \"peak_bandwidth_gbs\": 1000, \"bandwidth_efficiency\": 0.5,\n"
    " \"peak_matmul_gflops\": 100000, \"matmul_efficiency\": {\"1\": 0.01, \"64\": 0.4, \"1024\": 0.8},\n"
    " \"forward_fixed_us\": 100, \"sampled_token_us\": 10,\n"
    " \"sources\": {\"peak_bandwidth_gbs\": \"a\", \"bandwidth_efficiency\": \"b\", \"peak_matmul_gflops\": \"c\",\n"
    "   \"matmul_efficiency\": \"d\", \"forward_fixed_us\": \"e\", \"sampled_token_us\": \"f\"}}";

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)); }

/* GOOD with `from` replaced by `to` (once) */
static int parse_edit(const char *from, const char *to, db_hw *hw, char *err, size_t n)
{
    char text[2048];
    const char *at = strstr(GOOD, from);
    if (!at) return 99;
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - GOOD), GOOD, to, at + strlen(from));
    return db_device_preset_parse(text, "dev.json", hw, err, n);
}

static void test_parse(void)
{
    db_hw hw;
    char err[512] = "";
    int rc = db_device_preset_parse(GOOD, "dev.json", &hw, err, sizeof err);
    tap_ok(!rc && near(hw.bw, 500e9) && near(hw.fwd_s, 100e-6) && near(hw.sample_s, 10e-6) && hw.n_eff == 3,
           "good preset: bandwidth 1000 GB/s x 0.5, 100 us a forward, 10 us a sampled row (%s)", err);
    tap_ok(near(db_hw_rate(&hw, 1), 1e12) && near(db_hw_rate(&hw, 64), 40e12) && near(db_hw_rate(&hw, 1024), 80e12) &&
               near(db_hw_rate(&hw, 8), 1e12 * pow(40.0, 0.5)) && near(db_hw_rate(&hw, 256), 40e12 * pow(2.0, 0.5)) &&
               near(db_hw_rate(&hw, 4096), 80e12) && near(db_hw_rate(&hw, 0.5), 1e12),
           "matmul rate: the table's rows exactly, log-linear between (8: 1 x 40^0.5 TFLOP/s), flat beyond");
    static const char *keys[] = {"\"name\"", "\"peak_bandwidth_gbs\"", "\"bandwidth_efficiency\"", "\"peak_matmul_gflops\"",
                                 "\"matmul_efficiency\"", "\"forward_fixed_us\"", "\"sampled_token_us\"", "\"sources\""};
    int bad = 0;
    for (int i = 0; i < 8; i++) { /* renamed: the key is missing */
        char to[64], key[64];
        snprintf(to, sizeof to, "\"x%s", keys[i] + 1);
        snprintf(key, sizeof key, "%.*s: missing", (int)strlen(keys[i]) - 2, keys[i] + 1);
        rc = parse_edit(keys[i], to, &hw, err, sizeof err);
        if (rc != DB_EINPUT || !strstr(err, "dev.json: ") || !strstr(err, key)) {
            tap_diag("%s: rc %d, %s", keys[i], rc, err);
            bad++;
        }
    }
    tap_ok(!bad, "each required key missing: DB_EINPUT naming the file and the key");
    rc = parse_edit("\"peak_bandwidth_gbs\": 1000", "\"peak_bandwidth_gbs\": \"1000\"", &hw, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "dev.json: peak_bandwidth_gbs: not a number"), "wrong type: %s", err);
    rc = parse_edit("{\"1\": 0.01, \"64\": 0.4, \"1024\": 0.8}", "[0.01, 0.4]", &hw, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "dev.json: matmul_efficiency: not an object"), "table of the wrong type: %s", err);
    rc = parse_edit("\"64\": 0.4", "\"64\": \"x\"", &hw, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "matmul_efficiency.64: not a number"), "table entry of the wrong type: %s", err);
    rc = parse_edit("\"64\": 0.4", "\"64\": 1.5", &hw, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "matmul_efficiency.64: 1.5 outside (0, 1]"), "efficiency above 1: %s", err);
    rc = parse_edit("\"64\": 0.4, \"1024\"", "\"1024\": 0.4, \"64\"", &hw, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "rows must ascend"), "table rows out of order: %s", err);
    rc = parse_edit("\"bandwidth_efficiency\": 0.5", "\"bandwidth_efficiency\": 0", &hw, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "bandwidth_efficiency: 0 outside"), "efficiency 0: %s", err);
    rc = parse_edit("\"forward_fixed_us\": \"e\", ", "", &hw, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "dev.json: sources.forward_fixed_us: missing"), "a number without a source: %s", err);
    rc = db_device_preset_parse("{\"name\": ", "dev.json", &hw, err, sizeof err);
    tap_ok(rc == DB_EINPUT && strstr(err, "dev.json: not valid JSON"), "invalid JSON: %s", err);

    const char *root = getenv("DB_SOURCE_ROOT");
    static const char *presets[] = {"h200", "h100", "b200", "mi300x"};
    bad = 0;
    for (int i = 0; root && i < 4; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/configs/devices/%s.json", root, presets[i]);
        if (db_device_preset_load(p, &hw, err, sizeof err) || hw.n_eff < 6 || !(hw.bw > 0)) {
            tap_diag("%s", err);
            bad++;
        }
    }
    tap_ok(root && !bad, "configs/devices: h200, h100, b200, mi300x parse, each number with a source");

    /* the written preset reads back to the same figures */
    char path[512];
    snprintf(path, sizeof path, "%s/db-preset-%d.json", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    db_hw m = {.bw = 40e9, .flops = 300e9, .op_s = 2e-6};
    for (int i = 0; i < DB_HW_RATE_ROWS; i++) m.rate[i] = 10e9 * (1 << i) > 250e9 ? 250e9 : 10e9 * (1 << i);
    for (int i = 0; i < DB_HW_ATTN_ROWS; i++) m.attn_rate[i] = 20e9 * (i + 1);
    db_hw back;
    err[0] = 0;
    rc = db_device_preset_write(path, &m, "bench run (test)", err, sizeof err);
    if (!rc) rc = db_device_preset_load(path, &back, err, sizeof err);
    int same = !rc && near(back.bw, m.bw) && near(back.op_s, m.op_s);
    static const int rows[] = {1, 3, 8, 16, 64, 100, 256, 512, 2048};
    for (int i = 0; same && i < 9; i++) same = fabs(db_hw_rate(&back, rows[i]) / db_hw_rate(&m, rows[i]) - 1) < 1e-9;
    for (int i = 0; same && i < DB_HW_ATTN_ROWS; i++) same = near(back.attn_rate[i], m.attn_rate[i]);
    tap_ok(same, "a written preset reads back to the measured figures (rates at 1..2048 rows, attention, op) %s", err);
    remove(path);
}

static db_model_config tiny(void)
{
    db_model_config c;
    memset(&c, 0, sizeof c);
    c.hidden = 256, c.intermediate = 768, c.n_layers = 4, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 64;
    c.vocab = 1000, c.qk_norm = 1;
    return c;
}

/* the integrated context against the closed form: a memory-bound ar step costs a + b * ctx */
static void test_integrated(void)
{
    db_model_config t = tiny();
    db_hw hw = {.bw = 1e9, .flops = 1e18}; /* memory-bound at every context */
    db_step_shape s = db_variant_step(DB_VAR_AR, 4, 1, 0, 1, DB_F16);
    db_step_cost c0, c1;
    db_roofline_step(&t, NULL, DB_BF16, &hw, &s, &c0);
    s.ctx = 1000;
    db_roofline_step(&t, NULL, DB_BF16, &hw, &s, &c1);
    double a = c0.t, b = (c1.t - c0.t) / 1000; /* step time = a + b * ctx */
    double P = 100, n = 4096, steps = n - 1, sum = 0;
    for (long j = 0; j < (long)steps; j++) sum += a + b * (P + 1 + j); /* the per-step sum */
    double closed = steps * a + b * (steps * (P + 1) + steps * (steps - 1) / 2);
    double got = db_roofline_decode(&t, NULL, DB_BF16, &hw, &s, P + 1, n - 1, steps);
    tap_ok(fabs(got / closed - 1) < 1e-9 && fabs(sum / closed - 1) < 1e-9,
           "ar decode over contexts 101..4195 (1024 segments): %.9g s == closed form %.9g", got, closed);
    double ar_closed = closed;
    db_request_cost r;
    db_roofline_request(&t, NULL, DB_BF16, &hw, &s, P, n, &r);
    tap_ok(fabs(r.decode_s / closed - 1) < 1e-9 && r.steps == steps && near(r.tok_s, 4 * n / (r.prefill_s + r.decode_s)),
           "request: n - 1 steps from prompt + 1, tok/s = N n / (prefill + decode)");
    /* a cycle: tau 4, contexts step by 4 */
    db_drafter_config d;
    memset(&d, 0, sizeof d);
    d.base = tiny();
    d.base.n_layers = 1;
    d.n_taps = 2, d.block_size = 8, d.kind = DB_DRAFTER_V1;
    db_step_shape cy = db_variant_step(DB_VAR_DFLASH, 2, 8, 0, 4, DB_F16);
    db_roofline_step(&t, &d, DB_BF16, &hw, &cy, &c0);
    cy.ctx = 1000;
    db_roofline_step(&t, &d, DB_BF16, &hw, &cy, &c1);
    a = c0.t, b = (c1.t - c0.t) / 1000;
    double cyc = 1000; /* 4000 tokens in 1000 cycles */
    closed = cyc * a + b * (cyc * P + 4 * cyc * (cyc - 1) / 2);
    got = db_roofline_decode(&t, &d, DB_BF16, &hw, &cy, P, 4000, cyc);
    tap_ok(fabs(got / closed - 1) < 1e-9, "cycles at tau 4 over contexts 100, 104, ..., 4096: %.9g == closed form %.9g", got, closed);
    s.ctx = P + 1 + (steps - 1) / 2; /* the mean context agrees where the model is linear */
    db_roofline_step(&t, NULL, DB_BF16, &hw, &s, &c0);
    tap_ok(fabs(steps * c0.t / ar_closed - 1) < 1e-9, "linear model: the midpoint step x steps == the integral");
    /* fixed costs */
    db_hw f = hw;
    f.fwd_s = 1e-3, f.sample_s = 1e-5;
    cy.ctx = 500;
    cy.sampling = 1;
    db_roofline_step(&t, &d, DB_BF16, &hw, &cy, &c0);
    db_roofline_step(&t, &d, DB_BF16, &f, &cy, &c1);
    tap_ok(near(c1.t - c0.t, 2e-3 + (2 * 8 + 2 * 7) * 1e-5),
           "cycle of 2 requests, block 8, sampled: 2 forwards + 16 verify rows + 14 drafted rows of fixed cost");
    cy.sampling = 0;
    db_roofline_step(&t, &d, DB_BF16, &f, &cy, &c1);
    tap_ok(near(c1.t - c0.t, 2e-3), "greedy: the forwards' fixed cost only");
    /* a chain drafter (eagle3, mtp): its B-1 steps one fixed cost (one captured sequence), each
     * step sampling its N rows, and the same verify as a block draft */
    d.kind = DB_DRAFTER_EAGLE3, d.n_taps = 3, d.draft_vocab = t.vocab, d.target_hidden = t.hidden;
    cy = db_variant_step(DB_VAR_EAGLE3, 2, 8, 500, 4, DB_F16);
    cy.sampling = 1;
    db_roofline_step(&t, &d, DB_BF16, &hw, &cy, &c0);
    db_roofline_step(&t, &d, DB_BF16, &f, &cy, &c1);
    tap_ok(near(c1.draft.t - c0.draft.t, 1e-3 + 2 * 7 * 1e-5) && near(c1.verify.t - c0.verify.t, 1e-3 + 2 * 8 * 1e-5) &&
               near(c1.t - c0.t, 2e-3 + (2 * 8 + 2 * 7) * 1e-5),
           "chain cycle of 2 requests, block 8, sampled: the chain's and the verify's fixed cost, 16 verify rows + 14 drafted rows");
}

/* scripts/plan-validate: the shape of its output */
static void test_validate_script(void)
{
    const char *root = getenv("DB_SOURCE_ROOT"), *bin = getenv("DB_BIN");
    if (!root || !bin || system("/usr/bin/python3 -c 1 >/dev/null 2>&1") != 0) {
        tap_ok(1, "# SKIP DB_SOURCE_ROOT / DB_BIN / python3 missing");
        return;
    }
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "cd '%s' && /usr/bin/python3 scripts/plan-validate --binary '%s'", root, bin);
    FILE *p = popen(cmd, "r");
    char line[512];
    int rows = 0, header = 0, summary = 0, cols_ok = 1;
    while (p && fgets(line, sizeof line, p)) {
        if (!strncmp(line, "| dataset | c | published tok/s | predicted tok/s |", 50)) header = 1;
        else if (line[0] == '|' && line[1] != '-') {
            int bars = 0;
            for (char *c = line; *c; c++) bars += *c == '|';
            cols_ok = cols_ok && bars == 10;
            rows++;
        } else if (strstr(line, " of 15 cells within")) summary = 1;
    }
    int rc = p ? pclose(p) : -1;
    tap_ok(header && rows == 15 && cols_ok && summary && rc != -1 && WEXITSTATUS(rc) <= 1,
           "plan-validate: header, 15 rows of 9 columns, a summary line (exit %d)", rc == -1 ? -1 : WEXITSTATUS(rc));
}

/* the CLI: a bad preset exits 2 with one line naming the file and the key */
static void test_cli_bad(void)
{
    const char *root = getenv("DB_SOURCE_ROOT"), *bin = getenv("DB_BIN");
    if (!root || !bin) {
        tap_ok(1, "# SKIP DB_SOURCE_ROOT / DB_BIN missing");
        return;
    }
    char path[512], out[512], cmd[3000], line[512] = "";
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, sizeof path, "%s/db-bad-preset-%d.json", tmp, (int)getpid());
    snprintf(out, sizeof out, "%s/db-bad-preset-%d.err", tmp, (int)getpid());
    FILE *f = fopen(path, "w");
    const char *at = strstr(GOOD, "\"sampled_token_us\": 10,");
    if (f) fprintf(f, "%.*s%s", (int)(at - GOOD), GOOD, at + strlen("\"sampled_token_us\": 10,"));
    if (f) fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' plan --target-config '%s/configs/models/qwen3-0.6b.json' --device-config '%s' --no-measure >/dev/null 2>'%s'",
             bin, root, path, out);
    int rc = system(cmd), lines = 0;
    FILE *e = fopen(out, "r");
    char buf[512];
    while (e && fgets(buf, sizeof buf, e)) lines++, snprintf(line, sizeof line, "%s", buf);
    if (e) fclose(e);
    tap_ok(rc != -1 && WEXITSTATUS(rc) == 2 && lines == 1 && strstr(line, path) && strstr(line, "sampled_token_us: missing"),
           "plan --device-config with a key missing: exit 2, one line naming the file and the key: %s", line);
    remove(path);
    remove(out);
    /* run's key: refused when set, naming the key, the file and its key */
    db_sweep *sw = calloc(1, sizeof *sw);
    char e2[1024] = "";
    if (sw) db_sweep_init(sw);
    f = fopen(path, "w");
    if (f) fprintf(f, "%.*s%s", (int)(at - GOOD), GOOD, at + strlen("\"sampled_token_us\": 10,"));
    if (f) fclose(f);
    rc = sw ? db_sweep_set(sw, "device_config", path, e2, sizeof e2) : -99;
    tap_ok(rc == DB_EINPUT && strstr(e2, "device_config: ") && strstr(e2, path) && strstr(e2, "sampled_token_us: missing") &&
               sw->device_config[0] == 0,
           "run --device-config BAD: refused when given: %s", e2);
    snprintf(cmd, sizeof cmd, "%s/configs/devices/h200.json", root);
    rc = sw ? db_sweep_set(sw, "device_config", cmd, e2, sizeof e2) : -99;
    tap_ok(rc == DB_OK && !strcmp(sw->device_config, cmd), "run --device-config configs/devices/h200.json is taken");
    free(sw);
    remove(path);
}

int main(void)
{
    test_parse();
    test_integrated();
    test_cli_bad();
    test_validate_script();
    return tap_done();
}
