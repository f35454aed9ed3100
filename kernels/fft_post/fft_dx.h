/* fft_dx.h: cuFFTDx block FFTs, a measurement for issue 17 item 1 (built
 * only where meson finds cuFFTDx, option mathdx_dir; cbf-bench feng --dx).
 *
 * The question they answer: is a device-side FFT cheap enough to be the
 * transform inside a fused FIR + FFT + post kernel? So each kernel does what
 * cuFFT does in the four-pass chain (complex-to-complex, fp32, m = 4096 or
 * 8192 points, batched, global memory in and out), alone or with extra work
 * that shows its instruction cost. Not used by the engine. */
#ifndef CBF_KERNEL_FFT_DX_H
#define CBF_KERNEL_FFT_DX_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cbf_fft_dx_mode {
    /* Transform each spectrum: in -> out (float2, may be the same buffer). */
    CBF_FFT_DX_FFT,
    /* The same, transforming each spectrum 4 times in registers between the
     * load and the store (output m^3 times larger than FFT's): the extra
     * time over FFT is three transforms' arithmetic with the memory traffic
     * of one, i.e. the transform's own cost. */
    CBF_FFT_DX_FFT4,
    /* Transform, then the wideband post-processing's cheap part for unzip 1
     * (real-input combine of bins s and m - s, gain, int8 rounding with
     * saturation count): out = m channels of 2 int8 (re, im) per spectrum,
     * in channel order. eff: float2 [m] gains. Not done: the transpose to the
     * [channel][spectrum] output layout and the interleaving of the pols. */
    CBF_FFT_DX_POST,
} cbf_fft_dx_mode;

/* One compiled kernel configuration. */
typedef struct cbf_fft_dx_variant {
    int points;          /* m */
    int ept;             /* elements per thread: block of m / ept x ffts_per_block threads */
    int ffts_per_block;
    int suggested;       /* 1: cuFFTDx's own suggestion for this size on sm_90 */
} cbf_fft_dx_variant;

/* The compiled variants; returns their count. */
int cbf_fft_dx_variants(const cbf_fft_dx_variant **v);

/* Runs variant v (index into cbf_fft_dx_variants) over `spectra` spectra
 * (a multiple of its ffts_per_block) on `stream` (a cudaStream_t). in, out,
 * eff: device pointers. sat: device counter that POST adds its clipped
 * values to (NULL otherwise). Needs an sm_90 GPU (the kernels are built for
 * sm_90a alone): CBF_KERN_ENOTSUP elsewhere. */
int cbf_fft_dx_run(int v, cbf_fft_dx_mode mode, const void *in, void *out, size_t spectra,
                   const void *eff, unsigned long long *sat, void *stream, char *msg,
                   size_t msglen);

#ifdef __cplusplus
}
#endif
#endif
