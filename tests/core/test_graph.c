/* Pipeline YAML: one test per class of mistake, each checking the exact
 * place (line:column, 1-based) and that the node, parameter or port is
 * named; then overrides, ordering, and the engine settings. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "loader_util.h"

#define E(...) __VA_ARGS__, NULL

#define SRC_SINK "nodes:\n  src:\n    plugin: tsrc\n  sink:\n    plugin: tsink\n  filt:\n    plugin: tfilt\n"

static void yaml_syntax(void **state)
{
    (void)state;
    /* line 3 opens a flow mapping that line 4 never closes */
    tu_expect_error("nodes:\n  src:\n    params: {count: 3\n    plugin: tsrc\n", NULL, 0, CBF_ECONFIG,
                    4, 11, E("YAML syntax error"));
}

static void top_level_key(void **state)
{
    (void)state;
    tu_expect_error("engine:\n  gpu: auto\nnodse:\n  src: {plugin: tsrc}\n", NULL, 0, CBF_ECONFIG, 3, 1,
                    E("unknown top-level key 'nodse'", "did you mean 'nodes'"));
    tu_expect_error("engine: {gpu: auto}\n", NULL, 0, CBF_ECONFIG, 1, 1, E("no nodes"));
    tu_expect_error("nodes:\n  src: {plugin: tsrc}\n---\nnodes: {}\n", NULL, 0, CBF_ECONFIG, 3, 1,
                    E("second YAML document"));
    tu_expect_error("- a\n- b\n", NULL, 0, CBF_ECONFIG, 1, 1, E("expected a mapping"));
    tu_expect_error("", NULL, 0, CBF_ECONFIG, 1, 1, E("empty"));
}

static void engine_keys(void **state)
{
    (void)state;
    tu_expect_error("engine:\n  gpus: none\n" SRC_SINK, NULL, 0, CBF_ECONFIG, 2, 3,
                    E("unknown engine key 'gpus'", "did you mean 'gpu'"));
    tu_expect_error("engine:\n  gpu: maybe\n" SRC_SINK, NULL, 0, CBF_ECONFIG, 2, 8,
                    E("engine.gpu", "'maybe'", "auto|required|none"));
    tu_expect_error("engine:\n  queue_depth: 0\n" SRC_SINK, NULL, 0, CBF_ECONFIG, 2, 16,
                    E("engine.queue_depth", "minimum 1"));
    tu_expect_error("engine:\n  gpu_device: x\n" SRC_SINK, NULL, 0, CBF_ECONFIG, 2, 15,
                    E("engine.gpu_device", "integer"));
    tu_expect_error("engine:\n  gpu: none\n  gpu: auto\n" SRC_SINK, NULL, 0, CBF_ECONFIG, 3, 3,
                    E("'gpu' is given twice", "p.yaml:2:3"));
}

static void node_without_plugin(void **state)
{
    (void)state;
    tu_expect_error("nodes:\n  src:\n    params: {count: 2}\n", NULL, 0, CBF_ECONFIG, 2, 3,
                    E("node 'src'", "no 'plugin:'"));
    tu_expect_error("nodes:\n  src:\n    plugin: tsrc\n    parms: {}\n", NULL, 0, CBF_ECONFIG, 4, 5,
                    E("node 'src'", "'parms'", "did you mean 'params'"));
}

static void unknown_plugin(void **state)
{
    (void)state;
    tu_expect_error("nodes:\n  src:\n    plugin: tsrcc\n", NULL, 0, CBF_ECONFIG, 3, 13,
                    E("node 'src'", "unknown plugin 'tsrcc'", "did you mean 'tsrc'"));
}

