/* beamform.cu: the beamformer on the GPU's int8 tensor cores.
 *
 * For one channel the beams are a matrix product: the spectra x (antenna,
 * pol, re/im) bytes of the input, as they lie in memory, times a
 * (antenna, pol, re/im) x (beam, re/im) matrix of coefficients, zero at the
 * other pol's bytes. The coefficients are integers (beamform_math.h:
 * W x 2^e_b rounded, 23 bits with sign) split into three int8 digits, so a
 * warp's mma.sync m16n8k32 (s8 x s8 -> s32) sums are exact and the result
 * equals the CPU's bit for bit. At 8 beams a sample byte meets 24 digit
 * products, yet the tensor cores run them in about a quarter of the time
 * the input takes to read: the bound is memory bandwidth, as katgpucbf's
 * design (doc/xbgpu.design.b.rst) has it, and what keeps the kernel from
 * it is the CUDA cores' share (loads, coefficients, output; measured in
 * docs/performance.md).
 *
 * Block: one channel, BF_BSPEC spectra and a range of batches; BF_WARPS
 * warps of BF_MT m16 tiles (16 spectra each). Per pass over a group of
 * BF_GROUP beams (two n8 tiles: re and im of 4 beams each) and per stage
 * of BF_STAGE antennas, the block makes that channel's coefficient digits
 * in shared memory, laid out so each lane reads its B-fragment register
 * pairs whole; each warp then runs k-steps of 8 antennas (32 bytes per
 * spectrum), loading its sample words straight into A-fragment registers
 * with 8-byte loads, BF_NBUF - 1 k-steps ahead. Rows g and g + 8 of tile i
 * are spectra 16 i + 2 g and the next (g = lane / 4): mma leaves row order
 * to the caller, and that order makes one load the two rows of an antenna.
 * Presence is applied to the samples, so the coefficients serve every
 * batch of the block. More beams: more passes over the same input (from
 * L2). Without 8-byte alignment (spectra_per_heap odd) the same kernel
 * loads word by word.
 */
#include <cuda_runtime.h>

#include "beamform.h"
#include "beamform_math.h"
#include "cuda_check.h"
#include "cbf_mma.h"

#ifndef BF_WARPS
#define BF_WARPS 8                        /* warps per block */
#endif
#define BF_THREADS (32 * BF_WARPS)
#ifndef BF_MT
#define BF_MT 2                           /* m16 tiles per warp */
#endif
#define BF_WSPEC (16 * BF_MT)             /* spectra per warp */
#define BF_BSPEC (BF_WARPS * BF_WSPEC)    /* spectra per block */
#define BF_GROUP 8                        /* beams per pass: 2 n8 tiles of (re, im) x 4 beams */
#define BF_STAGE 64                       /* antennas whose coefficients are in shared memory */
#define BF_KS (BF_STAGE / 8)              /* k-steps per stage */
#ifndef BF_NBUF
#define BF_NBUF 3                         /* k-steps of samples in registers: loads run 2 ahead */
#endif

/* A k-step's samples: x[i] is tile i's A fragment, {antenna a, spectra t
 * and t + 1; antenna a + 4, the same spectra} with t = tw + 16 i + 2 g (rows
 * g and g + 8; g = lane / 4, a = 8 ks + lane % 4), two 8-byte loads that
 * land in the fragment's registers as they are; and the presence flags of
 * the two antennas, applied when the words are used (bf_mask), so no load
 * waits for another. */
typedef struct bf_frag {
    uint4 x[BF_MT];
    unsigned char lo, hi;
} bf_frag;

/* The coefficient fragments of one stage: for k-step kk, n-tile nt and the
 * lane that reads them, the B-fragment pairs (antenna a, antenna a + 4) of
 * digits 0 and 1 in one 16-byte word and of digit 2 in an 8-byte one:
 * each lane reads its own consecutive words, free of bank conflicts, into
 * the register pairs the mma takes. */
