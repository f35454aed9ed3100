/* The X-engine contracts (stage/contracts/xeng.h) both ways: a descriptor
 * a producer builds from a layout reads back as that layout on the
 * consumer's side, and descriptors of another shape are refused, so the
 * correlator and the reducer cannot drift apart. No runtime needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "stage/contracts/xeng.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(batch_round_trip),
        cmocka_unit_test(batch_refuses_other_shapes),
        cmocka_unit_test(accum_round_trip),
        cmocka_unit_test(accum_refuses_other_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
