/* ddc.cu: the down-converter on the GPU, two kernels behind one plan.
 *
 * The tensor-core kernel (the default where it applies: even bits up to 10,
 * S a multiple of 8) treats the filter as a matrix product,
 *
 *   acc[m][n] = sum_k x[start + m S + k] B[k][n],  B[k][.] = (Re, Im of z[k]) split in two
 *   float16 halves, hi = half(z 2^s) and lo = half(z 2^s - hi),
 *
 * on mma.sync m16n8k16 (float16 in, float32 accumulation). Samples of up to
 * 11 bits are exact in float16, and hi + lo holds z to about 2^-22, well
 * inside ddc.h's float32 error bound, so the FP32 arithmetic ceiling that
 * bounds the FMA kernel stops mattering: 2 taps real-by-complex products
 * per output cost a tensor-core instruction per 16 x 16 of them. What is
 * left is the decode, once per sample: a block decodes the packed span its
 * outputs read into float16 in shared memory (bit positions are constants
 * of the template: the block's start alignment is shifted out word by word
 * with one funnel shift), then ldmatrix reads output m's window at row
 * offset m S. Each sample is decoded about once (the (taps - S) / 4096
 * halo per block aside) and each input byte read once from memory.
 *
 * The FMA kernel (any bits and S; selected with per_thread 4, 8 or 16):
 * one thread computes C consecutive outputs of one polarisation (C is a
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

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>

struct cbf_ddc_cuda {
    cbf_ddc_config cfg;
    int per_thread; /* 0: the tensor-core kernel */
    float2 *z;      /* device, taps (FMA kernel) */
    uint2 *bfrag;   /* device, the tensor-core B fragments: [taps / 16][32 lanes] */
    float scale;    /* 2^-s, undoes the weights' scaling (tensor-core kernel) */
    int tc_outputs; /* outputs per block (tensor-core kernel) */
    size_t tc_smem; /* its dynamic shared memory */
};

#define BLOCK 128

#define CUDA_TRY(call) CBF_KERN_CUDA_TRY("ddc", call)

/* Word i of a packed stream, in stream (big-endian) bit order; clamped so
 * that threads past the last output never read past the buffer. */
__device__ __forceinline__ uint32_t word_at(const uint32_t *__restrict__ w, int i, int last)
{
    return __byte_perm(__ldg(w + min(i, last)), 0, 0x0123);
}

/* y e^(-i phi), phi the window start's mixer phase (cycles x 2^32) as
 * half-cycles in float: the CPU's rotation (ddc_cpu.c) in float32. */
__device__ __forceinline__ float2 rotate(float ar, float ai, uint32_t phi)
{
    float s, c;
    sincospif((float)(int)phi * 0x1p-31f, &s, &c);
    return make_float2(__fmaf_rn(ar, c, __fmul_rn(ai, s)), __fmaf_rn(ai, c, -__fmul_rn(ar, s)));
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
        o[i] = rotate(ar[i], ai[i], ph + (uint32_t)i * out_step);
    }
}

/* ---- The tensor-core kernel ---- */

#define TC_THREADS 128
#define TC_GROUP 16   /* samples one thread decodes at once: bits / 2 whole words */
#define TC_SPAN 4096  /* samples a block's outputs advance over, about */

/* Outputs per block: a multiple of 64 (4 warps x 16-row tiles) near
 * TC_SPAN / S, so that the halo each block decodes twice, taps - S samples,
 * stays a few per cent. */
static int tc_outputs(int S)
{
    int m = TC_SPAN / S / 64 * 64;
    return m < 64 ? 64 : m;
}

/* ldmatrix reads output rows S samples (2 S bytes) apart, 8 rows at a time.
 * When 2 S is a multiple of 32 bytes those rows fall on the same banks; 16
 * bytes of padding after every 128 spread them over all 32 (PAD). */
template <bool PAD> __device__ __forceinline__ int tc_pad(int byte)
{
    return PAD ? byte + 16 * (byte >> 7) : byte;
}

static size_t tc_xs_bytes(int groups, bool pad)
{
    size_t b = (size_t)groups * TC_GROUP * 2;
    return pad ? b + 16 * (b >> 7) + 16 : b;
}

static int tc_groups(int S, int taps)
{
    return ((tc_outputs(S) - 1) * S + taps + TC_GROUP - 1) / TC_GROUP;
}