typedef struct bf_coefs {
    uint4 d01[BF_KS][2][32];
    uint2 d2[BF_KS][2][32];
} bf_coefs;

/* Where the next k-step's loads read, advanced step by step (no
 * multiplies per step): p is antenna a's word at the thread's first
 * spectrum, a = 8 ks + tig, pres the batch's presence flags. */
typedef struct bf_cursor {
    const unsigned *p;
    const uint8_t *pres;
    int a;
} bf_cursor;

static __device__ __forceinline__ void bf_advance(bf_cursor &k, int A, int nks, size_t kstride,
                                                  ptrdiff_t next_batch)
{
    k.p += kstride;
    k.a += 8;
    if (k.a >= 8 * nks) {
        k.a -= 8 * nks;
        k.p += next_batch;
        k.pres += A;
    }
}

/* Starts a k-step's loads (bf_frag). Antennas past A and spectra past the
 * heap read as zero. */
template <bool VEC>
static __device__ __forceinline__ void bf_load(bf_frag &f, const bf_cursor &k, int A, int T,
                                               size_t ant_stride, int tt)
{
    const bool ok_lo = k.a < A, ok_hi = k.a + 4 < A;
    f.lo = ok_lo ? k.pres[k.a] : 0;
    f.hi = ok_hi ? k.pres[k.a + 4] : 0;
    const unsigned *q = k.p + 4 * ant_stride;
#pragma unroll
    for (int i = 0; i < BF_MT; i++) {
        const int t = tt + 16 * i;
        uint2 lo = make_uint2(0, 0), hi = make_uint2(0, 0);
        if (VEC) {
            if (ok_lo && t < T)
                lo = __ldg((const uint2 *)(k.p + 16 * i));
            if (ok_hi && t < T)
                hi = __ldg((const uint2 *)(q + 16 * i));
        } else {
            lo.x = ok_lo && t < T ? __ldg(k.p + 16 * i) : 0u;
            lo.y = ok_lo && t + 1 < T ? __ldg(k.p + 16 * i + 1) : 0u;
            hi.x = ok_hi && t < T ? __ldg(q + 16 * i) : 0u;
            hi.y = ok_hi && t + 1 < T ? __ldg(q + 16 * i + 1) : 0u;
        }
        f.x[i] = make_uint4(lo.x, lo.y, hi.x, hi.y);
    }
}

/* An antenna missing from its batch adds nothing: its words as zeros. */
static __device__ __forceinline__ void bf_mask(bf_frag &f)
{
#pragma unroll
    for (int i = 0; i < BF_MT; i++) {
        if (!f.lo)
            f.x[i].x = f.x[i].y = 0u;
        if (!f.hi)
            f.x[i].z = f.x[i].w = 0u;
    }
}

/* Makes the coefficient digits of (antenna a0 + k, beam bg + j) for the
 * stage: the re and im output columns against the input word's bytes (pol
 * 0 re, im, pol 1 re, im), each as three digit words, stored where the
 * reading lanes find them (bf_coefs). */
static __device__ __forceinline__ void bf_coef_make(bf_coefs &sc, int k, int j, bf_cplx w, float scale,
                                                    int pol)
{
    const int32_t qr = bf_fixed(w.re, scale), qi = bf_fixed(w.im, scale);
    int8_t r[3], ni[3], i[3];
    bf_digits(qr, r);
    bf_digits(-qi, ni);
    bf_digits(qi, i);
    const int sh = pol ? 16 : 0;
    const int kk = k / 8, half = (k % 8) / 4, tig = k % 4, nt = j / 4;
#pragma unroll
    for (int part = 0; part < 2; part++) {
        /* re = qr xr - qi xi; im = qi xr + qr xi; column n = 2 (j % 4) + part
         * is read by lanes 4 n + tig */
        const int lane = 4 * (2 * (j % 4) + part) + tig;
        unsigned wd[3];
#pragma unroll
        for (int d = 0; d < 3; d++)
            wd[d] = part == 0 ? ((unsigned)(uint8_t)r[d] | (unsigned)(uint8_t)ni[d] << 8) << sh
                              : ((unsigned)(uint8_t)i[d] | (unsigned)(uint8_t)r[d] << 8) << sh;
        unsigned *d01 = (unsigned *)&sc.d01[kk][nt][lane], *d2 = (unsigned *)&sc.d2[kk][nt][lane];
        d01[half] = wd[0];
        d01[2 + half] = wd[1];
        d2[half] = wd[2];
    }
}

