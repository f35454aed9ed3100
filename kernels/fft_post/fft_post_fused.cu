/* fft_post_fused.cu: the wideband transform and post-processing in one
 * kernel, so the FIR output is read once and the spectrum never goes back
 * to device memory (fft_post.h, CBF_FFT_POST_FUSED_MAX_POINTS).
 *
 * A block holds one sub-transform (m = channels / unzip points) of one
 * spectrum, both pols, in shared memory and transforms it there. Blocks
 * work in clusters of 8 = n sub-transforms x 8 / n consecutive spectra:
 * after the transforms, each block of the cluster post-processes a share of
 * the cluster's (bin, spectrum) pairs, reading the n sub-transforms' bins
 * from their blocks through distributed shared memory. Neighbouring lanes
 * take neighbouring spectra of one channel, so the output (channel-major,
 * spectra within a heap contiguous) leaves in runs of 8 / n x 4 bytes
 * rather than as scattered words. */
#include "fft_post_dev.cuh"

#include <cooperative_groups.h>

namespace cg = cooperative_groups;

#define CLUSTER 8

/* Forward radix-4 butterfly in place. */
__device__ __forceinline__ void dft4(float2 &a0, float2 &a1, float2 &a2, float2 &a3)
{
    const float2 t0 = make_float2(a0.x + a2.x, a0.y + a2.y);
    const float2 t1 = make_float2(a0.x - a2.x, a0.y - a2.y);
    const float2 t2 = make_float2(a1.x + a3.x, a1.y + a3.y);
    const float2 t3 = make_float2(a1.x - a3.x, a1.y - a3.y);
    a0 = make_float2(t0.x + t2.x, t0.y + t2.y);
    a2 = make_float2(t0.x - t2.x, t0.y - t2.y);
    a1 = make_float2(t1.x + t3.y, t1.y - t3.x); /* t1 - i t3 */
    a3 = make_float2(t1.x - t3.y, t1.y + t3.x); /* t1 + i t3 */
}

/* v x exp(-2 pi i e / 16) for a compile-time e in 0..9: the trivial and
 * the 45-degree ones without a full multiply. */
__device__ __forceinline__ float2 w16(float2 v, int e)
{
    const float c = 0.70710678118654752f;
    const float c1 = 0.92387953251128674f, s1 = 0.38268343236508977f;
    switch (e) {
    case 0: return v;
    case 2: return make_float2(c * (v.x + v.y), c * (v.y - v.x));
    case 4: return make_float2(v.y, -v.x);
    case 6: return make_float2(c * (v.y - v.x), -c * (v.x + v.y));
    case 1: return cmul(v, make_float2(c1, -s1));
    case 3: return cmul(v, make_float2(s1, -c1));
    default: return cmul(v, make_float2(-c1, s1)); /* 9 */
    }
}

/* In-register forward DFTs of R = 16, 8, 4, 2 points, as 4 x 4 and 2 x 4
 * (n = 4 n2 + n1 or 2 n2 + n1, k = k1 + 4 k2): output X[k] is left in slot
 * slot_of<R>(k). */
template <int R> __device__ __forceinline__ int slot_of(int k)
{
    return R == 16 ? 4 * (k & 3) + (k >> 2) : R == 8 ? 2 * (k & 3) + (k >> 2) : k;
}

