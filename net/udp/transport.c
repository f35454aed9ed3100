/* The transport interface: batches of UDP datagrams in and out, through
 * sockets (recvmmsg/sendmmsg) or the ibverbs raw-packet queues. The choice
 * is made at open: ibverbs when asked for and the RDMA NIC is there; when it
 * is not, an error naming what is missing, or sockets with a logged warning
 * when the pipeline allows the fallback. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cbf/log.h"
#include "udp.h"
#ifdef CBF_HAVE_IBVERBS
#include "ibv.h"
#endif

#define RX_MAX_BATCH 64
#define TX_MAX_BATCH 1024

struct cbf_net_rx {
    cbf_net_transport kind;
    int batch, timeout_ms;
    /* socket */
    int fd;
    size_t slot;
    uint8_t *bufs;
    struct mmsghdr msgs[RX_MAX_BATCH];
    struct iovec iov[RX_MAX_BATCH];
    uint8_t ctrl[RX_MAX_BATCH][64];
    uint32_t ovfl_last;
    uint64_t truncated;
    struct sockaddr_in names[RX_MAX_BATCH];
    uint64_t src[RX_MAX_BATCH];   /* the last batch's sources: address << 16 | port */
    uint64_t kernel_drops;
#ifdef CBF_HAVE_IBVERBS
    cbf_ibv_rx *ibv;
#endif
};

struct cbf_net_tx {
    cbf_net_transport kind;
    size_t max_packet;
    int batch;
    /* socket */
    int fd, n;
    uint8_t *arena;
    struct sockaddr_in to[TX_MAX_BATCH];
    struct mmsghdr msgs[TX_MAX_BATCH];
    struct iovec iov[TX_MAX_BATCH];
#ifdef CBF_HAVE_IBVERBS
    cbf_ibv_tx *ibv;
#endif
};

/* What ibverbs lacks, in why; 0 when it is usable on iface. */
static int ibverbs_missing(const char *iface, cbf_error *why)
{
#ifdef CBF_HAVE_IBVERBS
    cbf_ibv_nic nic;
    return cbf_ibv_probe(iface, &nic, why);
#else
    (void)iface;
    return cbf_error_set(why, CBF_ENOTSUP,
                         "ibverbs: cbf was built without libibverbs (meson setup -Dibverbs=enabled, with "
                         "libibverbs-dev installed)");
#endif
}

/* Turns ibverbs' failure into the error, or into sockets when allowed. */
static int fall_back(const cbf_net_choice *c, const cbf_error *why, cbf_error *err)
{
    if (c->fallback) {
        cbf_log_warn("%s: %s; falling back to sockets", c->where, why->msg);
        return CBF_NET_SOCKET;
    }
    return cbf_error_set(err, why->code ? why->code : CBF_ENOTSUP, "%s: %s", c->where, why->msg);
}

int cbf_net_choose_transport(const cbf_net_choice *c, const char *iface, cbf_error *err)
{
    if (strcmp(c->transport, "ibverbs") != 0)
        return CBF_NET_SOCKET;
    cbf_error why = {0};
    if (ibverbs_missing(iface, &why) == 0)
        return CBF_NET_IBVERBS;
    return fall_back(c, &why, err);
}

/* ---- Receive ----------------------------------------------------------------- */

