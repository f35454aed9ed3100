/* test_engine.c: the engine with the test plugins on hand-built graphs:
 * end of stream through a chain, back-pressure, fan-out, stop, an error in
 * a middle node, a leaking sink, init errors, and the GPU decision. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "rt_graph.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static rt_knobs *src, *pass, *sink, *leak, *choose;

static int setup(void **st)
{
    (void)st;
    src = rt_knobs_of("rt_count");
    pass = rt_knobs_of("rt_pass");
    sink = rt_knobs_of("rt_sink");
    leak = rt_knobs_of("rt_leak");
    choose = rt_knobs_of("rt_choose");
    if (!src || !pass || !sink || !leak || !choose)
        return -1;
    /* Fresh settings per test. */
    *src = (rt_knobs){.count = 100, .size = 4096, .pool = 4};
    *pass = (rt_knobs){.fail_at = -1};
    *sink = (rt_knobs){0};
    *leak = (rt_knobs){0};
    *choose = (rt_knobs){0};
    return 0;
}

static const cbf_node_stats *find(const cbf_node_stats *s, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s[i].name, name))
            return &s[i];
    fail_msg("no node '%s' in stats", name);
    return NULL;
}

static uint64_t counter(const cbf_node_stats *s, const char *name)
{
    for (int i = 0; i < s->n_counters; i++)
        if (!strcmp(s->counter_names[i], name))
            return s->counter_values[i];
    fail_msg("node '%s' has no counter '%s'", s->name, name);
    return 0;
}

/* The names in stats point into the engine: it is kept until the next test. */
static cbf_engine *last;
static cbf_graph *last_graph;

static int teardown(void **st)
{
    (void)st;
    cbf_engine_free(last);
    rt_graph_free(last_graph);
    last = NULL;
    last_graph = NULL;
    return 0;
}

/* A checking sink saw `count` buffers, in order, with the source's words. */
static void assert_sink_saw(const cbf_node_stats *st, size_t n, const char *name, uint64_t count)
{
    const cbf_node_stats *k = find(st, n, name);
    assert_int_equal(counter(k, "received"), count);
    assert_int_equal(counter(k, "order_errors"), 0);
    assert_int_equal(counter(k, "data_errors"), 0);
}

/* Runs g to the end; returns run's code, stats in st (n_st entries). */
static int run_graph(cbf_graph *g, cbf_node_stats *st, size_t n_st, cbf_error *err)
{
    last_graph = g;
    int rc = cbf_engine_create(g, &last, err);
    if (rc)
        return rc;
    rc = cbf_engine_run(last, err);
    assert_int_equal(cbf_engine_stats(last, st, n_st), g->n_nodes);
    return rc;
}

static void test_chain_eos(void **state)
{
    (void)state;
    const char *nodes[] = {"src", "rt_count", "mid", "rt_pass", "snk", "rt_sink"};
    rt_edge_spec edges[] = {{"src.out", "mid.in", 2}, {"mid.out", "snk.in", 3}};
    cbf_graph *g = rt_graph(nodes, 3, edges, 2, CBF_GPU_NONE);
    assert_non_null(g);
    cbf_node_stats st[3];
    cbf_error err;
    int rc = run_graph(g, st, 3, &err);
    assert_int_equal(rc, CBF_OK);
    const cbf_node_stats *s = find(st, 3, "src"), *m = find(st, 3, "mid"), *k = find(st, 3, "snk");
    assert_int_equal(s->buffers_out, 100);
    assert_int_equal(counter(s, "sent"), 100);
    assert_int_equal(m->buffers_in, 100);
    assert_int_equal(m->buffers_out, 100);
    assert_int_equal(k->buffers_in, 100);
    assert_sink_saw(st, 3, "snk", 100);
    assert_int_equal(s->bytes_out, 100 * 4096);
    assert_string_equal(k->plugin, "rt_sink");
    /* Every node's fini ran once; every buffer was back before it did. */
    assert_int_equal(src->fini_calls, 1);
    assert_int_equal(pass->fini_calls, 1);
    assert_int_equal(sink->fini_calls, 1);
    assert_int_equal(src->pool_free_at_fini, 4);
}

