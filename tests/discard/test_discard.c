/* The discard sink in the test harness: it counts every buffer, its bytes
 * and its missing heaps, drops them all (the harness's leak check would
 * catch one kept), and takes several inputs to their ends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cbf/cbf.h"
#include "cbf/harness.h"

static cbf_port_desc stream(size_t bytes)
{
    cbf_port_desc d;
    cbf_port_desc_init(&d, CBF_DTYPE_U8, CBF_MEM_HOST);
    d.type = "cbf.test.bytes";
    cbf_port_desc_add_axis(&d, "byte", bytes);
    d.n_present = 4;
    d.present_axis = "heap";
    return d;
}

static void counts_and_drops(void **state)
{
    (void)state;
    cbf_harness *h = NULL;
    cbf_error err = {0};
    cbf_port_desc d = stream(1000);
    if (cbf_harness_new("discard", NULL, 0, &h, &err) || cbf_harness_set_input_desc(h, "in", &d, &err) ||
        cbf_harness_init(h, &err))
        fail_msg("%s", err.msg);
    for (int i = 0; i < 5; i++) {
        cbf_buffer *b;
        if (cbf_harness_new_buffer(h, "in", &b, &err))
            fail_msg("%s", err.msg);
        b->missing = (uint64_t)i;
        if (cbf_harness_push(h, "in", b, &err))
            fail_msg("%s", err.msg);
    }
    if (cbf_harness_end(h, NULL, &err) || cbf_harness_run(h, &err))
        fail_msg("%s", err.msg);
    uint64_t v;
    assert_int_equal(cbf_harness_counter(h, "buffers", &v), 0);
    assert_int_equal(v, 5);
    assert_int_equal(cbf_harness_counter(h, "bytes", &v), 0);
    assert_int_equal(v, 5000);
    assert_int_equal(cbf_harness_counter(h, "missing", &v), 0);
    assert_int_equal(v, 0 + 1 + 2 + 3 + 4);
    assert_int_equal(cbf_harness_free(h, &err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(counts_and_drops)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
