/* stage/contracts/feng.h: the F-engine's streams.
 *
 * "cbf.feng.fir": pfb to fft_post, FIR output [pol][spectrum][row floats]
 * (device memory on the GPU path), one presence flag per spectrum, aux
 * cbf_feng_fir_aux. Wideband rows are 2 x channels real samples, unzipped;
 * narrowband rows (a pfb fed by ddc, type "cbf.feng.fir.complex", the
 * descriptor carries CBF_ATTR_DECIMATION) are complex samples.
 * "cbf.feng.spectra": fft_post to the sender or a sink, [batch][channel]
 * [spectrum][pol] CI8 or CI4 of one antenna, one flag per batch (heap),
 * aux cbf_feng_spectra_aux. docs/formats.md has the numbers.
 * "cbf.feng.gains": see CBF_TYPE_FENG_GAINS. */
#ifndef CBF_CONTRACTS_FENG_H
#define CBF_CONTRACTS_FENG_H

#include <stddef.h>
#include <stdint.h>
#include "stage/contracts/common.h"

#define CBF_TYPE_FENG_FIR "cbf.feng.fir"
/* The narrowband layout's own name: pfb.out declares both and its
 * descriptor's type names the one it makes (from its input's type). */
#define CBF_TYPE_FENG_FIR_COMPLEX "cbf.feng.fir.complex"
#define CBF_TYPE_FENG_SPECTRA "cbf.feng.spectra"
/* fft_post's record of its gains: CF32 [channel][pol], one buffer per
 * table put in force (the one at start, then each applied change), its
 * timestamp the first spectrum that used it. */
#define CBF_TYPE_FENG_GAINS "cbf.feng.gains"
/* pfb's record of its delay models: F64 [pol][CBF_FENG_DELAY_FIELDS], one
 * buffer per model put in force (the coarse_delay at start, then each
 * applied `delays` request), its timestamp the model's `at`. Per pol: the
 * model's reference timestamp t0, delay (s) and delay rate (s/s) at t0,
 * phase (rad) and phase rate (rad/s) at t0, as the request gave them. */
#define CBF_TYPE_FENG_DELAYS "cbf.feng.delays"
#define CBF_FENG_DELAY_FIELDS 5

#define CBF_ATTR_UNZIP "unzip"
#define CBF_ATTR_FIRST_CHANNEL "first_channel"
#define CBF_ATTR_COARSE_DELAY_POL0 "coarse_delay_pol0"
#define CBF_ATTR_COARSE_DELAY_POL1 "coarse_delay_pol1"
#define CBF_ATTR_DITHER "dither"          /* 1: fft_post dithered before rounding */
#define CBF_ATTR_DITHER_KEY "dither_key"  /* fft_post's dither key (docs/formats.md "Dither") */

/* FIR aux: the digitiser power of the buffer's owned samples (zero
 * narrowband), and pfb's delay model evaluated per spectrum for fft_post
 * (each buffer carries its own values). delay_phase has [pol][spectrum][2]
 * floats: fine delay in FIR input samples (digitiser samples wideband, ddc
 * outputs narrowband), phase in radians. */
typedef struct cbf_feng_fir_aux {
    uint64_t power_sum[2];
    uint64_t rotate;          /* nonzero: some spectrum has a fine delay or a phase */
    float delay_phase[];
} cbf_feng_fir_aux;

#define CBF_FENG_FIR_AUX_LAYOUT \
    "u64[pol] power_sum, u64 rotate, f32[pol][spectrum][2] delay_phase (fine delay in " \
    "samples, phase in radians)"

static inline size_t cbf_feng_fir_aux_size(size_t spectra)
{
    return sizeof(cbf_feng_fir_aux) + 4 * sizeof(float) * spectra;
}

/* Spectra aux: saturated samples per pol, and the FIR input's power. */
typedef struct cbf_feng_spectra_aux {
    uint64_t saturated[2];
    uint64_t power_sum[2];
} cbf_feng_spectra_aux;

#define CBF_FENG_SPECTRA_AUX_LAYOUT "u64[pol] saturated, u64[pol] power_sum"

#endif
