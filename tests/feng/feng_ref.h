/* feng_ref.h: a float64 model of the wideband F-engine written from the
 * maths (docs/formats.md and docs/feng.md): bit-by-bit decode, direct
 * FIR, direct DFT. It shares no code with kernels/ on purpose. */
#ifndef FENG_REF_H
#define FENG_REF_H

#include <complex.h>
#include <stddef.h>
#include <stdint.h>

/* Signed sample i of a big-endian bit-packed stream, read bit by bit. */
int64_t feng_ref_sample(const uint8_t *in, size_t i, int bits);
/* Writes value v as sample i (the inverse of feng_ref_sample). */
void feng_ref_put(uint8_t *out, size_t i, int bits, int64_t v);

/* The PFB prototype filter (docs/formats.md) in double: step x taps values. */
void feng_ref_weights(int channels, int taps, double w_cutoff, int hann, double *w);

typedef struct feng_ref_setup {
    int channels, taps, bits;
    const double *weights;        /* feng_ref_weights */
    double fine_delay, phase;     /* this pol's */
    const double complex *gains;  /* [channel] for this pol */
    int64_t coarse;               /* the whole-sample delay the caller applied by moving the
                                     window's start back (pfb's coarse delay); 0 for the kernels */
} feng_ref_setup;

/* X[k], k < channels, of the spectrum whose window starts at sample
 * `start`, after fine delay, phase and gain, before quantisation.
 *
 * The delay convention (katgpucbf's): phases are referenced to the band
 * centre, channel channels / 2. Of a total delay D = coarse + fine_delay
 * samples, channel k is turned by exp(i (-pi D (k - channels/2) / channels
 * + phase)): the window moved back by `coarse` samples already turns a tone
 * in channel k by -pi coarse k / channels, so the model adds
 * pi coarse / 2 to the phase, and the fine delay turns channel k by
 * -pi fine_delay (k - channels/2) / channels. Channel channels / 2 thus
 * keeps its phase (plus `phase`) whatever the delay. */
void feng_ref_spectrum(const feng_ref_setup *s, const uint8_t *in, int64_t start,
                       double complex *X);

/* Round half to even and saturate to +-lim; *clipped set when clipped. */
int feng_ref_quant(double v, int lim, int *clipped);

#endif
