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
#define BF_RCP(x) __frcp_rn(x)
#else
#define BF_FN static inline
#define BF_MUL(a, b) ((a) * (b))
#define BF_ADD(a, b) ((a) + (b))
#define BF_I64_TO_F(x) ((float)(x))
#define BF_RCP(x) (1.0f / (x))
#endif

/* Coefficient bits (bf_beam_exp) and the int8 digits that hold them. */
#define BF_DIGITS 2
#define BF_COEF_BITS 14

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

/* The coefficients as integers: beam b's W(b, a, c) times s_b, rounded
 * to nearest (ties to even), s_b = 2^e_b / m_b for beam b's largest
 * |gain(b, a)| = g_b = m_b 2^E, m_b in [0.5, 1), e_b = BF_COEF_BITS - E:
 * the largest gain becomes 2^BF_COEF_BITS = 2^14 exactly (g_b s_b is
 * within 2^-24 of it, relative, and rounds to it), and the sum over antennas of integer
 * coefficient times integer sample is exact in any order, then back to a
 * beam value times 1 / s_b = m_b 2^-e_b (exact in float32): the CPU and
 * GPU (tensor cores, which add in an order of their own) agree bit for
 * bit. For equal gains (weights 1) the beam value is the float32 of the
 * exact sum times the float32 gain, rounded once: a decimal gain such as
 * 0.05 keeps its exact maths' ties (k + 1/2) as ties, which then round
 * to even. (A power-of-two scale 2^e_b made 0.05 into 13107 / 2^18 =
 * 0.0499992, which rounded every tie toward zero.) Each part is at most
 * 2^14 in size (|W| <= |gain| up to the polynomial's 2e-9), and q / s_b
 * is within 2^-15 g_b + 2^-23 |W| of W (half a unit, and the roundings of
 * W s_b and of s_b).
 * Why 14 bits: two int8 digits per coefficient (bf_digits), so the tensor
 * cores run two products per sample and coefficient, not three. The
 * rounding of the coefficients adds an error of rms 2^-15 / sqrt(3) g_b
 * per term, about 100 dB below a beam of incoherent inputs and some 60 dB
 * below the 8-bit output's own rounding noise at any level that uses the
 * output's range; the coefficients' own polynomial and float32 steps are
 * finer still. (Until 2026-11-25: 22 bits, three digits.)
 * e_b is clamped to [-100, 100] so 2^e_b and 2^-e_b are normal floats
 * (gains are refused above 1e30, so only the upper clamp can act, for
 * gains below 2^-78, whose beams round to 0 anyway). */
BF_FN int bf_beam_exp(float max_gain)
{
    if (!(max_gain > 0.0f))
        return 0;
    int E;
    (void)frexpf(max_gain, &E);
    const int e = BF_COEF_BITS - E;
    return e < -100 ? -100 : e > 100 ? 100 : e;
}

/* Beam b's s_b and 1 / s_b (above) from its largest |gain|; 1 and 1 for
 * a beam of zero gains. The reciprocal of m_b is IEEE's correctly
 * rounded one on both sides (BF_RCP), so s_b is the same float. */
BF_FN void bf_beam_scales(float max_gain, float *scale, float *inv)
{
    if (!(max_gain > 0.0f)) {
        *scale = *inv = 1.0f;
        return;
    }
    int E;
    const float m = frexpf(max_gain, &E);
    const int e = bf_beam_exp(max_gain);
    *scale = ldexpf(BF_RCP(m), e);
    *inv = ldexpf(m, -e);
}

/* round(v x scale): one multiply, one rounding. */
BF_FN int32_t bf_fixed(float v, float scale)
{
    return (int32_t)rintf(BF_MUL(v, scale));
}

/* q (|q| <= 2^14 + 1) as BF_DIGITS int8 digits, q = 256 d[0] + d[1]
 * (d[0] within [-65, 65]): the tensor cores multiply int8 by int8. */
BF_FN void bf_digits(int32_t q, int8_t d[BF_DIGITS])
{
    const int32_t lo = (int32_t)(int8_t)(uint8_t)((uint32_t)q & 0xffu);
    d[0] = (int8_t)((q - lo) / 256);
    d[1] = (int8_t)lo;
}

/* An exact integer sum back to a beam value: its float32 (exact below
 * 2^24 in size) times inv = 1 / s_b, rounded. */
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

/* The dither draws (beamform.h): one per beam, channel and two spectra,
 * the draw of absolute spectrum s being number floor(s / 2); the even
 * spectrum takes the draw's high 32 bits, the odd one its low 32 bits, of
 * which the high 16 dither the real part and the low 16 the imaginary.
 * A draw's counter: */
BF_FN uint64_t bf_dither_counter(uint64_t spectrum, uint64_t channel, uint64_t total_channels,
                                 uint64_t n_beams, uint64_t beam)
{
    return ((spectrum >> 1) * total_channels + channel) * n_beams + beam;
}

/* Spectrum s's 32 bits of its draw u. */
BF_FN uint32_t bf_dither_bits(uint64_t u, uint64_t spectrum)
{
    return spectrum & 1u ? (uint32_t)u : (uint32_t)(u >> 32);
}

/* One output value from its sum: with dither, plus the values of its 32
 * bits h (bf_dither_bits); round, clip; returns 1 when saturated. */
BF_FN int bf_output_bits(bf_cplx acc, int dither, uint32_t h, int8_t out[2])
{
    if (dither) {
        acc.re = BF_ADD(acc.re, cbf_dither_float16(h >> 16));
        acc.im = BF_ADD(acc.im, cbf_dither_float16(h));
    }
    return bf_quant(acc.re, &out[0]) | bf_quant(acc.im, &out[1]);
}

#endif