/* Shared memory: B fragments (taps x 16 bytes), the staged sums (2 float2
 * per output), the decoded samples. */
static size_t tc_smem(int S, int taps)
{
    return (size_t)taps * 16 + (size_t)tc_outputs(S) * 16 +
           tc_xs_bytes(tc_groups(S, taps), S % 16 == 0);
}

/* Bits [dst, dst + BITS) of the result hold sample i of a 16-sample group
 * (big-endian stream, sample 0 at the top of a[0]); the other bits are
 * whatever the shift leaves there. Every shift is a constant. */
template <int BITS>
__device__ __forceinline__ uint32_t tc_field(const uint32_t *a, int i, int dst)
{
    const int pos = i * BITS, wi = pos >> 5;
    const uint64_t v = (uint64_t)a[wi] << 32 | (wi + 1 < BITS / 2 ? a[wi + 1] : 0u);
    const int sh = 64 - (pos & 31) - BITS - dst;
    return sh >= 0 ? (uint32_t)(v >> sh) : (uint32_t)(v << -sh);
}

__device__ __forceinline__ void tc_mma(float c[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                       uint32_t a3, uint2 b)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b.x), "r"(b.y));
}

template <int BITS, bool PAD>
__global__ void __launch_bounds__(TC_THREADS) ddc_tc_kernel(
    const uint32_t *__restrict__ in0, const uint32_t *__restrict__ in1, long long start, int S,
    int taps, int M, const uint2 *__restrict__ bfrag, float scale, uint32_t phase0,
    uint32_t out_step, long long outputs, long long last_word, float2 *__restrict__ out,
    long long pol_stride)
{
    static_assert(BITS % 2 == 0 && BITS <= 10, "16 samples in whole words, exact in float16");
    extern __shared__ uint4 smem[];
    uint2 *bs = (uint2 *)smem;                    /* [taps / 16][32] */
    float4 *ys = (float4 *)(bs + 2 * taps);       /* [M]: (hi re, hi im, lo re, lo im) */
    unsigned char *xs = (unsigned char *)(ys + M); /* float16 samples, padded */
    for (int i = threadIdx.x; i < taps; i += TC_THREADS)
        smem[i] = ((const uint4 *)bfrag)[i];

    /* Decode. Group g holds samples first + 16 g ...: BITS / 2 words from
     * bit (first + 16 g) BITS, i.e. from word word0 + g BITS / 2 shifted
     * left by the block's (uniform) bit offset rel. */
    const int pol = blockIdx.y;
    const uint32_t *w = pol ? in1 : in0;
    const long long first = start + (long long)blockIdx.x * M * S;
    const long long word0 = (first * BITS) >> 5;
    const int rel = (int)((first * BITS) & 31);
    const int groups = ((M - 1) * S + taps + TC_GROUP - 1) / TC_GROUP;
    /* Sign flip and the float16 exponent of 1024 in one XOR: 1024 + (v +
     * 2^(BITS-1)) as a float16, less the bias below, is v exactly. */
    constexpr uint32_t FLIP = (0x6400u | 1u << (BITS - 1)) * 0x10001u;
    constexpr uint32_t MASK = (1u << BITS) - 1;
    const __half2 bias = __float2half2_rn(1024.0f + (float)(1 << (BITS - 1)));
    for (int g = threadIdx.x; g < groups; g += TC_THREADS) {
        uint32_t raw[BITS / 2 + 1], a[BITS / 2];
        const long long wi = word0 + (long long)g * (BITS / 2);
#pragma unroll
        for (int k = 0; k <= BITS / 2; k++) /* the clamp binds only past the buffer's end */
            raw[k] = __byte_perm(__ldg(w + min(wi + k, last_word)), 0, 0x0123);
#pragma unroll
        for (int k = 0; k < BITS / 2; k++)
            a[k] = __funnelshift_l(raw[k + 1], raw[k], rel);
        uint32_t h[8];
#pragma unroll
        for (int p = 0; p < 8; p++) {
            const uint32_t u = ((tc_field<BITS>(a, 2 * p, 0) & MASK) |
                                (tc_field<BITS>(a, 2 * p + 1, 16) & MASK << 16)) ^ FLIP;
            const __half2 x = __hsub2(*(const __half2 *)&u, bias);
            h[p] = *(const uint32_t *)&x;
        }
        *(uint4 *)(xs + tc_pad<PAD>(g * 32)) = make_uint4(h[0], h[1], h[2], h[3]);
        *(uint4 *)(xs + tc_pad<PAD>(g * 32 + 16)) = make_uint4(h[4], h[5], h[6], h[7]);
    }
    __syncthreads();

    /* Products: warp tiles of 16 outputs; A row m, column k is sample
     * m S + k (ldmatrix.x4: lanes 8 j .. 8 j + 7 address matrix j's rows:
     * rows 0-7 then 8-15 of k 0-7, then of k 8-15). Columns of B: Re hi,
     * Im hi, Re lo, Im lo, four zeros. */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, mat = lane >> 3;
    const int row = (lane & 7) + (mat & 1) * 8, kofs = (mat >> 1) * 8;
    const uint32_t xs_sh = (uint32_t)__cvta_generic_to_shared(xs);
    for (int mt = warp; mt < M / 16; mt += TC_THREADS / 32) {
        float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        const int h0 = (mt * 16 + row) * S + kofs;
        for (int kb = 0; kb < taps / 16; kb++) {
            uint32_t a0, a1, a2, a3;
            const uint32_t addr = xs_sh + (uint32_t)tc_pad<PAD>(2 * (h0 + kb * 16));
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                         : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3)
                         : "r"(addr));
            tc_mma(c, a0, a1, a2, a3, bs[kb * 32 + lane]);
        }
        /* Lane 4 r + 0 holds the hi columns of rows r, r + 8; lane 4 r + 1 the lo. */
        if ((lane & 3) < 2) {
            float2 *y = (float2 *)(ys + mt * 16 + (lane >> 2)) + (lane & 3);
            y[0] = make_float2(c[0], c[1]);
            y[16] = make_float2(c[2], c[3]);
        }
    }
    __syncthreads();

    const long long b = (long long)blockIdx.x * M;
    const int n = (int)min((long long)M, outputs - b);
    float2 *o = out + pol * pol_stride + b;
    for (int i = threadIdx.x; i < n; i += TC_THREADS) {
        const float4 y = ys[i];
        o[i] = rotate(__fmul_rn(__fadd_rn(y.x, y.z), scale), __fmul_rn(__fadd_rn(y.y, y.w), scale),
                      phase0 + (uint32_t)(b + i) * out_step);
    }
}

