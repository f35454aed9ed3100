/* beamform.cu: the beamformer on the GPU's int8 tensor cores.
 *
 * For one channel the beams are a matrix product: the spectra x (antenna,
 * pol, re/im) bytes of the input, as they lie in memory, times a
 * (antenna, pol, re/im) x (beam, re/im) matrix of coefficients, zero at the
 * other pol's bytes. The coefficients are integers (beamform_math.h:
 * W x 2^e_b rounded, 15 bits with sign) split into two int8 digits, so a
 * warp's mma.sync m16n8k32 (s8 x s8 -> s32) sums are exact and the result
 * equals the CPU's bit for bit. At 8 beams a sample byte meets 16 digit
 * products, yet the tensor cores run them in a fraction of the time
 * the input takes to read: the bound is memory bandwidth, as katgpucbf's
 * design (doc/xbgpu.design.b.rst) has it, and what keeps a kernel from it
 * is the CUDA cores' share (copies, coefficients, output; measured in
 * docs/notes/performance-history.md).
 *
 * Block: one channel, BF_BSPEC spectra and a range of batches; BF_WARPS
 * warps of BF_MT m16 tiles (16 spectra each). The block makes the
 * channel's coefficient digits for a group of BF_GROUP beams (two n8
 * tiles: re and im of 4 beams each) and a stage of BF_STAGE antennas in
 * shared memory, laid out so each lane reads its B-fragment registers
 * whole. Each warp streams its own spectra through its own ring of BF_NS
 * shared-memory buffers with cp.async, BF_NS - 1 k-steps (8 antennas, its
 * 32 spectra: 1 KB) ahead, so no block barrier paces the stream: an
 * absent antenna or a spectrum past the heap is copied as zeros (source
 * size 0), and the k-step reads its A fragments from the buffer
 * (conflict-free 8-byte loads: rows padded to 8 words mod 32). Rows g and
 * g + 8 of tile i are spectra 16 i + 2 g and the next (g = lane / 4): mma
 * leaves row order to the caller, and that order puts a pair of spectra
 * of one antenna in one load, and both spectra of an output pair in one
 * lane, stored as one word. Presence is applied to the samples, so the
 * coefficients serve every batch of the block. More beams: more passes
 * over the same input (from L2). Without 16-byte alignment (spectra_per_heap
 * not a multiple of 4) the same kernel copies word by word.
 */
#include <cuda_runtime.h>

#include "beamform.h"
#include "beamform_dev.cuh"
#include "beamform_math.h"
#include "beamform_tuning.h"
#include "cbf_async.h"
#include "cbf_mma.h"
#include "cuda_check.h"

/* BF_WARPS, BF_NS, BF_MINB and BF_FILL: beamform_tuning.h */
#define BF_THREADS (32 * BF_WARPS)
#define BF_MT 2                           /* m16 tiles per warp */
#define BF_WSPEC (16 * BF_MT)             /* spectra per warp: 32 */
#define BF_BSPEC (BF_WARPS * BF_WSPEC)    /* spectra per block */
#define BF_ROW (BF_WSPEC + 8)             /* words per antenna row of a buffer (8 mod 32) */

/* One warp's k-step of samples: 8 antennas x its 32 spectra, words. */
typedef unsigned bf_buf[8][BF_ROW];

/* Dynamic shared memory: the coefficients, then each warp's ring. */
struct bf_smem {
    bf_coefs c;
    bf_buf x[BF_WARPS][BF_NS];
};

/* The copy side of a warp's stream: the next k-step to copy, k-step ks
 * of the block's batch n. The lane copies rows r (and r + 4: VEC) of it,
 * antenna a = 8 ks + r: p is that row's word at the lane's first spectrum,
 * pres its presence flag; gaps says whether batch n misses any antenna
 * (only then are the flags read); left counts the k-steps still to copy. */
typedef struct bf_feed {
    const unsigned *p;
    const uint8_t *pres;
    int a, ks, n, left;
    bool gaps;
} bf_feed;

/* What every copy of a block shares. */
typedef struct bf_plan {
    size_t ant_stride;        /* words between antennas */
    ptrdiff_t next_batch;     /* from a batch's last k-step (advanced) to the next batch's first */
    int A, nks;
    unsigned long long absent; /* the block's batches that miss an antenna */
} bf_plan;

/* Copies the feed's k-step into the buffer at shared address dst (the
 * lane's first word there) and steps on. VEC: the lane copies spectra
 * 4 (lane % 8) .. + 3 of rows r = lane / 8 and r + 4, 16 bytes each;
 * otherwise its one spectrum of all 8 rows, 4 bytes each. A copy of an
 * antenna past A or absent from its batch, or of spectra past the heap
 * (in_t false), writes zeros. One commit group per call, empty or not, so
 * the wait counts stay exact. */
