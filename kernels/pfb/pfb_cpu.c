/* pfb_cpu.c: the FIR on the CPU. A ring of `taps` decoded rows slides down
 * the input, so each packed sample is decoded once per call. */
#include "pfb.h"

#include "cbf/kernels/packed.h"

#include <stdlib.h>
#include <string.h>

int cbf_pfb_fir_cpu(const cbf_pfb_job *job, const float *weights, uint64_t power[2],
                    char *msg, size_t msglen)
{
    int rc = cbf_pfb_job_check(job, msg, msglen);
    if (rc)
        return rc;
    const size_t step = 2 * (size_t)job->channels, taps = (size_t)job->taps;
    const size_t m = (size_t)job->channels / (size_t)job->unzip;
    int log_n = job->unzip == 4 ? 2 : job->unzip == 2 ? 1 : 0;
    float *ring = malloc(taps * step * sizeof(float)), *acc = malloc(step * sizeof(float));
    size_t *perm = malloc(step * sizeof(size_t));
    if (!ring || !perm || !acc) {
        free(ring);
        free(acc);
        free(perm);
        return cbf_kern_fail(msg, msglen, CBF_KERN_ENOMEM, "pfb: out of memory for the FIR ring");
    }
    for (size_t j = 0; j < step; j++) {
        size_t i = j >> 1, q = i >> log_n, r = i & ((size_t)job->unzip - 1);
        perm[j] = 2 * (r * m + q) + (j & 1);
    }
    for (int p = 0; p < 2; p++) {
        const uint8_t *in = job->in[p];
        uint64_t pw = 0;
        for (size_t row = 0; row + 1 < taps + job->spectra; row++) {
            float *dst = ring + (row % taps) * step;
            size_t base = (size_t)job->start[p] + row * step;
            for (size_t j = 0; j < step; j++) {
                int32_t v = cbf_packed_sample(in, base + j, job->bits);
                dst[j] = (float)v;
                if (row < job->spectra)
                    pw += (uint64_t)((int64_t)v * v);
            }
            if (row + 1 < taps)
                continue;
            /* Taps outer, columns inner: the column loop vectorises, and
             * each column still sums its taps in order 0..taps-1. */
            size_t s = row + 1 - taps;
            for (size_t j = 0; j < step; j++)
                acc[j] = 0.0f;
            for (size_t t = 0; t < taps; t++) {
                const float *w = weights + t * step, *x = ring + ((s + t) % taps) * step;
                for (size_t j = 0; j < step; j++)
                    acc[j] += w[j] * x[j];
            }
            float *out = job->out + (size_t)p * job->out_pol_stride + s * step;
            for (size_t j = 0; j < step; j++)
                out[perm[j]] = acc[j];
        }
        if (power)
            power[p] += pw;
    }
    free(ring);
    free(acc);
    free(perm);
    return 0;
}

/* Complex FIR: the float row of 2 x step values is filtered column by
 * column, column f using the weight of complex sample f / 2. Taps are
 * summed in order 0..taps-1 per column; the column loop vectorises. */
int cbf_pfb_fir_complex_cpu(const cbf_pfb_cjob *job, const float *weights, char *msg,
                            size_t msglen)
{
    int rc = cbf_pfb_cjob_check(job, msg, msglen);
    if (rc)
        return rc;
    const size_t step = 2 * (size_t)job->channels, row = 2 * step, taps = (size_t)job->taps;
    float *wf = malloc(taps * row * sizeof(float));
    if (!wf) {
        return cbf_kern_fail(msg, msglen, CBF_KERN_ENOMEM,
                             "pfb: out of memory for the complex FIR weights");
    }
    for (size_t i = 0; i < taps * row; i++)
        wf[i] = weights[(i / row) * step + (i % row) / 2];
    for (int p = 0; p < 2; p++)
        for (size_t s = 0; s < job->spectra; s++) {
            const float *x = job->in[p] + 2 * ((size_t)job->start[p] + s * step);
            float *out = job->out + (size_t)p * job->out_pol_stride + s * row;
            for (size_t f = 0; f < row; f++)
                out[f] = 0.0f;
            for (size_t t = 0; t < taps; t++) {
                const float *w = wf + t * row, *xt = x + t * row;
                for (size_t f = 0; f < row; f++)
                    out[f] += w[f] * xt[f];
            }
        }
    free(wf);
    return 0;
}
