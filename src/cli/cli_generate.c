/* cli_generate.c — `dflash-bench generate`: decode one prompt with a variant (autoregressive
 * or speculative) and print the output ids to stdout; cycle statistics go to stderr. */
#include "bench/prompt_set.h"
#include "bench/runner.h"
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "engine/engine.h"
#include "text/prompt.h"
#include "engine/session.h"
#include "text/tokenizer.h"
#include "base/paths.h"
#include "base/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_trace(void *user, int req, int pos, const int *block, int b, int a, int bonus)
{
    (void)user;
    fprintf(stderr, "cycle req %d pos %d draft", req, pos);
    for (int i = 1; i < b; i++) fprintf(stderr, "%s%d", i == 1 ? " " : ",", block[i]);
    fprintf(stderr, " accepted %d bonus %d\n", a, bonus);
}

/* greedy: each picked row's margin (top-1 minus top-2 logit), in pick order */
static void print_pick(void *user, int row, int token, float margin)
{
    (void)user;
    fprintf(stderr, "pick row %d token %d margin %.4f\n", row, token, margin);
}

/* the speculative statistics of one request, on stderr */
static void print_stats(const db_request *r, int B, double secs)
{
    const db_req_stats *s = &r->st;
    fprintf(stderr, "tokens %d, cycles %d (prefill excluded), tau %.3f, %.1f tok/s (%.3f s)\n", r->n_out,
            s->cycles, s->cycles ? db_req_stats_tau(s) : 0.0, r->n_out / (secs > 0 ? secs : 1e-9), secs);
    if (B < 2) return;
    long spec = s->cycles;
    fprintf(stderr, "position  drafted  accepted  conditional  recall@1  recall@k\n");
    for (int i = 1; i < B; i++)
        fprintf(stderr, "%8d %8ld %9ld %12.3f %9.3f %9.3f\n", i, s->drafted[i], s->accepted[i],
                s->reached[i] ? (double)s->accepted[i] / s->reached[i] : 0.0,
                s->recall_n[i] ? (double)s->recall1[i] / s->recall_n[i] : 0.0,
                s->recall_n[i] ? (double)s->recallk[i] / s->recall_n[i] : 0.0);
    if (spec > 0) {
        double c = (double)spec;
        fprintf(stderr, "per cycle: draft %.3f ms, select %.3f ms, correct %.3f ms, verify %.3f ms, host %.3f ms; "
                "oracle tau %.3f\n", 1e3 * s->t_draft / c, 1e3 * s->t_select / c, 1e3 * s->t_correct / c,
                1e3 * s->t_verify / c, 1e3 * s->t_host / c, (double)s->oracle_len_sum / c);
    }
}

typedef struct {
    const char *target_dir, *drafter_dir, *ids_text, *ids_file, *backend, *variant_name, *prompt_text,
        *dataset, *tok_path, *template_name, *kv_s;
    db_dtype kv_dtype;
    int index, thinking, max_new, threads, deterministic, block, top_k, seed, trace, long_context;
    float temperature, top_p;
} gen_opts;