/* Block: spectra [BF_BSPEC x blockIdx.x, + BF_BSPEC) of channel blockIdx.y
 * in batches [batch0 + bpb x blockIdx.z, + bpb). Per group of beams the
 * block walks its batches' k-steps as one sequence, loads running BF_NBUF
 * steps ahead across batch ends; coefficients do not depend on the batch
 * (presence is applied to the samples), so with one stage of antennas they
 * are made once for all the block's batches. */
template <bool VEC>
__global__ void __launch_bounds__(BF_THREADS, 2)
bf_kernel(cbf_beam_job job, size_t batch0, int bpb, int t0, int t1, int block0)
{
    __shared__ __align__(16) bf_coefs s_c;
    __shared__ float s_scale[BF_GROUP], s_inv[BF_GROUP];
    __shared__ unsigned s_gmax[BF_GROUP], s_sat[BF_GROUP];
    const int A = job.shape.n_ants, B = job.shape.n_beams, C = job.shape.channels,
              T = job.shape.spectra_per_heap;
    const int tid = threadIdx.x, lane = tid & 31, g = lane >> 2, tig = lane & 3;
    const int c = blockIdx.y;
    const size_t nb0 = batch0 + (size_t)blockIdx.z * bpb;   /* the block's first batch */
    const int nbat = (int)min((size_t)bpb, job.batches - nb0);
    const int tw = (block0 + (int)blockIdx.x) * BF_BSPEC + (tid >> 5) * BF_WSPEC;
    const int tt = tw + 2 * g;                 /* this thread's first spectrum */
    const size_t ant_stride = (size_t)C * T;   /* words between antennas */
    const size_t kstride = 8 * ant_stride;     /* words between k-steps */
    const int nks = (A + 7) / 8, steps = nbat * nks;
    /* from a batch's last k-step to the next batch's first */
    const ptrdiff_t next_batch = (ptrdiff_t)A * (ptrdiff_t)ant_stride - (ptrdiff_t)nks * (ptrdiff_t)kstride;
    const bf_cursor start = {(const unsigned *)job.in + (nb0 * A * C + c) * (size_t)T +
                                 (size_t)tig * ant_stride + tt,
                             job.present + nb0 * A, tig};
    const bool one_stage = A <= BF_STAGE;
    /* the dither counter steps by this from spectrum to spectrum */
    const uint64_t ctr_step = job.total_channels * (uint64_t)B;
    if (tid < BF_GROUP)
        s_sat[tid] = 0;
    for (int bg = 0; bg < B; bg += BF_GROUP) {
        /* the first k-steps' samples, in flight while the scales and the
         * first coefficients are made */
        bf_frag x[BF_NBUF];
        bf_cursor ld = start;
#pragma unroll
        for (int u = 0; u < BF_NBUF; u++) {
            if (u < steps)
                bf_load<VEC>(x[u], ld, A, T, ant_stride, tt);
            bf_advance(ld, A, nks, kstride, next_batch);
        }
        /* the group's scales, from the largest |gain| of each beam */
        if (tid < BF_GROUP)
            s_gmax[tid] = 0;
        __syncthreads();
        for (int j = 0; j < BF_GROUP && bg + j < B; j++) {
            float m = 0.0f;
            for (int a = tid; a < A; a += BF_THREADS)
                m = fmaxf(m, fabsf(job.coef[(size_t)(bg + j) * A + a].gain));
            const unsigned wm = __reduce_max_sync(0xffffffffu, __float_as_uint(m));
            if (lane == 0)
                atomicMax(&s_gmax[j], wm);
        }
        __syncthreads();
        if (tid < BF_GROUP) {
            const int e = bf_beam_exp(__uint_as_float(s_gmax[tid]));
            s_scale[tid] = ldexpf(1.0f, e);
            s_inv[tid] = ldexpf(1.0f, -e);
        }
        int acc[BF_MT][2][3][4];
#pragma unroll
        for (int i = 0; i < BF_MT; i++)
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
                for (int d = 0; d < 3; d++)
#pragma unroll
                    for (int k = 0; k < 4; k++)
                        acc[i][nt][d][k] = 0;
        int ks = 0, nrel = 0;   /* the step being summed: k-step ks of batch nrel */
        /* unrolled by BF_NBUF so every buffer keeps its registers: a copy
         * between buffers would wait for the load in flight */
        for (int s0 = 0; s0 < steps; s0 += BF_NBUF) {
#pragma unroll
            for (int u = 0; u < BF_NBUF; u++) {
                if (s0 + u >= steps)
                    break;
                const int kk = ks % BF_KS;
                if (kk == 0 && (!one_stage || nrel == 0)) {
                    /* this stage's coefficient digits, once every warp is done with the last's */
                    const int a0 = ks * 8;
                    __syncthreads();
                    for (int idx = tid; idx < BF_STAGE * BF_GROUP; idx += BF_THREADS) {
                        const int k = idx / BF_GROUP, j = idx % BF_GROUP, a = a0 + k, b = bg + j;
                        const bool on = a < A && b < B;
                        const bf_cplx w = on ? bf_weight(&job.coef[(size_t)b * A + a], c, 1)
                                             : bf_cplx{0.0f, 0.0f};
                        bf_coef_make(s_c, k, j, w, s_scale[j], on ? job.pol[b] : 0);
                    }
                    __syncthreads();
                }
                bf_mask(x[u]);
#pragma unroll
                for (int nt = 0; nt < 2; nt++) {
                    const uint4 w01 = s_c.d01[kk][nt][lane];
                    const uint2 w2 = s_c.d2[kk][nt][lane];
#pragma unroll
                    for (int i = 0; i < BF_MT; i++) {
                        const uint4 a = x[u].x[i];
                        cbf_mma_s8(acc[i][nt][0], a.x, a.y, a.z, a.w, w01.x, w01.y);
                        cbf_mma_s8(acc[i][nt][1], a.x, a.y, a.z, a.w, w01.z, w01.w);
                        cbf_mma_s8(acc[i][nt][2], a.x, a.y, a.z, a.w, w2.x, w2.y);
                    }
                }
                /* the buffer is free again: the step BF_NBUF on */
                if (s0 + u + BF_NBUF < steps)
                    bf_load<VEC>(x[u], ld, A, T, ant_stride, tt);
                bf_advance(ld, A, nks, kstride, next_batch);
                if (++ks < nks)
                    continue;
                /* the batch's last k-step: its beams out. Tile i, n-tile nt
                 * holds beam bg + 4 nt + tig, (re, im) in acc[..][0, 1] at
                 * spectrum tt + 16 i and [2, 3] at the next */
                const size_t n = nb0 + nrel;
                ks = 0;
                nrel++;
#pragma unroll
                for (int nt = 0; nt < 2; nt++) {
                    const int j = nt * 4 + tig, b = bg + j;
                    unsigned sat = 0;
                    const uint64_t ctr0 =
                        ((job.first_spectrum + n * T + tt) * job.total_channels + job.first_channel + c) *
                            (uint64_t)B + (uint64_t)b;
                    char2 *out = (char2 *)job.out + ((n * B + b) * C + c) * (size_t)T;
#pragma unroll
                    for (int i = 0; i < BF_MT; i++)
#pragma unroll
                        for (int h = 0; h < 2; h++) {
                            int(&q)[3][4] = acc[i][nt];
                            const int t = tt + 16 * i + h;
                            const int64_t sr = 65536ll * q[0][2 * h] + 256ll * q[1][2 * h] + q[2][2 * h];
                            const int64_t si =
                                65536ll * q[0][2 * h + 1] + 256ll * q[1][2 * h + 1] + q[2][2 * h + 1];
#pragma unroll
                            for (int d = 0; d < 3; d++)
                                q[d][2 * h] = q[d][2 * h + 1] = 0;
                            if (b >= B || t < t0 || t >= t1)
                                continue;
                            const bf_cplx v = {bf_unfix(sr, s_inv[j]), bf_unfix(si, s_inv[j])};
                            if (job.raw)
                                ((float2 *)job.raw)[((n * B + b) * C + c) * (size_t)T + t] =
                                    make_float2(v.re, v.im);
                            int8_t o[2];
                            sat += (unsigned)bf_output(v, job.dither, job.dither_key,
                                                       ctr0 + (uint64_t)(16 * i + h) * ctr_step, o);
                            out[t] = make_char2(o[0], o[1]);
                        }
                    if (sat)
                        atomicAdd(&s_sat[j], sat);
                }
            }
        }
        __syncthreads();
        if (tid < BF_GROUP) {
            if (s_sat[tid] && bg + tid < B)
                atomicAdd((unsigned long long *)&job.saturated[bg + tid],
                          (unsigned long long)s_sat[tid]);
            s_sat[tid] = 0;
        }
    }
}

