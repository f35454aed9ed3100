/* pfb.h: the wideband polyphase filter bank front end (decode + FIR).
 *
 * Packed big-endian signed digitiser samples of one antenna's two
 * polarisations go in; float32 FIR outputs come out, one row of
 * step = 2 x channels values per spectrum, reordered ("unzipped") so that
 * the fft_post stage can run n contiguous complex transforms of length
 * channels / n per spectrum (see docs/feng.md):
 *
 *   FIR output y[j], j = 0..step-1, seen as z[i] = y[2i] + i y[2i+1];
 *   z[i] with i = q n + r is stored at complex position r (channels/n) + q.
 *
 * Spectrum s of a call uses input samples start[pol] + s step + [0, W),
 * W = step x taps:  y[j] = sum_t w[t step + j] x[start + s step + t step + j].
 *
 * Return values are 0 or a CBF_KERN_* code (kernels/common/status.h);
 * the message buffer (may be NULL) says what was wrong. This folder never
 * includes core/. */
#ifndef CBF_KERNEL_PFB_H
#define CBF_KERNEL_PFB_H

#include <stddef.h>
#include <stdint.h>

#include "cbf/kernels/packed.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CBF_PFB_MAX_TAPS 16
#define CBF_PFB_MIN_CHANNELS 64
#define CBF_PFB_MAX_CHANNELS 65536

typedef enum cbf_pfb_window { CBF_PFB_HANN = 0, CBF_PFB_RECT = 1 } cbf_pfb_window;

/* docs/formats.md's prototype filter: step x taps floats, computed in double, stored float32.
 * w_cutoff >= 0; 0 leaves out the sinc (taps 1, CBF_PFB_RECT: a plain DFT). */
int cbf_pfb_weights(int channels, int taps, double w_cutoff, cbf_pfb_window window,
                    float *out, char *msg, size_t msglen);

/* Whether bits is a supported sample width (2..10, 12, 16). */
int cbf_pfb_bits_ok(int bits);

/* The unzipping factor n in {1, 2, 4} that keeps each complex transform at
 * or under 8192 points (one pass of cuFFT), 4 beyond that. */
int cbf_pfb_auto_unzip(int channels);

typedef struct cbf_pfb_job {
    int channels;            /* power of two, 64..65536 */
    int taps;                /* 1..16 */
    int bits;                /* see cbf_pfb_bits_ok */
    int unzip;               /* 1, 2 or 4 */
    const uint8_t *in[2];    /* packed samples per pol (device memory for CUDA),
                                sample 0 at the top bit of byte 0, padded as
                                cbf_packed_bytes says; CUDA loads aligned words,
                                so in[pol] lies in a word-aligned allocation
                                (it need not be aligned itself) */
    size_t in_samples;       /* samples readable in each in[pol] */
    int64_t start[2];        /* first sample of spectrum 0's window, per pol */
    size_t spectra;          /* spectra to produce */
    float *out;              /* [pol][spectra][step] unzipped (device for CUDA) */
    size_t out_pol_stride;   /* floats from pol 0 to pol 1 in out, >= spectra x step */
} cbf_pfb_job;

/* Checks a job's shape (both implementations call it). */
int cbf_pfb_job_check(const cbf_pfb_job *job, char *msg, size_t msglen);

/* CPU FIR. power[pol] gains the sum of squares of the first `step` samples
 * of every spectrum's window: the samples this call owns, each counted once
 * when calls tile the stream. weights: step x taps host floats. */
int cbf_pfb_fir_cpu(const cbf_pfb_job *job, const float *weights, uint64_t power[2],
                    char *msg, size_t msglen);

/* CUDA FIR: a plan holds the weights on the device and the power
 * accumulators. Enqueue on a stream (cudaStream_t as void *); the power sums
 * of the jobs since the last call are read with cbf_pfb_cuda_power, which
 * waits for the stream. */
typedef struct cbf_pfb_cuda cbf_pfb_cuda;
int cbf_pfb_cuda_create(int channels, int taps, const float *weights_host, cbf_pfb_cuda **out,
                        char *msg, size_t msglen);