typedef void (*tc_fn)(const uint32_t *, const uint32_t *, long long, int, int, int, const uint2 *,
                      float, uint32_t, uint32_t, long long, long long, float2 *, long long);

/* The tensor-core kernel applies to even bits up to 10 (16 samples fill
 * whole words; 1024 + 2^(bits-1) values fit float16's mantissa) and S a
 * multiple of 8 (ldmatrix rows start on 16-byte boundaries). */
static tc_fn tc_pick(int bits, int S)
{
#define TC_ROW(b) {ddc_tc_kernel<b, false>, ddc_tc_kernel<b, true>}
    static const tc_fn table[5][2] = {TC_ROW(2), TC_ROW(4), TC_ROW(6), TC_ROW(8), TC_ROW(10)};
#undef TC_ROW
    if (bits % 2 || bits > 10 || S % 8)
        return NULL;
    return table[bits / 2 - 1][S % 16 == 0];
}

/* B fragments for mma m16n8k16 (col-major B): lane l holds column l / 4,
 * rows 2 (l % 4) + {0, 1} (x) and + {8, 9} (y) of each 16-row block. The
 * weights are scaled by 2^s so that the largest component is just under
 * 2^15: products of samples (< 2^9) stay exact in float32 and the lo half
 * keeps its precision away from float16's subnormals. */