template <bool VEC>
static __device__ __forceinline__ void bf_copy(unsigned dst, bf_feed &f, const bf_plan &pl, bool in_t)
{
    if (f.left > 0) {
#pragma unroll
        for (int h = 0; h < (VEC ? 2 : 8); h++) {
            const int r = VEC ? 4 * h : h; /* rows past the feed's */
            const bool ok = in_t && f.a + r < pl.A && (!f.gaps || __ldg(f.pres + r));
            const unsigned *src = f.p + (size_t)r * pl.ant_stride;
            if (VEC)
                cbf_cp_async16(dst + 4u * BF_ROW * 4u * h, ok ? src : f.p, ok ? 16 : 0);
            else
                cbf_cp_async4(dst + 4u * BF_ROW * r, ok ? src : f.p, ok ? 4 : 0);
        }
        f.left--;
        f.p += 8 * pl.ant_stride;
        f.pres += 8;
        f.a += 8;
        if (++f.ks == pl.nks) {
            f.ks = 0;
            f.a -= 8 * pl.nks;
            f.n++;
            f.p += pl.next_batch;
            f.pres += pl.A - 8 * pl.nks;
            f.gaps = f.n < 64 && ((pl.absent >> f.n) & 1ull);
        }
    }
    cbf_cp_commit();
}

/* Block: spectra [BF_BSPEC x blockIdx.x, + BF_BSPEC) of channel blockIdx.y
 * in batches [batch0 + bpb x blockIdx.z, + bpb). Per group of beams each
 * warp walks the block's batches' k-steps as one stream, copies running
 * BF_NS - 1 steps ahead across batch ends, the buffer slots rotating;
 * coefficients do not depend on the batch (presence is applied to the
 * samples), so with one stage of antennas they are made once for all the
 * block's batches. */
