/* pfb_lto.cu: the FIR inside cuFFT's load callback (pfb.h, cbf_pfb_fft):
 * the callback (pfb_lto_cb.cu) is LTO-IR embedded here as a fatbin
 * (pfb_lto_fatbin.h, made by meson with nvcc -dlto and bin2c), handed to
 * cuFFT with cufftXtSetJITCallback before the plan is made; cuFFT links it
 * into its transform kernel with libnvJitLink (and compiles its wrapper
 * with NVRTC) inside cufftXtMakePlanMany. Built only where nvcc, bin2c and
 * a cuFFT with the CUDA 13 form of cufftXtSetJITCallback are present
 * (CBF_PFB_LTO); elsewhere the functions say so. */
#include "pfb.h"

#include "cuda_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CBF_PFB_LTO
#include <cuda_runtime.h>
#include <cufftXt.h>

#include "pfb_lto.h"
#include "pfb_lto_fatbin.h"

struct cbf_pfb_fft {
    int channels, taps, unzip;
    size_t spectra;
    cufftHandle fft;
    int have_fft;
    float *weights;                 /* device, step x taps, in element order */
    cbf_pfb_lto_params *params;     /* device: what the callback reads */
    cbf_pfb_lto_params last;        /* host: the params last copied there */
    int have_last;
    unsigned long long *power;      /* device [2][CBF_PFB_LTO_SLOTS] */
    unsigned long long *power_host; /* pinned, the same */
};

#define CUDA_TRY(call) CBF_KERN_CUDA_TRY("pfb fft", call)

static int log2i(long v)
{
    int l = 0;
    while ((1L << l) < v)
        l++;
    return l;
}

static int cufft_fail(char *msg, size_t msglen, const char *what, cufftResult fr)
{
    return cbf_kern_fail(msg, msglen, CBF_KERN_ECUDA, "pfb fft: %s failed (cufftResult %d)", what,
                         (int)fr);
}

extern "C" int cbf_pfb_fft_available(char *msg, size_t msglen)
{
    (void)msg;
    (void)msglen;
    return 0;
}

