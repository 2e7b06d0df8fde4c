/* stats.c — see stats.h. */
#include "engine/stats.h"

#include <math.h>

double db_req_stats_tau(const db_req_stats *s)
{
    return s->cycles > 0 ? (double)s->cycle_tokens / s->cycles : NAN;
}

double db_req_stats_tokens_per_call(const db_req_stats *s)
{
    long calls = (long)s->cycles + (s->output_tokens - s->cycle_tokens); /* + one per prefill */
    return calls > 0 ? (double)s->output_tokens / (double)calls : NAN;
}

double db_req_stats_arrival(const db_req_stats *s)
{
    return s->scheduled ? s->t_arrival : s->t_admitted;
}

void db_req_stats_add(db_req_stats *s, const db_req_stats *r)
{
    s->prompt_tokens += r->prompt_tokens;
    s->output_tokens += r->output_tokens;
    s->cycles += r->cycles;
    s->cycle_tokens += r->cycle_tokens;
    for (int i = 0; i < DB_MAX_BLOCK; i++) {
        s->drafted[i] += r->drafted[i];
        s->reached[i] += r->reached[i];
        s->accepted[i] += r->accepted[i];
        s->recall1[i] += r->recall1[i];
        s->recallk[i] += r->recallk[i];
        s->recall_n[i] += r->recall_n[i];
    }
    for (int i = 0; i <= DB_MAX_BLOCK; i++) s->hist[i] += r->hist[i];
    s->oracle_len_sum += r->oracle_len_sum;
    s->t_draft += r->t_draft;
    s->t_select += r->t_select;
    s->t_verify += r->t_verify;
    s->t_host += r->t_host;
    s->t_correct += r->t_correct;
}
