/* udp.h: UDP for SPEAD streams: endpoints "host:port", unicast or
 * multicast (joined on the interface with the given address), and the
 * transport interface the receiver, sender and cbf-bench use: batches of
 * datagrams in and out through sockets (recvmmsg/sendmmsg) or through the
 * ibverbs raw-packet queues (net/ibv), chosen by `transport`. */
#ifndef CBF_UDP_H
#define CBF_UDP_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cbf/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cbf_udp_endpoint {
    struct sockaddr_in addr;
    bool multicast;
} cbf_udp_endpoint;

/* Parses "a.b.c.d:port" (IPv4 numbers only: an instrument names its
 * addresses). what names the parameter in messages. */
int cbf_udp_parse_endpoint(const char *text, const char *what, cbf_udp_endpoint *out, cbf_error *err);
/* Parses a comma-separated list of endpoints; returns the count or a
 * negative code. */
int cbf_udp_parse_endpoints(const char *text, const char *what, cbf_udp_endpoint *out, int max,
                            cbf_error *err);

/* Whether a socket bound to ep (and joined to it, for a group) receives a
 * datagram to dst_ip:dst_port (host order): the port, and the address
 * unless ep is 0.0.0.0. For datagrams read from elsewhere (a capture). */
bool cbf_udp_endpoint_takes(const cbf_udp_endpoint *ep, uint32_t dst_ip, uint16_t dst_port);

/* Receiving socket bound to ep's port (and address, for unicast); a
 * multicast group is joined on the interface whose address is iface.
 * reuseport lets several sockets (threads) share the port. */
int cbf_udp_open_rx(const cbf_udp_endpoint *ep, const char *iface, size_t rcvbuf, bool reuseport,
                    int *fd_out, cbf_error *err);
/* Once every socket of a SO_REUSEPORT group is open (fd is any of them):
 * each datagram goes to a socket drawn at random from the n, instead of by
 * the hash of its flow, so that a heap's packets may land on any socket. */
int cbf_udp_spread_packets(int fd, unsigned n, cbf_error *err);
/* Sending socket: multicast leaves through iface with the given TTL (and
 * loops back, so engines on one host hear each other). */
int cbf_udp_open_tx(const char *iface, int ttl, size_t sndbuf, int *fd_out, cbf_error *err);

/* ---- Transports: one interface over sockets or ibverbs -------------------- */

typedef enum cbf_net_transport { CBF_NET_SOCKET, CBF_NET_IBVERBS } cbf_net_transport;

/* How a pipeline asked for its packets to travel: transport is "socket" or
 * "ibverbs"; with fallback, ibverbs that cannot work (not built, no RDMA
 * NIC behind the interface, the device refuses) gives sockets and a logged
 * warning instead of an error; where is the YAML place of the parameter. */
typedef struct cbf_net_choice {
    const char *transport;
    bool fallback;
    const char *where;
} cbf_net_choice;

/* Which transport a choice gets on interface iface: CBF_NET_SOCKET or
 * CBF_NET_IBVERBS (the RDMA NIC is there and libibverbs lists it), or
 * CBF_ENOTSUP naming what ibverbs lacks. The open calls below decide again
 * (opening the device can still fail); this is for messages and checks made
 * before anything is opened. */
int cbf_net_choose_transport(const cbf_net_choice *c, const char *iface, cbf_error *err);

typedef struct cbf_net_rx cbf_net_rx;

typedef struct cbf_net_rx_config {
    cbf_udp_endpoint ep;
    const char *iface;       /* IPv4 address of the interface */
    size_t rcvbuf;           /* socket: SO_RCVBUF asked for */
    bool reuseport;          /* socket: share the port (several threads) */
    int timeout_ms;          /* longest wait in cbf_net_rx_recv */
    int batch;               /* most packets one recv returns (at most 64) */
    size_t max_packet;       /* largest UDP payload taken */
    bool gro;                /* socket: ask the kernel to coalesce datagrams (UDP_GRO);
                                each comes back split, as if it had been read alone */
    uint32_t ring_slots;     /* ibverbs: receive ring (0 = 4096) */
    cbf_net_choice choice;
} cbf_net_rx_config;

