/* fft_post.cu: cuFFT (complex-to-complex, m = channels / unzip points, one
 * plan) and the single post-processing kernel.
 *
 * Post-processing tile: 32 values of s (the sub-transform bin, s < m/2) x 32
 * spectra, 256 threads. Loads run along s (coalesced, bins s and m - s);
 * each thread computes, for both pols, every channel its s feeds: p m + s
 * ("direct" slots) and N - (p m + s) ("mirror" slots; the s = 0 thread
 * fills those with the p m + m/2 channels instead, which no other s
 * reaches). Results go to shared memory as 4 bytes per (channel, spectrum)
 * (both pols interleaved) and leave along the spectrum axis, so each warp
 * stores 128 contiguous bytes of one channel: the partial transpose. */
#include "fft_post.h"
#include "fft_post_dev.cuh"

#include "cuda_check.h"

#include <cuda_runtime.h>
#include <cufft.h>
#include <limits.h>

#ifdef CBF_HAVE_FFT_DX
#include "fft_dx.h"
#endif

struct cbf_fft_post_cuda {
    cbf_fft_post_config cfg;
    cudaStream_t stream;
    cufftHandle fft;
    int have_fft;
    int fused;                     /* the fused cuFFTDx kernel instead of cuFFT + post */
    float2 *gains[2];              /* device [channel][pol]: in force, and the next ones */
    float2 *eff;                   /* device [2][channel][pol] ([2][pol][channel] when
                                      fused): both, with the run's fixed delay and phase
                                      folded in */
    float2 *sd;                    /* device [pol][spectrum]: per-spectrum delay, phase */
    unsigned long long *sat;       /* device [2] */
    unsigned long long *sat_host;  /* pinned [2] */
};

#define TILE 32
/* Rows of threads per block and blocks per SM, per unzip factor: n = 4
 * holds 16 loads in flight per thread, so it runs 128-thread blocks, four to
 * an SM (measured on the H100 at 32768 channels: three blocks, about 170
 * registers, post at 68% of its bound; four, 128 registers, 76%; five, 61%). */
#define ROWS_OF(n) ((n) == 4 ? 4 : 8)
#define BLOCKS_OF(n) ((n) == 2 ? 2 : (n) == 4 ? 4 : 3)

#define CUDA_TRY(call) CBF_KERN_CUDA_TRY("fft_post", call)

template <int N_UNZIP>
__device__ __forceinline__ void load_bins(const float2 *__restrict__ z, int m, int s,
                                          float inv_n_ch, float2 *zs, float2 *zc)
{
#pragma unroll
    for (int r = 0; r < N_UNZIP; r++) {
        float2 tw = expi_pi(-2.0f * (float)(r * s) * inv_n_ch);
        zs[r] = cmul(tw, __ldg(z + r * m + s));
        zc[r] = cmul(tw, conj2(__ldg(z + r * m + ((m - s) & (m - 1)))));
    }
}

/* eff[t][k][pol] = gain_t x exp(i (-pi d (k - kc) / N + phi)) for the
 * gains in force (t = 0) and the next ones (t = 1): the run's fixed delay
 * and phase are folded into the gains once per run rather than evaluated
 * again for every spectrum. kc: the band centre, channels / 2, whose phase
 * a delay leaves alone (katgpucbf's reference; DC in narrowband). It also
 * zeroes the run's saturation counts, which the post kernel after it adds
 * to (one stream operation fewer than a memset). */
__global__ void eff_gain_kernel(const float2 *__restrict__ g_now, const float2 *__restrict__ g_next,
                                int channels, int kc, float d0, float d1, float ph0, float ph1,
                                int pol_major, float2 *__restrict__ eff,
                                unsigned long long *sat)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < 2)
        sat[i] = 0;
    if (i >= 4 * channels)
        return;
    int j = i % (2 * channels), k = j >> 1, pol = j & 1;
    float d = pol ? d1 : d0, ph = pol ? ph1 : ph0;
    float2 g = i < 2 * channels ? g_now[j] : g_next[j];
    /* pol_major: [t][pol][k], the fused kernel's layout (fft_dx.cu). */
    int o = pol_major ? i - j + pol * channels + k : i;
    eff[o] = cmul(g, expi_pi(fmaf(-d / (float)channels, (float)(k - kc), ph * (float)M_1_PI)));
}

