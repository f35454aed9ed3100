/* ibverbs receive: a ring of slots posted to a raw-packet queue pair, a
 * flow rule steering one destination into it, a socket that holds the
 * multicast membership (so IGMP tells the switches), and a completion
 * channel to sleep on when nothing has come. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "eth.h"
#include "ibv_queue.h"

#define POLL_MAX 64

struct cbf_ibv_rx {
    cbf_ibv_queue q;
    struct ibv_flow *flow;
    int join_fd;
    uint32_t *lent;          /* slots handed to the caller, reposted at the next call */
    int n_lent;
    uint64_t bad_frames;
    bool armed;              /* completion notification requested */
};

static int post_slot(cbf_ibv_rx *rx, uint32_t slot, cbf_error *err)
{
    struct ibv_sge sge = {.addr = (uintptr_t)cbf_ibv_slot(&rx->q, slot), .length = (uint32_t)rx->q.slot_bytes,
                          .lkey = rx->q.mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad;
    int e = ibv_post_recv(rx->q.qp, &wr, &bad);
    if (e)
        return cbf_error_set(err, CBF_EIO, "ibverbs: posting a receive slot on %s: %s", rx->q.nic.device,
                             strerror(e));
    return 0;
}

void cbf_ibv_rx_close(cbf_ibv_rx *rx)
{
    if (!rx)
        return;
    if (rx->flow)
        ibv_destroy_flow(rx->flow);
    if (rx->join_fd >= 0)
        close(rx->join_fd);
    cbf_ibv_queue_close(&rx->q);
    free(rx->lent);
    free(rx);
}

int cbf_ibv_rx_open(const char *iface_addr, const struct sockaddr_in *ep, uint32_t slots, size_t frame_bytes,
                    cbf_ibv_rx **out, cbf_error *err)
{
    cbf_ibv_rx *rx = calloc(1, sizeof *rx);
    if (!rx)
        return cbf_error_set(err, CBF_ENOMEM, "ibverbs: out of memory");
    rx->join_fd = -1;
    int rc = cbf_ibv_queue_open(&rx->q, iface_addr, slots, frame_bytes, false, true, err);
    if (!rc && !(rx->lent = calloc(slots, sizeof *rx->lent)))
        rc = cbf_error_set(err, CBF_ENOMEM, "ibverbs: out of memory");
    for (uint32_t s = 0; s < slots && !rc; s++)
        rc = post_slot(rx, s, err);
    uint32_t dst = ntohl(ep->sin_addr.s_addr);
    bool multicast = (dst >> 28) == 0xe;
    if (!rc && !multicast && dst != rx->q.nic.ip)
        rc = cbf_error_set(err, CBF_ECONFIG,
                           "ibverbs: unicast address %s is not interface %s's own address %s",
                           inet_ntoa(ep->sin_addr), rx->q.nic.ifname, iface_addr);
    if (!rc) {
        /* The rule is packed (ibverbs reads the specs end to end); the
         * union aligns the attribute at its start. */
        union {
            cbf_ibv_flow_rule rule;
            struct ibv_flow_attr attr;
        } u;
        cbf_ibv_flow_rule_init(&u.rule, rx->q.nic.port, rx->q.nic.mac, dst, ntohs(ep->sin_port));
        if (!(rx->flow = ibv_create_flow(rx->q.qp, &u.attr)))
            rc = cbf_error_set(err, CBF_EIO, "ibverbs: flow rule for %s:%d on %s: %s (does the NIC's "
                               "firmware allow flow steering?)", inet_ntoa(ep->sin_addr),
                               ntohs(ep->sin_port), rx->q.nic.device, strerror(errno));
    }
    if (!rc && multicast) {
        /* The kernel never sees these packets, but its membership makes
         * the IGMP reports that bring the group to this port. */
        struct ip_mreq m = {.imr_multiaddr = ep->sin_addr, .imr_interface.s_addr = htonl(rx->q.nic.ip)};
        rx->join_fd = socket(AF_INET, SOCK_DGRAM, 0);
        if (rx->join_fd < 0 || setsockopt(rx->join_fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof m))
            rc = cbf_error_set(err, CBF_EIO, "ibverbs: joining %s on %s: %s", inet_ntoa(ep->sin_addr),
                               rx->q.nic.ifname, strerror(errno));
    }
    if (rc) {
        cbf_ibv_rx_close(rx);
        return rc;
    }
    *out = rx;
    return 0;
}

/* Sleeps on the completion channel until the queue has something or
 * timeout_ms passes; a notification is armed before the last look at the
 * queue, so a completion between that look and poll() still wakes us. */
static int wait_completion(cbf_ibv_rx *rx, int timeout_ms, cbf_error *err)
{
    if (!rx->armed) {
        int e = ibv_req_notify_cq(rx->q.cq, 0);
        if (e)
            return cbf_error_set(err, CBF_EIO, "ibverbs: arming completion events: %s", strerror(e));
        rx->armed = true;
        return 0;   /* look at the queue once more before sleeping */
    }
    struct pollfd p = {.fd = rx->q.chan->fd, .events = POLLIN};
    int n = poll(&p, 1, timeout_ms);
    if (n < 0 && errno != EINTR)
        return cbf_error_set(err, CBF_EIO, "ibverbs: poll on completion channel: %s", strerror(errno));
    if (n > 0) {
        struct ibv_cq *cq;
        void *ctx;
        if (ibv_get_cq_event(rx->q.chan, &cq, &ctx))
            return cbf_error_set(err, CBF_EIO, "ibverbs: completion event: %s", strerror(errno));
        ibv_ack_cq_events(cq, 1);
        rx->armed = false;
    }
    return n > 0 ? 0 : 1;
}

int cbf_ibv_rx_recv(cbf_ibv_rx *rx, const uint8_t **pkt, size_t *len, int max, int timeout_ms,
                    cbf_error *err)
{
    int rc = 0;
    for (int i = 0; i < rx->n_lent && !rc; i++)
        rc = post_slot(rx, rx->lent[i], err);
    rx->n_lent = 0;
    if (rc)
        return rc;
    struct ibv_wc wc[POLL_MAX];
    if (max > POLL_MAX)
        max = POLL_MAX;
    int got = 0;
    for (int tries = 0; got == 0 && tries < 3; tries++) {
        int n = ibv_poll_cq(rx->q.cq, max, wc);
        if (n < 0)
            return cbf_error_set(err, CBF_EIO, "ibverbs: polling receive completions on %s", rx->q.nic.device);
        for (int i = 0; i < n; i++) {
            uint32_t slot = (uint32_t)wc[i].wr_id;
            rx->lent[rx->n_lent++] = slot;   /* reposted next call, whatever came */
            if (wc[i].status != IBV_WC_SUCCESS)
                return cbf_error_set(err, CBF_EIO, "ibverbs: receive completion on %s: %s", rx->q.nic.device,
                                     ibv_wc_status_str(wc[i].status));
            cbf_eth_udp_info u;
            if (cbf_eth_udp_parse(CBF_ETH_LINK_ETHERNET, cbf_ibv_slot(&rx->q, slot), wc[i].byte_len, &u) ||
                cbf_eth_checksum(u.ip_header, u.ip_header_len) != 0) {
                rx->bad_frames++;
                continue;
            }
            pkt[got] = u.payload;
            len[got++] = u.len;
        }
        if (n > 0)
            break;   /* frames came (perhaps all bad): let the caller look at its stop flag */
        int w = wait_completion(rx, timeout_ms, err);
        if (w < 0)
            return w;
        if (w == 1)
            break;   /* timed out */
    }
    return got;
}

uint64_t cbf_ibv_rx_bad_frames(const cbf_ibv_rx *rx) { return rx->bad_frames; }
