/* stage/contracts/adc.h: digitiser samples ("cbf.adc.packed"), from dsim or
 * the receiver to pfb, ddc, upload and the sender.
 *
 * Payload [antenna][pol][bytes]: samples_per_chunk bit-packed signed samples
 * per antenna-pol (desc.bits wide, big-endian, docs/formats.md); one presence
 * flag per heap of heap_samples samples, [antenna][pol][heap]. */
#ifndef CBF_CONTRACTS_ADC_H
#define CBF_CONTRACTS_ADC_H

#include "stage/contracts/common.h"

#define CBF_TYPE_ADC_PACKED "cbf.adc.packed"

#define CBF_ATTR_SAMPLES_PER_CHUNK "samples_per_chunk"
#define CBF_ATTR_HEAP_SAMPLES "heap_samples"

#endif
