/* What the X-engine's plugins take from the stage-support library.
 *
 * The contracts (stage/contracts/xeng.h) both ways: a descriptor a
 * producer builds from a layout reads back as that layout on the
 * consumer's side, and descriptors of another shape are refused, so the
 * correlator and the reducer cannot drift apart.
 *
 * The flow helpers (stage/flow.h) through the harness, with a source
 * compiled in here: numbered buffers with their timestamps, missing flags
 * counted, the length kept, the pool made from the descriptor, and a fill
 * that fails ending the run with its error and no buffer lost.
 *
 * The CPU or GPU path (stage/path.h) as the correlator, beamformer and
 * xbengine plugins choose it: device input refused on the CPU path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <cbf/cbf.h>
#include <cbf/harness.h>

#include "stage/contracts/xeng.h"
#include "stage/flow.h"

static void batch_round_trip(void **state)
{
    (void)state;
    const cbf_xeng_batch b = {CBF_DTYPE_CI4, 3, 5, 64, 256};
    cbf_port_desc d;
    cbf_xeng_batch_desc(&d, &b, CBF_MEM_PINNED);
    assert_int_equal(d.mem, CBF_MEM_PINNED);
    assert_int_equal(d.n_present, 3 * 5);
    assert_string_equal(d.present_axis, "batch_antenna");
    assert_int_equal(cbf_port_desc_elements(&d), 3 * 5 * 64 * 256 * 2);
    cbf_xeng_batch got = {0};
    assert_int_equal(cbf_xeng_batch_of(&d, &got), 0);
    assert_int_equal(got.dtype, CBF_DTYPE_CI4);
    assert_int_equal(got.batches, 3);
    assert_int_equal(got.n_ants, 5);
    assert_int_equal(got.channels, 64);
    assert_int_equal(got.spectra, 256);
}

static void batch_refuses_other_shapes(void **state)
{
    (void)state;
    const cbf_xeng_batch b = {CBF_DTYPE_CI8, 2, 4, 16, 32};
    cbf_port_desc d;
    cbf_xeng_batch got = {0};
    cbf_xeng_batch_desc(&d, &b, CBF_MEM_HOST);
    d.dtype = CBF_DTYPE_CI32;
    assert_int_equal(cbf_xeng_batch_of(&d, &got), -1);
    cbf_xeng_batch_desc(&d, &b, CBF_MEM_HOST);
    d.shape[4] = 1; /* one pol */
    assert_int_equal(cbf_xeng_batch_of(&d, &got), -1);
    cbf_port_desc_init(&d, CBF_DTYPE_CI8, CBF_MEM_HOST);
    cbf_port_desc_add_axis(&d, "batch", 2);
    assert_int_equal(cbf_xeng_batch_of(&d, &got), -1);
}

static void accum_round_trip(void **state)
{
    (void)state;
    cbf_port_desc from;
    cbf_port_desc_init(&from, CBF_DTYPE_CI8, CBF_MEM_HOST);
    cbf_port_desc_set_attr(&from, CBF_ATTR_ADC_SAMPLE_RATE, 1712e6);
    cbf_port_desc_set_attr(&from, CBF_ATTR_N_ANTS, 99); /* replaced by the layout's */
    const cbf_xeng_accum a = {.slices = 7, .channels = 32, .baselines = 4 * 5 / 2, .n_ants = 4,
                              .dump_batches = 6};
    cbf_port_desc d;
    cbf_xeng_accum_desc(&d, &a, CBF_MEM_DEVICE, &from);
    assert_int_equal(d.dtype, CBF_DTYPE_CI64);
    assert_int_equal(d.n_present, 6 * 4);
    assert_int_equal(cbf_port_desc_elements(&d), 7 * 32 * 10 * CBF_XENG_PRODUCTS);
    double v;
    assert_int_equal(cbf_port_desc_get_attr(&d, CBF_ATTR_ADC_SAMPLE_RATE, &v), 0);
    assert_true(v == 1712e6);
    assert_int_equal(cbf_port_desc_get_attr(&d, CBF_ATTR_N_BASELINES, &v), 0);
    assert_true(v == 10);
    cbf_xeng_accum got = {0};
    assert_int_equal(cbf_xeng_accum_of(&d, &got), 0);
    assert_int_equal(got.slices, 7);
    assert_int_equal(got.channels, 32);
    assert_int_equal(got.baselines, 10);
    assert_int_equal(got.n_ants, 4);
    assert_int_equal(got.dump_batches, 6);
    /* re and im of 4 products per baseline and channel, in one slice */
    assert_int_equal(cbf_xeng_accum_slice_len(&got), 32 * 10 * 4 * 2);
}