/* ROT: a per-spectrum delay model is applied; DITHER: dither is on. Template
 * parameters, so a run without them carries neither their loads nor their
 * registers: the kernel is latency-bound and the extra live values cost
 * occupancy (with dither, n = 4 spills a few registers). */
template <int N_UNZIP, bool ROT, bool DITHER>
__global__ void __launch_bounds__(TILE *ROWS_OF(N_UNZIP), BLOCKS_OF(N_UNZIP)) post_kernel(
    const float2 *__restrict__ data, long long pol_stride, int channels, long long spectra,
    int sph, int bits, const float2 *__restrict__ eff_all, const float2 *__restrict__ sd,
    long long gain_switch, void *out, unsigned long long *sat_count, dither_run dr)
{
    __shared__ unsigned tile[2 * N_UNZIP][TILE][TILE + 1];
    const int m = channels / N_UNZIP, half = m / 2, kc = channels / 2;
    const float inv_n_ch = 1.0f / (float)channels;
    const int s = blockIdx.x * TILE + threadIdx.x;
    const long long g0 = (long long)blockIdx.y * TILE;
    unsigned sat0 = 0, sat1 = 0;
    constexpr int ROWS = ROWS_OF(N_UNZIP);
    /* A thread keeps one s for the whole tile: its twiddles are computed once. */
    float2 tw[N_UNZIP], hk[N_UNZIP];
#pragma unroll
    for (int r = 0; r < N_UNZIP; r++) {
        tw[r] = expi_pi(-2.0f * (float)(r * s) * inv_n_ch);
        hk[r] = expi_pi(-(float)(r * m + s) * inv_n_ch);
    }

    /* All loads of a step (both pols, U spectra) are issued before any
     * arithmetic: the kernel is latency-bound unless enough bytes are in
     * flight per SM. U = 2 when n = 1 leaves room in the registers. */
    constexpr int U = N_UNZIP == 1 ? 2 : 1;
#pragma unroll 1
    for (int ty0 = threadIdx.y; ty0 < TILE; ty0 += ROWS * U) {
        float2 raw_s[U][2][N_UNZIP], raw_c[U][2][N_UNZIP];
#pragma unroll
        for (int u = 0; u < U; u++) {
            long long g = g0 + ty0 + u * ROWS;
            if (s >= half || g >= spectra)
                continue;
#pragma unroll
            for (int pol = 0; pol < 2; pol++) {
                const float2 *z = data + pol * pol_stride + g * (long long)channels;
#pragma unroll
                for (int r = 0; r < N_UNZIP; r++) {
                    raw_s[u][pol][r] = __ldg(z + r * m + s);
                    raw_c[u][pol][r] = __ldg(z + r * m + ((m - s) & (m - 1)));
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int ty = ty0 + u * ROWS;
            long long g = g0 + ty;
            if (s >= half || g >= spectra)
                continue;
            unsigned packed[2 * N_UNZIP];
#pragma unroll
            for (int i = 0; i < 2 * N_UNZIP; i++)
                packed[i] = 0;
            /* A spectrum takes all its gains from one table: no tearing. */
            const float2 *eff = eff_all + (g >= gain_switch ? 2 * channels : 0);
            constexpr bool rot = ROT;
#pragma unroll
            for (int pol = 0; pol < 2; pol++) {
                const int shift = pol * (bits == 8 ? 16 : 8);
                unsigned sat = 0;
                float2 dp = make_float2(0.f, 0.f);
                if (ROT)
                    dp = __ldg(sd + pol * spectra + g);
                float2 zs[N_UNZIP], zc[N_UNZIP];
#pragma unroll
                for (int r = 0; r < N_UNZIP; r++) {
                    zs[r] = cmul(tw[r], raw_s[u][pol][r]);
                    zc[r] = cmul(tw[r], conj2(raw_c[u][pol][r]));
                }
#pragma unroll
                for (int p = 0; p < N_UNZIP; p++) {
                    float2 xk, xnk;
                    int k = p * m + s;
                    combine<N_UNZIP>(zs, zc, p, hk[p], &xk, &xnk);
                    /* k and channels - k: one pair, one draw. */
                    const unsigned long long u =
                        DITHER ? dither_draw(dr, g, channels, (int)cbf_fft_post_dither_pair(channels, k),
                                             pol)
                               : 0;
                    packed[p] |= finish(xk, __ldg(eff + 2 * k + pol), k, bits, &sat, rot, dp,
                                        inv_n_ch, kc, DITHER,
                                        cbf_fft_post_dither_bits(u, channels, k))
                                 << shift;
                    if (s > 0)
                        packed[N_UNZIP + p] |=
                            finish(xnk, __ldg(eff + 2 * (channels - k) + pol), channels - k, bits,
                                   &sat, rot, dp, inv_n_ch, kc, DITHER,
                                   cbf_fft_post_dither_bits(u, channels, channels - k))
                            << shift;
                }
                if (s == 0) {
                    /* Channels p' m + m/2, stored in mirror slot n - 1 - p'. */
                    const float2 *z = data + pol * pol_stride + g * (long long)channels;
                    load_bins<N_UNZIP>(z, m, half, inv_n_ch, zs, zc);
#pragma unroll
                    for (int p = 0; p < N_UNZIP; p++) {
                        float2 xk, xnk;
                        int k = p * m + half;
                        combine<N_UNZIP>(zs, zc, p, expi_pi(-(float)k * inv_n_ch), &xk, &xnk);
                        const unsigned long long u =
                            DITHER ? dither_draw(dr, g, channels, (int)cbf_fft_post_dither_pair(channels, k),
                                                 pol)
                                   : 0;
                        packed[2 * N_UNZIP - 1 - p] |=
                            finish(xk, __ldg(eff + 2 * k + pol), k, bits, &sat, rot, dp,
                                   inv_n_ch, kc, DITHER, cbf_fft_post_dither_bits(u, channels, k))
                            << shift;
                    }
                }
                sat0 += pol ? 0 : sat;
                sat1 += pol ? sat : 0;
            }
#pragma unroll
            for (int i = 0; i < 2 * N_UNZIP; i++)
                tile[i][threadIdx.x][ty] = packed[i];
        }
    }
    __syncthreads();

    /* Store: each warp takes (slot, s) rows; lanes run along the spectra. */
    const int warp = threadIdx.y, lane = threadIdx.x;
    const long long g = g0 + lane;
    if (g < spectra) {
        const long long b = g / sph, t = g % sph;
        for (int row = warp; row < 2 * N_UNZIP * TILE; row += ROWS) {
            int slot = row / TILE, sl = row % TILE, ss = blockIdx.x * TILE + sl;
            if (ss >= half)
                continue;
            int c;
            if (slot < N_UNZIP)
                c = slot * m + ss;
            else
                c = (2 * N_UNZIP - 1 - slot) * m + (ss == 0 ? half : m - ss);
            long long idx = (b * channels + c) * sph + t;
            unsigned v = tile[slot][sl][lane];
            if (bits == 8)
                ((unsigned *)out)[idx] = v;
            else
                ((unsigned short *)out)[idx] = (unsigned short)v;
        }
    }

    for (int pol = 0; pol < 2; pol++) {
        unsigned v = pol ? sat1 : sat0;
        for (int off = 16; off; off >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, off);
        if (lane == 0 && v)
            atomicAdd(sat_count + pol, (unsigned long long)v);
    }
}

/* Narrowband: channel c is bin c - N/2 (mod M) of one M-point transform
 * (M = 2N, or N keeping the whole band). A block covers 32 channels x 32
 * spectra: loads run along the channels (consecutive bins but for the wrap
 * at c = N/2), the transposed stores along the spectra as in post_kernel.
 * Unzipped in frequency (log_n > 0: bin n k' + j at j (M / n) + k'), a
 * warp's 32 bins fall in n runs of 32 / n, each whole 32-byte sectors.
 * The delay slope is -2 pi d / M per channel: inv_n_ch = 2 / M. */
#define CROWS 8 /* post_complex_kernel's blockDim.y */
__global__ void __launch_bounds__(TILE * CROWS) post_complex_kernel(
    const float2 *__restrict__ data, long long pol_stride, int channels, int M, int log_n,
    long long spectra, int sph, int bits, const float2 *__restrict__ eff_all,
    const float2 *__restrict__ sd, long long gain_switch, void *out,
    unsigned long long *sat_count, dither_run dr)
{
    __shared__ unsigned tile[TILE][TILE + 1];
    const float inv_n_ch = 2.0f / (float)M;
    const int N = channels, c = blockIdx.x * TILE + threadIdx.x;
    const int kb = (c + M - N / 2) & (M - 1);
    const int k = (kb & ((1 << log_n) - 1)) * (M >> log_n) + (kb >> log_n);
    const long long g0 = (long long)blockIdx.y * TILE;
    /* All of a thread's loads are issued before the first is used: the
     * kernel is latency-bound, one spectrum's two loads at a time left
     * the memory system short of requests. */
    constexpr int PER = TILE / CROWS;
    float2 x[PER][2];
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const long long g = g0 + threadIdx.y + i * CROWS;
#pragma unroll
        for (int pol = 0; pol < 2; pol++)
            x[i][pol] = g < spectra ? __ldg(data + pol * pol_stride + g * (long long)M + k)
                                    : make_float2(0.f, 0.f);
    }
    unsigned sat[2] = {0, 0};
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const int ty = threadIdx.y + i * CROWS;
        const long long g = g0 + ty;
        if (g >= spectra)
            break;
        unsigned packed = 0;
        const float2 *eff = eff_all + (g >= gain_switch ? 2 * N : 0);
#pragma unroll
        for (int pol = 0; pol < 2; pol++) {
            const float2 dp = sd ? __ldg(sd + pol * spectra + g) : make_float2(0.f, 0.f);
            /* c's partner N - c is another thread's: a draw per value. */
            const unsigned long long u =
                dr.on ? dither_draw(dr, g, N, (int)cbf_fft_post_dither_pair(N, c), pol) : 0;
            packed |= finish(x[i][pol], __ldg(eff + 2 * c + pol), c, bits, &sat[pol],
                             sd != nullptr, dp, inv_n_ch, N / 2, dr.on,
                             cbf_fft_post_dither_bits(u, N, c))
                      << (pol * (bits == 8 ? 16 : 8));
        }
        tile[threadIdx.x][ty] = packed;
    }
    /* Saturation counts: one global atomic per block and pol, not per warp. */
    __shared__ unsigned block_sat[2];
    if (threadIdx.x < 2 && threadIdx.y == 0)
        block_sat[threadIdx.x] = 0;
    __syncthreads();
    const int lane = threadIdx.x;
    for (int pol = 0; pol < 2; pol++) {
        unsigned v = sat[pol];
        for (int off = 16; off; off >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, off);
        if (lane == 0 && v)
            atomicAdd(block_sat + pol, v);
    }
    const long long g = g0 + lane;
    if (g < spectra) {
        const long long b = g / sph, t = g % sph;
#pragma unroll
        for (int i = 0; i < PER; i++) {
            const int row = threadIdx.y + i * CROWS;
            long long idx = (b * N + blockIdx.x * TILE + row) * sph + t;
            unsigned v = tile[row][lane];
            if (bits == 8)
                ((unsigned *)out)[idx] = v;
            else
                ((unsigned short *)out)[idx] = (unsigned short)v;
        }
    }
    __syncthreads();
    if (threadIdx.y == 0 && lane < 2 && block_sat[lane])
        atomicAdd(sat_count + lane, (unsigned long long)block_sat[lane]);
}

