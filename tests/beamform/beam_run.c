/* beam_run.c: host-buffer wrapper over the CPU and CUDA beamformers. */
#include "beam_run.h"

#include <stdio.h>

#ifdef CBF_HAVE_CUDA
#include <cuda_runtime.h>

static int br_cuda(cudaError_t e, const char *call, char *msg, size_t msglen)
{
    if (e == cudaSuccess)
        return 0;
    snprintf(msg, msglen, "%s: %s", call, cudaGetErrorString(e));
    return CBF_KERN_ECUDA;
}
#define CK(call) do { if ((rc = br_cuda((call), #call, msg, msglen))) goto out; } while (0)

int beam_dev_up(void **d, const void *h, size_t n, char *msg, size_t msglen)
{
    int rc;
    CK(cudaMalloc(d, n ? n : 1));
    CK(h ? cudaMemcpy(*d, h, n, cudaMemcpyHostToDevice) : cudaMemset(*d, 0, n));
out:
    return rc;
}
#endif

int beam_run(int gpu, const cbf_beam_job *job, char *msg, size_t msglen)
{
    if (!gpu)
        return cbf_beam_cpu(job, msg, msglen);
#ifdef CBF_HAVE_CUDA
    const cbf_beam_shape *s = &job->shape;
    const size_t A = (size_t)s->n_ants, B = (size_t)s->n_beams, n = job->batches;
    const size_t in_b = n * cbf_beam_in_batch_bytes(s), out_b = n * cbf_beam_out_batch_bytes(s);
    const size_t raw_b = out_b * 2 * sizeof(float);
    void *d[7] = {0};
    int rc;
    if ((rc = beam_dev_up(&d[0], job->in, in_b, msg, msglen)) ||
        (rc = beam_dev_up(&d[1], job->present, n * A, msg, msglen)) ||
        (rc = beam_dev_up(&d[2], job->coef, A * B * sizeof *job->coef, msg, msglen)) ||
        (rc = beam_dev_up(&d[3], job->pol, B, msg, msglen)) ||
        (rc = beam_dev_up(&d[4], job->out, out_b, msg, msglen)) ||
        (rc = beam_dev_up(&d[5], job->saturated, B * sizeof(uint64_t), msg, msglen)) ||
        (job->raw && (rc = beam_dev_up(&d[6], job->raw, raw_b, msg, msglen))))
        goto out;
    cbf_beam_job j = *job;
    j.in = d[0];
    j.present = d[1];
    j.coef = d[2];
    j.pol = d[3];
    j.out = d[4];
    j.saturated = d[5];
    j.raw = d[6];
    if ((rc = cbf_beam_cuda_run(&j, NULL, msg, msglen)))
        goto out;
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(job->out, d[4], out_b, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(job->saturated, d[5], B * sizeof(uint64_t), cudaMemcpyDeviceToHost));
    if (job->raw)
        CK(cudaMemcpy(job->raw, d[6], raw_b, cudaMemcpyDeviceToHost));
out:
    for (int i = 0; i < 7; i++)
        cudaFree(d[i]);
    return rc;
#else
    snprintf(msg, msglen, "built without CUDA");
    return CBF_KERN_ENOTSUP;
#endif
}
