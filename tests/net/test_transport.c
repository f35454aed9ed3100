/* The ibverbs transport choice: what runs here (no RDMA NIC) is the error
 * path, which must name what is missing, and the logged fallback. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>
#include "udp.h"
#ifdef CBF_HAVE_IBVERBS
#include "ibv.h"
#endif

static void test_socket_is_always_fine(void **s)
{
    (void)s;
    cbf_error err = {0};
    assert_int_equal(cbf_net_choose_transport("socket", false, "127.0.0.1", "x.yaml:1:1", &err), 0);
}

static void test_ibverbs_refused_with_reason(void **s)
{
    (void)s;
    cbf_error err = {0};
    assert_int_equal(cbf_net_choose_transport("ibverbs", false, "127.0.0.1", "x.yaml:3:5", &err),
                     CBF_ENOTSUP);
    assert_non_null(strstr(err.msg, "x.yaml:3:5: ibverbs: "));
#ifdef CBF_HAVE_IBVERBS
    /* Loopback is never on an RDMA NIC: the message names the interface. */
    assert_non_null(strstr(err.msg, "interface lo (127.0.0.1) is not on an RDMA NIC"));
#else
    assert_non_null(strstr(err.msg, "built without libibverbs"));
#endif
    assert_int_equal(cbf_net_choose_transport("ibverbs", true, "127.0.0.1", "x.yaml:3:5", &err), 0);
}

static void test_probe_names_missing_interface(void **s)
{
    (void)s;
#ifdef CBF_HAVE_IBVERBS
    cbf_error err = {0};
    char dev[64];
    /* 203.0.113.0/24 is TEST-NET-3: no interface here has it. */
    assert_int_equal(cbf_ibv_probe("203.0.113.7", dev, sizeof dev, &err), CBF_ECONFIG);
    assert_non_null(strstr(err.msg, "no network interface has address 203.0.113.7"));
    assert_int_equal(cbf_ibv_probe("not-an-address", dev, sizeof dev, &err), CBF_ECONFIG);
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_socket_is_always_fine),
        cmocka_unit_test(test_ibverbs_refused_with_reason),
        cmocka_unit_test(test_probe_names_missing_interface),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
