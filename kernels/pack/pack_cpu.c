/* pack_cpu.c: see pack.h. Packing runs a 64-bit accumulator that moves
 * whole bytes at a time (with bits <= 16 and at most 7 bits left over it
 * never holds more than 23); unpacking is kernels/common/include/cbf/kernels/packed.h's
 * decoder. */
#include "pack.h"

#include "cbf/kernels/packed.h"

int cbf_pack_bits_ok(int bits)
{
    return bits >= CBF_PACK_MIN_BITS && bits <= CBF_PACK_MAX_BITS;
}

size_t cbf_pack_bytes(size_t n, int bits)
{
    if (!cbf_pack_bits_ok(bits))
        return 0;
    /* n x bits could overflow for absurd n; split it so it cannot. */
    return (n / 8) * (size_t)bits + ((n % 8) * (size_t)bits + 7) / 8;
}

int32_t cbf_pack_min(int bits)
{
    return cbf_pack_bits_ok(bits) ? -((int32_t)1 << (bits - 1)) : 0;
}

int32_t cbf_pack_max(int bits)
{
    return cbf_pack_bits_ok(bits) ? ((int32_t)1 << (bits - 1)) - 1 : 0;
}

int cbf_pack(const int16_t *in, size_t n, int bits, uint8_t *out, char *msg, size_t msglen)
{
    if (!cbf_pack_bits_ok(bits))
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "pack: bits = %d, supported widths are %d..%d", bits,
                             CBF_PACK_MIN_BITS, CBF_PACK_MAX_BITS);
    const int32_t lo = cbf_pack_min(bits), hi = cbf_pack_max(bits);
    const uint64_t mask = ((uint64_t)1 << bits) - 1;
    uint64_t acc = 0;
    int held = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (in[i] < lo || in[i] > hi)
            return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                                 "pack: sample %zu = %d is outside [%d, %d] for %d bits", i,
                                 (int)in[i], (int)lo, (int)hi, bits);
        acc = (acc << bits) | ((uint64_t)(int64_t)in[i] & mask);
        held += bits;
        while (held >= 8) {
            held -= 8;
            out[o++] = (uint8_t)(acc >> held);
        }
    }
    if (held > 0)
        out[o] = (uint8_t)(acc << (8 - held));
    return 0;
}

int cbf_unpack_range(const uint8_t *in, size_t first, size_t n, int bits, int16_t *out,
                     char *msg, size_t msglen)
{
    if (!cbf_pack_bits_ok(bits))
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "unpack: bits = %d, supported widths are %d..%d", bits,
                             CBF_PACK_MIN_BITS, CBF_PACK_MAX_BITS);
    /* The input is not padded: it ends with the byte that holds the last
     * bit of sample first + n - 1. */
    const size_t bytes = cbf_pack_bytes(first + n, bits);
    for (size_t i = 0; i < n; i++)
        out[i] = (int16_t)cbf_packed_sample_in(in, bytes, first + i, bits);
    return 0;
}

int cbf_unpack(const uint8_t *in, size_t n, int bits, int16_t *out, char *msg, size_t msglen)
{
    return cbf_unpack_range(in, 0, n, bits, out, msg, msglen);
}
