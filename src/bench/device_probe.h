/* device_probe.h — the device figures of the roofline (db_hw, capacity.h), measured through the
 * backend in passes.
 *
 * Each figure is the median time of one kind of timed call: a GEMV over a big weight (the
 * bandwidth), a 512-row matmul (the flat rate), one layer's seven matrices at 1, 2, ..., 256
 * rows (the rate table), attention at 1 to 16 query rows (the attention table), a 1-row rmsnorm
 * (the small-op cost). What each call reads is in capacity.h (db_hw_measure).
 *
 * Why passes. On a shared 2-core VM the memory bandwidth and even the matmul rate go through
 * phases of seconds at two thirds of their usual speed. Timed one figure after the other, a
 * phase falls whole on the few figures being timed then: one plan measured 178 GFLOP/s at 8
 * rows between runs of 218 and 243 minutes apart, and its prediction moved by a third while the
 * measured cycle stayed within 2%. So every figure's calls are dealt out over `passes` passes,
 * each pass a slice of every figure in turn, and a figure is the median of all its calls: a
 * phase shorter than about half of the window moves no median. `plan` runs its passes between
 * the runs of its synthetic measurement, so the figures are sampled over the same minutes as the times
 * they predict. */
#ifndef DB_DEVICE_PROBE_H
#define DB_DEVICE_PROBE_H

#include "bench/capacity.h"

#define DB_PROBE_MAX_CALLS 400 /* timed calls of one figure, all passes together */
#define DB_PROBE_PASSES 6      /* passes of one stand-alone measurement (db_hw_measure) */

/* One figure's timed calls. `call` runs one call (it = 0 for the untimed warm-up, then 1, 2,
 * ...) and waits for the device. Over all passes: at least min_calls timed calls and min_total
 * seconds of them, at most max_calls. */
typedef void (*db_timed_call)(void *ctx, int it);
typedef struct {
    db_timed_call call;
    void *ctx;
    int min_calls, max_calls;
    double min_total;
    int n;        /* timed calls so far */
    double total; /* their seconds */
    double t[DB_PROBE_MAX_CALLS];
} db_probe_figure;

/* pass k (0-based) of `passes`: the warm-up call when none was made, then timed calls until the
 * figure has made its share of the goals up to this pass (k + 1 of `passes`): that share of
 * min_calls and of min_total, never beyond that share of max_calls. clock: seconds (db_now; a
 * test gives its own). */
void db_probe_figure_pass(db_probe_figure *f, int k, int passes, double (*clock)(void));
/* the median of the figure's timed calls; 0 when none */
double db_probe_figure_median(const db_probe_figure *f);

/* the whole device measurement; its buffers stay allocated until db_hw_probe_free */
typedef struct db_hw_probe db_hw_probe;

/* Allocate and fill the probe's buffers (weights of dtype dt, a quantized dt measures bf16;
 * `bytes` of big weight, 0 = 512 MiB or less on a device short of memory; shape: the model
 * whose layer and attention figures are measured, NULL for bandwidth and flat rate only).
 * budget: the calls and seconds of each figure as a multiple of one stand-alone measurement's
 * (plan takes 2, what a measurement before and one after its run used to cost). */
int db_hw_probe_init(db_hw_probe **out, db_backend *be, db_dtype dt, size_t bytes,
                     const db_model_config *shape, int passes, double budget, char *err,
                     size_t errlen);
/* the next pass (every figure's slice in turn); past the last pass it does nothing */
int db_hw_probe_pass(db_hw_probe *p, char *err, size_t errlen);
/* the passes not yet run */
int db_hw_probe_finish(db_hw_probe *p, char *err, size_t errlen);
/* the figures from the calls so far (medians); the sources name the calls and passes */
void db_hw_probe_result(const db_hw_probe *p, db_hw *hw);
/* device bytes the probe holds (what a run beside it cannot have) */
size_t db_hw_probe_bytes(const db_hw_probe *p);
void db_hw_probe_free(db_hw_probe *p);

/* bw_gbs / gflops > 0 replace the measured figure (and drop the attention and op figures,
 * which are this device's); the sources say "given: ..." */
void db_hw_apply_given(db_hw *hw, double bw_gbs, double gflops);

#endif