template <int R> __device__ __forceinline__ void dft(float2 *v)
{
    if constexpr (R == 16) {
#pragma unroll
        for (int n1 = 0; n1 < 4; n1++) {
            dft4(v[n1], v[n1 + 4], v[n1 + 8], v[n1 + 12]);
#pragma unroll
            for (int k1 = 1; k1 < 4; k1++)
                v[n1 + 4 * k1] = w16(v[n1 + 4 * k1], n1 * k1);
        }
#pragma unroll
        for (int k1 = 0; k1 < 4; k1++)
            dft4(v[4 * k1], v[4 * k1 + 1], v[4 * k1 + 2], v[4 * k1 + 3]);
    } else if constexpr (R == 8) {
#pragma unroll
        for (int n1 = 0; n1 < 2; n1++) {
            dft4(v[n1], v[n1 + 2], v[n1 + 4], v[n1 + 6]);
#pragma unroll
            for (int k1 = 1; k1 < 4; k1++)
                v[n1 + 2 * k1] = w16(v[n1 + 2 * k1], 2 * n1 * k1); /* W8^(n1 k1) */
        }
#pragma unroll
        for (int k1 = 0; k1 < 4; k1++) {
            const float2 a = v[2 * k1], b = v[2 * k1 + 1];
            v[2 * k1] = make_float2(a.x + b.x, a.y + b.y);
            v[2 * k1 + 1] = make_float2(a.x - b.x, a.y - b.y);
        }
    } else if constexpr (R == 4) {
        dft4(v[0], v[1], v[2], v[3]);
    } else {
        const float2 a = v[0], b = v[1];
        v[0] = make_float2(a.x + b.x, a.y + b.y);
        v[1] = make_float2(a.x - b.x, a.y - b.y);
    }
}

/* Shared-memory index of element i: its low 4 bits flipped by the next 4,
 * so the radix-16 stores (runs of 1, 16, ... elements, R x ns apart) fall
 * in different banks, while any 16 consecutive elements aligned to 16 stay
 * a permutation of one 128-byte row. */
__device__ __forceinline__ int sw(int i) { return i ^ ((i >> 4) & 15); }

/* One Stockham pass of radix R over both pols' m-point transforms in x:
 * butterfly j (of m / R per pol) reads x[j + r m / R], twiddles them by
 * exp(-2 pi i k0 r / (R ns)), k0 = j mod ns, and writes X[k] to
 * (j / ns) R ns + k0 + k ns. It writes elsewhere than it reads, so each
 * thread holds its butterflies (16 / R of them: blockDim.x >= m / 8) across
 * a barrier. tw: this pass's twiddles, [(r - 1) ns + k0], contiguous along
 * the lanes. */
template <int R, bool FIRST = false>
__device__ __forceinline__ void fft_pass(float2 *x, int m, int log_ns,
                                         const float2 *__restrict__ tw)
{
    constexpr int U = 16 / R, LOG_R = R == 16 ? 4 : R == 8 ? 3 : R == 4 ? 2 : 1;
    const int q = m / R, ns = 1 << log_ns, T = blockDim.x, tid = threadIdx.x;
    float2 v[U][R];
    int dst[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        const int b = tid + u * T; /* butterfly: pol b / q, index j */
        dst[u] = -1;
        if (b < 2 * q) {
            const int pol = b >= q, j = b - pol * q, k0 = j & (ns - 1), xp = pol * m + j;
            v[u][0] = x[sw(xp)];
#pragma unroll
            for (int r = 1; r < R; r++)
                v[u][r] = FIRST ? x[sw(xp + r * q)] /* ns = 1: all twiddles 1 */
                                : cmul(x[sw(xp + r * q)], __ldg(tw + (r - 1) * ns + k0));
            dft<R>(v[u]);
            dst[u] = pol * m + ((j >> log_ns) << (log_ns + LOG_R)) + k0;
        }
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < U; u++) {
        if (dst[u] < 0)
            continue;
#pragma unroll
        for (int k = 0; k < R; k++)
            x[sw(dst[u] + k * ns)] = v[u][slot_of<R>(k)];
    }
    __syncthreads();
}

/* Forward m-point transforms of x[0, m) and x[m, 2m) (the two pols), in
 * place (through sw), natural order in and out: radix-16 passes, then one
 * pass of radix 2, 4 or 8 for what log2 m leaves. The twiddle table follows
 * the passes (cbf_fft_post_fused_twiddles). */
__device__ __forceinline__ void fft_shared(float2 *x, int log_m, const float2 *__restrict__ tw)
{
    const int m = 1 << log_m;
    fft_pass<16, true>(x, m, 0, tw); /* m >= 32 */
    tw += 15;
    int log_ns = 4;
    for (; log_ns + 4 <= log_m; log_ns += 4) {
        fft_pass<16>(x, m, log_ns, tw);
        tw += 15 << log_ns;
    }
    switch (log_m - log_ns) {
    case 1: fft_pass<2>(x, m, log_ns, tw); break;
    case 2: fft_pass<4>(x, m, log_ns, tw); break;
    case 3: fft_pass<8>(x, m, log_ns, tw); break;
    default: break;
    }
}

