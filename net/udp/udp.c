#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "udp.h"

int cbf_udp_parse_endpoint(const char *text, const char *what, cbf_udp_endpoint *out, cbf_error *err)
{
    char host[64];
    const char *colon = strrchr(text, ':');
    size_t hl = colon ? (size_t)(colon - text) : 0;
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || hl == 0 || hl >= sizeof host || !end || *end || end == colon + 1 || port < 1 ||
        port > 65535)
        return cbf_error_set(err, CBF_ECONFIG, "%s: '%s' is not an endpoint a.b.c.d:port", what, text);
    memcpy(host, text, hl);
    host[hl] = '\0';
    memset(out, 0, sizeof(*out));
    out->addr.sin_family = AF_INET;
    out->addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &out->addr.sin_addr) != 1)
        return cbf_error_set(err, CBF_ECONFIG, "%s: '%s' is not an IPv4 address", what, host);
    out->multicast = IN_MULTICAST(ntohl(out->addr.sin_addr.s_addr));
    return 0;
}

int cbf_udp_parse_endpoints(const char *text, const char *what, cbf_udp_endpoint *out, int max,
                            cbf_error *err)
{
    int n = 0;
    const char *p = text;
    while (*p) {
        size_t len = strcspn(p, ",");
        char one[96];
        if (len == 0 || len >= sizeof one)
            return cbf_error_set(err, CBF_ECONFIG, "%s: bad list '%s'", what, text);
        if (n == max)
            return cbf_error_set(err, CBF_ECONFIG, "%s: more than %d endpoints", what, max);
        memcpy(one, p, len);
        one[len] = '\0';
        int rc = cbf_udp_parse_endpoint(one + strspn(one, " "), what, &out[n++], err);
        if (rc)
            return rc;
        p += len + (p[len] == ',');
    }
    if (n == 0)
        return cbf_error_set(err, CBF_ECONFIG, "%s: no endpoint given", what);
    return n;
}

bool cbf_udp_endpoint_takes(const cbf_udp_endpoint *ep, uint32_t dst_ip, uint16_t dst_port)
{
    uint32_t a = ntohl(ep->addr.sin_addr.s_addr);
    return dst_port == ntohs(ep->addr.sin_port) && (a == INADDR_ANY || a == dst_ip);
}

static int iface_addr(const char *iface, struct in_addr *a, cbf_error *err)
{
    if (inet_pton(AF_INET, iface, a) != 1)
        return cbf_error_set(err, CBF_ECONFIG, "interface '%s' is not an IPv4 address", iface);
    return 0;
}

int cbf_udp_open_rx(const cbf_udp_endpoint *ep, const char *iface, size_t rcvbuf, bool reuseport,
                    int *fd_out, cbf_error *err)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1;
    if (fd < 0)
        return cbf_error_set(err, CBF_EIO, "socket: %s", strerror(errno));
    int buf = (int)rcvbuf;
    /* The kernel may cap the buffer (net.core.rmem_max): not an error, but
     * drops come sooner; cbf_udp callers report the size they got. */
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one)) {
        close(fd);
        return cbf_error_set(err, CBF_EIO, "SO_REUSEPORT: %s", strerror(errno));
    }
    struct sockaddr_in bind_to = ep->addr;   /* a group is bound by its address: only its packets */
    char text[32];
    inet_ntop(AF_INET, &ep->addr.sin_addr, text, sizeof text);
    if (bind(fd, (struct sockaddr *)&bind_to, sizeof bind_to)) {
        int e = errno;
        close(fd);
        return cbf_error_set(err, CBF_EIO, "bind %s:%d: %s", text, ntohs(ep->addr.sin_port), strerror(e));
    }
    if (ep->multicast) {
        struct ip_mreq m = {.imr_multiaddr = ep->addr.sin_addr};
        int rc = iface_addr(iface, &m.imr_interface, err);
        if (rc || setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof m)) {
            int e = errno;
            close(fd);
            return rc ? rc : cbf_error_set(err, CBF_EIO, "joining %s on interface %s: %s", text, iface,
                                           strerror(e));
        }
    }
    *fd_out = fd;
    return 0;
}

int cbf_udp_spread_packets(int fd, unsigned n, cbf_error *err)
{
    /* The kernel asks the group's program which socket takes each datagram:
     * a random index, so load follows packets, not the hash of a few flows
     * (8 flows over 8 sockets by hash leave about 3 sockets idle). */
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(SKF_AD_OFF + SKF_AD_RANDOM)),
        BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, n),
        BPF_STMT(BPF_RET | BPF_A, 0),
    };
    struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
    if (n == 0 || setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog))
        return cbf_error_set(err, CBF_EIO, "spreading packets over %u sockets (SO_ATTACH_REUSEPORT_CBPF): %s",
                             n, n ? strerror(errno) : "no sockets");
    return 0;
}

int cbf_udp_open_tx(const char *iface, int ttl, size_t sndbuf, int *fd_out, cbf_error *err)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1;
    if (fd < 0)
        return cbf_error_set(err, CBF_EIO, "socket: %s", strerror(errno));
    int buf = (int)sndbuf;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    struct in_addr a;
    int rc = iface_addr(iface, &a, err);
    if (!rc && (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &a, sizeof a) ||
                setsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl) ||
                setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &one, sizeof one)))
        rc = cbf_error_set(err, CBF_EIO, "multicast options on interface %s: %s", iface, strerror(errno));
    /* Unicast leaves from the interface too: bind the source address. */
    struct sockaddr_in src = {.sin_family = AF_INET, .sin_addr = a};
    if (!rc && bind(fd, (struct sockaddr *)&src, sizeof src))
        rc = cbf_error_set(err, CBF_EIO, "bind to interface %s: %s", iface, strerror(errno));
    if (rc) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return 0;
}
