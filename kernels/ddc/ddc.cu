/* ddc.cu: the down-converter on the GPU, two kernels behind one plan.
 *
 * The tensor-core kernel (the default where it applies: even bits up to 10,
 * S a power of two from 8) treats the filter as a matrix product on
 * mma.sync m16n8k16 (float16 in, float32 accumulation): row r of A holds
 * the samples from 4 r S on, and B holds z shifted by 0, S, 2 S and 3 S, so
 * that one row gives four outputs (tc_shape_of says more). z enters as two
 * float16 halves, hi = half(z 2^s) and lo = half(z 2^s - hi), each
 * multiplied into the same accumulator: samples of up to 11 bits are exact
 * in float16 and hi + lo holds z to about 2^-22, well inside ddc.h's
 * float32 error bound. The 2 taps real-by-complex products per output
 * then cost about one tensor-core instruction per 64 samples, and the FP32
 * arithmetic ceiling that binds the FMA kernel stops mattering. What is
 * left is moving samples: a block decodes the packed span its outputs read
 * into float16 in shared memory once (bit positions are constants of the
 * template; the block's start alignment is shifted out word by word with
 * one funnel shift), then ldmatrix reads the rows, (taps + 3 S) / (4 S)
 * times per sample. Each input byte is read from memory once, bar the
 * taps + 3 S - 4 S halo per block of about 8192 samples.
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
#include <limits.h>
#include <math.h>
#include <stdlib.h>


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

#define TC_THREADS 128 /* 4 warps */
#define TC_GROUP 16    /* samples one thread decodes at once: bits / 2 whole words */

/* Layout: A row r holds the samples from r 4 S on, K of them (K = taps +
 * 3 S rounded up to 16), and B column 2 j + c is component c of z shifted
 * by j S (zero outside the taps), so that C[r][2 j + c] is output 4 r + j:
 * four outputs per row, whose windows overlap in all but 3 S samples. Each
 * sample is read from shared memory K / 4 S = (W + 3) / 4 times, not W
 * times as one output per row would need, and every lane ends with whole
 * outputs (rows g and g + 8, output t of each: lane = 4 g + t). Every warp
 * runs NT 16-row tiles per B fragment load (NT = 32 / S, at least 1: about
 * 8192 samples per block). With NT = 1 (S >= 32) a B fragment would cost
 * shared-memory bandwidth equal to its tile's A rows, and shared-memory
 * space that caps the blocks per SM: the NT = 1 kernel reads its fragments
 * from global memory instead, one coalesced 512-byte load per k step and
 * warp, which stays in L1 (the same 11 KB at S = 32, taps 256, for every
 * block). Its shared memory then holds only the samples (17 KB there) and
 * it needs 32 registers, so 13 blocks fit an SM instead of 8 (B partly in
 * registers, partly in shared memory, before): more warps to hide the
 * decode's load latency. Same products in the same order, so the same
 * bits. */
struct tc_shape {
    int nt, rows, ksteps, groups, swz_shift, swz_mask;
    size_t smem;
};

static int tc_log2(int v)
{
    int l = 0;
    while ((1 << l) < v)
        l++;
    return l;
}

/* ldmatrix reads 8 rows 4 S samples (S / 2 16-byte chunks) apart at once;
 * chunk c is stored at c ^ ((c >> shift) & mask), which puts any 8 such
 * rows on 8 different 16-byte bank groups (checked exhaustively for S = 8
 * to 128 when the swizzle was chosen). S a power of two from 8. */
