/* beamform.cu: the beamformer on the GPU, bound by memory bandwidth for
 * the few beams MeerKAT forms (katgpucbf's design, doc/xbgpu.design.b.rst):
 * one thread per (batch, channel, spectrum of the job's span) keeps one accumulator per beam
 * of a group of NB; per block of antennas the block first makes the
 * coefficients W(b, a, c) of its channel in shared memory (amortised over
 * its spectra), then every thread reads each antenna's input word (both
 * pols) once and adds it into all NB beams. More than NB beams run as
 * groups over the same input (read again per group, mostly from L2); there,
 * at 64 beams and more, the sum is a complex matrix product (beams x
 * antennas by antennas x spectra) that tensor cores would run faster in
 * fp16, at fp16's cost in coefficient precision. The arithmetic is
 * beamform_math.h's, so the result equals the CPU's bit for bit. */
#include <cuda_runtime.h>

#include "beamform.h"
#include "beamform_math.h"
#include "cuda_check.h"

#define BF_BLOCK_ANTS 16
#define BF_MAX_BLOCK 128

template <int NB>
__global__ void __launch_bounds__(BF_MAX_BLOCK)
bf_kernel(cbf_beam_job job, size_t batch0, int t0, int t1)
{
    __shared__ bf_cplx s_w[BF_BLOCK_ANTS][NB];
    __shared__ unsigned s_sat[NB];
    const int A = job.shape.n_ants, B = job.shape.n_beams, C = job.shape.channels,
              T = job.shape.spectra_per_heap;
    const int tid = threadIdx.x;
    const int t = t0 + (int)(blockIdx.x * blockDim.x) + tid;
    const int c = blockIdx.y;
    const size_t n = batch0 + blockIdx.z;
    const bool valid = t < t1;
    const char4 *in = (const char4 *)job.in + (n * A * C + c) * (size_t)T + t;
    const uint8_t *present = job.present + n * A;
    const size_t ant_stride = (size_t)C * T;
    const uint64_t spec = job.first_spectrum + n * T + t;
    const uint64_t chan_ctr = spec * job.total_channels + job.first_channel + c;
    if (tid < NB)
        s_sat[tid] = 0;
    for (int bg = 0; bg < B; bg += NB) {
        const int nb = min(NB, B - bg);
        unsigned polmask = 0;
#pragma unroll
        for (int j = 0; j < NB; j++)
            if (j < nb && job.pol[bg + j])
                polmask |= 1u << j;
        bf_cplx acc[NB];
#pragma unroll
        for (int j = 0; j < NB; j++)
            acc[j].re = acc[j].im = 0.0f;
        for (int a0 = 0; a0 < A; a0 += BF_BLOCK_ANTS) {
            const int na = min(BF_BLOCK_ANTS, A - a0);
            for (int i = tid; i < na * nb; i += blockDim.x) {
                const int a = i / nb, j = i % nb;
                s_w[a][j] = bf_weight(&job.coef[(size_t)(bg + j) * A + a0 + a], c,
                                      present[a0 + a]);
            }
            __syncthreads();
            if (valid) {
                for (int a = 0; a < na; a++) {
                    const char4 x = in[(size_t)(a0 + a) * ant_stride];
#pragma unroll
                    for (int j = 0; j < NB; j++) {
                        if (j < nb) {
                            const bool p1 = (polmask >> j) & 1u;
                            bf_mad(&acc[j], s_w[a][j], (float)(p1 ? x.z : x.x),
                                   (float)(p1 ? x.w : x.y));
                        }
                    }
                }
            }
            __syncthreads();
        }
#pragma unroll
        for (int j = 0; j < NB; j++) {
            if (j >= nb)
                break;
            int sat = 0;
            if (valid) {
                const size_t o = ((n * B + bg + j) * C + c) * (size_t)T + t;
                if (job.raw) {
                    job.raw[o * 2] = acc[j].re;
                    job.raw[o * 2 + 1] = acc[j].im;
                }
                int8_t q[2];
                sat = bf_output(acc[j], job.dither, job.dither_key,
                                chan_ctr * (uint64_t)B + (uint64_t)(bg + j), q);
                ((char2 *)job.out)[o] = make_char2(q[0], q[1]);
            }
            const unsigned m = __ballot_sync(0xffffffffu, sat);
            if ((tid & 31) == 0 && m)
                atomicAdd(&s_sat[j], (unsigned)__popc(m));
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
    int t0, t1;
    cbf_beam_job_span(job, &t0, &t1);
    const int span = t1 - t0;
    /* whole warps (the saturation count is a warp vote) */
    const int block = span >= BF_MAX_BLOCK ? BF_MAX_BLOCK : (span + 31) / 32 * 32;
    cudaStream_t st = (cudaStream_t)stream;
    for (size_t b0 = 0; b0 < job->batches; b0 += 65535) {
        const size_t nz = job->batches - b0 < 65535 ? job->batches - b0 : 65535;
        const dim3 grid((unsigned)((span + block - 1) / block), (unsigned)job->shape.channels,
                        (unsigned)nz);
        if (job->shape.n_beams <= 8)
            bf_kernel<8><<<grid, block, 0, st>>>(*job, b0, t0, t1);
        else
            bf_kernel<16><<<grid, block, 0, st>>>(*job, b0, t0, t1);
        CBF_KERN_CUDA_TRY("beamformer", cudaGetLastError());
    }
    return 0;
}
