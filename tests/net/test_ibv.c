/* The ibverbs raw-packet path without an RDMA NIC: the flow rule as
 * ibv_create_flow reads it, the probe against a made-up sysfs (an
 * interface on an RDMA device libibverbs does not list, a missing MAC), and
 * every refusal before hardware is touched. What needs the NIC itself
 * (queue pairs, flow steering, rings posted and completed) cannot run here;
 * docs/network.md says so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "eth.h"
#include "ibv.h"

static void test_flow_rule_multicast(void **s)
{
    (void)s;
    const uint8_t own[6] = {0x0c, 0x42, 0xa1, 1, 2, 3};
    cbf_ibv_flow_rule r;
    memset(&r, 0xa5, sizeof r);   /* poison: every byte must be written */
    cbf_ibv_flow_rule_init(&r, 2, own, 0xef0a0001u, 7148);   /* 239.10.0.1:7148 */
    /* The specs follow the attribute with no gap: ibverbs walks them by size. */
    assert_int_equal(sizeof r, sizeof(struct ibv_flow_attr) + sizeof(struct ibv_flow_spec_eth) +
                                   sizeof(struct ibv_flow_spec_ipv4) + sizeof(struct ibv_flow_spec_tcp_udp));
    assert_int_equal(r.attr.size, sizeof r);
    assert_int_equal(r.attr.type, IBV_FLOW_ATTR_NORMAL);
    assert_int_equal(r.attr.num_of_specs, 3);
    assert_int_equal(r.attr.port, 2);
    assert_int_equal(r.attr.priority, 0);
    assert_int_equal(r.attr.flags, 0);
    assert_int_equal(r.attr.comp_mask, 0);
    assert_int_equal(r.eth.type, IBV_FLOW_SPEC_ETH);
    assert_int_equal(r.eth.size, sizeof r.eth);
    uint8_t want[6] = {0x01, 0x00, 0x5e, 0x0a, 0x00, 0x01}, ones[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
            zero[6] = {0};
    assert_memory_equal(r.eth.val.dst_mac, want, 6);
    assert_memory_equal(r.eth.mask.dst_mac, ones, 6);
    assert_memory_equal(r.eth.mask.src_mac, zero, 6);   /* matched on destination only */
    assert_int_equal(r.eth.mask.ether_type, 0);
    assert_int_equal(r.eth.mask.vlan_tag, 0);
    assert_int_equal(r.ip.type, IBV_FLOW_SPEC_IPV4);
    assert_int_equal(r.ip.size, sizeof r.ip);
    const uint8_t *ip = (const uint8_t *)&r.ip.val.dst_ip;   /* network order */
    assert_memory_equal(ip, ((uint8_t[]){239, 10, 0, 1}), 4);
    assert_int_equal(r.ip.mask.dst_ip, 0xffffffffu);
    assert_int_equal(r.ip.mask.src_ip, 0);
    assert_int_equal(r.udp.type, IBV_FLOW_SPEC_UDP);
    assert_int_equal(r.udp.size, sizeof r.udp);
    const uint8_t *port = (const uint8_t *)&r.udp.val.dst_port;
    assert_int_equal(port[0], 7148 >> 8);
    assert_int_equal(port[1], 7148 & 0xff);
    assert_int_equal(r.udp.mask.dst_port, 0xffff);
    assert_int_equal(r.udp.mask.src_port, 0);
}

static void test_flow_rule_unicast(void **s)
{
    (void)s;
    const uint8_t own[6] = {0x0c, 0x42, 0xa1, 1, 2, 3};
    cbf_ibv_flow_rule r;
    cbf_ibv_flow_rule_init(&r, 1, own, 0x0a000105u, 7150);   /* 10.0.1.5: the interface's own MAC */
    assert_memory_equal(r.eth.val.dst_mac, own, 6);
    assert_memory_equal((const uint8_t *)&r.ip.val.dst_ip, ((uint8_t[]){10, 0, 1, 5}), 4);
    assert_int_equal(r.attr.port, 1);
}

/* A made-up sysfs: lo with an RDMA device directory and a MAC address. */
static char root[64];

static void put(const char *rel, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void mk(const char *rel)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    assert_int_equal(mkdir(path, 0700), 0);
}