static void parameters(void **state)
{
    (void)state;
    tu_expect_error("nodes:\n  src:\n    plugin: tsrc\n    params:\n      cout: 3\n", NULL, 0, CBF_ECONFIG,
                    5, 7, E("node 'src'", "no parameter 'cout'", "did you mean 'count'"));
    tu_expect_error("nodes:\n  p:\n    plugin: tparams\n", NULL, 0, CBF_ECONFIG, 2, 3,
                    E("node 'p'", "parameter 'req' is required", "a required integer"));
    tu_expect_error("nodes:\n  src:\n    plugin: tsrc\n    params:\n      count: abc\n", NULL, 0,
                    CBF_ECONFIG, 5, 14, E("node 'src'", "parameter 'count'", "expected an integer"));
    tu_expect_error("nodes:\n  src:\n    plugin: tsrc\n    params:\n      count: 500\n", NULL, 0,
                    CBF_ECONFIG, 5, 14, E("node 'src'", "parameter 'count'", "500", "[1, 100]"));
    tu_expect_error("nodes:\n  src:\n    plugin: tsrc\n    params:\n      count: 5\n      count: 6\n",
                    NULL, 0, CBF_ECONFIG, 6, 7, E("parameter 'count' is given twice"));
}

/* `params:` given a scalar (a number, a quoted or block string, an alias
 * of one): refused at its place. Its data was once read as a mapping's
 * pairs, and the load ended in "out of memory" with no place. */
static void params_not_a_mapping(void **state)
{
    (void)state;
    static const char *const ov[] = {"src.count=3"};
    tu_expect_error("nodes:\n  src: {plugin: tsrc, params: 5}\n", NULL, 0, CBF_ECONFIG, 2, 31,
                    E("node 'src'", "params: expected a mapping"));
    tu_expect_error("nodes:\n  src: {plugin: tsrc, params: \"\"}\n", NULL, 0, CBF_ECONFIG, 2, 31,
                    E("node 'src'", "params: expected a mapping"));
    tu_expect_error("nodes:\n  src: {plugin: tsrc, params: 'count: 3'}\n", ov, 1, CBF_ECONFIG, 2, 31,
                    E("node 'src'", "params: expected a mapping"));
    tu_expect_error("nodes:\n  src:\n    plugin: tsrc\n    params: |\n      count: 3\n", NULL, 0,
                    CBF_ECONFIG, 4, 13, E("node 'src'", "params: expected a mapping"));
    tu_expect_error("nodes:\n  src: {plugin: tsrc, params: &p 7}\n  sink: {plugin: tsink, params: *p}\n",
                    NULL, 0, CBF_ECONFIG, 2, 31, E("node 'src'", "params: expected a mapping"));
}

static void duplicate_node(void **state)
{
    (void)state;
    tu_expect_error("nodes:\n  src:\n    plugin: tsrc\n  src:\n    plugin: tsrc\n", NULL, 0, CBF_ECONFIG,
                    4, 3, E("node 'src' is given twice", "p.yaml:2:3"));
}

static void edge_unknown_node_or_port(void **state)
{
    (void)state;
    tu_expect_error(SRC_SINK "edges:\n  - src.out -> snk.in\n", NULL, 0, CBF_ECONFIG, 9, 16,
                    E("no node 'snk'", "did you mean 'sink'"));
    tu_expect_error(SRC_SINK "edges:\n  - src.outt -> sink.in\n", NULL, 0, CBF_ECONFIG, 9, 5,
                    E("node 'src'", "no port 'outt'", "did you mean 'out'"));
    tu_expect_error(SRC_SINK "edges:\n  - {from: src.out, to: sink.input}\n", NULL, 0, CBF_ECONFIG,
                    9, 25, E("node 'sink'", "no port 'input'", "did you mean 'in'"));
    tu_expect_error(SRC_SINK "edges:\n  - src.out sink.in\n", NULL, 0, CBF_ECONFIG, 9, 5,
                    E("NODE.PORT -> NODE.PORT"));
}

static void edge_direction(void **state)
{
    (void)state;
    tu_expect_error(SRC_SINK "edges:\n  - sink.in -> src.out\n", NULL, 0, CBF_ECONFIG, 9, 5,
                    E("edge from 'sink.in'", "is an input of node 'sink'"));
    tu_expect_error(SRC_SINK "edges:\n  - src.out -> filt.out\n", NULL, 0, CBF_ECONFIG, 9, 16,
                    E("edge to 'filt.out'", "is an output of node 'filt'"));
}

