/* gpu.c: see gpu.h. */
#include "stage/gpu.h"

#include <stdlib.h>
#include <string.h>

#ifndef CBF_HAVE_CUDA
static int no_gpu(const char *what, cbf_error *err)
{
    return cbf_error_set(err, CBF_ENOTSUP, "%s: needs CUDA, and this build has none", what);
}
#else
int cbf_stage_cuda(cudaError_t e, const char *what, cbf_error *err)
{
    if (e == cudaSuccess)
        return 0;
    return cbf_error_set(err, CBF_ECUDA, "%s: %s", what, cudaGetErrorString(e));
}

static enum cudaMemcpyKind copy_kind(cbf_mem_kind dst, cbf_mem_kind src)
{
    const int d = dst == CBF_MEM_DEVICE, s = src == CBF_MEM_DEVICE;
    return d ? (s ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
             : (s ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
}
#endif

int cbf_stage_alloc(cbf_mem_kind kind, size_t bytes, void **out, const char *what, cbf_error *err)
{
    *out = NULL;
    if (kind == CBF_MEM_HOST) {
        /* aligned_alloc wants a multiple of the alignment. */
        size_t n = (bytes + 63) / 64 * 64;
        *out = aligned_alloc(64, n ? n : 64);
        return *out ? 0 : cbf_error_set(err, CBF_ENOMEM, "%s: %zu bytes of host memory", what, bytes);
    }
#ifdef CBF_HAVE_CUDA
    cudaError_t e = kind == CBF_MEM_PINNED ? cudaHostAlloc(out, bytes ? bytes : 1, cudaHostAllocDefault)
                                           : cudaMalloc(out, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *out = NULL;
        return cbf_error_set(err, CBF_ECUDA, "%s: %zu bytes of %s memory: %s", what, bytes,
                             cbf_mem_kind_name(kind), cudaGetErrorString(e));
    }
    return 0;
#else
    return no_gpu(what, err);
#endif
}

void cbf_stage_free(cbf_mem_kind kind, void *p)
{
    if (!p)
        return;
    if (kind == CBF_MEM_HOST) {
        free(p);
        return;
    }
#ifdef CBF_HAVE_CUDA
    if (kind == CBF_MEM_PINNED)
        cudaFreeHost(p);
    else
        cudaFree(p);
#endif
}

int cbf_stage_copy(void *dst, cbf_mem_kind dst_kind, const void *src, cbf_mem_kind src_kind,
                   size_t bytes, void *stream, const char *what, cbf_error *err)
{
    if (!bytes)
        return 0;
    if (dst_kind != CBF_MEM_DEVICE && src_kind != CBF_MEM_DEVICE) {
        memcpy(dst, src, bytes);
        return 0;
    }
#ifdef CBF_HAVE_CUDA
    enum cudaMemcpyKind k = copy_kind(dst_kind, src_kind);
    return cbf_stage_cuda(stream ? cudaMemcpyAsync(dst, src, bytes, k, (cudaStream_t)stream)
                                 : cudaMemcpy(dst, src, bytes, k),
                          what, err);
#else
    (void)stream;
    return no_gpu(what, err);
#endif
}

int cbf_stage_fill(void *dst, cbf_mem_kind kind, int value, size_t bytes, void *stream,
                   const char *what, cbf_error *err)
{
    if (kind != CBF_MEM_DEVICE) {
        memset(dst, value, bytes);
        return 0;
    }
#ifdef CBF_HAVE_CUDA
    return cbf_stage_cuda(stream ? cudaMemsetAsync(dst, value, bytes, (cudaStream_t)stream)
                                 : cudaMemset(dst, value, bytes),
                          what, err);
#else
    (void)stream;
    return no_gpu(what, err);
#endif
}

int cbf_stage_stream_create(void **out, cbf_error *err)
{
    *out = NULL;
#ifdef CBF_HAVE_CUDA
    cudaStream_t s;
    int rc = cbf_stage_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream", err);
    if (!rc)
        *out = s;
    return rc;
#else
    return no_gpu("stream", err);
#endif
}

void cbf_stage_stream_destroy(void *stream)
{
#ifdef CBF_HAVE_CUDA
    if (stream)
        cudaStreamDestroy((cudaStream_t)stream);
#else
    (void)stream;
#endif
}

int cbf_stage_stream_sync(void *stream, const char *what, cbf_error *err)
{
#ifdef CBF_HAVE_CUDA
    return cbf_stage_cuda(cudaStreamSynchronize((cudaStream_t)stream), what, err);
#else
    (void)stream;
    return no_gpu(what, err);
#endif
}

int cbf_stage_event_create(void **out, cbf_error *err)
{
    *out = NULL;
#ifdef CBF_HAVE_CUDA
    cudaEvent_t e;
    int rc = cbf_stage_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event", err);
    if (!rc)
        *out = e;
    return rc;
#else
    return no_gpu("event", err);
#endif
}

void cbf_stage_event_destroy(void *event)
{
#ifdef CBF_HAVE_CUDA
    if (event)
        cudaEventDestroy((cudaEvent_t)event);
#else
    (void)event;
#endif
}

int cbf_stage_event_record(void *event, void *stream, cbf_error *err)
{
#ifdef CBF_HAVE_CUDA
    return cbf_stage_cuda(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream),
                          "event record", err);
#else
    (void)event, (void)stream;
    return no_gpu("event record", err);
#endif
}

int cbf_stage_stream_wait(void *stream, void *event, cbf_error *err)
{
#ifdef CBF_HAVE_CUDA
    return cbf_stage_cuda(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0),
                          "stream wait", err);
#else
    (void)event, (void)stream;
    return no_gpu("stream wait", err);
#endif
}

