/* ddc_cpu.c: the down-converter on the CPU, in the CUDA kernel's float32
 * operation order (see ddc.h), one block of outputs at a time so the decoded
 * samples stay in cache. */
#include "ddc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 1024

/* A 32-bit big-endian window always holds the sample (bits <= 16, at most 7
 * bits of lead): the padded input covers the bytes past the last sample. */
static inline float decode(const uint8_t *in, size_t i, int bits)
{
    size_t bit = i * (size_t)bits;
    const uint8_t *p = in + (bit >> 3);
    uint32_t v = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    return (float)((int32_t)(v << (bit & 7)) >> (32 - bits));
}

/* Rotation by -phi, phi in cycles x 2^32: the kernel's sincospif of the
 * float phase in half-cycles; here in double, rounded to float. */
static void rotate(float re, float im, uint32_t phi, float *out)
{
    float half = (float)(int32_t)phi * 0x1p-31f;
    float c = (float)cos(M_PI * (double)half), s = (float)sin(M_PI * (double)half);
    out[0] = fmaf(re, c, im * s);
    out[1] = fmaf(im, c, -(re * s));
}

int cbf_ddc_cpu(const cbf_ddc_config *cfg, const float *z, const cbf_ddc_job *job, char *msg,
                size_t msglen)
{
    int rc = cbf_ddc_job_check(cfg, job, msg, msglen);
    if (rc || !job->outputs)
        return rc;
    const size_t S = (size_t)cfg->decimation, W = (size_t)cfg->taps / S;
    float *x = malloc(((BLOCK - 1) * S + (size_t)cfg->taps) * sizeof(float));
    if (!x) {
        if (msg && msglen)
            strncpy(msg, "ddc: out of memory for the decode block", msglen - 1);
        return CBF_DDC_ENOMEM;
    }
    const uint32_t phase0 = cbf_ddc_phase(job->timestamp + job->start, cfg->mix_step);
    const uint32_t out_step = (uint32_t)(S * cfg->mix_step);
    for (int p = 0; p < 2; p++) {
        float *out = job->out + 2 * (size_t)p * job->out_pol_stride;
        for (size_t m0 = 0; m0 < job->outputs; m0 += BLOCK) {
            size_t n = job->outputs - m0 < BLOCK ? job->outputs - m0 : BLOCK;
            size_t first = job->start + m0 * S, len = (n - 1) * S + (size_t)cfg->taps;
            for (size_t i = 0; i < len; i++)
                x[i] = decode(job->in[p], first + i, cfg->bits);
            for (size_t m = 0; m < n; m++) {
                const float *xm = x + m * S;
                float re = 0.0f, im = 0.0f;
                for (size_t q = 0; q < S; q++)
                    for (size_t t = 0; t < W; t++) {
                        size_t k = t * S + q;
                        re = fmaf(xm[k], z[2 * k], re);
                        im = fmaf(xm[k], z[2 * k + 1], im);
                    }
                rotate(re, im, phase0 + (uint32_t)(m0 + m) * out_step, out + 2 * (m0 + m));
            }
        }
    }
    free(x);
    return 0;
}
