/* xeng_run.c: host-buffer wrappers over the CPU and CUDA X-engine kernels. */
#include "xeng_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CBF_HAVE_CUDA
#include <cuda_runtime.h>

/* 0, or -6 (the kernels' CUDA error) with the failed call and CUDA's reason in msg. */
static int xr_cuda(cudaError_t e, const char *call, char *msg, size_t msglen)
{
    if (e == cudaSuccess)
        return 0;
    snprintf(msg, msglen, "%s: %s", call, cudaGetErrorString(e));
    return -6;
}
#define CK(call) do { if ((rc = xr_cuda((call), #call, msg, msglen))) goto out; } while (0)
#endif

int xeng_correlate(int gpu, const cbf_corr_shape *s, const uint8_t *in, size_t batches,
                   size_t b0, size_t b1, int slices, int block_ants, int64_t *accum, char *msg,
                   size_t msglen)
{
    cbf_corr_job job = {*s, in, b0, b1, accum, slices};
    if (!gpu)
        return cbf_corr_cpu(&job, msg, msglen);
#ifdef CBF_HAVE_CUDA
    int rc = 0;
    uint8_t *d_in = NULL;
    int64_t *d_acc = NULL;
    cbf_corr_cuda *plan = NULL;
    const size_t in_bytes = batches * cbf_corr_batch_bytes(s);
    const size_t acc_bytes = (size_t)slices * cbf_corr_accum_len(s) * sizeof(int64_t);
    CK(cudaMalloc((void **)&d_in, in_bytes ? in_bytes : 1));
    CK(cudaMalloc((void **)&d_acc, acc_bytes));
    CK(cudaMemcpy(d_in, in, in_bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_acc, accum, acc_bytes, cudaMemcpyHostToDevice));
    rc = cbf_corr_cuda_create(s, block_ants, &plan, msg, msglen);
    if (rc)
        goto out;
    job.in = d_in;
    job.accum = d_acc;
    rc = cbf_corr_cuda_run(plan, &job, NULL, msg, msglen);
    if (rc)
        goto out;
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(accum, d_acc, acc_bytes, cudaMemcpyDeviceToHost));
out:
    cbf_corr_cuda_destroy(plan);
    cudaFree(d_in);
    cudaFree(d_acc);
    return rc;
#else
    (void)batches;
    (void)block_ants;
    snprintf(msg, msglen, "built without CUDA");
    return CBF_KERN_ENOTSUP;
#endif
}

int xeng_reduce(int gpu, const cbf_reduce_job *job, uint64_t *saturated, char *msg,
                size_t msglen)
{
    if (!gpu)
        return cbf_reduce_cpu(job, saturated, msg, msglen);
#ifdef CBF_HAVE_CUDA
    int rc = 0;
    cbf_reduce_job d = *job;
    int64_t *d_acc = NULL;
    int32_t *d_out = NULL;
    uint8_t *d_bad = NULL;
    cbf_reduce_cuda *plan = NULL;
    const size_t acc_bytes = (size_t)job->slices * job->slice_len * sizeof(int64_t);
    const size_t out_bytes = (size_t)job->channels * job->n_ants * (job->n_ants + 1) / 2 * 8 *
                             sizeof(int32_t);
    CK(cudaMalloc((void **)&d_acc, acc_bytes));
    CK(cudaMalloc((void **)&d_out, out_bytes));
    CK(cudaMalloc((void **)&d_bad, (size_t)job->n_ants));
    CK(cudaMemcpy(d_acc, job->accum, acc_bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_out, job->out, out_bytes, cudaMemcpyHostToDevice)); /* keeps the poison */
    CK(cudaMemcpy(d_bad, job->ant_bad, (size_t)job->n_ants, cudaMemcpyHostToDevice));
    rc = cbf_reduce_cuda_create(&plan, msg, msglen);
    if (rc)
        goto out;
    d.accum = d_acc;
    d.out = d_out;
    d.ant_bad = d_bad;
    rc = cbf_reduce_cuda_run(plan, &d, NULL, msg, msglen);
    if (rc)
        goto out;
    uint64_t n = 0;
    rc = cbf_reduce_cuda_saturated(plan, NULL, &n, msg, msglen);
    if (rc)
        goto out;
    *saturated += n;
    CK(cudaMemcpy(job->out, d_out, out_bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy((void *)job->accum, d_acc, acc_bytes, cudaMemcpyDeviceToHost));
out:
    cbf_reduce_cuda_destroy(plan);
    cudaFree(d_acc);
    cudaFree(d_out);
    cudaFree(d_bad);
    return rc;
#else
    (void)saturated;
    snprintf(msg, msglen, "built without CUDA");
    return CBF_KERN_ECUDA;
#endif
}
