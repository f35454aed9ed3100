/* pfb_lto_cb.cu: the FIR as cuFFT's load callback, compiled to LTO-IR
 * (nvcc -dc -dlto, meson's pfb_lto_fatbin target) and linked into cuFFT's
 * transform kernel when the plan is made (pfb_lto.cu). Never compiled into
 * the library as machine code.
 *
 * cuFFT asks for input element e of the batch (both pols, pfb_lto.h) once;
 * the callback computes it from the packed samples: element e is complex
 * position r m + q of sub-transform r of spectrum s, which holds
 * z[i] = y[2i] + i y[2i+1] with i = q n + r (pfb.h's unzipped order), and
 * each y[j] = sum_t w[t step + j] x[start + s step + t step + j] is summed
 * in fir_kernel's order (one fmaf per tap from t = 0, starting at 0), so
 * the transform's input is bit for bit the four-pass FIR's output. The
 * weights are stored in element order (pfb_lto.h), so a warp's
 * neighbouring elements read neighbouring float2 at every unzip.
 *
 * The two samples 2i, 2i+1 (2 x bits <= 32 bits) sit together in the
 * stream: two aligned 32-bit words hold them at the same bit offset in
 * every tap's row (step x bits is a multiple of 32), and one funnel shift
 * brings them to the top of a word. Both weights are one float2 load. All
 * of a call's loads are issued before its arithmetic.
 *
 * Digitiser power (pfb.h: the first step samples of each window, i.e. the
 * t = 0 samples of every element, each once): summed over the warp's
 * active lanes and added by one lane per warp and pol to a slot picked by
 * SM and warp (CBF_PFB_LTO_SLOTS), 16-bit halves summed apart so 32 lanes
 * of 16-bit samples cannot overflow 32 bits. */
#include <cufftXt.h>

#include "pfb_lto.h"

__device__ __forceinline__ unsigned be32(unsigned w) { return __byte_perm(w, 0, 0x0123); }

__device__ __forceinline__ void add_power(const cbf_pfb_lto_params *p, int pol, unsigned pw)
{
    const unsigned mask = __activemask();
    const unsigned lo = pw & 0xffffu, hi = pw >> 16;
    unsigned s[4];
    s[0] = __reduce_add_sync(mask, pol ? 0u : lo);
    s[1] = __reduce_add_sync(mask, pol ? 0u : hi);
    s[2] = __reduce_add_sync(mask, pol ? lo : 0u);
    s[3] = __reduce_add_sync(mask, pol ? hi : 0u);
    unsigned lane, sm, warp;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    if (lane != (unsigned)(__ffs(mask) - 1))
        return;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    asm volatile("mov.u32 %0, %%warpid;" : "=r"(warp));
    const unsigned slot = (sm * 8 + (warp & 7)) & (CBF_PFB_LTO_SLOTS - 1);
    for (int q = 0; q < 2; q++) {
        unsigned long long v = ((unsigned long long)s[2 * q + 1] << 16) + s[2 * q];
        if (v)
            atomicAdd(p->power + q * CBF_PFB_LTO_SLOTS + slot, v);
    }
}

/* G: taps whose loads are issued together. G = TAPS issues all 3 x TAPS
 * loads of a call before its arithmetic (the most in flight, the most
 * registers); smaller G walks the taps in groups, a rolled loop, so the
 * callback holds fewer registers where cuFFT calls it as a function. */
template <int TAPS, int G>
__device__ __forceinline__ cufftComplex fir_load(unsigned long long e, const cbf_pfb_lto_params *p)
{
    const int pol = e >= p->pol_elems;
    if (pol)
        e -= p->pol_elems;
    const long long s = (long long)(e >> p->log_ch);
    const int pos = (int)(e & ((1ull << p->log_ch) - 1));
    const int r = pos >> p->log_m, q = pos & ((1 << p->log_m) - 1);
    const int j0 = 2 * ((q << p->log_n) + r);
    const long long bit = p->first_bit[pol] + (s * p->step + j0) * p->bits;
    const unsigned *src = p->in[pol] + (bit >> 5);
    const int off = (int)(bit & 31), bits = p->bits;
    const float2 *w = reinterpret_cast<const float2 *>(p->w) + pos;
    const int wstep = 1 << p->log_ch, row = p->row_words;
    /* Samples to float without I2F (a quarter-rate instruction): the
     * field u, its sign bit flipped, below the mantissa of 2^23 is
     * 2^23 + (u ^ sb) exactly; subtracting 2^23 + sb leaves the signed
     * value, the same float as (float)a. */
    const unsigned sb = 1u << (bits - 1), mask = (sb << 1) - 1, key = 0x4b000000u | sb;
    const float bias = __uint_as_float(key);
    float re = 0.0f, im = 0.0f;
    unsigned pw = 0;
#pragma unroll 1
    for (int t0 = 0; t0 < TAPS; t0 += G) {
        unsigned lo[G], hi[G];
        float2 wt[G];
#pragma unroll
        for (int g = 0; g < G; g++) {
            if (TAPS % G && t0 + g >= TAPS)
                break;
            hi[g] = __ldg(src + (t0 + g) * row);
            lo[g] = __ldg(src + (t0 + g) * row + 1);
            wt[g] = __ldg(w + (t0 + g) * wstep);
        }
#pragma unroll
        for (int g = 0; g < G; g++) {
            if (TAPS % G && t0 + g >= TAPS)
                break;
            const unsigned top = __funnelshift_l(be32(lo[g]), be32(hi[g]), off);
            const float a = __uint_as_float((top >> (32 - bits)) ^ key) - bias;
            const float b = __uint_as_float(((top >> (32 - 2 * bits)) & mask) ^ key) - bias;
            if (t0 + g == 0) {
                const int ia = (int)a, ib = (int)b;
                pw = (unsigned)(ia * ia) + (unsigned)(ib * ib);
            }
            re = fmaf(wt[g].x, a, re);
            im = fmaf(wt[g].y, b, im);
        }
    }
    add_power(p, pol, pw);
    return make_float2(re, im);
}

/* The entry points, one per tap count (pfb_lto.h's CBF_PFB_LTO_SYMBOL_FMT),
 * with the signature cuFFT's wrapper declares for a complex load. */
#define CBF_PFB_LTO_LOAD(NAME, T, G)                                                         \
    __device__ cufftComplex NAME(void *data, unsigned long long e, void *info, void *shared)   \
    {                                                                                        \
        (void)data;                                                                          \
        (void)shared;                                                                        \
        return fir_load<T, G>(e, static_cast<const cbf_pfb_lto_params *>(info));            \
    }
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_1, 1, 1)
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_2, 2, 2)
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_3, 3, 3)
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_4, 4, 4)
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_5, 5, 5)
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_6, 6, 6)
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_7, 7, 7)
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_8, 8, 8)
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_9, 9, 9)
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_10, 10, 10)
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_11, 11, 11)
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_12, 12, 12)
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_13, 13, 13)
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_14, 14, 14)
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_15, 15, 15)
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_16, 16, 16)
/* Measurement variants of 16 taps in groups of 8, 4 and 1 (pfb_lto.h). */
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_16_g8, 16, 8)
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_16_g4, 16, 4)
CBF_PFB_LTO_LOAD(cbf_pfb_lto_load_16_g1, 16, 1)
#undef CBF_PFB_LTO_LOAD
