/* pfb_host.c: the host-side parts shared by the CPU and CUDA FIR: weights,
 * argument checks and per-spectrum presence. */
#include "pfb.h"

#include <math.h>

static int is_pow2(long v) { return v > 0 && (v & (v - 1)) == 0; }

int cbf_pfb_bits_ok(int bits)
{
    return (bits >= 2 && bits <= 10) || bits == 12 || bits == 16;
}

int cbf_pfb_auto_unzip(int channels)
{
    if (channels <= 8192)
        return 1;
    return channels <= 16384 ? 2 : 4;
}

int cbf_pfb_auto_unzip_complex(int channels)
{
    return cbf_pfb_auto_unzip(2 * channels);
}

static int check_shape(int channels, int taps, char *msg, size_t msglen)
{
    if (!is_pow2(channels) || channels < CBF_PFB_MIN_CHANNELS || channels > CBF_PFB_MAX_CHANNELS)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "channels %d: must be a power of two in [%d, %d]", channels,
                             CBF_PFB_MIN_CHANNELS, CBF_PFB_MAX_CHANNELS);
    if (taps < 1 || taps > CBF_PFB_MAX_TAPS)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "taps %d: must be in [1, %d]", taps,
                             CBF_PFB_MAX_TAPS);
    return 0;
}

int cbf_pfb_weights(int channels, int taps, double w_cutoff, cbf_pfb_window window,
                    float *out, char *msg, size_t msglen)
{
    int rc = check_shape(channels, taps, msg, msglen);
    if (rc)
        return rc;
    /* 0 is katgpucbf's "no sinc": with taps 1 and the rect window the
     * weights are all equal and the PFB is a plain DFT of each frame. */
    if (!(w_cutoff >= 0.0) || !isfinite(w_cutoff))
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "w_cutoff %g: must be 0 or positive",
                             w_cutoff);
    const size_t step = 2 * (size_t)channels, n = step * (size_t)taps;
    /* Two passes in double: the normalisation needs the whole sum first, and
     * storing unnormalised floats would round twice. */
    double sum2 = 0.0;
    for (int pass = 0; pass < 2; pass++) {
        double scale = pass ? 1.0 / sqrt(sum2) : 0.0;
        for (size_t i = 0; i < n; i++) {
            double win = 1.0;
            if (window == CBF_PFB_HANN) {
                double s = sin(M_PI * (double)i / (double)(n - 1));
                win = n > 1 ? s * s : 1.0;
            }
            double x = w_cutoff * (((double)i + 0.5) / (double)step - taps / 2.0);
            double sinc = x == 0.0 ? 1.0 : sin(M_PI * x) / (M_PI * x);
            double w = win * sinc;
            if (pass)
                out[i] = (float)(w * scale);
            else
                sum2 += w * w;
        }
        if (!pass && !(sum2 > 0.0))
            return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                                 "weights are all zero (taps %d, w_cutoff %g)", taps, w_cutoff);
    }
    return 0;
}

int cbf_pfb_job_check(const cbf_pfb_job *job, char *msg, size_t msglen)
{
    int rc = check_shape(job->channels, job->taps, msg, msglen);
    if (rc)
        return rc;
    if (!cbf_pfb_bits_ok(job->bits))
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "bits %d: supported widths are 2-10, 12 and 16", job->bits);
    if (job->unzip != 1 && job->unzip != 2 && job->unzip != 4)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "unzip %d: must be 1, 2 or 4",
                             job->unzip);
    if (job->channels / job->unzip < 32)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "channels / unzip = %d: must be at least 32",
                             job->channels / job->unzip);
    const size_t step = 2 * (size_t)job->channels;
    if (job->spectra && job->out_pol_stride < job->spectra * step)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "out_pol_stride %zu < spectra x step %zu", job->out_pol_stride,
                             job->spectra * step);
    for (int p = 0; p < 2; p++) {
        if (!job->spectra)
            break;
        int64_t last = job->start[p] + (int64_t)((job->spectra + job->taps - 1) * step);
        if (job->start[p] < 0 || last > (int64_t)job->in_samples)
            return cbf_kern_fail(
                msg, msglen, CBF_KERN_EINVAL,
                "pol %d: windows need samples [%lld, %lld) but the input holds [0, %zu)", p,
                (long long)job->start[p], (long long)last, job->in_samples);
    }
    return 0;
}

int cbf_pfb_cjob_check(const cbf_pfb_cjob *job, char *msg, size_t msglen)
{
    int rc = check_shape(job->channels, job->taps, msg, msglen);
    if (rc)
        return rc;
    if (job->unzip < 0 || job->unzip > 4 || job->unzip == 3)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "unzip %d: must be 0, 1, 2 or 4",
                             job->unzip);
    if (!job->spectra)
        return 0;
    const size_t step = 2 * (size_t)job->channels;
    if (job->out_pol_stride < job->spectra * 2 * step)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "out_pol_stride %zu < spectra x 2 x step %zu floats",
                             job->out_pol_stride, job->spectra * 2 * step);
    for (int p = 0; p < 2; p++) {
        int64_t last = job->start[p] + (int64_t)((job->spectra + job->taps - 1) * step);
        if (job->start[p] < 0 || last > (int64_t)job->in_samples)
            return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                                 "pol %d: windows need complex samples [%lld, %lld) but the input "
                                 "holds [0, %zu)",
                                 p, (long long)job->start[p], (long long)last, job->in_samples);
    }
    return 0;
}

int cbf_pfb_spectrum_presence(const uint8_t *heap_present, size_t heaps, size_t heap_samples,
                              const int64_t start[2], size_t step, size_t window,
                              size_t spectra, uint32_t *scratch, uint8_t *out, char *msg,
                              size_t msglen)
{
    if (!heap_samples || !window)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "heap_samples and window must be positive");
    const int64_t end = (int64_t)(heaps * heap_samples);
    for (size_t s = 0; s < spectra; s++)
        out[s] = 1;
    for (int p = 0; p < 2; p++) {
        const uint8_t *f = heap_present + (size_t)p * heaps;
        scratch[0] = 0;
        for (size_t h = 0; h < heaps; h++)
            scratch[h + 1] = scratch[h] + (f[h] != 0);
        for (size_t s = 0; s < spectra; s++) {
            int64_t a = start[p] + (int64_t)(s * step), b = a + (int64_t)window;
            if (a < 0 || b > end) {
                out[s] = 0;
                continue;
            }
            size_t lo = (size_t)a / heap_samples, hi = (size_t)(b - 1) / heap_samples;
            if (scratch[hi + 1] - scratch[lo] != hi - lo + 1)
                out[s] = 0;
        }
    }
    return 0;
}