static void edge_types(void **state)
{
    (void)state;
    tu_expect_error(SRC_SINK "edges:\n  - src.aux -> filt.in\n", NULL, 0, CBF_ECONFIG, 9, 5,
                    E("src.aux gives 'test.b'", "filt.in takes 'test.a'"));
    /* an input of type "*" takes any type */
    cbf_graph *g = NULL;
    cbf_error err = {0};
    assert_int_equal(tu_load("nodes:\n  src: {plugin: tsrc}\n  sink: {plugin: tsink}\n"
                             "edges:\n  - src.out -> sink.in\n  - src.aux -> sink.in\n",
                             NULL, 0, &g, &err), 0);
    cbf_graph_free(g);
}

/* An input may list alternatives: it takes either, and a mismatch lists them. */
static void edge_type_alternatives(void **state)
{
    (void)state;
    cbf_graph *g = NULL;
    cbf_error err = {0};
    assert_int_equal(tu_load("nodes:\n  src: {plugin: tsrc}\n  a: {plugin: talt}\n  b: {plugin: talt}\n"
                             "edges:\n  - src.out -> a.in\n  - src.aux -> b.in\n",
                             NULL, 0, &g, &err), 0);
    cbf_graph_free(g);
    tu_expect_error("nodes:\n  src: {plugin: tsrc}\n  a: {plugin: talt}\n  b: {plugin: talt}\n"
                    "edges:\n  - src.out -> a.in\n  - a.out -> b.in\n",
                    NULL, 0, CBF_ECONFIG, 7, 5,
                    E("edge a.out -> b.in", "a.out gives 'test.c', b.in takes 'test.a' or 'test.b'"));
    /* An output of alternatives meets an input that takes any one of them. */
    assert_int_equal(tu_load("nodes:\n  ch: {plugin: tchoose}\n  k: {plugin: tsink}\n"
                             "edges:\n  - ch.out -> k.in\n", NULL, 0, &g, &err), 0);
    cbf_graph_free(g);
    tu_expect_error("nodes:\n  ch: {plugin: tchoose}\n  k: {plugin: tbsink}\n"
                    "edges:\n  - ch.out -> k.in\n",
                    NULL, 0, CBF_ECONFIG, 5, 5,
                    E("edge ch.out -> k.in", "ch.out gives 'test.c' or 'test.a', k.in takes 'test.b'"));
    assert_true(cbf_port_type_accepts("x|y|z", "z"));
    assert_false(cbf_port_type_accepts("x|y|z", "x|y"));
    assert_false(cbf_port_type_accepts("xy", "x"));
    assert_true(cbf_port_type_accepts("*", "anything"));
}

/* A fan-out into an input that writes its buffers is refused at the edge
 * that makes the fan-out, whichever of the two edges comes first. */
static void edge_fanout_into_writer(void **state)
{
    (void)state;
    tu_expect_error("nodes:\n  src: {plugin: tsrc}\n  w: {plugin: twrite}\n  s: {plugin: tsink}\n"
                    "edges:\n  - src.out -> w.in\n  - src.out -> s.in\n",
                    NULL, 0, CBF_ECONFIG, 7, 5,
                    E("edge src.out -> s.in", "output 'src.out' already feeds w.in (at ", "p.yaml:6:5)",
                      "input 'w.in' writes its buffers in place"));
    tu_expect_error("nodes:\n  src: {plugin: tsrc}\n  w: {plugin: twrite}\n  s: {plugin: tsink}\n"
                    "edges:\n  - src.out -> s.in\n  - {from: src.out, to: w.in}\n",
                    NULL, 0, CBF_ECONFIG, 7, 5,
                    E("edge src.out -> w.in", "already feeds s.in", "input 'w.in' writes"));
    /* One consumer only: the writer has the buffer to itself. */
    cbf_graph *g = NULL;
    cbf_error err = {0};
    assert_int_equal(tu_load("nodes:\n  src: {plugin: tsrc}\n  w: {plugin: twrite}\n  s: {plugin: tsink}\n"
                             "edges:\n  - src.out -> w.in\n  - w.out -> s.in\n  - src.aux -> s.in\n",
                             NULL, 0, &g, &err), 0);
    cbf_graph_free(g);
}

static void edge_two_into_one(void **state)
{
    (void)state;
    tu_expect_error(SRC_SINK "edges:\n  - src.out -> filt.in\n  - src.out -> filt.in\n", NULL, 0,
                    CBF_ECONFIG, 10, 5, E("'filt.in' takes one edge", "p.yaml:9:5"));
}

