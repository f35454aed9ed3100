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
 * 16 random bits h of u become a dither value in (-1/2, 1/2), mean 0:
 * x = h as a signed 16-bit integer, plus 1 when negative, times 2^-16
 * (cbf_dither_float16): exact in float32, at most 1/2 - 2^-16 in size, so
 * an integer up to 2^7 plus dither still rounds back to the integer:
 * dither never changes a value that is exact already. One draw gives four
 * such values. (Until 2026-12-04 fft_post took 32 bits per value, scaled
 * by 2^-32 (1 - 2^-16), as katgpucbf's uniform dither.)
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

/* 16 random bits (the low 16 of h) to a value in (-1/2, 1/2), mean 0:
 * x = the bits as a signed 16-bit integer, plus 1 when negative (x in
 * [-(2^15 - 1), 2^15 - 1]), times 2^-16. Exact in float32 (no rounding,
 * so a compiler fusing the multiply into a following add changes
 * nothing), at most 1/2 - 2^-16 in size: an integer up to 2^7 plus dither
 * rounds back to itself. The beamformer's and fft_post's dither (four
 * values per draw). */
CBF_DITHER_FN float cbf_dither_float16(uint32_t h)
{
    int32_t x = (int32_t)(int16_t)(uint16_t)(h & 0xffffu);
    x += (int32_t)((h >> 15) & 1u);
    return (float)x * 0x1p-16f;
}

#endif
