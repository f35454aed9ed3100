/* ddc.cu: the down-converter on the GPU.
 *
 * One thread computes C consecutive outputs of one polarisation (C is a
 * template parameter, as is W = taps / S, so that every register array is
 * indexed by constants). With k = p S + q the sum of ddc.h becomes
 *
 *   y[b + i] = rot(b + i) sum_q sum_p x[S (b + i + p) + q] z[p S + q],
 *
 * and for one q the thread needs only the C + W - 1 samples
 * x[S (b + j) + q], j < C + W - 1, each feeding up to W accumulators. When q
 * advances, sample j moves on by `bits` bits: it usually stays inside the
 * 32-bit word pair already held in registers (hi:lo), and a new word is
 * loaded only when it crosses into lo, once every 32 / bits steps. So each
 * input word is loaded about (C + W - 1) / C times per thread instead of
 * once or twice per sample, and the filtered samples that subsampling would
 * drop are never computed. The mixer-folded weights z sit in shared memory
 * (one broadcast read per (q, p)); the output rotation uses the 32-bit
 * fixed-point phase, which wraps exactly. */
#include "ddc.h"

#include "cuda_check.h"

#include <cuda_runtime.h>
#include <stdlib.h>

struct cbf_ddc_cuda {
    cbf_ddc_config cfg;
    int per_thread;
    float2 *z; /* device, taps */
};

#define BLOCK 128

#define CUDA_TRY(call) CBF_KERN_CUDA_TRY("ddc", call)

/* Word i of a packed stream, in stream (big-endian) bit order; clamped so
 * that threads past the last output never read past the buffer. */
__device__ __forceinline__ uint32_t word_at(const uint32_t *__restrict__ w, int i, int last)
{
    return __byte_perm(__ldg(w + min(i, last)), 0, 0x0123);
}

/* ALIGNED: S x bits is a whole number of words, so every sample j of a step
 * q sits at the same bit offset and crosses into lo at the same step: one
 * test per q instead of one per sample, leaving three integer operations
 * per decoded sample. Integer instructions issue at half the FMA rate, so
 * per-sample bookkeeping, not the FMAs, bounds the general path. */
template <int C, int W, bool ALIGNED>
__global__ void __launch_bounds__(BLOCK) ddc_kernel(
    const uint32_t *__restrict__ in0, const uint32_t *__restrict__ in1, long long start,
    int bits, int S, const float2 *__restrict__ zg, uint32_t phase0, uint32_t out_step,
    long long outputs, long long last_word, float2 *__restrict__ out, long long pol_stride)
{
    extern __shared__ float2 zs[];
    for (int i = threadIdx.x; i < W * S; i += BLOCK)
        zs[i] = zg[i];
    __syncthreads();
    const long long b = ((long long)blockIdx.x * BLOCK + threadIdx.x) * C;
    if (b >= outputs)
        return;
    const int pol = blockIdx.y;
    const long long bit0 = (start + b * S) * bits;
    const uint32_t *base = (pol ? in1 : in0) + (bit0 >> 5);
    const int last = (int)min(last_word - (bit0 >> 5), (long long)0x7fffffff);
    const int rel0 = (int)(bit0 & 31), SB = S * bits;

    uint32_t hi[C + W - 1], lo[C + W - 1];
    /* Set up as if one step before q = 0, so the loop's slide test needs no
     * q = 0 exception: a sample starting in the first `bits` bits of its
     * word slides in at q = 0 (hi's dummy is shifted out unread). */
#pragma unroll
    for (int j = 0; j < C + W - 1; j++) {
        const int rel = rel0 + j * SB, w = rel >> 5;
        const bool early = (rel & 31) < bits;
        hi[j] = early ? 0u : word_at(base, w, last);
        lo[j] = word_at(base, early ? w : w + 1, last);
    }
    float ar[C], ai[C];
#pragma unroll
    for (int i = 0; i < C; i++)
        ar[i] = ai[i] = 0.0f;

    for (int q = 0; q < S; q++) {
        float2 zq[W];
#pragma unroll
        for (int p = 0; p < W; p++)
            zq[p] = zs[p * S + q];
        const int relq = rel0 + q * bits;
        if (ALIGNED && (relq & 31) < bits) {
            const int w = (relq >> 5) + 1, sw = SB >> 5;
#pragma unroll
            for (int j = 0; j < C + W - 1; j++) {
                hi[j] = lo[j];
                lo[j] = word_at(base, w + j * sw, last);
            }
        }
#pragma unroll
        for (int j = 0; j < C + W - 1; j++) {
            const int rel = relq + j * SB, off = ALIGNED ? relq & 31 : rel & 31;
            /* The sample starts in lo now: slide the pair by one word. */
            if (!ALIGNED && off < bits) {
                hi[j] = lo[j];
                lo[j] = word_at(base, (rel >> 5) + 1, last);
            }
            /* int -> float through the mantissa of 1.5 x 2^23 (exact for
             * |v| < 2^22): two full-rate operations instead of I2F, which
             * issues at 1/8 of the FMA rate and would bound the kernel. */
            const int v = (int)__funnelshift_l(lo[j], hi[j], off) >> (32 - bits);
            const float x = __fsub_rn(__int_as_float(v + 0x4B400000), 12582912.0f);
#pragma unroll
            for (int p = 0; p < W; p++) {
                const int i = j - p;
                if (i >= 0 && i < C) {
                    ar[i] = __fmaf_rn(x, zq[p].x, ar[i]);
                    ai[i] = __fmaf_rn(x, zq[p].y, ai[i]);
                }
            }
        }
    }

    const uint32_t ph = phase0 + (uint32_t)b * out_step;
    float2 *o = out + pol * pol_stride + b;
#pragma unroll
    for (int i = 0; i < C; i++) {
        if (b + i >= outputs)
            break;
        float s, c;
        sincospif((float)(int)(ph + (uint32_t)i * out_step) * 0x1p-31f, &s, &c);
        o[i] = make_float2(__fmaf_rn(ar[i], c, __fmul_rn(ai[i], s)),
                           __fmaf_rn(ai[i], c, -__fmul_rn(ar[i], s)));
    }
}

