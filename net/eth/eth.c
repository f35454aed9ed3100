/* Ethernet/IPv4/UDP frames, and the interface facts the raw paths need. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include "eth.h"

static uint16_t be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }

static uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
    put16(p, (uint16_t)(v >> 16));
    put16(p + 2, (uint16_t)v);
}

void cbf_eth_multicast_mac(uint32_t group, uint8_t mac[6])
{
    mac[0] = 0x01;
    mac[1] = 0x00;
    mac[2] = 0x5e;
    mac[3] = (uint8_t)((group >> 16) & 0x7f);
    mac[4] = (uint8_t)(group >> 8);
    mac[5] = (uint8_t)group;
}

uint16_t cbf_eth_checksum(const uint8_t *data, size_t len)
{
    uint32_t s = 0;
    for (size_t i = 0; i + 1 < len; i += 2)
        s += be16(data + i);
    if (len & 1)
        s += (uint32_t)data[len - 1] << 8;
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return (uint16_t)~s;
}

size_t cbf_eth_udp_write(uint8_t *f, const cbf_eth_udp_addr *a, size_t payload_len, uint16_t ip_id)
{
    if (payload_len > CBF_ETH_MAX_UDP_PAYLOAD)
        return 0;
    memcpy(f, a->dst_mac, 6);
    memcpy(f + 6, a->src_mac, 6);
    put16(f + 12, 0x0800);
    uint8_t *ip = f + CBF_ETH_HEADER_BYTES;
    memset(ip, 0, CBF_ETH_IPV4_BYTES);
    ip[0] = 0x45;                 /* version 4, 5 words of header */
    put16(ip + 2, (uint16_t)(CBF_ETH_IPV4_BYTES + CBF_ETH_UDP_BYTES + payload_len));
    put16(ip + 4, ip_id);
    put16(ip + 6, 0x4000);        /* don't fragment */
    ip[8] = a->ttl;
    ip[9] = 17;                   /* UDP */
    put32(ip + 12, a->src_ip);
    put32(ip + 16, a->dst_ip);
    put16(ip + 10, cbf_eth_checksum(ip, CBF_ETH_IPV4_BYTES));
    uint8_t *udp = ip + CBF_ETH_IPV4_BYTES;
    put16(udp, a->src_port);
    put16(udp + 2, a->dst_port);
    put16(udp + 4, (uint16_t)(CBF_ETH_UDP_BYTES + payload_len));
    put16(udp + 6, 0);            /* no UDP checksum: IPv4 allows it, and spead2 sends none */
    return CBF_ETH_UDP_HEADERS + payload_len;
}

const char *cbf_eth_reason_name(cbf_eth_reason r)
{
    static const char *const names[CBF_ETH_N_REASONS] = {"ok", "truncated", "not_ipv4", "not_udp",
                                                          "fragment", "bad_length"};
    return (unsigned)r < CBF_ETH_N_REASONS ? names[r] : "unknown";
}

cbf_eth_reason cbf_eth_udp_parse(cbf_eth_link link, const uint8_t *f, size_t len, cbf_eth_udp_info *out)
{
    size_t l2 = link == CBF_ETH_LINK_ETHERNET ? 14 : link == CBF_ETH_LINK_LINUX_SLL ? 16 : 0;
    if (len < l2 + CBF_ETH_IPV4_BYTES)
        return CBF_ETH_TRUNCATED;
    if (l2) {
        uint16_t et = be16(f + l2 - 2);
        if (link == CBF_ETH_LINK_ETHERNET && et == 0x8100) {   /* one VLAN tag */
            l2 += 4;
            if (len < l2 + CBF_ETH_IPV4_BYTES)
                return CBF_ETH_TRUNCATED;
            et = be16(f + l2 - 2);
        }
        if (et != 0x0800)
            return CBF_ETH_NOT_IPV4;
    }
    const uint8_t *ip = f + l2;
    size_t ihl = (size_t)(ip[0] & 0x0f) * 4;
    if ((ip[0] >> 4) != 4)
        return CBF_ETH_NOT_IPV4;
    if (ihl < CBF_ETH_IPV4_BYTES)
        return CBF_ETH_BAD_LENGTH;
    if (ip[9] != 17)
        return CBF_ETH_NOT_UDP;
    if ((be16(ip + 6) & 0x3fff) != 0)   /* more-fragments flag or an offset */
        return CBF_ETH_FRAGMENT;
    size_t total = be16(ip + 2);
    if (total < ihl + CBF_ETH_UDP_BYTES)
        return CBF_ETH_BAD_LENGTH;
    if (l2 + total > len)   /* Ethernet pads short frames, so more is fine; less is not */
        return CBF_ETH_TRUNCATED;
    const uint8_t *udp = ip + ihl;
    size_t ulen = be16(udp + 4);
    if (ulen < CBF_ETH_UDP_BYTES || ulen > total - ihl)
        return CBF_ETH_BAD_LENGTH;
    *out = (cbf_eth_udp_info){.src_ip = be32(ip + 12), .dst_ip = be32(ip + 16),
                              .src_port = be16(udp), .dst_port = be16(udp + 2),
                              .ip_header = ip, .ip_header_len = ihl,
                              .payload = udp + CBF_ETH_UDP_BYTES, .len = ulen - CBF_ETH_UDP_BYTES};
    return CBF_ETH_OK;
}

