/* The transport interface: batches of UDP datagrams in and out, through
 * sockets (recvmmsg/sendmmsg) or the ibverbs raw-packet queues. The choice
 * is made at open: ibverbs when asked for and the RDMA NIC is there; when it
 * is not, an error naming what is missing, or sockets with a logged warning
 * when the pipeline allows the fallback. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/udp.h>
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
/* Linux's UDP_SEGMENT and UDP_GRO (netinet/udp.h has them from glibc 2.28). */
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
/* A coalesced datagram holds at most 64 segments (the kernel's
 * UDP_GRO_CNT_MAX and UDP_MAX_SEGMENTS) and 64 KiB. */
#define SEG_MAX 64
#define GRO_SLOT 65536
#define GSO_MAX_BYTES 65000

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
    /* GRO: the datagrams of the last recvmmsg, split, and how many of them
     * earlier calls have returned; the next recvmmsg waits until all have. */
    bool gro;
    size_t max_packet;
    int q_n, q_head;
    const uint8_t **q_pkt;
    size_t *q_len;
    uint64_t *q_src;
    uint64_t coalesced;
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
    /* GSO: runs of committed packets as one message each, with the cmsg
     * that names the segment size; first[m] the run's first packet. */
    bool gso;
    struct mmsghdr runs[TX_MAX_BATCH];
    int first[TX_MAX_BATCH + 1];
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } ctrl[TX_MAX_BATCH];
    uint64_t gso_sends, gso_fallbacks;
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
    rx->max_packet = cfg->max_packet;
    rc = cbf_udp_open_rx(&cfg->ep, cfg->iface, cfg->rcvbuf, cfg->reuseport, &rx->fd, err);
    if (!rc && cfg->gro) {
        /* Refused by kernels before 5.0: then datagrams come one by one. */
        int on = 1;
        rx->gro = setsockopt(rx->fd, SOL_UDP, UDP_GRO, &on, sizeof on) == 0;
        if (!rx->gro)
            cbf_log_info("receive on port %d: the kernel refuses UDP_GRO (%s); datagrams one by one",
                         ntohs(cfg->ep.addr.sin_port), strerror(errno));
    }
    if (rx->gro) {
        /* A coalesced datagram needs a whole 64 KiB slot. */
        rx->slot = GRO_SLOT > rx->slot ? GRO_SLOT : rx->slot;
        const size_t q = (size_t)rx->batch * SEG_MAX;
        rx->q_pkt = malloc(q * sizeof *rx->q_pkt);
        rx->q_len = malloc(q * sizeof *rx->q_len);
        rx->q_src = malloc(q * sizeof *rx->q_src);
        if (!rx->q_pkt || !rx->q_len || !rx->q_src)
            rc = cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    if (!rc && !(rx->bufs = malloc((size_t)rx->batch * rx->slot)))
        rc = cbf_error_set(err, CBF_ENOMEM, "out of memory");
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

/* The socket's cumulative drop count (SO_RXQ_OVFL) as it rides on
 * packets; returns the segment size of a coalesced datagram (UDP_GRO), or
 * 0 for a datagram read alone. */
static size_t note_cmsgs(cbf_net_rx *rx, struct msghdr *h)
{
    size_t seg = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL &&
            c->cmsg_len >= CMSG_LEN(sizeof(uint32_t))) {
            uint32_t v;
            memcpy(&v, CMSG_DATA(c), sizeof v);
            rx->kernel_drops += (uint32_t)(v - rx->ovfl_last);
            rx->ovfl_last = v;
        } else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO &&
                   c->cmsg_len >= CMSG_LEN(sizeof(int))) {
            int v;
            memcpy(&v, CMSG_DATA(c), sizeof v);
            seg = v > 0 ? (size_t)v : 0;
        }
    }
    return seg;
}

/* A datagram's source as cbf_net_rx_sources gives it: address << 16 | port. */
static uint64_t source_of(const struct sockaddr_in *a)
{
    return (uint64_t)ntohl(a->sin_addr.s_addr) << 16 | ntohs(a->sin_port);
}

