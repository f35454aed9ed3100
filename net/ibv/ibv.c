/* The RDMA NIC behind an interface, the flow rule of a receive stream, and
 * the queue-pair setup the receive and send sides share (ibv_queue.c). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "eth.h"
#include "ibv.h"
#include "ibv_queue.h"

int cbf_ibv_probe_at(const char *sysfs, const char *iface_addr, cbf_ibv_nic *nic, cbf_error *err)
{
    memset(nic, 0, sizeof *nic);
    int rc = cbf_eth_iface_by_addr(iface_addr, nic->ifname, sizeof nic->ifname, &nic->ip, err);
    if (rc)
        return cbf_error_prefix(err, "ibverbs");
    char path[256];
    snprintf(path, sizeof path, "%s/class/net/%s/device/infiniband", sysfs, nic->ifname);
    DIR *d = opendir(path);
    struct dirent *e = NULL;
    while (d && (e = readdir(d)) && e->d_name[0] == '.')
        ;
    if (!d || !e) {
        if (d)
            closedir(d);
        return cbf_error_set(err, CBF_ENOTSUP,
                             "ibverbs: interface %s (%s) is not on an RDMA NIC (no %s); "
                             "use transport: socket, or allow fallback", nic->ifname, iface_addr, path);
    }
    snprintf(nic->device, sizeof nic->device, "%s", e->d_name);
    closedir(d);
    /* A NIC with two ports has one device and two interfaces: dev_port says which. */
    snprintf(path, sizeof path, "%s/class/net/%s/dev_port", sysfs, nic->ifname);
    FILE *f = fopen(path, "r");
    int dev_port = 0;
    if (!f || fscanf(f, "%d", &dev_port) != 1 || dev_port < 0)
        dev_port = 0;
    if (f)
        fclose(f);
    nic->port = dev_port + 1;
    if ((rc = cbf_eth_iface_mac(sysfs, nic->ifname, nic->mac, err)))
        return cbf_error_prefix(err, "ibverbs");
    int n = 0;
    struct ibv_device **devs = ibv_get_device_list(&n);
    int listed = 0;
    for (int i = 0; devs && i < n && !listed; i++)
        listed = strcmp(ibv_get_device_name(devs[i]), nic->device) == 0;
    if (devs)
        ibv_free_device_list(devs);
    if (!listed)
        return cbf_error_set(err, CBF_ENOTSUP,
                             "ibverbs: interface %s has RDMA device %s but libibverbs does not list it "
                             "(%d devices; is the provider library installed?)", nic->ifname, nic->device, n);
    return 0;
}

int cbf_ibv_probe(const char *iface_addr, cbf_ibv_nic *nic, cbf_error *err)
{
    return cbf_ibv_probe_at("/sys", iface_addr, nic, err);
}

void cbf_ibv_flow_rule_init(cbf_ibv_flow_rule *r, int port, const uint8_t own_mac[6], uint32_t dst_ip,
                            uint16_t dst_port)
{
    memset(r, 0, sizeof *r);
    r->attr.type = IBV_FLOW_ATTR_NORMAL;
    r->attr.size = sizeof *r;
    r->attr.num_of_specs = 3;
    r->attr.port = (uint8_t)port;
    r->eth.type = IBV_FLOW_SPEC_ETH;
    r->eth.size = sizeof r->eth;
    if ((dst_ip >> 28) == 0xe)
        cbf_eth_multicast_mac(dst_ip, r->eth.val.dst_mac);
    else
        memcpy(r->eth.val.dst_mac, own_mac, 6);
    memset(r->eth.mask.dst_mac, 0xff, 6);
    r->ip.type = IBV_FLOW_SPEC_IPV4;
    r->ip.size = sizeof r->ip;
    r->ip.val.dst_ip = htonl(dst_ip);
    r->ip.mask.dst_ip = 0xffffffffu;
    r->udp.type = IBV_FLOW_SPEC_UDP;
    r->udp.size = sizeof r->udp;
    r->udp.val.dst_port = htons(dst_port);
    r->udp.mask.dst_port = 0xffff;
}

/* ---- Shared queue setup ------------------------------------------------------ */

