/* stage/gpu.h: the CUDA a stage plugin needs, checked, by memory kind.
 *
 * Every call returns 0 or a negative CBF_E* code with a message naming
 * what was being done (the runtime adds the node's name). Streams and
 * events travel as void * so plugins compile without CUDA headers; in a
 * build without CUDA the host calls work and every GPU call fails with
 * CBF_ENOTSUP. Pinned and device memory need a GPU (cbf_node_use_gpu). */
#ifndef CBF_STAGE_GPU_H
#define CBF_STAGE_GPU_H

#include <stddef.h>
#include "cbf/buffer.h"
#include "cbf/error.h"

#ifdef CBF_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#ifdef CBF_HAVE_CUDA
/* 0 for cudaSuccess; otherwise CBF_ECUDA with "what: CUDA's reason". */
int cbf_stage_cuda(cudaError_t e, const char *what, cbf_error *err);
#endif

/* bytes of `kind` memory (host: 64-byte aligned; pinned: cudaHostAlloc;
 * device: cudaMalloc). *out is NULL on failure. */
int cbf_stage_alloc(cbf_mem_kind kind, size_t bytes, void **out, const char *what, cbf_error *err);
/* Frees what cbf_stage_alloc gave (NULL is fine). */
void cbf_stage_free(cbf_mem_kind kind, void *p);

/* Copies bytes from src (of src_kind) to dst (of dst_kind). With a stream
 * and a GPU on either side the copy is queued on it (asynchronous: src must
 * stay valid and dst unread until the stream passes it); host to host is a
 * plain memcpy. A GPU kind on the CPU path fails with CBF_ENOTSUP. */
int cbf_stage_copy(void *dst, cbf_mem_kind dst_kind, const void *src, cbf_mem_kind src_kind,
                   size_t bytes, void *stream, const char *what, cbf_error *err);
/* Sets bytes of `kind` memory to value (queued on stream for device memory). */
int cbf_stage_fill(void *dst, cbf_mem_kind kind, int value, size_t bytes, void *stream,
                   const char *what, cbf_error *err);

/* A non-blocking stream (it does not wait for the legacy default stream). */
int cbf_stage_stream_create(void **out, cbf_error *err);
void cbf_stage_stream_destroy(void *stream);
/* Blocks the host until stream has done everything queued so far. */
int cbf_stage_stream_sync(void *stream, const char *what, cbf_error *err);

/* Events without timing, for ordering work between streams. */
int cbf_stage_event_create(void **out, cbf_error *err);
void cbf_stage_event_destroy(void *event);
int cbf_stage_event_record(void *event, void *stream, cbf_error *err);
/* Makes stream wait (on the GPU) for the work before event's record. */
int cbf_stage_stream_wait(void *stream, void *event, cbf_error *err);
/* Blocks the host until the work before event's record is done. */
int cbf_stage_event_sync(void *event, cbf_error *err);
/* 1 when the work before event's record is done, 0 while it is not, or a
 * negative code. Never blocks. */
int cbf_stage_event_done(void *event, cbf_error *err);

/* Buffers kept alive until the GPU work that reads them has finished,
 * without a host sync per buffer: each is held with an event recorded
 * after that work, and released (its reference dropped) once the event has
 * passed. A node that holds at most one buffer of a pool while it waits
 * for input can never starve the pool's producer (every pool has two or
 * more buffers), so hold's cap is small: 1 for a node's input. */
typedef struct cbf_stage_hold {
    size_t cap, head, n;
    cbf_buffer **buf;
    void **event;          /* cap + 1: a new record never reuses a held event */
    size_t next_event;
} cbf_stage_hold;

int cbf_stage_hold_init(cbf_stage_hold *h, size_t cap, cbf_error *err);
/* Takes a reference to buf and records an event on stream after the work
 * queued so far (returned in *event, for other streams to wait on). The
 * buffers held longest are released first: those done, then, while more
 * than cap would be held, the oldest after waiting for it. */
int cbf_stage_hold_push(cbf_stage_hold *h, cbf_buffer *buf, void *stream, void **event,
                        cbf_error *err);
/* Releases the buffers whose work is done; with wait, every buffer. */
int cbf_stage_hold_release(cbf_stage_hold *h, int wait, cbf_error *err);
/* Waits for and releases everything held, then frees the events. */
void cbf_stage_hold_fini(cbf_stage_hold *h);

#ifdef __cplusplus
}
#endif
#endif
