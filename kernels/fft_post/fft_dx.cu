/* fft_dx.cu: cuFFTDx block FFTs for the issue 17 measurement (fft_dx.h).
 *
 * One kernel template per (size, elements per thread, FFTs per block) and
 * mode. Blocks are persistent (a grid-stride loop over groups of
 * ffts_per_block spectra, as many blocks as fit on the GPU at once), the way
 * a fused kernel would keep per-thread constants (the post's twiddles) in
 * registers across spectra. Thread t holds elements t + i stride of its
 * spectrum (stride = m / ept), cuFFTDx's order for c2c block FFTs in and
 * out, so loads and stores are coalesced 8-byte accesses. In place is
 * allowed (in == out): plain loads, no __restrict__ or read-only path. */
#include "fft_dx.h"

#include "cbf_cplx.h"
#include "cuda_check.h"

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

} // namespace

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