typedef void (*ddc_fn)(const uint32_t *, const uint32_t *, long long, int, int, const float2 *,
                       uint32_t, uint32_t, long long, long long, float2 *, long long);

#define ROW(c, a) {ddc_kernel<c, 4, a>, ddc_kernel<c, 8, a>, ddc_kernel<c, 12, a>, ddc_kernel<c, 16, a>}
static ddc_fn pick(int c, int w, bool aligned)
{
    static const ddc_fn table[2][3][4] = {
        {ROW(4, false), ROW(8, false), ROW(16, false)},
        {ROW(4, true), ROW(8, true), ROW(16, true)},
    };
    return table[aligned][c == 4 ? 0 : c == 8 ? 1 : 2][w / 4 - 1];
}
#undef ROW

extern "C" int cbf_ddc_cuda_create(const cbf_ddc_config *cfg, const float *z_host,
                                   int per_thread, cbf_ddc_cuda **out, char *msg,
                                   size_t msglen)
{
    int rc = cbf_ddc_config_check(cfg, msg, msglen);
    if (rc)
        return rc;
    if (!per_thread)
        per_thread = CBF_DDC_DEFAULT_PER_THREAD;
    if (per_thread != 4 && per_thread != 8 && per_thread != 16) {
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "ddc: per_thread %d: must be 4, 8 or 16",
                             per_thread);
    }
    cbf_ddc_cuda *p = (cbf_ddc_cuda *)calloc(1, sizeof(*p));
    if (!p)
        return CBF_KERN_ENOMEM;
    p->cfg = *cfg;
    p->per_thread = per_thread;
    size_t bytes = (size_t)cfg->taps * sizeof(float2);
    cudaError_t e = cudaMalloc((void **)&p->z, bytes);
    if (e == cudaSuccess)
        e = cudaMemcpy(p->z, z_host, bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        cbf_ddc_cuda_destroy(p);
        return cbf_kern_cuda(e, msg, msglen, "ddc", "allocating the CUDA plan");
    }
    *out = p;
    return 0;
}

extern "C" int cbf_ddc_cuda_run(cbf_ddc_cuda *plan, const cbf_ddc_job *job, void *stream,
                                char *msg, size_t msglen)
{
    const cbf_ddc_config *cfg = &plan->cfg;
    int rc = cbf_ddc_job_check(cfg, job, msg, msglen);
    if (rc || !job->outputs)
        return rc;
    const int C = plan->per_thread;
    const long long threads = ((long long)job->outputs + C - 1) / C;
    const long long last_word = (long long)(cbf_packed_bytes(job->in_samples, cfg->bits) / 4) - 1;
    dim3 grid((unsigned)((threads + BLOCK - 1) / BLOCK), 2);
    const uint32_t phase0 = cbf_ddc_phase(job->timestamp + job->start, cfg->mix_step);
    const uint32_t out_step = (uint32_t)((uint64_t)cfg->decimation * cfg->mix_step);
    const bool aligned = cfg->decimation * cfg->bits % 32 == 0;
    pick(C, cfg->taps / cfg->decimation, aligned)<<<grid, BLOCK, (size_t)cfg->taps * sizeof(float2),
                                           (cudaStream_t)stream>>>(
        (const uint32_t *)job->in[0], (const uint32_t *)job->in[1], (long long)job->start,
        cfg->bits, cfg->decimation, plan->z, phase0, out_step, (long long)job->outputs,
        last_word, (float2 *)job->out, (long long)job->out_pol_stride);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

extern "C" void cbf_ddc_cuda_destroy(cbf_ddc_cuda *plan)
{
    if (!plan)
        return;
    cudaFree(plan->z);
    free(plan);
}

/* Eight chains per thread hide the FMA latency (4 cycles, 4 issue slots per
 * SM sub-partition); the multiplier keeps the values finite. */
__global__ void __launch_bounds__(256) fma_probe(float *out, int iters)
{
    float a[8];
#pragma unroll
    for (int j = 0; j < 8; j++)
        a[j] = (float)(threadIdx.x + j);
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int j = 0; j < 8; j++)
            a[j] = __fmaf_rn(a[j], 0.999999f, 0.5f);
    }
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++)
        s += a[j];
    out[blockIdx.x * 256 + threadIdx.x] = s;
}

extern "C" int cbf_ddc_cuda_fma_probe(int blocks, int iters, float *dev_out, void *stream,
                                      double *flops, char *msg, size_t msglen)
{
    fma_probe<<<blocks, 256, 0, (cudaStream_t)stream>>>(dev_out, iters);
    CUDA_TRY(cudaGetLastError());
    *flops = 2.0 * 8.0 * 256.0 * (double)blocks * (double)iters;
    return 0;
}