/* GRO: the last recvmmsg's datagrams split into the queue. A segment of
 * more than max_packet is counted truncated and dropped, as it would have
 * been read alone; so is one past the queue, which the kernel's limit of
 * 64 segments a datagram never reaches. */
static void rx_enqueue(cbf_net_rx *rx, const uint8_t *p, size_t l, uint64_t src)
{
    if (l > rx->max_packet || rx->q_n == rx->batch * SEG_MAX) {
        rx->truncated++;
        return;
    }
    rx->q_pkt[rx->q_n] = p;
    rx->q_len[rx->q_n] = l;
    rx->q_src[rx->q_n++] = src;
}

static void split_batch(cbf_net_rx *rx, int n)
{
    rx->q_n = rx->q_head = 0;
    for (int i = 0; i < n; i++) {
        struct msghdr *h = &rx->msgs[i].msg_hdr;
        const size_t seg = note_cmsgs(rx, h), len = rx->msgs[i].msg_len;
        const uint64_t src = source_of(&rx->names[i]);
        const uint8_t *base = rx->bufs + (size_t)i * rx->slot;
        if (h->msg_flags & MSG_TRUNC) {   /* past a 64 KiB slot: not one of ours */
            rx->truncated++;
            continue;
        }
        if (!seg || seg >= len) {         /* read alone (or a zero-length datagram) */
            rx_enqueue(rx, base, len, src);
            continue;
        }
        rx->coalesced += (len + seg - 1) / seg;
        for (size_t off = 0; off < len; off += seg)
            rx_enqueue(rx, base + off, len - off < seg ? len - off : seg, src);
    }
}

/* GRO: up to batch of the queued segments, their sources for
 * cbf_net_rx_sources. */
static int rx_from_queue(cbf_net_rx *rx, const uint8_t **pkt, size_t *len)
{
    int k = 0;
    for (; k < rx->batch && rx->q_head < rx->q_n; k++, rx->q_head++) {
        pkt[k] = rx->q_pkt[rx->q_head];
        len[k] = rx->q_len[rx->q_head];
        rx->src[k] = rx->q_src[rx->q_head];
    }
    return k;
}

