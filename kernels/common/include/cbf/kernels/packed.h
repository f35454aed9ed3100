/* kernels/common/include/cbf/kernels/packed.h: the packed digitiser sample format, decoded in
 * one place, and the one rule for how far a packed buffer must be readable.
 *
 * Format (docs/formats.md): samples of `bits` bits (2..16), two's
 * complement, written one after another most significant bit first, so
 * sample i occupies bits [i x bits, (i + 1) x bits) of the stream and sample
 * 0 starts at the top bit of byte 0.
 *
 * Padding rule: a buffer of n samples is readable to cbf_packed_bytes(n,
 * bits) = 4 x (ceil(n x bits / 32) + 1) bytes, the whole 32-bit words that
 * hold the samples plus one more word. The padding's contents are never
 * used. It serves every decoder of the project:
 *  - cbf_packed_sample below reads the 3 bytes from the one holding a
 *    sample's first bit: for the last sample, at most 2 bytes past the
 *    last byte that holds samples;
 *  - the PFB's GPU decoder (kernels/pfb/pfb.cu) reads 2 bytes from there,
 *    as the aligned 32-bit words that hold them: at most 4 bytes past the
 *    last sample's first byte, within the extra word. It aligns in memory,
 *    not to the buffer, so it may also read up to 3 bytes before an
 *    unaligned buffer: the buffer must lie in a word-aligned allocation
 *    (any cudaMalloc's), which pfb.h says;
 *  - the DDC's GPU decoder (kernels/ddc/ddc.cu) loads aligned 32-bit words,
 *    one past the word a sample starts in, clamped to the last whole word
 *    the rule gives: the extra word keeps that clamp for threads past the
 *    end only, never for a real sample. Word loads also need the buffer
 *    4-byte aligned, which the DDC checks.
 * The two rules this replaces differed because their decoders did: the
 * PFB's read 16-bit windows (one byte past the samples was enough), the
 * DDC's 32-bit ones (CPU: 4 bytes from a sample's first; GPU: the word
 * after). The word rule is the larger at every n and the only one the word
 * loads accept, so it is the one kept; tests/pack/test_packed.c holds it
 * against each reader's reach.
 *
 * Header-only, so the out-of-tree example plugin uses it from the installed
 * <cbf/kernels/packed.h>, and CUDA device code may call the decoder. */
#ifndef CBF_KERNEL_PACKED_H
#define CBF_KERNEL_PACKED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define CBF_KERN_HD __host__ __device__
#else
#define CBF_KERN_HD
#endif

/* Bytes a buffer of `samples` packed samples must be readable to (see the
 * padding rule above). Split so that samples x bits cannot overflow. */
CBF_KERN_HD static inline size_t cbf_packed_bytes(size_t samples, int bits)
{
    size_t words = (samples / 32) * (size_t)bits + ((samples % 32) * (size_t)bits + 31) / 32;
    return 4 * (words + 1);
}

/* The sample starting `lead` (0..7) bits into p[0]. It is at most 16 bits
 * long, so the 24-bit window p[0..2] holds it: shifted to the top of 32
 * bits, an arithmetic shift brings it down with its sign. */
CBF_KERN_HD static inline int32_t cbf_packed_window(const uint8_t *p, unsigned lead, int bits)
{
    const uint32_t v = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8;
    return (int32_t)(v << lead) >> (32 - bits);
}

/* Sample i, sign-extended, from a buffer padded as cbf_packed_bytes says. */
CBF_KERN_HD static inline int32_t cbf_packed_sample(const uint8_t *in, size_t i, int bits)
{
    const size_t bit = i * (size_t)bits;
    return cbf_packed_window(in + (bit >> 3), (unsigned)(bit & 7), bits);
}

/* Sample i from a buffer of exactly `bytes` readable bytes, not padded (a
 * heap or a payload as it arrives): the same decode, its window taken from
 * a zero-filled copy where it would reach past the end. */
CBF_KERN_HD static inline int32_t cbf_packed_sample_in(const uint8_t *in, size_t bytes, size_t i,
                                                      int bits)
{
    const size_t bit = i * (size_t)bits, first = bit >> 3;
    if (first + 3 <= bytes)
        return cbf_packed_window(in + first, (unsigned)(bit & 7), bits);
    uint8_t tail[3] = {0, 0, 0};
    for (size_t k = 0; first + k < bytes && k < 3; k++)
        tail[k] = in[first + k];
    return cbf_packed_window(tail, (unsigned)(bit & 7), bits);
}

#endif
