/* fft_post_dither.h: the dither step of fft_post, one definition for the
 * CPU (fft_post_cpu.c) and CUDA (fft_post.cu) back ends, so both draw the
 * same values and add them with the same single float32 rounding: the
 * bytes differ between the two only where the values before the dither
 * do (their FFTs round differently), never because of it.
 *
 * Counter of the value of channel k (0..channels-1, output order),
 * polarisation pol and antenna a at absolute spectrum s (the timestamp of
 * its window / samples between spectra):
 *
 *   counter = ((s x channels + k) x 2 + pol) x 65536 + a       (mod 2^64)
 *
 * The draw u = cbf_dither_u64(key, counter) (kernels/common/dither.h)
 * dithers the real part with its high 32 bits, the imaginary part with its
 * low 32 bits (docs/formats.md, "Dither"; the beamformer's draws give
 * four 16-bit values each instead). s x
 * channels x 2 is about the timestamp in digitiser samples (wideband: a
 * spectrum is 2 x channels samples), so every value of every antenna has
 * its own counter while timestamps stay below 2^48, SPEAD's timestamp width. */
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

FP_DITHER_FN uint64_t cbf_fft_post_dither_counter(uint64_t spectrum, uint64_t channels,
                                                  uint64_t k, int pol, uint64_t antenna)
{
    return ((spectrum * channels + k) * 2u + (uint64_t)pol) * CBF_FFT_POST_DITHER_ANTENNAS +
           antenna;
}

/* Adds the dither of `counter` to (re, im): one rounding each, never fused
 * with the gain's products (nvcc would contract a * b + c on its own). */
FP_DITHER_FN void cbf_fft_post_dither_add(uint64_t key, uint64_t counter, float *re, float *im)
{
    const uint64_t u = cbf_dither_u64(key, counter);
#ifdef __CUDA_ARCH__
    *re = __fadd_rn(*re, cbf_dither_float((uint32_t)(u >> 32)));
    *im = __fadd_rn(*im, cbf_dither_float((uint32_t)u));
#else
    *re += cbf_dither_float((uint32_t)(u >> 32));
    *im += cbf_dither_float((uint32_t)u);
#endif
}

#endif
