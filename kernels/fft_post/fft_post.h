/* fft_post.h: the wideband back end: FFT of the unzipped FIR output, then
 * one post-processing pass.
 *
 * Input: float32 [pol][spectra][2 x channels] as kernels/pfb writes it, that
 * is n = unzip complex sub-arrays of m = channels / n points per spectrum.
 * The transform runs in place (cuFFT or FFTW, complex-to-complex, length m,
 * planned once). Post-processing then, per output value:
 *   - the last Cooley-Tukey stage over the n sub-transforms (twiddles by
 *     sincospi) and the real-to-complex fix-up, X_k and X_(N-k) together;
 *   - X_k *= exp(i (-pi d (k - channels/2) / channels + phi)) (fine delay d,
 *     phase phi per pol, plus per spectrum when a delay model is given): the
 *     phase is referenced to the band centre, channel channels / 2, as
 *     katgpucbf's is, so a delay leaves that channel's phase alone; then the
 *     complex gain of (channel, pol), from one of two gain tables
 *     (double-buffered);
 *   - with dither on, a value in (-1/2, 1/2) added to each part
 *     (fft_post_dither.h: a pure function of the key and of the value's
 *     absolute spectrum, channel, pol and antenna, so the CPU and the GPU
 *     and any split of the stream into runs draw the same);
 *   - round to nearest even and saturate to [-127, 127] (8-bit) or [-7, 7]
 *     (4-bit; real in the high nibble), counting each saturated complex value
 *     (either part clipped) once per pol;
 *   - written as [batch][channel][spectrum_per_heap][pol][re, im]: each
 *     [batch] slab cut by channel range is a feng_raw heap (docs/formats.md). The
 *     Nyquist bin is dropped.
 *
 * Narrowband (complex_in = 1, input from the pfb's complex FIR): one
 * complex-to-complex transform of 2 x channels points per spectrum (no
 * real-to-complex fix-up; with unzip n = 2 or 4 the FIR has done its first
 * radix-n stage, decimation in frequency (pfb.h), and n transforms of 2 x
 * channels / n points give bin n k + j at position j (2 channels / n) + k,
 * which the post reads back in bin order); of its bins only the inner half,
 * k in [-channels/2, channels/2), is kept, output channel c being bin
 * c - channels/2 (mod 2 x channels): channel 0 is the lowest frequency and
 * DC (the mixer frequency) is channel channels/2. Gains are indexed by c,
 * and the fine delay turns channel c by -pi d (c - channels/2) / channels
 * (the same centre reference as wideband, the centre being DC here) with d
 * in samples of the complex input (digitiser samples / decimation).
 *
 * Narrowband keeping the whole band (keep_all = 1 with complex_in, the
 * input from a complex FIR of step = channels): one transform of channels
 * points per spectrum, all kept, channel c being bin c - channels/2 (mod
 * channels); the fine delay turns channel c by -2 pi d (c - channels/2) /
 * channels. In every mode: -2 pi d (c - channels/2) / M, M the FIR input
 * samples per spectrum (cbf_fft_post_spectrum_samples).
 *
 * Return values are 0 or a CBF_KERN_* code (kernels/common/status.h);
 * the message buffer (may be NULL) says what was wrong. */
#ifndef CBF_KERNEL_FFT_POST_H
#define CBF_KERNEL_FFT_POST_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif


typedef struct cbf_fft_post_config {
    int channels;            /* power of two, 64..65536 */
    int unzip;               /* 1, 2 or 4; channels / unzip >= 32 */
    int spectra_per_heap;    /* > 0 */
    size_t spectra;          /* spectra per run: a multiple of spectra_per_heap */
    int out_bits;            /* 8 (CI8) or 4 (CI4) */
    int complex_in;          /* 0: wideband (real input); 1: narrowband (unzip as the
                                pfb's cjob had it, 1 with keep_all) */
    int keep_all;            /* narrowband: 1 keeps every bin of a channels-point transform */
    /* Dither before rounding (0 or 1; 0 leaves the output as rounding
     * alone makes it): key of the counter-based generator, and the
     * antenna, 0..65535, which the counter holds so that antennas never
     * share dither (katgpucbf gives each engine its own sequences too). */
    int dither;
    uint64_t dither_key;
    int dither_antenna;
    /* The GPU's transform (CPU plans ignore it): one of the values below. */
    int fft;
} cbf_fft_post_config;

/* cbf_fft_post_config.fft. AUTO: the path measured fastest for the shape
 * among those that can run it (docs/notes/performance-history.md, "Fused FFT + post");
 * CUFFT: the four-pass path, cuFFT's transform in place then the post
 * kernel; CUFFTDX: one fused kernel, a cuFFTDx transform and the post in
 * registers and shared memory (kernels/fft_post/fft_dx.h), for wideband
 * unzip 1 at 4096 and 8192 channels on an sm_90 GPU, where the build found
 * cuFFTDx; creating a plan that asks for it elsewhere fails, saying why. */
enum {
    CBF_FFT_POST_FFT_AUTO = 0,
    CBF_FFT_POST_FFT_CUFFT = 1,
    CBF_FFT_POST_FFT_CUFFTDX = 2,
};

int cbf_fft_post_config_check(const cbf_fft_post_config *cfg, char *msg, size_t msglen);

/* Output bytes of one run: spectra x channels x 2 pols x (2 or 1). */
size_t cbf_fft_post_out_bytes(const cbf_fft_post_config *cfg);

