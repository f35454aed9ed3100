/* fft_post_dev.cuh: the wideband post-processing's per-value maths (the
 * last Cooley-Tukey stage and real-to-complex fix-up, delay, gain, dither,
 * rounding and saturation), shared by fft_post.cu's post kernels and the
 * fused cuFFTDx FFT + post kernel (fft_dx.cu), so the two paths differ only
 * in their transforms. CUDA device code only. */
#ifndef CBF_KERNEL_FFT_POST_DEV_CUH
#define CBF_KERNEL_FFT_POST_DEV_CUH

#include "cbf_cplx.h"
#include "fft_post_dither.h"

static __device__ __forceinline__ float2 conj2(float2 a) { return make_float2(a.x, -a.y); }

/* Rounds v to the nearest integer, ties to even, clipped to [-lim, lim]
 * (lim odd: 127 or 7), and sets *clipped when it was clipped (|v| >= lim +
 * 1/2; NaN too, giving -lim, as the CPU's quant). Returns the bits of
 * 1.5 x 2^23 + q as a float, whose low byte is q's two's complement: the
 * clamp keeps q small, where the float's last mantissa bit is worth 1, so
 * the add rounds as rint does, and no float-to-int conversion (the SM's
 * conversion unit, an eighth of the FMA rate) is needed. */
static __device__ __forceinline__ unsigned quant_bits(float v, int lim, int *clipped)
{
    const float l = (float)lim;
    if (!(fabsf(v) < l + 0.5f))
        *clipped = 1;
    return __float_as_uint(__fadd_rn(fminf(fmaxf(v, -l), l), 12582912.0f));
}

/* X_k and X_(N-k) for k = p m + s, from the bins s and m - s of the n
 * sub-transforms (already loaded, twiddled by exp(-2 pi i r s / N)). */
template <int N_UNZIP>
__device__ __forceinline__ void combine(const float2 *zs, const float2 *zc, int p, float2 hk,
                                        float2 *xk, float2 *xnk)
{
    float2 A = make_float2(0.f, 0.f), B = A;
#pragma unroll
    for (int r = 0; r < N_UNZIP; r++) {
        int e = (r * p) % N_UNZIP * (4 / N_UNZIP);
        float2 a = rot_quarter(zs[r], e), b = rot_quarter(zc[r], e);
        A.x += a.x; A.y += a.y;
        B.x += b.x; B.y += b.y;
    }
    float2 U = make_float2(0.5f * (A.x + B.x), 0.5f * (A.y + B.y));
    /* V = (A - B) / 2i */
    float2 V = make_float2(0.5f * (A.y - B.y), -0.5f * (A.x - B.x));
    float2 tv = cmul(hk, V); /* hk = exp(-i pi k / N) */
    *xk = make_float2(U.x + tv.x, U.y + tv.y);
    *xnk = make_float2(U.x - tv.x, -U.y + tv.y);
}

/* The dither of a run: on, key, antenna, and the absolute index of the
 * run's spectrum 0 (fft_post_dither.h). */
struct dither_run {
    int on;
    int antenna;
    unsigned long long key, first;
};

/* The draw that dithers channels q and channels - q of pol in spectrum g
 * of the run (fft_post_dither.h): one hash for four values. */
static __device__ __forceinline__ unsigned long long dither_draw(const dither_run &dr, long long g,
                                                                int channels, int q, int pol)
{
    return cbf_fft_post_dither_draw(dr.key, dr.first + (unsigned long long)g, (uint64_t)channels,
                                    (uint64_t)(unsigned)q, pol, (uint64_t)dr.antenna);
}

/* Gain (with delay and phase), dither, quantise one value (channel k, pol);
 * returns its packed bits. gain: the value's entry of this spectrum's table
 * (eff_gain_kernel's, read by the caller, whose table layout it is); dp:
 * this spectrum's delay model (fine delay, phase), applied when rot is set,
 * referenced to channel kc (channels / 2) as eff_gain_kernel's; h: the
 * value's 32 bits of its pair's draw (dither_draw, cbf_fft_post_dither_bits),
 * added when dither is set. */
static __device__ __forceinline__ unsigned finish(float2 x, float2 gain, int k, int bits,
                                                 unsigned *sat, bool rot, float2 dp,
                                                 float inv_n_ch, int kc, bool dither, unsigned h)
{
    if (rot)
        x = cmul(x, expi_pi(fmaf(-dp.x * inv_n_ch, (float)(k - kc), dp.y * (float)M_1_PI)));
    x = cmul(x, gain);
    if (dither)
        cbf_fft_post_dither_add(h, &x.x, &x.y);
    int clipped = 0, lim = bits == 8 ? 127 : 7;
    const unsigned re = quant_bits(x.x, lim, &clipped), im = quant_bits(x.y, lim, &clipped);
    *sat += clipped;
    if (bits == 8)
        return (re & 0xffu) | (im & 0xffu) << 8;
    return (re & 15u) << 4 | (im & 15u);
}

#endif
