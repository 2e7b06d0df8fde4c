/* cli_generate.c — `dflash-bench generate`: decode one prompt and print the ids. */
#include "cli.h"
#include "cli_args.h"
#include "decode.h"
#include "target.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int db_cmd_generate(int argc, char **argv, char *err, size_t errlen)
{
    const char *target_dir = NULL, *ids_text = NULL, *ids_file = NULL, *backend = "cpu";
    int max_new = 64, threads = 0, deterministic = 0, help = 0;
    const db_arg spec[] = {
        {"target", 't', DB_ARG_STR, &target_dir, "target checkpoint directory (config.json + safetensors)"},
        {"prompt-ids", 0, DB_ARG_STR, &ids_text, "prompt token ids, e.g. 1,2,3"},
        {"prompt-ids-file", 0, DB_ARG_STR, &ids_file, "file of prompt token ids (commas or whitespace)"},
        {"max-new-tokens", 'n', DB_ARG_INT, &max_new, "tokens to generate (default 64)"},
        {"backend", 'b', DB_ARG_STR, &backend, "compute backend (default cpu)"},
        {"threads", 0, DB_ARG_INT, &threads, "CPU threads (default: all cores)"},
        {"deterministic", 0, DB_ARG_FLAG, &deterministic, "batch-invariant reductions"},
        {"help", 'h', DB_ARG_FLAG, &help, "this help"},
    };
    int nspec = (int)(sizeof spec / sizeof *spec);
    int rc = db_args_parse(spec, nspec, argc, argv, 2, err, errlen);
    if (rc) return rc;
    if (help) {
        db_args_usage(spec, nspec, "generate", "Greedy decoding of one prompt with the target; ids to stdout, speed to stderr.");
        return DB_OK;
    }
    if (!target_dir) return db_fail(err, errlen, DB_EINPUT, "generate: --target DIR is required");
    if (!ids_text == !ids_file)
        return db_fail(err, errlen, DB_EINPUT, "generate: give exactly one of --prompt-ids, --prompt-ids-file");
    if (max_new < 1) return db_fail(err, errlen, DB_EINPUT, "generate: --max-new-tokens must be >= 1");
    char *file_text = NULL;
    if (ids_file && (rc = db_read_file(ids_file, &file_text, NULL, err, errlen))) return rc;
    int *prompt = NULL, n_prompt = 0;
    rc = db_parse_ids(ids_text ? ids_text : file_text, &prompt, &n_prompt, err, errlen);
    free(file_text);
    if (rc) return rc;
    if (n_prompt == 0) {
        free(prompt);
        return db_fail(err, errlen, DB_EINPUT, "generate: empty prompt");
    }
    db_backend *be = NULL;
    db_backend_opts bo = {.threads = threads, .deterministic = deterministic};
    db_target t = {0};
    int *out = malloc(sizeof(int) * (size_t)max_new);
    if (!out) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory");
    if (!rc && db_backend_create(backend, &bo, &be, err, errlen) != 0) rc = DB_EINPUT;
    if (!rc) rc = db_target_load(&t, be, target_dir, err, errlen);
    for (int i = 0; !rc && i < n_prompt; i++)
        if (prompt[i] >= t.cfg.vocab)
            rc = db_fail(err, errlen, DB_EINPUT, "generate: prompt id %d outside the vocabulary (%d)", prompt[i], t.cfg.vocab);
    if (!rc) {
        db_target_opts to = {.slots = 1, .capacity = n_prompt + max_new + 1, .max_rows = 256};
        rc = db_target_alloc(&t, &to, err, errlen);
    }
    int n_out = 0;
    double t0 = db_now(), t1 = t0;
    if (!rc) {
        rc = db_decode_greedy(&t, 0, prompt, n_prompt, max_new, out, &n_out, err, errlen);
        t1 = db_now();
    }
    if (!rc) {
        for (int i = 0; i < n_out; i++) printf("%s%d", i ? "," : "", out[i]);
        printf("\n");
        fprintf(stderr, "generated %d tokens in %.3f s (%.1f tok/s, prompt %d tokens, backend %s, %s)\n",
                n_out, t1 - t0, n_out / (t1 - t0 > 0 ? t1 - t0 : 1e-9), n_prompt, backend, be->simd);
    }
    free(out);
    free(prompt);
    db_target_free(&t);
    db_backend_destroy(be);
    return rc;
}
