/* tcp.h (private to libcbf): TCP addresses as the engine settings and the
 * katcp server and client write them (tcp.c): "PORT" (on 127.0.0.1),
 * "HOST:PORT" or "[IPv6]:PORT". Shared by the katcp server and client and
 * the Prometheus front end. */
#ifndef CBF_TCP_H
#define CBF_TCP_H

#include <stdbool.h>
#include <stddef.h>

#include "cbf/error.h"

#define CBF_TCP_HIDDEN __attribute__((visibility("hidden")))

/* Host and port of text: 0, or -1 when it is none of the forms. */
CBF_TCP_HIDDEN int cbf_tcp_split(const char *text, char *host, size_t hn, char *port, size_t pn);

/* Binds and listens on text (port 0 takes a free one, read back after
 * the bind). label names what listens ("engine.katcp"), where (NULL: no
 * place) where its address was given, in errors "WHERE: LABEL: ...". *fd,
 * and the bound address in addr ("h:p", "[h]:p"). exposes (what a stranger
 * could do through it), when not NULL, is said in a warning when the
 * address is beyond loopback. CBF_ECONFIG for a malformed address, CBF_EIO. */
CBF_TCP_HIDDEN int cbf_tcp_listen(const char *text, const char *label, const char *where, int backlog,
                                  const char *exposes, int *fd, bool *v6, char *addr, size_t addr_n,
                                  cbf_error *err);

#endif
