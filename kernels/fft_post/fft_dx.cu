/* fft_dx.cu: cuFFTDx block FFTs (fft_dx.h): the fused FFT + post kernel
 * that fft_post's CUDA plan runs where it fits, and the issue 17
 * measurement kernels.
 *
 * Measurement kernels: one kernel template per (size, elements per thread, FFTs per block) and
 * mode. Blocks are persistent (a grid-stride loop over groups of
 * ffts_per_block spectra, as many blocks as fit on the GPU at once), the way
 * a fused kernel would keep per-thread constants (the post's twiddles) in
 * registers across spectra. Thread t holds elements t + i stride of its
 * spectrum (stride = m / ept), cuFFTDx's order for c2c block FFTs in and
 * out, so loads and stores are coalesced 8-byte accesses. In place is
 * allowed (in == out): plain loads, no __restrict__ or read-only path. */
#include "fft_dx.h"

#include "cuda_check.h"
#include "fft_post_dev.cuh"

#include <cuda_runtime.h>
#include <cufftdx.hpp>

#define CUDA_TRY(call) CBF_KERN_CUDA_TRY("fft_dx", call)

namespace {

template <int M>
using dx_desc = decltype(cufftdx::Size<M>() + cufftdx::Precision<float>() +
                         cufftdx::Type<cufftdx::fft_type::c2c>() +
                         cufftdx::Direction<cufftdx::fft_direction::forward>() +
                         cufftdx::SM<900>() + cufftdx::Block());
template <int M, int EPT, int FPB>
using dx_fft = decltype(dx_desc<M>() + cufftdx::ElementsPerThread<EPT>() +
                        cufftdx::FFTsPerBlock<FPB>());

__device__ __forceinline__ unsigned quant8(float v, unsigned *clipped)
{
    int q = __float2int_rn(v);
    if (q > 127 || q < -127) {
        *clipped += 1;
        q = q > 0 ? 127 : -127;
    }
    return (unsigned)q & 0xffu;
}

__device__ __forceinline__ unsigned short pack8(float2 x, float2 g, unsigned *clipped)
{
    x = cmul(x, g);
    return (unsigned short)(quant8(x.x, clipped) | quant8(x.y, clipped) << 8);
}

/* Channels k = s and m - s of a real input of 2m samples from bins s and
 * m - s of its m-point complex transform z (even samples real, odd
 * imaginary), hk = exp(-i pi s / m): fft_post's combine for unzip 1. */
__device__ __forceinline__ void real_pair(float2 zs, float2 zms, float2 hk, float2 *xk,
                                          float2 *xmk)
{
    float2 B = make_float2(zms.x, -zms.y);
    float2 U = make_float2(0.5f * (zs.x + B.x), 0.5f * (zs.y + B.y));
    float2 V = make_float2(0.5f * (zs.y - B.y), -0.5f * (zs.x - B.x));
    float2 tv = cmul(hk, V);
    *xk = make_float2(U.x + tv.x, U.y + tv.y);
    *xmk = make_float2(U.x - tv.x, -U.y + tv.y);
}

template <class FFT, int MODE>
__global__ void __launch_bounds__(FFT::max_threads_per_block)
    dx_kernel(const float2 *in, void *out, long long groups, const float2 *__restrict__ eff,
              unsigned long long *sat)
{
    using ct = typename FFT::value_type;
    constexpr int M = cufftdx::size_of<FFT>::value, EPT = FFT::elements_per_thread;
    constexpr int FPB = FFT::ffts_per_block, S = FFT::stride;
    extern __shared__ __align__(16) unsigned char smem[];
    const int t = threadIdx.x;
    /* POST: each thread's bins s = t + i S, i < EPT / 2, are the same in
     * every spectrum: their twiddles once, in registers. */
    float2 hk[MODE == CBF_FFT_DX_POST ? EPT / 2 : 1];
    if (MODE == CBF_FFT_DX_POST) {
#pragma unroll
        for (int i = 0; i < EPT / 2; i++)
            hk[i] = expi_pi(-(float)(t + i * S) / (float)M);
    }
    unsigned clipped = 0;
    for (long long grp = blockIdx.x; grp < groups; grp += gridDim.x) {
        const long long base = (grp * FPB + threadIdx.y) * M;
        ct r[FFT::storage_size];
#pragma unroll
        for (int i = 0; i < EPT; i++) {
            float2 v = in[base + t + i * S];
            r[i] = ct{v.x, v.y};
        }
        FFT().execute(r, smem);
        if (MODE == CBF_FFT_DX_FFT4) {
#pragma unroll 1
            for (int rep = 1; rep < 4; rep++) {
                __syncthreads();
                FFT().execute(r, smem);
            }
        }
        if (MODE != CBF_FFT_DX_POST) {
            float2 *o = (float2 *)out + base;
#pragma unroll
            for (int i = 0; i < EPT; i++)
                o[t + i * S] = make_float2(r[i].x, r[i].y);
        } else {
            /* Bins s and m - s sit in different threads: through shared
             * memory, which the transform was using until this barrier. */
            float2 *z = (float2 *)smem + threadIdx.y * M;
            __syncthreads();
#pragma unroll
            for (int i = 0; i < EPT; i++)
                z[t + i * S] = make_float2(r[i].x, r[i].y);
            __syncthreads();
            unsigned short *o = (unsigned short *)out + base;
#pragma unroll
            for (int i = 0; i < EPT / 2; i++) {
                const int s = t + i * S;
                float2 xk, xmk;
                real_pair(z[s], z[(M - s) & (M - 1)], hk[i], &xk, &xmk);
                o[s] = pack8(xk, __ldg(eff + s), &clipped);
                if (s > 0)
                    o[M - s] = pack8(xmk, __ldg(eff + M - s), &clipped);
                else {
                    /* Channel m / 2, which no other s reaches. */
                    real_pair(z[M / 2], z[M / 2], make_float2(0.f, -1.f), &xk, &xmk);
                    o[M / 2] = pack8(xk, __ldg(eff + M / 2), &clipped);
                }
            }
        }
        __syncthreads(); /* shared memory free for the next group */
    }
    if (MODE == CBF_FFT_DX_POST) {
        for (int off = 16; off; off >>= 1)
            clipped += __shfl_down_sync(0xffffffffu, clipped, off);
        if ((threadIdx.x & 31) == 0 && clipped)
            atomicAdd(sat, (unsigned long long)clipped);
    }
}

template <class FFT, int MODE>
int launch(const void *in, void *out, size_t spectra, const void *eff, unsigned long long *sat,
           cudaStream_t stream, char *msg, size_t msglen)
{
    constexpr int M = cufftdx::size_of<FFT>::value, FPB = FFT::ffts_per_block;
    constexpr size_t post_smem = (size_t)FPB * M * sizeof(float2);
    const size_t smem = MODE == CBF_FFT_DX_POST && post_smem > FFT::shared_memory_size
                            ? post_smem
                            : FFT::shared_memory_size;
    auto k = dx_kernel<FFT, MODE>;
    const int threads = FFT::block_dim.x * FFT::block_dim.y;
    int dev, sms, per_sm;
    CUDA_TRY(cudaGetDevice(&dev));
    CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CUDA_TRY(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, threads, smem));
    const long long groups = (long long)(spectra / FPB);
    long long grid = (long long)sms * (per_sm > 0 ? per_sm : 1);
    if (grid > groups)
        grid = groups;
    k<<<(unsigned)grid, FFT::block_dim, smem, stream>>>((const float2 *)in, out, groups,
                                                        (const float2 *)eff, sat);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

typedef int (*launch_fn)(const void *, void *, size_t, const void *, unsigned long long *,
                         cudaStream_t, char *, size_t);

template <int M, int EPT, int FPB>
struct entry {
    using F = dx_fft<M, EPT, FPB>;
    static constexpr cbf_fft_dx_variant v = {
        M, EPT, FPB,
        EPT == dx_desc<M>::elements_per_thread && FPB == dx_desc<M>::suggested_ffts_per_block};
    static constexpr launch_fn fn[3] = {launch<F, CBF_FFT_DX_FFT>, launch<F, CBF_FFT_DX_FFT4>,
                                        launch<F, CBF_FFT_DX_POST>};
};

#define ENTRIES(X)                                                                         \
    X(4096, 8, 1) X(4096, 16, 1) X(4096, 16, 2) X(4096, 32, 1) X(8192, 8, 1) X(8192, 16, 1) \
        X(8192, 16, 2) X(8192, 32, 1)
#define VARIANT(m, e, f) entry<m, e, f>::v,
#define LAUNCHERS(m, e, f) {entry<m, e, f>::fn[0], entry<m, e, f>::fn[1], entry<m, e, f>::fn[2]},
const cbf_fft_dx_variant variants[] = {ENTRIES(VARIANT)};
const launch_fn launchers[][3] = {ENTRIES(LAUNCHERS)};
constexpr int n_variants = (int)(sizeof variants / sizeof variants[0]);

/* ---- The fused FFT + post kernel (cbf_fft_dx_post_run) ----
 *
 * Block: one cuFFTDx transform of M = channels points, 16 elements per
 * thread (cuFFTDx's suggestion at 4096; at 8192 it keeps a thread's
 * elements, 32 registers a pol, within the 128 a thread may have), S = M /
 * 16 threads. Thread t holds bins t + i S after the transform; through
 * shared memory z it gets bins M - s for its own s = t + i S, i < 8, and
 * computes channels s ("direct" slot i) and M - s ("mirror" slot 8 + i;
 * thread 0's s = 0 fills it with channel M / 2, which no other s reaches),
 * with fft_post's own combine and finish (fft_post_dev.cuh). A block does
 * G consecutive spectra, both pols each; each thread keeps its 16
 * channels' words (both pols packed) for the G spectra in its own column
 * of shared memory (no barrier needed: nobody else reads it), and stores
 * each channel's G words as one vector: G consecutive spectra of a channel
 * are adjacent in the output. HOLD (measured layouts only): pol 0's halves
 * of the words wait in 8 registers for pol 1's, so each word is one shared
 * store instead of a store, a load and a store (shared-memory traffic
 * limits the kernel, docs/notes/performance-history.md).
 *
 * PF: the two pols of the next spectrum are loaded into registers as soon
 * as the current ones are post-processed, so the loads overlap the other
 * pol's transform and post-processing (64 registers of elements);
 * otherwise each pol is loaded just before its transform (32), leaving
 * registers for more blocks per SM (MINB, the launch bounds' blocks per
 * SM): three blocks of 64 KB at 4096 points and G = 2 measured fastest
 * (docs/notes/performance-history.md). */
constexpr int DXP_EPT = 16;
template <int M>
using dxp_fft = dx_fft<M, DXP_EPT, 1>;

/* z's bytes: the transform's workspace, which z reuses once it is done. */
template <class FFT>
__host__ __device__ constexpr size_t dxp_zbytes()
{
    constexpr size_t z = cufftdx::size_of<FFT>::value * sizeof(float2);
    constexpr size_t w = FFT::shared_memory_size;
    return ((z > w ? z : w) + 15) / 16 * 16;
}

/* What the kernel needs of the run, by value. */
struct dxp_ctx {
    const float2 *data;
    long long pol_stride; /* float2 */
    void *out;
    long long spectra, gain_switch;
    int sph, bits;
    float inv_n_ch;
    const float2 *eff, *sd;
    unsigned long long *sat;
    dither_run dr;
};

template <class FFT>
__device__ __forceinline__ void dxp_load(typename FFT::value_type (&r)[FFT::storage_size],
                                         const float2 *__restrict__ src)
{
#pragma unroll
    for (int i = 0; i < FFT::elements_per_thread; i++) {
        float2 v = __ldg(src + threadIdx.x + i * FFT::stride);
        r[i] = typename FFT::value_type{v.x, v.y};
    }
}

/* With HOLD, pol 0's values of slots i and H + i as the halves of w[i];
 * else a stand-in. */
template <bool HOLD, int H>
struct dxp_acc {
    unsigned w[HOLD ? H : 1];
};

/* One pol of spectrum g (the block's j-th): load `cur` (without PF),
 * transform r, post-process it into the thread's words, then load `next`
 * (with PF; NULL: none) into r. */
template <class FFT, int G, bool ROT, bool DITHER, bool HOLD, bool PF>
__device__ __forceinline__ void dxp_pol(typename FFT::value_type (&r)[FFT::storage_size], int pol,
                                        int j, long long g, const float2 *cur,
                                        const float2 *next, unsigned char *smem, unsigned *tile,
                                        dxp_acc<HOLD, FFT::elements_per_thread / 2> &acc,
                                        const float2 *hk, const dxp_ctx &c, unsigned *sat)
{
    constexpr int M = cufftdx::size_of<FFT>::value, EPT = FFT::elements_per_thread;
    constexpr int S = FFT::stride, H = EPT / 2;
    const int t = threadIdx.x;
    /* z holds the upper half of the bins, bin b at b - M / 2: a thread's
     * own bins s = t + i S (i < H) stay in its registers, and their
     * partners M - s all lie above M / 2 (s = 0's partner is bin 0, thread
     * 0's r[0]; the middle channel's bin M / 2 is thread 0's r[H]). */
    float2 *z = (float2 *)smem;
    if (!PF)
        dxp_load<FFT>(r, cur);
    FFT().execute(r, smem);
    __syncthreads(); /* the workspace becomes z */
#pragma unroll
    for (int i = H; i < EPT; i++)
        z[t + (i - H) * S] = make_float2(r[i].x, r[i].y);
    __syncthreads();
    /* A spectrum takes all its gains from one table (fft_post.cu's rule);
     * the fused plan's tables are [pol][channel]: a warp's gains are 256
     * contiguous bytes. */
    const float2 *eff = c.eff + (g >= c.gain_switch ? 2 * M : 0) + pol * M;
    const float2 dp = ROT ? __ldg(c.sd + pol * c.spectra + g) : make_float2(0.f, 0.f);
    const int shift = pol * (c.bits == 8 ? 16 : 8);
    /* fft_post's post kernel twiddles sub-transform 0 by exp(-0 i) = 1 - 0i
     * first, which changes no value but the sign of a zero: left out. */
#pragma unroll
    for (int i = 0; i < H; i++) {
        const int s = t + i * S;
        float2 zs = make_float2(r[i].x, r[i].y), xk, xnk;
        float2 zc = conj2(s > 0 ? z[M / 2 - s] : zs);
        combine<1>(&zs, &zc, 0, hk[i], &xk, &xnk);
        /* s < M / 2: channels s and M - s are the pair s, one draw (its
         * high half for s, the low half for M - s). */
        const unsigned long long u = DITHER ? dither_draw(c.dr, g, M, s, pol) : 0;
        unsigned w0 = finish(xk, __ldg(eff + s), s, c.bits, sat, ROT, dp, c.inv_n_ch, M / 2,
                             DITHER, (unsigned)(u >> 32)),
                 w1;
        if (s > 0) {
            w1 = finish(xnk, __ldg(eff + M - s), M - s, c.bits, sat, ROT, dp, c.inv_n_ch, M / 2,
                        DITHER, (unsigned)u);
        } else {
            zs = make_float2(r[H].x, r[H].y);
            zc = conj2(zs);
            combine<1>(&zs, &zc, 0, expi_pi(-(float)(M / 2) * c.inv_n_ch), &xk, &xnk);
            /* The middle channel is a pair of one: its own draw. */
            const unsigned long long um = DITHER ? dither_draw(c.dr, g, M, M / 2, pol) : 0;
            w1 = finish(xk, __ldg(eff + M / 2), M / 2, c.bits, sat, ROT, dp, c.inv_n_ch, M / 2,
                        DITHER, (unsigned)(um >> 32));
        }
        unsigned *d = tile + (i * G + j) * S + t, *mi = tile + ((H + i) * G + j) * S + t;
        if constexpr (HOLD) {
            /* A pol's value is at most 16 bits (8-bit output), shift 0. */
            if (pol == 0) {
                acc.w[i] = w0 | w1 << 16;
            } else {
                *d = (acc.w[i] & 0xffffu) | w0 << shift;
                *mi = (acc.w[i] >> 16) | w1 << shift;
            }
        } else {
            *d = (pol ? *d : 0u) | w0 << shift;
            *mi = (pol ? *mi : 0u) | w1 << shift;
        }
    }
    if (PF && next)
        dxp_load<FFT>(r, next);
    __syncthreads(); /* z is the next transform's workspace */
}

/* One channel's G words (both pols each) at output index idx: 4 bytes each
 * for 8-bit output, 2 for 4-bit; idx is a multiple of G, so the vectors
 * are aligned. */
template <int G>
__device__ __forceinline__ void dxp_store(void *out, long long idx, const unsigned *w, int bits)
{
    if (bits == 8) {
        unsigned *o = (unsigned *)out + idx;
        if constexpr (G % 4 == 0) {
#pragma unroll
            for (int q = 0; q < G / 4; q++)
                ((uint4 *)o)[q] = make_uint4(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]);
        } else if constexpr (G == 2) {
            *(uint2 *)o = make_uint2(w[0], w[1]);
        } else {
            o[0] = w[0];
        }
    } else {
        unsigned short *o = (unsigned short *)out + idx;
        if constexpr (G % 8 == 0) {
#pragma unroll
            for (int q = 0; q < G / 8; q++)
                ((uint4 *)o)[q] = make_uint4(w[8 * q] | w[8 * q + 1] << 16,
                                             w[8 * q + 2] | w[8 * q + 3] << 16,
                                             w[8 * q + 4] | w[8 * q + 5] << 16,
                                             w[8 * q + 6] | w[8 * q + 7] << 16);
        } else if constexpr (G == 4) {
            *(uint2 *)o = make_uint2(w[0] | w[1] << 16, w[2] | w[3] << 16);
        } else if constexpr (G == 2) {
            *(unsigned *)o = w[0] | w[1] << 16;
        } else {
            o[0] = (unsigned short)w[0];
        }
    }
}

