/* report_fixture.h — synthetic sweep points for the reporting tests (no model runs): a raw
 * point whose numbers are simple enough to check summaries by hand. */
#ifndef DB_REPORT_FIXTURE_H
#define DB_REPORT_FIXTURE_H

#include "result/point.h"
#include "result/run_meta.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static db_point_key fx_key(const char *dataset, const char *variant, int block, int conc)
{
    db_point_key k;
    memset(&k, 0, sizeof k);
    snprintf(k.backend, sizeof k.backend, "cpu");
    snprintf(k.dataset, sizeof k.dataset, "%s", dataset);
    snprintf(k.variant, sizeof k.variant, "%s", variant);
    k.block_size = block;
    k.concurrency = conc;
    k.temperature = 0;
    k.top_p = 1;
    k.top_k = 0;
    k.max_new_tokens = 64;
    snprintf(k.chat_template, sizeof k.chat_template, "none");
    snprintf(k.acceptance_source, sizeof k.acceptance_source, "measured");
    snprintf(k.weights, sizeof k.weights, "file");
    snprintf(k.target, sizeof k.target, "tiny-qwen3");
    if (strcmp(variant, "ar") != 0) snprintf(k.drafter, sizeof k.drafter, "tiny-qwen3-dflash2-b16");
    return k;
}

/* R repetitions x N prompts. Request (r, i): output 10 + 2i tokens, the first from the prefill,
 * the rest in cycles chosen from a made-up acceptance pattern (`ar`: one per decode step); admitted at 0.1 i, first token 50 ms later, finished when its
 * tokens are out at `tok_s` tokens per second. `speed` scales every time (2 = twice as fast). */
static db_point_raw fx_raw(db_point_key k, int R, int N, double speed)
{
    db_point_raw p;
    memset(&p, 0, sizeof p);
    p.key = k;
    p.n_prompts = N;
    p.repetitions = R;
    p.wall_s = calloc((size_t)R, sizeof *p.wall_s);
    p.reqs = calloc((size_t)(R * N), sizeof *p.reqs);
    p.peak_mem_mib = 123.5;
    int B = k.block_size;
    for (int r = 0; r < R; r++) {
        double end = 0;
        for (int i = 0; i < N; i++) {
            db_req_stats *q = &p.reqs[r * N + i];
            q->prompt_tokens = 20 + i;
            q->output_tokens = 10 + 2 * i;
            if (B <= 1) {
                q->cycles = q->cycle_tokens = q->output_tokens - 1;
                q->hist[1] = q->cycles;
            } else {
                /* cycles alternate acceptance lengths 1, 2, ..., B until the tokens are out */
                int left = q->output_tokens - 1, L = 1;
                while (left > 0) {
                    int take = L < left ? L : left;
                    q->cycles++;
                    q->cycle_tokens += take;
                    q->hist[take]++;
                    for (int pos = 1; pos < B; pos++) {
                        q->drafted[pos]++;
                        if (pos <= take) q->reached[pos]++; /* earlier ones all accepted */
                        if (pos < take) q->accepted[pos]++;
                        if (pos <= take) {
                            q->recall_n[pos]++;
                            q->recall1[pos] += pos < take;
                            q->recallk[pos]++;
                        }
                    }
                    q->oracle_len_sum += take + 1 <= B ? take + 1 : B;
                    left -= take;
                    L = L % B + 1;
                }
            }
            q->t_admitted = 0.1 * i / speed;
            q->t_first_token = q->t_admitted + 0.05 / speed;
            q->t_finished = q->t_first_token + (q->output_tokens - 1) * (0.01 + 0.002 * r) / speed;
            q->t_draft = 0.001 * q->cycles / speed;
            q->t_select = 0.0002 * q->cycles / speed;
            q->t_verify = 0.004 * q->cycles / speed;
            q->t_host = 0.0003 * q->cycles / speed;
            q->finished_by_eos = i % 2;
            if (q->t_finished > end) end = q->t_finished;
        }
        p.wall_s[r] = end + 0.01 / speed;
    }
    return p;
}

static void fx_meta(db_run_meta *m)
{
    db_run_meta_init(m, 0, NULL, 42, "fixture", (time_t)1795917600); /* 2026-11-29T02:00:00Z */
    db_run_meta_set_backend(m, "cpu", "Test CPU, 2 cores", "avx2", 2);
    const char *names[] = {"tiny-qwen3", "tiny-qwen3-dflash2-b16"};
    for (int i = 0; i < 2; i++) {
        db_model_meta *mm = &m->models[m->n_models++];
        snprintf(mm->name, sizeof mm->name, "%s", names[i]);
        snprintf(mm->sha256, sizeof mm->sha256, "%064d", i);
        snprintf(mm->dtype, sizeof mm->dtype, "f32");
    }
}

#endif
