/* beamform_dev.cuh: the beamformer's device steps that more than one
 * kernel runs: the coefficient digits of a stage of 64 antennas x 8 beams
 * in shared memory, laid out for the int8 tensor cores' B fragments, the
 * beams' scales, and one lane's output pair from its digit sums. The
 * beamformer's own kernel (beamform.cu) and the correlator's Hopper kernel
 * that forms beams from the samples it stages (correlator_sm90.cu) include
 * it, so both give the CPU's bytes by the same steps. */
#ifndef CBF_KERNEL_BEAMFORM_DEV_CUH
#define CBF_KERNEL_BEAMFORM_DEV_CUH

#include <stdint.h>

#include "beamform.h"
#include "beamform_math.h"

#define BF_GROUP 8                        /* beams per pass: 2 n8 tiles of (re, im) x 4 beams */
#define BF_STAGE 64                       /* antennas whose coefficients are in shared memory */
#define BF_KS (BF_STAGE / 8)              /* k-steps per stage */

/* The coefficient fragments of one stage: for k-step kk, n-tile nt and the
 * lane that reads them, the B-fragment pairs (antenna a, antenna a + 4) of
 * both digits in one 16-byte word (digit 0 in .x, .y, digit 1 in .z, .w):
 * each lane reads its own consecutive words, free of bank conflicts, into
 * the register pairs the mma takes. */
typedef struct bf_coefs {
    uint4 d01[BF_KS][2][32];
} bf_coefs;

/* A coefficient's digit pairs against one antenna's (re, im) input bytes:
 * h[part][d] is digit d of output column re (part 0: qr, -qi) or im
 * (part 1: qi, qr), low byte against re. */
static __device__ __forceinline__ void bf_coef_halves(bf_cplx w, float scale, uint16_t (&h)[2][BF_DIGITS])
{
    const int32_t qr = bf_fixed(w.re, scale), qi = bf_fixed(w.im, scale);
    int8_t r[BF_DIGITS], ni[BF_DIGITS], i[BF_DIGITS];
    bf_digits(qr, r);
    bf_digits(-qi, ni);
    bf_digits(qi, i);
#pragma unroll
    for (int d = 0; d < BF_DIGITS; d++) {
        h[0][d] = (uint16_t)((uint8_t)r[d] | (unsigned)(uint8_t)ni[d] << 8);
        h[1][d] = (uint16_t)((uint8_t)i[d] | (unsigned)(uint8_t)r[d] << 8);
    }
}

/* Makes the coefficient digits of (antenna a0 + k, beam bg + j) for the
 * stage: the re and im output columns against the input word's bytes (pol
 * 0 re, im, pol 1 re, im), each as two digit words, stored where the
 * reading lanes find them (bf_coefs). */
static __device__ __forceinline__ void bf_coef_make(bf_coefs &sc, int k, int j, bf_cplx w, float scale,
                                                    int pol)
{
    uint16_t h[2][BF_DIGITS];
    bf_coef_halves(w, scale, h);
    const int sh = pol ? 16 : 0;
    const int kk = k / 8, half = (k % 8) / 4, tig = k % 4, nt = j / 4;
#pragma unroll
    for (int part = 0; part < 2; part++) {
        /* re = qr xr - qi xi; im = qi xr + qr xi; column n = 2 (j % 4) + part
         * is read by lanes 4 n + tig */
        const int lane = 4 * (2 * (j % 4) + part) + tig;
        unsigned *d01 = (unsigned *)&sc.d01[kk][nt][lane];
        d01[half] = (unsigned)h[part][0] << sh;
        d01[2 + half] = (unsigned)h[part][1] << sh;
    }
}

/* The same digits for A fragments of one polarisation: where the input
 * word's bytes (pol 0 re, im, pol 1 re, im) of antennas k and k + 4 are
 * permuted into (re, im) of k, (re, im) of k + 4 in pol p, one k32 step
 * covers 16 antennas of that pol. For step kq (antennas 16 kq ..), pol p,
 * n-tile nt and the lane that reads them: the B-fragment words of both
 * digits (antennas 16 kq + tig, + 4 | + 8, + 12 in halves) in one 16-byte
 * word. A beam's coefficients sit in its own
 * pol's words, zeros in the other's, so an n-tile whose beams share a pol
 * needs the mma of that pol only: half the products of bf_coefs for the
 * usual beams, each on one pol of every antenna. */