typedef struct cbf_fft_post_args {
    float *data;             /* FIR output, transformed in place (device for CUDA) */
    size_t data_pol_stride;  /* floats from pol 0 to pol 1, >= spectra x 2 x channels
                                (x 4 x channels when complex_in) */
    void *out;               /* cbf_fft_post_out_bytes bytes (device for CUDA) */
    float fine_delay[2];     /* input samples of the FIR (digitiser samples in wideband), per pol */
    float phase[2];          /* radians, per pol */
    /* A delay model evaluated per spectrum (NULL: none): host floats
     * [pol][spectrum][2] = fine delay (samples) and phase (radians) of that
     * spectrum, applied on top of fine_delay/phase above. */
    const float *spectrum_delay;
    /* Gains are double-buffered: when switch_gains is set, spectra from
     * gain_switch on use the gains given to set_next_gains, and so does
     * every later run (the plan swaps its tables); spectra before it use
     * the gains in force. A spectrum never mixes the two. */
    int switch_gains;
    size_t gain_switch;
    /* Absolute index of spectrum 0 of the run (its timestamp / samples
     * between spectra): the dither counter's spectrum is this plus the
     * spectrum's index in the run. */
    uint64_t first_spectrum;
} cbf_fft_post_args;

/* CPU: FFTW single precision, one plan made at create. Gains default to 1;
 * set_gains takes [channel][pol][re, im] floats. saturated[pol] is set
 * (not added to) by each run. */
typedef struct cbf_fft_post_cpu cbf_fft_post_cpu;
int cbf_fft_post_cpu_create(const cbf_fft_post_config *cfg, cbf_fft_post_cpu **out, char *msg,
                            size_t msglen);
int cbf_fft_post_cpu_set_gains(cbf_fft_post_cpu *plan, const float *gains);
/* The gains a run with switch_gains changes to (same layout). */
int cbf_fft_post_cpu_set_next_gains(cbf_fft_post_cpu *plan, const float *gains);
int cbf_fft_post_cpu_run(cbf_fft_post_cpu *plan, const cbf_fft_post_args *args,
                         uint64_t saturated[2], char *msg, size_t msglen);
void cbf_fft_post_cpu_destroy(cbf_fft_post_cpu *plan);

/* CUDA: one cuFFT plan made at create, bound to `stream` (cudaStream_t as
 * void *), or, where cfg.fft selects it, the fused kernel (which needs no
 * plan, and leaves args.data as it was). run = fft + post, both enqueued
 * (fft and post alone are the four-pass path's, refused by a fused plan);
 * the saturation counts of the last run are read with
 * cbf_fft_post_cuda_saturated, which waits for the stream. set_gains (both tables) and set_next_gains copy host gains to the
 * device and wait. A per-spectrum delay model is copied to the device by
 * run, from host memory the call may reuse once run returns. */
typedef struct cbf_fft_post_cuda cbf_fft_post_cuda;
int cbf_fft_post_cuda_create(const cbf_fft_post_config *cfg, void *stream,
                             cbf_fft_post_cuda **out, char *msg, size_t msglen);
int cbf_fft_post_cuda_set_gains(cbf_fft_post_cuda *plan, const float *gains, char *msg,
                                size_t msglen);
int cbf_fft_post_cuda_set_next_gains(cbf_fft_post_cuda *plan, const float *gains, char *msg,
                                     size_t msglen);
int cbf_fft_post_cuda_fft(cbf_fft_post_cuda *plan, const cbf_fft_post_args *args, char *msg,
                          size_t msglen);
int cbf_fft_post_cuda_post(cbf_fft_post_cuda *plan, const cbf_fft_post_args *args, char *msg,
                           size_t msglen);
int cbf_fft_post_cuda_run(cbf_fft_post_cuda *plan, const cbf_fft_post_args *args, char *msg,
                          size_t msglen);
int cbf_fft_post_cuda_saturated(cbf_fft_post_cuda *plan, uint64_t saturated[2], char *msg,
                                size_t msglen);
/* Queues a copy of the last run's counts to dst (pinned host memory) on
 * the plan's stream: they are there once the stream has passed it. */
int cbf_fft_post_cuda_saturated_async(cbf_fft_post_cuda *plan, uint64_t dst[2], char *msg,
                                      size_t msglen);
void cbf_fft_post_cuda_destroy(cbf_fft_post_cuda *plan);
/* 1 when the plan runs the fused cuFFTDx kernel, 0 for the four-pass path. */
int cbf_fft_post_cuda_fused(const cbf_fft_post_cuda *plan);
/* 0 when the fused kernel can run cfg's shape here (built with cuFFTDx, an
 * sm_90 GPU, a shape it does); otherwise CBF_KERN_ENOTSUP, msg saying why. */
int cbf_fft_post_cuda_fused_check(const cbf_fft_post_config *cfg, char *msg, size_t msglen);

/* Floats of FIR output per spectrum: 2 x channels, or 4 x channels when
 * complex_in (2 x channels again with keep_all). */
size_t cbf_fft_post_row_floats(const cbf_fft_post_config *cfg);
/* FIR input samples per spectrum, M: 2 x channels (real or complex), or
 * channels with keep_all. The transform has M points (complex input). */
size_t cbf_fft_post_spectrum_samples(const cbf_fft_post_config *cfg);

/* Missing data: an output batch is present when all its spectra are. */
void cbf_fft_post_batch_presence(const uint8_t *spectrum_present, size_t spectra,
                                 int spectra_per_heap, uint8_t *batch_present);

#ifdef __cplusplus
}
#endif
#endif
