/* The transport interface (net/udp): the socket path end to end on
 * loopback through cbf_net_rx/cbf_net_tx, and the choice of ibverbs: what
 * runs here (no RDMA NIC) is the error path, which must name what is
 * missing, and the logged fallback to sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "udp.h"

static const cbf_net_choice socket_choice = {.transport = "socket", .where = "x.yaml:1:1"};
static const cbf_net_choice ibv_strict = {.transport = "ibverbs", .where = "x.yaml:3:5"};
static const cbf_net_choice ibv_fallback = {.transport = "ibverbs", .fallback = true, .where = "x.yaml:3:5"};

static void test_socket_is_always_fine(void **s)
{
    (void)s;
    cbf_error err = {0};
    assert_int_equal(cbf_net_choose_transport(&socket_choice, "127.0.0.1", &err), CBF_NET_SOCKET);
}

static void check_reason(const cbf_error *err)
{
    assert_non_null(strstr(err->msg, "x.yaml:3:5: ibverbs: "));
#ifdef CBF_HAVE_IBVERBS
    /* Loopback is never on an RDMA NIC: the message names the interface. */
    assert_non_null(strstr(err->msg, "interface lo (127.0.0.1) is not on an RDMA NIC"));
#else
    assert_non_null(strstr(err->msg, "built without libibverbs"));
#endif
}

static void test_ibverbs_refused_with_reason(void **s)
{
    (void)s;
    cbf_error err = {0};
    assert_int_equal(cbf_net_choose_transport(&ibv_strict, "127.0.0.1", &err), CBF_ENOTSUP);
    check_reason(&err);
    assert_int_equal(cbf_net_choose_transport(&ibv_fallback, "127.0.0.1", &err), CBF_NET_SOCKET);
    /* The open calls refuse the same way. */
    cbf_net_rx *rx = NULL;
    cbf_net_rx_config rc = {.iface = "127.0.0.1", .timeout_ms = 100, .batch = 8, .max_packet = 9000,
                            .choice = ibv_strict};
    assert_int_equal(cbf_udp_parse_endpoint("127.0.0.1:0", "t", &rc.ep, &err), CBF_ECONFIG);  /* port 0 */
    assert_int_equal(cbf_udp_parse_endpoint("127.0.0.1:7149", "t", &rc.ep, &err), 0);
    memset(&err, 0, sizeof err);
    assert_int_equal(cbf_net_rx_open(&rc, &rx, &err), CBF_ENOTSUP);
    check_reason(&err);
    assert_null(rx);
    cbf_net_tx *tx = NULL;
    cbf_net_tx_config tc = {.iface = "127.0.0.1", .ttl = 1, .max_packet = 9000, .batch = 8, .choice = ibv_strict};
    assert_int_equal(cbf_net_tx_open(&tc, &tx, &err), CBF_ENOTSUP);
    check_reason(&err);
    assert_null(tx);
}

/* Bytes i of packet k: distinct in every packet, so a mix-up shows. */
static uint8_t byte_of(int k, size_t i) { return (uint8_t)(k * 31 + i * 7 + 1); }

/* Sends `count` packets of assorted sizes through the transport interface
 * (fallback: asking for ibverbs on loopback must give working sockets)
 * and receives every one, in order, bytes intact. */
static void test_round_trip_through_fallback(void **s)
{
    (void)s;
    cbf_error err = {0};
    cbf_net_rx_config rc = {.iface = "127.0.0.1", .rcvbuf = 4 << 20, .timeout_ms = 2000, .batch = 16,
                            .max_packet = 9000, .choice = ibv_fallback};
    /* A port nothing uses: bind to 0 first through a plain endpoint, then reuse it. */
    cbf_net_rx *rx = NULL;
    int port = 0;
    for (int p = 47000; p < 47100 && !rx; p++) {
        char ep[32];
        snprintf(ep, sizeof ep, "127.0.0.1:%d", p);
        assert_int_equal(cbf_udp_parse_endpoint(ep, "t", &rc.ep, &err), 0);
        if (cbf_net_rx_open(&rc, &rx, &err) == 0)
            port = p;
    }
    assert_non_null(rx);
    assert_int_equal(cbf_net_rx_transport(rx), CBF_NET_SOCKET);
    cbf_net_tx *tx = NULL;
    cbf_net_tx_config tc = {.iface = "127.0.0.1", .ttl = 1, .sndbuf = 4 << 20, .max_packet = 9000, .batch = 8,
                            .choice = ibv_fallback};
    assert_int_equal(cbf_net_tx_open(&tc, &tx, &err), 0);
    assert_int_equal(cbf_net_tx_transport(tx), CBF_NET_SOCKET);
    enum { COUNT = 40 };
    for (int k = 0; k < COUNT; k++) {
        uint8_t *p;
        size_t len = 1 + (size_t)k * 211;
        assert_int_equal(cbf_net_tx_buffer(tx, &p, &err), 0);
        for (size_t i = 0; i < len; i++)
            p[i] = byte_of(k, i);
        int c = cbf_net_tx_commit(tx, len, &rc.ep, &err);
        assert_int_equal(c, (k + 1) % 8 == 0);   /* a batch is ready every 8 */
        if (c) {
            uint8_t *q;
            assert_int_equal(cbf_net_tx_buffer(tx, &q, &err), CBF_EINTERNAL);   /* full until flushed */
            assert_int_equal(cbf_net_tx_flush(tx, NULL, &err), 0);
        }
    }
    assert_int_equal(cbf_net_tx_close(tx, &err), 0);
    int got = 0;
    while (got < COUNT) {
        const uint8_t *pkt[16];
        size_t len[16];
        int n = cbf_net_rx_recv(rx, pkt, len, &err);
        assert_true(n > 0);   /* 2 s without a packet: lost */
        for (int i = 0; i < n; i++, got++) {
            assert_int_equal(len[i], 1 + (size_t)got * 211);
            for (size_t b = 0; b < len[i]; b++)
                if (pkt[i][b] != byte_of(got, b))
                    fail_msg("packet %d byte %zu", got, b);
        }
    }
    cbf_net_rx_stats st;
    cbf_net_rx_stats_get(rx, &st);
    assert_int_equal(st.kernel_drops, 0);
    assert_int_equal(st.bad_frames, 0);
    cbf_net_rx_close(rx);
    assert_true(port >= 47000);
}

static void test_bad_batch(void **s)
{
    (void)s;
    cbf_error err = {0};
    cbf_net_tx *tx = NULL;
    assert_int_equal(cbf_net_tx_open(&(cbf_net_tx_config){.iface = "127.0.0.1", .batch = 0,
                                                          .choice = socket_choice}, &tx, &err),
                     CBF_EINVAL);
    assert_non_null(strstr(err.msg, "batch 0"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_socket_is_always_fine),
        cmocka_unit_test(test_ibverbs_refused_with_reason),
        cmocka_unit_test(test_round_trip_through_fallback),
        cmocka_unit_test(test_bad_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
