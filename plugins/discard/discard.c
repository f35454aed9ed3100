/* discard: a sink that takes any stream, counts its buffers and bytes, and
 * drops them (GStreamer's fakesink). Benchmarks end a pipeline here so they
 * time the engine rather than a file or a socket.
 *
 * It checks nothing in the data. It does wait for each buffer's producer
 * to finish (the buffer's event, for pinned or device buffers) before
 * counting it, so a rate measured at this sink includes the GPU work
 * behind it, and a buffer is never released while a GPU still writes it. */
#include <stdlib.h>

#include "cbf/cbf.h"

typedef struct discard_state {
    cbf_counter *c_buffers, *c_bytes, *c_missing;
    int inputs;
} discard_state;

static const cbf_port_decl discard_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = "*", .multi = 1,
     .doc = "any stream, one or several edges; every buffer is counted and dropped"},
};

static int discard_init(cbf_node *node, cbf_error *err)
{
    discard_state *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "state");
    cbf_node_set_state(node, s);
    s->inputs = cbf_node_port_count(node, "in");
    s->c_buffers = cbf_node_counter(node, "buffers");
    s->c_bytes = cbf_node_counter(node, "bytes");
    s->c_missing = cbf_node_counter(node, "missing");
    return 0;
}

/* Round robin over the inputs, one buffer each, until every one has ended:
 * no input waits behind another's end of stream. */
static int discard_run(cbf_node *node, cbf_error *err)
{
    discard_state *s = cbf_node_state(node);
    size_t bytes[64];
    int open = s->inputs, done[64] = {0};
    if (s->inputs > 64)
        return cbf_error_set(err, CBF_ECONFIG, "%d inputs: at most 64", s->inputs);
    for (int i = 0; i < s->inputs; i++)
        bytes[i] = cbf_port_desc_bytes(cbf_port_get_desc(cbf_node_port(node, "in", i)));
    while (open) {
        for (int i = 0; i < s->inputs; i++) {
            if (done[i])
                continue;
            cbf_buffer *b;
            int rc = cbf_port_recv(cbf_node_port(node, "in", i), &b);
            if (rc == CBF_EOS) {
                done[i] = 1;
                open--;
                continue;
            }
            if (rc)
                return rc;
            if (b->event)
                rc = cbf_buffer_sync_host(b, err);
            cbf_counter_add(s->c_buffers, 1);
            cbf_counter_add(s->c_bytes, bytes[i]);
            cbf_counter_add(s->c_missing, b->missing);
            cbf_buffer_unref(b);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static void discard_fini(cbf_node *node) { free(cbf_node_state(node)); }

static const cbf_plugin_desc discard_desc = {
    .abi = CBF_PLUGIN_ABI, .name = "discard", .version = "0.1.0",
    .summary = "sink that counts buffers and bytes and drops them (for benchmarks)",
    .ports = discard_ports, .n_ports = CBF_COUNT_OF(discard_ports),
    .init = discard_init, .run = discard_run, .fini = discard_fini,
};
CBF_PLUGIN_DEFINE(discard_desc)
