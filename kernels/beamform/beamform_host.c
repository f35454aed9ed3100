/* beamform_host.c: what the CPU and CUDA beamformers share on the host:
 * shape and job checks, and katgpucbf's delay conventions as fixed-point
 * phases. */
#include "beamform.h"

#include <math.h>

int cbf_beam_shape_check(const cbf_beam_shape *s, char *msg, size_t msglen)
{
    if (s->n_ants < 1 || s->n_ants > CBF_BEAM_MAX_ANTS)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "n_ants %d not in [1, %d]", s->n_ants,
                             CBF_BEAM_MAX_ANTS);
    if (s->n_beams < 1 || s->n_beams > CBF_BEAM_MAX_BEAMS)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "n_beams %d not in [1, %d]",
                             s->n_beams, CBF_BEAM_MAX_BEAMS);
    if (s->channels < 1 || s->channels > 65535)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "channels %d not in [1, 65535]",
                             s->channels);
    if (s->spectra_per_heap < 1 || s->spectra_per_heap > (1 << 20))
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "spectra_per_heap %d not in [1, 2^20]", s->spectra_per_heap);
    return 0;
}

size_t cbf_beam_in_batch_bytes(const cbf_beam_shape *s)
{
    return (size_t)s->n_ants * (size_t)s->channels * (size_t)s->spectra_per_heap * 4;
}

size_t cbf_beam_out_batch_bytes(const cbf_beam_shape *s)
{
    return (size_t)s->n_beams * (size_t)s->channels * (size_t)s->spectra_per_heap * 2;
}

/* A phase in turns as 64-bit fixed point, modulo one turn (the fraction
 * keeps 53 - log2|turns| bits of double precision). */
static uint64_t bf_turns_fixed(double turns)
{
    double f = turns - floor(turns); /* [0, 1] */
    if (f >= 1.0)
        f = 0.0;
    return (uint64_t)ldexp(f, 64);
}

int cbf_beam_coef_set(cbf_beam_coef *c, double weight, double quant_gain, double delay,
                      double fringe, double channel_spacing, double first_channel,
                      double centre_channel)
{
    const double g = weight * quant_gain;
    if (!isfinite(g) || fabs(g) > 1e30 || !isfinite(delay) || !isfinite(fringe) ||
        !isfinite(channel_spacing) || !isfinite(first_channel) || !isfinite(centre_channel))
        return CBF_KERN_EINVAL;
    /* katgpucbf: the fringe offset is the phase at the centre channel; the
     * phase at the first channel adds the delay's slope from there. The
     * slope is negative: a delayed wave has less phase at a fixed time. */
    const double slope = -channel_spacing * delay; /* turns per channel */
    const double at_first = fringe / (2.0 * M_PI) + slope * (first_channel - centre_channel);
    c->gain = (float)g;
    c->pad_ = 0;
    c->phase0 = bf_turns_fixed(at_first);
    c->step = bf_turns_fixed(slope);
    return 0;
}

int cbf_beam_job_check(const cbf_beam_job *job, char *msg, size_t msglen)
{
    int rc = cbf_beam_shape_check(&job->shape, msg, msglen);
    if (rc)
        return rc;
    if (job->batches && (!job->in || !job->present || !job->coef || !job->pol || !job->out ||
                         !job->saturated))
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "a job pointer is NULL");
    if (job->total_channels < job->first_channel + (uint64_t)job->shape.channels)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "channels [%llu, %llu) outside the band of %llu",
                             (unsigned long long)job->first_channel,
                             (unsigned long long)job->first_channel + (unsigned)job->shape.channels,
                             (unsigned long long)job->total_channels);
    int t0, t1;
    cbf_beam_job_span(job, &t0, &t1);
    if (t0 < 0 || t0 >= t1 || t1 > job->shape.spectra_per_heap)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "spectra [%d, %d) not inside a heap of %d",
                             job->spectrum_begin, job->spectrum_end, job->shape.spectra_per_heap);
    return 0;
}

void cbf_beam_job_span(const cbf_beam_job *job, int *t0, int *t1)
{
    const int whole = !job->spectrum_begin && !job->spectrum_end;
    *t0 = job->spectrum_begin;
    *t1 = whole ? job->shape.spectra_per_heap : job->spectrum_end;
}
