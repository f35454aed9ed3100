/* rt_leak: a sink that keeps its first buffer forever, on purpose, so the
 * engine's leak check has something to find. Its counter first_writable
 * says whether that buffer was its alone when it arrived (1) or shared by a
 * fan-out (0): held forever, it stays shared by every such sink. */
#include "rt_common.h"

CBF_PLUGIN_EXPORT rt_knobs rt_test_knobs;

static int init(cbf_node *n, cbf_error *err)
{
    (void)err;
    cbf_node_counter(n, "first_writable");
    return CBF_OK;
}

static int run(cbf_node *n, cbf_error *err)
{
    (void)err;
    cbf_port *in = cbf_node_port(n, "in", 0);
    for (;;) {
        cbf_buffer *b;
        int rc = cbf_port_recv(in, &b);
        if (rc)   /* the end of the stream is a clean finish */
            return rc == CBF_EOS ? CBF_OK : rc;
        if (cbf_node_state(n)) {
            cbf_buffer_unref(b);
        } else {
            cbf_counter_set(cbf_node_counter(n, "first_writable"), cbf_buffer_is_writable(b));
            cbf_node_set_state(n, b);  /* never released */
        }
    }
}

static void fini(cbf_node *n)
{
    (void)n;
    rt_test_knobs.fini_calls++;
}

static const cbf_port_decl ports[] = {{"in", CBF_PORT_IN, RT_TYPE, 0, 0, "anything"}};
static const cbf_plugin_desc desc = {CBF_PLUGIN_ABI, "rt_leak", "1", "test: sink that leaks one buffer",
                                     NULL, 0, ports, CBF_COUNT_OF(ports), init, run, fini, NULL, 0, NULL};
CBF_PLUGIN_DEFINE(desc)