static void edge_depth(void **state)
{
    (void)state;
    tu_expect_error("nodes:\n  src: {plugin: tsrc}\n  sink: {plugin: tsink}\n"
                    "edges:\n  - {from: src.out, to: sink.in, depth: 0}\n",
                    NULL, 0, CBF_ECONFIG, 5, 41, E("depth", ">= 1"));
}

static void unconnected_port(void **state)
{
    (void)state;
    /* src.aux is optional and may stay unwired */
    cbf_graph *g = NULL;
    cbf_error err = {0};
    assert_int_equal(tu_load("nodes:\n  src: {plugin: tsrc}\n  sink: {plugin: tsink}\n"
                             "edges:\n  - src.out -> sink.in\n", NULL, 0, &g, &err), 0);
    cbf_graph_free(g);
    tu_expect_error(SRC_SINK "edges:\n  - src.out -> filt.in\n", NULL, 0, CBF_ECONFIG, 4, 3,
                    E("node 'sink'", "input 'in'", "not connected"));
    tu_expect_error("nodes:\n  src: {plugin: tsrc}\n  sink: {plugin: tsink}\n", NULL, 0, CBF_ECONFIG,
                    2, 3, E("node 'src'", "output 'out'", "test.a"));
}

static void cycle(void **state)
{
    (void)state;
    tu_expect_error("nodes:\n  a: {plugin: tfilt}\n  b: {plugin: tfilt}\n"
                    "edges:\n  - a.out -> b.in\n  - b.out -> a.in\n",
                    NULL, 0, CBF_ECONFIG, 2, 3, E("cycle: a -> b -> a"));
    /* a source feeding a sink beside a three-node cycle listed out of order */
    tu_expect_error("nodes:\n  s: {plugin: tsrc}\n  k: {plugin: tsink}\n  c: {plugin: tfilt}\n"
                    "  a: {plugin: tfilt}\n  b: {plugin: tfilt}\n"
                    "edges:\n  - s.out -> k.in\n  - b.out -> c.in\n  - a.out -> b.in\n  - c.out -> a.in\n",
                    NULL, 0, CBF_ECONFIG, 4, 3, E("cycle: c -> a -> b -> c"));
}

static void order_and_depth(void **state)
{
    (void)state;
    cbf_graph *g = NULL;
    cbf_error err = {0};
    int rc = tu_load("engine:\n  queue_depth: 8\n  gpu: none\n"
                     "nodes:\n  sink:\n    plugin: tsink\n  filt:\n    plugin: tfilt\n  src:\n    plugin: tsrc\n"
                     "edges:\n  - filt.out -> sink.in\n  - {from: src.out, to: filt.in, depth: 2}\n"
                     "  - src.aux -> sink.in\n",
                     NULL, 0, &g, &err);
    if (rc)
        fail_msg("%s", err.msg);
    assert_int_equal(g->n_nodes, 3);
    assert_string_equal(g->nodes[0].name, "src");
    assert_string_equal(g->nodes[1].name, "filt");
    assert_string_equal(g->nodes[2].name, "sink");
    assert_string_equal(g->nodes[2].plugin->name, "tsink");
    assert_non_null(strstr(g->nodes[2].plugin_path, "cbf_tsink.so"));
    char where[600];
    snprintf(where, sizeof where, "%s/p.yaml:5:3", tu_tmpdir());
    assert_string_equal(g->nodes[2].where, where);
    assert_int_equal(g->n_edges, 3);
    assert_int_equal(g->edges[0].from_node, 1);
    assert_int_equal(g->edges[0].to_node, 2);
    assert_int_equal(g->edges[0].depth, 8);
    assert_int_equal(g->edges[0].to_index, 0);
    assert_int_equal(g->edges[1].from_node, 0);
    assert_int_equal(g->edges[1].to_node, 1);
    assert_int_equal(g->edges[1].depth, 2);
    assert_int_equal(g->edges[2].from_node, 0);
    assert_int_equal(g->edges[2].from_port, 1);
    assert_int_equal(g->edges[2].to_index, 1);
    assert_int_equal(g->engine.gpu, CBF_GPU_NONE);
    assert_int_equal(g->engine.queue_depth, 8);
    assert_string_equal(g->engine.name, "p");
    assert_true(g->engine.sensor_period == 1.0);
    cbf_graph_free(g);

    rc = tu_load("engine:\n  name: feng0\n  control: tcp://*:5555\nnodes:\n  src: {plugin: tsrc}\n"
                 "  sink: {plugin: tsink}\nedges:\n  - src.out->sink.in\n", NULL, 0, &g, &err);
    if (rc)
        fail_msg("%s", err.msg);
    assert_string_equal(g->engine.name, "feng0");
    assert_string_equal(g->engine.control, "tcp://*:5555");
    assert_int_equal(g->engine.gpu, CBF_GPU_AUTO);
    assert_int_equal(g->edges[0].depth, 4);
    cbf_graph_free(g);
}

