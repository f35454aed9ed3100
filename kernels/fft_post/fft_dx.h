/* fft_dx.h: cuFFTDx block FFTs for issue 17 item 1 (built only where meson
 * finds cuFFTDx, option mathdx_dir): the fused FFT + post kernel that
 * fft_post's CUDA plan runs where it fits (cbf_fft_dx_post_*, below), and
 * the measurement kernels of cbf-bench feng --dx (cbf_fft_dx_run).
 *
 * The question the measurement kernels answer: is a device-side FFT cheap enough to be the
 * transform inside a fused FIR + FFT + post kernel? So each kernel does what
 * cuFFT does in the four-pass chain (complex-to-complex, fp32, m = 4096 or
 * 8192 points, batched, global memory in and out), alone or with extra work
 * that shows its instruction cost. Not used by the engine. */
#ifndef CBF_KERNEL_FFT_DX_H
#define CBF_KERNEL_FFT_DX_H

#include <stddef.h>
#include <stdint.h>

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

/* The fused wideband FFT + post-processing: one kernel doing what
 * fft_post's cuFFT transform and post kernel do for a wideband plan with
 * unzip 1 (m = channels points, the real-to-complex fix-up, delay, gain,
 * dither, rounding, saturation count, the [batch][channel][spectrum][pol]
 * store), reading the FIR output once and leaving it unchanged. A block
 * transforms `group` consecutive spectra of both pols, one after another,
 * each thread keeping the packed words of its own channels in shared
 * memory, then stores each channel's `group` words as one vector: the
 * output's transpose without a global round trip of the spectrum. */
typedef struct cbf_fft_dx_post {
    const float *data;        /* FIR output, [pol][spectrum][2 x channels] floats */
    size_t data_pol_stride;   /* floats from pol 0 to pol 1 */
    void *out;                /* cbf_fft_post_out_bytes */
    int channels, spectra_per_heap, out_bits;
    size_t spectra;
    const void *eff;          /* float2 [2][pol][channel]: gains with delay and phase folded
                                 in, the tables before and from gain_switch on */
    const void *spectrum_delay; /* float2 [pol][spectrum] (fine delay, phase), or NULL */
    long long gain_switch;    /* first spectrum of the second table */
    unsigned long long *sat;  /* [2], added to */
    int dither, dither_antenna;
    uint64_t dither_key, first_spectrum;
    int variant;              /* -1: the engine's kernel; else one of
                                 cbf_fft_dx_post_variants (no delay model, no dither) */
} cbf_fft_dx_post;

/* 0 when the fused kernel can run this shape on the current device: a
 * wideband (complex_in = 0) plan with unzip 1 at 4096 or 8192 channels, on
 * an sm_90 GPU; otherwise CBF_KERN_ENOTSUP, msg saying why. */
int cbf_fft_dx_post_check(int channels, int unzip, int complex_in, char *msg, size_t msglen);

/* Layouts of the fused kernel compiled for measurement (cbf-bench feng):
 * spectra per block, pol 0's values held in registers for pol 1's (else
 * combined in shared memory), the next spectrum loaded during this one's
 * work, blocks per SM asked of the compiler. Returns their count. */
typedef struct cbf_fft_dx_post_variant {
    int points, group, hold, prefetch, min_blocks;
} cbf_fft_dx_post_variant;
int cbf_fft_dx_post_variants(const cbf_fft_dx_post_variant **v);

/* Enqueues the kernel on `stream` (a cudaStream_t); device pointers in p. */
int cbf_fft_dx_post_run(const cbf_fft_dx_post *p, void *stream, char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif
#endif