/* AUTO's choice where the fused kernel can run: the shapes where it was
 * measured faster than the four-pass path (docs/notes/performance-history.md, "Fused FFT
 * + post with cuFFTDx"): 4096 channels; at 8192 cuFFT and the post kernel are faster. */
static int fused_preferred(const cbf_fft_post_config *cfg)
{
    return cfg->channels == 4096;
}

extern "C" int cbf_fft_post_cuda_fused_check(const cbf_fft_post_config *cfg, char *msg,
                                             size_t msglen)
{
#ifdef CBF_HAVE_FFT_DX
    return cbf_fft_dx_post_check(cfg->channels, cfg->unzip, cfg->complex_in, msg, msglen);
#else
    (void)cfg;
    return cbf_kern_fail(msg, msglen, CBF_KERN_ENOTSUP,
                         "fft_post: built without cuFFTDx (meson option mathdx_dir, "
                         "scripts/fetch-mathdx.sh)");
#endif
}

extern "C" int cbf_fft_post_cuda_fused(const cbf_fft_post_cuda *plan)
{
    return plan->fused;
}

extern "C" int cbf_fft_post_cuda_create(const cbf_fft_post_config *cfg, void *stream,
                                        cbf_fft_post_cuda **out, char *msg, size_t msglen)
{
    int rc = cbf_fft_post_config_check(cfg, msg, msglen);
    if (rc)
        return rc;
    cbf_fft_post_cuda *p = (cbf_fft_post_cuda *)calloc(1, sizeof(*p));
    if (!p)
        return CBF_KERN_ENOMEM;
    p->cfg = *cfg;
    p->stream = (cudaStream_t)stream;
    *out = p;
    const int N = cfg->channels;
    int m = (cfg->complex_in ? (int)cbf_fft_post_spectrum_samples(cfg) : N) / cfg->unzip;
    cudaError_t e = cudaMalloc((void **)&p->gains[0], sizeof(float2) * 2 * N);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&p->gains[1], sizeof(float2) * 2 * N);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&p->eff, sizeof(float2) * 4 * N);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&p->sd, sizeof(float2) * 2 * cfg->spectra);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&p->sat, 2 * sizeof(unsigned long long));
    if (e == cudaSuccess)
        e = cudaMallocHost((void **)&p->sat_host, 2 * sizeof(unsigned long long));
    if (e == cudaSuccess)
        e = cudaMemset(p->sat, 0, 2 * sizeof(unsigned long long));
    if (e != cudaSuccess) {
        cbf_fft_post_cuda_destroy(p);
        *out = NULL;
        return cbf_kern_cuda(e, msg, msglen, "fft_post", "allocating the plan");
    }
    if (cfg->fft != CBF_FFT_POST_FFT_CUFFT) {
        char why[256];
        rc = cbf_fft_post_cuda_fused_check(cfg, why, sizeof why);
        if (rc && cfg->fft == CBF_FFT_POST_FFT_CUFFTDX) {
            cbf_fft_post_cuda_destroy(p);
            *out = NULL;
            return cbf_kern_fail(msg, msglen, rc, "fft_post: fft cufftdx: %s", why);
        }
        p->fused = !rc && (cfg->fft == CBF_FFT_POST_FFT_CUFFTDX || fused_preferred(cfg));
    }
    cufftResult fr = CUFFT_SUCCESS;
    if (!p->fused)
        fr = cufftPlanMany(&p->fft, 1, &m, NULL, 1, m, NULL, 1, m, CUFFT_C2C,
                           (int)(cfg->spectra * cfg->unzip));
    if (fr == CUFFT_SUCCESS && !p->fused) {
        p->have_fft = 1;
        fr = cufftSetStream(p->fft, p->stream);
    }
    if (fr != CUFFT_SUCCESS) {
        cbf_fft_post_cuda_destroy(p);
        *out = NULL;
        return cbf_kern_fail(msg, msglen, CBF_KERN_ECUDA,
                             "fft_post: cuFFT plan of %zu x %d points failed (cufftResult %d)",
                             cfg->spectra * cfg->unzip, m, (int)fr);
    }
    float *ones = (float *)malloc(sizeof(float) * 4 * N);
    if (!ones) {
        cbf_fft_post_cuda_destroy(p);
        *out = NULL;
        return CBF_KERN_ENOMEM;
    }
    for (int i = 0; i < 2 * N; i++) {
        ones[2 * i] = 1.0f;
        ones[2 * i + 1] = 0.0f;
    }
    rc = cbf_fft_post_cuda_set_gains(p, ones, msg, msglen);
    free(ones);
    if (rc) {
        cbf_fft_post_cuda_destroy(p);
        *out = NULL;
    }
    return rc;
}