void cbf_ibv_queue_close(cbf_ibv_queue *q)
{
    if (q->qp)
        ibv_destroy_qp(q->qp);
    if (q->cq)
        ibv_destroy_cq(q->cq);
    if (q->chan)
        ibv_destroy_comp_channel(q->chan);
    if (q->mr)
        ibv_dereg_mr(q->mr);
    if (q->pd)
        ibv_dealloc_pd(q->pd);
    if (q->ctx)
        ibv_close_device(q->ctx);
    free(q->mem);
    memset(q, 0, sizeof *q);
}

static int modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, const char *state, cbf_error *err)
{
    int e = ibv_modify_qp(qp, a, mask);
    if (e)
        return cbf_error_set(err, CBF_EIO, "ibverbs: queue pair to state %s: %s", state, strerror(e));
    return 0;
}

int cbf_ibv_queue_open(cbf_ibv_queue *q, const char *iface_addr, uint32_t slots, size_t slot_bytes, bool send,
                       bool channel, cbf_error *err)
{
    memset(q, 0, sizeof *q);
    int rc = cbf_ibv_probe(iface_addr, &q->nic, err);
    if (rc)
        return rc;
    int n = 0;
    struct ibv_device **devs = ibv_get_device_list(&n);
    for (int i = 0; devs && i < n && !q->ctx; i++)
        if (!strcmp(ibv_get_device_name(devs[i]), q->nic.device))
            q->ctx = ibv_open_device(devs[i]);
    if (devs)
        ibv_free_device_list(devs);
    const char *what = NULL;
    if (!q->ctx)
        what = "opening the device";
    else if (!(q->pd = ibv_alloc_pd(q->ctx)))
        what = "protection domain";
    else if (channel && !(q->chan = ibv_create_comp_channel(q->ctx)))
        what = "completion channel";
    else if (!(q->cq = ibv_create_cq(q->ctx, (int)slots, NULL, q->chan, 0)))
        what = "completion queue";
    if (what) {
        rc = cbf_error_set(err, CBF_EIO, "ibverbs: %s (%s, interface %s): %s", what, q->nic.device,
                           q->nic.ifname, strerror(errno));
        cbf_ibv_queue_close(q);
        return rc;
    }
    struct ibv_qp_init_attr qa = {
        .send_cq = q->cq, .recv_cq = q->cq, .qp_type = IBV_QPT_RAW_PACKET,
        .cap = {.max_send_wr = send ? slots : 1, .max_recv_wr = send ? 1 : slots,
                .max_send_sge = 1, .max_recv_sge = 1},
    };
    if (!(q->qp = ibv_create_qp(q->pd, &qa))) {
        int e = errno;
        rc = cbf_error_set(err, CBF_EIO, "ibverbs: raw-packet queue pair on %s: %s%s", q->nic.device,
                           strerror(e),
                           e == EPERM ? " (raw packets need CAP_NET_RAW: run as root, or "
                                        "setcap cap_net_raw+ep on cbf-run)" : "");
        cbf_ibv_queue_close(q);
        return rc;
    }
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = (uint8_t)q->nic.port};
    if (!(rc = modify(q->qp, &a, IBV_QP_STATE | IBV_QP_PORT, "INIT", err))) {
        a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR};
        rc = modify(q->qp, &a, IBV_QP_STATE, "RTR", err);
    }
    if (!rc && send) {
        a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS};
        rc = modify(q->qp, &a, IBV_QP_STATE, "RTS", err);
    }
    q->slots = slots;
    q->slot_bytes = slot_bytes;
    size_t bytes = (size_t)slots * slot_bytes;
    if (!rc && !(q->mem = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)))
        rc = cbf_error_set(err, CBF_ENOMEM, "ibverbs: %zu bytes of ring", bytes);
    if (!rc && !(q->mr = ibv_reg_mr(q->pd, q->mem, bytes, IBV_ACCESS_LOCAL_WRITE)))
        rc = cbf_error_set(err, CBF_EIO, "ibverbs: registering %zu bytes of ring on %s: %s", bytes,
                           q->nic.device, strerror(errno));
    if (rc)
        cbf_ibv_queue_close(q);
    return rc;
}