static tc_shape tc_shape_of(int S, int taps)
{
    tc_shape sh;
    sh.nt = S >= 32 ? 1 : 32 / S;
    sh.rows = 64 * sh.nt;
    sh.ksteps = (taps + 3 * S + 15) / 16;
    sh.groups = ((sh.rows - 1) * 4 * S + sh.ksteps * 16 + TC_GROUP - 1) / TC_GROUP;
    const int chunks = S / 2;
    sh.swz_shift = chunks <= 8 ? 3 : tc_log2(chunks);
    sh.swz_mask = chunks == 4 ? 3 : 7;
    /* B fragments when NT > 1 (32 lanes x 16 bytes per k step), then the
     * samples, whole groups of 8 chunks (the swizzle permutes within them). */
    sh.smem = (size_t)(sh.nt > 1 ? sh.ksteps : 0) * 512 +
              ((size_t)sh.groups * TC_GROUP * 2 + 127) / 128 * 128;
    return sh;
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

__device__ __forceinline__ void tc_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int BITS, int NT, bool SWAP>
__global__ void __launch_bounds__(TC_THREADS) ddc_tc_kernel(
    const uint32_t *__restrict__ in0, const uint32_t *__restrict__ in1, long long start, int S,
    int ksteps, int groups, int swz_shift, int swz_mask, const uint4 *__restrict__ bfrag,
    float scale, uint32_t phase0, uint32_t out_step, long long outputs, int lead,
    long long last_word, float2 *__restrict__ out, long long pol_stride)
{
    static_assert(BITS % 2 == 0 && BITS <= 10, "16 samples in whole words, exact in float16");
    extern __shared__ uint4 smem[];
    /* [ksteps][32 lanes]: hi b0 b1, lo b0 b1; NT = 1 reads bfrag instead. */
    const int bsm = NT > 1 ? ksteps * 32 : 0;
    const uint4 *bs = smem;
    unsigned char *xs = (unsigned char *)(smem + bsm); /* float16, swizzled */
    for (int i = threadIdx.x; i < bsm; i += TC_THREADS)
        smem[i] = bfrag[i];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, mat = lane >> 3;
    const int M = 4 * 64 * NT; /* outputs per block */

    /* Output m is the block's output v = m + lead: an output's place in its
     * row (v % 4) then follows the absolute output grid, not the job, so the
     * tensor cores sum its products in the same order however the stream is
     * cut into jobs, and outputs are the same bits for any chunking. Row r
     * of block b starts at sample start + (4 (64 NT b + r) - lead) S, before
     * the job's first sample in block 0 (those rows feed no output).
     *
     * Decode. Group g holds samples first + 16 g ...: BITS / 2 words from
     * bit (first + 16 g) BITS, i.e. from word word0 + g BITS / 2 shifted
     * left by the block's (uniform) bit offset rel. */
    const int pol = blockIdx.y;
    const uint32_t *w = pol ? in1 : in0;
    const long long first = start + ((long long)blockIdx.x * M - lead) * S;
    const long long word0 = (first * BITS) >> 5;
    const int rel = (int)((first * BITS) & 31);
    /* Sign flip and the float16 exponent of 1024 in one XOR: 1024 + (v +
     * 2^(BITS-1)) as a float16, less the bias below, is v exactly. */
    constexpr uint32_t FLIP = (0x6400u | 1u << (BITS - 1)) * 0x10001u;
    constexpr uint32_t MASK = (1u << BITS) - 1;
    const __half2 bias = __float2half2_rn(1024.0f + (float)(1 << (BITS - 1)));
    /* Loads from one base with constant offsets, clamped to the buffer
     * [w, w + last_word] only in the groups that reach past it (the first
     * and last blocks'): the decode's integer work is what bounds the
     * kernel. Indices are relative to word0: [wlo, lim] is the buffer. */
    const uint32_t *wb = w + word0;
    const int lim = (int)min(last_word - word0, (long long)INT_MAX);
    const int wlo = (int)max(-word0, -(long long)INT_MAX);
    for (int g = threadIdx.x; g < groups; g += TC_THREADS) {
        uint32_t raw[BITS / 2 + 1], a[BITS / 2];
        const int wi = g * (BITS / 2);
        if (wi >= wlo && wi + BITS / 2 <= lim) {
#pragma unroll
            for (int k = 0; k <= BITS / 2; k++)
                raw[k] = __ldg(wb + wi + k);
        } else {
#pragma unroll
            for (int k = 0; k <= BITS / 2; k++)
                raw[k] = __ldg(wb + max(wlo, min(wi + k, lim)));
        }
#pragma unroll
        for (int k = 0; k <= BITS / 2; k++)
            raw[k] = __byte_perm(raw[k], 0, 0x0123);
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
        /* Chunks 2 g and 2 g + 1 land on p and p ^ 1 (swz_shift >= 3). With
         * S >= 32 the swizzle leaves 8 lanes' chunks 2 g on 4 bank groups;
         * lanes 4-7 of each 8 storing their odd chunk first spreads them
         * over 8 (SWAP). */
        const int p = (2 * g) ^ ((2 * g >> swz_shift) & swz_mask);
        const uint4 lo = make_uint4(h[0], h[1], h[2], h[3]), hi = make_uint4(h[4], h[5], h[6], h[7]);
        const int f = SWAP ? (threadIdx.x >> 2) & 1 : 0;
        *(uint4 *)(xs + 16 * (p ^ f)) = f ? hi : lo;
        *(uint4 *)(xs + 16 * (p ^ f ^ 1)) = f ? lo : hi;
    }
    __syncthreads();

    /* Products. ldmatrix.x4: lanes 8 j .. 8 j + 7 address matrix j's rows
     * (rows 0-7 then 8-15 of k 0-7, then of k 8-15). */
    const int arow = (lane & 7) + (mat & 1) * 8;
    const uint32_t xs_sh = (uint32_t)__cvta_generic_to_shared(xs);
    float c[NT][4];
#pragma unroll
    for (int i = 0; i < NT; i++)
        c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0.0f;
    /* Chunk of this lane's row in tile i at k step 0; a k step is 2 chunks. */
    const int chunk0 = ((warp * NT * 16 + arow) * 4 * S + (mat >> 1) * 8) >> 3;
    auto kstep = [&](const uint4 b, int kb) {
#pragma unroll
        for (int i = 0; i < NT; i++) {
            const int ch = chunk0 + i * 8 * S + 2 * kb; /* 16 rows of 4 S samples = 8 S chunks */
            uint32_t a[4];
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                         : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                         : "r"(xs_sh + 16 * (uint32_t)(ch ^ ((ch >> swz_shift) & swz_mask))));
            tc_mma(c[i], a, b.x, b.y);
            tc_mma(c[i], a, b.z, b.w);
        }
    };
    for (int kb = 0; kb < ksteps; kb++)
        kstep(NT > 1 ? bs[kb * 32 + lane] : __ldg(bfrag + kb * 32 + lane), kb);

    /* Lane 4 g + t holds output t of rows g and g + 8 of each tile. */
    const long long base = (long long)blockIdx.x * M;
    float2 *o = out + pol * pol_stride;
#pragma unroll
    for (int i = 0; i < NT; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const long long m =
                base + ((warp * NT + i) * 16 + (lane >> 2) + 8 * h) * 4 + (lane & 3) - lead;
            if (m >= 0 && m < outputs)
                o[m] = rotate(__fmul_rn(c[i][2 * h], scale), __fmul_rn(c[i][2 * h + 1], scale),
                              phase0 + (uint32_t)m * out_step);
        }
}

