/* fft_post_dither.h: the dither step of fft_post, one definition for the
 * CPU (fft_post_cpu.c) and CUDA (fft_post.cu, fft_dx.cu) back ends, so both
 * draw the same values and add them with the same single float32 rounding:
 * the bytes differ between the two only where the values before the dither
 * do (their FFTs round differently), never because of it.
 *
 * One draw u = cbf_dither_u64(key, counter) (kernels/common/dither.h)
 * dithers four values: both parts of channels k and channels - k of one
 * polarisation p and antenna a at absolute spectrum s (the timestamp of its
 * window / samples between spectra). The pair {k, channels - k} is named by
 * q = min(k, channels - k), 0..channels/2 (channel 0 and channel
 * channels/2 are pairs of one), and
 *
 *   counter = ((s x channels + q) x 2 + p) x 65536 + a       (mod 2^64)
 *
 * Channel k <= channels/2 takes u's high 32 bits, the channel above it the
 * low 32; of those 32 the high 16 dither the real part and the low 16 the
 * imaginary part (cbf_dither_float16, as the beamformer's draws;
 * docs/formats.md, "Dither"). The pair is the one the wideband post
 * processing computes together (X_k and X_(N-k) of one real transform), so
 * the kernels hash once per four values instead of once per two. s x
 * channels x 2 is about the timestamp in digitiser samples (wideband: a
 * spectrum is 2 x channels samples), so every value of every antenna has
 * its own draw while timestamps stay below 2^48, SPEAD's timestamp width. */
#ifndef CBF_KERNEL_FFT_POST_DITHER_H
#define CBF_KERNEL_FFT_POST_DITHER_H

#include <stdint.h>

#include "dither.h"

#define CBF_FFT_POST_DITHER_ANTENNAS 65536

#ifdef __CUDACC__
#define FP_DITHER_FN static __host__ __device__ __forceinline__
#else
#define FP_DITHER_FN static inline
#endif

/* The pair of channel k: min(k, channels - k). */
FP_DITHER_FN uint64_t cbf_fft_post_dither_pair(uint64_t channels, uint64_t k)
{
    return k <= channels / 2 ? k : channels - k;
}

/* The draw of (spectrum, pair, pol, antenna) under key: SplitMix64's
 * output for the counter above. Its state key + (counter + 1) GAMMA is
 * summed from a part per pol and antenna, one per spectrum and one per
 * pair (the counter is linear in each, mod 2^64), so that a kernel's loops
 * share the first two and a pair costs one 32 x 64-bit multiply-add. */
FP_DITHER_FN uint64_t cbf_fft_post_dither_draw(uint64_t key, uint64_t spectrum, uint64_t channels,
                                               uint64_t pair, int pol, uint64_t antenna)
{
    const uint64_t per_pair = CBF_DITHER_GAMMA * 2u * CBF_FFT_POST_DITHER_ANTENNAS;
    return cbf_dither_mix(key +
                          ((uint64_t)pol * CBF_FFT_POST_DITHER_ANTENNAS + antenna + 1u) * CBF_DITHER_GAMMA +
                          spectrum * channels * per_pair + pair * per_pair);
}

/* The 32 bits of draw u that dither channel k of its pair. */
FP_DITHER_FN uint32_t cbf_fft_post_dither_bits(uint64_t u, uint64_t channels, uint64_t k)
{
    return k <= channels / 2 ? (uint32_t)(u >> 32) : (uint32_t)u;
}

/* Adds the dither of 32 bits h to (re, im). Each value is exact in float32
 * (cbf_dither_float16), so the add is the one rounding, fused or not with
 * a multiply; __fadd_rn keeps nvcc from fusing it with the gain's products
 * (which it would contract on its own). */
FP_DITHER_FN void cbf_fft_post_dither_add(uint32_t h, float *re, float *im)
{
#ifdef __CUDA_ARCH__
    *re = __fadd_rn(*re, cbf_dither_float16(h >> 16));
    *im = __fadd_rn(*im, cbf_dither_float16(h));
#else
    *re += cbf_dither_float16(h >> 16);
    *im += cbf_dither_float16(h);
#endif
}

#endif
