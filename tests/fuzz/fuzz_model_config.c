/* fuzz_model_config.c — config.json of a target and of a DFlash / DFlash 2 / DSpark drafter,
 * parsed from the input's bytes (db_model_config_parse / db_drafter_config_parse: what the
 * loaders run on the file's text). The first byte picks the target layer count the drafter
 * config is checked against (0..63). */
#include "fuzz.h"
#include "model/model_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    char err[512];
    const char *text = (const char *)data + 1;
    db_model_config m;
    if (db_model_config_parse(&m, "config.json", text, size - 1, err, sizeof err) == 0 &&
        (m.hidden <= 0 || m.n_layers <= 0 || m.n_heads <= 0 || m.vocab <= 0 || m.n_eos > DB_MAX_EOS))
        __builtin_trap(); /* a config that loads has usable shapes */
    db_drafter_config d;
    if (db_drafter_config_parse(&d, "config.json", text, size - 1, data[0] & 63, err, sizeof err) == 0) {
        if (d.n_taps < 0 || d.n_taps > DB_MAX_TAPS || d.block_size < 2) __builtin_trap();
        for (int i = 0; i < d.n_taps; i++)
            if (d.tap_layers[i] < 0 || d.tap_layers[i] >= (data[0] & 63)) __builtin_trap();
    }
    return 0;
}