template <class FFT, int G, bool ROT, bool DITHER, bool HOLD, bool PF, int MINB>
__global__ void __launch_bounds__(FFT::max_threads_per_block, MINB) dxp_kernel(const dxp_ctx c)
{
    constexpr int M = cufftdx::size_of<FFT>::value, EPT = FFT::elements_per_thread;
    constexpr int S = FFT::stride, H = EPT / 2;
    extern __shared__ __align__(16) unsigned char smem[];
    unsigned *tile = (unsigned *)(smem + dxp_zbytes<FFT>());
    const int t = threadIdx.x;
    /* A thread's bins s are the same in every spectrum: twiddles once, as
     * fft_post's post kernel computes them. */
    float2 hk[H];
#pragma unroll
    for (int i = 0; i < H; i++)
        hk[i] = expi_pi(-(float)(t + i * S) * c.inv_n_ch);
    unsigned sat0 = 0, sat1 = 0;
    const long long g0 = (long long)blockIdx.x * G;
    dxp_acc<HOLD, H> acc;
    typename FFT::value_type a[FFT::storage_size], b[PF ? FFT::storage_size : 1];
    if constexpr (PF) {
        dxp_load<FFT>(a, c.data + g0 * M);
        dxp_load<FFT>(b, c.data + c.pol_stride + g0 * M);
    }
#pragma unroll 1
    for (int j = 0; j < G; j++) {
        const long long g = g0 + j;
        const bool more = j + 1 < G;
        const float2 *p0 = c.data + g * M, *p1 = c.data + c.pol_stride + g * M;
        dxp_pol<FFT, G, ROT, DITHER, HOLD, PF>(a, 0, j, g, p0, more ? p0 + M : nullptr, smem,
                                               tile, acc, hk, c, &sat0);
        if constexpr (PF)
            dxp_pol<FFT, G, ROT, DITHER, HOLD, PF>(b, 1, j, g, p1, more ? p1 + M : nullptr, smem,
                                                   tile, acc, hk, c, &sat1);
        else
            dxp_pol<FFT, G, ROT, DITHER, HOLD, PF>(a, 1, j, g, p1, nullptr, smem, tile, acc, hk,
                                                   c, &sat1);
    }
    /* G divides spectra_per_heap: the block's spectra share one heap. */
    const long long heap = g0 / c.sph, first = g0 % c.sph;
#pragma unroll
    for (int slot = 0; slot < EPT; slot++) {
        const int s = t + (slot % H) * S;
        const int ch = slot < H ? s : s == 0 ? M / 2 : M - s;
        unsigned w[G];
#pragma unroll
        for (int j = 0; j < G; j++)
            w[j] = tile[(slot * G + j) * S + t];
        dxp_store<G>(c.out, (heap * M + ch) * c.sph + first, w, c.bits);
    }
    for (int pol = 0; pol < 2; pol++) {
        unsigned v = pol ? sat1 : sat0;
        for (int off = 16; off; off >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, off);
        if ((t & 31) == 0 && v)
            atomicAdd(c.sat + pol, (unsigned long long)v);
    }
}