int cbf_stage_event_sync(void *event, cbf_error *err)
{
#ifdef CBF_HAVE_CUDA
    return cbf_stage_cuda(cudaEventSynchronize((cudaEvent_t)event), "event sync", err);
#else
    (void)event;
    return no_gpu("event sync", err);
#endif
}

int cbf_stage_event_done(void *event, cbf_error *err)
{
#ifdef CBF_HAVE_CUDA
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e == cudaErrorNotReady)
        return 0;
    return e == cudaSuccess ? 1 : cbf_stage_cuda(e, "event query", err);
#else
    (void)event;
    return no_gpu("event query", err);
#endif
}

int cbf_stage_hold_init(cbf_stage_hold *h, size_t cap, cbf_error *err)
{
    memset(h, 0, sizeof *h);
    h->cap = cap ? cap : 1;
    h->buf = calloc(h->cap + 1, sizeof *h->buf);
    h->event = calloc(h->cap + 1, sizeof *h->event);
    if (!h->buf || !h->event)
        return cbf_error_set(err, CBF_ENOMEM, "hold: %zu buffers", h->cap);
    for (size_t i = 0; i <= h->cap; i++) {
        int rc = cbf_stage_event_create(&h->event[i], err);
        if (rc)
            return rc;
    }
    return 0;
}

/* Drops the oldest held buffer (its work done). */
static void hold_pop(cbf_stage_hold *h)
{
    cbf_buffer_unref(h->buf[h->head]);
    h->buf[h->head] = NULL;
    h->head = (h->head + 1) % (h->cap + 1);
    h->n--;
}

static void *hold_event_of(const cbf_stage_hold *h, size_t k)
{
    return h->event[(h->next_event + h->cap + 1 - h->n + k) % (h->cap + 1)];
}

int cbf_stage_hold_release(cbf_stage_hold *h, int wait, cbf_error *err)
{
    while (h->n) {
        void *ev = hold_event_of(h, 0);
        int rc = wait ? cbf_stage_event_sync(ev, err) : cbf_stage_event_done(ev, err);
        if (rc < 0)
            return rc;
        if (!wait && !rc)
            return 0;
        hold_pop(h);
    }
    return 0;
}

int cbf_stage_hold_push(cbf_stage_hold *h, cbf_buffer *buf, void *stream, void **event,
                        cbf_error *err)
{
    int rc = cbf_stage_hold_release(h, 0, err);
    while (!rc && h->n >= h->cap) {
        if (!(rc = cbf_stage_event_sync(hold_event_of(h, 0), err)))
            hold_pop(h);
    }
    void *ev = h->event[h->next_event];
    if (!rc)
        rc = cbf_stage_event_record(ev, stream, err);
    if (rc)
        return rc;
    cbf_buffer_ref(buf);
    h->buf[(h->head + h->n) % (h->cap + 1)] = buf;
    h->n++;
    h->next_event = (h->next_event + 1) % (h->cap + 1);
    if (event)
        *event = ev;
    return 0;
}

void cbf_stage_hold_fini(cbf_stage_hold *h)
{
    if (h->n) {
        cbf_error ignored;
        if (cbf_stage_hold_release(h, 1, &ignored))
            while (h->n)
                hold_pop(h); /* the GPU failed: nothing will read them now */
    }
    for (size_t i = 0; h->event && i <= h->cap; i++)
        cbf_stage_event_destroy(h->event[i]);
    free(h->buf);
    free(h->event);
    memset(h, 0, sizeof *h);
}
