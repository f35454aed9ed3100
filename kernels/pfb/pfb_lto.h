/* pfb_lto.h: what the FIR load callback (pfb_lto_cb.cu, compiled to LTO-IR
 * and linked into cuFFT's kernel at plan time) and its host side
 * (pfb_lto.cu) share: the parameters the callback reads through cuFFT's
 * caller_info pointer, and the names of its entry points. Internal to
 * kernels/pfb. */
#ifndef CBF_KERNEL_PFB_LTO_H
#define CBF_KERNEL_PFB_LTO_H

/* Power sums are spread over this many slots per pol (one per SM and warp
 * slot), so that the per-warp atomics of the callback do not all meet on
 * one address; the host adds them up when it reads the power. */
#define CBF_PFB_LTO_SLOTS 1024

/* One transform batch covers both pols: elements [0, pol_elems) are pol 0's
 * spectra x channels complex values, [pol_elems, 2 pol_elems) pol 1's. */
struct cbf_pfb_lto_params {
    const unsigned *in[2];          /* packed samples as 32-bit words (4-byte aligned) */
    long long first_bit[2];         /* bit of sample start[pol] in in[pol] */
    const float *w;                 /* [taps][channels][2]: the weights of y[2i], y[2i+1]
                                       for element position r m + q, i = q n + r */
    unsigned long long *power;      /* [2][CBF_PFB_LTO_SLOTS] */
    unsigned long long pol_elems;   /* spectra x channels */
    int log_ch, log_m, log_n;       /* log2 of channels, of channels / unzip, of unzip */
    int bits, step, row_words;      /* row_words: step x bits / 32, one spectrum's words */
};

/* The callback of `taps` taps is cbf_pfb_lto_load_<taps> (a C++ device
 * function: cuFFT's wrapper declares the name it is given in C++, so the
 * mangled names agree). */
#define CBF_PFB_LTO_SYMBOL_FMT "cbf_pfb_lto_load_%d"

#endif