static void test_backpressure(void **state)
{
    (void)state;
    src->count = 40;
    src->pool = 3;
    sink->delay_us = 3000;
    const char *nodes[] = {"src", "rt_count", "slow", "rt_sink"};
    rt_edge_spec edges[] = {{"src.out", "slow.in", 1}};
    cbf_graph *g = rt_graph(nodes, 2, edges, 1, CBF_GPU_NONE);
    assert_non_null(g);
    cbf_node_stats st[2];
    cbf_error err;
    assert_int_equal(run_graph(g, st, 2, &err), CBF_OK);
    const cbf_node_stats *s = find(st, 2, "src"), *k = find(st, 2, "slow");
    /* The sink needs >= 3 ms per buffer (nanosleep never returns early).
     * Buffer k >= 3 of the source's pool of 3 is free only after the sink
     * finished buffer k - 3, at >= (k - 2) * 3 ms, so the source runs for
     * >= 37 * 3 = 111 ms while doing almost no work of its own: nearly all
     * of that must show as wait-out. The bound, 80 ms, leaves ~30 ms for
     * the source's own work; without back-pressure it would be ~0. */
    assert_true(s->wait_output_s > 0.080);
    assert_true(k->busy_s > 0.100);
    assert_int_equal(s->buffers_out, 40);
    assert_int_equal(k->buffers_in, 40);
    assert_sink_saw(st, 2, "slow", 40);
    assert_true(src->pool_max_out <= 3);
    assert_int_equal(src->pool_free_at_fini, 3);
}

static void test_fanout(void **state)
{
    (void)state;
    src->count = 300;
    src->pool = 5;
    const char *nodes[] = {"src", "rt_count", "a", "rt_sink", "b", "rt_sink", "c", "rt_pass",
                           "d", "rt_sink"};
    rt_edge_spec edges[] = {
        {"src.out", "a.in", 1}, {"src.out", "b.in", 7}, {"src.out", "c.in", 2}, {"c.out", "d.in", 0}};
    cbf_graph *g = rt_graph(nodes, 5, edges, 4, CBF_GPU_NONE);
    assert_non_null(g);
    cbf_node_stats st[5];
    cbf_error err;
    assert_int_equal(run_graph(g, st, 5, &err), CBF_OK);
    assert_int_equal(find(st, 5, "src")->buffers_out, 300);
    const char *sinks[] = {"a", "b", "d"};
    for (size_t i = 0; i < N_OF(sinks); i++)
        assert_sink_saw(st, 5, sinks[i], 300);
    assert_int_equal(src->pool_free_at_fini, 5);
}

static void test_middle_error_unwinds(void **state)
{
    (void)state;
    src->count = 0; /* endless: only the error can end this run */
    pass->fail_at = 25;
    const char *nodes[] = {"src", "rt_count", "mid", "rt_pass", "a", "rt_sink", "b", "rt_sink"};
    rt_edge_spec edges[] = {{"src.out", "mid.in", 2}, {"mid.out", "a.in", 2}, {"src.out", "b.in", 1}};
    cbf_graph *g = rt_graph(nodes, 4, edges, 3, CBF_GPU_NONE);
    assert_non_null(g);
    cbf_node_stats st[4];
    cbf_error err;
    int rc = run_graph(g, st, 4, &err);
    assert_int_equal(rc, CBF_EIO);
    assert_int_equal(err.code, CBF_EIO);
    assert_non_null(strstr(err.msg, "test.yaml:13:3: node 'mid' (plugin rt_pass): "));
    assert_non_null(strstr(err.msg, "failing on purpose at buffer 25"));
    assert_int_equal(counter(find(st, 4, "mid"), "passed"), 25);
    assert_int_equal(counter(find(st, 4, "a"), "order_errors"), 0);
    /* All buffers came back although threads were blocked everywhere. */
    assert_int_equal(src->pool_free_at_fini, 4);
    assert_int_equal(src->fini_calls, 1);
    assert_int_equal(pass->fini_calls, 1);
    assert_int_equal(sink->fini_calls, 2);
}

