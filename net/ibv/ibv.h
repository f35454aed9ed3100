/* ibv.h: the ibverbs raw-packet path (libibverbs): receive and send whole
 * Ethernet frames through a raw-packet queue pair on an RDMA NIC (Mellanox
 * ConnectX and kin), bypassing the kernel's network stack, as spead2 does.
 *
 * Receive: a ring of registered memory slots posted to the queue, a flow
 * rule (ibv_create_flow) that steers frames to one destination MAC, IPv4
 * address and UDP port into it (a multicast group's MAC and address, or the
 * interface's own for unicast), and a plain socket that joins the group so
 * the switches (IGMP) send it here. Send: frames built by cbf (net/eth)
 * in a ring of registered slots, posted in batches, one completion per
 * batch giving the slots back.
 *
 * Users reach this through the transport interface in net/udp/udp.h
 * (`transport: ibverbs`); what is here takes plain addresses. */
#ifndef CBF_IBV_H
#define CBF_IBV_H

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cbf/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The network interface with IPv4 address iface_addr, the RDMA device
 * behind it (<sysfs>/class/net/<if>/device/infiniband/) and its port
 * (dev_port + 1), after checking that libibverbs lists the device. sysfs is
 * "/sys" but for tests. Returns 0, or CBF_ENOTSUP / CBF_ECONFIG with a
 * message naming what is missing (no such interface, no RDMA device on it,
 * libibverbs does not list it). */
typedef struct cbf_ibv_nic {
    char ifname[32];
    char device[64];
    int port;             /* 1-based, as ibverbs counts */
    uint32_t ip;          /* interface address, host order */
    uint8_t mac[6];
} cbf_ibv_nic;

int cbf_ibv_probe_at(const char *sysfs, const char *iface_addr, cbf_ibv_nic *nic, cbf_error *err);
int cbf_ibv_probe(const char *iface_addr, cbf_ibv_nic *nic, cbf_error *err);

/* The flow rule of one receive stream, laid out as ibv_create_flow reads
 * it: the attribute followed by its three specs. */
typedef struct __attribute__((packed)) cbf_ibv_flow_rule {
    struct ibv_flow_attr attr;
    struct ibv_flow_spec_eth eth;
    struct ibv_flow_spec_ipv4 ip;
    struct ibv_flow_spec_tcp_udp udp;
} cbf_ibv_flow_rule;

/* Frames to dst_ip:dst_port (host order) on the given port: for a
 * multicast group the destination MAC is the group's (RFC 1112), otherwise
 * own_mac; every field matched exactly. */
void cbf_ibv_flow_rule_init(cbf_ibv_flow_rule *r, int port, const uint8_t own_mac[6], uint32_t dst_ip,
                            uint16_t dst_port);

/* ---- Receive --------------------------------------------------------------- */

typedef struct cbf_ibv_rx cbf_ibv_rx;

/* Opens a receive queue for ep (a multicast group, joined on the interface,
 * or the interface's own address) with slots frames of up to frame_bytes.
 * Errors name what failed: the probe's reasons, the device, the queue pair
 * (which needs CAP_NET_RAW), the flow rule. */
int cbf_ibv_rx_open(const char *iface_addr, const struct sockaddr_in *ep, uint32_t slots, size_t frame_bytes,
                    cbf_ibv_rx **out, cbf_error *err);
/* Up to max UDP payloads (pointers into the ring, valid until the next
 * call, which gives their slots back to the NIC), waiting at most
 * timeout_ms for the first. Returns the count (0 on timeout) or an error. */
int cbf_ibv_rx_recv(cbf_ibv_rx *rx, const uint8_t **pkt, size_t *len, int max, int timeout_ms,
                    cbf_error *err);
/* Frames dropped because they were not whole IPv4 UDP datagrams with a
 * valid header checksum (the flow rule matched them nonetheless). */
uint64_t cbf_ibv_rx_bad_frames(const cbf_ibv_rx *rx);
void cbf_ibv_rx_close(cbf_ibv_rx *rx);

/* ---- Send ------------------------------------------------------------------ */

typedef struct cbf_ibv_tx cbf_ibv_tx;

/* Opens a send queue on the interface with slots frames of up to
 * max_payload bytes of UDP payload, posted batch at a time. Multicast
 * frames carry ttl; the source port is one reserved by a socket bound on
 * the interface. */
int cbf_ibv_tx_open(const char *iface_addr, int ttl, uint32_t slots, size_t max_payload, int batch,
                    cbf_ibv_tx **out, cbf_error *err);
/* The payload area (max_payload bytes) of the next frame: waits for the
 * NIC to give slots back when the ring is full. */
int cbf_ibv_tx_buffer(cbf_ibv_tx *tx, uint8_t **payload, cbf_error *err);
/* Finishes that frame: len bytes of payload to dest (a sockaddr_in as the
 * socket calls take it). Returns 1 when a batch is waiting (call flush), 0,
 * or an error (a unicast destination with no ARP entry on the interface). */
int cbf_ibv_tx_commit(cbf_ibv_tx *tx, size_t len, const struct sockaddr_in *dest, cbf_error *err);
/* Checks now that dest can be sent to (a unicast destination needs an
 * ARP entry on the interface), so that a pipeline fails at start rather
 * than at its first packet. */
int cbf_ibv_tx_resolve(cbf_ibv_tx *tx, const struct sockaddr_in *dest, cbf_error *err);
/* Posts the frames committed so far. */
int cbf_ibv_tx_flush(cbf_ibv_tx *tx, cbf_error *err);
/* Flushes and waits until the NIC has sent everything posted. */
int cbf_ibv_tx_drain(cbf_ibv_tx *tx, cbf_error *err);
void cbf_ibv_tx_close(cbf_ibv_tx *tx);

#ifdef __cplusplus
}
#endif
#endif
