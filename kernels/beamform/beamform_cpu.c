/* beamform_cpu.c: the beamformer on the CPU, per (batch, channel): the
 * integer coefficients of every (beam, antenna) once (beamform_math.h),
 * then exact 64-bit sums over antennas for every spectrum, so the result
 * is the GPU's bit for bit whatever order either adds in. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "beamform.h"
#include "beamform_math.h"

typedef struct bf_q {
    int32_t re, im;
} bf_q;

typedef struct bf_isum {
    int64_t re, im;
} bf_isum;

int cbf_beam_cpu(const cbf_beam_job *job, char *msg, size_t msglen)
{
    int rc = cbf_beam_job_check(job, msg, msglen);
    if (rc)
        return rc;
    const cbf_beam_shape *s = &job->shape;
    const size_t A = (size_t)s->n_ants, B = (size_t)s->n_beams, C = (size_t)s->channels,
                 T = (size_t)s->spectra_per_heap;
    int t0, t1;
    cbf_beam_job_span(job, &t0, &t1);
    bf_q *q = malloc(A * B * sizeof *q);
    bf_isum *acc = malloc(B * T * sizeof *acc);
    float *scale = malloc(B * 2 * sizeof *scale);
    if (!q || !acc || !scale) {
        free(q);
        free(acc);
        free(scale);
        return cbf_kern_fail(msg, msglen, CBF_KERN_ENOMEM, "beamformer: out of memory");
    }
    for (size_t b = 0; b < B; b++) {
        float m = 0.0f;
        for (size_t a = 0; a < A; a++)
            m = fmaxf(m, fabsf(job->coef[b * A + a].gain));
        bf_beam_scales(m, &scale[2 * b], &scale[2 * b + 1]);
    }
    for (size_t n = 0; n < job->batches; n++) {
        const uint8_t *present = job->present + n * A;
        const int8_t *in = (const int8_t *)job->in + n * A * C * T * 4;
        int8_t *out = job->out + n * B * C * T * 2;
        for (size_t c = 0; c < C; c++) {
            for (size_t b = 0; b < B; b++)
                for (size_t a = 0; a < A; a++) {
                    const bf_cplx w = bf_weight(&job->coef[b * A + a], (int)c, present[a]);
                    q[b * A + a].re = bf_fixed(w.re, scale[2 * b]);
                    q[b * A + a].im = bf_fixed(w.im, scale[2 * b]);
                }
            memset(acc, 0, B * T * sizeof *acc);
            for (size_t a = 0; a < A; a++) {
                const int8_t *x = in + (a * C + c) * T * 4;
                for (size_t b = 0; b < B; b++) {
                    const int64_t qr = q[b * A + a].re, qi = q[b * A + a].im;
                    if (!qr && !qi)
                        continue;
                    const int p = job->pol[b] ? 2 : 0;
                    bf_isum *ab = acc + b * T;
                    for (size_t t = (size_t)t0; t < (size_t)t1; t++) {
                        const int64_t xr = x[t * 4 + p], xi = x[t * 4 + p + 1];
                        ab[t].re += qr * xr - qi * xi;
                        ab[t].im += qi * xr + qr * xi;
                    }
                }
            }
            const uint64_t chan = job->first_channel + c;
            for (size_t b = 0; b < B; b++) {
                uint64_t sat = 0;
                for (size_t t = (size_t)t0; t < (size_t)t1; t++) {
                    const bf_cplx v = {bf_unfix(acc[b * T + t].re, scale[2 * b + 1]),
                                       bf_unfix(acc[b * T + t].im, scale[2 * b + 1])};
                    const size_t o = (b * C + c) * T + t;
                    if (job->raw) {
                        job->raw[(n * B * C * T + o) * 2] = v.re;
                        job->raw[(n * B * C * T + o) * 2 + 1] = v.im;
                    }
                    const uint64_t spec = job->first_spectrum + n * T + t;
                    uint32_t h = 0;
                    if (job->dither)
                        h = bf_dither_bits(cbf_dither_u64(job->dither_key,
                                                          bf_dither_counter(spec, chan, job->total_channels, B, b)),
                                           spec);
                    sat += (uint64_t)bf_output_bits(v, job->dither, h, &out[o * 2]);
                }
                job->saturated[b] += sat;
            }
        }
    }
    free(q);
    free(acc);
    free(scale);
    return 0;
}
