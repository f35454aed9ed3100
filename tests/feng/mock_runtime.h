/* mock_runtime.h: a single-threaded stand-in for the parts of libcbf a
 * plugin calls (params, ports, pools, counters), so the pfb and fft_post
 * plugins' own logic (staging, chunk overlap, presence, delays) can be
 * tested on their own. The engine itself is tested with the real libcbf in
 * test_feng_pipeline.c. CPU path only. */
#ifndef FENG_MOCK_RUNTIME_H
#define FENG_MOCK_RUNTIME_H

#include "cbf/cbf.h"

#define MOCK_MAX_BUFS 512

struct cbf_port {
    cbf_port_desc desc;
    const cbf_port_desc *upstream;   /* input: the producer's descriptor */
    cbf_buffer *q[MOCK_MAX_BUFS];    /* input: to receive; output: sent */
    size_t n, next;
};

struct cbf_node {
    const cbf_plugin_desc *plugin;
    cbf_params *params;
    void *state;
    struct cbf_port in, out;
};

/* overrides: "name=value" with value a number, a word or [a, b, ...]. */
cbf_node *mock_node(const cbf_plugin_desc *d, const char *const *overrides, size_t n,
                    const cbf_port_desc *in_desc);
void mock_node_free(cbf_node *n);
/* A host buffer the test fills and queues on a node's input. */
cbf_buffer *mock_buffer(size_t bytes, size_t n_present, size_t aux_size);
void mock_push(cbf_node *n, cbf_buffer *b);
/* Runs init's counterpart run() to the end of the queued input. */
int mock_run(cbf_node *n, cbf_error *err);

#endif
