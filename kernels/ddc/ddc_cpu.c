/* ddc_cpu.c: the down-converter on the CPU, in the CUDA FMA kernel's float32
 * operation order (see ddc.h), one block of outputs at a time so the decoded
 * samples stay in cache. On x86-64 with FMA hardware (x86-64-v3) the sums
 * run as vector FMAs; elsewhere fmaf gives the same bits, slower. */
#include "ddc.h"

#include "cbf/kernels/packed.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 1024

/* Rotation by -phi, phi in cycles x 2^32: the kernel's sincospif of the
 * float phase in half-cycles; here in double, rounded to float. */
static void rotate(float re, float im, uint32_t phi, float *out)
{
    float half = (float)(int32_t)phi * 0x1p-31f;
    float c = (float)cos(M_PI * (double)half), s = (float)sin(M_PI * (double)half);
    out[0] = fmaf(re, c, im * s);
    out[1] = fmaf(im, c, -(re * s));
}

/* Outputs [m0, m0 + n) of one pol. The samples are decoded once into
 * polyphase rows, xp[q][r] = x[first + r S + q], so that output m's term
 * (q, t) is xp[q][m + t]: contiguous across outputs, which lets the
 * compiler run LANES outputs per vector instruction while each output keeps
 * the kernel's order (q outer, t inner, one fmaf per term). */
#define LANES 8
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
static void block_sums(const float *xp, size_t rows, size_t S, size_t W, const float *z,
                       size_t n, float *re_out, float *im_out)
{
    for (size_t m = 0; m < n; m += LANES) {
        float re[LANES] = {0}, im[LANES] = {0};
        for (size_t q = 0; q < S; q++)
            for (size_t t = 0; t < W; t++) {
                const float zr = z[2 * (t * S + q)], zi = z[2 * (t * S + q) + 1];
                const float *x = xp + q * rows + m + t;
                for (int i = 0; i < LANES; i++) {
                    re[i] = fmaf(x[i], zr, re[i]);
                    im[i] = fmaf(x[i], zi, im[i]);
                }
            }
        for (int i = 0; i < LANES; i++) {
            re_out[m + (size_t)i] = re[i];
            im_out[m + (size_t)i] = im[i];
        }
    }
}

int cbf_ddc_cpu(const cbf_ddc_config *cfg, const float *z, const cbf_ddc_job *job, char *msg,
                size_t msglen)
{
    int rc = cbf_ddc_job_check(cfg, job, msg, msglen);
    if (rc || !job->outputs)
        return rc;
    const size_t S = (size_t)cfg->decimation, W = (size_t)cfg->taps / S;
    /* Rows cover BLOCK outputs rounded up to whole vectors, plus the W - 1
     * rows the last window reaches; rows past the input read zeros. */
    const size_t rows = BLOCK + LANES + W;
    float *xp = malloc(S * rows * sizeof(float));
    float *acc = malloc(2 * (BLOCK + LANES) * sizeof(float));
    if (!xp || !acc) {
        free(xp);
        free(acc);
        return cbf_kern_fail(msg, msglen, CBF_KERN_ENOMEM,
                             "ddc: out of memory for the decode block");
    }
    const uint32_t phase0 = cbf_ddc_phase(job->timestamp + job->start, cfg->mix_step);
    const uint32_t out_step = (uint32_t)(S * cfg->mix_step);
    const int bits = cfg->bits;
    for (int p = 0; p < 2; p++) {
        float *out = job->out + 2 * (size_t)p * job->out_pol_stride;
        const uint8_t *in = job->in[p];
        for (size_t m0 = 0; m0 < job->outputs; m0 += BLOCK) {
            size_t n = job->outputs - m0 < BLOCK ? job->outputs - m0 : BLOCK;
            size_t first = job->start + m0 * S, need = (n - 1) * S + (size_t)cfg->taps;
            size_t padded = (n + LANES - 1) / LANES * LANES;
            for (size_t r = 0; r < padded + W - 1; r++)
                for (size_t q = 0; q < S; q++) {
                    size_t i = r * S + q;
                    xp[q * rows + r] =
                        i < need ? (float)cbf_packed_sample(in, first + i, bits) : 0.0f;
                }
            block_sums(xp, rows, S, W, z, padded, acc, acc + BLOCK + LANES);
            for (size_t m = 0; m < n; m++)
                rotate(acc[m], acc[BLOCK + LANES + m], phase0 + (uint32_t)(m0 + m) * out_step,
                       out + 2 * (m0 + m));
        }
    }
    free(xp);
    free(acc);
    return 0;
}
