/* rt_negate: negates every word of the buffers it receives, in place, and
 * forwards them. Its input is declared CBF_PORT_WRITES_INPUT, so the loader
 * refuses to fan an output out into it; it counts, in `shared`, buffers
 * that arrived not writable anyway (never, if the loader did its job). */
#include "rt_common.h"

CBF_PLUGIN_EXPORT rt_knobs rt_test_knobs;

static int init(cbf_node *n, cbf_error *err)
{
    cbf_node_counter(n, "shared");
    return cbf_port_set_desc(cbf_node_port(n, "out", 0), cbf_port_get_desc(cbf_node_port(n, "in", 0)), err);
}

static void negate(cbf_node *n, cbf_buffer *b)
{
    if (!cbf_buffer_is_writable(b))
        cbf_counter_add(cbf_node_counter(n, "shared"), 1);
    if (b->kind == CBF_MEM_HOST)
        for (size_t i = 0; i < b->size / 8; i++)
            ((uint64_t *)b->data)[i] = ~((uint64_t *)b->data)[i];
}

static int run(cbf_node *n, cbf_error *err)
{
    (void)err;
    return rt_forward(n, negate);
}

static const cbf_port_decl ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = RT_TYPE, .doc = "negated in place",
     .flags = CBF_PORT_WRITES_INPUT},
    {.name = "out", .dir = CBF_PORT_OUT, .type = RT_TYPE, .optional = 1, .doc = "the same buffers"},
};
static const cbf_plugin_desc desc = {.abi = CBF_PLUGIN_ABI, .name = "rt_negate", .version = "1",
                                     .summary = "test: negates its input in place",
                                     .ports = ports, .n_ports = CBF_COUNT_OF(ports),
                                     .init = init, .run = run};
CBF_PLUGIN_DEFINE(desc)