static void test_leak_reported(void **state)
{
    (void)state;
    src->count = 10;
    const char *nodes[] = {"src", "rt_count", "hog", "rt_leak"};
    rt_edge_spec edges[] = {{"src.out", "hog.in", 0}};
    cbf_graph *g = rt_graph(nodes, 2, edges, 1, CBF_GPU_NONE);
    assert_non_null(g);
    cbf_node_stats st[2];
    cbf_error err;
    assert_int_equal(run_graph(g, st, 2, &err), CBF_ELEAK);
    assert_non_null(strstr(err.msg, "pool 'src.out': 1 of 4 buffers never came back"));
    assert_non_null(strstr(err.msg, "node 'src'"));
    assert_int_equal(find(st, 2, "hog")->buffers_in, 10);
    assert_int_equal(counter(find(st, 2, "hog"), "first_writable"), 1);
}

/* Fan-out hands both consumers one buffer: neither may write it. Each sink
 * keeps the first buffer, so both references are still held when the
 * second one looks, whatever the threads' order. */
static void test_fanout_not_writable(void **state)
{
    (void)state;
    src->count = 3;
    const char *nodes[] = {"src", "rt_count", "a", "rt_leak", "b", "rt_leak"};
    rt_edge_spec edges[] = {{"src.out", "a.in", 0}, {"src.out", "b.in", 0}};
    cbf_graph *g = rt_graph(nodes, 3, edges, 2, CBF_GPU_NONE);
    assert_non_null(g);
    cbf_node_stats st[3];
    cbf_error err;
    assert_int_equal(run_graph(g, st, 3, &err), CBF_ELEAK);
    assert_int_equal(counter(find(st, 3, "a"), "first_writable"), 0);
    assert_int_equal(counter(find(st, 3, "b"), "first_writable"), 0);
}

/* An output that declares two types names one in init; the runtime holds
 * that choice against its consumer (rt_sink takes only the first) and
 * refuses a descriptor that names none. */
static void test_output_type_choice(void **state)
{
    (void)state;
    src->count = 10;
    const char *nodes[] = {"src", "rt_count", "ch", "rt_choose", "snk", "rt_sink"};
    rt_edge_spec edges[] = {{"src.out", "ch.in", 0}, {"ch.out", "snk.in", 0}};
    static const struct {
        int64_t give;
        int rc;
        const char *msg;
    } cases[] = {
        {1, CBF_OK, NULL},
        {2, CBF_ECONFIG, "output 'ch.out' gives 'cbf.test.other' in this configuration, which "
                         "input 'snk.in' does not take ('cbf.test.u64')"},
        {0, CBF_EINVAL, "output 'ch.out' may give 'cbf.test.u64|cbf.test.other': its descriptor "
                        "must name which"},
    };
    for (size_t i = 0; i < N_OF(cases); i++) {
        choose->give = cases[i].give;
        cbf_graph *g = rt_graph(nodes, 3, edges, 2, CBF_GPU_NONE);
        assert_non_null(g);
        cbf_node_stats st[3];
        cbf_error err = {0};
        assert_int_equal(run_graph(g, st, 3, &err), cases[i].rc);
        if (cases[i].msg && !strstr(err.msg, cases[i].msg))
            fail_msg("expected '%s' in '%s'", cases[i].msg, err.msg);
        if (!cases[i].msg) {
            assert_int_equal(find(st, 3, "snk")->buffers_in, 10);
            assert_int_equal(counter(find(st, 3, "ch"), "feeds_writer"), 0);
        }
    }
    /* The same output into an input that writes its buffers in place. */
    choose->give = 1;
    const char *nodes_w[] = {"src", "rt_count", "ch", "rt_choose", "neg", "rt_negate"};
    rt_edge_spec edges_w[] = {{"src.out", "ch.in", 0}, {"ch.out", "neg.in", 0}};
    cbf_graph *g = rt_graph(nodes_w, 3, edges_w, 2, CBF_GPU_NONE);
    assert_non_null(g);
    cbf_node_stats st[3];
    cbf_error err = {0};
    assert_int_equal(run_graph(g, st, 3, &err), CBF_OK);
    assert_int_equal(counter(find(st, 3, "ch"), "feeds_writer"), 1);
}