extern "C" int cbf_fft_post_cuda_set_next_gains(cbf_fft_post_cuda *plan, const float *gains,
                                                char *msg, size_t msglen)
{
    CUDA_TRY(cudaMemcpyAsync(plan->gains[1], gains, sizeof(float2) * 2 * plan->cfg.channels,
                             cudaMemcpyHostToDevice, plan->stream));
    CUDA_TRY(cudaStreamSynchronize(plan->stream));
    return 0;
}

extern "C" int cbf_fft_post_cuda_set_gains(cbf_fft_post_cuda *plan, const float *gains,
                                           char *msg, size_t msglen)
{
    for (int t = 0; t < 2; t++)
        CUDA_TRY(cudaMemcpyAsync(plan->gains[t], gains, sizeof(float2) * 2 * plan->cfg.channels,
                                 cudaMemcpyHostToDevice, plan->stream));
    CUDA_TRY(cudaStreamSynchronize(plan->stream));
    return 0;
}

static int fused_only(char *msg, size_t msglen)
{
    return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                         "fft_post: a fused plan transforms and post-processes in one kernel: "
                         "call cbf_fft_post_cuda_run");
}

static int check_args(const cbf_fft_post_cuda *plan, const cbf_fft_post_args *a, char *msg,
                      size_t msglen)
{
    size_t need = plan->cfg.spectra * cbf_fft_post_row_floats(&plan->cfg);
    if (a->data_pol_stride >= need)
        return 0;
    return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                         "fft_post: data_pol_stride %zu < spectra x row %zu floats",
                         a->data_pol_stride, need);
}