#define OV_YAML "nodes:\n  src:\n    plugin: tsrc\n    params:\n      count: 2\n  sink:\n    plugin: tsink\n" \
                "edges:\n  - src.out -> sink.in\n"

static void overrides(void **state)
{
    (void)state;
    const char *unknown_node[] = {"srcc.count=3"};
    tu_expect_error(OV_YAML, unknown_node, 1, CBF_ECONFIG, 1, 1,
                    E("override 'srcc.count=3'", "no node 'srcc'", "did you mean 'src'"));
    const char *unknown_param[] = {"src.cout=3"};
    tu_expect_error(OV_YAML, unknown_param, 1, CBF_ECONFIG, 2, 3,
                    E("override 'src.cout=3'", "no parameter 'cout'", "did you mean 'count'"));
    const char *bad_value[] = {"src.count=abc"};
    tu_expect_error(OV_YAML, bad_value, 1, CBF_ECONFIG, 5, 14,
                    E("override 'src.count=abc'", "parameter 'count'", "expected an integer"));
    const char *bad_new[] = {"sink.path=[1, 2]"};
    tu_expect_error(OV_YAML, bad_new, 1, CBF_ECONFIG, 6, 3,
                    E("override 'sink.path=[1, 2]'", "expected a string"));
    const char *malformed[] = {"srccount"};
    tu_expect_error(OV_YAML, malformed, 1, CBF_ECONFIG, 1, 1, E("override 'srccount'", "NODE.PARAM=VALUE"));
    const char *bad_yaml[] = {"src.count=[1,"};
    tu_expect_error(OV_YAML, bad_yaml, 1, CBF_ECONFIG, 1, 1, E("override 'src.count=[1,'", "not valid YAML"));
    const char *bad_engine[] = {"engine.gpu=maybe"};
    tu_expect_error(OV_YAML, bad_engine, 1, CBF_ECONFIG, 1, 1,
                    E("override 'engine.gpu=maybe'", "engine.gpu", "maybe"));

    const char *good[] = {"src.count=7", "sink.path=x.h5", "engine.gpu=required", "engine.queue_depth=2"};
    cbf_graph *g = NULL;
    cbf_error err = {0};
    int rc = tu_load(OV_YAML, good, 4, &g, &err);
    if (rc)
        fail_msg("%s", err.msg);
    const cbf_params *src = g->nodes[tu_node(g, "src")].params;
    const cbf_params *sink = g->nodes[tu_node(g, "sink")].params;
    assert_int_equal(cbf_params_int(src, "count"), 7);
    assert_true(cbf_params_given(src, "count"));
    assert_string_equal(cbf_params_string(sink, "path"), "x.h5");
    assert_true(cbf_params_given(sink, "path"));
    assert_int_equal(g->engine.gpu, CBF_GPU_REQUIRED);
    assert_int_equal(g->edges[0].depth, 2);
    cbf_graph_free(g);
}

