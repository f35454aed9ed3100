/* rt_common.h: shared by the runtime's test plugins.
 *
 * The plugins take their settings from params when the loader gave them
 * (cbf-run with a YAML), else from rt_test_knobs, a struct each plugin
 * exports so unit tests that build a graph by hand (params NULL) can set it
 * through dlsym. The same struct reports back what fini saw. */
#ifndef RT_COMMON_H
#define RT_COMMON_H

#include <stdint.h>
#include "cbf/cbf.h"

typedef struct rt_knobs {
    int64_t count;      /* source: buffers to send, 0 = until stopped */
    int64_t size;       /* source: bytes per buffer (multiple of 8) */
    int64_t pool;       /* source: buffers in its pool */
    int64_t delay_us;   /* sink: time spent on each buffer (a slow consumer) */
    int64_t stop_after; /* sink: return after this many buffers, 0 = at end of stream */
    int64_t fail_at;    /* fail: index of the buffer it fails on */
    int64_t fail_init;  /* fail: fail in init instead */
    int64_t mem;        /* source: cbf_mem_kind of its pool (pinned/device need a GPU) */
    int64_t give;       /* rt_choose: which of its output's types it names (1, 2; 0 none) */
    /* Reported back. */
    int64_t fini_calls;
    int64_t pool_free_at_fini;   /* source: buffers back in its pool when fini ran */
    int64_t pool_max_out;        /* source: most buffers out of its pool at once */
} rt_knobs;

extern CBF_PLUGIN_EXPORT rt_knobs rt_test_knobs;

static inline int64_t rt_param(const cbf_node *n, const char *name, int64_t fallback)
{
    const cbf_params *p = cbf_node_params(n);
    return p ? cbf_params_int(p, name) : fallback;
}

/* Receives every buffer of input "in", hands it to `each` (may be NULL)
 * and sends it on through output "out", until the end of the stream. */
static inline int rt_forward(cbf_node *n, void (*each)(cbf_node *n, cbf_buffer *b))
{
    for (;;) {
        cbf_buffer *b;
        int rc = cbf_port_recv(cbf_node_port(n, "in", 0), &b);
        if (rc == CBF_EOS)
            return CBF_OK;
        if (rc)
            return rc;
        if (each)
            each(n, b);
        if ((rc = cbf_port_send(cbf_node_port(n, "out", 0), b)))
            return rc;
    }
}

/* The payload word i of buffer seq: distinct per buffer and per word, never 0. */
static inline uint64_t rt_word(uint64_t seq, uint64_t i)
{
    return ((seq + 1) * 0x9E3779B97F4A7C15ull) ^ (i * 0xBF58476D1CE4E5B9ull) ^ 0x5555u;
}

#define RT_TYPE "cbf.test.u64"

/* Host copy of a buffer's payload for checking: the payload itself for host
 * memory, else a copy into scratch (waits for the producer's event). */
static inline const uint64_t *rt_host_view(const cbf_buffer *b, void *scratch, cbf_error *err)
{
    if (b->kind == CBF_MEM_HOST)
        return b->data;
    return cbf_buffer_copy_to_host(b, scratch, b->size, err) ? NULL : scratch;
}

#endif