/* fft and post alone: the four-pass path's steps. */
static int four_pass_args(const cbf_fft_post_cuda *plan, const cbf_fft_post_args *a, char *msg,
                          size_t msglen)
{
    int rc = check_args(plan, a, msg, msglen);
    return rc ? rc : plan->fused ? fused_only(msg, msglen) : 0;
}

extern "C" int cbf_fft_post_cuda_fft(cbf_fft_post_cuda *plan, const cbf_fft_post_args *args,
                                     char *msg, size_t msglen)
{
    int rc = four_pass_args(plan, args, msg, msglen);
    if (rc)
        return rc;
    for (int pol = 0; pol < 2; pol++) {
        cufftComplex *d = (cufftComplex *)(args->data + pol * args->data_pol_stride);
        cufftResult fr = cufftExecC2C(plan->fft, d, d, CUFFT_FORWARD);
        if (fr != CUFFT_SUCCESS) {
            return cbf_kern_fail(msg, msglen, CBF_KERN_ECUDA,
                                 "fft_post: cufftExecC2C failed (cufftResult %d)", (int)fr);
        }
    }
    return 0;
}

/* What every post-processing run enqueues first: the gain tables with the
 * run's fixed delay and phase (which also zeroes the saturation counts)
 * and the per-spectrum delay model. */
