/* beamform.cu: the beamformer on the GPU, bound by memory bandwidth for
 * the few beams MeerKAT forms (katgpucbf's design, doc/xbgpu.design.b.rst).
 *
 * A block takes one (batch, channel) and BF_THREADS x BF_SPT spectra of the
 * job's span (cbf_beam_job_span); each thread keeps, for BF_SPT spectra,
 * four partial sums (bf_acc) per beam of a group of NB. Per stage of
 * BF_STAGE antennas the block makes the coefficients W(b, a, c) of its
 * channel in shared memory (amortised over its spectra). Each thread
 * copies its own sample words (both pols, one 32-bit word per antenna and
 * spectrum, coalesced across the warp) into shared memory BF_DEPTH - 1
 * sub-blocks of BF_SUB antennas ahead (cp.async), then converts each
 * sub-block to float once and adds it into every beam of the group.
 *
 * At 8 beams the sums cost 64 fp32 operations per 4-byte input word, about
 * the H100's ratio of fp32 rate to memory bandwidth, so the kernel is
 * written to issue little besides the fused multiply-adds: the int8 to
 * float conversions are per antenna, not per beam; a beam's polarisation is
 * a uniform branch per BF_SUB antennas, not a select per sample; every
 * coefficient read from shared memory serves BF_SPT spectra. More than NB
 * beams run as groups over the same input (read again per group, mostly
 * from L1 and L2); from 64 beams on, the sum is a complex matrix product
 * (beams x antennas by antennas x spectra) that tensor cores would run
 * faster in fp16, at fp16's cost in coefficient precision and without the
 * CPU's bit-exact match. The arithmetic is beamform_math.h's, in the same
 * order per beam (antennas ascending), so the result equals the CPU's bit
 * for bit. */
#include <cuda_pipeline.h>
#include <cuda_runtime.h>

#include "beamform.h"
#include "beamform_math.h"
#include "cuda_check.h"

#define BF_THREADS 128   /* threads per block (whole warps: the saturation count is a warp vote) */
#ifndef BF_SPT
#define BF_SPT 1         /* spectra per thread: each coefficient read serves this many */
#endif
#ifndef BF_SUB
#define BF_SUB 8         /* antennas whose samples a thread holds in registers at once */
#endif
#ifndef BF_DEPTH
#define BF_DEPTH 4       /* sub-blocks of samples in flight per thread (cp.async) */
#endif
#define BF_STAGE 64      /* antennas whose coefficients are in shared memory at once */

/* One thread's samples of BF_SUB antennas for BF_SPT spectra, as floats:
 * [spectrum][antenna], pol 0 and pol 1. */
typedef struct bf_samples {
    float r0[BF_SPT][BF_SUB], i0[BF_SPT][BF_SUB], r1[BF_SPT][BF_SUB], i1[BF_SPT][BF_SUB];
} bf_samples;

/* acc[s][j] += W(j, a) x(s, a) for the antennas of one sub-block, in
 * ascending order; w: the stage's coefficients [beam][antenna] from the
 * sub-block's first antenna (16-byte aligned), read two antennas at a
 * time; FULL: all BF_SUB antennas (no guards), else the first `na`
 * (uniform across the block). */
template <bool P1, int NB, bool FULL>
static __device__ __forceinline__ void bf_beam(bf_acc (&acc)[BF_SPT][NB], int j, const bf_samples &x,
                                               const float2 *w, int na)
{
#pragma unroll
    for (int a = 0; a < BF_SUB; a += 2) {
        if (!FULL && a >= na)
            break;
        const float4 w2 = *(const float4 *)&w[a];
        const bf_cplx w0 = {w2.x, w2.y}, w1 = {w2.z, w2.w};
#pragma unroll
        for (int s = 0; s < BF_SPT; s++)
            bf_mad(&acc[s][j], w0, P1 ? x.r1[s][a] : x.r0[s][a], P1 ? x.i1[s][a] : x.i0[s][a]);
        if (!FULL && a + 1 >= na)
            break;
#pragma unroll
        for (int s = 0; s < BF_SPT; s++)
            bf_mad(&acc[s][j], w1, P1 ? x.r1[s][a + 1] : x.r0[s][a + 1],
                   P1 ? x.i1[s][a + 1] : x.i0[s][a + 1]);
    }
}

template <int NB, bool FULL>
static __device__ __forceinline__ void bf_sub(bf_acc (&acc)[BF_SPT][NB], const bf_samples &x,
                                              const float2 (*w)[BF_STAGE], int st, int nb,
                                              unsigned polmask, int na)
{
#pragma unroll
    for (int j = 0; j < NB; j++) {
        if (j >= nb)
            break;
        if ((polmask >> j) & 1u)
            bf_beam<true, NB, FULL>(acc, j, x, &w[j][st], na);
        else
            bf_beam<false, NB, FULL>(acc, j, x, &w[j][st], na);
    }
}