int cbf_net_rx_open(const cbf_net_rx_config *cfg, cbf_net_rx **out, cbf_error *err)
{
    int kind = cbf_net_choose_transport(&cfg->choice, cfg->iface, err);
    if (kind < 0)
        return kind;
    cbf_net_rx *rx = calloc(1, sizeof *rx);
    if (!rx)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    rx->fd = -1;
    rx->batch = cfg->batch < 1 ? 1 : cfg->batch > RX_MAX_BATCH ? RX_MAX_BATCH : cfg->batch;
    rx->timeout_ms = cfg->timeout_ms;
    rx->slot = cfg->max_packet;
    int rc = 0;
#ifdef CBF_HAVE_IBVERBS
    if (kind == CBF_NET_IBVERBS) {
        cbf_error why = {0};
        /* A frame is the datagram with its headers and perhaps a VLAN tag. */
        if (cbf_ibv_rx_open(cfg->iface, &cfg->ep.addr, cfg->ring_slots ? cfg->ring_slots : 4096,
                            cfg->max_packet + 64, &rx->ibv, &why) == 0) {
            rx->kind = CBF_NET_IBVERBS;
            *out = rx;
            return 0;
        }
        if ((rc = fall_back(&cfg->choice, &why, err)) < 0) {
            free(rx);
            return rc;
        }
    }
#endif
    rx->kind = CBF_NET_SOCKET;
    if (!(rx->bufs = malloc((size_t)rx->batch * rx->slot)))
        rc = cbf_error_set(err, CBF_ENOMEM, "out of memory");
    if (!rc)
        rc = cbf_udp_open_rx(&cfg->ep, cfg->iface, cfg->rcvbuf, cfg->reuseport, &rx->fd, err);
    if (rc) {
        cbf_net_rx_close(rx);
        return rc;
    }
    /* The receive timeout lets callers look at their stop flags. */
    struct timeval tv = {cfg->timeout_ms / 1000, (cfg->timeout_ms % 1000) * 1000};
    int one = 1;
    setsockopt(rx->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(rx->fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof one);
    *out = rx;
    return 0;
}

int cbf_net_rx_spread(cbf_net_rx *rx, unsigned n, cbf_error *err)
{
    if (rx->kind != CBF_NET_SOCKET)
        return cbf_error_set(err, CBF_ENOTSUP, "spreading packets over queues is for sockets");
    return cbf_udp_spread_packets(rx->fd, n, err);
}

/* The socket's cumulative drop count (SO_RXQ_OVFL) as it rides on packets. */
static void note_drops(cbf_net_rx *rx, struct msghdr *h)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL &&
            c->cmsg_len >= CMSG_LEN(sizeof(uint32_t))) {
            uint32_t v;
            memcpy(&v, CMSG_DATA(c), sizeof v);
            rx->kernel_drops += (uint32_t)(v - rx->ovfl_last);
            rx->ovfl_last = v;
        }
}

int cbf_net_rx_recv(cbf_net_rx *rx, const uint8_t **pkt, size_t *len, cbf_error *err)
{
#ifdef CBF_HAVE_IBVERBS
    if (rx->kind == CBF_NET_IBVERBS)
        return cbf_ibv_rx_recv(rx->ibv, pkt, len, rx->batch, rx->timeout_ms, err);
#endif
    for (int i = 0; i < rx->batch; i++) {
        rx->iov[i] = (struct iovec){.iov_base = rx->bufs + (size_t)i * rx->slot, .iov_len = rx->slot};
        rx->msgs[i].msg_hdr = (struct msghdr){.msg_name = &rx->names[i], .msg_namelen = sizeof rx->names[i],
                                              .msg_iov = &rx->iov[i], .msg_iovlen = 1,
                                              .msg_control = rx->ctrl[i], .msg_controllen = sizeof rx->ctrl[i]};
    }
    int n = recvmmsg(rx->fd, rx->msgs, (unsigned)rx->batch, MSG_WAITFORONE, NULL);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return 0;   /* the receive timeout */
        return cbf_error_set(err, CBF_EIO, "recvmmsg: %s", strerror(errno));
    }
    int kept = 0;
    for (int i = 0; i < n; i++) {
        note_drops(rx, &rx->msgs[i].msg_hdr);
        /* Longer than a slot: the kernel cut it short. Counted, never
         * passed on as if it were a packet with a wrong payload length. */
        if (rx->msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
            rx->truncated++;
            continue;
        }
        rx->src[kept] = (uint64_t)ntohl(rx->names[i].sin_addr.s_addr) << 16 | ntohs(rx->names[i].sin_port);
        pkt[kept] = rx->bufs + (size_t)i * rx->slot;
        len[kept++] = rx->msgs[i].msg_len;
    }
    return kept;
}

