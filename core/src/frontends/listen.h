/* listen.h (private to libcbf): a listening TCP socket for an address the
 * engine settings name (listen.c), shared by the katcp and Prometheus
 * front ends. */
#ifndef CBF_LISTEN_H
#define CBF_LISTEN_H

#include <stdbool.h>
#include <stddef.h>

#include "cbf/error.h"

#ifndef CBF_FE_HIDDEN
#define CBF_FE_HIDDEN __attribute__((visibility("hidden")))
#endif

/* Binds and listens on text ("PORT" on 127.0.0.1, "HOST:PORT", "[IPv6]:PORT")
 * for engine key `key` (where: its YAML place, for errors). *fd, and the
 * bound address in addr ("h:p", "[h]:p"). exposes (what a stranger could
 * do through it), when not NULL, is said in a warning when the address is
 * beyond loopback. CBF_ECONFIG for a malformed address, CBF_EIO. */
CBF_FE_HIDDEN int cbf_fe_tcp_listen(const char *text, const char *key, const char *where, int backlog,
                                    const char *exposes, int *fd, bool *v6, char *addr, size_t addr_n,
                                    cbf_error *err);

#endif
