/* tcp.c: TCP addresses (tcp.h) split, and listened on for the engine keys
 * that name one (`prometheus:`, `katcp:`) and any katcp server: "PORT" (on
 * 127.0.0.1), "HOST:PORT" or "[IPv6]:PORT"; port 0 takes a free one, read
 * back after the bind. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cbf/log.h"
#include "tcp.h"

int cbf_tcp_split(const char *text, char *host, size_t hn, char *port, size_t pn)
{
    const char *p;
    if (text[0] && strspn(text, "0123456789") == strlen(text)) {
        snprintf(host, hn, "127.0.0.1");
        p = text;
    } else if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close || close[1] != ':')
            return -1;
        snprintf(host, hn, "%.*s", (int)(close - text - 1), text + 1);
        p = close + 2;
    } else {
        const char *colon = strrchr(text, ':');
        if (!colon || memchr(text, ':', (size_t)(colon - text)))
            return -1;   /* none, or a bare IPv6 address: it needs its brackets */
        snprintf(host, hn, "%.*s", (int)(colon - text), text);
        p = colon + 1;
    }
    if (!host[0] || !*p || strspn(p, "0123456789") != strlen(p) || strlen(p) > 5 || atol(p) > 65535)
        return -1;
    snprintf(port, pn, "%s", p);
    return 0;
}

static bool ls_loopback(const struct sockaddr_storage *sa)
{
    if (sa->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return false;
}

int cbf_tcp_listen(const char *text, const char *label, const char *where, int backlog, const char *exposes,
                   int *fd, bool *v6, char *addr, size_t addr_n, cbf_error *err)
{
    *fd = -1;
    char host[256], port[8], at[1024];
    snprintf(at, sizeof at, "%s%s%s", where ? where : "", where ? ": " : "", label);
    if (cbf_tcp_split(text, host, sizeof host, port, sizeof port))
        return cbf_error_set(err, CBF_ECONFIG, "%s: '%s' is not PORT, HOST:PORT or [IPv6]:PORT", at, text);
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int grc = getaddrinfo(host, port, &hints, &ai);
    if (grc)
        return cbf_error_set(err, CBF_ECONFIG, "%s: host '%s': %s", at, host, gai_strerror(grc));
    int s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    int one = 1, rc = CBF_OK;
    if (s < 0)
        rc = cbf_error_set(err, CBF_EIO, "%s: socket: %s", at, strerror(errno));
    else if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
             bind(s, ai->ai_addr, ai->ai_addrlen) || listen(s, backlog))
        rc = cbf_error_set(err, CBF_EIO, "%s: cannot listen on %s port %s: %s", at, host, port,
                           strerror(errno));
    *v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    if (rc) {
        if (s >= 0)
            close(s);
        return rc;
    }
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    char h[128] = "?", sv[8] = "?";
    if (!getsockname(s, (struct sockaddr *)&sa, &sl))
        getnameinfo((struct sockaddr *)&sa, sl, h, sizeof h, sv, sizeof sv, NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(addr, addr_n, *v6 ? "[%s]:%s" : "%s:%s", h, sv);
    if (exposes && !ls_loopback(&sa))
        cbf_log_warn("%s listens on %s, beyond this host's loopback: anyone who can reach it "
                     "can %s; bind 127.0.0.1:PORT unless a firewall guards it", label, addr, exposes);
    *fd = s;
    return CBF_OK;
}
