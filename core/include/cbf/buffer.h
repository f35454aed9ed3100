/* cbf/buffer.h: reference-counted buffers from fixed pools.
 *
 * A pool allocates all its buffers when it is created (in a node's init), so
 * the steady state allocates nothing. A buffer goes back to its pool when
 * its last reference is dropped; fan-out to several consumers is done by
 * references, never by copies. At shutdown the core checks every pool and
 * reports (as CBF_ELEAK) any buffer that did not come back. */
#ifndef CBF_BUFFER_H
#define CBF_BUFFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include "cbf/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cbf_mem_kind {
    CBF_MEM_HOST = 0,   /* malloc'd, 64-byte aligned */
    CBF_MEM_PINNED = 1, /* cudaHostAlloc; only with CUDA built and a GPU present */
    CBF_MEM_DEVICE = 2, /* cudaMalloc on the engine's GPU; likewise */
} cbf_mem_kind;

const char *cbf_mem_kind_name(cbf_mem_kind kind);

typedef struct cbf_pool cbf_pool;

typedef struct cbf_buffer {
    /* Payload. */
    void *data;
    size_t size;            /* capacity in bytes (the pool's buffer size) */
    cbf_mem_kind kind;

    /* Metadata, set by the producer before it sends the buffer. */
    int64_t timestamp;      /* first sample, in digitiser samples (ADC clock) */
    uint64_t seq;           /* producer's sequence number, from 0 */
    uint8_t *present;       /* host array, one flag per heap or batch: 1 present, 0 missing */
    size_t n_present;       /* number of flags in use (<= the pool's n_present) */
    uint64_t saturated;     /* values clipped while producing this buffer */
    uint64_t missing;       /* heaps/batches missing in this buffer */
    void *aux;              /* host side data of the pool's aux_size bytes, layout
                               defined by the producing port (power sums, ...) */
    size_t aux_size;
    void *event;            /* cudaEvent_t for pinned/device pools (NULL otherwise):
                               a GPU producer records it when the data is ready */

    /* Private to the core. */
    cbf_pool *pool_;
    atomic_int refs_;
    unsigned index_;
} cbf_buffer;

typedef struct cbf_pool_config {
    const char *name;       /* for logs and leak reports, e.g. "dsim.out" */
    cbf_mem_kind kind;
    size_t count;           /* number of buffers */
    size_t size;            /* bytes per buffer */
    size_t n_present;       /* presence flags per buffer */
    size_t aux_size;        /* bytes of host side data per buffer */
} cbf_pool_config;

/* Pools made by a node (cbf_node_pool_create in cbf/node.h) are owned and
 * checked by the engine. These two are for code outside a graph (tests). */
int cbf_pool_create(const cbf_pool_config *cfg, cbf_pool **out, cbf_error *err);
/* Frees the pool; returns CBF_ELEAK (with the count in err) if buffers are
 * still out, and then frees nothing, so a leak never becomes a use-after-free. */
int cbf_pool_destroy(cbf_pool *pool, cbf_error *err);

/* Takes a free buffer, blocking until one comes back. Returns 0, or
 * CBF_ESTOPPED when the engine is aborting. The buffer comes with one
 * reference, presence flags all 1, counters 0, timestamp and seq 0.
 * Under a test harness (cbf/harness.h) a pool that runs dry grows by one
 * buffer instead of waiting (CBF_ENOMEM if it cannot). */
int cbf_pool_get(cbf_pool *pool, cbf_buffer **out);
/* Non-blocking variant, for sources that drop (and count) rather than
 * wait: returns 0 and sets *out, CBF_EAGAIN when no buffer is free now, or
 * CBF_ESTOPPED when the engine is aborting (*out NULL for both). */
int cbf_pool_try_get(cbf_pool *pool, cbf_buffer **out);

/* Whether a buffer's payload stays as its last holder left it between its
 * release and its next get: false when the pool poisons buffers
 * (CBF_POOL_POISON, the test harness). With cbf_port_feeds_writer false
 * too, a producer that would refill a buffer with what it already holds
 * (dsim's replay) may skip the refill. */
bool cbf_pool_keeps_payload(const cbf_pool *pool);

size_t cbf_pool_count(const cbf_pool *pool);
size_t cbf_pool_free_count(const cbf_pool *pool);
const cbf_pool_config *cbf_pool_config_of(const cbf_pool *pool);

void cbf_buffer_ref(cbf_buffer *buf);
/* Whether the caller holds the only reference (GStreamer's
 * gst_buffer_is_writable): only then may it change the payload or metadata
 * in place. A buffer fanned out to several consumers is shared (each holds
 * a reference) and must be treated as read-only. A port that writes its
 * input declares CBF_PORT_WRITES_INPUT (cbf/plugin.h), and the loader then
 * refuses fan-out into it, so there it is always writable. */
bool cbf_buffer_is_writable(const cbf_buffer *buf);
/* Drops one reference; the last one returns the buffer to its pool. */
void cbf_buffer_unref(cbf_buffer *buf);

/* Copies the first `bytes` bytes of the payload to host memory, waiting for
 * the buffer's event first when it has one (works for every kind). */
int cbf_buffer_copy_to_host(const cbf_buffer *buf, void *dst, size_t bytes, cbf_error *err);

#ifdef __cplusplus
}
#endif
#endif