/* Byte k of w as a float, exactly: 2^23 + (byte + 128) as the float's bits
 * (one byte permute), less 2^23 + 128 (one add); full-rate integer and
 * float instructions instead of quarter-rate conversions. */
template <int K>
static __device__ __forceinline__ float bf_byte(unsigned w_flipped)
{
    return __int_as_float((int)__byte_perm(w_flipped, 0x4B000000u, K | 0x7540)) - 8388736.0f;
}

/* Starts copying this thread's sample words of antennas a0 .. a0 + n - 1
 * (src: antenna a0's word of its first spectrum) into its places of one
 * shared sub-block slot (words of spectra it does
 * not have, and of antennas past n, are not copied and never read as
 * data: a thread past the span computes on whatever is there and stores
 * nothing). */
static __device__ __forceinline__ void bf_copy(char4 (*slot)[BF_THREADS * BF_SPT], const char4 *src,
                                               size_t ant_stride, const bool (&valid)[BF_SPT], int tid,
                                               int n)
{
    if (n == BF_SUB) {
#pragma unroll
        for (int k = 0; k < BF_SUB; k++, src += ant_stride)
#pragma unroll
            for (int s = 0; s < BF_SPT; s++)
                if (valid[s])
                    __pipeline_memcpy_async(&slot[k][s * BF_THREADS + tid], src + s * BF_THREADS,
                                            sizeof(char4));
        return;
    }
    for (int k = 0; k < n; k++, src += ant_stride)
#pragma unroll
        for (int s = 0; s < BF_SPT; s++)
            if (valid[s])
                __pipeline_memcpy_async(&slot[k][s * BF_THREADS + tid], src + s * BF_THREADS,
                                        sizeof(char4));
}

