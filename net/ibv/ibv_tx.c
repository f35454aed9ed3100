/* ibverbs send: frames built in a ring of registered slots (headers by
 * net/eth, payload by the caller in place), posted as one chained list
 * per batch whose last request alone asks for a completion; that
 * completion, carrying the ring index of its frame, gives back every slot
 * up to it (a queue pair completes its requests in order). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "eth.h"
#include "ibv_queue.h"
#include "ring.h"

#define MAX_NEIGH 64
#define DRAIN_SECONDS 5.0

typedef struct neighbour {
    uint32_t ip;
    uint8_t mac[6];
} neighbour;

struct cbf_ibv_tx {
    cbf_ibv_queue q;
    cbf_ring ring;
    uint64_t posted;           /* ring index up to which requests are posted */
    int batch;
    struct ibv_send_wr *wr;    /* one per slot */
    struct ibv_sge *sge;
    cbf_eth_udp_addr from;     /* source addresses and ttl */
    int ttl;
    uint16_t ip_id;
    int port_fd;               /* holds the source port */
    neighbour neigh[MAX_NEIGH];
    int n_neigh;
};

void cbf_ibv_tx_close(cbf_ibv_tx *tx)
{
    if (!tx)
        return;
    if (tx->q.qp)
        cbf_ibv_tx_drain(tx, NULL);
    if (tx->port_fd >= 0)
        close(tx->port_fd);
    cbf_ibv_queue_close(&tx->q);
    free(tx->wr);
    free(tx->sge);
    free(tx);
}

int cbf_ibv_tx_open(const char *iface_addr, int ttl, uint32_t slots, size_t max_payload, int batch,
                    cbf_ibv_tx **out, cbf_error *err)
{
    if (batch < 1 || (uint32_t)batch > slots / 2)
        return cbf_error_set(err, CBF_EINVAL, "ibverbs: batch %d needs a ring of at least %d slots (%u)", batch,
                             2 * batch, slots);
    if (max_payload > CBF_ETH_MAX_UDP_PAYLOAD)
        return cbf_error_set(err, CBF_EINVAL, "ibverbs: payload of %zu bytes exceeds a datagram", max_payload);
    cbf_ibv_tx *tx = calloc(1, sizeof *tx);
    if (!tx)
        return cbf_error_set(err, CBF_ENOMEM, "ibverbs: out of memory");
    tx->port_fd = -1;
    size_t slot_bytes = (CBF_ETH_UDP_HEADERS + max_payload + 63) / 64 * 64;
    int rc = cbf_ibv_queue_open(&tx->q, iface_addr, slots, slot_bytes, true, false, err);
    tx->ring.size = slots;
    tx->batch = batch;
    tx->ttl = ttl;
    if (!rc && (!(tx->wr = calloc(slots, sizeof *tx->wr)) || !(tx->sge = calloc(slots, sizeof *tx->sge))))
        rc = cbf_error_set(err, CBF_ENOMEM, "ibverbs: out of memory");
    /* A socket bound on the interface reserves the source port, so no
     * other program's replies or ICMP errors are mistaken for ours. */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(tx->q.nic.ip)};
    socklen_t al = sizeof a;
    if (!rc && ((tx->port_fd = socket(AF_INET, SOCK_DGRAM, 0)) < 0 ||
                bind(tx->port_fd, (struct sockaddr *)&a, sizeof a) ||
                getsockname(tx->port_fd, (struct sockaddr *)&a, &al)))
        rc = cbf_error_set(err, CBF_EIO, "ibverbs: reserving a source port on %s: %s", iface_addr,
                           strerror(errno));
    if (rc) {
        cbf_ibv_tx_close(tx);
        return rc;
    }
    memcpy(tx->from.src_mac, tx->q.nic.mac, 6);
    tx->from.src_ip = tx->q.nic.ip;
    tx->from.src_port = ntohs(a.sin_port);
    *out = tx;
    return 0;
}

