/* matmul_q8.h — integer matmul on quantized weights: the activation rows are quantized once
 * per call to 8-bit blocks (as llama.cpp's Q8_0), and each weight block's integer codes are
 * multiplied with them in integer arithmetic (AVX-512 VNNI vpdpbusd, AVX2 vpmaddubsw), the
 * float scales applied once per 4 values. The path x86 CPUs take for Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1, IQ4_NL, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS weights; the float path (matmul_quant.h) stays
 * for Q2_K (mins per 16 values), the rows db_q8_supports refuses, and other CPUs.
 *
 * Notation: x[N, I] f32 activations, W[O, I] quantized, y[N, O]; a chunk is 64 values
 * (64c..64c+63), a lane l (0..15) of a chunk its values 4l..4l+3, an activation block b the 32
 * values 32b..32b+31 (a chunk holds blocks 2c and 2c+1: lanes 0-7 and 8-15).
 *
 * The result, defined exactly (db_matmul_q8_ref computes it in plain C; every kernel is
 * bitwise equal to it, tests/test_quant_q8.c):
 *   activations: a row is rounded in blocks of 32 values for the weight types of 32-value blocks
 *     and of 256 for the others, with llama.cpp's x86 CPU rounding for its dot products (Q8_0 /
 *     Q8_K), so both tools give integer sums over the same codes:
 *     32: q = nearbyint(x * (127 / max|x|)), d = max|x| / 127 rounded to f16 (q 0 where max|x|
 *         is 0);
 *     256: with m the value of largest magnitude (the first such), q = min(127,
 *         nearbyint(x * (-127 / m))), d = 1 / (-127 / m) (0 and codes 0 for a zero block);
 *     a block holding a NaN or an Inf gets d NaN and codes 0 (so the result is NaN, as on the
 *     float path); d_b below is the d of the block holding b; s_b = d_b * (sum of the 32 codes
 *     of block b)
 *   weights: each value is scale * code - min, code an integer (quant.c's q minus its offset:
 *     q - 8 for Q4_0, q - 16 for Q5_0, q - 32 for Q6_K, the level for the IQ4 types), scale per
 *     lane (d, d * s_j, d * (s_j - 32) or d * sc), min per block of 32 (dmin * m_j of Q4_K /
 *     Q5_K, -m of Q4_1 / Q5_1, else 0) — quant.c's products, rounded alike
 *   per (row, o), Q6_K and Q3_K (a scale per 16 values): lane l accumulates acc_l =
 *     fma((float)isum_l, scale_l * d_b(l), acc_l) over the chunks in order, isum_l the exact
 *     integer sum of the lane's 4 code x q products;
 *   per (row, o), the types with a scale per 32 values (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
 *     and the sub-blocks of Q4_K, Q5_K, IQ4_XS; db_q8_block_sums): block b's exact integer sum
 *     isum_b of its 32 code x q products goes to lane b % 16: acc_{b % 16} = fma((float)isum_b,
 *     scale_b * d_b, acc_{b % 16}), b in order (one conversion and fma a block, not a lane: the
 *     multi-row kernels sum a block in the integer unit from a layout of 16 blocks side by
 *     side, db_q8_rows.qt);
 *   the mins accumulate per 8 blocks: m_j = fma(min_b, s_b, m_j), b = 8t + j, t in order;
 *     y = hsum16(acc) - hsum8(m), each hsum a fixed tree (lanes l + h, h = 8, 4, 2, 1).
 * Nothing depends on N or on the rows sharing a call: batch-invariant. Against the float path
 * the error is the activation rounding (|x - d q| <= d / 2), the one llama.cpp's CPU matmuls make. */
#ifndef DB_MATMUL_Q8_H
#define DB_MATMUL_Q8_H

#include "backend.h"

#include <stddef.h>
#include <stdint.h>