/* Output words of spectra g0 .. g0 + JS - 1 of channel k (packed as
 * post_kernel packs them: both pols in 32 bits for 8-bit output, 16 for
 * 4-bit): one vector store when the run lies in one heap (then it is
 * contiguous and aligned: g0 is a multiple of JS), else word by word,
 * leaving out spectra past the run's last. */
template <int JS>
__device__ __forceinline__ void put_run(void *out, int bits, int N, int sph, long long spectra,
                                        long long g0, int k, const unsigned *w)
{
    if (sph % JS == 0 && g0 + JS <= spectra) {
        const long long e = (g0 / sph * N + k) * sph + g0 % sph;
        if (bits == 8) {
            unsigned *o = (unsigned *)out + e;
            if constexpr (JS == 4)
                *(uint4 *)o = make_uint4(w[0], w[1], w[2], w[3]);
            else if constexpr (JS == 2)
                *(uint2 *)o = make_uint2(w[0], w[1]);
            else
                *o = w[0];
        } else {
            unsigned short *o = (unsigned short *)out + e;
            if constexpr (JS == 4)
                *(uint2 *)o = make_uint2(w[0] | w[1] << 16, w[2] | w[3] << 16);
            else if constexpr (JS == 2)
                *(unsigned *)o = w[0] | w[1] << 16;
            else
                *o = (unsigned short)w[0];
        }
        return;
    }
#pragma unroll
    for (int jj = 0; jj < JS; jj++) {
        const long long g = g0 + jj;
        if (g >= spectra)
            break;
        const long long e = (g / sph * N + k) * sph + g % sph;
        if (bits == 8)
            ((unsigned *)out)[e] = w[jj];
        else
            ((unsigned short *)out)[e] = (unsigned short)w[jj];
    }
}

