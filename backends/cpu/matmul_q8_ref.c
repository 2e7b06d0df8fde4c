/* matmul_q8_ref.c — the integer matmul path's definition in plain C (matmul_q8.h): the
 * activation quantizer, the weight chunk unpacker and the reference kernel the VNNI kernel is
 * tested against bitwise, and the run-time choice. Compiled with -ffp-contract=off: every
 * product below is rounded on its own, every fmaf is the one fused operation the kernels make. */
#include "config.h"
#include "matmul_q8.h"
#include "quant.h"

#include <math.h>
#include <string.h>
#if HAVE_X86_SIMD
#include <cpuid.h>
#endif

int db_q8_supports(db_dtype dt, int I)
{
    switch (dt) {
    case DB_Q8_0: case DB_Q4_0: case DB_Q5_0: case DB_IQ4_NL: return I > 0 && I % 64 == 0;
    /* the mins go 8 blocks of 32 at a time */
    case DB_Q4_1: case DB_Q5_1: case DB_Q4_K: case DB_Q5_K: case DB_Q6_K: case DB_Q3_K: case DB_IQ4_XS:
        return I > 0 && I % 256 == 0;
    default: return 0;
    }
}

static size_t align64(size_t b) { return (b + 63) & ~(size_t)63; }

static size_t qt_stride(int I) { return ((size_t)I + 511) & ~(size_t)511; }

size_t db_q8_rows_bytes(int n, int I)
{
    size_t q = align64((size_t)n * I), dl = align64(sizeof(float) * (size_t)n * (I / 4)),
           b = align64(sizeof(float) * (size_t)n * (I / 32));
    return q + 2 * dl + b + align64((size_t)n * qt_stride(I)) + 2 * b;
}

int db_q8_act_block(db_dtype dt) { return db_dtype_block(dt) == 32 ? 32 : 256; }

void db_q8_rows_init(db_q8_rows *xq, void *buf, int n, int I, int qb)
{
    xq->qb = qb;
    char *p = buf;
    xq->q = (int8_t *)p;
    p += align64((size_t)n * I);
    xq->dl = (float *)p;
    p += align64(sizeof(float) * (size_t)n * (I / 4));
    xq->nx = (int32_t *)p;
    p += align64(sizeof(float) * (size_t)n * (I / 4));
    xq->s = (float *)p;
    p += align64(sizeof(float) * (size_t)n * (I / 32));
    xq->qt = (int8_t *)p;
    p += align64((size_t)n * qt_stride(I));
    xq->nb = (int32_t *)p;
    p += align64(sizeof(float) * (size_t)n * (I / 32));
    xq->db = (float *)p;
    xq->I = I;
    xq->n = n;
}

void db_q8_blocks_fill(db_q8_rows *xq, int r)
{
    const int I = xq->I, nbk = I / 32;
    const int8_t *q = xq->q + (size_t)r * I;
    int8_t *qt = xq->qt + (size_t)r * qt_stride(I);
    for (int g = 0; 512 * g < I && xq->n > 1; g++) /* (one row takes the one-row path: no qt) */
        for (int i = 0; i < 16; i++) {
            int b = 16 * g + i;
            for (int j = 0; j < 8; j++) {
                if (b < nbk) memcpy(qt + 512 * g + 64 * j + 4 * i, q + 32 * b + 4 * j, 4);
                else memset(qt + 512 * g + 64 * j + 4 * i, 0, 4);
            }
        }
    for (int b = 0; b < nbk; b++) {
        const int32_t *nx = xq->nx + (size_t)r * (I / 4) + 8 * b;
        xq->nb[(size_t)r * nbk + b] = nx[0] + nx[1] + nx[2] + nx[3] + nx[4] + nx[5] + nx[6] + nx[7];
        xq->db[(size_t)r * nbk + b] = xq->dl[(size_t)r * (I / 4) + 8 * b];
    }
}

void db_q8_quantize_ref(db_q8_rows *xq, const float *x, int r0, int r1)
{
    const int I = xq->I, qb = xq->qb;
    for (int r = r0; r < r1; r++)
        for (int b = 0; b < I / qb; b++) {
            const float *xb = x + (size_t)r * I + (size_t)qb * b;
            int8_t *q = xq->q + (size_t)r * I + (size_t)qb * b;
            float amax = 0.0f, m = 0.0f, z = 0.0f;
            for (int k = 0; k < qb; k++) {
                float a = fabsf(xb[k]);
                if (a > amax) amax = a, m = xb[k];
                z += xb[k] * 0.0f; /* NaN when the block holds an Inf or a NaN */
            }
            float d, scale; /* d: the value of a code step; scale: what x is multiplied by */
            if (z != z) {
                d = NAN, scale = 0.0f;
            } else if (amax == 0.0f) {
                d = 0.0f, scale = 0.0f;
            } else if (qb == 32) {
                d = db_f16_to_f32(db_f32_to_f16(amax / 127.0f));
                scale = 127.0f / amax;
            } else {
                scale = -127.0f / m;
                d = 1.0f / scale;
            }
            for (int k = 0; k < qb; k++) {
                int v = scale == 0.0f ? 0 : (int)nearbyintf(xb[k] * scale);
                q[k] = (int8_t)(v > 127 ? 127 : v);
            }
            for (int l = 0; l < qb / 4; l++) {
                size_t lane = (size_t)r * (I / 4) + (size_t)(qb / 4) * b + l;
                xq->dl[lane] = d;
                xq->nx[lane] = -(q[4 * l] + q[4 * l + 1] + q[4 * l + 2] + q[4 * l + 3]);
            }
            for (int j = 0; j < qb / 32; j++) {
                int sum = 0;
                for (int k = 32 * j; k < 32 * j + 32; k++) sum += q[k];
                xq->s[(size_t)r * (I / 32) + (size_t)(qb / 32) * b + j] = d * (float)sum;
            }
        }
    for (int r = r0; r < r1; r++) db_q8_blocks_fill(xq, r);
}