template <bool VEC, bool RAW>
__global__ void __launch_bounds__(BF_THREADS, BF_MINB)
bf_kernel(cbf_beam_job job, size_t batch0, int bpb, int t0, int t1, int block0)
{
    extern __shared__ __align__(16) unsigned char bf_dyn[];
    bf_smem &sm = *(bf_smem *)bf_dyn;
    __shared__ float s_scale[BF_GROUP], s_inv[BF_GROUP];
    __shared__ unsigned s_sat[BF_GROUP];
    __shared__ unsigned long long s_absw[BF_WARPS];
    const int A = job.shape.n_ants, B = job.shape.n_beams, C = job.shape.channels,
              T = job.shape.spectra_per_heap;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tig = lane & 3;
    /* Channels last to first: beside the correlator (which takes them
     * first to last and fills the SMs' shared memory, so most of these
     * blocks start as it ends) the first blocks find its last channels
     * still in L2. 1-2% less time beside it than first to last, the same
     * alone (docs/notes/performance-history.md). */
    const int c = (int)(gridDim.y - 1 - blockIdx.y);
    const size_t nb0 = batch0 + (size_t)blockIdx.z * bpb; /* the block's first batch */
    const int nbat = (int)min((size_t)bpb, job.batches - nb0);
    const int tw = (block0 + (int)blockIdx.x) * BF_BSPEC + warp * BF_WSPEC; /* the warp's first spectrum */
    const int tt = tw + 2 * g;                 /* this lane's first output spectrum */
    const int nks = (A + 7) / 8;
    const bool one_stage = A <= BF_STAGE;
    /* the lane's copies: row r0 (and r0 + 4) from spectrum tl */
    const int r0 = VEC ? lane >> 3 : 0, tl = tw + (VEC ? 4 * (lane & 7) : lane);
    const size_t ant_stride = (size_t)C * T;
    /* dither states (beamform_math.h's draws): dz from one draw to the
     * next (two spectra), z00 that of draw 0 of beam tig */
    const uint64_t dz = job.total_channels * (uint64_t)B * CBF_DITHER_GAMMA;
    const uint64_t z00 = cbf_dither_state(job.dither_key, (job.first_channel + c) * (uint64_t)B + tig);
    /* shared addresses: the lane's first copied word in slot 0, its first
     * A-fragment word (row tig, spectrum 2 g) in slot 0; slots follow
     * each other */
    const unsigned ring = cbf_smem_addr(&sm.x[warp][0][0][0]);
    const unsigned cdst0 = ring + 4u * (r0 * BF_ROW + (tl - tw));
    const unsigned *xsrc0 = &sm.x[warp][0][tig][2 * g];
    const unsigned slot_bytes = sizeof(bf_buf);

    /* Before the first barrier, both reads the block starts with: the
     * presence flags (which of its batches miss an antenna: only their
     * copies read the flags; each warp's part, ORed after the barrier)
     * and the first group's gains (its scales). */
    {
        unsigned long long m = 0;
        for (int idx = tid; idx < nbat * A; idx += BF_THREADS)
            if (!job.present[nb0 * A + idx])
                m |= 1ull << (idx / A);
        const unsigned lo = __reduce_or_sync(0xffffffffu, (unsigned)m),
                       hi = __reduce_or_sync(0xffffffffu, (unsigned)(m >> 32));
        if (lane == 0)
            s_absw[warp] = (unsigned long long)hi << 32 | lo;
    }
    bf_scales(job, 0, s_scale, s_inv, warp, BF_WARPS);
    if (tid < BF_GROUP)
        s_sat[tid] = 0;
    __syncthreads();
    unsigned long long absent = 0;
#pragma unroll
    for (int w = 0; w < BF_WARPS; w++)
        absent |= s_absw[w];
    const bf_plan pl = {ant_stride, (ptrdiff_t)A * (ptrdiff_t)ant_stride - (ptrdiff_t)nks * 8 * (ptrdiff_t)ant_stride,
                        A, nks, absent};
    const bool in_t = tl < T;
    /* which of the lane's output pairs (spectra tt + 16 i and the next)
     * lie wholly inside the job's span: those store one word, no checks */
    unsigned whole = 0;
#pragma unroll
    for (int i = 0; i < BF_MT; i++)
        whole |= (unsigned)(tt + 16 * i >= t0 && tt + 16 * i + 1 < t1) << i;

    /* the sums; each batch's output zeroes them again, so every group
     * (every block has at least one batch) starts from zero */
    int acc[BF_MT][2][BF_DIGITS][4] = {};
    for (int bg = 0; bg < B; bg += BF_GROUP) {
        /* the first k-steps' copies, in flight while the first
         * coefficients are made */
        bf_feed f = {(const unsigned *)job.in + (nb0 * A * C + c) * (size_t)T + (size_t)r0 * ant_stride + tl,
                     job.present + nb0 * A + r0, r0, 0, 0, nbat * nks, (bool)(pl.absent & 1ull)};
#pragma unroll
        for (int u = 0; u < BF_NS - 1; u++)
            bf_copy<VEC>(cdst0 + u * slot_bytes, f, pl, in_t);
        /* a later group's scales (the last group's readers passed the
         * barrier at its end; the first stage's barrier shows them) */
        if (bg)
            bf_scales(job, bg, s_scale, s_inv, warp, BF_WARPS);
        unsigned sat[2] = {0u, 0u};
        const uint64_t zb = z00 + (uint64_t)bg * CBF_DITHER_GAMMA; /* beam bg + tig's draw 0 */
        int slot = 0, cslot = BF_NS - 1;                      /* summed, being filled */
        for (int n = 0; n < nbat; n++) {
            for (int ks = 0; ks < nks; ks++) {
                const int kk = ks % BF_KS;
                if (kk == 0 && (!one_stage || n == 0)) {
                    /* this stage's coefficient digits, once every warp is done with the last's */
                    __syncthreads();
                    bf_stage_make(sm.c, job, s_scale, bg, ks * 8, c, tid, BF_THREADS);
                    __syncthreads();
                }
                /* this step's copies are done (this lane's), and every
                 * lane's, and every lane is past reading the slot the next
                 * copy fills */
                cbf_cp_wait<BF_NS - 2>();
                __syncwarp();
                bf_copy<VEC>(cdst0 + cslot * slot_bytes, f, pl, in_t);
                const unsigned *xs = xsrc0 + slot * (slot_bytes / 4);
                uint4 x[BF_MT];
#pragma unroll
                for (int i = 0; i < BF_MT; i++) {
                    const uint2 lo = *(const uint2 *)(xs + 16 * i);
                    const uint2 hi = *(const uint2 *)(xs + 4 * BF_ROW + 16 * i);
                    x[i] = make_uint4(lo.x, lo.y, hi.x, hi.y);
                }
#pragma unroll
                for (int nt = 0; nt < 2; nt++) {
                    const uint4 w01 = sm.c.d01[kk][nt][lane];
#pragma unroll
                    for (int i = 0; i < BF_MT; i++)
#pragma unroll
                        for (int d = 0; d < BF_DIGITS; d++) {
                            const uint2 wd = bf_digit_frag(w01, d);
                            cbf_mma_s8(acc[i][nt][d], x[i].x, x[i].y, x[i].z, x[i].w, wd.x, wd.y);
                        }
                }
                slot = slot == BF_NS - 1 ? 0 : slot + 1;
                cslot = cslot == BF_NS - 1 ? 0 : cslot + 1;
            }
            /* the batch's beams out. Tile i, n-tile nt holds beam
             * bg + 4 nt + tig, (re, im) in acc[..][0, 1] at spectrum
             * tt + 16 i and [2, 3] at the next */
            const size_t nn = nb0 + n;
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
                const int j = 4 * nt + tig, b = bg + j;
                if (b < B) {
                    const size_t row = ((nn * B + b) * C + c) * (size_t)T;
#pragma unroll
                    for (int i = 0; i < BF_MT; i++) {
                        /* the pair's first absolute spectrum and its draw */
                        const uint64_t sp = job.first_spectrum + nn * T + (uint64_t)(tt + 16 * i);
                        sat[nt] += bf_emit<VEC, RAW>(
                            acc[i][nt], s_inv[j], job.dither,
                            zb + (uint64_t)(4 * nt) * CBF_DITHER_GAMMA + (sp >> 1) * dz, dz, sp & 1u,
                            (char2 *)job.out + row, RAW ? (float2 *)job.raw + row : nullptr, tt + 16 * i,
                            (whole >> i) & 1u, t0, t1);
                    }
                }
#pragma unroll
                for (int i = 0; i < BF_MT; i++)
#pragma unroll
                    for (int d = 0; d < BF_DIGITS; d++)
#pragma unroll
                        for (int k = 0; k < 4; k++)
                            acc[i][nt][d][k] = 0;
            }
        }
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
            if (sat[nt])
                atomicAdd(&s_sat[4 * nt + tig], sat[nt]);
        __syncthreads();
        if (tid < BF_GROUP) {
            if (s_sat[tid] && bg + tid < B)
                atomicAdd((unsigned long long *)&job.saturated[bg + tid], (unsigned long long)s_sat[tid]);
            s_sat[tid] = 0;
        }
    }
}

