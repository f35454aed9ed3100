/* gpu_none.c: the GPU glue when libcbf is built without CUDA. Everything
 * reports that there is no GPU, so `gpu: auto` takes the CPU path and
 * pinned/device pools fail with a message saying why. */
#include <math.h>

#include "cbf/gpu.h"
#include "runtime.h"

static const char no_cuda[] = "cbf was built without CUDA";

bool cbf_gpu_built(void) { return false; }
int cbf_gpu_count(void) { return 0; }
const char *cbf_gpu_describe(int device)
{
    (void)device;
    return no_cuda;
}

int cbf_buffer_record(cbf_buffer *buf, void *stream, cbf_error *err)
{
    (void)buf;
    (void)stream;
    return cbf_error_set(err, CBF_ENOTSUP, "buffer event: %s", no_cuda);
}

int cbf_buffer_wait_stream(const cbf_buffer *buf, void *stream, cbf_error *err)
{
    (void)buf;
    (void)stream;
    return cbf_error_set(err, CBF_ENOTSUP, "buffer event: %s", no_cuda);
}

int cbf_buffer_sync_host(const cbf_buffer *buf, cbf_error *err)
{
    (void)err;
    (void)buf;
    return CBF_OK;  /* host buffers carry no event: nothing to wait for */
}

int cbf_rt_gpu_alloc(cbf_mem_kind kind, size_t size, void **out, cbf_error *err)
{
    (void)size;
    *out = NULL;
    return cbf_error_set(err, CBF_ENOTSUP, "%s memory needs a GPU: %s", cbf_mem_kind_name(kind), no_cuda);
}

void cbf_rt_gpu_free(cbf_mem_kind kind, void *p)
{
    (void)kind;
    (void)p;
}

int cbf_rt_gpu_event_create(void **out, cbf_error *err)
{
    *out = NULL;
    return cbf_error_set(err, CBF_ENOTSUP, "buffer event: %s", no_cuda);
}

void cbf_rt_gpu_event_destroy(void *ev) { (void)ev; }

int cbf_rt_gpu_set_device(int device, cbf_error *err)
{
    return cbf_error_set(err, CBF_ENOTSUP, "GPU %d: %s", device, no_cuda);
}

int cbf_rt_gpu_memcpy_d2h(void *dst, const void *src, size_t bytes, cbf_error *err)
{
    (void)dst;
    (void)src;
    (void)bytes;
    return cbf_error_set(err, CBF_ENOTSUP, "device copy: %s", no_cuda);
}

int cbf_gpu_timer_create(cbf_gpu_timer **out, cbf_error *err)
{
    *out = NULL;
    return cbf_error_set(err, CBF_ENOTSUP, "gpu timer: %s", no_cuda);
}
int cbf_gpu_timer_start(cbf_gpu_timer *t, void *stream, cbf_error *err)
{
    (void)t, (void)stream;
    return cbf_error_set(err, CBF_ENOTSUP, "gpu timer: %s", no_cuda);
}
int cbf_gpu_timer_stop(cbf_gpu_timer *t, void *stream, cbf_error *err)
{
    (void)t, (void)stream;
    return cbf_error_set(err, CBF_ENOTSUP, "gpu timer: %s", no_cuda);
}
double cbf_gpu_timer_ms(const cbf_gpu_timer *t)
{
    (void)t;
    return NAN;
}
void cbf_gpu_timer_destroy(cbf_gpu_timer *t) { (void)t; }

int cbf_rt_gpu_fill(void *dst, int value, size_t bytes)
{
    (void)dst, (void)value, (void)bytes;
    return CBF_ENOTSUP;
}