/* ---- Interfaces ---------------------------------------------------------- */

int cbf_eth_iface_by_addr(const char *addr, char *name, size_t cap, uint32_t *ip, cbf_error *err)
{
    struct in_addr want;
    if (inet_pton(AF_INET, addr, &want) != 1)
        return cbf_error_set(err, CBF_ECONFIG, "interface '%s' is not an IPv4 address", addr);
    struct ifaddrs *list;
    if (getifaddrs(&list))
        return cbf_error_set(err, CBF_EIO, "getifaddrs failed");
    int found = 0;
    for (struct ifaddrs *i = list; i && !found; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
            ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == want.s_addr) {
            snprintf(name, cap, "%s", i->ifa_name);
            found = 1;
        }
    freeifaddrs(list);
    if (!found)
        return cbf_error_set(err, CBF_ECONFIG, "no network interface has address %s", addr);
    if (ip)
        *ip = ntohl(want.s_addr);
    return 0;
}

bool cbf_eth_parse_mac(const char *text, uint8_t mac[6])
{
    unsigned v[6];
    char tail;
    if (sscanf(text, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) < 6)
        return false;
    if (strlen(text) < 17 || (text[17] && text[17] != '\n' && text[17] != ' '))
        return false;
    for (int i = 0; i < 6; i++)
        mac[i] = (uint8_t)v[i];
    return true;
}

int cbf_eth_iface_mac(const char *sysfs, const char *name, uint8_t mac[6], cbf_error *err)
{
    char path[256], text[64] = "";
    snprintf(path, sizeof path, "%s/class/net/%s/address", sysfs, name);
    FILE *f = fopen(path, "r");
    bool ok = f && fgets(text, sizeof text, f) && cbf_eth_parse_mac(text, mac);
    if (f)
        fclose(f);
    if (!ok)
        return cbf_error_set(err, CBF_EIO, "interface %s: no MAC address in %s", name, path);
    return 0;
}

int cbf_eth_arp_lookup(const char *table, const char *name, uint32_t ip, uint8_t mac[6], cbf_error *err)
{
    /* "IP address  HW type  Flags  HW address  Mask  Device", one entry a
     * line; flags 0x2 (ATF_COM) marks a complete entry. */
    const char *line = strchr(table, '\n');
    while (line && *++line) {
        char addr[64], hw[64], mask[64], dev[64];
        unsigned type, flags;
        struct in_addr a;
        if (sscanf(line, "%63s 0x%x 0x%x %63s %63s %63s", addr, &type, &flags, hw, mask, dev) == 6 &&
            inet_pton(AF_INET, addr, &a) == 1 && ntohl(a.s_addr) == ip && !strcmp(dev, name) &&
            (flags & 0x2) && cbf_eth_parse_mac(hw, mac))
            return 0;
        line = strchr(line, '\n');
    }
    char text[INET_ADDRSTRLEN];
    struct in_addr a = {htonl(ip)};
    inet_ntop(AF_INET, &a, text, sizeof text);
    return cbf_error_set(err, CBF_ENOTSUP,
                         "no ARP entry for %s on %s: the raw-packet path cannot find its MAC address "
                         "(send it one packet through the kernel first, or use a multicast destination)",
                         text, name);
}
