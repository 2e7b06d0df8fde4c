/* test_shard.c — the shard partition (cluster/shard.h): groups whole, balanced by cost with the
 * longest-processing-time rule (against a hand assignment), deterministic, K/N parsing, and the
 * sweep hash (the same for sweeps that differ only in out / output / threads, another for any
 * measured key). */
#include "cluster/shard.h"
#include "tap.h"
#include "base/util.h"

#include <stdio.h>
#include <string.h>

static char err[512];

/* n groups, group g holding sizes[g] points (ar + variants) of concurrency g + 1 */
static int make_keys(db_point_key *keys, const int *sizes, int n)
{
    int k = 0;
    for (int g = 0; g < n; g++)
        for (int j = 0; j < sizes[g]; j++, k++) {
            memset(&keys[k], 0, sizeof keys[k]);
            snprintf(keys[k].backend, sizeof keys[k].backend, "cpu");
            snprintf(keys[k].dataset, sizeof keys[k].dataset, "math");
            snprintf(keys[k].variant, sizeof keys[k].variant, j ? "dflash2" : "ar");
            keys[k].concurrency = g + 1;
            keys[k].block_size = j ? 8 : 1;
        }
    return k;
}

int main(void)
{
    db_point_key keys[32];
    /* groups of cost 7 (3 points), 5, 4, 3, 3 (2 points each) into 2 shards, by hand: each
     * group in turn to the lighter shard: 7 -> s0 (7); 5 -> s1 (5); 4 -> s1 (9); 3 -> s0 (10);
     * 3 -> s1 (12) */
    int sizes[] = {3, 2, 2, 2, 2}, n = make_keys(keys, sizes, 5);
    double gc[] = {7, 5, 4, 3, 3}, cost[32];
    for (int g = 0, k = 0; g < 5; g++)
        for (int j = 0; j < sizes[g]; j++) cost[k++] = gc[g] / sizes[g];
    int of[32], want_group[] = {0, 1, 1, 0, 1};
    tap_ok(db_shard_assign(keys, n, cost, 2, of) == 0, "assign runs");
    int whole = 1, as_hand = 1;
    for (int g = 0, k = 0; g < 5; g++)
        for (int j = 0; j < sizes[g]; j++, k++) {
            whole &= of[k] == of[k - j];
            as_hand &= of[k] == want_group[g];
        }
    tap_ok(whole, "every group in one shard (ar with its variants)");
    tap_ok(as_hand, "longest-processing-time assignment as by hand: 7+3 | 5+4+3");
    int of2[32];
    db_shard_assign(keys, n, cost, 2, of2);
    tap_ok(!memcmp(of, of2, sizeof(int) * (size_t)n), "deterministic");
    db_shard_assign(keys, n, cost, 8, of2);
    int used[8] = {0}, nu = 0;
    for (int k = 0; k < n; k++) used[of2[k]] = 1;
    for (int s = 0; s < 8; s++) nu += used[s];
    tap_ok(nu == 5, "8 shards, 5 groups: 5 shards used (%d)", nu);

    db_shard sh;
    tap_ok(db_shard_parse("2/5", &sh, err, sizeof err) == 0 && sh.index == 2 && sh.count == 5, "parse 2/5");
    const char *bad[] = {"5/5", "-1/3", "1/0", "1", "1/", "/3", "a/b", "1/3x", "0/5000"};
    int refused = 1;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) refused &= db_shard_parse(bad[i], &sh, err, sizeof err) == DB_EINPUT;
    tap_ok(refused, "refused: 5/5 -1/3 1/0 1 1/ /3 a/b 1/3x 0/5000");

    db_sweep a, b;
    char ha[65], hb[65];
    db_sweep_init(&a);
    db_sweep_init(&b);
    db_sweep_set(&b, "out", "elsewhere", err, sizeof err);
    db_sweep_set(&b, "output", "json", err, sizeof err);
    db_sweep_set(&b, "threads", "3", err, sizeof err);
    db_sweep_hash(&a, ha);
    db_sweep_hash(&b, hb);
    tap_ok(strlen(ha) == 64 && !strcmp(ha, hb), "sweep hash: out, output and threads do not count");
    db_sweep_set(&b, "max_new_tokens", "65", err, sizeof err);
    db_sweep_hash(&b, hb);
    tap_ok(strcmp(ha, hb) != 0, "sweep hash: max_new_tokens counts");
    return tap_done();
}