#define BF_KQ (BF_STAGE / 16)
typedef struct bf_coefs_pol {
    uint4 d01[2][BF_KQ][2][32];
} bf_coefs_pol;

/* Beam slot j's coefficient digits for antenna k (bf_coef_make's values),
 * written to pol's words and zeros to the other pol's: every halfword of
 * the layout has exactly one writer. */
static __device__ __forceinline__ void bf_coef_make_pol(bf_coefs_pol &sc, int k, int j, bf_cplx w, float scale,
                                                        int pol)
{
    uint16_t h[2][BF_DIGITS];
    bf_coef_halves(w, scale, h);
    const int kq = k / 16, reg = (k % 16) / 8, hw = (k % 8) / 4, tig = k % 4, nt = j / 4;
#pragma unroll
    for (int part = 0; part < 2; part++) {
        const int lane = 4 * (2 * (j % 4) + part) + tig;
#pragma unroll
        for (int p = 0; p < 2; p++) {
            uint16_t *d01 = (uint16_t *)&sc.d01[p][kq][nt][lane];
            d01[2 * reg + hw] = p == pol ? h[part][0] : 0;
            d01[2 * (2 + reg) + hw] = p == pol ? h[part][1] : 0;
        }
    }
}

/* The stage's coefficients for beams bg.. of channel c, antennas a0..,
 * made by threads tid = 0 .. nthreads - 1. */
static __device__ __forceinline__ void bf_stage_make(bf_coefs &sc, const cbf_beam_job &job, const float *s_scale,
                                                     int bg, int a0, int c, int tid, int nthreads)
{
    const int A = job.shape.n_ants, B = job.shape.n_beams;
    for (int idx = tid; idx < BF_STAGE * BF_GROUP; idx += nthreads) {
        const int k = idx / BF_GROUP, j = idx % BF_GROUP, a = a0 + k, b = bg + j;
        const bool on = a < A && b < B;
        const bf_cplx w = on ? bf_weight(&job.coef[(size_t)b * A + a], c, 1) : bf_cplx{0.0f, 0.0f};
        bf_coef_make(sc, k, j, w, s_scale[j], on ? job.pol[b] : 0);
    }
}

/* The scales s_b and 1 / s_b (bf_beam_scales) of beams bg.. from each beam's largest
 * |gain|: warp j of nwarps takes beam bg + j (and bg + j + nwarps ..). */
static __device__ __forceinline__ void bf_scales(const cbf_beam_job &job, int bg, float *s_scale, float *s_inv,
                                                 int warp, int nwarps)
{
    const int A = job.shape.n_ants, B = job.shape.n_beams, lane = threadIdx.x & 31;
    for (int j = warp; j < BF_GROUP; j += nwarps) {
        float m = 0.0f;
        if (bg + j < B)
            for (int a = lane; a < A; a += 32)
                m = fmaxf(m, fabsf(job.coef[(size_t)(bg + j) * A + a].gain));
        const float mx = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(m)));
        if (lane == 0)
            bf_beam_scales(mx, &s_scale[j], &s_inv[j]);
    }
}

/* 256 d0 + d1, the exact sum from its digit sums, rounded once to float32
 * and multiplied by inv = 1 / s_b: the CPU's bf_unfix of the int64 sum.
 * SMALL (both digit sums at most 2^24 in size, as for N <= 512 antennas:
 * each is at most 2 N x 128 x 128, so both are exact floats): the sum's
 * float32 is one fma of the two, 256 d0 + d1 rounded once, then the
 * multiply: the same float without the 64-bit join and its slow
 * conversion. */
