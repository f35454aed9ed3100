/* beamform_math.h: the float32 steps the CPU and CUDA beamformers share,
 * written once so both do the same IEEE operations in the same order and
 * agree bit for bit. Every product that meets an add is an explicit fmaf or
 * an explicitly rounded multiply: nvcc would otherwise fuse `a * b + c` on
 * its own and the C compiler would not. */
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

/* A sum over antennas, as four partial sums, one per real product of
 * w x: keeping them apart gives the GPU four independent chains of fused
 * multiply-adds per (beam, spectrum) instead of two, which is what keeps
 * its FMA units busy at few beams; the CPU keeps the same four. */
typedef struct bf_acc {
    float rr, ri, ir, ii;
} bf_acc;

/* acc += w x, one fused multiply-add into each partial sum. */
BF_FN void bf_mad(bf_acc *acc, bf_cplx w, float xr, float xi)
{
    acc->rr = fmaf(w.re, xr, acc->rr);
    acc->ri = fmaf(-w.im, xi, acc->ri);
    acc->ir = fmaf(w.re, xi, acc->ir);
    acc->ii = fmaf(w.im, xr, acc->ii);
}

/* The sum: re = rr + ri, im = ir + ii. */
BF_FN bf_cplx bf_acc_sum(bf_acc acc)
{
    bf_cplx v;
    v.re = BF_ADD(acc.rr, acc.ri);
    v.im = BF_ADD(acc.ir, acc.ii);
    return v;
}

/* Round half to even and clip to [-127, 127]; 1 when clipped. */
BF_FN int bf_quant(float v, int8_t *q)
{
    const float r = rintf(v);
    if (r > 127.0f) {
        *q = 127;
        return 1;
    }
    if (r < -127.0f) {
        *q = -127;
        return 1;
    }
    *q = (int8_t)r;
    return 0;
}

/* One output value from its sum: dither (draw as beamform.h says), round,
 * clip; returns 1 when saturated. */
BF_FN int bf_output(bf_cplx acc, int dither, uint64_t key, uint64_t counter, int8_t out[2])
{
    if (dither) {
        const uint64_t u = cbf_dither_u64(key, counter);
        acc.re = BF_ADD(acc.re, cbf_dither_float((uint32_t)(u >> 32)));
        acc.im = BF_ADD(acc.im, cbf_dither_float((uint32_t)u));
    }
    return bf_quant(acc.re, &out[0]) | bf_quant(acc.im, &out[1]);
}

#endif
