/* fft_post_host.c: checks and presence shared by the CPU and CUDA back ends. */
#include "fft_post.h"
#include "fft_post_dither.h"

#include <stdio.h>

int cbf_fft_post_config_check(const cbf_fft_post_config *cfg, char *msg, size_t msglen)
{
    const char *why = NULL;
    int c = cfg->channels;
    if (c < 64 || c > 65536 || (c & (c - 1)))
        why = "channels must be a power of two in [64, 65536]";
    else if (cfg->unzip != 1 && cfg->unzip != 2 && cfg->unzip != 4)
        why = "unzip must be 1, 2 or 4";
    else if (c / cfg->unzip < 32)
        why = "channels / unzip must be at least 32";
    else if (cfg->spectra_per_heap < 1)
        why = "spectra_per_heap must be positive";
    else if (!cfg->spectra || cfg->spectra % (size_t)cfg->spectra_per_heap)
        why = "spectra must be a positive multiple of spectra_per_heap";
    else if (cfg->out_bits != 8 && cfg->out_bits != 4)
        why = "out_bits must be 8 or 4";
    else if (cfg->complex_in != 0 && cfg->complex_in != 1)
        why = "complex_in must be 0 or 1";
    else if (cfg->complex_in && cfg->keep_all && cfg->unzip != 1)
        why = "complex input keeping the whole band needs unzip 1";
    else if (cfg->keep_all != 0 && (cfg->keep_all != 1 || !cfg->complex_in))
        why = "keep_all must be 0, or 1 with complex input";
    else if (cfg->dither != 0 && cfg->dither != 1)
        why = "dither must be 0 or 1";
    else if (cfg->dither_antenna < 0 || cfg->dither_antenna > CBF_FFT_POST_DITHER_ANTENNAS - 1)
        why = "dither_antenna must be in [0, 65535]";
    else if (cfg->fft < CBF_FFT_POST_FFT_AUTO || cfg->fft > CBF_FFT_POST_FFT_CUFFTDX)
        why = "fft must be CBF_FFT_POST_FFT_AUTO, _CUFFT or _CUFFTDX";
    if (!why)
        return 0;
    return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                         "fft_post: %s (channels %d, unzip %d, spectra_per_heap %d, "
                         "spectra %zu, out_bits %d)",
                         why, c, cfg->unzip, cfg->spectra_per_heap, cfg->spectra, cfg->out_bits);
}

size_t cbf_fft_post_out_bytes(const cbf_fft_post_config *cfg)
{
    return cfg->spectra * (size_t)cfg->channels * 2 * (cfg->out_bits == 8 ? 2 : 1);
}

size_t cbf_fft_post_spectrum_samples(const cbf_fft_post_config *cfg)
{
    return (cfg->keep_all ? 1 : 2) * (size_t)cfg->channels;
}

size_t cbf_fft_post_row_floats(const cbf_fft_post_config *cfg)
{
    return (cfg->complex_in ? 2 : 1) * cbf_fft_post_spectrum_samples(cfg);
}

void cbf_fft_post_batch_presence(const uint8_t *spectrum_present, size_t spectra,
                                 int spectra_per_heap, uint8_t *batch_present)
{
    for (size_t b = 0; b < spectra / (size_t)spectra_per_heap; b++) {
        uint8_t ok = 1;
        for (int t = 0; t < spectra_per_heap; t++)
            ok &= spectrum_present[b * (size_t)spectra_per_heap + (size_t)t] != 0;
        batch_present[b] = ok;
    }
}
