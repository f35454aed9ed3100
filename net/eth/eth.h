/* eth.h: Ethernet II / IPv4 / UDP frames as they are on the wire, for the
 * paths that see whole frames rather than a socket's datagrams: pcap
 * captures (read and written) and the ibverbs raw-packet queues. Also the
 * interface facts those paths need (name and MAC address of the interface
 * with an IPv4 address, a neighbour's MAC from the ARP table).
 *
 * Everything here is plain byte work with every length checked, so it is
 * built and tested whether or not libpcap or libibverbs is present. */
#ifndef CBF_ETH_H
#define CBF_ETH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cbf/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CBF_ETH_HEADER_BYTES 14
#define CBF_ETH_IPV4_BYTES 20
#define CBF_ETH_UDP_BYTES 8
/* Ethernet + IPv4 without options + UDP: what cbf puts before a payload. */
#define CBF_ETH_UDP_HEADERS (CBF_ETH_HEADER_BYTES + CBF_ETH_IPV4_BYTES + CBF_ETH_UDP_BYTES)
#define CBF_ETH_MAX_UDP_PAYLOAD 65507

/* Addresses of one datagram; IPv4 addresses and ports in host order. */
typedef struct cbf_eth_udp_addr {
    uint8_t src_mac[6], dst_mac[6];
    uint32_t src_ip, dst_ip;
    uint16_t src_port, dst_port;
    uint8_t ttl;
} cbf_eth_udp_addr;

/* The Ethernet address an IPv4 multicast group maps to (RFC 1112:
 * 01:00:5e and the group's low 23 bits). */
void cbf_eth_multicast_mac(uint32_t group, uint8_t mac[6]);
/* The Internet checksum (RFC 1071) of len bytes: written into a header
 * whose checksum field is zero it makes the header valid, and over a valid
 * header it is 0. */
uint16_t cbf_eth_checksum(const uint8_t *data, size_t len);
/* Writes the 42 header bytes at frame (Ethernet type IPv4; IPv4 with don't
 * fragment, ip_id, TTL a->ttl and the header checksum; UDP with checksum 0,
 * which IPv4 allows) for a payload of payload_len bytes that the caller puts
 * at frame + CBF_ETH_UDP_HEADERS. Returns the frame's length, or 0 when the
 * payload is larger than a datagram can carry. */
size_t cbf_eth_udp_write(uint8_t *frame, const cbf_eth_udp_addr *a, size_t payload_len, uint16_t ip_id);

typedef enum cbf_eth_link {
    CBF_ETH_LINK_ETHERNET,   /* Ethernet II, one optional 802.1Q tag */
    CBF_ETH_LINK_LINUX_SLL,  /* Linux cooked capture (16-byte header) */
    CBF_ETH_LINK_RAW_IP,     /* the IPv4 header first */
} cbf_eth_link;

/* Why a frame is not a usable UDP datagram. */
typedef enum cbf_eth_reason {
    CBF_ETH_OK = 0,
    CBF_ETH_TRUNCATED,   /* shorter than its headers, or than the lengths they give */
    CBF_ETH_NOT_IPV4,    /* another Ethernet type, or IP version not 4 */
    CBF_ETH_NOT_UDP,     /* another IP protocol */
    CBF_ETH_FRAGMENT,    /* a fragment (more-fragments flag or an offset) */
    CBF_ETH_BAD_LENGTH,  /* header length or UDP length impossible */
    CBF_ETH_N_REASONS
} cbf_eth_reason;

const char *cbf_eth_reason_name(cbf_eth_reason r);

typedef struct cbf_eth_udp_info {
    uint32_t src_ip, dst_ip;        /* host order */
    uint16_t src_port, dst_port;
    const uint8_t *ip_header;       /* for a checksum test by callers that want one */
    size_t ip_header_len;
    const uint8_t *payload;         /* into the frame */
    size_t len;
} cbf_eth_udp_info;

/* Finds the UDP datagram in a frame of len bytes. The IPv4 checksum is not
 * checked here: captures of a host that offloads checksums hold unfilled
 * ones (callers that want it use cbf_eth_checksum on ip_header). */
cbf_eth_reason cbf_eth_udp_parse(cbf_eth_link link, const uint8_t *frame, size_t len, cbf_eth_udp_info *out);

/* ---- Interfaces ---------------------------------------------------------- */

/* The name of the interface with IPv4 address addr (dotted quad), and the
 * address itself (host order) when ip is not NULL. CBF_ECONFIG when addr is
 * not an address or no interface has it. */
int cbf_eth_iface_by_addr(const char *addr, char *name, size_t cap, uint32_t *ip, cbf_error *err);
/* The interface's MAC address, from <sysfs>/class/net/<name>/address
 * (sysfs is "/sys" but for tests). */
int cbf_eth_iface_mac(const char *sysfs, const char *name, uint8_t mac[6], cbf_error *err);
/* Parses "aa:bb:cc:dd:ee:ff"; returns true when it is one. */
bool cbf_eth_parse_mac(const char *text, uint8_t mac[6]);
/* A neighbour's MAC address from the text of /proc/net/arp (the entry for
 * ip, host order, on interface name, complete). Returns 0, or CBF_ENOTSUP
 * naming the address when the table has no complete entry for it. */
int cbf_eth_arp_lookup(const char *table, const char *name, uint32_t ip, uint8_t mac[6], cbf_error *err);

#ifdef __cplusplus
}
#endif
#endif