template <int NB>
__global__ void __launch_bounds__(BF_THREADS)
bf_kernel(cbf_beam_job job, size_t batch0, int t0, int t1)
{
    __shared__ __align__(16) float2 s_w[NB][BF_STAGE];
    __shared__ unsigned s_sat[NB];
    __shared__ char4 s_x[BF_DEPTH][BF_SUB][BF_THREADS * BF_SPT];
    const int A = job.shape.n_ants, B = job.shape.n_beams, C = job.shape.channels,
              T = job.shape.spectra_per_heap;
    const int tid = threadIdx.x;
    const int c = blockIdx.y;
    const size_t n = batch0 + blockIdx.z;
    int t[BF_SPT];
    bool valid[BF_SPT];
#pragma unroll
    for (int s = 0; s < BF_SPT; s++) {
        t[s] = t0 + (int)blockIdx.x * (BF_THREADS * BF_SPT) + s * BF_THREADS + tid;
        valid[s] = t[s] < t1;
    }
    const char4 *in = (const char4 *)job.in + (n * A * C + c) * (size_t)T;
    const uint8_t *present = job.present + n * A;
    const size_t ant_stride = (size_t)C * T;
    if (tid < NB)
        s_sat[tid] = 0;
    for (int bg = 0; bg < B; bg += NB) {
        const int nb = min(NB, B - bg);
        unsigned polmask = 0;
#pragma unroll
        for (int j = 0; j < NB; j++)
            if (j < nb && job.pol[bg + j])
                polmask |= 1u << j;
        bf_acc acc[BF_SPT][NB];
#pragma unroll
        for (int s = 0; s < BF_SPT; s++)
#pragma unroll
            for (int j = 0; j < NB; j++)
                acc[s][j].rr = acc[s][j].ri = acc[s][j].ir = acc[s][j].ii = 0.0f;
        /* Sub-blocks of BF_SUB antennas in ascending order. Each thread
         * copies its own samples of the next BF_DEPTH - 1 sub-blocks into
         * shared memory asynchronously (cp.async), so its loads run well
         * ahead of its arithmetic without holding registers, and, as it
         * reads back only what it copied itself, it waits for its own
         * copies only (no block barrier). */
        const int n_sub = (A + BF_SUB - 1) / BF_SUB;
        /* where the next copy reads (antenna `pre` x BF_SUB, spectrum t[0]) and
         * which slot it fills; counters, not products, keep the integer
         * work per sub-block small */
        const char4 *next = in + t[0];
        const size_t sub_stride = ant_stride * BF_SUB;
        int pre = 0, pre_slot = 0, slot = 0, st = 0;
        for (; pre < BF_DEPTH - 1; pre++) {
            if (pre < n_sub) {
                bf_copy(s_x[pre_slot], next, ant_stride, valid, tid, min(BF_SUB, A - pre * BF_SUB));
                next += sub_stride;
            }
            __pipeline_commit();
            pre_slot++;
        }
        for (int g = 0; g < n_sub; g++, pre++) {
            const int a = g * BF_SUB, nsub = min(BF_SUB, A - a);
            if (pre < n_sub) {
                bf_copy(s_x[pre_slot], next, ant_stride, valid, tid, min(BF_SUB, A - pre * BF_SUB));
                next += sub_stride;
            }
            __pipeline_commit();
            pre_slot = pre_slot + 1 == BF_DEPTH ? 0 : pre_slot + 1;
            if (st == 0) {
                /* the stage's coefficients (after every thread is done with the last's) */
                const int na = min(BF_STAGE, A - a);
                __syncthreads();
                for (int i = tid; i < na * nb; i += BF_THREADS) {
                    const int k = i / nb, j = i % nb;
                    const bf_cplx wv = bf_weight(&job.coef[(size_t)(bg + j) * A + a + k], c, present[a + k]);
                    s_w[j][k] = make_float2(wv.re, wv.im);
                }
                __syncthreads();
            }
            __pipeline_wait_prior(BF_DEPTH - 1);
            bf_samples x;
            const char4(*sx)[BF_THREADS * BF_SPT] = s_x[slot];
#pragma unroll
            for (int k = 0; k < BF_SUB; k++)
#pragma unroll
                for (int s = 0; s < BF_SPT; s++) {
                    const unsigned v = *(const unsigned *)&sx[k][s * BF_THREADS + tid] ^ 0x80808080u;
                    x.r0[s][k] = bf_byte<0>(v);
                    x.i0[s][k] = bf_byte<1>(v);
                    x.r1[s][k] = bf_byte<2>(v);
                    x.i1[s][k] = bf_byte<3>(v);
                }
            if (nsub == BF_SUB)
                bf_sub<NB, true>(acc, x, s_w, st, nb, polmask, BF_SUB);
            else
                bf_sub<NB, false>(acc, x, s_w, st, nb, polmask, nsub);
            slot = slot + 1 == BF_DEPTH ? 0 : slot + 1;
            st = st + BF_SUB == BF_STAGE ? 0 : st + BF_SUB;
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < NB; j++) {
            if (j >= nb)
                break;
            int sat = 0;
#pragma unroll
            for (int s = 0; s < BF_SPT; s++) {
                if (!valid[s])
                    continue;
                const size_t o = ((n * B + bg + j) * C + c) * (size_t)T + t[s];
                const bf_cplx v = bf_acc_sum(acc[s][j]);
                if (job.raw) {
                    job.raw[o * 2] = v.re;
                    job.raw[o * 2 + 1] = v.im;
                }
                const uint64_t spec = job.first_spectrum + n * T + t[s];
                const uint64_t ctr = (spec * job.total_channels + job.first_channel + c) * (uint64_t)B +
                                     (uint64_t)(bg + j);
                int8_t q[2];
                sat += bf_output(v, job.dither, job.dither_key, ctr, q);
                ((char2 *)job.out)[o] = make_char2(q[0], q[1]);
            }
            const unsigned m = __reduce_add_sync(0xffffffffu, (unsigned)sat);
            if ((tid & 31) == 0 && m)
                atomicAdd(&s_sat[j], m);
        }
        __syncthreads();
        if (tid < nb) {
            if (s_sat[tid])
                atomicAdd((unsigned long long *)&job.saturated[bg + tid],
                          (unsigned long long)s_sat[tid]);
            s_sat[tid] = 0;
        }
        __syncthreads();
    }
}

extern "C" int cbf_beam_cuda_run(const cbf_beam_job *job, void *stream, char *msg, size_t msglen)
{
    int rc = cbf_beam_job_check(job, msg, msglen);
    if (rc || !job->batches)
        return rc;
    int t0, t1;   /* the job's span of spectra in every heap */
    cbf_beam_job_span(job, &t0, &t1);
    cudaStream_t st = (cudaStream_t)stream;
    for (size_t b0 = 0; b0 < job->batches; b0 += 65535) {
        const size_t nz = job->batches - b0 < 65535 ? job->batches - b0 : 65535;
        const dim3 grid((unsigned)((t1 - t0 + BF_THREADS * BF_SPT - 1) / (BF_THREADS * BF_SPT)),
                        (unsigned)job->shape.channels, (unsigned)nz);
        if (job->shape.n_beams <= 8)
            bf_kernel<8><<<grid, BF_THREADS, 0, st>>>(*job, b0, t0, t1);
        else
            bf_kernel<16><<<grid, BF_THREADS, 0, st>>>(*job, b0, t0, t1);
        CBF_KERN_CUDA_TRY("beamformer", cudaGetLastError());
    }
    return 0;
}
