/* cli_generate.c — `dflash-bench generate`: decode one prompt with a variant (autoregressive
 * or speculative) and print the output ids to stdout; cycle statistics go to stderr. */
#include "cli/cli.h"
#include "cli/cli_args.h"
#include "model/decode.h"
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

/* the speculative statistics of one request, on stderr */
static void print_stats(const db_request *r, int B, double secs)
{
    const db_req_stats *s = &r->st;
    fprintf(stderr, "tokens %d, verify steps %d, tau %.3f, %.1f tok/s (%.3f s)\n", r->n_out,
            s->cycles, s->cycles ? (double)s->output_tokens / s->cycles : 0.0,
            r->n_out / (secs > 0 ? secs : 1e-9), secs);
    if (B < 2) return;
    long spec = 0;
    for (int l = 1; l <= B; l++) spec += s->hist[l];
    fprintf(stderr, "position  drafted  accepted  conditional  recall@1  recall@k\n");
    for (int i = 1; i < B; i++)
        fprintf(stderr, "%8d %8ld %9ld %12.3f %9.3f %9.3f\n", i, s->drafted[i], s->accepted[i],
                s->reached[i] ? (double)s->accepted[i] / s->reached[i] : 0.0,
                s->recall_n[i] ? (double)s->recall1[i] / s->recall_n[i] : 0.0,
                s->recall_n[i] ? (double)s->recallk[i] / s->recall_n[i] : 0.0);
    if (spec > 0) {
        double c = (double)spec;
        fprintf(stderr, "per cycle: draft %.3f ms, select %.3f ms, verify %.3f ms, host %.3f ms; oracle tau %.3f\n",
                1e3 * s->t_draft / c, 1e3 * s->t_select / c, 1e3 * s->t_verify / c,
                1e3 * s->t_host / c, (double)s->oracle_len_sum / c);
    }
}

