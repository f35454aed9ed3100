/* rt_pass: forwards every buffer by reference; with fail_at >= 0 it fails
 * on that buffer (or in init with fail_init), to test unwinding. */
#include "rt_common.h"

CBF_PLUGIN_EXPORT rt_knobs rt_test_knobs = {.fail_at = -1};

static int init(cbf_node *n, cbf_error *err)
{
    if (rt_param(n, "fail_init", rt_test_knobs.fail_init))
        return cbf_error_set(err, CBF_EINVAL, "failing init on purpose");
    cbf_node_set_state(n, cbf_node_counter(n, "passed"));
    const cbf_port_desc *d = cbf_port_get_desc(cbf_node_port(n, "in", 0));
    if (!d)
        return cbf_error_set(err, CBF_EINTERNAL, "input has no descriptor");
    return cbf_port_set_desc(cbf_node_port(n, "out", 0), d, err);
}

static int run(cbf_node *n, cbf_error *err)
{
    cbf_port *in = cbf_node_port(n, "in", 0), *out = cbf_node_port(n, "out", 0);
    int64_t fail_at = rt_param(n, "fail_at", rt_test_knobs.fail_at);
    for (int64_t i = 0;; i++) {
        cbf_buffer *b;
        int rc = cbf_port_recv(in, &b);
        if (rc)   /* the end of the stream is a clean finish */
            return rc == CBF_EOS ? CBF_OK : rc;
        if (i == fail_at) {
            cbf_buffer_unref(b);
            return cbf_error_set(err, CBF_EIO, "failing on purpose at buffer %lld", (long long)i);
        }
        rc = cbf_port_send(out, b);
        if (rc)
            return rc;
        cbf_counter_add(cbf_node_state(n), 1);
    }
}

static void fini(cbf_node *n)
{
    (void)n;
    rt_test_knobs.fini_calls++;
}

static const cbf_param_decl params[] = {
    {"fail_at", CBF_PARAM_INT, "-1", CBF_RANGE(-1, 1e15), NULL, "fail on this buffer; -1: never"},
    {"fail_init", CBF_PARAM_INT, "0", CBF_RANGE(0, 1), NULL, "1: fail in init"},
};
static const cbf_port_decl ports[] = {
    {"in", CBF_PORT_IN, RT_TYPE, 0, 0, "anything"},
    {"out", CBF_PORT_OUT, RT_TYPE, 0, 0, "the same buffers"},
};
static const cbf_plugin_desc desc = {CBF_PLUGIN_ABI, "rt_pass", "1", "test: pass-through, optionally failing",
                                     params, CBF_COUNT_OF(params), ports, CBF_COUNT_OF(ports),
                                     init, run, fini, NULL, 0, NULL};
CBF_PLUGIN_DEFINE(desc)
