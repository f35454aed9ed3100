/* udp.h: UDP sockets for SPEAD streams: endpoints "host:port", unicast or
 * multicast (joined on the interface with the given address), batch I/O
 * through recvmmsg/sendmmsg done by the callers. */
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

/* Receiving socket bound to ep's port (and address, for unicast); a
 * multicast group is joined on the interface whose address is iface.
 * reuseport lets several sockets (threads) share the port. */
int cbf_udp_open_rx(const cbf_udp_endpoint *ep, const char *iface, size_t rcvbuf, bool reuseport,
                    int *fd_out, cbf_error *err);
/* Sending socket: multicast leaves through iface with the given TTL (and
 * loops back, so engines on one host hear each other). */
int cbf_udp_open_tx(const char *iface, int ttl, size_t sndbuf, int *fd_out, cbf_error *err);

/* transport is "socket" or "ibverbs". Returns 0 when the socket path is
 * to be used (asked for, or ibverbs unavailable and fallback allowed, which
 * is logged), else CBF_ENOTSUP naming what ibverbs lacks; where is the YAML
 * place of the parameter. */
int cbf_net_choose_transport(const char *transport, bool fallback, const char *iface,
                             const char *where, cbf_error *err);

#ifdef __cplusplus
}
#endif
#endif