int db_cmd_generate(int argc, char **argv, char *err, size_t errlen)
{
    const char *target_dir = NULL, *drafter_dir = NULL, *ids_text = NULL, *ids_file = NULL,
               *backend = "cpu", *variant_name = NULL, *prompt_text = NULL, *dataset = NULL,
               *tok_path = NULL, *template_name = "auto";
    int index = 0, thinking = 0;
    int max_new = 64, threads = 0, deterministic = 0, help = 0, block = 0, top_k = 0, seed = 0,
        trace = 0;
    float temperature = 0.0f, top_p = 1.0f;
    char names[200], vhelp[300];
    snprintf(vhelp, sizeof vhelp, "%s (default: dflash2 with a DFlash 2 drafter, dflash with a DFlash 1 one, else ar)",
             db_variant_names(names, sizeof names, 0));
    const db_opt opts[] = {
        {"target", 't', "DIR", "target checkpoint directory (config.json + safetensors)", NULL, DB_OPT_STR, &target_dir},
        {"drafter", 'd', "DIR", "DFlash / DFlash 2 drafter directory", NULL, DB_OPT_STR, &drafter_dir},
        {"variant", 'v', "NAME", vhelp, NULL, DB_OPT_STR, &variant_name},
        {"block-size", 'B', "N", "draft block size (default: the drafter's)", NULL, DB_OPT_INT, &block},
        {"prompt", 'p', "TEXT", "prompt text (chat template applied; output printed as text)", NULL, DB_OPT_STR, &prompt_text},
        {"dataset", 0, "NAME", "take the prompt from a dataset (built-in name or path)", NULL, DB_OPT_STR, &dataset},
        {"index", 'i', "N", "sample index in --dataset (default 0)", NULL, DB_OPT_INT, &index},
        {"tokenizer", 0, "FILE", "tokenizer.json (default: the target directory's)", NULL, DB_OPT_STR, &tok_path},
        {"chat-template", 0, "NAME", "auto (default), none, chatml, llama3", NULL, DB_OPT_STR, &template_name},
        {"thinking", 0, NULL, "Qwen3 thinking on (chatml: no empty think block)", NULL, DB_OPT_FLAG, &thinking},
        {"prompt-ids", 0, "IDS", "prompt token ids, e.g. 1,2,3", NULL, DB_OPT_STR, &ids_text},
        {"prompt-ids-file", 0, "FILE", "file of prompt token ids (commas or whitespace)", NULL, DB_OPT_STR, &ids_file},
        {"max-new-tokens", 'n', "N", "tokens to generate (default 64)", NULL, DB_OPT_INT, &max_new},
        {"temperature", 'T', "X", "sampling temperature, 0 = greedy (default)", NULL, DB_OPT_FLOAT, &temperature},
        {"top-p", 0, "X", "nucleus sampling mass (default 1)", NULL, DB_OPT_FLOAT, &top_p},
        {"top-k", 0, "N", "sample among the k most likely (default 0 = all)", NULL, DB_OPT_INT, &top_k},
        {"seed", 's', "N", "sampling seed (default 0)", NULL, DB_OPT_INT, &seed},
        {"backend", 'b', "NAME", "compute backend (default cpu)", NULL, DB_OPT_STR, &backend},
        {"threads", 0, "N", "CPU threads (default: all cores)", NULL, DB_OPT_INT, &threads},
        {"deterministic", 0, NULL, "batch-invariant reductions", NULL, DB_OPT_FLAG, &deterministic},
        {"trace", 0, NULL, "print every cycle's draft and acceptance to stderr", NULL, DB_OPT_FLAG, &trace},
    };
    const db_cmd_opts cmd = {"generate",
                             "Decode one prompt; output ids to stdout, cycle statistics to stderr.",
                             opts, (int)(sizeof opts / sizeof *opts), db_variants_help};
    int rc = db_opts_parse(&cmd, argc, argv, &help, err, errlen);
    if (rc || help) return rc;
    if (!target_dir) return db_fail(err, errlen, DB_EINPUT, "--target DIR is required");
    char tbuf[1024], dbuf[1024]; /* models/... from any directory (base/paths.h) */
    target_dir = db_data_find(target_dir, tbuf, sizeof tbuf), drafter_dir = db_data_find(drafter_dir, dbuf, sizeof dbuf);
    if (!!ids_text + !!ids_file + !!prompt_text + !!dataset != 1)
        return db_fail(err, errlen, DB_EINPUT, "give exactly one of --prompt, --dataset, --prompt-ids, --prompt-ids-file");
    if (max_new < 1) return db_fail(err, errlen, DB_EINPUT, "--max-new-tokens must be >= 1");
    db_variant variant = drafter_dir ? DB_VAR_DFLASH2 : DB_VAR_AR;
    if (variant_name && db_variant_parse(variant_name, &variant) != 0)
        return db_fail(err, errlen, DB_EINPUT, "unknown variant '%s' (%s)", variant_name, db_variant_names(names, sizeof names, 0));
    db_chat_template tmpl = DB_CHAT_AUTO;
    if (strcmp(template_name, "auto") != 0 && (rc = db_chat_template_parse(template_name, &tmpl, err, errlen)))
        return rc;
    int *prompt = NULL, n_prompt = 0, text_mode = prompt_text || dataset;
    db_tokenizer tok = {0};
    if (text_mode) {
        rc = db_tokenizer_load(&tok, tok_path ? tok_path : target_dir, err, errlen);
        db_dataset ds = {0};
        char *turns[1] = {(char *)prompt_text};
        db_sample one = {.turns = turns, .n_turns = 1};
        const db_sample *sm = &one;
        if (!rc && dataset) {
            rc = db_dataset_load(&ds, dataset, 0, 0, err, errlen);
            if (!rc && (index < 0 || index >= ds.n))
                rc = db_fail(err, errlen, DB_EINPUT, "--index %d outside %s (%d samples)", index, ds.path, ds.n);
            if (!rc) sm = &ds.samples[index];
        }
        if (!rc) rc = db_prompt_render(&tok, tmpl, thinking, sm, 0, NULL, &prompt, &n_prompt, err, errlen);
        db_dataset_free(&ds);
    } else {
        char *file_text = NULL;
        if (ids_file && (rc = db_read_file(ids_file, &file_text, NULL, err, errlen))) return rc;
        rc = db_parse_ids(ids_text ? ids_text : file_text, &prompt, &n_prompt, err, errlen);
        free(file_text);
    }
    if (!rc && n_prompt == 0) rc = db_fail(err, errlen, DB_EINPUT, "empty prompt");
    db_session s = {0};
    db_session_opts so = {backend, target_dir, variant == DB_VAR_AR ? NULL : drafter_dir, threads, deterministic, NULL};
    if (!rc) rc = db_session_open(&s, &so, err, errlen);
    if (!rc) rc = db_session_check_ids(&s, prompt, n_prompt, err, errlen);
    /* a v1 checkpoint runs DFlash 1 by default */
    if (!rc && !variant_name && s.has_drafter && !s.drafter.has_selector) variant = DB_VAR_DFLASH;
    db_gen_params p = {.variant = variant, .block_size = block > 0 ? block : (s.has_drafter ? s.drafter.cfg.block_size : 1),
                       .temperature = temperature, .top_p = top_p, .top_k = top_k,
                       .max_new_tokens = max_new, .seed = (uint64_t)seed,
                       .on_cycle = trace ? print_trace : NULL};
    db_engine *e = NULL;
    if (!rc) rc = db_engine_create(&e, &s.target, s.has_drafter ? &s.drafter : NULL, &p, 1, n_prompt, err, errlen);
    int *out = malloc(sizeof(int) * (size_t)max_new);
    db_request r = {.prompt = prompt, .n_prompt = n_prompt, .out = out};
    double t0 = db_now(), t1 = t0;
    if (!rc) {
        rc = db_engine_run(e, &r, 1, t0, NULL, NULL, err, errlen);
        t1 = db_now();
    }
    if (!rc && text_mode) {
        char *text;
        size_t tl;
        rc = db_tokenizer_decode(&tok, out, r.n_out, 1, &text, &tl, err, errlen);
        if (!rc) {
            fwrite(text, 1, tl, stdout);
            printf("\n");
            free(text);
        }
    } else if (!rc) {
        for (int i = 0; i < r.n_out; i++) printf("%s%d", i ? "," : "", out[i]);
        printf("\n");
    }
    if (!rc) {
        fflush(stdout);
        fprintf(stderr, "variant %s, block %d, backend %s (%s), load %.2f s\n", db_variant_name(variant),
                variant == DB_VAR_AR ? 1 : p.block_size, backend, s.be->simd, s.load_s);
        print_stats(&r, variant == DB_VAR_AR ? 1 : p.block_size, t1 - t0);
    }
    db_engine_destroy(e);
    free(out);
    free(prompt);
    db_tokenizer_free(&tok);
    db_session_close(&s);
    return rc;
}
