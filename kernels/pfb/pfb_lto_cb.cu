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

template <int TAPS>
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
    unsigned lo[TAPS], hi[TAPS];
    float2 wt[TAPS];
#pragma unroll
    for (int t = 0; t < TAPS; t++) {
        hi[t] = __ldg(src + t * row);
        lo[t] = __ldg(src + t * row + 1);
        wt[t] = __ldg(w + t * wstep);
    }
    /* Samples to float without I2F (a quarter-rate instruction): the
     * field u, its sign bit flipped, below the mantissa of 2^23 is
     * 2^23 + (u ^ sb) exactly; subtracting 2^23 + sb leaves the signed
     * value, the same float as (float)a. */
    const unsigned sb = 1u << (bits - 1), mask = (sb << 1) - 1, key = 0x4b000000u | sb;
    const float bias = __uint_as_float(key);
    float re = 0.0f, im = 0.0f;
    unsigned pw = 0;
#pragma unroll
    for (int t = 0; t < TAPS; t++) {
        const unsigned top = __funnelshift_l(be32(lo[t]), be32(hi[t]), off);
        const float a = __uint_as_float((top >> (32 - bits)) ^ key) - bias;
        const float b = __uint_as_float(((top >> (32 - 2 * bits)) & mask) ^ key) - bias;
        if (t == 0) {
            const int ia = (int)a, ib = (int)b;
            pw = (unsigned)(ia * ia) + (unsigned)(ib * ib);
        }
        re = fmaf(wt[t].x, a, re);
        im = fmaf(wt[t].y, b, im);
    }
    add_power(p, pol, pw);
    return make_float2(re, im);
}

/* The entry points, one per tap count (pfb_lto.h's CBF_PFB_LTO_SYMBOL_FMT),
 * with the signature cuFFT's wrapper declares for a complex load. */
#define CBF_PFB_LTO_LOAD(T)                                                                  \
    __device__ cufftComplex cbf_pfb_lto_load_##T(void *data, unsigned long long e, void *info, \
                                                 void *shared)                               \
    {                                                                                        \
        (void)data;                                                                          \
        (void)shared;                                                                        \
        return fir_load<T>(e, static_cast<const cbf_pfb_lto_params *>(info));               \
    }
CBF_PFB_LTO_LOAD(1)
CBF_PFB_LTO_LOAD(2)
CBF_PFB_LTO_LOAD(3)
CBF_PFB_LTO_LOAD(4)
CBF_PFB_LTO_LOAD(5)
CBF_PFB_LTO_LOAD(6)
CBF_PFB_LTO_LOAD(7)
CBF_PFB_LTO_LOAD(8)
CBF_PFB_LTO_LOAD(9)
CBF_PFB_LTO_LOAD(10)
CBF_PFB_LTO_LOAD(11)
CBF_PFB_LTO_LOAD(12)
CBF_PFB_LTO_LOAD(13)
CBF_PFB_LTO_LOAD(14)
CBF_PFB_LTO_LOAD(15)
CBF_PFB_LTO_LOAD(16)
#undef CBF_PFB_LTO_LOAD
