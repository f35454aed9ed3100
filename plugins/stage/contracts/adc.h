/* stage/contracts/adc.h: digitiser samples ("cbf.adc.packed"), from dsim or
 * the receiver to pfb, ddc, upload and the sender.
 *
 * Payload [antenna][pol][bytes]: samples_per_chunk bit-packed signed samples
 * per antenna-pol (desc.bits wide, big-endian, docs/formats.md); one presence
 * flag per heap of heap_samples samples, [antenna][pol][heap].
 *
 * Aux (optional: a producer that does not know leaves aux_size 0): one
 * uint32 per heap, in the order of the presence flags, the number of
 * samples the digitiser clipped in that heap. It is what a MeerKAT
 * digitiser reports in digitiser_status and what the sender puts back
 * there; 0 for a missing heap. A consumer checks aux_size before reading. */
#ifndef CBF_CONTRACTS_ADC_H
#define CBF_CONTRACTS_ADC_H

#include <stddef.h>
#include <stdint.h>

#include "stage/contracts/common.h"

#define CBF_TYPE_ADC_PACKED "cbf.adc.packed"

#define CBF_ATTR_SAMPLES_PER_CHUNK "samples_per_chunk"
#define CBF_ATTR_HEAP_SAMPLES "heap_samples"

#define CBF_ADC_CLIP_AUX_LAYOUT "u32[antenna][pol][heap] clipped"

/* digitiser_status (SPEAD item 0x3102) as MeerKAT's digitiser ICD and
 * katgpucbf use it: bit 1 says the heap saturated, bits 47:32 count the
 * saturated samples. */
#define CBF_ADC_STATUS_SATURATION_FLAG_BIT 1
#define CBF_ADC_STATUS_SATURATION_COUNT_SHIFT 32
#define CBF_ADC_STATUS_SATURATION_COUNT_MASK 0xffffu

/* aux bytes of a chunk with n heap flags. */
static inline size_t cbf_adc_clip_aux_size(size_t n_flags)
{
    return n_flags * sizeof(uint32_t);
}

/* The heap's clip counts, or NULL when the buffer carries none. */
static inline const uint32_t *cbf_adc_clip_counts(const void *aux, size_t aux_size, size_t n_flags)
{
    return aux && aux_size >= cbf_adc_clip_aux_size(n_flags) ? (const uint32_t *)aux : NULL;
}

static inline uint64_t cbf_adc_status_encode(uint32_t clipped)
{
    const uint64_t c = clipped > CBF_ADC_STATUS_SATURATION_COUNT_MASK
                           ? CBF_ADC_STATUS_SATURATION_COUNT_MASK
                           : clipped;
    return c ? c << CBF_ADC_STATUS_SATURATION_COUNT_SHIFT |
                   (uint64_t)1 << CBF_ADC_STATUS_SATURATION_FLAG_BIT
             : 0;
}

static inline uint32_t cbf_adc_status_clipped(uint64_t status)
{
    return (uint32_t)(status >> CBF_ADC_STATUS_SATURATION_COUNT_SHIFT &
                      CBF_ADC_STATUS_SATURATION_COUNT_MASK);
}

#endif
