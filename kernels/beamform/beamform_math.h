/* beamform_math.h: the steps the CPU and CUDA beamformers share, written
 * once so both do the same IEEE operations in the same order and agree bit
 * for bit: coefficients in float32, made integers, exact integer sums,
 * then back to float32 for dither and rounding. Every product that meets
 * an add is an explicit fmaf or an explicitly rounded multiply: nvcc would
 * otherwise fuse `a * b + c` on its own and the C compiler would not. */
#ifndef CBF_KERNEL_BEAMFORM_MATH_H
#define CBF_KERNEL_BEAMFORM_MATH_H

#include <math.h>
#include <stdint.h>

#include "beamform.h"
#include "dither.h"

#ifdef __CUDACC__
#define BF_FN static __device__ __forceinline__
#define BF_MUL(a, b) __fmul_rn((a), (b))
#define BF_ADD(a, b) __fadd_rn((a), (b))
#define BF_I64_TO_F(x) __ll2float_rn(x)
#else
#define BF_FN static inline
#define BF_MUL(a, b) ((a) * (b))
#define BF_ADD(a, b) ((a) + (b))
#define BF_I64_TO_F(x) ((float)(x))
#endif

typedef struct bf_cplx {
    float re, im;
} bf_cplx;

/* exp(2 pi i t / 2^64): the nearest quarter turn q exactly (integer), the
 * rest x in [-pi/4, pi/4) by Taylor polynomials (truncation below 2e-9 there),
 * then rotated by q (exact). */
BF_FN bf_cplx bf_turn(uint64_t t)
{
    const uint64_t q = (t + (1ull << 61)) >> 62;
    const int64_t r = (int64_t)(t - (q << 62));
    const float x = BF_MUL(BF_I64_TO_F(r), 0x1.921fb6p-62f); /* 2 pi / 2^64 */
    const float x2 = BF_MUL(x, x);
    float s = fmaf(x2, 1.0f / 39916800.0f, -1.0f / 362880.0f);
    s = fmaf(x2, s, 1.0f / 5040.0f);
    s = fmaf(x2, s, -1.0f / 120.0f);
    s = fmaf(x2, s, 1.0f / 6.0f);
    s = fmaf(BF_MUL(x, x2), -s, x);
    float c = fmaf(x2, -1.0f / 3628800.0f, 1.0f / 40320.0f);
    c = fmaf(x2, c, -1.0f / 720.0f);
    c = fmaf(x2, c, 1.0f / 24.0f);
    c = fmaf(x2, c, -0.5f);
    c = fmaf(x2, c, 1.0f);
    bf_cplx z;
    switch ((int)(q & 3)) {
    case 0: z.re = c; z.im = s; break;
    case 1: z.re = -s; z.im = c; break;
    case 2: z.re = -c; z.im = -s; break;
    default: z.re = s; z.im = -c; break;
    }
    return z;
}

/* W(b, a, c) of beamform.h; 0 for an antenna missing from the batch. */
BF_FN bf_cplx bf_weight(const cbf_beam_coef *k, int c, int present)
{
    bf_cplx w = {0.0f, 0.0f};
    if (!present)
        return w;
    const bf_cplx r = bf_turn(k->phase0 + (uint64_t)c * k->step);
    w.re = BF_MUL(k->gain, r.re);
    w.im = BF_MUL(k->gain, r.im);
    return w;
}

/* The coefficients as integers: beam b's W(b, a, c) times 2^e_b, rounded
 * to nearest (ties to even), e_b = 22 - E with max over antennas of
 * |gain(b, a)| = f 2^E, f in [0.5, 1). Each part is then at most 2^22 + 1 in
 * size (|W| <= |gain| up to the polynomial's 2e-9), within 2^-(e_b + 1) <=
 * 2^-22 max|gain| of W, and the sum over antennas of integer coefficient
 * times integer sample is exact in any order: the CPU and GPU (tensor
 * cores, which add in an order of their own) agree bit for bit. A power of
 * two keeps integers integers: a weight of 1 is 2^21 exactly.
 * e_b is clamped to [-100, 100] so 2^e_b and 2^-e_b are normal floats
 * (gains are refused above 1e30, so only the upper clamp can act, for
 * gains below 2^-78, whose beams round to 0 anyway). */
BF_FN int bf_beam_exp(float max_gain)
{
    if (!(max_gain > 0.0f))
        return 0;
    int E;
    (void)frexpf(max_gain, &E);
    const int e = 22 - E;
    return e < -100 ? -100 : e > 100 ? 100 : e;
}

/* round(v x scale) for scale = 2^e_b (an exact multiply, one rounding). */
BF_FN int32_t bf_fixed(float v, float scale)
{
    return (int32_t)rintf(BF_MUL(v, scale));
}

/* q (|q| <= 2^22 + 1) as three int8 digits, q = 65536 d[0] + 256 d[1] + d[2]
 * (d[0] within [-65, 65]): the tensor cores multiply int8 by int8. */
BF_FN void bf_digits(int32_t q, int8_t d[3])
{
    const int32_t lo = (int32_t)(int8_t)(uint8_t)((uint32_t)q & 0xffu);
    const int32_t q1 = (q - lo) / 256;
    const int32_t mid = (int32_t)(int8_t)(uint8_t)((uint32_t)q1 & 0xffu);
    d[0] = (int8_t)((q1 - mid) / 256);
    d[1] = (int8_t)mid;
    d[2] = (int8_t)lo;
}

/* An exact integer sum back to a beam value: one rounding to float32, then
 * the exact multiply by 2^-e_b. */
BF_FN float bf_unfix(int64_t sum, float inv_scale)
{
    return BF_MUL(BF_I64_TO_F(sum), inv_scale);
}

/* Round half to even and clip to [-127, 127]; 1 when clipped. Without
 * branches: the GPU runs it for every output value. */
BF_FN int bf_quant(float v, int8_t *q)
{
#ifdef __CUDA_ARCH__
    /* one conversion instead of a rounding and a conversion: the same
     * integer where it fits, and a saturated one (clipped as well) where
     * it does not; v is never NaN */
    const int r = __float2int_rn(v);
    *q = (int8_t)min(max(r, -127), 127);
    return (r > 127) | (r < -127);
#else
    const float r = rintf(v);
    *q = (int8_t)(int)fminf(fmaxf(r, -127.0f), 127.0f);
    return (r > 127.0f) | (r < -127.0f);
#endif
}

/* One output value from its sum: dither (draw as beamform.h says, from
 * the dither state z of its counter: cbf_dither_state), round, clip;
 * returns 1 when saturated. */
BF_FN int bf_output_state(bf_cplx acc, int dither, uint64_t z, int8_t out[2])
{
    if (dither) {
        const uint64_t u = cbf_dither_mix(z);
        acc.re = BF_ADD(acc.re, cbf_dither_float((uint32_t)(u >> 32)));
        acc.im = BF_ADD(acc.im, cbf_dither_float((uint32_t)u));
    }
    return bf_quant(acc.re, &out[0]) | bf_quant(acc.im, &out[1]);
}

/* The same from the key and the value's counter. */
BF_FN int bf_output(bf_cplx acc, int dither, uint64_t key, uint64_t counter, int8_t out[2])
{
    return bf_output_state(acc, dither, cbf_dither_state(key, counter), out);
}

#endif