template <int N_UNZIP, bool ROT, bool DITHER>
__global__ void __launch_bounds__(1024, 1) fused_kernel(fused_launch a, int log_m)
{
#if __CUDA_ARCH__ >= 900
    extern __shared__ float2 x[]; /* [pol][m], through sw */
    constexpr int S = CLUSTER / N_UNZIP; /* spectra per cluster */
    /* Threads per bin s in post (each with JS of the S spectra): two where
     * that leaves runs of 2 or 4 spectra, so all m / 8 threads have work. */
    constexpr int SPLIT = S >= 4 ? 2 : 1, JS = S / SPLIT;
    cg::cluster_group cl = cg::this_cluster();
    const int m = 1 << log_m, half = m >> 1, N = a.channels, kc = N / 2;
    const int T = blockDim.x, tid = threadIdx.x, rank = (int)cl.block_rank();
    const long long g_block = blockIdx.x / N_UNZIP, g_first = g_block - rank / N_UNZIP;
    const float inv_n_ch = 1.0f / (float)N;

    /* Load (sub-transform rank % n of spectrum g_block, both pols) and
     * transform; a block past the last spectrum only keeps the cluster's
     * barriers. */
    if (g_block < a.spectra) {
        const int r = rank % N_UNZIP;
        for (int pol = 0; pol < 2; pol++) {
            const float2 *z = a.data + pol * a.pol_stride + g_block * N + r * m;
#pragma unroll 4
            for (int i = tid; i < m; i += T)
                x[sw(pol * m + i)] = __ldg(z + i);
        }
        __syncthreads();
        fft_shared(x, log_m, a.tw);
    }
    cl.sync();

    /* Post: each block takes half / 8 of the bins s, for all S spectra of
     * the cluster; the twiddles of s are computed once for its JS spectra,
     * whose words of a channel are contiguous in the output. Spectrum j's
     * sub-transform r is in the cluster's block j n + r. */
    unsigned sat0 = 0, sat1 = 0;
    const int per = half / CLUSTER;
    const int bits = a.bits, shift8 = bits == 8 ? 16 : 8;
    for (int it = tid; it < per * SPLIT; it += T) {
        const int s = rank * per + it / SPLIT, j0 = it % SPLIT * JS;
        float2 twr[N_UNZIP], hk[N_UNZIP];
#pragma unroll
        for (int r = 0; r < N_UNZIP; r++) {
            twr[r] = expi_pi(-2.0f * (float)(r * s) * inv_n_ch);
            hk[r] = expi_pi(-(float)(r * m + s) * inv_n_ch);
        }
        unsigned direct[N_UNZIP][JS], mirror[N_UNZIP][JS];
#pragma unroll
        for (int jj = 0; jj < JS; jj++) {
            const long long g = g_first + j0 + jj;
#pragma unroll
            for (int p = 0; p < N_UNZIP; p++)
                direct[p][jj] = mirror[p][jj] = 0;
            if (g >= a.spectra)
                continue;
            const float2 *eff = a.eff + (g >= a.gain_switch ? 2 * N : 0);
            const int home = (j0 + jj) * N_UNZIP;
#pragma unroll 1
            for (int pol = 0; pol < 2; pol++) {
                const float2 dp = ROT ? __ldg(a.sd + pol * a.spectra + g) : make_float2(0.f, 0.f);
                unsigned ps = 0;
                float2 zs[N_UNZIP], zc[N_UNZIP];
#pragma unroll
                for (int r = 0; r < N_UNZIP; r++) {
                    const float2 *z = cl.map_shared_rank(x, home + r);
                    zs[r] = z[sw(pol * m + s)];
                    zc[r] = conj2(z[sw(pol * m + ((m - s) & (m - 1)))]);
                    if (r > 0) { /* r = 0's twiddle is exactly 1 */
                        zs[r] = cmul(twr[r], zs[r]);
                        zc[r] = cmul(twr[r], zc[r]);
                    }
                }
#pragma unroll
                for (int p = 0; p < N_UNZIP; p++) {
                    float2 xk, xnk;
                    const int k = p * m + s;
                    combine<N_UNZIP>(zs, zc, p, hk[p], &xk, &xnk);
                    direct[p][jj] |= finish(xk, k, pol, eff, bits, &ps, ROT, dp, inv_n_ch, kc,
                                            DITHER, a.dr, g, N)
                                     << (pol * shift8);
                    if (s > 0)
                        mirror[p][jj] |= finish(xnk, N - k, pol, eff, bits, &ps, ROT, dp,
                                                inv_n_ch, kc, DITHER, a.dr, g, N)
                                         << (pol * shift8);
                }
                sat0 += pol ? 0 : ps;
                sat1 += pol ? ps : 0;
            }
        }
        const long long g0 = g_first + j0;
#pragma unroll
        for (int p = 0; p < N_UNZIP; p++) {
            put_run<JS>(a.out, bits, N, a.sph, a.spectra, g0, p * m + s, direct[p]);
            if (s > 0)
                put_run<JS>(a.out, bits, N, a.sph, a.spectra, g0, N - (p * m + s), mirror[p]);
        }
        if (s > 0)
            continue;
        /* s = 0 has no mirror: channels p m + m/2 instead, which no other s
         * reaches (bins m/2 of every sub-transform). */
#pragma unroll
        for (int jj = 0; jj < JS; jj++) {
            const long long g = g_first + j0 + jj;
#pragma unroll
            for (int p = 0; p < N_UNZIP; p++)
                direct[p][jj] = 0;
            if (g >= a.spectra)
                continue;
            const float2 *eff = a.eff + (g >= a.gain_switch ? 2 * N : 0);
            const int home = (j0 + jj) * N_UNZIP;
#pragma unroll 1
            for (int pol = 0; pol < 2; pol++) {
                const float2 dp = ROT ? __ldg(a.sd + pol * a.spectra + g) : make_float2(0.f, 0.f);
                unsigned ps = 0;
                float2 zs[N_UNZIP], zc[N_UNZIP];
#pragma unroll
                for (int r = 0; r < N_UNZIP; r++) {
                    const float2 tw = expi_pi(-2.0f * (float)(r * half) * inv_n_ch);
                    const float2 v = cl.map_shared_rank(x, home + r)[sw(pol * m + half)];
                    zs[r] = cmul(tw, v);
                    zc[r] = cmul(tw, conj2(v));
                }
#pragma unroll
                for (int p = 0; p < N_UNZIP; p++) {
                    float2 xk, xnk;
                    const int k = p * m + half;
                    combine<N_UNZIP>(zs, zc, p, expi_pi(-(float)k * inv_n_ch), &xk, &xnk);
                    direct[p][jj] |= finish(xk, k, pol, eff, bits, &ps, ROT, dp, inv_n_ch, kc,
                                            DITHER, a.dr, g, N)
                                     << (pol * shift8);
                }
                sat0 += pol ? 0 : ps;
                sat1 += pol ? ps : 0;
            }
        }
#pragma unroll
        for (int p = 0; p < N_UNZIP; p++)
            put_run<JS>(a.out, bits, N, a.sph, a.spectra, g0, p * m + half, direct[p]);
    }
    for (int pol = 0; pol < 2; pol++) {
        unsigned v = pol ? sat1 : sat0;
        for (int off = 16; off; off >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, off);
        if ((tid & 31) == 0 && v)
            atomicAdd(a.sat + pol, (unsigned long long)v);
    }
    /* The other blocks may still be reading this one's bins. */
    cl.sync();
#else
    __trap(); /* clusters: compute capability 9.0; the plan refuses older devices */
#endif
}

