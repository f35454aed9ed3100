/* beamform_cpu.c: the beamformer on the CPU, per (batch, channel): the
 * coefficients of every (beam, antenna) once, then the sums over antennas
 * in ascending order for every spectrum, as the GPU adds them. */
#include <stdlib.h>
#include <string.h>

#include "beamform.h"
#include "beamform_math.h"

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
    bf_cplx *w = malloc(A * B * sizeof *w);
    bf_acc *acc = malloc(B * T * sizeof *acc);
    if (!w || !acc) {
        free(w);
        free(acc);
        return cbf_kern_fail(msg, msglen, CBF_KERN_ENOMEM, "beamformer: out of memory");
    }
    for (size_t n = 0; n < job->batches; n++) {
        const uint8_t *present = job->present + n * A;
        const int8_t *in = (const int8_t *)job->in + n * A * C * T * 4;
        int8_t *out = job->out + n * B * C * T * 2;
        for (size_t c = 0; c < C; c++) {
            for (size_t b = 0; b < B; b++)
                for (size_t a = 0; a < A; a++)
                    w[b * A + a] = bf_weight(&job->coef[b * A + a], (int)c, present[a]);
            memset(acc, 0, B * T * sizeof *acc);
            for (size_t a = 0; a < A; a++) {
                const int8_t *x = in + (a * C + c) * T * 4;
                for (size_t t = (size_t)t0; t < (size_t)t1; t++)
                    for (size_t b = 0; b < B; b++) {
                        const int p = job->pol[b] ? 2 : 0;
                        bf_mad(&acc[b * T + t], w[b * A + a], x[t * 4 + p], x[t * 4 + p + 1]);
                    }
            }
            const uint64_t chan = job->first_channel + c;
            for (size_t b = 0; b < B; b++) {
                uint64_t sat = 0;
                for (size_t t = (size_t)t0; t < (size_t)t1; t++) {
                    const bf_cplx v = bf_acc_sum(acc[b * T + t]);
                    const size_t o = (b * C + c) * T + t;
                    if (job->raw) {
                        job->raw[(n * B * C * T + o) * 2] = v.re;
                        job->raw[(n * B * C * T + o) * 2 + 1] = v.im;
                    }
                    const uint64_t spec = job->first_spectrum + n * T + t;
                    const uint64_t ctr = (spec * job->total_channels + chan) * B + b;
                    sat += (uint64_t)bf_output(v, job->dither, job->dither_key, ctr, &out[o * 2]);
                }
                job->saturated[b] += sat;
            }
        }
    }
    free(w);
    free(acc);
    return 0;
}
