/* ddc_host.c: what the CPU and CUDA down-converters share: argument checks,
 * the fixed-point mixer and the mixer-folded weights. */
#include "ddc.h"

#include <math.h>
#include <stdio.h>

int cbf_ddc_config_check(const cbf_ddc_config *cfg, char *msg, size_t msglen)
{
    if (cfg->bits < 2 || cfg->bits > 16)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "ddc: bits %d: supported widths are 2..16", cfg->bits);
    if (cfg->decimation < 2 || cfg->decimation > CBF_DDC_MAX_TAPS / 4)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "ddc: decimation %d: must be in [2, %d]",
                             cfg->decimation, CBF_DDC_MAX_TAPS / 4);
    int w = cfg->taps / cfg->decimation;
    if (cfg->taps % cfg->decimation || (w != 4 && w != 8 && w != 12 && w != 16) ||
        cfg->taps > CBF_DDC_MAX_TAPS)
        return cbf_kern_fail(
            msg, msglen, CBF_KERN_EINVAL,
            "ddc: taps %d: must be 4, 8, 12 or 16 times the decimation (%d), at most %d", cfg->taps,
            cfg->decimation, CBF_DDC_MAX_TAPS);
    return 0;
}

uint32_t cbf_ddc_mix_step(double cycles_per_sample)
{
    double frac = cycles_per_sample - floor(cycles_per_sample); /* [0, 1) */
    double v = nearbyint(ldexp(frac, 32));
    return v >= 4294967296.0 ? 0u : (uint32_t)v;
}

uint32_t cbf_ddc_phase(uint64_t n, uint32_t step)
{
    /* The product wraps modulo 2^64; its low 32 bits are n x step mod 2^32. */
    return (uint32_t)(n * (uint64_t)step);
}

size_t cbf_ddc_in_samples(const cbf_ddc_config *cfg, size_t outputs)
{
    return outputs ? (outputs - 1) * (size_t)cfg->decimation + (size_t)cfg->taps : 0;
}

int cbf_ddc_weights(const cbf_ddc_config *cfg, const double *h, float *z, char *msg,
                    size_t msglen)
{
    int rc = cbf_ddc_config_check(cfg, msg, msglen);
    if (rc)
        return rc;
    for (int k = 0; k < cfg->taps; k++) {
        /* k x step stays exact in 64 bits; only its fraction of a cycle counts. */
        double cyc = ldexp((double)cbf_ddc_phase((uint64_t)k, cfg->mix_step), -32);
        z[2 * k] = (float)(h[k] * cos(2.0 * M_PI * cyc));
        z[2 * k + 1] = (float)(-h[k] * sin(2.0 * M_PI * cyc));
    }
    return 0;
}

int cbf_ddc_job_check(const cbf_ddc_config *cfg, const cbf_ddc_job *job, char *msg,
                      size_t msglen)
{
    int rc = cbf_ddc_config_check(cfg, msg, msglen);
    if (rc)
        return rc;
    if (!job->outputs)
        return 0;
    if (!job->in[0] || !job->in[1] || !job->out)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "ddc: job has a NULL input or output");
    if (((uintptr_t)job->in[0] | (uintptr_t)job->in[1]) & 3)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "ddc: inputs must be 4-byte aligned");
    if (job->out_pol_stride < job->outputs)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "ddc: out_pol_stride %zu < outputs %zu",
                             job->out_pol_stride, job->outputs);
    size_t need = job->start + cbf_ddc_in_samples(cfg, job->outputs);
    if (need > job->in_samples || need < job->start)
        return cbf_kern_fail(
            msg, msglen, CBF_KERN_EINVAL,
            "ddc: %zu outputs from sample %zu need %zu input samples, the input holds %zu",
            job->outputs, job->start, need, job->in_samples);
    return 0;
}