/* Takes the completions there are; false when one failed. */
static int reap(cbf_ibv_tx *tx, cbf_error *err)
{
    struct ibv_wc wc[16];
    int n = ibv_poll_cq(tx->q.cq, 16, wc);
    if (n < 0)
        return cbf_error_set(err, CBF_EIO, "ibverbs: polling send completions on %s", tx->q.nic.device);
    for (int i = 0; i < n; i++) {
        if (wc[i].status != IBV_WC_SUCCESS)
            return cbf_error_set(err, CBF_EIO, "ibverbs: send completion on %s: %s", tx->q.nic.device,
                                 ibv_wc_status_str(wc[i].status));
        if (!cbf_ring_release_through(&tx->ring, wc[i].wr_id))
            return cbf_error_set(err, CBF_EINTERNAL, "ibverbs: send completion for ring index %llu, "
                                 "outside %llu..%llu", (unsigned long long)wc[i].wr_id,
                                 (unsigned long long)tx->ring.tail, (unsigned long long)tx->ring.head);
    }
    return 0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Polls until at least `want` slots are free or everything posted is done:
 * the NIC gives slots back within microseconds, so a NIC that has stopped
 * (link down, queue in error) is reported rather than waited on forever. */
static int wait_free(cbf_ibv_tx *tx, uint32_t want, cbf_error *err)
{
    double deadline = 0;
    while (cbf_ring_free(&tx->ring) < want && tx->ring.tail < tx->posted) {
        int rc = reap(tx, err);
        if (rc)
            return rc;
        double t = now_s();
        if (!deadline)
            deadline = t + DRAIN_SECONDS;
        else if (t > deadline)
            return cbf_error_set(err, CBF_EIO, "ibverbs: %s sent nothing for %.0f s (%u frames waiting)",
                                 tx->q.nic.device, DRAIN_SECONDS, cbf_ring_used(&tx->ring));
    }
    return 0;
}

int cbf_ibv_tx_buffer(cbf_ibv_tx *tx, uint8_t **payload, cbf_error *err)
{
    if (cbf_ring_free(&tx->ring) == 0) {
        int rc = cbf_ibv_tx_flush(tx, err);
        if (!rc)
            rc = wait_free(tx, 1, err);
        if (rc)
            return rc;
    }
    *payload = cbf_ibv_slot(&tx->q, cbf_ring_slot(&tx->ring, tx->ring.head)) + CBF_ETH_UDP_HEADERS;
    return 0;
}

static int neighbour_mac(cbf_ibv_tx *tx, uint32_t ip, uint8_t mac[6], cbf_error *err)
{
    for (int i = 0; i < tx->n_neigh; i++)
        if (tx->neigh[i].ip == ip) {
            memcpy(mac, tx->neigh[i].mac, 6);
            return 0;
        }
    char table[65536];
    FILE *f = fopen("/proc/net/arp", "r");
    size_t n = f ? fread(table, 1, sizeof table - 1, f) : 0;
    if (f)
        fclose(f);
    table[n] = '\0';
    int rc = cbf_eth_arp_lookup(table, tx->q.nic.ifname, ip, mac, err);
    if (rc)
        return cbf_error_prefix(err, "ibverbs");
    if (tx->n_neigh < MAX_NEIGH) {
        tx->neigh[tx->n_neigh].ip = ip;
        memcpy(tx->neigh[tx->n_neigh++].mac, mac, 6);
    }
    return 0;
}

int cbf_ibv_tx_resolve(cbf_ibv_tx *tx, const struct sockaddr_in *dest, cbf_error *err)
{
    uint32_t ip = ntohl(dest->sin_addr.s_addr);
    uint8_t mac[6];
    return (ip >> 28) == 0xe ? 0 : neighbour_mac(tx, ip, mac, err);
}

int cbf_ibv_tx_commit(cbf_ibv_tx *tx, size_t len, const struct sockaddr_in *dest, cbf_error *err)
{
    cbf_eth_udp_addr a = tx->from;
    a.dst_ip = ntohl(dest->sin_addr.s_addr);
    a.dst_port = ntohs(dest->sin_port);
    if ((a.dst_ip >> 28) == 0xe) {
        cbf_eth_multicast_mac(a.dst_ip, a.dst_mac);
        a.ttl = (uint8_t)tx->ttl;
    } else {
        int rc = neighbour_mac(tx, a.dst_ip, a.dst_mac, err);
        if (rc)
            return rc;
        a.ttl = 64;
    }
    uint64_t index = cbf_ring_push(&tx->ring);
    uint32_t slot = cbf_ring_slot(&tx->ring, index);
    uint8_t *frame = cbf_ibv_slot(&tx->q, slot);
    size_t bytes = cbf_eth_udp_write(frame, &a, len, tx->ip_id++);
    tx->sge[slot] = (struct ibv_sge){.addr = (uintptr_t)frame, .length = (uint32_t)bytes, .lkey = tx->q.mr->lkey};
    tx->wr[slot] = (struct ibv_send_wr){.wr_id = index, .sg_list = &tx->sge[slot], .num_sge = 1,
                                        .opcode = IBV_WR_SEND};
    return tx->ring.head - tx->posted >= (uint64_t)tx->batch;
}

int cbf_ibv_tx_flush(cbf_ibv_tx *tx, cbf_error *err)
{
    if (tx->posted == tx->ring.head)
        return reap(tx, err);
    /* Chain the requests of this batch; the last one is signalled. */
    for (uint64_t i = tx->posted; i < tx->ring.head; i++) {
        struct ibv_send_wr *w = &tx->wr[cbf_ring_slot(&tx->ring, i)];
        w->next = i + 1 < tx->ring.head ? &tx->wr[cbf_ring_slot(&tx->ring, i + 1)] : NULL;
        w->send_flags = w->next ? 0 : IBV_SEND_SIGNALED;
    }
    struct ibv_send_wr *bad;
    int e = ibv_post_send(tx->q.qp, &tx->wr[cbf_ring_slot(&tx->ring, tx->posted)], &bad);
    if (e)
        return cbf_error_set(err, CBF_EIO, "ibverbs: posting %llu frames on %s: %s",
                             (unsigned long long)(tx->ring.head - tx->posted), tx->q.nic.device, strerror(e));
    tx->posted = tx->ring.head;
    return reap(tx, err);
}

int cbf_ibv_tx_drain(cbf_ibv_tx *tx, cbf_error *err)
{
    int rc = cbf_ibv_tx_flush(tx, err);
    return rc ? rc : wait_free(tx, tx->ring.size, err);
}
