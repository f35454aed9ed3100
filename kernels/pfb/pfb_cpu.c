/* pfb_cpu.c: the FIR on the CPU. A ring of `taps` decoded rows slides down
 * the input, so each packed sample is decoded once per call. */
#include "pfb.h"

#include "cbf/kernels/packed.h"

#include <complex.h>
#include <math.h>
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

/* The first radix-n stage of the step-point transform on one FIR row y
 * (pfb.h): u_j[q] = tw[j m + q] sum_r y[q + r m] (-i)^(4 r j / n mod 4),
 * written to u (n m complex). tw: exp(-2 pi i q j / step), computed in
 * double once per call. */
static void unzip_row(const float complex *y, int n, size_t m, const float complex *tw,
                      float complex *u)
{
    for (int j = 0; j < n; j++)
        for (size_t q = 0; q < m; q++) {
            float complex a = 0;
            for (int r = 0; r < n; r++) {
                int e = (r * j) % n * (4 / n);
                float complex v = y[q + (size_t)r * m];
                a += e == 0 ? v : e == 1 ? -I * v : e == 2 ? -v : I * v;
            }
            u[(size_t)j * m + q] = tw[(size_t)j * m + q] * a;
        }
}

/* Complex FIR: the float row of 2 x step values is filtered column by
 * column, column f using the weight of complex sample f / 2. Taps are
 * summed in order 0..taps-1 per column; the column loop vectorises. With
 * unzip > 1 the row is filtered into scratch and then unzipped. */
int cbf_pfb_fir_complex_cpu(const cbf_pfb_cjob *job, const float *weights, char *msg,
                            size_t msglen)
{
    int rc = cbf_pfb_cjob_check(job, msg, msglen);
    if (rc)
        return rc;
    const size_t step = 2 * (size_t)job->channels, row = 2 * step, taps = (size_t)job->taps;
    const int n = job->unzip > 1 ? job->unzip : 1;
    const size_t m = step / (size_t)n;
    float *wf = malloc(taps * row * sizeof(float));
    float complex *tw = NULL, *y = NULL;
    if (wf && n > 1) {
        tw = malloc(step * sizeof(float complex));
        y = malloc(step * sizeof(float complex));
    }
    if (!wf || (n > 1 && (!tw || !y))) {
        free(wf);
        free(tw);
        free(y);
        return cbf_kern_fail(msg, msglen, CBF_KERN_ENOMEM,
                             "pfb: out of memory for the complex FIR weights");
    }
    for (int j = 0; j < n && n > 1; j++)
        for (size_t q = 0; q < m; q++) {
            double a = -2.0 * M_PI * (double)q * j / (double)step;
            tw[(size_t)j * m + q] = (float)cos(a) + I * (float)sin(a);
        }
    for (size_t i = 0; i < taps * row; i++)
        wf[i] = weights[(i / row) * step + (i % row) / 2];
    for (int p = 0; p < 2; p++)
        for (size_t s = 0; s < job->spectra; s++) {
            const float *x = job->in[p] + 2 * ((size_t)job->start[p] + s * step);
            float *dst = job->out + (size_t)p * job->out_pol_stride + s * row;
            float *out = n > 1 ? (float *)y : dst;
            for (size_t f = 0; f < row; f++)
                out[f] = 0.0f;
            for (size_t t = 0; t < taps; t++) {
                const float *w = wf + t * row, *xt = x + t * row;
                for (size_t f = 0; f < row; f++)
                    out[f] += w[f] * xt[f];
            }
            if (n > 1)
                unzip_row(y, n, m, tw, (float complex *)dst);
        }
    free(wf);
    free(tw);
    free(y);
    return 0;
}