static int post_prepare(cbf_fft_post_cuda *plan, const cbf_fft_post_args *args, char *msg,
                        size_t msglen)
{
    const cbf_fft_post_config *c = &plan->cfg;
    /* eff's slope is -pi d / channels per channel, 2 pi d / M with M =
     * 2 x channels; keeping the whole band (M = channels) doubles d. */
    const int M = (int)cbf_fft_post_spectrum_samples(c);
    const float dscale = (float)(2 * c->channels / M);
    eff_gain_kernel<<<(4 * c->channels + 255) / 256, 256, 0, plan->stream>>>(
        plan->gains[0], plan->gains[1], c->channels, c->channels / 2,
        dscale * args->fine_delay[0], dscale * args->fine_delay[1], args->phase[0], args->phase[1],
        plan->fused, plan->eff, plan->sat);
    CUDA_TRY(cudaGetLastError());
    if (args->spectrum_delay)
        /* From pageable memory: returns once the source has been read. */
        CUDA_TRY(cudaMemcpyAsync(plan->sd, args->spectrum_delay, sizeof(float2) * 2 * c->spectra,
                                 cudaMemcpyHostToDevice, plan->stream));
    return 0;
}

/* After a run that switched gains the next ones are in force. */
static void post_done(cbf_fft_post_cuda *plan, const cbf_fft_post_args *args)
{
    if (args->switch_gains) {
        float2 *t = plan->gains[0];
        plan->gains[0] = plan->gains[1];
        plan->gains[1] = t;
    }
}