cbf_net_transport cbf_net_rx_transport(const cbf_net_rx *rx) { return rx->kind; }

void cbf_net_rx_sources(const cbf_net_rx *rx, uint64_t *src, int n)
{
    for (int i = 0; i < n; i++)
        src[i] = rx->kind == CBF_NET_SOCKET ? rx->src[i] : 0;
}

/* The socket's drop count as /proc/net/udp shows it (the last column of
 * the line with the socket's inode), or 0 when it cannot be read. */
static uint64_t proc_udp_drops(int fd)
{
    struct stat st;
    FILE *f = fstat(fd, &st) ? NULL : fopen("/proc/net/udp", "r");
    if (!f)
        return 0;
    char line[512];
    uint64_t drops = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long inode, d;
        /* sl local rem st tx:rx tr:tm retrnsmt uid timeout inode ref pointer drops */
        if (sscanf(line, "%*s %*s %*s %*s %*s %*s %*s %*s %*s %llu %*s %*s %llu", &inode, &d) == 2 &&
            inode == (unsigned long long)st.st_ino) {
            drops = d;
            break;
        }
    }
    fclose(f);
    return drops;
}

void cbf_net_rx_settle(cbf_net_rx *rx)
{
    if (rx->kind != CBF_NET_SOCKET || rx->fd < 0)
        return;
    uint64_t d = proc_udp_drops(rx->fd);
    if (d > rx->kernel_drops)
        rx->kernel_drops = d;
}

void cbf_net_rx_stats_get(const cbf_net_rx *rx, cbf_net_rx_stats *s)
{
    *s = (cbf_net_rx_stats){.kernel_drops = rx->kernel_drops, .truncated = rx->truncated};
    int v = 0;
    socklen_t l = sizeof v;
    if (rx->fd >= 0 && getsockopt(rx->fd, SOL_SOCKET, SO_RCVBUF, &v, &l) == 0)
        s->rcvbuf = (size_t)v;
#ifdef CBF_HAVE_IBVERBS
    if (rx->ibv)
        s->bad_frames = cbf_ibv_rx_bad_frames(rx->ibv);
#endif
}

void cbf_net_rx_close(cbf_net_rx *rx)
{
    if (!rx)
        return;
#ifdef CBF_HAVE_IBVERBS
    cbf_ibv_rx_close(rx->ibv);
#endif
    if (rx->fd >= 0)
        close(rx->fd);
    free(rx->bufs);
    free(rx);
}

/* ---- Send -------------------------------------------------------------------- */

int cbf_net_tx_open(const cbf_net_tx_config *cfg, cbf_net_tx **out, cbf_error *err)
{
    if (cfg->batch < 1 || cfg->batch > TX_MAX_BATCH)
        return cbf_error_set(err, CBF_EINVAL, "batch %d outside 1..%d", cfg->batch, TX_MAX_BATCH);
    int kind = cbf_net_choose_transport(&cfg->choice, cfg->iface, err);
    if (kind < 0)
        return kind;
    cbf_net_tx *tx = calloc(1, sizeof *tx);
    if (!tx)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    tx->fd = -1;
    tx->batch = cfg->batch;
    tx->max_packet = cfg->max_packet;
    int rc = 0;
#ifdef CBF_HAVE_IBVERBS
    if (kind == CBF_NET_IBVERBS) {
        cbf_error why = {0};
        uint32_t slots = cfg->ring_slots ? cfg->ring_slots
                                         : (uint32_t)(2 * cfg->batch > 4096 ? 2 * cfg->batch : 4096);
        if (cbf_ibv_tx_open(cfg->iface, cfg->ttl, slots, cfg->max_packet, cfg->batch, &tx->ibv, &why) == 0) {
            tx->kind = CBF_NET_IBVERBS;
            *out = tx;
            return 0;
        }
        if ((rc = fall_back(&cfg->choice, &why, err)) < 0) {
            free(tx);
            return rc;
        }
    }
#endif
    tx->kind = CBF_NET_SOCKET;
    if (!(tx->arena = malloc((size_t)tx->batch * tx->max_packet)))
        rc = cbf_error_set(err, CBF_ENOMEM, "out of memory");
    if (!rc)
        rc = cbf_udp_open_tx(cfg->iface, cfg->ttl, cfg->sndbuf, &tx->fd, err);
    if (rc) {
        cbf_net_tx_close(tx, NULL);
        return rc;
    }
    *out = tx;
    return 0;
}

