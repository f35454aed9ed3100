/* ddc.h: narrowband digital down-conversion: mix, low-pass FIR and
 * subsample in one pass over packed digitiser samples.
 *
 * For each polarisation, output m of a job is
 *
 *   y[m] = sum_{k=0}^{taps-1} x[start + m S + k] h[k] exp(-2 pi i phi(t0 + start + m S + k) / 2^32)
 *
 * with S the decimation (subsampling) factor, x the sign-extended packed
 * samples, t0 the absolute sample index (timestamp) of input sample 0 and
 * phi(n) = (n x mix_step) mod 2^32 the mixer phase in cycles x 2^32. The
 * mixer is thus locked to the absolute sample count: any chunking of the
 * stream gives the same outputs, and a timestamp of 2^50 costs no precision
 * (docs/narrowband.md). Only the outputs kept by subsampling are computed.
 * The window of y[m] is centred on sample t0 + start + m S + (taps - 1) / 2.
 *
 * Input: packed big-endian signed samples, 2..16 bits (the MeerKAT
 * digitiser layout, sample 0 in the top bits of byte 0), 4-byte aligned and
 * readable up to cbf_packed_bytes (kernels/common/include/cbf/kernels/packed.h: the GPU decoder
 * loads 32-bit words, one past the one a sample starts in). Output: complex
 * float32 (re, im interleaved), [pol][output], the layout the narrowband
 * PFB reads.
 *
 * Return values are 0 or a CBF_KERN_* code (kernels/common/status.h);
 * the message buffer (may be NULL) says what was wrong. This folder never
 * includes core/. */
#ifndef CBF_KERNEL_DDC_H
#define CBF_KERNEL_DDC_H

#include <stddef.h>
#include <stdint.h>

#include "cbf/kernels/packed.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CBF_DDC_MAX_TAPS 4096
/* Outputs per CUDA thread of the FMA kernel (the tuning parameter C). */
#define CBF_DDC_DEFAULT_PER_THREAD 8

typedef struct cbf_ddc_config {
    int bits;            /* 2..16 */
    int decimation;      /* subsampling factor S >= 2 */
    int taps;            /* taps / decimation in {4, 8, 12, 16} (register windows) */
    uint32_t mix_step;   /* mixer phase per sample, cycles x 2^32 */
} cbf_ddc_config;

int cbf_ddc_config_check(const cbf_ddc_config *cfg, char *msg, size_t msglen);

/* mix_step for a mixer frequency in cycles per sample (e.g. centre / fs),
 * rounded to the nearest 2^-32 cycle; negative frequencies wrap. */
uint32_t cbf_ddc_mix_step(double cycles_per_sample);

/* phi(n) = n x step mod 2^32, exact for every 64-bit n. */
uint32_t cbf_ddc_phase(uint64_t n, uint32_t step);

/* Input samples that `outputs` outputs read: (outputs - 1) S + taps. */
size_t cbf_ddc_in_samples(const cbf_ddc_config *cfg, size_t outputs);

/* Mixer folded into the taps: z[k] = h[k] exp(-2 pi i k mix_step / 2^32),
 * computed in double, stored as float32 (re, im) pairs, 2 x taps floats. */
int cbf_ddc_weights(const cbf_ddc_config *cfg, const double *h, float *z, char *msg,
                    size_t msglen);

typedef struct cbf_ddc_job {
    const uint8_t *in[2];   /* packed samples per pol (device memory for CUDA) */
    size_t in_samples;      /* samples in each in[pol] */
    uint64_t timestamp;     /* absolute index of in sample 0 */
    size_t start;           /* first window's first sample, within in */
    size_t outputs;         /* per pol */
    float *out;             /* [pol][out_pol_stride complex], (re, im) */
    size_t out_pol_stride;  /* complex values from pol 0 to pol 1, >= outputs */
} cbf_ddc_job;

int cbf_ddc_job_check(const cbf_ddc_config *cfg, const cbf_ddc_job *job, char *msg,
                      size_t msglen);

/* CPU implementation: the same float32 operations in the same order as the
 * CUDA FMA kernel (accumulation over k = p S + q with q outer, p inner).
 * z: cbf_ddc_weights' output. */
int cbf_ddc_cpu(const cbf_ddc_config *cfg, const float *z, const cbf_ddc_job *job, char *msg,
                size_t msglen);

/* CUDA: a plan holds the weights on the device. per_thread 0 (the
 * default) takes the tensor-core kernel where it applies (even bits up to
 * 10, decimation a power of two from 8: the MeerKAT settings) and the FMA kernel
 * with C = CBF_DDC_DEFAULT_PER_THREAD elsewhere; 4, 8 or 16 ask for the FMA
 * kernel with that C, the outputs one thread computes. The tensor-core
 * kernel holds z as two float16 halves (about 2^-22 relative), so its
 * outputs differ from the FMA kernel's in the last bits, inside the same
 * error bound; each kernel gives the same bits for any chunking of a
 * stream. Runs are enqueued on a stream (cudaStream_t as void *). */
typedef struct cbf_ddc_cuda cbf_ddc_cuda;
int cbf_ddc_cuda_create(const cbf_ddc_config *cfg, const float *z_host, int per_thread,
                        cbf_ddc_cuda **out, char *msg, size_t msglen);
/* 1 when the plan runs the tensor-core kernel. */
int cbf_ddc_cuda_tensor(const cbf_ddc_cuda *plan);
int cbf_ddc_cuda_run(cbf_ddc_cuda *plan, const cbf_ddc_job *job, void *stream, char *msg,
                     size_t msglen);
void cbf_ddc_cuda_destroy(cbf_ddc_cuda *plan);

/* The arithmetic ceiling for cbf-bench: launches `blocks` blocks of 256
 * threads, each running 8 independent FMA chains of `iters` steps, and says
 * how many floating-point operations (2 per FMA) that is. dev_out: blocks x
 * 256 floats of device memory (keeps the chains alive). */
int cbf_ddc_cuda_fma_probe(int blocks, int iters, float *dev_out, void *stream, double *flops,
                           char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif
#endif