template <bool SMALL>
static __device__ __forceinline__ float bf_join(const int (&q)[BF_DIGITS][4], int i, float inv)
{
    if (SMALL)
        return __fmul_rn(__fmaf_rn(__int2float_rn(q[0][i]), 256.0f, __int2float_rn(q[1][i])), inv);
    long long s = 0;
#pragma unroll
    for (int d = 0; d < BF_DIGITS; d++)
        s = 256 * s + q[d][i];
    return bf_unfix(s, inv);
}

/* Digit d's B-fragment pair of a coefficient word (bf_coefs' d01). */
static __device__ __forceinline__ uint2 bf_digit_frag(uint4 d01, int d)
{
    return d == 0 ? make_uint2(d01.x, d01.y) : make_uint2(d01.z, d01.w);
}

/* The output bytes o of one lane's pair (spectra t and t + 1, one beam)
 * from tile accumulators q ([digit][re t, im t, re t+1, im t+1]) and the
 * beam values v; z is the dither state (cbf_dither_state) of spectrum t's
 * draw, dz the step from one draw to the next, odd: t is an odd absolute
 * spectrum (then t + 1 takes the next draw); clip[h]: 1 where spectrum
 * t + h clipped. No branch (DITHER, and EVEN: t is known to be even, fixed
 * at compile time): a kernel forming several pairs before it stores any
 * lets the scheduler interleave them. SMALL: bf_join's. */
template <bool DITHER, bool SMALL = false, bool EVEN = false>
static __device__ __forceinline__ void bf_pair(const int (&q)[BF_DIGITS][4], float inv, uint64_t z, uint64_t dz,
                                               bool odd, int8_t (&o)[2][2], bf_cplx (&v)[2], int (&clip)[2])
{
    uint32_t hb[2] = {0u, 0u};
    if (DITHER) {
        const uint64_t u0 = cbf_dither_mix(z);
        if (EVEN) {
            hb[0] = (uint32_t)(u0 >> 32);
            hb[1] = (uint32_t)u0;
        } else {
            const uint64_t u1 = cbf_dither_mix(z + dz);
            hb[0] = odd ? (uint32_t)u0 : (uint32_t)(u0 >> 32);
            hb[1] = odd ? (uint32_t)(u1 >> 32) : (uint32_t)u0;
        }
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        v[h] = bf_cplx{bf_join<SMALL>(q, 2 * h, inv), bf_join<SMALL>(q, 2 * h + 1, inv)};
        clip[h] = bf_output_bits(v[h], DITHER, hb[h], o[h]);
    }
}

/* bf_pair's bytes written: as one word where both spectra lie inside
 * [t0, t1) (whole; VEC: the word is aligned), else one by one, and the
 * sums to raw (RAW); returns the clipped count of those written. */
template <bool VEC, bool RAW>
static __device__ __forceinline__ unsigned bf_emit(const int (&q)[BF_DIGITS][4], float inv, int dither, uint64_t z,
                                                   uint64_t dz, bool odd, char2 *out, float2 *raw, int t,
                                                   bool whole, int t0, int t1)
{
    int8_t o[2][2];
    bf_cplx v[2];
    int clip[2];
    if (dither && !odd) /* one draw for both spectra */
        bf_pair<true, false, true>(q, inv, z, dz, false, o, v, clip);
    else if (dither)
        bf_pair<true>(q, inv, z, dz, true, o, v, clip);
    else
        bf_pair<false>(q, inv, z, dz, odd, o, v, clip);
#pragma unroll
    for (int h = 0; h < 2; h++)
        if (RAW && t + h >= t0 && t + h < t1)
            raw[t + h] = make_float2(v[h].re, v[h].im);
    if (VEC && whole) {
        *(char4 *)&out[t] = make_char4(o[0][0], o[0][1], o[1][0], o[1][1]);
        return (unsigned)(clip[0] + clip[1]);
    }
    unsigned sat = 0;
#pragma unroll
    for (int h = 0; h < 2; h++)
        if (t + h >= t0 && t + h < t1) {
            out[t + h] = make_char2(o[h][0], o[h][1]);
            sat += (unsigned)clip[h];
        }
    return sat;
}

#endif