static int tc_fragments(const cbf_ddc_config *cfg, const float *z, uint2 *frag, float *scale)
{
    float big = 0.0f;
    for (int i = 0; i < 2 * cfg->taps; i++)
        big = fmaxf(big, fabsf(z[i]));
    int e = 0;
    (void)frexpf(big > 0.0f ? big : 1.0f, &e); /* big < 2^e */
    const int s = 15 - e;
    *scale = ldexpf(1.0f, -s);
    for (int kb = 0; kb < cfg->taps / 16; kb++)
        for (int lane = 0; lane < 32; lane++) {
            uint16_t v[4] = {0, 0, 0, 0};
            const int n = lane / 4;
            for (int j = 0; j < 4 && n < 4; j++) {
                const int k = kb * 16 + 2 * (lane % 4) + (j & 1) + (j >> 1) * 8;
                const float zs = ldexpf(z[2 * k + (n & 1)], s); /* exact: a power of 2 */
                const __half hi = __float2half_rn(zs);
                const __half h = n < 2 ? hi : __float2half_rn(zs - __half2float(hi));
                v[j] = __half_as_ushort(h);
            }
            frag[kb * 32 + lane] = make_uint2(v[0] | (uint32_t)v[1] << 16, v[2] | (uint32_t)v[3] << 16);
        }
    return 0;
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
    if (per_thread && per_thread != 4 && per_thread != 8 && per_thread != 16) {
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "ddc: per_thread %d: must be 0 (default), 4, 8 or 16", per_thread);
    }
    /* The default takes the tensor-core kernel where it applies and its
     * shared memory fits the default 48 KiB; the FMA kernel otherwise. */
    if (!per_thread && !(tc_pick(cfg->bits, cfg->decimation) &&
                         tc_smem(cfg->decimation, cfg->taps) <= 48 * 1024))
        per_thread = CBF_DDC_DEFAULT_PER_THREAD;
    cbf_ddc_cuda *p = (cbf_ddc_cuda *)calloc(1, sizeof(*p));
    if (!p)
        return CBF_KERN_ENOMEM;
    p->cfg = *cfg;
    p->per_thread = per_thread;
    cudaError_t e;
    if (per_thread) {
        size_t bytes = (size_t)cfg->taps * sizeof(float2);
        e = cudaMalloc((void **)&p->z, bytes);
        if (e == cudaSuccess)
            e = cudaMemcpy(p->z, z_host, bytes, cudaMemcpyHostToDevice);
    } else {
        size_t bytes = (size_t)cfg->taps * 2 * sizeof(uint2);
        uint2 *frag = (uint2 *)malloc(bytes);
        if (!frag) {
            free(p);
            return CBF_KERN_ENOMEM;
        }
        tc_fragments(cfg, z_host, frag, &p->scale);
        p->tc_outputs = tc_outputs(cfg->decimation);
        p->tc_smem = tc_smem(cfg->decimation, cfg->taps);
        e = cudaMalloc((void **)&p->bfrag, bytes);
        if (e == cudaSuccess)
            e = cudaMemcpy(p->bfrag, frag, bytes, cudaMemcpyHostToDevice);
        free(frag);
    }
    if (e != cudaSuccess) {
        cbf_ddc_cuda_destroy(p);
        return cbf_kern_cuda(e, msg, msglen, "ddc", "allocating the CUDA plan");
    }
    *out = p;
    return 0;
}

extern "C" int cbf_ddc_cuda_tensor(const cbf_ddc_cuda *plan)
{
    return plan->per_thread == 0;
}

extern "C" int cbf_ddc_cuda_run(cbf_ddc_cuda *plan, const cbf_ddc_job *job, void *stream,
                                char *msg, size_t msglen)
{
    const cbf_ddc_config *cfg = &plan->cfg;
    int rc = cbf_ddc_job_check(cfg, job, msg, msglen);
    if (rc || !job->outputs)
        return rc;
    const long long last_word = (long long)(cbf_packed_bytes(job->in_samples, cfg->bits) / 4) - 1;
    const uint32_t phase0 = cbf_ddc_phase(job->timestamp + job->start, cfg->mix_step);
    const uint32_t out_step = (uint32_t)((uint64_t)cfg->decimation * cfg->mix_step);
    if (!plan->per_thread) {
        const int M = plan->tc_outputs;
        dim3 grid((unsigned)(((long long)job->outputs + M - 1) / M), 2);
        tc_pick(cfg->bits, cfg->decimation)<<<grid, TC_THREADS, plan->tc_smem,
                                                (cudaStream_t)stream>>>(
            (const uint32_t *)job->in[0], (const uint32_t *)job->in[1], (long long)job->start,
            cfg->decimation, cfg->taps, M, plan->bfrag, plan->scale, phase0, out_step,
            (long long)job->outputs, last_word, (float2 *)job->out, (long long)job->out_pol_stride);
        CUDA_TRY(cudaGetLastError());
        return 0;
    }
    const int C = plan->per_thread;
    const long long threads = ((long long)job->outputs + C - 1) / C;
    dim3 grid((unsigned)((threads + BLOCK - 1) / BLOCK), 2);
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
    cudaFree(plan->bfrag);
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
