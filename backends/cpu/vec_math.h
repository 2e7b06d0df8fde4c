/* vec_math.h — exp and tanh for the CPU backend's elementwise loops, written so that GCC
 * vectorizes a loop calling them (no libm call, no float compare: clamps and signs are integer
 * ops on the bits, rounding is the 1.5 * 2^23 addition), within a few ulp of the exact values.
 *
 * Why: expf / tanhf are scalar libm calls of 5-15 ns. The attention softmax (rows x heads x
 * keys), SiLU (rows x intermediate) and the drafter's logit softcap ((B - 1) x vocabulary) ran
 * them per element: at 16 rows of a 124M model about 1 ms of a 20 ms forward, and the softcap
 * 16 ms of a 94 ms DFlash 2 cycle on the 0.6B pair. Each function gives the same value for the
 * same input wherever it is called, so batch invariance is kept. */
#ifndef DB_VEC_MATH_H
#define DB_VEC_MATH_H

#include <stdint.h>
#include <string.h>

/* an elementwise loop's function compiled for AVX-512, AVX2 and the baseline, the copy picked
 * at load time (ifunc): the backend's own files are built for the baseline, where GCC
 * vectorizes these loops 4 lanes wide. The copies compute the same value per element (no
 * reduction, no contraction in C11 mode), so results do not depend on the machine. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__) && !defined(__SANITIZE_ADDRESS__)
#define DB_VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DB_VEC_CLONES
#endif

static inline uint32_t vm_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static inline float vm_float(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* 2^n for integral n in [-126, 127] */
static inline float vm_pow2(float n) { return vm_float((uint32_t)((int32_t)n + 127) << 23); }

/* n = round(y / ln 2) (|y| < 2^21) and r = y - n ln 2 (|r| <= ln2 / 2; ln 2 in two parts) */
static inline float vm_reduce(float y, float *r)
{
    float n = (y * 1.44269504f + 12582912.0f) - 12582912.0f;
    *r = (y - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
    return n;
}

/* expm1(r) for |r| <= ln2 / 2: degree-7 Taylor polynomial, truncation below 3e-9 relative */
static inline float vm_expm1_small(float r)
{
    return r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 +
                     r * (1.0f / 720 + r * (1.0f / 5040)))))));
}

/* exp(x): inputs clamped to [-87, 88] (results 1.6e-38 .. 1.7e38; below, the exact value would be
 * subnormal, above it would overflow: use where neither matters), NaN passes */
static inline float db_exp_vec(float x)
{
    uint32_t xb = vm_bits(x), ab = xb & 0x7fffffffu, neg = xb >> 31;
    uint32_t lim = 0x42b00000u - neg * 0x20000u; /* 88.0 or 87.0 */
    ab = ab > 0x7f800000u ? ab : ab < lim ? ab : lim;
    float r, n = vm_reduce(vm_float(ab | neg << 31), &r);
    return (vm_expm1_small(r) + 1.0f) * vm_pow2(n);
}

/* tanh(x) = sign(x) * -e / (2 + e), e = expm1(-2|x|) = 2^n (p(r) + 1) - 1; for small |x|, n = 0 and
 * e = p(r) keeps the relative precision (tanh x ~ x). |x| is clamped at 10 (tanh = 1 in float
 * from 9.01). A NaN stays NaN, as tanhf's: the clamp would make it +-1, and a softcap would hide
 * NaN logits (NaN weights) behind finite ones. */
static inline float db_tanh_vec(float x)
{
    uint32_t xb = vm_bits(x), a0 = xb & 0x7fffffffu, sign = xb & 0x80000000u;
    uint32_t ab = a0 < 0x41200000u ? a0 : 0x41200000u;
    float r, n = vm_reduce(-2.0f * vm_float(ab), &r), s = vm_pow2(n);
    float e = s * vm_expm1_small(r) + (s - 1.0f), t = -e / (2.0f + e);
    uint32_t y = (vm_bits(t) & 0x7fffffffu) | sign;
    return vm_float(a0 > 0x7f800000u ? xb : y);
}

#endif