typedef struct {
    cbf_engine *e;
    int rc;
    cbf_error err;
} runner;

static void *run_thread(void *arg)
{
    runner *r = arg;
    r->rc = cbf_engine_run(r->e, &r->err);
    return NULL;
}

static void test_stop_drains(void **state)
{
    (void)state;
    src->count = 0;
    sink->delay_us = 100;
    const char *nodes[] = {"src", "rt_count", "mid", "rt_pass", "snk", "rt_sink"};
    rt_edge_spec edges[] = {{"src.out", "mid.in", 3}, {"mid.out", "snk.in", 3}};
    cbf_graph *g = rt_graph(nodes, 3, edges, 2, CBF_GPU_NONE);
    assert_non_null(g);
    runner r = {0};
    assert_int_equal(cbf_engine_create(g, &r.e, &r.err), CBF_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_thread, &r), 0);
    /* Wait for traffic (a condition, polled), then stop as SIGINT would. */
    cbf_node_stats st[3];
    for (;;) {
        cbf_engine_stats(r.e, st, 3);
        if (find(st, 3, "snk")->buffers_in >= 50)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    cbf_engine_stop(r.e);
    pthread_join(t, NULL);
    assert_int_equal(r.rc, CBF_OK);
    cbf_engine_stats(r.e, st, 3);
    uint64_t sent = counter(find(st, 3, "src"), "sent");
    assert_true(sent >= 50);
    /* Drained: what the source sent, the sink received, in order. */
    assert_int_equal(counter(find(st, 3, "snk"), "received"), sent);
    assert_int_equal(counter(find(st, 3, "snk"), "order_errors"), 0);
    assert_true(cbf_engine_elapsed(r.e) > 0.0);
    assert_int_equal(src->pool_free_at_fini, 4);
    cbf_engine_free(r.e);
    rt_graph_free(g);
}

static void test_init_error(void **state)
{
    (void)state;
    pass->fail_init = 1;
    const char *nodes[] = {"src", "rt_count", "mid", "rt_pass", "snk", "rt_sink"};
    rt_edge_spec edges[] = {{"src.out", "mid.in", 0}, {"mid.out", "snk.in", 0}};
    cbf_graph *g = rt_graph(nodes, 3, edges, 2, CBF_GPU_NONE);
    assert_non_null(g);
    cbf_engine *e = (cbf_engine *)0x1;
    cbf_error err;
    assert_int_equal(cbf_engine_create(g, &e, &err), CBF_EINVAL);
    assert_null(e);
    assert_string_equal(err.msg, "test.yaml:13:3: node 'mid' (plugin rt_pass): failing init on purpose");
    /* Initialised nodes (and the failing one) were finalised; later ones never started. */
    assert_int_equal(src->fini_calls, 1);
    assert_int_equal(pass->fini_calls, 1);
    assert_int_equal(sink->fini_calls, 0);
    rt_graph_free(g);
}

static void test_gpu_decision(void **state)
{
    (void)state;
    const char *nodes[] = {"src", "rt_count", "snk", "rt_sink"};
    rt_edge_spec edges[] = {{"src.out", "snk.in", 0}};
    int have = cbf_gpu_count() > 0;
    for (int mode = CBF_GPU_AUTO; mode <= CBF_GPU_NONE; mode++) {
        cbf_graph *g = rt_graph(nodes, 2, edges, 1, (cbf_gpu_mode)mode);
        assert_non_null(g);
        cbf_engine *e = NULL;
        cbf_error err;
        int64_t fini_before = src->fini_calls;
        int rc = cbf_engine_create(g, &e, &err);
        if (mode == CBF_GPU_REQUIRED && !have) {
            assert_int_equal(rc, CBF_ENOTSUP);
            assert_null(e);
            assert_non_null(strstr(err.msg, "test.yaml:1:1: engine: gpu: required"));
            assert_int_equal(src->fini_calls, fini_before); /* nothing was initialised */
        } else {
            assert_int_equal(rc, CBF_OK);
            assert_int_equal(cbf_engine_run(e, &err), CBF_OK);
            cbf_engine_free(e);
        }
        rt_graph_free(g);
    }
}

