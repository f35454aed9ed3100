/* cbf/gpu.h: the little CUDA the core itself needs (device discovery,
 * buffer events). Built as stubs when CUDA is not built: every call then
 * reports no GPU. Streams and events are passed as void* so this header
 * needs no CUDA headers. */
#ifndef CBF_GPU_H
#define CBF_GPU_H

#include <stdbool.h>
#include "cbf/buffer.h"
#include "cbf/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whether libcbf was built with CUDA. */
bool cbf_gpu_built(void);
/* Number of usable GPUs at run time (0 without CUDA, driver or device). */
int cbf_gpu_count(void);
/* "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)" or a reason there is none. */
const char *cbf_gpu_describe(int device);

/* The producer's stream has finished writing buf: record buf->event on it. */
int cbf_buffer_record(cbf_buffer *buf, void *stream, cbf_error *err);
/* Makes a GPU consumer's stream wait for the producer (no host sync). */
int cbf_buffer_wait_stream(const cbf_buffer *buf, void *stream, cbf_error *err);
/* Blocks the host until the producer's work on buf is done. */
int cbf_buffer_sync_host(const cbf_buffer *buf, cbf_error *err);

/* GPU time of a stretch of a stream's work, for sensors: start and stop
 * record an event each; cbf_gpu_timer_ms, once the stream has passed the
 * stop (the caller has waited for it), gives the milliseconds between them,
 * or NaN when they cannot be measured. */
typedef struct cbf_gpu_timer cbf_gpu_timer;
int cbf_gpu_timer_create(cbf_gpu_timer **out, cbf_error *err);
int cbf_gpu_timer_start(cbf_gpu_timer *t, void *stream, cbf_error *err);
int cbf_gpu_timer_stop(cbf_gpu_timer *t, void *stream, cbf_error *err);
double cbf_gpu_timer_ms(const cbf_gpu_timer *t);
void cbf_gpu_timer_destroy(cbf_gpu_timer *t);

#ifdef __cplusplus
}
#endif
#endif
