/* gpu_cuda.c: the GPU glue with CUDA built (runtime API only; the core
 * launches no kernels). Device discovery is done once: cudaGetDeviceCount
 * is slow on first use and its answer does not change during a run. */
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "cbf/gpu.h"
#include "runtime.h"

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int n_gpus;
static char why_none[256];

static void probe(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(why_none, sizeof why_none, "no usable GPU: %s", cudaGetErrorString(e));
        (void)cudaGetLastError(); /* so the next checked call does not report it */
        n = 0;
    } else if (n == 0) {
        snprintf(why_none, sizeof why_none, "no GPU found");
    }
    n_gpus = n;
}

bool cbf_gpu_built(void) { return true; }

int cbf_gpu_count(void)
{
    pthread_once(&probe_once, probe);
    return n_gpus;
}

const char *cbf_gpu_describe(int device)
{
    static _Thread_local char text[320];
    if (cbf_gpu_count() == 0)
        return why_none;
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess) {
        snprintf(text, sizeof text, "GPU %d: %s", device, cudaGetErrorString(e));
        return text;
    }
    snprintf(text, sizeof text, "%s (sm_%d%d, %d SMs)", p.name, p.major, p.minor, p.multiProcessorCount);
    return text;
}

static int cuda_fail(cbf_error *err, cudaError_t e, const char *what)
{
    return cbf_error_set(err, CBF_ECUDA, "%s: %s", what, cudaGetErrorString(e));
}

int cbf_buffer_record(cbf_buffer *buf, void *stream, cbf_error *err)
{
    if (!buf->event)
        return cbf_error_set(err, CBF_EINVAL, "buffer of a %s pool has no event", cbf_mem_kind_name(buf->kind));
    cudaError_t e = cudaEventRecord((cudaEvent_t)buf->event, (cudaStream_t)stream);
    return e == cudaSuccess ? CBF_OK : cuda_fail(err, e, "cudaEventRecord");
}

int cbf_buffer_wait_stream(const cbf_buffer *buf, void *stream, cbf_error *err)
{
    if (!buf->event)
        return CBF_OK;  /* a host buffer is complete when it is sent */
    cudaError_t e = cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)buf->event, 0);
    return e == cudaSuccess ? CBF_OK : cuda_fail(err, e, "cudaStreamWaitEvent");
}

int cbf_buffer_sync_host(const cbf_buffer *buf, cbf_error *err)
{
    if (!buf->event)
        return CBF_OK;
    cudaError_t e = cudaEventSynchronize((cudaEvent_t)buf->event);
    return e == cudaSuccess ? CBF_OK : cuda_fail(err, e, "cudaEventSynchronize");
}

int cbf_rt_gpu_alloc(cbf_mem_kind kind, size_t size, void **out, cbf_error *err)
{
    *out = NULL;
    if (cbf_gpu_count() == 0)
        return cbf_error_set(err, CBF_ENOTSUP, "%s memory needs a GPU: %s", cbf_mem_kind_name(kind), why_none);
    cudaError_t e = kind == CBF_MEM_PINNED ? cudaHostAlloc(out, size, cudaHostAllocDefault)
                                           : cudaMalloc(out, size);
    if (e != cudaSuccess) {
        *out = NULL;
        return cbf_error_set(err, CBF_ECUDA, "%s of %zu bytes: %s",
                             kind == CBF_MEM_PINNED ? "cudaHostAlloc" : "cudaMalloc", size,
                             cudaGetErrorString(e));
    }
    return CBF_OK;
}

void cbf_rt_gpu_free(cbf_mem_kind kind, void *p)
{
    if (kind == CBF_MEM_PINNED)
        cudaFreeHost(p);
    else
        cudaFree(p);
}

int cbf_rt_gpu_event_create(void **out, cbf_error *err)
{
    cudaEvent_t ev = NULL;
    /* Timing off: these events only order work, and timing makes them slower. */
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    *out = e == cudaSuccess ? (void *)ev : NULL;
    return e == cudaSuccess ? CBF_OK : cuda_fail(err, e, "cudaEventCreateWithFlags");
}

void cbf_rt_gpu_event_destroy(void *ev) { cudaEventDestroy((cudaEvent_t)ev); }

int cbf_rt_gpu_set_device(int device, cbf_error *err)
{
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return cbf_error_set(err, CBF_ECUDA, "cudaSetDevice(%d): %s", device, cudaGetErrorString(e));
    return CBF_OK;
}

int cbf_rt_gpu_memcpy_d2h(void *dst, const void *src, size_t bytes, cbf_error *err)
{
    cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
    return e == cudaSuccess ? CBF_OK : cuda_fail(err, e, "cudaMemcpy device to host");
}

int cbf_rt_gpu_fill(void *dst, int value, size_t bytes)
{
    /* On the legacy stream, then waited for: the buffer's next producer
     * queues on a stream of its own, which would not wait for it. */
    cudaError_t e = cudaMemsetAsync(dst, value, bytes, cudaStreamLegacy);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cudaStreamLegacy);
    return e == cudaSuccess ? CBF_OK : CBF_ECUDA;
}

struct cbf_gpu_timer {
    cudaEvent_t ev[2];
    int n;
};

int cbf_gpu_timer_create(cbf_gpu_timer **out, cbf_error *err)
{
    cbf_gpu_timer *t = calloc(1, sizeof *t);
    if (!t)
        return cbf_error_set(err, CBF_ENOMEM, "gpu timer: out of memory");
    for (; t->n < 2; t->n++) {
        cudaError_t e = cudaEventCreate(&t->ev[t->n]);
        if (e != cudaSuccess) {
            cbf_gpu_timer_destroy(t);
            return cbf_error_set(err, CBF_ECUDA, "gpu timer: cudaEventCreate: %s", cudaGetErrorString(e));
        }
    }
    *out = t;
    return CBF_OK;
}

static int timer_record(cbf_gpu_timer *t, int k, void *stream, cbf_error *err)
{
    cudaError_t e = cudaEventRecord(t->ev[k], (cudaStream_t)stream);
    return e == cudaSuccess ? CBF_OK
                            : cbf_error_set(err, CBF_ECUDA, "gpu timer: cudaEventRecord: %s",
                                            cudaGetErrorString(e));
}

int cbf_gpu_timer_start(cbf_gpu_timer *t, void *stream, cbf_error *err) { return timer_record(t, 0, stream, err); }
int cbf_gpu_timer_stop(cbf_gpu_timer *t, void *stream, cbf_error *err) { return timer_record(t, 1, stream, err); }

double cbf_gpu_timer_ms(const cbf_gpu_timer *t)
{
    float ms;
    if (cudaEventElapsedTime(&ms, t->ev[0], t->ev[1]) != cudaSuccess) {
        (void)cudaGetLastError();
        return NAN;
    }
    return ms;
}

void cbf_gpu_timer_destroy(cbf_gpu_timer *t)
{
    if (!t)
        return;
    for (int k = 0; k < t->n; k++)
        cudaEventDestroy(t->ev[k]);
    free(t);
}