static int parse_options(gen_opts *g, int argc, char **argv, int *help, char *err, size_t errlen)
{
    *g = (gen_opts){.backend = "cpu", .template_name = "auto", .max_new = 64, .top_p = 1.0f, .kv_s = "auto"};
    char names[200], vhelp[300];
    snprintf(vhelp, sizeof vhelp, "%s (default: dflash2 with a DFlash 2 drafter, dflash with a DFlash 1 one, else ar)",
             db_variant_names(names, sizeof names, 0));
    const db_opt opts[] = {
        {"target", 't', "DIR", "target checkpoint directory (config.json + safetensors)", NULL, DB_OPT_STR, &g->target_dir},
        {"drafter", 'd', "DIR", "DFlash / DFlash 2 drafter directory", NULL, DB_OPT_STR, &g->drafter_dir},
        {"variant", 'v', "NAME", vhelp, NULL, DB_OPT_STR, &g->variant_name},
        {"block-size", 'B', "N", "draft block size (default: the drafter's; EAGLE-3 / MTP: 16)", NULL, DB_OPT_INT, &g->block},
        {"prompt", 'p', "TEXT", "prompt text (chat template applied; output printed as text)", NULL, DB_OPT_STR, &g->prompt_text},
        {"dataset", 0, "NAME", "take the prompt from a dataset (built-in name or path)", NULL, DB_OPT_STR, &g->dataset},
        {"index", 'i', "N", "sample index in --dataset (default 0)", NULL, DB_OPT_INT, &g->index},
        {"tokenizer", 0, "FILE", "tokenizer.json (default: the target directory's)", NULL, DB_OPT_STR, &g->tok_path},
        {"chat-template", 0, "NAME", DB_CHAT_TEMPLATE_NAMES " (default auto)", NULL, DB_OPT_STR, &g->template_name},
        {"thinking", 0, NULL, "Qwen3 thinking on (chatml: no empty think block)", NULL, DB_OPT_FLAG, &g->thinking},
        {"prompt-ids", 0, "IDS", "prompt token ids, e.g. 1,2,3", NULL, DB_OPT_STR, &g->ids_text},
        {"prompt-ids-file", 0, "FILE", "file of prompt token ids (commas or whitespace)", NULL, DB_OPT_STR, &g->ids_file},
        {"max-new-tokens", 'n', "N", "tokens to generate (default 64)", NULL, DB_OPT_INT, &g->max_new},
        {"temperature", 'T', "X", "sampling temperature, 0 = greedy (default)", NULL, DB_OPT_FLOAT, &g->temperature},
        {"top-p", 0, "X", "nucleus sampling mass (default 1)", NULL, DB_OPT_FLOAT, &g->top_p},
        {"top-k", 0, "N", "sample among the k most likely (default 0 = all)", NULL, DB_OPT_INT, &g->top_k},
        {"seed", 's', "N", "sampling seed (default 0)", NULL, DB_OPT_INT, &g->seed},
        {"backend", 'b', "NAME", "compute backend (default cpu)", NULL, DB_OPT_STR, &g->backend},
        {"threads", 0, "N", "CPU threads (default: all cores; at most 4x them)", NULL, DB_OPT_INT, &g->threads},
        {"deterministic", 0, NULL, "batch-invariant reductions", NULL, DB_OPT_FLAG, &g->deterministic},
        {"allow-long-context", 0, NULL, "run prompt + max-new-tokens + block past the target's max_position_embeddings (its RoPE must hold there)", NULL, DB_OPT_FLAG, &g->long_context},
        {"kv-dtype", 0, "TYPE", DB_KV_DTYPE_HELP, NULL, DB_OPT_STR, &g->kv_s},
        {"trace", 0, NULL, "print every cycle's draft and acceptance to stderr (greedy: also the margin, top-1 minus top-2 logit, of every token the target picks alone: the prefill's, and each step of -v ar)", NULL, DB_OPT_FLAG, &g->trace},
    };
    const db_cmd_opts cmd = {"generate",
                             "Decode one prompt; output ids to stdout, cycle statistics to stderr.",
                             opts, (int)(sizeof opts / sizeof *opts), db_variants_help};
    int rc = db_opts_parse(&cmd, argc, argv, help, err, errlen);
    if (rc || *help) return rc;
    return db_opt_kv_dtype(g->kv_s, g->backend, &g->kv_dtype, err, errlen);
}

/* --prompt or --dataset: the text through the chat template and the tokenizer */
static int text_prompt(const gen_opts *g, db_chat_template tmpl, db_tokenizer *tok, int **prompt, int *n,
                       char *err, size_t errlen)
{
    int rc;
    if ((rc = db_prompt_tokenizer_load(tok, g->tok_path ? g->tok_path : g->target_dir, err, errlen))) return rc;
    db_dataset ds = {0};
    char *turns[1] = {(char *)g->prompt_text};
    db_sample one = {.turns = turns, .n_turns = 1};
    const db_sample *sm = &one;
    if (g->dataset) {
        rc = db_dataset_load(&ds, g->dataset, 0, 0, err, errlen);
        if (!rc && (g->index < 0 || g->index >= ds.n))
            rc = db_fail(err, errlen, DB_EINPUT, "--index %d outside %s (%d samples)", g->index, ds.path, ds.n);
        if (!rc) sm = &ds.samples[g->index];
    }
    if (!rc) rc = db_prompt_render(tok, tmpl, g->thinking, sm, 0, NULL, prompt, n, err, errlen);
    db_dataset_free(&ds);
    return rc;
}

/* --prompt-ids or --prompt-ids-file */
static int ids_prompt(const gen_opts *g, int **prompt, int *n, char *err, size_t errlen)
{
    char *file_text = NULL;
    int rc = g->ids_file ? db_read_file_max(g->ids_file, DB_MAX_TEXT_BYTES, &file_text, NULL, err, errlen) : DB_OK;
    if (!rc) rc = db_parse_ids(g->ids_text ? g->ids_text : file_text, prompt, n, err, errlen);
    free(file_text);
    return rc;
}