static void test_multi_input(void **state)
{
    (void)state;
    src->count = 60;
    const char *nodes[] = {"s1", "rt_count", "s2", "rt_count", "p", "rt_pass", "m", "rt_merge"};
    /* Three edges into one multi input, one through a pass-through. */
    rt_edge_spec edges[] = {{"s1.out", "m.in", 2}, {"s2.out", "p.in", 1}, {"p.out", "m.in", 3},
                            {"s1.out", "m.in", 1}};
    cbf_graph *g = rt_graph(nodes, 4, edges, 4, CBF_GPU_NONE);
    assert_non_null(g);
    cbf_node_stats st[4];
    cbf_error err;
    assert_int_equal(run_graph(g, st, 4, &err), CBF_OK);
    const cbf_node_stats *m = find(st, 4, "m");
    assert_int_equal(counter(m, "inputs"), 3);
    /* Each of the three queues delivered its own stream, in order. */
    assert_int_equal(counter(m, "received"), 180);
    assert_int_equal(counter(m, "order_errors"), 0);
    assert_int_equal(m->buffers_in, 180);
}

static void test_consumer_returns_early(void **state)
{
    (void)state;
    src->count = 100;
    sink->stop_after = 10;
    const char *nodes[] = {"src", "rt_count", "snk", "rt_sink"};
    rt_edge_spec edges[] = {{"src.out", "snk.in", 2}};
    cbf_graph *g = rt_graph(nodes, 2, edges, 1, CBF_GPU_NONE);
    assert_non_null(g);
    cbf_node_stats st[2];
    cbf_error err;
    /* The source must not stay blocked on a consumer that has gone. */
    assert_int_equal(run_graph(g, st, 2, &err), CBF_OK);
    assert_int_equal(counter(find(st, 2, "src"), "sent"), 100);
    assert_int_equal(counter(find(st, 2, "snk"), "received"), 10);
    assert_int_equal(src->pool_free_at_fini, 4);
}

static void test_gpu_memory_through_graph(void **state)
{
    (void)state;
    if (cbf_gpu_count() == 0)
        skip(); /* pinned and device pools need a GPU */
    /* The source uploads asynchronously and records each buffer's event;
     * two sinks on other threads copy to host after waiting on it. */
    for (int mem = CBF_MEM_PINNED; mem <= CBF_MEM_DEVICE; mem++) {
        setup(NULL);
        src->mem = mem;
        src->count = 200;
        src->size = 1 << 20;
        src->pool = 6;
        const char *nodes[] = {"src", "rt_count", "mid", "rt_pass", "a", "rt_sink", "b", "rt_sink"};
        rt_edge_spec edges[] = {{"src.out", "mid.in", 2}, {"mid.out", "a.in", 2}, {"src.out", "b.in", 3}};
        cbf_graph *g = rt_graph(nodes, 4, edges, 3, CBF_GPU_REQUIRED);
        assert_non_null(g);
        cbf_node_stats st[4];
        cbf_error err;
        int rc = run_graph(g, st, 4, &err);
        if (rc)
            print_error("%s\n", err.msg);
        assert_int_equal(rc, CBF_OK);
        assert_sink_saw(st, 4, "a", 200);
        assert_sink_saw(st, 4, "b", 200);
        assert_int_equal(src->pool_free_at_fini, 6);
        teardown(NULL);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_chain_eos, setup, teardown),
        cmocka_unit_test_setup_teardown(test_backpressure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fanout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_middle_error_unwinds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leak_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fanout_not_writable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_output_type_choice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_drains, setup, teardown),
        cmocka_unit_test_setup_teardown(test_init_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpu_decision, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multi_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_consumer_returns_early, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpu_memory_through_graph, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