typedef void (*tc_fn)(const uint32_t *, const uint32_t *, long long, int, int, int, int, int,
                      const uint4 *, float, uint32_t, uint32_t, long long, int, long long,
                      float2 *, long long);

/* The tensor-core kernel applies to even bits up to 10 (16 samples fill
 * whole words; 1024 + 2^(bits-1) values fit float16's mantissa) and S a
 * power of two from 8 (ldmatrix rows on 16-byte boundaries; the swizzle). */
static tc_fn tc_pick(int bits, int S)
{
#define TC_ROW(b)                                                                            \
    {ddc_tc_kernel<b, 4, false>, ddc_tc_kernel<b, 2, false>, ddc_tc_kernel<b, 1, true>}
    static const tc_fn table[5][3] = {TC_ROW(2), TC_ROW(4), TC_ROW(6), TC_ROW(8), TC_ROW(10)};
#undef TC_ROW
    if (bits % 2 || bits > 10 || S < 8 || (S & (S - 1)))
        return NULL;
    return table[bits / 2 - 1][S == 8 ? 0 : S == 16 ? 1 : 2];
}

/* B fragments for mma m16n8k16 (col-major B): lane l holds column n = l / 4,
 * rows 2 (l % 4) + {0, 1} (b0) and + {8, 9} (b1) of each 16-row k step;
 * column n is component n % 2 of z shifted by (n / 2) S. The weights are
 * scaled by 2^s so that the largest component is just under 2^15: products
 * with samples (< 2^9) stay exact in float32 and the lo half keeps its
 * precision away from float16's subnormals. */
