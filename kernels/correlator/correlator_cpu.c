/* correlator_cpu.c: shape checks shared with the CUDA path, and the exact
 * 64-bit CPU correlator (the no-GPU fallback). */
#include "correlator.h"

#include <stdlib.h>

size_t cbf_corr_baselines(int n_ants) { return (size_t)n_ants * ((size_t)n_ants + 1) / 2; }

size_t cbf_corr_accum_len(const cbf_corr_shape *s)
{
    return (size_t)s->channels * cbf_corr_baselines(s->n_ants) * 8;
}

size_t cbf_corr_batch_bytes(const cbf_corr_shape *s)
{
    return (size_t)s->n_ants * (size_t)s->channels * (size_t)s->spectra_per_heap * 2 *
           (size_t)(s->bits == 4 ? 1 : 2);
}

int cbf_corr_shape_check(const cbf_corr_shape *s, char *msg, size_t msglen)
{
    if (s->n_ants < 1 || s->n_ants > CBF_CORR_MAX_ANTS)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "n_ants %d: must be in [1, %d]",
                             s->n_ants, CBF_CORR_MAX_ANTS);
    if (s->channels < 1)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "channels %d: must be at least 1",
                             s->channels);
    if (s->spectra_per_heap < CBF_CORR_SPECTRA_QUANTUM ||
        s->spectra_per_heap % CBF_CORR_SPECTRA_QUANTUM ||
        s->spectra_per_heap > CBF_CORR_MAX_SPECTRA)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "spectra_per_heap %d: must be a multiple of %d up to %d",
                             s->spectra_per_heap, CBF_CORR_SPECTRA_QUANTUM, CBF_CORR_MAX_SPECTRA);
    if (s->bits != 8 && s->bits != 4)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "bits %d: must be 8 (CI8) or 4 (CI4)",
                             s->bits);
    return 0;
}

int cbf_corr_job_check(const cbf_corr_job *job, char *msg, size_t msglen)
{
    int rc = cbf_corr_shape_check(&job->shape, msg, msglen);
    if (rc)
        return rc;
    if (job->batch_end < job->batch_begin)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "batch range [%zu, %zu) is reversed",
                             job->batch_begin, job->batch_end);
    if (job->slices < 1 || job->slices > 65535)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "slices %d: must be in [1, 65535]",
                             job->slices);
    if (job->batch_end > job->batch_begin && (!job->in || !job->accum))
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "input or accumulator pointer is NULL");
    return 0;
}

/* One antenna's samples of one (batch, channel) as ints: [spectrum][pol][re, im]. */
static void unpack_row(const cbf_corr_shape *s, const uint8_t *p, int *out)
{
    size_t n = (size_t)s->spectra_per_heap * 2;
    for (size_t i = 0; i < n; i++) {
        if (s->bits == 8) {
            out[2 * i] = (int8_t)p[2 * i];
            out[2 * i + 1] = (int8_t)p[2 * i + 1];
        } else {
            out[2 * i] = (int8_t)(p[i] & 0xf0) >> 4;
            out[2 * i + 1] = (int8_t)(uint8_t)(p[i] << 4) >> 4;
        }
    }
}

/* The four products of one baseline over one batch. Each term is below
 * 2^15 and a batch has at most 65504 spectra, so int64 never comes near
 * overflow; the sum is exact. */
static void baseline(const int *x1, const int *x2, int spectra, int64_t acc[8])
{
    for (int t = 0; t < spectra; t++) {
        const int *u = x1 + 4 * t, *v = x2 + 4 * t;
        for (int p2 = 0; p2 < 2; p2++)
            for (int p1 = 0; p1 < 2; p1++) {
                int r1 = u[2 * p1], i1 = u[2 * p1 + 1], r2 = v[2 * p2], i2 = v[2 * p2 + 1];
                int64_t *o = acc + 2 * (p1 + 2 * p2);
                o[0] += (int64_t)(r1 * r2 + i1 * i2);
                o[1] += (int64_t)(r2 * i1 - r1 * i2);
            }
    }
}

int cbf_corr_cpu(const cbf_corr_job *job, char *msg, size_t msglen)
{
    int rc = cbf_corr_job_check(job, msg, msglen);
    if (rc)
        return rc;
    const cbf_corr_shape *s = &job->shape;
    const int n = s->n_ants, sp = s->spectra_per_heap;
    const size_t row_vals = (size_t)sp * 4;
    const size_t row_bytes = (size_t)sp * 2 * (s->bits == 4 ? 1 : 2);
    int *rows = malloc(sizeof(int) * row_vals * (size_t)n);
    if (!rows) {
        return cbf_kern_fail(msg, msglen, CBF_KERN_ENOMEM,
                             "correlator: out of memory for %d antenna rows", n);
    }
    const size_t nbl = cbf_corr_baselines(n);
    for (size_t b = job->batch_begin; b < job->batch_end; b++) {
        const uint8_t *batch = job->in + b * cbf_corr_batch_bytes(s);
        for (int c = 0; c < s->channels; c++) {
            for (int a = 0; a < n; a++)
                unpack_row(s, batch + ((size_t)a * s->channels + c) * row_bytes,
                           rows + (size_t)a * row_vals);
            int64_t *acc = job->accum + (size_t)c * nbl * 8;
            for (int a2 = 0; a2 < n; a2++)
                for (int a1 = 0; a1 <= a2; a1++)
                    baseline(rows + (size_t)a1 * row_vals, rows + (size_t)a2 * row_vals, sp,
                             acc + ((size_t)a2 * (a2 + 1) / 2 + a1) * 8);
        }
    }
    free(rows);
    return 0;
}
