/* rt_choose: passes its input on through an output that declares two
 * types, RT_TYPE or RT_OTHER_TYPE, and names in init the one it gives
 * (rt_test_knobs.give: 1 RT_TYPE, 2 RT_OTHER_TYPE, 0 neither), so the
 * runtime's check of that choice against the consumers can be tested. */
#include "rt_common.h"

#define RT_OTHER_TYPE "cbf.test.other"

CBF_PLUGIN_EXPORT rt_knobs rt_test_knobs;

static int choose_init(cbf_node *n, cbf_error *err)
{
    cbf_port_desc d = *cbf_port_get_desc(cbf_node_port(n, "in", 0));
    d.type = rt_test_knobs.give == 1 ? RT_TYPE : rt_test_knobs.give == 2 ? RT_OTHER_TYPE : NULL;
    /* Also reports whether its output feeds an input that writes its buffers. */
    cbf_counter_set(cbf_node_counter(n, "feeds_writer"), cbf_port_feeds_writer(cbf_node_port(n, "out", 0)));
    return cbf_port_set_desc(cbf_node_port(n, "out", 0), &d, err);
}

static int choose_run(cbf_node *n, cbf_error *err)
{
    (void)err;
    return rt_forward(n, NULL);
}

static const cbf_port_decl choose_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = RT_TYPE, .doc = "anything of the test type"},
    {.name = "out", .dir = CBF_PORT_OUT, .type = RT_TYPE "|" RT_OTHER_TYPE,
     .doc = "the same buffers, as the type rt_test_knobs.give names"},
};
static const cbf_plugin_desc choose_desc = {
    .abi = CBF_PLUGIN_ABI, .name = "rt_choose", .version = "1",
    .summary = "test: an output of two declared types that names one in init",
    .ports = choose_ports, .n_ports = CBF_COUNT_OF(choose_ports),
    .init = choose_init, .run = choose_run};
CBF_PLUGIN_DEFINE(choose_desc)
