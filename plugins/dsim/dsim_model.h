/* dsim_model.h: the digitiser simulator's signal, as plain functions.
 *
 * Sample t (an absolute index on the ADC clock) of antenna a, pol p is
 *
 *   v = FS x [ sum_k A_k cos(2 pi f_k (t - d_a) / fs + phi_kp)
 *              + sum_c sum_{n=1..H_c} B_c cos(2 pi n g_c (t - d_a) / fs + psi_cp)
 *              + sum_i E_i [(t - round(d_a) - o_i) mod L_i == 0]
 *              + K_{2a+p}
 *              + noise x N(seed, a, p, t)
 *              + common_noise x C(seed, p, t - round(d_a)) ]
 *
 * rounded to nearest (ties to even) and saturated to the signed range of
 * `bits` bits, where FS = 2^(bits-1) - 1 (amplitude 1 just reaches the
 * positive extreme), d_a is the antenna's delay in samples (fractional for
 * tones and combs; rounded for impulses and the common noise, which are
 * sampled sequences), combs are H_c harmonics of g_c (all below Nyquist
 * when H_c is 0), impulses are trains of one-sample pulses every L_i
 * samples, K is a constant per input, and
 * N, C are independent standard Gaussians drawn from a counter-based
 * generator: every value is a pure function of (seed, stream, t), so the
 * output does not depend on how the stream is cut into chunks.
 *
 * With period P > 0 (a power of two) the signal repeats every P samples:
 * each tone frequency and comb fundamental is rounded to the nearest
 * multiple of fs / P, an impulse period must divide P, and
 * the noise index wraps, N(t mod P) and C((t - round(d_a)) mod P), so the
 * delayed common noise stays correlated across the wrap. Replay mode
 * generates samples [0, P) once and copies them.
 *
 * An input may instead play an output of a program in katgpucbf's signal
 * language (dsim_lang.h, dsim_eval.h): its value x (in units of full
 * scale) repeats every `period` samples and is quantised as katgpucbf's
 * dsim does, rint(clip(FS x + d, -FS, FS)) where d is a uniform dither in
 * [-0.5, 0.5) of (dither_seed, input, t mod period) unless the output
 * is a nodither(...), a sample counting as saturated when |value| >= FS. */
#ifndef CBF_DSIM_MODEL_H
#define CBF_DSIM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "dsim_lang.h"

#define CBF_DSIM_HEAP_SAMPLES 4096

typedef struct cbf_dsim_tone {
    double frequency;   /* Hz */
    double amplitude;   /* fraction of full scale */
    double phase[2];    /* radians, per pol (x, y) */
} cbf_dsim_tone;

typedef struct cbf_dsim_comb {
    double frequency;   /* Hz, the fundamental */
    double amplitude;   /* of each harmonic, fraction of full scale */
    int harmonics;      /* 1..CBF_DSIM_MAX_HARMONICS; 0: every one at or below fs / 2 */
    double phase[2];    /* radians, per pol, of every harmonic */
} cbf_dsim_comb;

typedef struct cbf_dsim_impulse {
    int64_t period;     /* samples between pulses, >= 1 */
    double amplitude;   /* fraction of full scale */
    int64_t offset;     /* a pulse at every t with (t - round(d_a) - offset) mod period == 0 */
} cbf_dsim_impulse;

/* Harmonics of all combs together: each costs a tone (a table of 64 KiB
 * and two multiplies a sample). */
#define CBF_DSIM_MAX_HARMONICS 1024

/* An input's signal in katgpucbf's language: output `output` of prog,
 * repeating every `period` samples; prog NULL: cbf's form. */
typedef struct cbf_dsim_lang_input {
    cbf_dsim_prog *prog;
    int output;
    int64_t period;
} cbf_dsim_lang_input;

typedef struct cbf_dsim_config {
    int antennas;
    double adc_sample_rate;   /* Hz */
    int bits;                 /* 2..16 */
    int n_tones;
    const cbf_dsim_tone *tones;
    int n_combs;
    const cbf_dsim_comb *combs;
    int n_impulses;
    const cbf_dsim_impulse *impulses;
    const double *constants;  /* [2 x antennas], fraction of full scale; NULL: none */
    double noise;             /* Gaussian RMS, fraction of full scale, per antenna */
    double common_noise;      /* Gaussian RMS of the shared signal */
    const double *delays;     /* per antenna, samples; NULL: all zero */
    uint64_t seed;
    int64_t period;           /* samples, a power of two; 0: not periodic */
    /* katgpucbf's language: what each input (2 x antenna + pol) plays;
     * NULL: every input plays the form above. */
    const cbf_dsim_lang_input *lang;  /* [2 x antennas] */
    uint64_t dither_seed;
} cbf_dsim_config;

typedef struct cbf_dsim_model cbf_dsim_model;

/* Returns 0 or -1 (CBF_EINVAL) / -2 (CBF_ENOMEM) with a message. */
int cbf_dsim_model_create(const cbf_dsim_config *cfg, cbf_dsim_model **out, char *msg,
                          size_t msglen);
void cbf_dsim_model_free(cbf_dsim_model *m);

/* Writes samples [first, first + n) of (antenna, pol) to out and returns
 * how many of them saturated. */
uint64_t cbf_dsim_model_generate(const cbf_dsim_model *m, int antenna, int pol, int64_t first,
                                 size_t n, int16_t *out);

/* The frequency a tone gets in a model of that period: f rounded to the
 * nearest multiple of fs / period (f itself when period is 0). */
double cbf_dsim_grid_frequency(double f, double fs, int64_t period);

/* katgpucbf's wgn: the key of the noise of an entropy, and scale x its
 * standard Gaussians for indices [first, first + n) mod period (0: not
 * wrapped) added to v. The same entropy gives the same noise. */
uint64_t cbf_dsim_noise_key(uint64_t entropy);
void cbf_dsim_noise_add(double *v, uint64_t key, int64_t first, size_t n, double scale,
                        int64_t period);

/* The dither an input of a language signal gets at sample t: uniform in
 * [-0.5, 0.5) on a grid of 2^-24, a function of (seed, input, t mod period). */
double cbf_dsim_dither(uint64_t seed, int input, int64_t t, int64_t period);

/* The generator's standard Gaussian for a stream (antenna index, or -1 for
 * the common signal) and pol at sample t. */
double cbf_dsim_gauss(uint64_t seed, int stream, int pol, int64_t t);

#endif