static void test_probe_with_fake_sysfs(void **s)
{
    (void)s;
    snprintf(root, sizeof root, "/tmp/cbf_ibv_sysfs_XXXXXX");
    assert_non_null(mkdtemp(root));
    mk("class");
    mk("class/net");
    mk("class/net/lo");
    cbf_ibv_nic nic;
    cbf_error err = {0};
    /* No device directory: not on an RDMA NIC. */
    assert_int_equal(cbf_ibv_probe_at(root, "127.0.0.1", &nic, &err), CBF_ENOTSUP);
    assert_non_null(strstr(err.msg, "interface lo (127.0.0.1) is not on an RDMA NIC"));
    mk("class/net/lo/device");
    mk("class/net/lo/device/infiniband");
    assert_int_equal(cbf_ibv_probe_at(root, "127.0.0.1", &nic, &err), CBF_ENOTSUP);   /* empty */
    mk("class/net/lo/device/infiniband/mlx5_cbftest");
    /* A device, but no MAC address to put in frames. */
    assert_int_equal(cbf_ibv_probe_at(root, "127.0.0.1", &nic, &err), CBF_EIO);
    assert_non_null(strstr(err.msg, "ibverbs: interface lo: no MAC address"));
    put("class/net/lo/address", "0c:42:a1:de:ad:01\n");
    put("class/net/lo/dev_port", "1\n");
    /* Everything in sysfs, but libibverbs lists no such device (here: none at all). */
    assert_int_equal(cbf_ibv_probe_at(root, "127.0.0.1", &nic, &err), CBF_ENOTSUP);
    assert_non_null(strstr(err.msg, "interface lo has RDMA device mlx5_cbftest but libibverbs does not list it"));
    /* What the probe learnt on the way. */
    assert_string_equal(nic.ifname, "lo");
    assert_string_equal(nic.device, "mlx5_cbftest");
    assert_int_equal(nic.port, 2);    /* dev_port 1 is the second port */
    assert_int_equal(nic.ip, 0x7f000001u);
    assert_memory_equal(nic.mac, ((uint8_t[]){0x0c, 0x42, 0xa1, 0xde, 0xad, 0x01}), 6);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -r %s", root);
    assert_int_equal(system(cmd), 0);
}

static void test_refusals_before_hardware(void **s)
{
    (void)s;
    cbf_ibv_nic nic;
    cbf_error err = {0};
    /* 203.0.113.0/24 is TEST-NET-3: no interface here has it. */
    assert_int_equal(cbf_ibv_probe("203.0.113.7", &nic, &err), CBF_ECONFIG);
    assert_non_null(strstr(err.msg, "ibverbs: no network interface has address 203.0.113.7"));
    assert_int_equal(cbf_ibv_probe("not-an-address", &nic, &err), CBF_ECONFIG);
    /* Opening queues on loopback stops at the probe, naming the reason. */
    struct sockaddr_in ep = {.sin_family = AF_INET, .sin_port = htons(7148), .sin_addr.s_addr = htonl(0xef0a0001u)};
    cbf_ibv_rx *rx = NULL;
    assert_int_equal(cbf_ibv_rx_open("127.0.0.1", &ep, 64, 9216, &rx, &err), CBF_ENOTSUP);
    assert_non_null(strstr(err.msg, "is not on an RDMA NIC"));
    assert_null(rx);
    cbf_ibv_tx *tx = NULL;
    assert_int_equal(cbf_ibv_tx_open("127.0.0.1", 1, 64, 8872, 16, &tx, &err), CBF_ENOTSUP);
    assert_non_null(strstr(err.msg, "is not on an RDMA NIC"));
    /* A batch the ring cannot hold twice, or a payload no datagram carries. */
    assert_int_equal(cbf_ibv_tx_open("127.0.0.1", 1, 64, 8872, 33, &tx, &err), CBF_EINVAL);
    assert_non_null(strstr(err.msg, "batch 33 needs a ring of at least 66 slots"));
    assert_int_equal(cbf_ibv_tx_open("127.0.0.1", 1, 64, 70000, 16, &tx, &err), CBF_EINVAL);
    assert_null(tx);
    cbf_ibv_rx_close(NULL);
    cbf_ibv_tx_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flow_rule_multicast),
        cmocka_unit_test(test_flow_rule_unicast),
        cmocka_unit_test(test_probe_with_fake_sysfs),
        cmocka_unit_test(test_refusals_before_hardware),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