extern "C" int cbf_pfb_fft_create(int channels, int taps, int unzip, size_t spectra,
                                  const float *weights_host, cbf_pfb_fft **out, char *msg,
                                  size_t msglen)
{
    cbf_pfb_job shape = {};
    shape.channels = channels;
    shape.taps = taps;
    shape.bits = 8;
    shape.unzip = unzip;
    int rc = cbf_pfb_job_check(&shape, msg, msglen);
    if (rc)
        return rc;
    if (!spectra)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL, "pfb fft: 0 spectra");
    cbf_pfb_fft *p = (cbf_pfb_fft *)calloc(1, sizeof(*p));
    if (!p)
        return CBF_KERN_ENOMEM;
    p->channels = channels;
    p->taps = taps;
    p->unzip = unzip;
    p->spectra = spectra;
    *out = NULL;
    const size_t wbytes = 2 * (size_t)channels * taps * sizeof(float),
                 pbytes = 2 * CBF_PFB_LTO_SLOTS * sizeof(unsigned long long);
    cudaError_t e = cudaMalloc((void **)&p->weights, wbytes);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&p->params, sizeof(cbf_pfb_lto_params));
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&p->power, pbytes);
    if (e == cudaSuccess)
        e = cudaMallocHost((void **)&p->power_host, pbytes);
    /* Weights in the callback's element order (pfb_lto.h). */
    float *wp = (float *)malloc(wbytes);
    if (!wp) {
        cbf_pfb_fft_destroy(p);
        return CBF_KERN_ENOMEM;
    }
    const int m = channels / unzip;
    for (int t = 0; t < taps; t++)
        for (int pos = 0; pos < channels; pos++) {
            const size_t j = 2 * (size_t)((pos % m) * unzip + pos / m), row = 2 * (size_t)channels * t;
            wp[row + 2 * (size_t)pos] = weights_host[row + j];
            wp[row + 2 * (size_t)pos + 1] = weights_host[row + j + 1];
        }
    if (e == cudaSuccess)
        e = cudaMemcpy(p->weights, wp, wbytes, cudaMemcpyHostToDevice);
    free(wp);
    if (e == cudaSuccess)
        e = cudaMemset(p->power, 0, pbytes);
    if (e != cudaSuccess) {
        cbf_pfb_fft_destroy(p);
        return cbf_kern_cuda(e, msg, msglen, "pfb fft", "allocating the plan");
    }
    /* The callback must be attached between cufftCreate and the planning
     * call, which links it in. */
    char symbol[64];
    snprintf(symbol, sizeof symbol, CBF_PFB_LTO_SYMBOL_FMT, taps);
    cufftResult fr = cufftCreate(&p->fft);
    if (fr != CUFFT_SUCCESS) {
        cbf_pfb_fft_destroy(p);
        return cufft_fail(msg, msglen, "cufftCreate", fr);
    }
    p->have_fft = 1;
    void *info = p->params;
    fr = cufftXtSetJITCallback(p->fft, symbol, cbf_pfb_lto_fatbin, sizeof cbf_pfb_lto_fatbin,
                               CUFFT_CB_LD_COMPLEX, &info);
    if (fr != CUFFT_SUCCESS) {
        cbf_pfb_fft_destroy(p);
        return cufft_fail(msg, msglen, "cufftXtSetJITCallback", fr);
    }
    long long n = m;
    size_t work = 0;
    fr = cufftXtMakePlanMany(p->fft, 1, &n, NULL, 1, n, CUDA_C_32F, NULL, 1, n, CUDA_C_32F,
                             (long long)(2 * spectra * unzip), &work, CUDA_C_32F);
    if (fr != CUFFT_SUCCESS) {
        cbf_pfb_fft_destroy(p);
        return cbf_kern_fail(msg, msglen, CBF_KERN_ECUDA,
                             "pfb fft: cuFFT plan of %zu x %lld points with the FIR load "
                             "callback (%s, JIT-linked by libnvJitLink) failed (cufftResult %d)",
                             2 * spectra * unzip, n, symbol, (int)fr);
    }
    *out = p;
    return 0;
}

extern "C" int cbf_pfb_fft_run(cbf_pfb_fft *plan, const cbf_pfb_job *job, void *stream,
                               char *msg, size_t msglen)
{
    int rc = cbf_pfb_job_check(job, msg, msglen);
    if (rc)
        return rc;
    const size_t step = 2 * (size_t)plan->channels;
    if (job->channels != plan->channels || job->taps != plan->taps ||
        job->unzip != plan->unzip || job->spectra != plan->spectra)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "pfb fft: job of %zu spectra x %d channels, %d taps, unzip %d; plan "
                             "%zu x %d, %d, %d",
                             job->spectra, job->channels, job->taps, job->unzip, plan->spectra,
                             plan->channels, plan->taps, plan->unzip);
    /* One transform batch covers both pols, so pol 1 follows pol 0. */
    if (job->out_pol_stride != job->spectra * step)
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "pfb fft: out_pol_stride %zu must be spectra x step = %zu",
                             job->out_pol_stride, job->spectra * step);
    /* The callback reads aligned 32-bit words. */
    for (int p = 0; p < 2; p++)
        if ((uintptr_t)job->in[p] % 4)
            return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                                 "pfb fft: input of pol %d is not 4-byte aligned", p);
    cudaStream_t s = (cudaStream_t)stream;
    cbf_pfb_lto_params q;
    memset(&q, 0, sizeof q);
    for (int p = 0; p < 2; p++) {
        q.in[p] = (const unsigned *)job->in[p];
        q.first_bit[p] = (long long)job->start[p] * job->bits;
    }
    q.w = plan->weights;
    q.power = plan->power;
    q.pol_elems = (unsigned long long)job->spectra * (unsigned long long)job->channels;
    q.log_ch = log2i(job->channels);
    q.log_n = log2i(job->unzip);
    q.log_m = q.log_ch - q.log_n;
    q.bits = job->bits;
    q.step = (int)step;
    q.row_words = (int)(step * (size_t)job->bits / 32);
    /* Copied only when they change (from pageable memory: the call returns
     * once q has been read, and the stream orders it after earlier runs). */
    if (!plan->have_last || memcmp(&q, &plan->last, sizeof q)) {
        CUDA_TRY(cudaMemcpyAsync(plan->params, &q, sizeof q, cudaMemcpyHostToDevice, s));
        plan->last = q;
        plan->have_last = 1;
    }
    cufftComplex *d = (cufftComplex *)job->out;
    cufftResult fr = cufftSetStream(plan->fft, s);
    if (fr != CUFFT_SUCCESS)
        return cufft_fail(msg, msglen, "cufftSetStream", fr);
    fr = cufftExecC2C(plan->fft, d, d, CUFFT_FORWARD);
    if (fr != CUFFT_SUCCESS)
        return cufft_fail(msg, msglen, "cufftExecC2C", fr);
    return 0;
}