static void tc_fragments(const cbf_ddc_config *cfg, const float *z, int ksteps, uint4 *frag,
                         float *scale)
{
    float big = 0.0f;
    for (int i = 0; i < 2 * cfg->taps; i++)
        big = fmaxf(big, fabsf(z[i]));
    int e = 0;
    (void)frexpf(big > 0.0f ? big : 1.0f, &e); /* big < 2^e */
    const int s = 15 - e;
    *scale = ldexpf(1.0f, -s);
    for (int kb = 0; kb < ksteps; kb++)
        for (int lane = 0; lane < 32; lane++) {
            uint32_t v[2][4] = {{0}}; /* [hi, lo][element] as float16 bits */
            const int n = lane / 4, shift = (n / 2) * cfg->decimation;
            for (int j = 0; j < 4; j++) {
                const int k = kb * 16 + 2 * (lane % 4) + (j & 1) + (j >> 1) * 8 - shift;
                if (k < 0 || k >= cfg->taps)
                    continue;
                const float zs = ldexpf(z[2 * k + n % 2], s); /* exact: a power of 2 */
                const __half hi = __float2half_rn(zs);
                v[0][j] = __half_as_ushort(hi);
                v[1][j] = __half_as_ushort(__float2half_rn(zs - __half2float(hi)));
            }
            frag[kb * 32 + lane] = make_uint4(v[0][0] | v[0][1] << 16, v[0][2] | v[0][3] << 16,
                                              v[1][0] | v[1][1] << 16, v[1][2] | v[1][3] << 16);
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

struct cbf_ddc_cuda {
    cbf_ddc_config cfg;
    int per_thread; /* 0: the tensor-core kernel */
    float2 *z;      /* device, taps (FMA kernel) */
    uint4 *bfrag;   /* device, the tensor-core B fragments: [k steps][32 lanes] */
    float scale;    /* 2^-s, undoes the weights' scaling (tensor-core kernel) */
    struct tc_shape tc;
};

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
     * shared memory fits an SM comfortably; the FMA kernel otherwise. */
    const tc_shape tsh = tc_shape_of(cfg->decimation, cfg->taps);
    const tc_fn tc = tc_pick(cfg->bits, cfg->decimation);
    if (!per_thread && !(tc && tsh.smem <= 96 * 1024))
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
        size_t bytes = (size_t)tsh.ksteps * 32 * sizeof(uint4);
        uint4 *frag = (uint4 *)malloc(bytes);
        if (!frag) {
            free(p);
            return CBF_KERN_ENOMEM;
        }
        tc_fragments(cfg, z_host, tsh.ksteps, frag, &p->scale);
        p->tc = tsh;
        e = cudaFuncSetAttribute(tc, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tsh.smem);
        if (e == cudaSuccess)
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
        const tc_shape *sh = &plan->tc;
        const long long M = 4LL * sh->rows;
        /* Output 0's place in its row: its absolute output number mod 4. */
        const int lead = (int)((job->timestamp + job->start) / (uint64_t)cfg->decimation % 4);
        dim3 grid((unsigned)(((long long)job->outputs + lead + M - 1) / M), 2);
        tc_pick(cfg->bits, cfg->decimation)<<<grid, TC_THREADS, sh->smem,
                                               (cudaStream_t)stream>>>(
            (const uint32_t *)job->in[0], (const uint32_t *)job->in[1], (long long)job->start,
            cfg->decimation, sh->ksteps, sh->groups, sh->swz_shift, sh->swz_mask, plan->bfrag,
            plan->scale, phase0, out_step, (long long)job->outputs, lead, last_word,
            (float2 *)job->out, (long long)job->out_pol_stride);
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
