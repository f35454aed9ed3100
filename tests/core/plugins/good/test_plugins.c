/* Valid test plugins for the loader tests: a source, a filter, sinks of
 * different input types, and one that declares every parameter type. One
 * source file, one descriptor per build (-DTEST_PLUGIN=...). */
#include "cbf/cbf.h"

static int run_nothing(cbf_node *node, cbf_error *err)
{
    (void)node;
    (void)err;
    return 0;
}

#if TEST_PLUGIN == 1
static const cbf_param_decl params[] = {
    {"count", CBF_PARAM_INT, "4", CBF_RANGE(1, 100), NULL, "buffers to send"},
};
static const cbf_port_decl ports[] = {
    {"out", CBF_PORT_OUT, "test.a", 0, 0, "type a"},
    {"aux", CBF_PORT_OUT, "test.b", 1, 0, "type b, optional"},
};
static const cbf_plugin_desc desc = {CBF_PLUGIN_ABI, "tsrc", "1.0", "test source", params,
                                     CBF_COUNT_OF(params), ports, CBF_COUNT_OF(ports), NULL,
                                     run_nothing, NULL, NULL, 0, NULL};
#elif TEST_PLUGIN == 2
static const cbf_param_decl params[] = {
    {"gain", CBF_PARAM_FLOAT, "1.0", CBF_NORANGE, NULL, "gain"},
};
static const cbf_port_decl ports[] = {
    {"in", CBF_PORT_IN, "test.a", 0, 0, "type a"},
    {"out", CBF_PORT_OUT, "test.a", 0, 0, "type a"},
};
static const cbf_plugin_desc desc = {CBF_PLUGIN_ABI, "tfilt", "1.0", "test filter", params,
                                     CBF_COUNT_OF(params), ports, CBF_COUNT_OF(ports), NULL,
                                     run_nothing, NULL, NULL, 0, NULL};
#elif TEST_PLUGIN == 3
static const cbf_param_decl params[] = {
    {"path", CBF_PARAM_STRING, "out.bin", CBF_NORANGE, NULL, "where"},
};
static const cbf_port_decl ports[] = {
    {"in", CBF_PORT_IN, "*", 0, 1, "anything, several edges"},
};
static const cbf_plugin_desc desc = {CBF_PLUGIN_ABI, "tsink", "1.0", "test sink of any type",
                                     params, CBF_COUNT_OF(params), ports, CBF_COUNT_OF(ports),
                                     NULL, run_nothing, NULL, NULL, 0, NULL};
#elif TEST_PLUGIN == 4
static const cbf_port_decl ports[] = {
    {"in", CBF_PORT_IN, "test.b", 0, 0, "type b only"},
};
static const cbf_plugin_desc desc = {CBF_PLUGIN_ABI, "tbsink", "1.0", "test sink of type b",
                                     NULL, 0, ports, CBF_COUNT_OF(ports), NULL, run_nothing, NULL, NULL, 0, NULL};
#elif TEST_PLUGIN == 5
static const cbf_param_decl params[] = {
    {"n", CBF_PARAM_INT, "16", CBF_RANGE(1, 1024), NULL, "an integer"},
    {"big", CBF_PARAM_INT, "2**20", CBF_NORANGE, NULL, "a large integer"},
    {"rate", CBF_PARAM_FLOAT, "1712e6", CBF_RANGE(0, 1e10), NULL, "a rate"},
    {"on", CBF_PARAM_BOOL, "false", CBF_NORANGE, NULL, "a switch"},
    {"label", CBF_PARAM_STRING, "hello", CBF_NORANGE, NULL, "a string"},
    {"empty", CBF_PARAM_STRING, "", CBF_NORANGE, NULL, "an empty string by default"},
    {"window", CBF_PARAM_CHOICE, "hann", CBF_NORANGE, "hann|hamming|rect", "a choice"},
    {"taps", CBF_PARAM_INT_LIST, "[1, 2, 3]", CBF_RANGE(-8, 7), NULL, "4-bit taps"},
    {"gains", CBF_PARAM_FLOAT_LIST, "[]", CBF_RANGE(0, 10), NULL, "gains"},
    {"tones", CBF_PARAM_RECORDS, "[]", CBF_NORANGE, "frequency,amplitude,phase=0.5", "tones"},
    {"req", CBF_PARAM_INT, NULL, CBF_NORANGE, NULL, "a required integer"},
    {"at", CBF_PARAM_INT, "-1", CBF_RANGE(-1, 9.2e18), NULL, "a timestamp, range near 2^63"},
};
static const cbf_plugin_desc desc = {CBF_PLUGIN_ABI, "tparams", "2.3", "every parameter type",
                                     params, CBF_COUNT_OF(params), NULL, 0, NULL, run_nothing, NULL, NULL, 0, NULL};
#elif TEST_PLUGIN == 6
static const cbf_port_decl ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = "test.a", .doc = "changed in place",
     .flags = CBF_PORT_WRITES_INPUT},
    {.name = "out", .dir = CBF_PORT_OUT, .type = "test.a", .optional = 1, .doc = "type a"},
};
static const cbf_plugin_desc desc = {.abi = CBF_PLUGIN_ABI, .name = "twrite", .version = "1.0",
                                     .summary = "in-place test stage",
                                     .ports = ports, .n_ports = CBF_COUNT_OF(ports),
                                     .run = run_nothing};
#elif TEST_PLUGIN == 7
static const cbf_port_decl ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = "test.a|test.b", .doc = "type a or b"},
    {.name = "out", .dir = CBF_PORT_OUT, .type = "test.c", .optional = 1, .doc = "type c"},
};
static const cbf_plugin_desc desc = {.abi = CBF_PLUGIN_ABI, .name = "talt", .version = "1.0",
                                     .summary = "two-type test stage", .ports = ports,
                                     .n_ports = CBF_COUNT_OF(ports), .run = run_nothing};
#elif TEST_PLUGIN == 8
static const cbf_port_decl ports[] = {
    {.name = "out", .dir = CBF_PORT_OUT, .type = "test.c|test.a", .doc = "type c or a, named in init"},
};
static const cbf_plugin_desc desc = {.abi = CBF_PLUGIN_ABI, .name = "tchoose", .version = "1.0",
                                     .summary = "source of two declared types", .ports = ports,
                                     .n_ports = CBF_COUNT_OF(ports), .run = run_nothing};
#endif

CBF_PLUGIN_DEFINE(desc)
