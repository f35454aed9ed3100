/* Ethernet/IPv4/UDP frames, interface facts and ring arithmetic (net/eth):
 * what the pcap and ibverbs paths build on, tested without any NIC. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "eth.h"
#include "ring.h"

static void test_multicast_mac(void **s)
{
    (void)s;
    uint8_t mac[6];
    /* RFC 1112: 01:00:5e, then the group's low 23 bits (the 24th dropped). */
    cbf_eth_multicast_mac(0xef0a0001u, mac);            /* 239.10.0.1 */
    assert_memory_equal(mac, ((uint8_t[]){0x01, 0x00, 0x5e, 0x0a, 0x00, 0x01}), 6);
    cbf_eth_multicast_mac(0xe0800102u, mac);            /* 224.128.1.2: bit 23 is not carried */
    assert_memory_equal(mac, ((uint8_t[]){0x01, 0x00, 0x5e, 0x00, 0x01, 0x02}), 6);
    cbf_eth_multicast_mac(0xefffffffu, mac);            /* 239.255.255.255 */
    assert_memory_equal(mac, ((uint8_t[]){0x01, 0x00, 0x5e, 0x7f, 0xff, 0xff}), 6);
}

static void test_checksum_known_header(void **s)
{
    (void)s;
    /* A published IPv4 header (192.168.0.1 -> 192.168.0.199, UDP, 115
     * bytes) whose checksum is 0xb861. */
    uint8_t h[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                     0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
    assert_int_equal(cbf_eth_checksum(h, 20), 0xb861);
    h[10] = 0xb8;
    h[11] = 0x61;
    assert_int_equal(cbf_eth_checksum(h, 20), 0);   /* a valid header sums to zero */
    h[15] ^= 1;
    assert_int_not_equal(cbf_eth_checksum(h, 20), 0);
    uint8_t odd[3] = {0x01, 0x02, 0x03};             /* odd length: last byte padded with zero */
    assert_int_equal(cbf_eth_checksum(odd, 3), (uint16_t)~(0x0102 + 0x0300));
}

static const cbf_eth_udp_addr addr = {
    .src_mac = {0x0c, 0x42, 0xa1, 0x01, 0x02, 0x03}, .dst_mac = {0x01, 0x00, 0x5e, 0x0a, 0x00, 0x01},
    .src_ip = 0x0a000105u, .dst_ip = 0xef0a0001u, .src_port = 40000, .dst_port = 7148, .ttl = 4};

static void test_write_then_parse(void **s)
{
    (void)s;
    static uint8_t f[CBF_ETH_UDP_HEADERS + 9000];
    for (int i = 0; i < 8872; i++)
        f[CBF_ETH_UDP_HEADERS + i] = (uint8_t)(i * 7 + 3);
    size_t n = cbf_eth_udp_write(f, &addr, 8872, 0x1234);
    assert_int_equal(n, 42 + 8872);
    /* Fields at their wire offsets, big-endian. */
    assert_memory_equal(f, addr.dst_mac, 6);
    assert_memory_equal(f + 6, addr.src_mac, 6);
    assert_int_equal(f[12], 0x08);
    assert_int_equal(f[13], 0x00);
    assert_int_equal(f[14], 0x45);
    assert_int_equal((f[16] << 8) | f[17], 20 + 8 + 8872);
    assert_int_equal((f[18] << 8) | f[19], 0x1234);
    assert_int_equal(f[20], 0x40);                 /* don't fragment */
    assert_int_equal(f[22], 4);                    /* TTL */
    assert_int_equal(f[23], 17);
    assert_int_equal(cbf_eth_checksum(f + 14, 20), 0);
    assert_int_equal((f[34] << 8) | f[35], 40000);
    assert_int_equal((f[36] << 8) | f[37], 7148);
    assert_int_equal((f[38] << 8) | f[39], 8 + 8872);
    cbf_eth_udp_info u;
    assert_int_equal(cbf_eth_udp_parse(CBF_ETH_LINK_ETHERNET, f, n, &u), CBF_ETH_OK);
    assert_int_equal(u.src_ip, addr.src_ip);
    assert_int_equal(u.dst_ip, addr.dst_ip);
    assert_int_equal(u.src_port, 40000);
    assert_int_equal(u.dst_port, 7148);
    assert_ptr_equal(u.payload, f + 42);
    assert_int_equal(u.len, 8872);
    /* Ethernet pads short frames: trailing bytes beyond the IP length are ignored. */
    cbf_eth_udp_write(f, &addr, 4, 1);
    assert_int_equal(cbf_eth_udp_parse(CBF_ETH_LINK_ETHERNET, f, 60, &u), CBF_ETH_OK);
    assert_int_equal(u.len, 4);
    assert_int_equal(cbf_eth_udp_write(f, &addr, CBF_ETH_MAX_UDP_PAYLOAD + 1, 0), 0);
}

static size_t slurp(const char *name, uint8_t *buf, size_t cap)
{
    char path[512];
    const char *root = getenv("CBF_SOURCE_ROOT");
    snprintf(path, sizeof path, "%s/tests/spead/corpus/%s", root ? root : ".", name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

/* A frame whose headers were built by Python's struct around a packet
 * spead2 sent (tests/spead/make_corpus.py): an independent writer. */
static void test_parse_independent_frame(void **s)
{
    (void)s;
    static uint8_t f[10000], p[10000];
    size_t n = slurp("frame_meerkat_01.bin", f, sizeof f), m = slurp("spead2_meerkat_01.bin", p, sizeof p);
    cbf_eth_udp_info u;
    assert_int_equal(cbf_eth_udp_parse(CBF_ETH_LINK_ETHERNET, f, n, &u), CBF_ETH_OK);
    assert_int_equal(cbf_eth_checksum(u.ip_header, u.ip_header_len), 0);
    assert_int_equal(u.dst_ip, 0xef0a0001u);
    assert_int_equal(u.src_ip, 0x0a000105u);
    assert_int_equal(u.dst_port, 7148);
    assert_int_equal(u.len, m);
    assert_memory_equal(u.payload, p, m);
    /* Our writer gives the same header bytes for the same addresses (the
     * Python frame uses IP id 1 and TTL 1). */
    cbf_eth_udp_addr a = {.src_mac = {0x0c, 0x42, 0xa1, 1, 2, 3}, .src_ip = 0x0a000105u,
                          .dst_ip = 0xef0a0001u, .src_port = 40000, .dst_port = 7148, .ttl = 1};
    cbf_eth_multicast_mac(a.dst_ip, a.dst_mac);
    static uint8_t g[10000];
    memcpy(g + CBF_ETH_UDP_HEADERS, p, m);
    assert_int_equal(cbf_eth_udp_write(g, &a, m, 1), n);
    assert_memory_equal(g, f, n);
}

static void test_parse_refuses(void **s)
{
    (void)s;
    uint8_t f[128], g[128];
    size_t n = cbf_eth_udp_write(f, &addr, 32, 7);
    cbf_eth_udp_info u;
    assert_int_equal(cbf_eth_udp_parse(CBF_ETH_LINK_ETHERNET, f, 33, &u), CBF_ETH_TRUNCATED);
    assert_int_equal(cbf_eth_udp_parse(CBF_ETH_LINK_ETHERNET, f, n - 1, &u), CBF_ETH_TRUNCATED);
#define MUTATE(off, val, want)                                                   \
    do {                                                                         \
        memcpy(g, f, n);                                                         \
        g[off] = (val);                                                          \
        assert_int_equal(cbf_eth_udp_parse(CBF_ETH_LINK_ETHERNET, g, n, &u), want); \
    } while (0)
    MUTATE(12, 0x86, CBF_ETH_NOT_IPV4);     /* 0x86dd: IPv6 */
    MUTATE(14, 0x65, CBF_ETH_NOT_IPV4);     /* version 6 */
    MUTATE(14, 0x44, CBF_ETH_BAD_LENGTH);   /* header of 4 words */
    MUTATE(23, 6, CBF_ETH_NOT_UDP);         /* TCP */
    MUTATE(20, 0x60, CBF_ETH_FRAGMENT);     /* DF and more fragments */
    MUTATE(21, 0x08, CBF_ETH_FRAGMENT);     /* an offset */
    MUTATE(17, 20, CBF_ETH_BAD_LENGTH);     /* IP length shorter than the UDP header */
    MUTATE(17, 200, CBF_ETH_TRUNCATED);     /* IP length beyond the frame */
    MUTATE(39, 4, CBF_ETH_BAD_LENGTH);      /* UDP length under 8 */
    MUTATE(39, 100, CBF_ETH_BAD_LENGTH);    /* UDP length beyond the IP datagram */
    /* One 802.1Q tag is looked through. */
    memcpy(g, f, 12);
    g[12] = 0x81, g[13] = 0x00, g[14] = 0x00, g[15] = 0x05;
    memcpy(g + 16, f + 12, n - 12);
    assert_int_equal(cbf_eth_udp_parse(CBF_ETH_LINK_ETHERNET, g, n + 4, &u), CBF_ETH_OK);
    assert_int_equal(u.len, 32);
    assert_int_equal(u.dst_port, 7148);
    /* Raw IP and Linux cooked captures. */
    assert_int_equal(cbf_eth_udp_parse(CBF_ETH_LINK_RAW_IP, f + 14, n - 14, &u), CBF_ETH_OK);
    assert_int_equal(u.len, 32);
    memset(g, 0, 16);
    g[14] = 0x08;
    memcpy(g + 16, f + 14, n - 14);
    assert_int_equal(cbf_eth_udp_parse(CBF_ETH_LINK_LINUX_SLL, g, n + 2, &u), CBF_ETH_OK);
    assert_int_equal(u.src_ip, addr.src_ip);
    assert_string_equal(cbf_eth_reason_name(CBF_ETH_FRAGMENT), "fragment");
}

static void test_arp_lookup(void **s)
{
    (void)s;
    const char *table =
        "IP address       HW type     Flags       HW address            Mask     Device\n"
        "10.0.1.7         0x1         0x0         00:00:00:00:00:00     *        ens1f0\n"
        "10.0.1.8         0x1         0x2         0c:42:a1:aa:bb:cc     *        ens1f1\n"
        "10.0.1.8         0x1         0x2         0c:42:a1:11:22:33     *        ens1f0\n";
    uint8_t mac[6];
    cbf_error err = {0};
    assert_int_equal(cbf_eth_arp_lookup(table, "ens1f0", 0x0a000108u, mac, &err), 0);
    assert_memory_equal(mac, ((uint8_t[]){0x0c, 0x42, 0xa1, 0x11, 0x22, 0x33}), 6);
    assert_int_equal(cbf_eth_arp_lookup(table, "ens1f1", 0x0a000108u, mac, &err), 0);
    assert_int_equal(mac[3], 0xaa);
    /* An incomplete entry (flags 0) is no answer. */
    assert_int_equal(cbf_eth_arp_lookup(table, "ens1f0", 0x0a000107u, mac, &err), CBF_ENOTSUP);
    assert_non_null(strstr(err.msg, "no ARP entry for 10.0.1.7 on ens1f0"));
    assert_int_equal(cbf_eth_arp_lookup("", "ens1f0", 1, mac, &err), CBF_ENOTSUP);
}

static void test_mac_and_interfaces(void **s)
{
    (void)s;
    uint8_t mac[6];
    assert_true(cbf_eth_parse_mac("0c:42:a1:01:02:fe\n", mac));
    assert_int_equal(mac[5], 0xfe);
    assert_false(cbf_eth_parse_mac("0c:42:a1:01:02", mac));
    assert_false(cbf_eth_parse_mac("0c:42:a1:01:02:fe:77", mac));
    assert_false(cbf_eth_parse_mac("not a mac address", mac));
    char name[32];
    uint32_t ip;
    cbf_error err = {0};
    assert_int_equal(cbf_eth_iface_by_addr("127.0.0.1", name, sizeof name, &ip, &err), 0);
    assert_string_equal(name, "lo");
    assert_int_equal(ip, 0x7f000001u);
    assert_int_equal(cbf_eth_iface_by_addr("203.0.113.9", name, sizeof name, &ip, &err), CBF_ECONFIG);
    assert_non_null(strstr(err.msg, "no network interface has address 203.0.113.9"));
    assert_int_equal(cbf_eth_iface_by_addr("eth0", name, sizeof name, &ip, &err), CBF_ECONFIG);
    assert_int_equal(cbf_eth_iface_mac("/sys", "lo", mac, &err), 0);   /* lo's is all zeros */
    assert_memory_equal(mac, ((uint8_t[6]){0}), 6);
    assert_int_equal(cbf_eth_iface_mac("/nonexistent", "lo", mac, &err), CBF_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent/class/net/lo/address"));
}

static void test_ring(void **s)
{
    (void)s;
    cbf_ring r = {.size = 8};
    assert_int_equal(cbf_ring_free(&r), 8);
    for (int i = 0; i < 8; i++)
        assert_int_equal(cbf_ring_push(&r), i);
    assert_int_equal(cbf_ring_free(&r), 0);
    assert_false(cbf_ring_release_through(&r, 8));    /* never handed out */
    assert_true(cbf_ring_release_through(&r, 4));     /* a completion for 0..4 */
    assert_int_equal(cbf_ring_used(&r), 3);
    assert_false(cbf_ring_release_through(&r, 4));    /* seen already */
    assert_false(cbf_ring_release_through(&r, 2));
    /* Many laps: slots follow the index modulo the size, counts stay exact. */
    for (uint64_t lap = 0; lap < 1000; lap++) {
        while (cbf_ring_free(&r)) {
            uint64_t i = cbf_ring_push(&r);
            assert_int_equal(i, r.head - 1);
            assert_int_equal(cbf_ring_slot(&r, i), i % 8);
        }
        assert_true(cbf_ring_release_through(&r, r.head - 1 - lap % 3));
        assert_int_equal(cbf_ring_used(&r), lap % 3);
    }
    /* Indices past 2^32 (a long run at 10^7 frames/s): no 32-bit truncation. */
    cbf_ring big = {.head = (1ull << 33) + 5, .tail = (1ull << 33) + 1, .size = 6};
    assert_int_equal(cbf_ring_used(&big), 4);
    assert_int_equal(cbf_ring_slot(&big, big.head), ((1ull << 33) + 5) % 6);
    assert_true(cbf_ring_release_through(&big, (1ull << 33) + 2));
    assert_int_equal(cbf_ring_free(&big), 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multicast_mac),   cmocka_unit_test(test_checksum_known_header),
        cmocka_unit_test(test_write_then_parse), cmocka_unit_test(test_parse_independent_frame),
        cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_arp_lookup),      cmocka_unit_test(test_mac_and_interfaces),
        cmocka_unit_test(test_ring),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
