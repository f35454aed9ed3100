/* kernels/common/dither.h: the counter-based random numbers of every
 * kernel that dithers before quantising (the beamformer, fft_post).
 *
 * A value is a pure function of a 64-bit key and a 64-bit counter, so any
 * thread can draw the value of any output without carrying a generator
 * state: the CPU and the GPU, given the same (key, counter), draw the same
 * bits, and a run repeats exactly for the same key. Definition (also in
 * docs/formats.md, "Dither"):
 *
 *   z = key + (counter + 1) * 0x9e3779b97f4a7c15        (mod 2^64)
 *   z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
 *   z = (z ^ (z >> 27)) * 0x94d049bb133111eb
 *   u = z ^ (z >> 31)
 *
 * which is SplitMix64's output number `counter` from the state `key`
 * (Steele, Lea and Flood 2014; it passes BigCrush), addressable at random.
 *
 * 16 random bits j of u become a dither value (j + 1/2) 2^-16 - 1/2 in
 * (-1/2, 1/2), mean 0 (cbf_dither_float16): exact in float32, at most
 * 1/2 - 2^-17 in size, so an integer up to 2^7 plus dither still rounds
 * back to the integer: dither never changes a value that is exact
 * already. One draw gives four such values. (Until 2026-12-04: j as a
 * signed 16-bit integer, plus 1 when negative, times 2^-16; fft_post took
 * 32 bits per value, scaled by 2^-32 (1 - 2^-16), as katgpucbf's uniform
 * dither.)
 *
 * Usable from C (static inline) and from CUDA device code (compiled by
 * nvcc, the functions become __host__ __device__). */
#ifndef CBF_KERNEL_DITHER_H
#define CBF_KERNEL_DITHER_H

#include <stdint.h>

#ifdef __CUDACC__
#define CBF_DITHER_FN static __host__ __device__ __forceinline__
#else
#define CBF_DITHER_FN static inline
#endif

/* SplitMix64's state step (the golden ratio x 2^64, odd). */
#define CBF_DITHER_GAMMA 0x9e3779b97f4a7c15ull

/* The state of output `counter` from `key`. It is linear in the counter,
 * so a kernel drawing for counters c + k d can step the state by
 * k d CBF_DITHER_GAMMA (mod 2^64) with adds instead of multiplying. */
CBF_DITHER_FN uint64_t cbf_dither_state(uint64_t key, uint64_t counter)
{
    return key + (counter + 1u) * CBF_DITHER_GAMMA;
}

/* SplitMix64's output function of a state. */
CBF_DITHER_FN uint64_t cbf_dither_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* SplitMix64 output `counter` of the stream started at `key`. */
CBF_DITHER_FN uint64_t cbf_dither_u64(uint64_t key, uint64_t counter)
{
    return cbf_dither_mix(cbf_dither_state(key, counter));
}

/* 16 random bits j (the low 16 of h) to a value in (-1/2, 1/2):
 * (j + 1/2) 2^-16 - 1/2, the 2^16 points 2^-17 apart from 1/2 - 2^-17 down
 * to its negation, mean 0. Exact in float32 (no rounding, so a compiler
 * fusing it into a following add changes nothing); at most 1/2 - 2^-17 in
 * size, so an integer up to 2^7 plus dither rounds back to itself. On the
 * GPU the value is made from its bits, 1 + (j + 1/2) 2^-16 as a float's
 * mantissa minus 3/2: two integer instructions and an add, where an
 * int-to-float conversion would take the SM's conversion unit (16 per
 * clock per SM, an eighth of the FMA rate). The beamformer's and
 * fft_post's dither (four values per draw). */
CBF_DITHER_FN float cbf_dither_float16(uint32_t h)
{
#ifdef __CUDA_ARCH__
    return __int_as_float(0x3f800040u | (h & 0xffffu) << 7) - 1.5f;
#else
    return ((float)(h & 0xffffu) + 0.5f) * 0x1p-16f - 0.5f;
#endif
}

#endif