extern "C" int cbf_fft_post_cuda_post(cbf_fft_post_cuda *plan, const cbf_fft_post_args *args,
                                      char *msg, size_t msglen)
{
    int rc = four_pass_args(plan, args, msg, msglen);
    if (rc || (rc = post_prepare(plan, args, msg, msglen)))
        return rc;
    const cbf_fft_post_config *c = &plan->cfg;
    const int half = c->channels / c->unzip / 2;
    dim3 grid((unsigned)((half + TILE - 1) / TILE), (unsigned)((c->spectra + TILE - 1) / TILE));
    dim3 block(TILE, ROWS_OF(c->unzip));
    const int M = (int)cbf_fft_post_spectrum_samples(c);
    const long long gain_switch = args->switch_gains ? (long long)args->gain_switch : LLONG_MAX;
    const float2 *data = (const float2 *)args->data;
    long long ps = (long long)(args->data_pol_stride / 2);
    const dither_run dr = {c->dither, c->dither_antenna, (unsigned long long)c->dither_key,
                           (unsigned long long)args->first_spectrum};
    if (c->complex_in) {
        dim3 cgrid((unsigned)(c->channels / TILE), (unsigned)((c->spectra + TILE - 1) / TILE));
        post_complex_kernel<<<cgrid, dim3(TILE, CROWS), 0, plan->stream>>>(
            data, ps, c->channels, M, c->unzip == 4 ? 2 : c->unzip == 2 ? 1 : 0,
            (long long)c->spectra, c->spectra_per_heap, c->out_bits,
            plan->eff, args->spectrum_delay ? plan->sd : nullptr, gain_switch, args->out,
            plan->sat, dr);
    }
#define LAUNCH(NU, ROT, DITHER)                                                              \
    post_kernel<NU, ROT, DITHER><<<grid, block, 0, plan->stream>>>(                          \
        data, ps, c->channels, (long long)c->spectra, c->spectra_per_heap, c->out_bits,      \
        plan->eff, plan->sd, gain_switch, args->out, plan->sat, dr)
#define LAUNCH_DITHER(NU, ROT)                                                               \
    do {                                                                                     \
        if (c->dither)                                                                       \
            LAUNCH(NU, ROT, true);                                                           \
        else                                                                                 \
            LAUNCH(NU, ROT, false);                                                          \
    } while (0)
#define LAUNCH_ROT(NU)                                                                       \
    do {                                                                                     \
        if (args->spectrum_delay)                                                            \
            LAUNCH_DITHER(NU, true);                                                         \
        else                                                                                 \
            LAUNCH_DITHER(NU, false);                                                        \
    } while (0)
    else if (c->unzip == 1)
        LAUNCH_ROT(1);
    else if (c->unzip == 2)
        LAUNCH_ROT(2);
    else
        LAUNCH_ROT(4);
#undef LAUNCH_ROT
#undef LAUNCH_DITHER
#undef LAUNCH
    CUDA_TRY(cudaGetLastError());
    post_done(plan, args);
    return 0;
}