static void accum_refuses_other_shapes(void **state)
{
    (void)state;
    cbf_port_desc from, d;
    cbf_port_desc_init(&from, CBF_DTYPE_CI8, CBF_MEM_HOST);
    cbf_xeng_accum a = {.slices = 1, .channels = 8, .baselines = 6, .n_ants = 3,
                        .dump_batches = 2};
    cbf_xeng_accum got = {0};
    cbf_xeng_accum_desc(&d, &a, CBF_MEM_HOST, &from);
    assert_int_equal(cbf_xeng_accum_of(&d, &got), 0);
    a.baselines = 5; /* not n_ants (n_ants + 1) / 2 */
    cbf_xeng_accum_desc(&d, &a, CBF_MEM_HOST, &from);
    assert_int_equal(cbf_xeng_accum_of(&d, &got), -1);
    a.baselines = 6;
    cbf_xeng_accum_desc(&d, &a, CBF_MEM_HOST, &from);
    d.dtype = CBF_DTYPE_CI32;
    assert_int_equal(cbf_xeng_accum_of(&d, &got), -1);
    cbf_port_desc_init(&d, CBF_DTYPE_CI64, CBF_MEM_HOST); /* no attributes */
    cbf_port_desc_add_axis(&d, "slice", 1);
    assert_int_equal(cbf_xeng_accum_of(&d, &got), -1);
}

/* ---- a source on cbf_stage_source_run ---- */

enum { SRC_BYTES = 16, SRC_FLAGS = 2, SRC_AUX = 8 };

static const cbf_param_decl src_params[] = {
    {.name = "count", .type = CBF_PARAM_INT, .def = "5", .has_range = 1, .min = 0, .max = 100,
     .doc = "buffers to send"},
    {.name = "fail_at", .type = CBF_PARAM_INT, .def = "-1", .has_range = 1, .min = -1,
     .max = 100, .doc = "seq whose fill fails; -1: none"},
};

static const cbf_port_decl src_ports[] = {
    {.name = "out", .dir = CBF_PORT_OUT, .type = "test.bytes", .doc = "numbered bytes"},
};

typedef struct src {
    cbf_stage_source run;
    int64_t fail_at;
} src;

/* Payload bytes = seq; flag 1 missing on odd seq; seq values saturated. */
static int src_fill(void *user, cbf_buffer *b, cbf_error *err)
{
    const src *s = user;
    if ((int64_t)b->seq == s->fail_at)
        return cbf_error_set(err, CBF_EIO, "fill %llu failed", (unsigned long long)b->seq);
    memset(b->data, (int)b->seq, SRC_BYTES);
    b->present[0] = 1;
    b->present[1] = b->seq % 2 == 0;
    b->saturated = b->seq;
    return 0;
}

static int src_init(cbf_node *node, cbf_error *err)
{
    src *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    cbf_node_set_state(node, s);
    const cbf_params *p = cbf_node_params(node);
    cbf_port_desc d;
    cbf_port_desc_init(&d, CBF_DTYPE_U8, CBF_MEM_HOST);
    cbf_port_desc_add_axis(&d, "byte", SRC_BYTES);
    d.n_present = SRC_FLAGS;
    d.aux_size = SRC_AUX;
    d.timestamp_step = 100;
    s->fail_at = cbf_params_int(p, "fail_at");
    s->run = (cbf_stage_source){
        .node = node,
        .out = cbf_node_port(node, "out", 0),
        .start = 1000,
        .step = d.timestamp_step,
        .buffers = (uint64_t)cbf_params_int(p, "count"),
        .n_present = SRC_FLAGS,
        .fill = src_fill,
        .user = s,
        .units = 3,
        .c_units = cbf_node_counter(node, "units"),
        .c_saturated = cbf_node_counter(node, "saturated"),
        .c_missing = cbf_node_counter(node, "missing"),
    };
    return cbf_stage_out_open(node, s->run.out, &d, 2, &s->run.pool, err);
}

static int src_run(cbf_node *node, cbf_error *err)
{
    return cbf_stage_source_run(&((src *)cbf_node_state(node))->run, err);
}

static void src_fini(cbf_node *node)
{
    free(cbf_node_state(node));
    cbf_node_set_state(node, NULL);
}