int cbf_pfb_cuda_run(cbf_pfb_cuda *plan, const cbf_pfb_job *job, void *stream, char *msg,
                     size_t msglen);
int cbf_pfb_cuda_power(cbf_pfb_cuda *plan, void *stream, uint64_t power[2], char *msg,
                       size_t msglen);
/* The same without waiting: queues the sums' copy to dst (pinned host
 * memory; they are there once the stream has passed it) and their reset. */
int cbf_pfb_cuda_power_async(cbf_pfb_cuda *plan, void *stream, uint64_t dst[2], char *msg,
                             size_t msglen);
void cbf_pfb_cuda_destroy(cbf_pfb_cuda *plan);

/* Narrowband (complex) FIR, for the ddc output (cbf.ddc.complex): complex
 * float32 (re, im) input [pol][sample], step = 2 x channels complex samples
 * per spectrum (the 2N-point complex transform whose outer half fft_post
 * discards). Re and im are two independent real streams filtered with the
 * same weights, the weight index being the complex sample's (the float
 * index halved):
 *   y[j] = sum_t w[t step + j] x[start + s step + t step + j], j < step,
 * with cbf_pfb_weights(channels, ...) (step x taps). Output
 * [pol][spectra][step complex], in natural order with unzip 0 or 1
 * (fft_post's complex mode then transforms all step points in one FFT).
 * With unzip n = 2 or 4 the FIR also does the first radix-n stage of that
 * transform (decimation in frequency), so that fft_post runs n transforms
 * of m = step / n points, each in one pass of cuFFT where step is not:
 *   u_j[q] = exp(-2 pi i q j / step) sum_r y[q + r m] exp(-2 pi i r j / n),
 * stored at complex position j m + q (q < m, j < n); the m-point transform
 * of u_j is bin n k + j of y's. Same outputs, no extra pass over memory.
 * No digitiser power (the wideband PFB of the same stream computes it). */
typedef struct cbf_pfb_cjob {
    int channels;            /* power of two, 64..65536 (output channels) */
    int taps;                /* 1..16 */
    const float *in[2];      /* complex per pol (device memory for CUDA) */
    size_t in_samples;       /* complex samples readable in each in[pol] */
    int64_t start[2];        /* first complex sample of spectrum 0's window */
    size_t spectra;
    float *out;              /* [pol][spectra][2 x step floats] (device for CUDA) */
    size_t out_pol_stride;   /* floats from pol 0 to pol 1, >= spectra x 2 x step */
    int unzip;               /* 0 or 1: natural order; 2 or 4: see above */
} cbf_pfb_cjob;

/* The narrowband unzip factor: cbf_pfb_auto_unzip of the step = 2 x
 * channels point transform (1 up to 4096 channels). */
int cbf_pfb_auto_unzip_complex(int channels);

int cbf_pfb_cjob_check(const cbf_pfb_cjob *job, char *msg, size_t msglen);
int cbf_pfb_fir_complex_cpu(const cbf_pfb_cjob *job, const float *weights, char *msg,
                            size_t msglen);
/* Uses a plan made by cbf_pfb_cuda_create(channels, taps, weights). */
int cbf_pfb_cuda_run_complex(cbf_pfb_cuda *plan, const cbf_pfb_cjob *job, void *stream,
                             char *msg, size_t msglen);

/* Missing data: heap_present[pol][heaps] flags (1 present) for heaps of
 * heap_samples samples, heap 0 starting at sample 0 of the input. Spectrum s
 * is present when every heap its window [start[pol] + s step, + W) touches
 * is present, in both pols; windows reaching outside [0, heaps x
 * heap_samples) count as missing. Computed through a prefix sum of the
 * flags, so each spectrum costs O(1). scratch: heaps + 1 counts. */
int cbf_pfb_spectrum_presence(const uint8_t *heap_present, size_t heaps, size_t heap_samples,
                              const int64_t start[2], size_t step, size_t window,
                              size_t spectra, uint32_t *scratch, uint8_t *out, char *msg,
                              size_t msglen);

#ifdef __cplusplus
}
#endif
#endif
