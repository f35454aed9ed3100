/* reducer.h: the X-engine's end of a dump (C API, CPU and CUDA).
 *
 * Sums the correlator's int64 accumulator slices (correlator.h layout,
 * [slice][channel][baseline][product][re, im]), converts to int32 with
 * saturation, and writes the visibilities in the order of docs/formats.md:
 *   out[channel][baseline][product][re, im]   (int32, "cbf.xeng.vis")
 * Each component clamps to [-(2^31 - 1), 2^31 - 1]; a visibility counts as
 * saturated once if either component clamped. Every baseline with an
 * antenna flagged bad (missing data in the dump) carries (-2^31, 1) in all
 * four products instead, and is never counted as saturated.
 *
 * Also here, because it is pure arithmetic: cutting a chunk of batches at
 * dump boundaries aligned to multiples of the dump interval (auto-resync).
 *
 * Return values are 0 or a CBF_KERN_* code (kernels/common/status.h);
 * the message buffer (may be NULL) says what was wrong. */
#ifndef CBF_KERNEL_REDUCER_H
#define CBF_KERNEL_REDUCER_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif


#define CBF_VIS_MAGIC_RE INT32_MIN /* (-2^31, 1): baseline touched by missing data */
#define CBF_VIS_MAGIC_IM 1

typedef struct cbf_reduce_job {
    int n_ants;
    int channels;
    const int64_t *accum;   /* slices x slice_len values (device for CUDA) */
    int slices;             /* >= 1 */
    size_t slice_len;       /* values per slice: channels x baselines x 8 */
    const uint8_t *ant_bad; /* n_ants flags, nonzero: missing data (device for CUDA) */
    int32_t *out;           /* channels x baselines x 8 values (device for CUDA) */
    int clear;              /* nonzero: zero all slices after reading, ready for the next dump */
} cbf_reduce_job;

int cbf_reduce_job_check(const cbf_reduce_job *job, char *msg, size_t msglen);

/* *saturated gains the number of saturated visibilities. */
int cbf_reduce_cpu(const cbf_reduce_job *job, uint64_t *saturated, char *msg, size_t msglen);

/* CUDA: a plan holds the device-side saturation counter. run enqueues on a
 * stream (cudaStream_t as void *); saturated waits for the stream, returns
 * the count since the last call and resets it. */
typedef struct cbf_reduce_cuda cbf_reduce_cuda;
int cbf_reduce_cuda_create(cbf_reduce_cuda **out, char *msg, size_t msglen);
int cbf_reduce_cuda_run(cbf_reduce_cuda *plan, const cbf_reduce_job *job, void *stream,
                        char *msg, size_t msglen);
int cbf_reduce_cuda_saturated(cbf_reduce_cuda *plan, void *stream, uint64_t *saturated,
                              char *msg, size_t msglen);
void cbf_reduce_cuda_destroy(cbf_reduce_cuda *plan);

/* Dumps. Batch k of a chunk has timestamp ts0 + k x batch_step; dump d
 * covers timestamps [d I, (d + 1) I) with I = dump_batches x batch_step, so
 * dump boundaries sit at multiples of I whatever the stream's first
 * timestamp (auto-resync), and may fall inside a chunk. */
typedef struct cbf_dump_span {
    size_t batch_begin, batch_end; /* batches [begin, end) of the chunk */
    int64_t dump;                  /* dump index: its timestamp is dump x I */
    int closes;                    /* the span ends with the dump's last batch */
} cbf_dump_span;

/* Spans in time order; max_spans >= batches / dump_batches + 2 always
 * suffices. ts0 >= 0. */
int cbf_dump_split(int64_t ts0, size_t batches, int64_t batch_step, int64_t dump_batches,
                   cbf_dump_span *spans, size_t max_spans, size_t *n_spans, char *msg,
                   size_t msglen);

#ifdef __cplusplus
}
#endif
#endif