/* the output: text when the prompt was text, else the ids */
static int print_output(const db_tokenizer *tok, int text_mode, const db_request *r, char *err, size_t errlen)
{
    if (text_mode) {
        char *text;
        size_t tl;
        int rc = db_tokenizer_decode(tok, r->out, r->n_out, 1, &text, &tl, err, errlen);
        if (rc) return rc;
        fwrite(text, 1, tl, stdout);
        free(text);
    } else {
        for (int i = 0; i < r->n_out; i++) printf("%s%d", i ? "," : "", r->out[i]);
    }
    printf("\n");
    fflush(stdout);
    return DB_OK;
}

int db_cmd_generate(int argc, char **argv, char *err, size_t errlen)
{
    gen_opts g;
    char names[200], tbuf[1024], dbuf[1024];
    int help = 0, rc = parse_options(&g, argc, argv, &help, err, errlen);
    if (rc || help) return rc;
    if (!g.target_dir) return db_fail(err, errlen, DB_EINPUT, "--target DIR is required");
    /* models/... from any directory (base/paths.h) */
    g.target_dir = db_data_find(g.target_dir, tbuf, sizeof tbuf);
    g.drafter_dir = db_data_find(g.drafter_dir, dbuf, sizeof dbuf);
    if (!!g.ids_text + !!g.ids_file + !!g.prompt_text + !!g.dataset != 1)
        return db_fail(err, errlen, DB_EINPUT, "give exactly one of --prompt, --dataset, --prompt-ids, --prompt-ids-file");
    if (g.max_new < 1) return db_fail(err, errlen, DB_EINPUT, "--max-new-tokens must be >= 1");
    if ((rc = db_threads_check("--threads", g.threads, err, errlen))) return rc;
    db_variant variant = g.drafter_dir ? DB_VAR_DFLASH2 : DB_VAR_AR;
    if (g.variant_name && db_variant_parse(g.variant_name, &variant) != 0)
        return db_fail(err, errlen, DB_EINPUT, "unknown variant '%s' (%s)", g.variant_name,
                       db_variant_names(names, sizeof names, 0));
    db_chat_template tmpl;
    if ((rc = db_chat_template_parse(g.template_name, &tmpl, err, errlen)))
        return rc;
    int *prompt = NULL, n_prompt = 0, text_mode = g.prompt_text || g.dataset;
    db_tokenizer tok = {0};
    rc = text_mode ? text_prompt(&g, tmpl, &tok, &prompt, &n_prompt, err, errlen) : ids_prompt(&g, &prompt, &n_prompt, err, errlen);
    if (!rc && n_prompt == 0) rc = db_fail(err, errlen, DB_EINPUT, "empty prompt");
    db_session s = {0};
    db_session_opts so = {g.backend, g.target_dir, db_variant_uses_drafter(variant) ? g.drafter_dir : NULL, g.threads,
                          g.deterministic, NULL};
    if (!rc) rc = db_session_open(&s, &so, err, errlen);
    if (!rc) rc = db_session_check_ids(&s, prompt, n_prompt, err, errlen);
    /* a v1 checkpoint runs DFlash 1 by default */
    if (!rc && !g.variant_name && s.has_drafter && !s.drafter.has_selector) variant = DB_VAR_DFLASH;
    int B = !db_variant_uses_drafter(variant) ? 1 : g.block > 0 ? g.block : s.has_drafter ? DB_DEFAULT_BLOCK(&s.drafter.cfg) : 1;
    db_gen_params p = {.variant = variant, .block_size = B, .temperature = g.temperature, .top_p = g.top_p,
                       .top_k = g.top_k, .max_new_tokens = g.max_new, .seed = (uint64_t)g.seed,
                       .allow_long_context = g.long_context,
                       .on_cycle = g.trace ? print_trace : NULL, .on_pick = g.trace ? print_pick : NULL, .kv_dtype = g.kv_dtype};
    int *out = db_malloc(sizeof(int) * (size_t)g.max_new);
    db_request r = {.prompt = prompt, .n_prompt = n_prompt, .out = out};
    double t0 = -1, secs = 0;
    if (!rc && !out) rc = db_fail(err, errlen, DB_ERUNTIME, "out of memory for the output");
    if (!rc) rc = db_runner_pass(&s.target, s.has_drafter ? &s.drafter : NULL, &p, 1, &r, 1, &t0, &secs, err, errlen);
    if (!rc) rc = print_output(&tok, text_mode, &r, err, errlen);
    if (!rc) {
        fprintf(stderr, "variant %s, block %d, backend %s (%s), load %.2f s\n", db_variant_name(variant), B,
                g.backend, s.be->simd, s.load_s);
        print_stats(&r, B, secs);
    }
    free(out);
    free(prompt);
    db_tokenizer_free(&tok);
    db_session_close(&s);
    return rc;
}
