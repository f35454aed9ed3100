/* test_gap: forwards digitiser chunks by reference except the ones listed
 * in `drop` (by arrival index), so the next stage sees a timestamp gap. */
#include <stdlib.h>

#include "cbf/cbf.h"

static int gap_init(cbf_node *n, cbf_error *err)
{
    const cbf_port_desc *d = cbf_port_get_desc(cbf_node_port(n, "in", 0));
    return cbf_port_set_desc(cbf_node_port(n, "out", 0), d, err);
}

static int gap_dropped(const cbf_params *p, int64_t i)
{
    for (size_t k = 0; k < cbf_params_len(p, "drop"); k++)
        if (cbf_params_int_at(p, "drop", k) == i)
            return 1;
    return 0;
}

static int gap_run(cbf_node *n, cbf_error *err)
{
    (void)err;
    cbf_port *in = cbf_node_port(n, "in", 0), *out = cbf_node_port(n, "out", 0);
    for (int64_t i = 0;; i++) {
        cbf_buffer *b;
        int rc = cbf_port_recv(in, &b);
        if (rc == CBF_EOS)
            return 0;
        if (rc)
            return rc;
        if (gap_dropped(cbf_node_params(n), i)) {
            cbf_buffer_unref(b);
            continue;
        }
        if ((rc = cbf_port_send(out, b)))
            return rc;
    }
}

static void gap_fini(cbf_node *n)
{
    (void)n;
}

static const cbf_param_decl gap_params[] = {
    {.name = "drop", .type = CBF_PARAM_INT_LIST, .def = "[]", .has_range = 1, .min = 0,
     .max = 1e15, .doc = "indices of the buffers to drop"},
};
static const cbf_port_decl gap_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = "cbf.adc.packed", .doc = "digitiser chunks"},
    {.name = "out", .dir = CBF_PORT_OUT, .type = "cbf.adc.packed", .doc = "the same, some dropped"},
};
static const cbf_plugin_desc gap_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "test_gap",
    .version = "1",
    .summary = "test: drops chosen digitiser chunks",
    .params = gap_params,
    .n_params = CBF_COUNT_OF(gap_params),
    .ports = gap_ports,
    .n_ports = CBF_COUNT_OF(gap_ports),
    .init = gap_init,
    .run = gap_run,
    .fini = gap_fini,
};
CBF_PLUGIN_DEFINE(gap_desc)