static void plugin_path_relative(void **state)
{
    (void)state;
    char link[600];
    snprintf(link, sizeof link, "%s/myplugins", tu_tmpdir());
    unlink(link);
    assert_int_equal(symlink(tu_plugin_dir("good"), link), 0);
    const char *path = tu_write("rel.yaml", "engine:\n  plugin_path: [myplugins]\nnodes:\n"
                                            "  s: {plugin: tsrc}\n  k: {plugin: tsink}\nedges:\n  - s.out -> k.in\n");
    cbf_registry *reg = NULL;
    cbf_error err = {0};
    assert_int_equal(cbf_registry_open(NULL, 0, &reg, &err), 0);
    assert_null(cbf_registry_find(reg, "tsrc"));
    cbf_graph *g = NULL;
    int rc = cbf_graph_load(path, NULL, 0, reg, &g, &err);
    if (rc)
        fail_msg("%s", err.msg);
    assert_non_null(strstr(g->nodes[0].plugin_path, "myplugins/"));
    cbf_graph_free(g);

    path = tu_write("rel2.yaml", "engine:\n  plugin_path: nowhere\nnodes:\n  s: {plugin: tsrc}\n");
    rc = cbf_graph_load(path, NULL, 0, reg, &g, &err);
    assert_int_equal(rc, CBF_ECONFIG);
    char head[700];
    snprintf(head, sizeof head, "%s:2:16: engine.plugin_path", path);
    if (strncmp(err.msg, head, strlen(head)))
        fail_msg("got '%s'", err.msg);
    assert_non_null(strstr(err.msg, "nowhere"));
    cbf_registry_close(reg);
}

static void missing_file(void **state)
{
    (void)state;
    cbf_graph *g = NULL;
    cbf_error err = {0};
    assert_int_equal(cbf_graph_load("/nonexistent/p.yaml", NULL, 0, tu_registry(), &g, &err), CBF_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent/p.yaml"));
    assert_null(g);
}

/* Every prefix of a valid pipeline, and the pipeline with each character
 * replaced by a few troublesome ones, loads or fails cleanly: a known code
 * and a one-line message that starts with the file's place. */
static void mutations(void **state)
{
    (void)state;
    static const char good[] =
        "engine:\n  queue_depth: 3\n  gpu: none\nnodes:\n  p:\n    plugin: tparams\n"
        "    params: {req: 2**3, taps: [1, -2], tones: [{frequency: 1, amplitude: 2}], window: rect}\n"
        "  src: {plugin: tsrc, params: {count: 9}}\n  sink: {plugin: tsink}\n"
        "edges:\n  - src.out -> sink.in\n  - {from: src.aux, to: sink.in, depth: 2}\n";
    static const char subst[] = {'x', ':', '[', '{', ' ', '-', '.', '\'', '#', '\n', '0'};
    char text[sizeof good], head[600];
    snprintf(head, sizeof head, "%s/p.yaml:", tu_tmpdir());
    size_t n = sizeof good - 1, loads = 0, fails = 0;
    for (size_t cut = 0; cut <= n; cut++) {
        for (size_t k = 0; k <= sizeof subst; k++) {
            memcpy(text, good, sizeof good);
            if (k == sizeof subst)
                text[cut] = '\0';
            else if (cut < n)
                text[cut] = subst[k];
            else
                continue;
            cbf_graph *g = NULL;
            cbf_error err = {0};
            int rc = tu_load(text, NULL, 0, &g, &err);
            loads++;
            if (!rc) {
                cbf_graph_free(g);
                continue;
            }
            fails++;
            if (rc != CBF_ECONFIG || strncmp(err.msg, head, strlen(head)) || strchr(err.msg, '\n'))
                fail_msg("rc %d, '%s' for:\n%s", rc, err.msg, text);
        }
    }
    assert_true(fails > loads / 4);   /* most mutations are mistakes */
    assert_true(fails < loads);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(yaml_syntax),
        cmocka_unit_test(edge_type_alternatives),
        cmocka_unit_test(edge_fanout_into_writer),
        cmocka_unit_test(top_level_key),
        cmocka_unit_test(engine_keys),
        cmocka_unit_test(node_without_plugin),
        cmocka_unit_test(unknown_plugin),
        cmocka_unit_test(parameters),
        cmocka_unit_test(params_not_a_mapping),
        cmocka_unit_test(duplicate_node),
        cmocka_unit_test(edge_unknown_node_or_port),
        cmocka_unit_test(edge_direction),
        cmocka_unit_test(edge_types),
        cmocka_unit_test(edge_two_into_one),
        cmocka_unit_test(edge_depth),
        cmocka_unit_test(unconnected_port),
        cmocka_unit_test(cycle),
        cmocka_unit_test(order_and_depth),
        cmocka_unit_test(overrides),
        cmocka_unit_test(plugin_path_relative),
        cmocka_unit_test(missing_file),
        cmocka_unit_test(mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