static float ld_f16(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return db_f16_to_f32(h);
}

void db_q8_unpack_chunk(db_dtype dt, const uint8_t *row, int c, int8_t code[64], float scale[16],
                        float min[2])
{
    min[0] = min[1] = 0.0f;
    if (db_dtype_block(dt) == 32) { /* two blocks; a block's values 0-15 low nibbles, 16-31 high */
        static const int bytes[] = {[DB_Q8_0] = 34, [DB_Q4_0] = 18, [DB_Q4_1] = 20, [DB_Q5_0] = 22,
                                    [DB_Q5_1] = 24, [DB_IQ4_NL] = 18};
        for (int h = 0; h < 2; h++) {
            const uint8_t *b = row + (size_t)(2 * c + h) * (size_t)bytes[dt];
            int with_min = dt == DB_Q4_1 || dt == DB_Q5_1, five = dt == DB_Q5_0 || dt == DB_Q5_1;
            const uint8_t *qh = b + (with_min ? 4 : 2), *qs = qh + (five ? 4 : 0);
            uint32_t hb = five ? (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24 : 0;
            float d = ld_f16(b);
            for (int l = 0; l < 8; l++) scale[8 * h + l] = d;
            if (with_min) min[h] = -ld_f16(b + 2); /* x = d q + m */
            for (int i = 0; i < 32; i++) {
                int q = i < 16 ? qs[i] & 15 : qs[i - 16] >> 4;
                if (five) q |= (int)(hb >> i & 1) << 4;
                code[32 * h + i] = (int8_t)(dt == DB_Q8_0    ? (int8_t)b[2 + i]
                                            : dt == DB_Q4_0  ? q - 8
                                            : dt == DB_Q5_0  ? q - 16
                                            : dt == DB_IQ4_NL ? db_iq4_levels[q]
                                                             : q);
            }
        }
        return;
    }
    int cc = c & 3; /* the chunk's place in its 256-value block */
    if (dt == DB_Q4_K || dt == DB_Q5_K) {
        int five = dt == DB_Q5_K;
        const uint8_t *b = row + (size_t)(c >> 2) * (five ? 176 : 144);
        const uint8_t *qh = b + 16, *qs = b + (five ? 48 : 16) + 32 * cc;
        float d = ld_f16(b), dmin = ld_f16(b + 2);
        for (int h = 0; h < 2; h++) {
            int j = 2 * cc + h, s, m;
            db_scale_min_k4(j, b + 4, &s, &m);
            float sc = d * (float)s;
            for (int l = 0; l < 8; l++) scale[8 * h + l] = sc;
            min[h] = dmin * (float)m;
            for (int i = 0; i < 32; i++) {
                int q = h ? qs[i] >> 4 : qs[i] & 15;
                if (five) q |= (qh[i] >> j & 1) << 4;
                code[32 * h + i] = (int8_t)q;
            }
        }
        return;
    }
    if (dt == DB_IQ4_XS) { /* sub-block j = 2cc + h: 16 bytes of IQ4_NL's nibble order */
        const uint8_t *b = row + (size_t)(c >> 2) * 136;
        unsigned sh = (unsigned)b[2] | (unsigned)b[3] << 8;
        for (int h = 0; h < 2; h++) {
            int j = 2 * cc + h;
            float dj = ld_f16(b) * (float)(db_scale_iq4_xs(j, sh, b + 4) - 32);
            const uint8_t *qs = b + 8 + 16 * j;
            for (int l = 0; l < 8; l++) scale[8 * h + l] = dj;
            for (int i = 0; i < 32; i++) code[32 * h + i] = db_iq4_levels[i < 16 ? qs[i] & 15 : qs[i - 16] >> 4];
        }
        return;
    }
    if (dt == DB_Q3_K) { /* values 32g..32g+31, g = 2cc + t: bits 2(g % 4) of qs[32 (g / 4) + l],
                          * the third bit 4 (g / 4) + g % 4 of hm[l]; sub-blocks of 16 */
        const uint8_t *b = row + (size_t)(c >> 2) * 110;
        float d = ld_f16(b + 108);
        for (int v = 0; v < 64; v++) {
            int g = 2 * cc + v / 32, l = v % 32, h = g / 4, k = g % 4;
            int q = (b[32 + 32 * h + l] >> (2 * k) & 3) - (b[l] >> (4 * h + k) & 1 ? 0 : 4);
            code[v] = (int8_t)q;
            if (v % 4 == 0) scale[v / 4] = d * (float)(db_scale_q3_k(4 * cc + v / 16, b + 96) - 32);
        }
        return;
    }
    /* Q6_K: the chunk is quarters k = 2 (cc & 1) and k + 1 of half cc >> 1 */
    const uint8_t *b = row + (size_t)(c >> 2) * 210;
    int half = cc >> 1;
    const uint8_t *ql = b + 64 * half, *qh = b + 128 + 32 * half;
    const int8_t *sc = (const int8_t *)(b + 192) + 8 * half;
    float d = ld_f16(b + 208);
    for (int v = 0; v < 64; v++) {
        int k = 2 * (cc & 1) + v / 32, l = v % 32;
        int lo = ql[l + 32 * (k & 1)], q = (k >= 2 ? lo >> 4 : lo & 15) | (qh[l] >> (2 * k) & 3) << 4;
        code[v] = (int8_t)(q - 32);
        if (l % 4 == 0) scale[v / 4] = d * (float)sc[l / 16 + 2 * k];
    }
}

static int has_min(db_dtype dt) { return dt == DB_Q4_K || dt == DB_Q5_K || dt == DB_Q4_1 || dt == DB_Q5_1; }

static float hsum(const float *a, int n)
{
    float t[16];
    memcpy(t, a, sizeof(float) * (size_t)n);
    for (int h = n / 2; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) t[l] = t[l] + t[l + h];
    return t[0];
}

void db_matmul_q8_ref(float *y, const db_q8_rows *xq, const void *w, db_dtype dt, int n, int O,
                      int o0, int o1, int accumulate)
{
    int I = xq->I;
    size_t rb = db_dtype_bytes(dt, (size_t)I);
    for (int o = o0; o < o1; o++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)o * rb;
        for (int r = 0; r < n; r++) {
            const int8_t *xr = xq->q + (size_t)r * I;
            const float *dl = xq->dl + (size_t)r * (I / 4), *s = xq->s + (size_t)r * (I / 32);
            float acc[16] = {0}, m[8] = {0};
            for (int c = 0; c < I / 64; c++) {
                int8_t code[64];
                float scale[16], mn[2];
                db_q8_unpack_chunk(dt, row, c, code, scale, mn);
                for (int l = 0; l < 16 && !db_q8_block_sums(dt); l++) {
                    int isum = 0;
                    for (int k = 4 * l; k < 4 * l + 4; k++) isum += code[k] * xr[64 * c + k];
                    float t = scale[l] * dl[16 * c + l];
                    acc[l] = fmaf((float)isum, t, acc[l]);
                }
                for (int h = 0; h < 2 && db_q8_block_sums(dt); h++) { /* blocks 2c, 2c + 1 */
                    int b = 2 * c + h, isum = 0;
                    for (int k = 32 * h; k < 32 * h + 32; k++) isum += code[k] * xr[64 * c + k];
                    float t = scale[8 * h] * xq->db[(size_t)r * (I / 32) + b];
                    acc[b % 16] = fmaf((float)isum, t, acc[b % 16]);
                }
                for (int h = 0; h < 2; h++) {
                    int b = 2 * c + h;
                    m[b % 8] = fmaf(mn[h], s[b], m[b % 8]);
                }
            }
            float v = has_min(dt) ? hsum(acc, 16) - hsum(m, 8) : hsum(acc, 16);
            float *dst = y + (size_t)r * O + o;
            *dst = accumulate ? *dst + v : v;
        }
    }
}

#if HAVE_X86_SIMD
/* CPUID leaf 7 ECX bit 11 (clang's __builtin_cpu_supports has no name for it everywhere); the
 * AVX-512 state the OS must save comes with avx512f's check */
static int has_avx512_vnni(void)
{
    unsigned a, b, c, d;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c >> 11 & 1);
}
#endif

int db_matmul_q8_select(const char *name, db_matmul_q8_kernel *k, db_q8_quantize_fn *qf)
{
#if HAVE_X86_SIMD
    __builtin_cpu_init();
    if (strcmp(name, "avx512") == 0 && has_avx512_vnni()) {
        *k = db_matmul_q8_vnni;
        *qf = db_q8_quantize_vnni;
        return 0;
    }
    /* an AVX-512 CPU without VNNI takes the AVX2 one (the family's f32 kernels stay AVX-512) */
    if ((strcmp(name, "avx512") == 0 || strcmp(name, "avx2") == 0) && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
        *k = db_matmul_q8_avx2;
        *qf = db_q8_quantize_avx2;
        return 0;
    }
#else
    (void)name;
#endif
    *k = NULL;
    *qf = NULL;
    return -1;
}
