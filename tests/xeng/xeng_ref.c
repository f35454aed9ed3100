/* xeng_ref.c: the X-engine written plainly from docs/formats.md, in
 * int64, as the oracle for the kernel and pipeline tests. */
#include "xeng_ref.h"

#include <stdlib.h>

static void sample(const cbf_corr_shape *s, const uint8_t *in, size_t b, int a, int c, int t,
                   int p, int64_t *re, int64_t *im)
{
    size_t idx = ((((b * (size_t)s->n_ants + a) * s->channels + c) * s->spectra_per_heap + t) * 2) + p;
    if (s->bits == 8) {
        *re = (int8_t)in[2 * idx];
        *im = (int8_t)in[2 * idx + 1];
    } else {
        *re = (int8_t)(in[idx] & 0xf0) >> 4;
        *im = (int8_t)(uint8_t)(in[idx] << 4) >> 4;
    }
}

/* Product p1 + 2 p2 of baseline a2 (a2 + 1) / 2 + a1 is the sum of
 * x(a1, p1) conj(x(a2, p2)). */
int64_t *xeng_ref_correlate(const cbf_corr_shape *s, const uint8_t *in, size_t b0, size_t b1)
{
    int64_t *ref = calloc(cbf_corr_accum_len(s), sizeof(int64_t));
    size_t nbl = cbf_corr_baselines(s->n_ants);
    for (int c = 0; c < s->channels; c++)
        for (int a2 = 0; a2 < s->n_ants; a2++)
            for (int a1 = 0; a1 <= a2; a1++)
                for (int p1 = 0; p1 < 2; p1++)
                    for (int p2 = 0; p2 < 2; p2++) {
                        int64_t sr = 0, si = 0;
                        for (size_t b = b0; b < b1; b++)
                            for (int t = 0; t < s->spectra_per_heap; t++) {
                                int64_t r1, i1, r2, i2;
                                sample(s, in, b, a1, c, t, p1, &r1, &i1);
                                sample(s, in, b, a2, c, t, p2, &r2, &i2);
                                sr += r1 * r2 + i1 * i2;
                                si += r2 * i1 - r1 * i2;
                            }
                        size_t at = (((size_t)c * nbl + (size_t)a2 * (a2 + 1) / 2 + a1) * 4 +
                                     p1 + 2 * p2) * 2;
                        ref[at] = sr;
                        ref[at + 1] = si;
                    }
    return ref;
}

/* The 64 -> 32-bit rule and the magic value for bad antennas (docs/formats.md). */
uint64_t xeng_ref_reduce(int n_ants, int channels, const int64_t *sum, const uint8_t *bad,
                           int32_t *out)
{
    uint64_t sat = 0;
    size_t nbl = cbf_corr_baselines(n_ants);
    for (int c = 0; c < channels; c++)
        for (int a2 = 0; a2 < n_ants; a2++)
            for (int a1 = 0; a1 <= a2; a1++)
                for (int p = 0; p < 4; p++) {
                    size_t at = (((size_t)c * nbl + (size_t)a2 * (a2 + 1) / 2 + a1) * 4 + p) * 2;
                    if (bad[a1] || bad[a2]) {
                        out[at] = INT32_MIN;
                        out[at + 1] = 1;
                        continue;
                    }
                    int clipped = 0;
                    for (int k = 0; k < 2; k++) {
                        int64_t v = sum[at + k], m = INT32_MAX;
                        clipped |= v > m || v < -m;
                        out[at + k] = (int32_t)(v > m ? m : v < -m ? -m : v);
                    }
                    sat += (uint64_t)clipped;
                }
    return sat;
}

