/* llama-greedy.c — greedy decode with llama.cpp's library on given prompt token ids, for
 * scripts/llama-compare-quant (built there against a llama.cpp build; not part of this tool).
 *
 *   llama-greedy [--f32-kv] [--no-repack] MODEL.gguf N ID,ID,...
 *                                         -> one line: the N generated ids, comma separated,
 *                                            then a tab and each step's top-1 minus top-2 logit
 *                                            (LLAMA_GREEDY_LOGITS=1: a second line, the logits
 *                                            of the last prompt row, comma separated)
 *
 * The prompt is fed as ids (no tokenization, no BOS added), one llama_decode for the prompt and
 * one per generated token, argmax over the logits (the lowest id on a tie), end-of-generation
 * tokens not stopping it: the same loop as `dflash-bench generate -v ar -T 0 --prompt-ids`. One
 * thread, so the run is reproducible. llama.cpp's defaults are kept (K/V cache f16, flash attention
 * as it chooses, weights repacked for its CPU kernels) unless
 *   --f32-kv     K/V cache f32 and flash attention off: its attention then multiplies f32 by f32
 *                (with the f16 cache it rounds the queries to f16, and flash attention also sums
 *                the weighted V rows in f16), the arithmetic of `generate --kv-dtype f32`
 *   --no-repack  no extra buffer types: the plain per-type dot products, not the repacked
 *                (interleaved-row) kernels some types take by default */
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv)
{
    int f32_kv = 0, no_repack = 0, a = 1;
    for (; a < argc && argv[a][0] == '-' && argv[a][1] == '-'; a++) {
        if (!strcmp(argv[a], "--f32-kv")) f32_kv = 1;
        else if (!strcmp(argv[a], "--no-repack")) no_repack = 1;
        else return fprintf(stderr, "unknown option %s\n", argv[a]), 2;
    }
    if (argc - a != 3) {
        fprintf(stderr, "usage: %s [--f32-kv] [--no-repack] MODEL.gguf N ID,ID,...\n", argv[0]);
        return 2;
    }
    const char *path = argv[a], *ids = argv[a + 2];
    int n = atoi(argv[a + 1]), np = 0;
    llama_token prompt[4096];
    for (char *s = argv[a + 2], *e; *s && np < 4096; s = *e ? e + 1 : e) {
        prompt[np++] = (llama_token)strtol(s, &e, 10);
        if (e == s) return fprintf(stderr, "bad id list %s\n", ids), 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    ggml_backend_load_all();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    if (no_repack) mp.use_extra_bufts = false;
    struct llama_model *model = llama_model_load_from_file(path, mp);
    if (!model) return fprintf(stderr, "%s: cannot load\n", path), 1;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(np + n + 16);
    cp.n_batch = (uint32_t)np;
    cp.n_threads = cp.n_threads_batch = 1;
    if (f32_kv) {
        cp.type_k = cp.type_v = GGML_TYPE_F32;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    }
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) return fprintf(stderr, "%s: no context\n", path), 1;
    int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_batch b = llama_batch_get_one(prompt, np);
    llama_token tok;
    char gaps[65536];
    size_t gl = 0;
    float *first = malloc(sizeof(float) * (size_t)nv);
    if (!first) return 1;
    for (int i = 0; i < n; i++) {
        if (llama_decode(ctx, b)) return fprintf(stderr, "decode failed\n"), 1;
        const float *lg = llama_get_logits_ith(ctx, -1);
        if (i == 0) memcpy(first, lg, sizeof(float) * (size_t)nv);
        int best = 0, second = -1;
        for (int v = 1; v < nv; v++) {
            if (lg[v] > lg[best]) second = best, best = v;
            else if (second < 0 || lg[v] > lg[second]) second = v;
        }
        tok = best;
        printf("%s%d", i ? "," : "", tok);
        gl += (size_t)snprintf(gaps + gl, sizeof gaps - gl, "%s%.4f", i ? "," : "", lg[best] - lg[second]);
        if (gl >= sizeof gaps) gl = sizeof gaps - 1;
        b = llama_batch_get_one(&tok, 1);
    }
    printf("\t%s\n", gaps);
    if (getenv("LLAMA_GREEDY_LOGITS"))
        for (int v = 0; v < nv; v++) printf("%.9g%s", first[v], v + 1 < nv ? "," : "\n");
    free(first);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
