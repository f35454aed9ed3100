/* beamform.h: the tied-array beamformer (C API, CPU and CUDA).
 *
 * Input ("cbf.xeng.batch", CI8): [batch][antenna][channel][spectrum][pol],
 * one presence flag per (batch, antenna).
 * Output ("cbf.beam.batch", CI8): [batch][beam][channel][spectrum], the
 * layout of katgpucbf's beamformer output, so one heap (one batch of one
 * beam) is contiguous.
 *
 * Beam b at local channel c (0 = the first channel of the input) and
 * spectrum t is
 *
 *   y = sum over antennas a present in the batch of W(b, a, c) x(a, pol_b)
 *   W(b, a, c) = g(b, a) exp(2 pi i (phase0(b, a) + c step(b, a)) / 2^64)
 *
 * g real (weight x quantisation gain); the phases are 64-bit fixed point
 * in turns, so c x step is exact (mod one turn) for any channel count.
 * cbf_beam_coef_set maps katgpucbf's delay and fringe offset onto them.
 * Then, per component, optional dither in (-1/2, 1/2) (kernels/common/
 * dither.h, counter below), round to nearest with ties to even, clip to
 * [-127, 127]; a complex value counts once as saturated, per beam, when
 * either part was clipped.
 *
 * In the sum each W is an integer, round(W x s_b) with s_b = 2^14 / g_b
 * for beam b's largest |g| = g_b (as float32, beamform_math.h:
 * bf_beam_scales), so the largest gain is 2^14 exactly, and the sum over
 * antennas of integer coefficient times sample is exact, then rounded to
 * float32 and multiplied by 1 / s_b: the CPU (64-bit integers) and CUDA
 * (int8 tensor cores, two digits per coefficient) versions give the same
 * bytes.
 *
 * Dither: one draw (kernels/common/dither.h) per beam b, absolute channel
 * k = first_channel + c and pair of absolute spectra, s = first_spectrum
 * + batch x spectra_per_heap + t: counter (floor(s / 2) x total_channels
 * + k) x n_beams + b; an even s takes the draw's high 32 bits, an odd one
 * its low 32 bits, of which the high 16 dither the real part and the low
 * 16 the imaginary part (cbf_dither_float16).
 *
 * Return values are 0 or a CBF_KERN_* code (kernels/common/status.h); the
 * message buffer (may be NULL) says what was wrong. */
#ifndef CBF_KERNEL_BEAMFORM_H
#define CBF_KERNEL_BEAMFORM_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CBF_BEAM_MAX_ANTS 4096
#define CBF_BEAM_MAX_BEAMS 1024

typedef struct cbf_beam_shape {
    int n_ants;           /* 1..CBF_BEAM_MAX_ANTS */
    int n_beams;          /* 1..CBF_BEAM_MAX_BEAMS */
    int channels;         /* >= 1 */
    int spectra_per_heap; /* >= 1 */
} cbf_beam_shape;

int cbf_beam_shape_check(const cbf_beam_shape *s, char *msg, size_t msglen);
/* Bytes of one batch of input and of output. */
size_t cbf_beam_in_batch_bytes(const cbf_beam_shape *s);
size_t cbf_beam_out_batch_bytes(const cbf_beam_shape *s);

/* One (beam, antenna) term; arrays of them are [beam][antenna]. */
typedef struct cbf_beam_coef {
    float gain;          /* weight x quantisation gain; 0 leaves the antenna out */
    uint32_t pad_;
    uint64_t phase0;     /* turns x 2^64 at local channel 0 */
    uint64_t step;       /* turns x 2^64 per channel */
} cbf_beam_coef;

/* katgpucbf's conventions (xbgpu/engine.py): a delay of `delay` seconds
 * and a fringe offset of `fringe` radians (the phase at the band centre,
 * channel `centre_channel`) turn absolute channel k by
 *   fringe - 2 pi channel_spacing (k - centre_channel) delay;
 * first_channel is the absolute channel of local channel 0. Returns
 * CBF_KERN_EINVAL for a value that is not finite. */
int cbf_beam_coef_set(cbf_beam_coef *c, double weight, double quant_gain, double delay,
                      double fringe, double channel_spacing, double first_channel,
                      double centre_channel);

typedef struct cbf_beam_job {
    cbf_beam_shape shape;
    size_t batches;
    const uint8_t *in;          /* batches x input batch (device memory for CUDA) */
    const uint8_t *present;     /* [batch][antenna] flags (device for CUDA) */
    const cbf_beam_coef *coef;  /* [beam][antenna] (device for CUDA) */
    const uint8_t *pol;         /* [beam]: 0 or 1 (device for CUDA) */
    int8_t *out;                /* batches x output batch (device for CUDA) */
    float *raw;                 /* NULL, or the sums before dither and rounding,
                                   [batch][beam][channel][spectrum][re, im] (tests) */
    uint64_t *saturated;        /* [beam], added into (device for CUDA) */
    int dither;                 /* 0 or 1 */
    uint64_t dither_key;
    uint64_t first_spectrum;    /* absolute index of batch 0's first spectrum */
    uint64_t first_channel;     /* absolute channel of local channel 0 */
    uint64_t total_channels;    /* channels of the whole band */
    /* Spectra [spectrum_begin, spectrum_end) of every heap, the rest of
     * out (and raw) left as it was; 0, 0: the whole heap. A change of
     * coefficients inside a heap runs the heap as two jobs, each with its
     * coefficients: every value is a function of its own spectrum alone
     * (dither included), so the parts equal the whole run's bytes. */
    int spectrum_begin, spectrum_end;
    /* 0, or a number that changes whenever what coef and pol point to does:
     * calls with the same nonzero version, arrays and shape may reuse what
     * an earlier call made of them (cbf_xb_cuda_run's coefficient digits). */
    uint64_t coef_version;
} cbf_beam_job;

/* The spectra a job covers in each heap, [*t0, *t1). */
void cbf_beam_job_span(const cbf_beam_job *job, int *t0, int *t1);

int cbf_beam_job_check(const cbf_beam_job *job, char *msg, size_t msglen);

int cbf_beam_cpu(const cbf_beam_job *job, char *msg, size_t msglen);

/* The CUDA beamformer: per (batch range, channel, 256 spectra) a block
 * makes the channel's coefficient digits in shared memory and its warps
 * sum 8 beams at a time on the int8 tensor cores, each input byte copied
 * once per 8 beams through the warp's own shared-memory ring (cp.async,
 * beamform.cu). Runs on a stream (cudaStream_t as void *), no host
 * synchronisation. */
int cbf_beam_cuda_run(const cbf_beam_job *job, void *stream, char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif
#endif
