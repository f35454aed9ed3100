/* xeng_ref.h: plain int64 reference X-engine (tests only). */
#ifndef XENG_REF_H
#define XENG_REF_H

#include <stddef.h>
#include <stdint.h>

#include "correlator.h"

/* Correlation of batches [b0, b1) of `in`, in docs/formats.md order, freshly
 * allocated (cbf_corr_accum_len values). */
int64_t *xeng_ref_correlate(const cbf_corr_shape *s, const uint8_t *in, size_t b0, size_t b1);

/* 64 -> 32 bits with saturation, magic value on bad antennas' baselines;
 * returns the saturated visibilities. */
uint64_t xeng_ref_reduce(int n_ants, int channels, const int64_t *sum, const uint8_t *bad,
                         int32_t *out);

#endif