/* N activation rows quantized, carved from one buffer of db_q8_rows_bytes(N, I) */
typedef struct {
    int8_t *q;  /* [N, I] codes */
    float *dl;  /* [N, I / 4] d_b of each lane (lane l of chunk c: block 2c + l / 8) */
    float *s;   /* [N, I / 32] d_b * sum of block b's codes */
    int32_t *nx; /* [N, I / 4] minus the sum of each lane's 4 codes (the kernels' offset
                  * corrections: code - 8 of Q4_0, code - 32 of Q6_K) */
    /* the codes also side by side, 16 blocks of 32 a group of 512 bytes (db_q8_blocks_fill):
     * byte 512 g + 64 j + 4 i + t of a row is value 32 (16 g + i) + 4 j + t (0 past the row's
     * blocks), so that a 4-byte lane i of vector j holds block 16 g + i and 8 vectors' integer
     * products sum 16 whole blocks lane by lane */
    int8_t *qt;  /* [N, QS] QS = I rounded up to 512; only where N > 1 */
    int32_t *nb; /* [N, I / 32] minus the sum of each block's codes */
    float *db;   /* [N, I / 32] d_b of each block */
    int I;
    int n;       /* N */
    int qb;      /* the activation block: 32 or 256 (db_q8_act_block) */
} db_q8_rows;

/* Can the integer path take weights of dt at row length I? (I a multiple of 64 for Q8_0, Q4_0,
 * Q5_0, IQ4_NL; of 256 for the others, the types with mins included: their mins go 8 blocks at
 * a time) */
int db_q8_supports(db_dtype dt, int I);

/* the activation block for weights of dt: 32 for the types of 32-value blocks, else 256 */
int db_q8_act_block(db_dtype dt);
size_t db_q8_rows_bytes(int n, int I);
/* views of buf (db_q8_rows_bytes(n, I) bytes; the views start 64 bytes apart from it), blocks
 * of qb (32 or 256; I a multiple of it) */
void db_q8_rows_init(db_q8_rows *xq, void *buf, int n, int I, int qb);
/* rows [r0, r1) of x into xq (plain C; the kernel file has its own, bitwise equal) */
void db_q8_quantize_ref(db_q8_rows *xq, const float *x, int r0, int r1);
/* qt, nb and db of row r from its codes, lane scales and lane sums (every quantizer's last
 * step) */
void db_q8_blocks_fill(db_q8_rows *xq, int r);
/* weights with one scale a block of 32 values: the per-block sums above */
static inline int db_q8_block_sums(db_dtype dt)
{
    return db_dtype_block(dt) == 32 || dt == DB_Q4_K || dt == DB_Q5_K || dt == DB_IQ4_XS;
}

typedef void (*db_q8_quantize_fn)(db_q8_rows *xq, const float *x, int r0, int r1);
/* y[n, o] (+)= the dot product above, for o in [o0, o1) and the n rows of xq */
typedef void (*db_matmul_q8_kernel)(float *y, const db_q8_rows *xq, const void *w, db_dtype dt,
                                    int n, int O, int o0, int o1, int accumulate);

void db_matmul_q8_ref(float *y, const db_q8_rows *xq, const void *w, db_dtype dt, int n, int O,
                      int o0, int o1, int accumulate);
#if HAVE_X86_SIMD
void db_q8_quantize_avx2(db_q8_rows *xq, const float *x, int r0, int r1);
void db_matmul_q8_avx2(float *y, const db_q8_rows *xq, const void *w, db_dtype dt, int n, int O,
                       int o0, int o1, int accumulate);
void db_q8_quantize_vnni(db_q8_rows *xq, const float *x, int r0, int r1);
void db_matmul_q8_vnni(float *y, const db_q8_rows *xq, const void *w, db_dtype dt, int n, int O,
                       int o0, int o1, int accumulate);
#endif

/* The integer path for the kernel family `name` (db_matmul_select's) on this CPU: 0 and *k /
 * *qf set, or -1 where it has none (the float path then) */
int db_matmul_q8_select(const char *name, db_matmul_q8_kernel *k, db_q8_quantize_fn *qf);

/* One weight row's chunk c unpacked (shared by the reference and the tests): code[64] the
 * integer codes, scale[16] the lane scales, min[2] the mins of blocks 2c, 2c + 1 */
void db_q8_unpack_chunk(db_dtype dt, const uint8_t *row, int c, int8_t code[64], float scale[16],
                        float min[2]);

#endif
