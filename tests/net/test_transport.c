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

/* A receive queue on a free loopback port, never one an earlier call took
 * (the sockets allow address reuse, so a bind alone does not tell). */
static cbf_net_rx *open_rx(bool gro, int batch, cbf_udp_endpoint *ep)
{
    static int next_port = 47100;
    cbf_error err = {0};
    cbf_net_rx_config rc = {.iface = "127.0.0.1", .rcvbuf = 8 << 20, .timeout_ms = 2000, .batch = batch,
                            .max_packet = 9000, .gro = gro, .choice = socket_choice};
    for (int p = next_port++; p < 47400; p = next_port++) {
        char text[32];
        snprintf(text, sizeof text, "127.0.0.1:%d", p);
        assert_int_equal(cbf_udp_parse_endpoint(text, "t", &rc.ep, &err), 0);
        cbf_net_rx *rx = NULL;
        if (cbf_net_rx_open(&rc, &rx, &err) == 0) {
            *ep = rc.ep;
            return rx;
        }
    }
    fail_msg("no free port");
    return NULL;
}

/* The packets of the offload test: runs of one size (which UDP_SEGMENT
 * sends whole), a shorter packet ending a run, sizes changing, packets
 * alternating between two destinations, and a run longer than the 64
 * segments a message may hold. Packet k's size and destination. */
enum { OFF_COUNT = 300 };
static size_t off_len(int k)
{
    return k < 20 ? 1400 : k == 20 ? 700 : k < 40 ? 8872 : k < 60 ? 1 + (size_t)k * 37 : k < 200 ? 512 : 1000;
}
static int off_dest(int k) { return k >= 40 && k < 60 ? k & 1 : 0; }

/* Receives from rx what was sent to destination d up to packet `upto`
 * (exclusive), checking each against the next expected packet *k. */
static void drain(cbf_net_rx *rx, int d, int upto, int *k, int cap, bool gso, bool gro)
{
    cbf_error err = {0};
    for (;;) {
        while (*k < upto && off_dest(*k) != d)
            (*k)++;
        if (*k >= upto)
            return;
        const uint8_t *pkt[64];
        size_t len[64];
        int n = cbf_net_rx_recv(rx, pkt, len, &err);
        if (n <= 0)   /* 2 s without a packet: lost */
            fail_msg("gso %d gro %d: destination %d: packet %d of those before %d lost (%d: %s)", gso,
                     gro, d, *k, upto, n, err.msg);
        assert_true(n <= cap);
        for (int i = 0; i < n; i++) {
            while (off_dest(*k) != d)
                (*k)++;
            if (*k >= upto || len[i] != off_len(*k))
                fail_msg("gso %d gro %d: destination %d, packet %d: %zu bytes, want %zu", gso, gro, d, *k,
                         len[i], off_len(*k));
            for (size_t b = 0; b < len[i]; b++)
                if (pkt[i][b] != byte_of(*k, b))
                    fail_msg("gso %d gro %d: packet %d byte %zu", gso, gro, *k, b);
            (*k)++;
        }
    }
}

/* UDP_SEGMENT sends and UDP_GRO receives (issue 35), each on or off: every
 * packet arrives at its destination once, in order, bytes intact, as
 * without them; with both on, on loopback, runs arrive coalesced and are
 * split again. Each batch is received before the next is sent (loopback
 * delivers during the send), so the socket buffers, which the kernel caps
 * at net.core.rmem_max, never overflow. Where this kernel has neither
 * offload, it says so and still checks the packets. */
static void offload_case(bool gso, bool gro)
{
    cbf_error err = {0};
    cbf_udp_endpoint ep[2];
    cbf_net_rx *rx[2] = {open_rx(gro, 16, &ep[0]), open_rx(gro, 64, &ep[1])};
    const int cap[2] = {16, 64};
    cbf_net_tx *tx = NULL;
    cbf_net_tx_config tc = {.iface = "127.0.0.1", .ttl = 1, .sndbuf = 8 << 20, .max_packet = 9000,
                            .batch = 128, .gso = gso, .choice = socket_choice};
    assert_int_equal(cbf_net_tx_open(&tc, &tx, &err), 0);
    int next[2] = {0, 0};
    for (int k = 0; k < OFF_COUNT; k++) {
        uint8_t *p;
        assert_int_equal(cbf_net_tx_buffer(tx, &p, &err), 0);
        for (size_t i = 0; i < off_len(k); i++)
            p[i] = byte_of(k, i);
        int c = cbf_net_tx_commit(tx, off_len(k), &ep[off_dest(k)], &err);
        assert_true(c >= 0);
        /* Flushes after 20 and 40 and every 16: runs cut by flushes too. */
        if (c || k == 19 || k == 39 || k % 16 == 15 || k == OFF_COUNT - 1) {
            assert_int_equal(cbf_net_tx_flush(tx, NULL, &err), 0);
            for (int d = 0; d < 2; d++)
                drain(rx[d], d, k + 1, &next[d], cap[d], gso, gro);
        }
    }
    cbf_net_tx_stats ts;
    cbf_net_tx_stats_get(tx, &ts);
    assert_int_equal(cbf_net_tx_close(tx, &err), 0);
    cbf_net_rx_stats st[2];
    for (int d = 0; d < 2; d++) {
        cbf_net_rx_stats_get(rx[d], &st[d]);
        assert_int_equal(st[d].kernel_drops, 0);
        assert_int_equal(st[d].truncated, 0);
        cbf_net_rx_close(rx[d]);
    }
    assert_int_equal(ts.gso_fallbacks, 0);
    if (gso && !ts.gso)
        print_message("this kernel has no UDP_SEGMENT: the packets went one by one\n");
    if (gro && !st[0].gro)
        print_message("this kernel refuses UDP_GRO: the packets came one by one\n");
    if (!gso || !gro)
        assert_int_equal(st[0].coalesced + st[1].coalesced, 0);   /* nothing to coalesce, or not asked */
    if (gso && ts.gso) {
        assert_true(ts.gso_sends > 0);
        if (gro && st[0].gro)
            assert_true(st[0].coalesced >= 100);   /* the runs of 20, 19, 140 and 100 */
    }
}

static void test_offloads_both(void **s) { (void)s; offload_case(true, true); }
static void test_offloads_send_only(void **s) { (void)s; offload_case(true, false); }
static void test_offloads_receive_only(void **s) { (void)s; offload_case(false, true); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_socket_is_always_fine),
        cmocka_unit_test(test_ibverbs_refused_with_reason),
        cmocka_unit_test(test_round_trip_through_fallback),
        cmocka_unit_test(test_bad_batch),
        cmocka_unit_test(test_offloads_both),
        cmocka_unit_test(test_offloads_send_only),
        cmocka_unit_test(test_offloads_receive_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