template <int M, int G, bool ROT, bool DITHER, bool HOLD, bool PF, int MINB>
int dxp_launch(const dxp_ctx &c, cudaStream_t stream, char *msg, size_t msglen)
{
    using FFT = dxp_fft<M>;
    const size_t smem = dxp_zbytes<FFT>() + (size_t)M * G * sizeof(unsigned);
    auto k = dxp_kernel<FFT, G, ROT, DITHER, HOLD, PF, MINB>;
    CUDA_TRY(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    k<<<(unsigned)(c.spectra / G), FFT::block_dim, smem, stream>>>(c);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

typedef int (*dxp_fn)(const dxp_ctx &, cudaStream_t, char *, size_t);
struct dxp_entry {
    cbf_fft_dx_post_variant v;
    int rot, dither;
    dxp_fn fn;
};
/* The engine's kernels: every delay-model and dither template of the
 * chosen layout, per group size (the largest of them dividing
 * spectra_per_heap, at most dxp_group's, runs). Shared memory per block: z
 * (the transform's workspace, M x 8 bytes) and the words (M x G x 4): at
 * 4096 points and G = 2, 64 KB, three blocks per SM (80 registers); at
 * 8192 and G = 4, 192 KB, one 512-thread block. */
#define DXP_K(m, g, hold, pf, minb, rot, dith)                                               \
    {{m, g, hold, pf, minb}, rot, dith, dxp_launch<m, g, rot, dith, hold, pf, minb>}
#define DXP_MODES(m, g, hold, pf, minb)                                                      \
    DXP_K(m, g, hold, pf, minb, false, false), DXP_K(m, g, hold, pf, minb, false, true),     \
        DXP_K(m, g, hold, pf, minb, true, false), DXP_K(m, g, hold, pf, minb, true, true),
#define DXP_ENGINE_4096(g) DXP_MODES(4096, g, false, false, 3)
#define DXP_ENGINE_8192(g) DXP_MODES(8192, g, false, false, 1)
const dxp_entry dxp_engine[] = {DXP_ENGINE_4096(1) DXP_ENGINE_4096(2) DXP_ENGINE_8192(1)
                                    DXP_ENGINE_8192(2) DXP_ENGINE_8192(4)};
/* Layouts measured against each other (cbf-bench feng --dx-variants, rows
 * "dx g..."): plain runs only (no delay model, no dither). HOLD passed the
 * tests as the engine's layout but has not been timed yet (80 registers
 * leave it 52 bytes of spills at 4096). */
const dxp_entry dxp_measured[] = {
    DXP_K(4096, 2, true, false, 3, false, false), DXP_K(4096, 2, false, false, 3, false, false),
    DXP_K(8192, 4, true, false, 1, false, false), DXP_K(8192, 4, false, false, 1, false, false),
};
#undef DXP_ENGINE_4096
#undef DXP_ENGINE_8192
#undef DXP_MODES
#undef DXP_K
constexpr int n_engine = (int)(sizeof dxp_engine / sizeof dxp_engine[0]);
constexpr int n_measured = (int)(sizeof dxp_measured / sizeof dxp_measured[0]);
cbf_fft_dx_post_variant dxp_measured_v[n_measured];

/* The group the engine uses where spectra_per_heap allows. */
int dxp_group(int m)
{
    return m == 4096 ? 2 : 4;
}

} // namespace

extern "C" int cbf_fft_dx_post_check(int channels, int unzip, int complex_in, char *msg,
                                     size_t msglen)
{
    if (complex_in || unzip != 1 || (channels != 4096 && channels != 8192))
        return cbf_kern_fail(msg, msglen, CBF_KERN_ENOTSUP,
                             "fft_dx: the fused FFT + post kernel does wideband unzip 1 at 4096 "
                             "and 8192 channels (asked: %s, unzip %d, %d channels)",
                             complex_in ? "narrowband" : "wideband", unzip, channels);
    int dev, major, minor;
    CUDA_TRY(cudaGetDevice(&dev));
    CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    CUDA_TRY(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    if (major != 9 || minor != 0)
        return cbf_kern_fail(msg, msglen, CBF_KERN_ENOTSUP,
                             "fft_dx: the fused kernel is built for sm_90a only (this GPU: "
                             "sm_%d%d)",
                             major, minor);
    return 0;
}

extern "C" int cbf_fft_dx_post_variants(const cbf_fft_dx_post_variant **v)
{
    for (int i = 0; i < n_measured; i++)
        dxp_measured_v[i] = dxp_measured[i].v;
    *v = dxp_measured_v;
    return n_measured;
}

extern "C" int cbf_fft_dx_post_run(const cbf_fft_dx_post *p, void *stream, char *msg,
                                   size_t msglen)
{
    const int m = p->channels;
    int rc = cbf_fft_dx_post_check(m, 1, 0, msg, msglen);
    if (rc)
        return rc;
    const int rot = p->spectrum_delay != NULL, dither = p->dither != 0;
    if (p->spectra_per_heap <= 0 || p->spectra % (size_t)p->spectra_per_heap ||
        p->data_pol_stride % 2 || p->data_pol_stride < p->spectra * 2 * (size_t)m ||
        (p->out_bits != 8 && p->out_bits != 4) || !p->eff || !p->sat ||
        p->variant >= n_measured ||
        (p->variant >= 0 && (rot || dither || dxp_measured[p->variant].v.points != m ||
                             p->spectra_per_heap % dxp_measured[p->variant].v.group)))
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "fft_dx: bad fused post arguments");
    const dxp_entry *e = p->variant >= 0 ? &dxp_measured[p->variant] : NULL;
    int group = dxp_group(m);
    while (p->spectra_per_heap % group)
        group /= 2;
    for (int i = 0; i < n_engine && !e; i++)
        if (dxp_engine[i].v.points == m && dxp_engine[i].v.group == group &&
            dxp_engine[i].rot == rot && dxp_engine[i].dither == dither)
            e = &dxp_engine[i];
    if (!e)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "fft_dx: no kernel for group %d",
                             group);
    const dxp_ctx c = {(const float2 *)p->data,
                       (long long)(p->data_pol_stride / 2),
                       p->out,
                       (long long)p->spectra,
                       p->gain_switch,
                       p->spectra_per_heap,
                       p->out_bits,
                       1.0f / (float)m,
                       (const float2 *)p->eff,
                       (const float2 *)p->spectrum_delay,
                       p->sat,
                       {p->dither, p->dither_antenna, (unsigned long long)p->dither_key,
                        (unsigned long long)p->first_spectrum}};
    return e->fn(c, (cudaStream_t)stream, msg, msglen);
}

extern "C" int cbf_fft_dx_variants(const cbf_fft_dx_variant **v)
{
    *v = variants;
    return n_variants;
}

extern "C" int cbf_fft_dx_run(int v, cbf_fft_dx_mode mode, const void *in, void *out,
                              size_t spectra, const void *eff, unsigned long long *sat,
                              void *stream, char *msg, size_t msglen)
{
    if (v < 0 || v >= n_variants || (unsigned)mode > CBF_FFT_DX_POST ||
        spectra % (size_t)variants[v].ffts_per_block ||
        (mode == CBF_FFT_DX_POST && (!eff || !sat)))
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "fft_dx: bad arguments");
    int dev, major;
    CUDA_TRY(cudaGetDevice(&dev));
    CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    if (major != 9)
        return cbf_kern_fail(msg, msglen, CBF_KERN_ENOTSUP,
                             "fft_dx: built for sm_90a only (this GPU: sm_%d)", major);
    return launchers[v][mode](in, out, spectra, eff, sat, (cudaStream_t)stream, msg, msglen);
}