int cbf_net_rx_recv(cbf_net_rx *rx, const uint8_t **pkt, size_t *len, cbf_error *err)
{
#ifdef CBF_HAVE_IBVERBS
    if (rx->kind == CBF_NET_IBVERBS)
        return cbf_ibv_rx_recv(rx->ibv, pkt, len, rx->batch, rx->timeout_ms, err);
#endif
    if (rx->gro && rx->q_head < rx->q_n)
        return rx_from_queue(rx, pkt, len);
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
    if (rx->gro) {
        split_batch(rx, n);
        return rx_from_queue(rx, pkt, len);
    }
    int kept = 0;
    for (int i = 0; i < n; i++) {
        note_cmsgs(rx, &rx->msgs[i].msg_hdr);
        /* Longer than a slot: the kernel cut it short. Counted, never
         * passed on as if it were a packet with a wrong payload length. */
        if (rx->msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
            rx->truncated++;
            continue;
        }
        rx->src[kept] = source_of(&rx->names[i]);
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
    *s = (cbf_net_rx_stats){.kernel_drops = rx->kernel_drops, .truncated = rx->truncated,
                            .gro = rx->gro, .coalesced = rx->coalesced};
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
    free(rx->q_pkt);
    free(rx->q_len);
    free(rx->q_src);
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
    if (cfg->gso) {
        /* Kernels before 4.18 do not know the option: sendmmsg alone. */
        int v = 0;
        socklen_t l = sizeof v;
        tx->gso = getsockopt(tx->fd, SOL_UDP, UDP_SEGMENT, &v, &l) == 0;
        if (!tx->gso)
            cbf_log_info("send: the kernel has no UDP_SEGMENT (%s); packet by packet", strerror(errno));
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

/* Packets from..n one by one (one message each), as sendmmsg takes them. */
static int flush_each(cbf_net_tx *tx, int from, uint64_t *refused, cbf_error *err)
{
    int done = from;
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

static bool same_dest(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
    return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

/* GSO: the committed packets as runs, each one message whose payload the
 * kernel cuts into datagrams of the run's first packet's size: consecutive
 * packets to one destination, of one size but perhaps a shorter last, at
 * most 64 and 65000 bytes. The datagrams on the wire are the packets as
 * committed, in order. Returns the number of runs. */
static int gso_runs(cbf_net_tx *tx)
{
    int m = 0;
    for (int i = 0; i < tx->n;) {
        const size_t size = tx->iov[i].iov_len;
        size_t total = size;
        int j = i + 1;
        while (j < tx->n && j - i < SEG_MAX && same_dest(&tx->to[j], &tx->to[i]) &&
               tx->iov[j].iov_len <= size && total + tx->iov[j].iov_len <= GSO_MAX_BYTES && size > 0) {
            total += tx->iov[j].iov_len;
            if (tx->iov[j++].iov_len < size)
                break;   /* a shorter packet ends its run */
        }
        struct msghdr *h = &tx->runs[m].msg_hdr;
        *h = (struct msghdr){.msg_name = &tx->to[i], .msg_namelen = sizeof tx->to[i],
                             .msg_iov = &tx->iov[i], .msg_iovlen = (size_t)(j - i)};
        if (j - i > 1) {
            h->msg_control = tx->ctrl[m].buf;
            h->msg_controllen = sizeof tx->ctrl[m].buf;
            struct cmsghdr *c = CMSG_FIRSTHDR(h);
            c->cmsg_level = SOL_UDP;
            c->cmsg_type = UDP_SEGMENT;
            c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            const uint16_t seg = (uint16_t)size;
            memcpy(CMSG_DATA(c), &seg, sizeof seg);
        }
        tx->first[m++] = i;
        i = j;
    }
    tx->first[m] = tx->n;
    return m;
}

int cbf_net_tx_flush(cbf_net_tx *tx, uint64_t *refused, cbf_error *err)
{
#ifdef CBF_HAVE_IBVERBS
    if (tx->kind == CBF_NET_IBVERBS)
        return cbf_ibv_tx_flush(tx->ibv, err);
#endif
    if (!tx->gso)
        return flush_each(tx, 0, refused, err);
    const int m = gso_runs(tx);
    int done = 0;
    while (done < m) {
        int n = sendmmsg(tx->fd, tx->runs + done, (unsigned)(m - done), 0);
        if (n >= 0) {
            for (int k = done; k < done + n; k++)
                tx->gso_sends += tx->first[k + 1] - tx->first[k] > 1;
            done += n;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno == ECONNREFUSED) {   /* as flush_each: every packet of the run */
            if (refused)
                *refused += (uint64_t)(tx->first[done + 1] - tx->first[done]);
            done++;
            continue;
        }
        if (tx->first[done + 1] - tx->first[done] > 1 &&
            (errno == EIO || errno == EINVAL || errno == EMSGSIZE || errno == ENOPROTOOPT)) {
            /* The kernel or the device will not segment (no checksum
             * offload, a segment above the route's MTU, an old kernel):
             * this queue goes packet by packet from here on. */
            cbf_log_warn("send: the kernel refuses UDP_SEGMENT (%s); packet by packet from now on",
                         strerror(errno));
            tx->gso = false;
            tx->gso_fallbacks++;
            return flush_each(tx, tx->first[done], refused, err);
        }
        tx->n = 0;
        return cbf_error_set(err, CBF_EIO, "sendmmsg: %s", strerror(errno));
    }
    tx->n = 0;
    return 0;
}

void cbf_net_tx_stats_get(const cbf_net_tx *tx, cbf_net_tx_stats *s)
{
    *s = (cbf_net_tx_stats){.gso = tx->gso, .gso_sends = tx->gso_sends,
                            .gso_fallbacks = tx->gso_fallbacks};
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
