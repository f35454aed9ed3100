/* rt_sink: checks that buffers arrive in sequence with the source's words,
 * optionally spending delay_us on each (a slow consumer). Gauges: last_seq
 * (the last buffer's sequence number) and never_set (for cbf-run's table,
 * which leaves out gauges with no value). */
#include <stdlib.h>
#include <time.h>
#include "rt_common.h"

CBF_PLUGIN_EXPORT rt_knobs rt_test_knobs = {.delay_us = 0};

typedef struct {
    cbf_counter *received, *order_errors, *data_errors;
    cbf_gauge *last_seq;
    void *scratch;      /* host copy of non-host buffers */
} counters;

static int init(cbf_node *n, cbf_error *err)
{
    counters *c = calloc(1, sizeof *c);
    if (!c)
        return cbf_error_set(err, CBF_ENOMEM, "rt_sink: out of memory");
    c->received = cbf_node_counter(n, "received");
    c->order_errors = cbf_node_counter(n, "order_errors");
    c->data_errors = cbf_node_counter(n, "data_errors");
    c->last_seq = cbf_node_gauge(n, "last_seq");
    (void)cbf_node_gauge(n, "never_set");
    cbf_node_set_state(n, c);
    const cbf_port_desc *d = cbf_port_get_desc(cbf_node_port(n, "in", 0));
    if (d && d->mem != CBF_MEM_HOST && !(c->scratch = malloc(cbf_port_desc_bytes(d))))
        return cbf_error_set(err, CBF_ENOMEM, "rt_sink: out of memory");
    return CBF_OK;
}

static int run(cbf_node *n, cbf_error *err)
{
    counters *c = cbf_node_state(n);
    cbf_port *in = cbf_node_port(n, "in", 0);
    int64_t delay_us = rt_param(n, "delay_us", rt_test_knobs.delay_us);
    int64_t stop_after = rt_param(n, "stop_after", rt_test_knobs.stop_after);
    for (uint64_t expect = 0;; expect++) {
        if (stop_after > 0 && cbf_counter_get(c->received) >= (uint64_t)stop_after)
            return CBF_OK; /* seen enough: the runtime releases the rest */
        cbf_buffer *b;
        int rc = cbf_port_recv(in, &b);
        if (rc)   /* the end of the stream is a clean finish */
            return rc == CBF_EOS ? CBF_OK : rc;
        if (b->seq != expect)
            cbf_counter_add(c->order_errors, 1);
        const uint64_t *w = rt_host_view(b, c->scratch, err);
        if (!w) {
            cbf_buffer_unref(b);
            return err->code;
        }
        for (size_t i = 0; i < b->size / 8; i++)
            if (w[i] != rt_word(b->seq, i)) {
                cbf_counter_add(c->data_errors, 1);
                break;
            }
        expect = b->seq;
        if (delay_us > 0) {
            /* Simulates a consumer that needs this long per buffer. */
            struct timespec t = {delay_us / 1000000, (delay_us % 1000000) * 1000};
            nanosleep(&t, NULL);
        }
        cbf_gauge_set(c->last_seq, (double)b->seq);
        cbf_buffer_unref(b);
        cbf_counter_add(c->received, 1);
    }
}

static void fini(cbf_node *n)
{
    rt_test_knobs.fini_calls++;
    counters *c = cbf_node_state(n);
    if (c)
        free(c->scratch);
    free(c);
}

static const cbf_param_decl params[] = {
    {"delay_us", CBF_PARAM_INT, "0", CBF_RANGE(0, 1e7), NULL, "microseconds spent per buffer"},
    {"stop_after", CBF_PARAM_INT, "0", CBF_RANGE(0, 1e15), NULL, "return after this many buffers; 0: at end of stream"},
};
static const cbf_port_decl ports[] = {{"in", CBF_PORT_IN, RT_TYPE, 0, 0, "counting words"}};
static const cbf_plugin_desc desc = {CBF_PLUGIN_ABI, "rt_sink", "1", "test: checking, optionally slow sink",
                                     params, CBF_COUNT_OF(params), ports, CBF_COUNT_OF(ports),
                                     init, run, fini, NULL, 0, NULL};
CBF_PLUGIN_DEFINE(desc)
