/* reducer_cpu.c: argument checks, dump spans, and the CPU reduction. */
#include "reducer.h"

#include <string.h>

int cbf_reduce_job_check(const cbf_reduce_job *job, char *msg, size_t msglen)
{
    if (job->n_ants < 1 || job->channels < 1)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "reducer: n_ants %d, channels %d: both must be >= 1", job->n_ants,
                             job->channels);
    size_t need = (size_t)job->channels * (size_t)job->n_ants * (job->n_ants + 1) / 2 * 8;
    if (job->slice_len < need)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "reducer: slice_len %zu: below the %zu values of one slice",
                             job->slice_len, need);
    if (job->slices < 1)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "reducer: slices %d: must be >= 1",
                             job->slices);
    if (!job->accum || !job->out || !job->ant_bad)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "reducer: accumulator, output or flag pointer is NULL");
    return 0;
}

static int32_t clamp32(int64_t v, int *sat)
{
    if (v > INT32_MAX) {
        *sat = 1;
        return INT32_MAX;
    }
    if (v < -INT32_MAX) {
        *sat = 1;
        return -INT32_MAX;
    }
    return (int32_t)v;
}

int cbf_reduce_cpu(const cbf_reduce_job *job, uint64_t *saturated, char *msg, size_t msglen)
{
    int rc = cbf_reduce_job_check(job, msg, msglen);
    if (rc)
        return rc;
    const size_t nbl = (size_t)job->n_ants * (job->n_ants + 1) / 2;
    uint64_t nsat = 0;
    for (int c = 0; c < job->channels; c++)
        for (int a2 = 0; a2 < job->n_ants; a2++)
            for (int a1 = 0; a1 <= a2; a1++) {
                size_t at = ((size_t)c * nbl + (size_t)a2 * (a2 + 1) / 2 + a1) * 8;
                int bad = job->ant_bad[a1] || job->ant_bad[a2];
                for (int p = 0; p < 4; p++) {
                    int64_t re = 0, im = 0;
                    for (int s = 0; s < job->slices; s++) {
                        re += job->accum[s * job->slice_len + at + 2 * p];
                        im += job->accum[s * job->slice_len + at + 2 * p + 1];
                    }
                    int sat = 0;
                    job->out[at + 2 * p] = bad ? CBF_VIS_MAGIC_RE : clamp32(re, &sat);
                    job->out[at + 2 * p + 1] = bad ? CBF_VIS_MAGIC_IM : clamp32(im, &sat);
                    nsat += (uint64_t)(sat && !bad);
                }
            }
    if (job->clear)
        for (int s = 0; s < job->slices; s++)
            memset((int64_t *)job->accum + s * job->slice_len, 0, nbl * 8 * job->channels * 8);
    if (saturated)
        *saturated += nsat;
    return 0;
}

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

int cbf_dump_split(int64_t ts0, size_t batches, int64_t batch_step, int64_t dump_batches,
                   cbf_dump_span *spans, size_t max_spans, size_t *n_spans, char *msg,
                   size_t msglen)
{
    *n_spans = 0;
    if (ts0 < 0 || batch_step < 1 || dump_batches < 1)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "dump split: timestamp %lld, batch step %lld, dump batches %lld:"
                             " need timestamp >= 0 and positive steps",
                             (long long)ts0, (long long)batch_step, (long long)dump_batches);
    const int64_t interval = batch_step * dump_batches;
    size_t k = 0;
    while (k < batches) {
        int64_t ts = ts0 + (int64_t)k * batch_step;
        int64_t d = floor_div(ts, interval);
        /* first batch at or past the next boundary */
        int64_t next = (d + 1) * interval - ts0;
        size_t end = (size_t)((next + batch_step - 1) / batch_step);
        int closes = end <= batches;
        if (end > batches)
            end = batches;
        if (*n_spans == max_spans)
            return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "dump split: more than %zu spans",
                                 max_spans);
        spans[(*n_spans)++] = (cbf_dump_span){k, end, d, closes};
        k = end;
    }
    return 0;
}
