/* feng_run.h: runs the wideband kernels (CPU or GPU) on host data, for the
 * tests. Outputs are poisoned first (0x88: the CI8 value -128 and the CI4
 * nibble -8, which the engine never writes; NaN for floats). */
#ifndef FENG_RUN_H
#define FENG_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "fft_post.h"

typedef struct feng_case {
    int channels, taps, bits, unzip, spectra_per_heap, batches, out_bits;
    int64_t start[2];
    size_t in_samples;
    uint8_t *in[2];        /* packed, cbf_packed_bytes(in_samples, bits) each */
    const float *weights;  /* step x taps */
    const float *gains;    /* [channel][pol][re, im] */
    float fine_delay[2], phase[2];
    size_t fir_split;      /* FIR in calls of this many spectra (0: one call), each
                              reading from its own byte offset into in[pol] */
    const float *spectrum_delay;  /* [pol][spectrum][2] fine delay, phase, or NULL */
    const float *next_gains;      /* with switch_gains: from spectrum gain_switch on */
    int switch_gains;
    size_t gain_switch;
    /* fft_post's dither (off unless set: the undithered model holds). */
    int dither, dither_antenna;
    uint64_t dither_key, first_spectrum;
    int fft;               /* fft_post's cfg.fft (CBF_FFT_POST_FFT_*; 0: auto) */
} feng_case;

typedef struct feng_result {
    float *fir;            /* [pol][spectra][step] FIR output (before the FFT) */
    uint8_t *out;          /* engine output */
    size_t out_bytes;
    uint64_t saturated[2], power[2];
} feng_result;

/* 1 when a GPU can run the CUDA kernels here. */
int feng_have_gpu(void);
/* Runs pfb then fft_post; 0 or a negative code with msg filled. */
int feng_run(int gpu, const feng_case *c, feng_result *r, char *msg, size_t msglen);
void feng_result_free(feng_result *r);

/* fft_post alone on FIR output rows `fir` ([pol][spectrum][row floats],
 * copied: the transform runs in place), CPU or GPU, gains
 * [channel][pol][re, im]; out gets cbf_fft_post_out_bytes(cfg) bytes. */
int feng_post_only(int gpu, const cbf_fft_post_config *cfg, const float *fir, const float *gains,
                   uint64_t first_spectrum, uint8_t *out, char *msg, size_t msglen);

/* Deterministic PRNG, seeded fresh by each test program run. */
uint64_t feng_rand(void);
void feng_seed(uint64_t seed);
double feng_uniform(void);        /* [0, 1) */
double feng_normal(void);

/* A feng_case with fresh random samples, unit gains, no delays. */
void feng_case_random(feng_case *c, int channels, int taps, int bits, int unzip, int sph,
                      int batches, float *weights_out);
void feng_case_free_input(feng_case *c);

#endif
