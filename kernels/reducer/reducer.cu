/* reducer.cu: slice sum, 64 -> 32-bit saturation and magic values on the
 * GPU. One thread per visibility (re and im together, 16-byte loads); the
 * saturation count is reduced per warp before its one atomic add. */
#include "reducer.h"

#include "cuda_check.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>

struct cbf_reduce_cuda {
    unsigned long long *count;      /* device */
    unsigned long long *count_host; /* pinned */
};

#define CUDA_TRY(call) CBF_KERN_CUDA_TRY("reducer", call)

__device__ __forceinline__ int clamp32(long long v, bool &sat)
{
    const long long m = 2147483647LL;
    sat |= v > m || v < -m;
    return (int)(v > m ? m : (v < -m ? -m : v));
}

__global__ void reduce_kernel(const long long *accum, long long *clear_base,
                              int slices, size_t slice_len, const unsigned char *__restrict__ bad,
                              int n_ants, size_t nvis, int *__restrict__ out,
                              unsigned long long *count)
{
    const size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    bool sat = false;
    if (v < nvis) {
        const size_t nbl = (size_t)n_ants * (n_ants + 1) / 2;
        const size_t bl = (v / 4) % nbl;
        /* a2 (a2 + 1) / 2 <= bl: the float estimate can be one off either way */
        long long a2 = (long long)((sqrt(8.0 * (double)bl + 1.0) - 1.0) / 2.0);
        while (a2 * (a2 + 1) / 2 > (long long)bl)
            a2--;
        while ((a2 + 1) * (a2 + 2) / 2 <= (long long)bl)
            a2++;
        const long long a1 = (long long)bl - a2 * (a2 + 1) / 2;
        long long re = 0, im = 0;
        for (int s = 0; s < slices; s++) {
            longlong2 x = reinterpret_cast<const longlong2 *>(accum + s * slice_len)[v];
            re += x.x;
            im += x.y;
        }
        int2 o;
        if (bad[a1] || bad[a2]) {
            o = make_int2((int)0x80000000u, 1);
        } else {
            o.x = clamp32(re, sat);
            o.y = clamp32(im, sat);
        }
        reinterpret_cast<int2 *>(out)[v] = o;
        if (clear_base)
            for (int s = 0; s < slices; s++)
                reinterpret_cast<longlong2 *>(clear_base + s * slice_len)[v] = make_longlong2(0, 0);
    }
    unsigned n = __popc(__ballot_sync(0xffffffffu, sat));
    if ((threadIdx.x & 31) == 0 && n)
        atomicAdd(count, (unsigned long long)n);
}

extern "C" {

int cbf_reduce_cuda_create(cbf_reduce_cuda **out, char *msg, size_t msglen)
{
    *out = NULL;
    cbf_reduce_cuda *p = (cbf_reduce_cuda *)calloc(1, sizeof(*p));
    if (!p)
        return CBF_KERN_ENOMEM;
    cudaError_t e = cudaMalloc(&p->count, sizeof(*p->count));
    if (e == cudaSuccess)
        e = cudaMemset(p->count, 0, sizeof(*p->count));
    if (e == cudaSuccess)
        e = cudaMallocHost(&p->count_host, sizeof(*p->count_host));
    if (e != cudaSuccess) {
        cbf_reduce_cuda_destroy(p);
        return cbf_kern_cuda(e, msg, msglen, "reducer", "counter");
    }
    *out = p;
    return 0;
}

int cbf_reduce_cuda_run(cbf_reduce_cuda *p, const cbf_reduce_job *job, void *stream, char *msg,
                        size_t msglen)
{
    int rc = cbf_reduce_job_check(job, msg, msglen);
    if (rc)
        return rc;
    const size_t nvis = (size_t)job->channels * (size_t)job->n_ants * (job->n_ants + 1) / 2 * 4;
    const unsigned threads = 256;
    const size_t blocks = (nvis + threads - 1) / threads;
    reduce_kernel<<<(unsigned)blocks, threads, 0, (cudaStream_t)stream>>>(
        (const long long *)job->accum, job->clear ? (long long *)job->accum : NULL, job->slices,
        job->slice_len, job->ant_bad, job->n_ants, nvis, job->out, p->count);
    CUDA_TRY(cudaGetLastError());
    return 0;
}

int cbf_reduce_cuda_saturated(cbf_reduce_cuda *p, void *stream, uint64_t *saturated, char *msg,
                              size_t msglen)
{
    cudaStream_t st = (cudaStream_t)stream;
    CUDA_TRY(cudaMemcpyAsync(p->count_host, p->count, sizeof(*p->count), cudaMemcpyDeviceToHost,
                             st));
    CUDA_TRY(cudaMemsetAsync(p->count, 0, sizeof(*p->count), st));
    CUDA_TRY(cudaStreamSynchronize(st));
    *saturated = *p->count_host;
    return 0;
}

void cbf_reduce_cuda_destroy(cbf_reduce_cuda *p)
{
    if (!p)
        return;
    cudaFree(p->count);
    cudaFreeHost(p->count_host);
    free(p);
}

} /* extern "C" */