/* The fused path: the gain tables as the post kernel has them, then one
 * kernel from the FIR output to the packed output. */
static int run_fused(cbf_fft_post_cuda *plan, const cbf_fft_post_args *args, char *msg,
                     size_t msglen)
{
#ifdef CBF_HAVE_FFT_DX
    int rc = post_prepare(plan, args, msg, msglen);
    if (rc)
        return rc;
    const cbf_fft_post_config *c = &plan->cfg;
    const cbf_fft_dx_post d = {
        args->data, args->data_pol_stride, args->out, c->channels, c->spectra_per_heap,
        c->out_bits, c->spectra, plan->eff, args->spectrum_delay ? plan->sd : NULL,
        args->switch_gains ? (long long)args->gain_switch : LLONG_MAX, plan->sat, c->dither,
        c->dither_antenna, c->dither_key, args->first_spectrum, -1};
    if ((rc = cbf_fft_dx_post_run(&d, plan->stream, msg, msglen)))
        return rc;
    post_done(plan, args);
    return 0;
#else
    (void)plan;
    (void)args;
    return cbf_kern_fail(msg, msglen, CBF_KERN_ENOTSUP, "fft_post: built without cuFFTDx");
#endif
}

extern "C" int cbf_fft_post_cuda_run(cbf_fft_post_cuda *plan, const cbf_fft_post_args *args,
                                     char *msg, size_t msglen)
{
    int rc = check_args(plan, args, msg, msglen);
    if (rc)
        return rc;
    if (plan->fused)
        return run_fused(plan, args, msg, msglen);
    rc = cbf_fft_post_cuda_fft(plan, args, msg, msglen);
    return rc ? rc : cbf_fft_post_cuda_post(plan, args, msg, msglen);
}

extern "C" int cbf_fft_post_cuda_saturated(cbf_fft_post_cuda *plan, uint64_t saturated[2],
                                           char *msg, size_t msglen)
{
    /* Copied here, not after every run: the counts on the device are the
     * last run's until the next one starts, and a run that nobody reads
     * (the plugin copies with _async) then costs no stream operation. */
    CUDA_TRY(cudaMemcpyAsync(plan->sat_host, plan->sat, 2 * sizeof(unsigned long long),
                             cudaMemcpyDeviceToHost, plan->stream));
    CUDA_TRY(cudaStreamSynchronize(plan->stream));
    saturated[0] = plan->sat_host[0];
    saturated[1] = plan->sat_host[1];
    return 0;
}

extern "C" int cbf_fft_post_cuda_saturated_async(cbf_fft_post_cuda *plan, uint64_t dst[2],
                                                 char *msg, size_t msglen)
{
    static_assert(sizeof(uint64_t) == sizeof(unsigned long long), "counts are 64-bit");
    CUDA_TRY(cudaMemcpyAsync(dst, plan->sat, 2 * sizeof(unsigned long long),
                             cudaMemcpyDeviceToHost, plan->stream));
    return 0;
}

extern "C" void cbf_fft_post_cuda_destroy(cbf_fft_post_cuda *plan)
{
    if (!plan)
        return;
    if (plan->have_fft)
        cufftDestroy(plan->fft);
    cudaFree(plan->gains[0]);
    cudaFree(plan->gains[1]);
    cudaFree(plan->eff);
    cudaFree(plan->sd);
    cudaFree(plan->sat);
    cudaFreeHost(plan->sat_host);
    free(plan);
}
