/* rt_merge: a sink with a multi input. It takes one buffer from each open
 * input in turn and checks each input's sequence on its own, so tests can
 * see that every edge keeps its own queue and order. */
#include <stdlib.h>
#include "rt_common.h"

CBF_PLUGIN_EXPORT rt_knobs rt_test_knobs;

typedef struct {
    cbf_counter *received, *order_errors, *inputs;
} counters;

static int init(cbf_node *n, cbf_error *err)
{
    counters *c = calloc(1, sizeof *c);
    if (!c)
        return cbf_error_set(err, CBF_ENOMEM, "rt_merge: out of memory");
    c->received = cbf_node_counter(n, "received");
    c->order_errors = cbf_node_counter(n, "order_errors");
    c->inputs = cbf_node_counter(n, "inputs");
    cbf_counter_set(c->inputs, (uint64_t)cbf_node_port_count(n, "in"));
    cbf_node_set_state(n, c);
    return CBF_OK;
}

static int run(cbf_node *n, cbf_error *err)
{
    (void)err;
    counters *c = cbf_node_state(n);
    int k = cbf_node_port_count(n, "in");
    uint64_t expect[64] = {0};
    bool open[64];
    int n_open = k < 64 ? k : 64;
    for (int i = 0; i < n_open; i++)
        open[i] = true;
    while (n_open > 0) {
        for (int i = 0; i < k && i < 64; i++) {
            if (!open[i])
                continue;
            cbf_buffer *b;
            int rc = cbf_port_recv(cbf_node_port(n, "in", i), &b);
            if (rc == CBF_EOS) {
                open[i] = false;
                n_open--;
                continue;
            }
            if (rc)
                return rc;
            if (b->seq != expect[i])
                cbf_counter_add(c->order_errors, 1);
            expect[i] = b->seq + 1;
            cbf_buffer_unref(b);
            cbf_counter_add(c->received, 1);
        }
    }
    return CBF_OK;
}

static void fini(cbf_node *n)
{
    rt_test_knobs.fini_calls++;
    free(cbf_node_state(n));
}

static const cbf_port_decl ports[] = {{"in", CBF_PORT_IN, RT_TYPE, 0, 1, "any number of streams"}};
static const cbf_plugin_desc desc = {CBF_PLUGIN_ABI, "rt_merge", "1", "test: multi-input checking sink",
                                     NULL, 0, ports, CBF_COUNT_OF(ports), init, run, fini, NULL, 0, NULL};
CBF_PLUGIN_DEFINE(desc)
