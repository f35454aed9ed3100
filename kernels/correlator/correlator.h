/* correlator.h: the X-engine correlation kernel (C API, CPU and CUDA).
 *
 * Input ("cbf.xeng.batch"): complex samples with axes
 *   [batch][antenna][channel][spectrum][pol]
 * each CI8 (two bytes: re, im) or CI4 (one byte: re in the high nibble, im in
 * the low one), spectrum = spectra_per_heap.
 *
 * Output: 64-bit accumulators in docs/formats.md order, added into (never
 * overwritten), so one dump can span many calls:
 *   accum[slice][channel][baseline][product][re, im]   (int64)
 * baseline = a2 (a2 + 1) / 2 + a1 for a1 <= a2, product = p1 + 2 p2 (aa, ba,
 * ab, bb), value sum over spectra of x(a1, p1) conj(x(a2, p2)).
 *
 * The CUDA version spreads the batch range over `slices` accumulators (one
 * per blockIdx.z) so that a few channels still fill the GPU; the CPU version
 * adds everything into slice 0. The reducer sums the slices.
 *
 * Samples must not be -128 (8-bit): the tensor-core path negates imaginary
 * parts, and -(-128) does not fit in int8 (F-engines quantise symmetrically,
 * so an F-engine never produces it). 4-bit -8 is exact on both paths.
 *
 * Return values are 0 or a CBF_KERN_* code (kernels/common/status.h);
 * the message buffer (may be NULL) says what was wrong. This folder never
 * includes core/. */
#ifndef CBF_KERNEL_CORRELATOR_H
#define CBF_KERNEL_CORRELATOR_H

#include <stddef.h>
#include <stdint.h>

#include "beamform.h"

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif


/* The GPU stages spectra in groups of 32, so spectra_per_heap is a multiple
 * of 32; its upper bound keeps one batch's int32 partial sums exact. */
#define CBF_CORR_SPECTRA_QUANTUM 32
#define CBF_CORR_MAX_SPECTRA 65504
#define CBF_CORR_MAX_ANTS 4096

typedef struct cbf_corr_shape {
    int n_ants;           /* 1..CBF_CORR_MAX_ANTS */
    int channels;         /* >= 1 */
    int spectra_per_heap; /* multiple of 32, <= CBF_CORR_MAX_SPECTRA */
    int bits;             /* 8 (CI8) or 4 (CI4) */
} cbf_corr_shape;

int cbf_corr_shape_check(const cbf_corr_shape *s, char *msg, size_t msglen);

/* n_ants (n_ants + 1) / 2 */
size_t cbf_corr_baselines(int n_ants);
/* int64 values in one slice: channels x baselines x 4 x 2. */
size_t cbf_corr_accum_len(const cbf_corr_shape *s);
/* Bytes of one batch of input. */
size_t cbf_corr_batch_bytes(const cbf_corr_shape *s);

typedef struct cbf_corr_job {
    cbf_corr_shape shape;
    const uint8_t *in;   /* batches of input (device memory for CUDA) */
    size_t batch_begin;  /* correlate batches [batch_begin, batch_end) of `in` */
    size_t batch_end;
    int64_t *accum;      /* slices x cbf_corr_accum_len values (device for CUDA) */
    int slices;          /* >= 1; the CPU uses slice 0 only */
} cbf_corr_job;

int cbf_corr_job_check(const cbf_corr_job *job, char *msg, size_t msglen);

/* Exact 64-bit integer correlation on the CPU. */
int cbf_corr_cpu(const cbf_corr_job *job, char *msg, size_t msglen);

/* Tensor-core correlation (int8 mma, int32 products, int64 accumulators).
 * block_ants: receivers per thread block, 32, 48 or 64 for the portable
 * mma.sync kernel, or 0 to choose: on compute capability 9.0 (H100, H200)
 * with 8- or 4-bit input and spectra_per_heap a multiple of 64, the Hopper
 * wgmma kernels (64 x 64 tiles; 80 x 80 for 64 < N <= 80); otherwise mma.sync with 32 or 64. The plan holds
 * the triangular tile map for one shape. Runs on a stream (cudaStream_t as
 * void *), no host synchronisation. */
typedef struct cbf_corr_cuda cbf_corr_cuda;
int cbf_corr_cuda_create(const cbf_corr_shape *shape, int block_ants, cbf_corr_cuda **out,
                         char *msg, size_t msglen);
int cbf_corr_cuda_run(cbf_corr_cuda *plan, const cbf_corr_job *job, void *stream, char *msg,
                      size_t msglen);
/* Slices that fill the GPU for `batches` batches of this plan's shape. */
int cbf_corr_cuda_auto_slices(const cbf_corr_cuda *plan, size_t batches);
/* Which kernel and tile the plan runs, e.g. "wgmma 64x64", "mma.sync 64x32". */
const char *cbf_corr_cuda_kernel(const cbf_corr_cuda *plan);
void cbf_corr_cuda_destroy(cbf_corr_cuda *plan);

/* Correlation and tied-array beams of the same batches (the XB-engine's two
 * products from one input: beams->in is job->in). Where the plan runs the
 * Hopper kernels and cbf_xb_cuda_fused says so, one kernel does both and
 * reads each sample from memory once (correlator_sm90.cu, xb_wgmma);
 * otherwise the correlator and then the beamformer run on the stream. The
 * same accumulators and beam bytes either way. The one kernel's beams take
 * their coefficients as int8 digits: with beams->coef_version nonzero the
 * plan makes them once (a small kernel on the call's stream) and keeps them
 * for later calls of the same version, coefficient and pol arrays and beam
 * shape; a caller running one plan on several streams gives each call a
 * version of its own or orders them (the kept digits are rewritten on the
 * stream of the call that finds them stale). */
int cbf_xb_cuda_fused(const cbf_corr_cuda *plan, const cbf_corr_job *job, const cbf_beam_job *beams);
/* 1 when the one kernel can serve whole buffers of this plan's shape and
 * these beams (the Hopper kernels, 8-bit, N <= 64, B <= 8, the same
 * channels and spectra): cbf_xb_cuda_fused then holds for every job of
 * whole heaps from batch 0 with the beams' input the correlator's. */
int cbf_xb_cuda_can_fuse(const cbf_corr_cuda *plan, const cbf_beam_shape *beams);
/* The one kernel where it serves the shape (cbf_xb_cuda_can_fuse), which
 * is then the cheaper of the two ways at every buffer size measured (N =
 * 64, B = 8 on the H100, 2026-11-25, two-digit coefficients: 16 to 1024
 * channels per buffer of 4 or 32 heaps, -5% to 49% extra over the
 * correlator alone against 7% to 92% for the beamformer's own kernel on a
 * second stream; docs/notes/performance-history.md "Correlation and beams in one
 * kernel"): the xbengine plugin's `fuse: auto`, and cbf-bench beam's
 * column of it. */
int cbf_xb_cuda_prefer_fused(const cbf_corr_cuda *plan, const cbf_beam_shape *beams);
int cbf_xb_cuda_run(cbf_corr_cuda *plan, const cbf_corr_job *job, const cbf_beam_job *beams,
                    void *stream, char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif
#endif