template <bool VEC, bool RAW>
static int bf_launch(const cbf_beam_job &job, dim3 grid, cudaStream_t st, size_t b0, int bpb, int t0, int t1,
                     int block0, char *msg, size_t msglen)
{
    const int bytes = (int)sizeof(bf_smem);
    CBF_KERN_CUDA_TRY("beamformer",
                      cudaFuncSetAttribute(bf_kernel<VEC, RAW>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    bf_kernel<VEC, RAW><<<grid, BF_THREADS, bytes, st>>>(job, b0, bpb, t0, t1, block0);
    CBF_KERN_CUDA_TRY("beamformer", cudaGetLastError());
    return 0;
}

extern "C" int cbf_beam_cuda_run(const cbf_beam_job *job, void *stream, char *msg, size_t msglen)
{
    int rc = cbf_beam_job_check(job, msg, msglen);
    if (rc || !job->batches)
        return rc;
    int t0, t1;   /* the job's span of spectra in every heap */
    cbf_beam_job_span(job, &t0, &t1);
    /* 16-byte copies need every antenna's run of spectra 16-byte aligned,
     * and the paired output stores 4-byte alignment */
    const bool vec = job->shape.spectra_per_heap % 4 == 0 && (uintptr_t)job->in % 16 == 0 &&
                     (uintptr_t)job->out % 4 == 0;
    const int block0 = t0 / BF_BSPEC, blocks = (t1 - 1) / BF_BSPEC + 1 - block0;
    /* Batches per block: as many as keep about BF_FILL blocks per SM in
     * the grid (each block's coefficients serve all its batches); at most
     * 64, the bits of the block's absent mask. */
    int dev, sms;
    CBF_KERN_CUDA_TRY("beamformer", cudaGetDevice(&dev));
    CBF_KERN_CUDA_TRY("beamformer", cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const size_t xy = (size_t)blocks * (size_t)job->shape.channels, want = (size_t)sms * BF_FILL;
    const size_t zs = xy >= want ? 1 : (want + xy - 1) / xy;
    size_t bpb = (job->batches + zs - 1) / zs;
    if (bpb > 64)
        bpb = 64;
    cudaStream_t st = (cudaStream_t)stream;
    const size_t per_launch = bpb * 65535;
    for (size_t b0 = 0; b0 < job->batches; b0 += per_launch) {
        const size_t nb = job->batches - b0 < per_launch ? job->batches - b0 : per_launch;
        const dim3 grid((unsigned)blocks, (unsigned)job->shape.channels, (unsigned)((nb + bpb - 1) / bpb));
        /* the sums before rounding are for tests: their stores stay out
         * of the kernel that runs in engines */
        if (vec)
            rc = job->raw ? bf_launch<true, true>(*job, grid, st, b0, (int)bpb, t0, t1, block0, msg, msglen)
                          : bf_launch<true, false>(*job, grid, st, b0, (int)bpb, t0, t1, block0, msg, msglen);
        else
            rc = job->raw ? bf_launch<false, true>(*job, grid, st, b0, (int)bpb, t0, t1, block0, msg, msglen)
                          : bf_launch<false, false>(*job, grid, st, b0, (int)bpb, t0, t1, block0, msg, msglen);
        if (rc)
            return rc;
    }
    return 0;
}