typedef struct cbf_net_rx_stats {
    uint64_t kernel_drops;   /* socket: dropped for want of buffer space (SO_RXQ_OVFL) */
    uint64_t bad_frames;     /* ibverbs: frames steered here that were not valid UDP */
    uint64_t truncated;      /* socket: datagrams longer than max_packet (MSG_TRUNC), dropped */
    size_t rcvbuf;           /* socket: SO_RCVBUF as getsockopt reports it (Linux: 2 x granted) */
    bool gro;                /* socket: UDP_GRO on (asked for and the kernel took it) */
    uint64_t coalesced;      /* socket: datagrams that arrived coalesced with others */
} cbf_net_rx_stats;

int cbf_net_rx_open(const cbf_net_rx_config *cfg, cbf_net_rx **out, cbf_error *err);
/* Up to cfg->batch UDP payloads, valid until the next call; waits at most
 * timeout_ms for the first. Returns the count (0: nothing came) or an error. */
int cbf_net_rx_recv(cbf_net_rx *rx, const uint8_t **pkt, size_t *len, cbf_error *err);
cbf_net_transport cbf_net_rx_transport(const cbf_net_rx *rx);
/* Where the n packets of the last cbf_net_rx_recv came from: IPv4 address
 * << 16 | UDP port, or 0 where the transport does not say (ibverbs). */
void cbf_net_rx_sources(const cbf_net_rx *rx, uint64_t *src, int n);
/* Sockets only: cbf_udp_spread_packets on the group rx belongs to. */
int cbf_net_rx_spread(cbf_net_rx *rx, unsigned n, cbf_error *err);
void cbf_net_rx_stats_get(const cbf_net_rx *rx, cbf_net_rx_stats *s);
/* At the end of a stream: brings kernel_drops up to the kernel's own count
 * (socket: /proc/net/udp), which includes drops after the last packet
 * received, which SO_RXQ_OVFL (carried by the next packet) cannot report. */
void cbf_net_rx_settle(cbf_net_rx *rx);
void cbf_net_rx_close(cbf_net_rx *rx);

typedef struct cbf_net_tx cbf_net_tx;

typedef struct cbf_net_tx_config {
    const char *iface;       /* IPv4 address of the interface packets leave from */
    int ttl;                 /* multicast TTL */
    size_t sndbuf;           /* socket: SO_SNDBUF asked for */
    size_t max_packet;       /* largest UDP payload */
    int batch;               /* packets per sendmmsg / per posted list */
    bool gso;                /* socket: runs of packets of one size to one destination go
                                as one UDP_SEGMENT send each (the kernel cuts them) */
    uint32_t ring_slots;     /* ibverbs: send ring (0 = max(4096, 2 x batch)) */
    cbf_net_choice choice;
} cbf_net_tx_config;

int cbf_net_tx_open(const cbf_net_tx_config *cfg, cbf_net_tx **out, cbf_error *err);
/* Room for the next packet's payload (max_packet bytes). */
int cbf_net_tx_buffer(cbf_net_tx *tx, uint8_t **payload, cbf_error *err);
/* That packet is len bytes for dest. Returns 1 when a batch is ready (pace
 * if you must, then flush), 0, or an error. */
int cbf_net_tx_commit(cbf_net_tx *tx, size_t len, const cbf_udp_endpoint *dest, cbf_error *err);
/* Checks that dest can be reached through this queue (ibverbs: the
 * neighbour's MAC for a unicast destination); sockets always can. */
int cbf_net_tx_check_destination(cbf_net_tx *tx, const cbf_udp_endpoint *dest, cbf_error *err);
/* Sends what is committed. Unicast packets refused by the destination
 * host (no socket on the port: ICMP port unreachable, seen by sockets
 * only) are added to *refused and are not an error. */
int cbf_net_tx_flush(cbf_net_tx *tx, uint64_t *refused, cbf_error *err);
cbf_net_transport cbf_net_tx_transport(const cbf_net_tx *tx);

typedef struct cbf_net_tx_stats {
    bool gso;                /* socket: UDP_SEGMENT sends in use (asked for, not refused) */
    uint64_t gso_sends;      /* socket: UDP_SEGMENT sends made (each several packets) */
    uint64_t gso_fallbacks;  /* socket: times the kernel refused one, after which this
                                queue sends packet by packet (sendmmsg) */
} cbf_net_tx_stats;
void cbf_net_tx_stats_get(const cbf_net_tx *tx, cbf_net_tx_stats *s);
/* Sends what is committed and waits until it has left (ibverbs), then closes. */
int cbf_net_tx_close(cbf_net_tx *tx, cbf_error *err);

#ifdef __cplusplus
}
#endif
#endif