int cbf_net_tx_buffer(cbf_net_tx *tx, uint8_t **payload, cbf_error *err)
{
#ifdef CBF_HAVE_IBVERBS
    if (tx->kind == CBF_NET_IBVERBS)
        return cbf_ibv_tx_buffer(tx->ibv, payload, err);
#endif
    if (tx->n == tx->batch)   /* the caller did not flush a full batch */
        return cbf_error_set(err, CBF_EINTERNAL, "send batch of %d full: flush first", tx->batch);
    *payload = tx->arena + (size_t)tx->n * tx->max_packet;
    return 0;
}

int cbf_net_tx_commit(cbf_net_tx *tx, size_t len, const cbf_udp_endpoint *dest, cbf_error *err)
{
#ifdef CBF_HAVE_IBVERBS
    if (tx->kind == CBF_NET_IBVERBS)
        return cbf_ibv_tx_commit(tx->ibv, len, &dest->addr, err);
#endif
    (void)err;
    int i = tx->n++;
    tx->to[i] = dest->addr;
    tx->iov[i] = (struct iovec){.iov_base = tx->arena + (size_t)i * tx->max_packet, .iov_len = len};
    tx->msgs[i].msg_hdr = (struct msghdr){.msg_name = &tx->to[i], .msg_namelen = sizeof tx->to[i],
                                          .msg_iov = &tx->iov[i], .msg_iovlen = 1};
    return tx->n == tx->batch;
}

int cbf_net_tx_check_destination(cbf_net_tx *tx, const cbf_udp_endpoint *dest, cbf_error *err)
{
#ifdef CBF_HAVE_IBVERBS
    if (tx->kind == CBF_NET_IBVERBS)
        return cbf_ibv_tx_resolve(tx->ibv, &dest->addr, err);
#endif
    (void)tx, (void)dest, (void)err;
    return 0;
}

int cbf_net_tx_flush(cbf_net_tx *tx, uint64_t *refused, cbf_error *err)
{
#ifdef CBF_HAVE_IBVERBS
    if (tx->kind == CBF_NET_IBVERBS)
        return cbf_ibv_tx_flush(tx->ibv, err);
#endif
    int done = 0;
    while (done < tx->n) {
        int n = sendmmsg(tx->fd, tx->msgs + done, (unsigned)(tx->n - done), 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            /* No receiver on a unicast port (ECONNREFUSED, from an earlier
             * ICMP error) is not the sender's failure: count it and go on. */
            if (errno == ECONNREFUSED) {
                if (refused)
                    (*refused)++;
                done++;
                continue;
            }
            tx->n = 0;
            return cbf_error_set(err, CBF_EIO, "sendmmsg: %s", strerror(errno));
        }
        done += n;
    }
    tx->n = 0;
    return 0;
}

cbf_net_transport cbf_net_tx_transport(const cbf_net_tx *tx) { return tx->kind; }

int cbf_net_tx_close(cbf_net_tx *tx, cbf_error *err)
{
    if (!tx)
        return 0;
    int rc = 0;
#ifdef CBF_HAVE_IBVERBS
    if (tx->ibv) {
        rc = cbf_ibv_tx_drain(tx->ibv, err);
        cbf_ibv_tx_close(tx->ibv);
    }
#else
    (void)err;   /* sockets hand everything to the kernel in flush */
#endif
    if (tx->fd >= 0)
        close(tx->fd);
    free(tx->arena);
    free(tx);
    return rc;
}
