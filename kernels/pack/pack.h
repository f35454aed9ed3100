/* pack.h: bit packing of signed digitiser samples, 2..16 bits wide.
 *
 * The layout is the MeerKAT digitiser payload's: samples are written one
 * after another as two's-complement fields of `bits` bits, most significant
 * bit first, so sample 0 occupies the top bits of byte 0. A stream whose
 * length in bits is not a multiple of 8 ends with zero padding bits.
 *
 * Return values are 0 or CBF_KERN_EINVAL (kernels/common/status.h); the
 * message buffer (may be NULL) says what was wrong. This folder never
 * includes core/. */
#ifndef CBF_KERNEL_PACK_H
#define CBF_KERNEL_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CBF_PACK_MIN_BITS 2
#define CBF_PACK_MAX_BITS 16

/* Whether bits is a supported width (2..16). */
int cbf_pack_bits_ok(int bits);

/* Bytes that hold n packed samples: ceil(n x bits / 8); 0 for a bad width. */
size_t cbf_pack_bytes(size_t n, int bits);

/* Smallest and largest value a sample of `bits` bits holds. */
int32_t cbf_pack_min(int bits);
int32_t cbf_pack_max(int bits);

/* Packs n samples into cbf_pack_bytes(n, bits) bytes of out. A value
 * outside [cbf_pack_min, cbf_pack_max] is an error (naming its index), not
 * a silent wrap: saturation is the producer's decision and its count. */
int cbf_pack(const int16_t *in, size_t n, int bits, uint8_t *out, char *msg, size_t msglen);

/* Unpacks n samples (sign-extended) from cbf_pack_bytes(n, bits) bytes. */
int cbf_unpack(const uint8_t *in, size_t n, int bits, int16_t *out, char *msg, size_t msglen);

/* Unpacks samples [first, first + n) of a packed stream, for readers that
 * start in the middle of a chunk (a heap, a channel window). */
int cbf_unpack_range(const uint8_t *in, size_t first, size_t n, int bits, int16_t *out,
                     char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif
#endif
