/* matmul_avx2.c — AVX2/FMA/F16C matmul kernel (compiled with those target flags, called only
 * when the CPU reports them). Notation in cpu_kernels.h.
 *
 * Up to 4 activation rows share each pass over a weight row, so W is read once per 4 rows.
 * Each (row, o) dot product always uses the same two 8-lane accumulators, the same tail and the
 * same horizontal sum, whatever the tile: results do not depend on N. */
#include "config.h"
#include "cpu_kernels.h"

#include <immintrin.h>
#include <stdint.h>

static inline __m256 load8(const void *w, db_dtype dt, size_t i)
{
    if (dt == DB_F32) return _mm256_loadu_ps((const float *)w + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    if (dt == DB_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline float scalar_w(const void *w, db_dtype dt, size_t i)
{
    if (dt == DB_F32) return ((const float *)w)[i];
    uint16_t h = ((const uint16_t *)w)[i];
    return dt == DB_F16 ? db_f16_to_f32(h) : db_bf16_to_f32(h);
}

static inline float hsum(__m256 v)
{
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

static inline __attribute__((always_inline)) void tile(int R, float *y, const float *x,
                                                       const void *w, db_dtype dt, int O, int I,
                                                       int o, int accumulate)
{
    __m256 a0[4], a1[4];
    for (int r = 0; r < R; r++) a0[r] = a1[r] = _mm256_setzero_ps();
    size_t base = (size_t)o * (size_t)I;
    int k = 0;
    for (; k + 16 <= I; k += 16) {
        __m256 w0 = load8(w, dt, base + (size_t)k), w1 = load8(w, dt, base + (size_t)k + 8);
        for (int r = 0; r < R; r++) {
            const float *xr = x + (size_t)r * I + k;
            a0[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr), a0[r]);
            a1[r] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xr + 8), a1[r]);
        }
    }
    if (k + 8 <= I) {
        __m256 w0 = load8(w, dt, base + (size_t)k);
        for (int r = 0; r < R; r++)
            a0[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + (size_t)r * I + k), a0[r]);
        k += 8;
    }
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * I;
        float t = 0.0f;
        for (int j = k; j < I; j++) t += scalar_w(w, dt, base + (size_t)j) * xr[j];
        float s = hsum(_mm256_add_ps(a0[r], a1[r])) + t;
        float *dst = y + (size_t)r * O + o;
        *dst = accumulate ? *dst + s : s;
    }
}

void db_matmul_avx2(float *y, const float *x, const void *w, db_dtype dt, int n, int O, int I,
                    int o0, int o1, int accumulate)
{
    int r = 0;
    for (; r + 4 <= n; r += 4)
        for (int o = o0; o < o1; o++)
            tile(4, y + (size_t)r * O, x + (size_t)r * I, w, dt, O, I, o, accumulate);
    int rest = n - r;
    for (int o = o0; o < o1 && rest; o++) {
        float *yr = y + (size_t)r * O;
        const float *xr = x + (size_t)r * I;
        switch (rest) {
        case 3: tile(3, yr, xr, w, dt, O, I, o, accumulate); break;
        case 2: tile(2, yr, xr, w, dt, O, I, o, accumulate); break;
        default: tile(1, yr, xr, w, dt, O, I, o, accumulate); break;
        }
    }
}

/* attention's q.k (cpu_kernels.h), key by key: two 8-lane accumulators alternating over the
 * head, a scalar tail, one fixed reduction — the order depends on hd only. The key is an f32 or
 * an f16 cache row (dt), widened exactly by load8 / scalar_w: the same arithmetic for both. */
static inline __attribute__((always_inline)) float dot(const float *a, const void *b, db_dtype dt,
                                                       int n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int k = 0;
    for (; k + 16 <= n; k += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), load8(b, dt, (size_t)k), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), load8(b, dt, (size_t)k + 8), s1);
    }
    float t = 0.0f;
    for (; k < n; k++) t += a[k] * scalar_w(b, dt, (size_t)k);
    return hsum(_mm256_add_ps(s0, s1)) + t;
}

static inline __attribute__((always_inline)) void scores_dt(float *out, const float *q,
                                                            const void *k, db_dtype dt,
                                                            size_t stride, int nk, int hd,
                                                            float scale)
{
    size_t es = dt == DB_F16 ? 2 : 4;
    for (int j = 0; j < nk; j++)
        out[j] = dot(q, (const char *)k + (size_t)j * stride * es, dt, hd) * scale;
}

/* o[i] += sum_j p[j] * v[j * stride + i], j in key order, 8 vectors of o held in registers */
static inline __attribute__((always_inline)) void wsum_dt(float *o, const float *p, const void *v,
                                                          db_dtype dt, size_t stride, int nk,
                                                          int hd)
{
    int i0 = 0;
    for (; i0 + 64 <= hd; i0 += 64) {
        __m256 acc[8];
        for (int t = 0; t < 8; t++) acc[t] = _mm256_loadu_ps(o + i0 + 8 * t);
        for (int j = 0; j < nk; j++) {
            __m256 pj = _mm256_set1_ps(p[j]);
            size_t vj = (size_t)j * stride + (size_t)i0;
            _Pragma("GCC unroll 8") for (int t = 0; t < 8; t++)
                acc[t] = _mm256_fmadd_ps(pj, load8(v, dt, vj + 8 * (size_t)t), acc[t]);
        }
        for (int t = 0; t < 8; t++) _mm256_storeu_ps(o + i0 + 8 * t, acc[t]);
    }
    for (; i0 < hd; i0++) { /* head sizes that are not a multiple of 64 */
        float s = o[i0];
        for (int j = 0; j < nk; j++)
            s = __builtin_fmaf(p[j], scalar_w(v, dt, (size_t)j * stride + (size_t)i0), s);
        o[i0] = s;
    }
}

void db_scores_avx2(float *out, const float *q, const float *k, size_t stride, int nk, int hd,
                    float scale)
{
    scores_dt(out, q, k, DB_F32, stride, nk, hd, scale);
}

void db_wsum_avx2(float *o, const float *p, const float *v, size_t stride, int nk, int hd)
{
    wsum_dt(o, p, v, DB_F32, stride, nk, hd);
}

void db_scores16_avx2(float *out, const float *q, const uint16_t *k, size_t stride, int nk,
                      int hd, float scale)
{
    scores_dt(out, q, k, DB_F16, stride, nk, hd, scale);
}

void db_wsum16_avx2(float *o, const float *p, const uint16_t *v, size_t stride, int nk, int hd)
{
    wsum_dt(o, p, v, DB_F16, stride, nk, hd);
}