extern "C" int cbf_beam_cuda_run(const cbf_beam_job *job, void *stream, char *msg, size_t msglen)
{
    int rc = cbf_beam_job_check(job, msg, msglen);
    if (rc || !job->batches)
        return rc;
    int t0, t1;   /* the job's span of spectra in every heap */
    cbf_beam_job_span(job, &t0, &t1);
    /* 8-byte loads need every antenna's run of spectra 8-byte aligned */
    const bool vec = job->shape.spectra_per_heap % 2 == 0 && (uintptr_t)job->in % 8 == 0;
    const int block0 = t0 / BF_BSPEC, blocks = (t1 - 1) / BF_BSPEC + 1 - block0;
    /* Batches per block: as many as keep about 8 blocks per SM in the grid
     * (each block's coefficients serve all its batches). */
    int dev, sms;
    CBF_KERN_CUDA_TRY("beamformer", cudaGetDevice(&dev));
    CBF_KERN_CUDA_TRY("beamformer", cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const size_t xy = (size_t)blocks * (size_t)job->shape.channels, want = (size_t)sms * 8;
    const size_t zs = xy >= want ? 1 : (want + xy - 1) / xy;
    size_t bpb = (job->batches + zs - 1) / zs;
    if (bpb > 64)
        bpb = 64;
    cudaStream_t st = (cudaStream_t)stream;
    const size_t per_launch = bpb * 65535;
    for (size_t b0 = 0; b0 < job->batches; b0 += per_launch) {
        const size_t nb = job->batches - b0 < per_launch ? job->batches - b0 : per_launch;
        const dim3 grid((unsigned)blocks, (unsigned)job->shape.channels, (unsigned)((nb + bpb - 1) / bpb));
        if (vec)
            bf_kernel<true><<<grid, BF_THREADS, 0, st>>>(*job, b0, (int)bpb, t0, t1, block0);
        else
            bf_kernel<false><<<grid, BF_THREADS, 0, st>>>(*job, b0, (int)bpb, t0, t1, block0);
        CBF_KERN_CUDA_TRY("beamformer", cudaGetLastError());
    }
    return 0;
}