static const cbf_plugin_desc src_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "test_source",
    .version = "0",
    .summary = "test only: numbered buffers through cbf_stage_source_run",
    .params = src_params,
    .n_params = CBF_COUNT_OF(src_params),
    .ports = src_ports,
    .n_ports = CBF_COUNT_OF(src_ports),
    .init = src_init,
    .run = src_run,
    .fini = src_fini,
};

static void source_numbers_and_counts(void **state)
{
    (void)state;
    cbf_harness *h;
    cbf_error err;
    assert_int_equal(cbf_harness_new_desc(&src_desc, NULL, 0, &h, &err), 0);
    assert_int_equal(cbf_harness_run(h, &err), 0);
    const cbf_port_desc *d = cbf_harness_output_desc(h, "out");
    assert_non_null(d);
    assert_int_equal(cbf_port_desc_bytes(d), SRC_BYTES);
    cbf_buffer *b;
    uint64_t k = 0;
    while (cbf_harness_pull(h, "out", &b) == 0) {
        assert_int_equal(b->seq, k);
        assert_int_equal(b->timestamp, 1000 + 100 * (int64_t)k);
        assert_int_equal(b->n_present, SRC_FLAGS);
        assert_int_equal(b->missing, k % 2);
        assert_int_equal(b->saturated, k);
        assert_int_equal(b->aux_size, SRC_AUX); /* the pool follows the descriptor */
        assert_int_equal(((const uint8_t *)b->data)[SRC_BYTES - 1], (uint8_t)k);
        cbf_buffer_unref(b);
        k++;
    }
    assert_int_equal(k, 5);
    uint64_t v;
    assert_int_equal(cbf_harness_counter(h, "units", &v), 0);
    assert_int_equal(v, 5 * 3);
    assert_int_equal(cbf_harness_counter(h, "saturated", &v), 0);
    assert_int_equal(v, 0 + 1 + 2 + 3 + 4);
    assert_int_equal(cbf_harness_counter(h, "missing", &v), 0);
    assert_int_equal(v, 2);
    assert_int_equal(cbf_harness_free(h, &err), 0);
}

static void source_fill_error_ends_the_run(void **state)
{
    (void)state;
    const char *params[] = {"count=0", "fail_at=2"};
    cbf_harness *h;
    cbf_error err;
    assert_int_equal(cbf_harness_new_desc(&src_desc, params, 2, &h, &err), 0);
    assert_int_equal(cbf_harness_run(h, &err), CBF_EIO);
    assert_non_null(strstr(err.msg, "fill 2 failed"));
    cbf_buffer *b;
    int n = 0;
    while (cbf_harness_pull(h, "out", &b) == 0) {
        cbf_buffer_unref(b);
        n++;
    }
    assert_int_equal(n, 2); /* 0 and 1; buffer 2 went back to the pool */
    assert_int_equal(cbf_harness_free(h, &err), 0);
}

/* The stages that read X-engine batches where they are (stage/path.h):
 * on the CPU path, the harness's, each refuses device input in init,
 * saying so, before it reads anything else of the descriptor. */
static void device_input_refused_on_the_cpu_path(void **state)
{
    (void)state;
    static const char *const plugins[] = {"correlator", "beamformer", "xbengine"};
    const cbf_xeng_batch b = {CBF_DTYPE_CI8, 2, 4, 16, 32};
    for (size_t i = 0; i < CBF_COUNT_OF(plugins); i++) {
        cbf_harness *h;
        cbf_error err;
        assert_int_equal(cbf_harness_new(plugins[i], NULL, 0, &h, &err), 0);
        cbf_port_desc d;
        cbf_xeng_batch_desc(&d, &b, CBF_MEM_DEVICE);
        assert_int_equal(cbf_harness_set_input_desc(h, "in", &d, &err), 0);
        assert_int_equal(cbf_harness_init(h, &err), CBF_ECONFIG);
        if (!strstr(err.msg, "device input on the CPU path"))
            fail_msg("%s: %s", plugins[i], err.msg);
        assert_int_equal(cbf_harness_free(h, &err), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(batch_round_trip),
        cmocka_unit_test(batch_refuses_other_shapes),
        cmocka_unit_test(accum_round_trip),
        cmocka_unit_test(accum_refuses_other_shapes),
        cmocka_unit_test(source_numbers_and_counts),
        cmocka_unit_test(source_fill_error_ends_the_run),
        cmocka_unit_test(device_input_refused_on_the_cpu_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