typedef void (*fused_fn)(fused_launch, int);

static fused_fn pick(int unzip, bool rot, bool dither)
{
#define ROW(NU)                                                                              \
    {fused_kernel<NU, false, false>, fused_kernel<NU, false, true>,                          \
     fused_kernel<NU, true, false>, fused_kernel<NU, true, true>}
    static const fused_fn table[3][4] = {ROW(1), ROW(2), ROW(4)};
#undef ROW
    return table[unzip == 4 ? 2 : unzip - 1][(rot ? 2 : 0) + (dither ? 1 : 0)];
}

/* m / 8 threads (a radix-16 butterfly each, both pols), so up to m = 4096
 * two blocks share an SM at the 64 registers of 1024 threads. */
static int threads_for(int m)
{
    int t = m / 8;
    return t < 64 ? 64 : t > 1024 ? 1024 : t;
}

/* fft_shared's twiddles for an m-point transform, in double, rounded to
 * float: per pass (radix R = 16 while it fits, then 2, 4 or 8; ns = the
 * product of the radices before it), exp(-2 pi i k0 r / (R ns)) at
 * [(r - 1) ns + k0], r = 1..R-1, k0 < ns. Returns the count (m - 1). */
size_t cbf_fft_post_fused_twiddles(int m, float2 *out)
{
    size_t at = 0;
    for (int ns = 1; ns < m;) {
        const int R = ns * 16 <= m ? 16 : m / ns;
        for (int r = 1; r < R; r++)
            for (int k0 = 0; k0 < ns; k0++) {
                double a = -2.0 * M_PI * (double)k0 * r / ((double)R * ns);
                out[at + (size_t)(r - 1) * ns + k0] = make_float2((float)cos(a), (float)sin(a));
            }
        at += (size_t)(R - 1) * ns;
        ns *= R;
    }
    return at;
}

/* Shared memory above 48 KB is opted into once per kernel. */
cudaError_t cbf_fft_post_fused_prepare(int unzip)
{
    const int bytes = 2 * CBF_FFT_POST_FUSED_MAX_POINTS * (int)sizeof(float2);
    for (int v = 0; v < 4; v++) {
        cudaError_t e = cudaFuncSetAttribute((const void *)pick(unzip, v & 2, v & 1),
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
        if (e != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

cudaError_t cbf_fft_post_fused_launch(const fused_launch *a, cudaStream_t stream)
{
    const int m = a->channels / a->unzip, S = CLUSTER / a->unzip;
    int log_m = 0;
    while ((1 << log_m) < m)
        log_m++;
    const long long clusters = (a->spectra + S - 1) / S;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(clusters * CLUSTER), 1, 1);
    cfg.blockDim = dim3((unsigned)threads_for(m), 1, 1);
    cfg.dynamicSmemBytes = 2 * (size_t)m * sizeof(float2);
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = CLUSTER;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, pick(a->unzip, a->sd != nullptr, a->dr.on), *a, log_m);
}