extern "C" int cbf_pfb_fft_power(cbf_pfb_fft *plan, void *stream, uint64_t power[2], char *msg,
                                 size_t msglen)
{
    const size_t pbytes = 2 * CBF_PFB_LTO_SLOTS * sizeof(unsigned long long);
    cudaStream_t s = (cudaStream_t)stream;
    CUDA_TRY(cudaMemcpyAsync(plan->power_host, plan->power, pbytes, cudaMemcpyDeviceToHost, s));
    CUDA_TRY(cudaMemsetAsync(plan->power, 0, pbytes, s));
    CUDA_TRY(cudaStreamSynchronize(s));
    for (int p = 0; p < 2; p++) {
        uint64_t sum = 0;
        for (int i = 0; i < CBF_PFB_LTO_SLOTS; i++)
            sum += plan->power_host[p * CBF_PFB_LTO_SLOTS + i];
        power[p] = sum;
    }
    return 0;
}

extern "C" void cbf_pfb_fft_destroy(cbf_pfb_fft *plan)
{
    if (!plan)
        return;
    if (plan->have_fft)
        cufftDestroy(plan->fft);
    cudaFree(plan->weights);
    cudaFree(plan->params);
    cudaFree(plan->power);
    cudaFreeHost(plan->power_host);
    free(plan);
}

#else /* no LTO callback in this build */

static int not_built(char *msg, size_t msglen)
{
    return cbf_kern_fail(msg, msglen, CBF_KERN_ENOTSUP,
                         "pfb fft: built without cuFFT's LTO load callback (needs nvcc, bin2c "
                         "and CUDA 13's cufftXtSetJITCallback at build time)");
}

extern "C" int cbf_pfb_fft_available(char *msg, size_t msglen) { return not_built(msg, msglen); }

extern "C" int cbf_pfb_fft_create(int channels, int taps, int unzip, size_t spectra,
                                  const float *weights_host, cbf_pfb_fft **out, char *msg,
                                  size_t msglen)
{
    (void)channels;
    (void)taps;
    (void)unzip;
    (void)spectra;
    (void)weights_host;
    *out = NULL;
    return not_built(msg, msglen);
}

extern "C" int cbf_pfb_fft_run(cbf_pfb_fft *plan, const cbf_pfb_job *job, void *stream,
                               char *msg, size_t msglen)
{
    (void)plan;
    (void)job;
    (void)stream;
    return not_built(msg, msglen);
}

extern "C" int cbf_pfb_fft_power(cbf_pfb_fft *plan, void *stream, uint64_t power[2], char *msg,
                                 size_t msglen)
{
    (void)plan;
    (void)stream;
    (void)power;
    return not_built(msg, msglen);
}

extern "C" void cbf_pfb_fft_destroy(cbf_pfb_fft *plan) { (void)plan; }
#endif
