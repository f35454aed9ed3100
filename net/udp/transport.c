/* Choosing between the socket path and ibverbs. Only sockets carry data
 * today; asking for ibverbs gets a message naming what is missing (the
 * build, the NIC, or the raw-packet queues themselves), or a logged
 * fallback to sockets when the pipeline allows it. */
#include <stdio.h>
#include <string.h>
#include "cbf/log.h"
#include "udp.h"
#ifdef CBF_HAVE_IBVERBS
#include "ibv.h"
#endif

int cbf_net_choose_transport(const char *transport, bool fallback, const char *iface,
                             const char *where, cbf_error *err)
{
    if (strcmp(transport, "ibverbs") != 0)
        return 0;
    cbf_error why = {0};
#ifdef CBF_HAVE_IBVERBS
    char dev[64];
    if (cbf_ibv_probe(iface, dev, sizeof dev, &why) == 0)
        cbf_error_set(&why, CBF_ENOTSUP,
                      "ibverbs: RDMA device %s found, but the ibverbs raw-packet queues are not implemented "
                      "in this version of cbf", dev);
#else
    (void)iface;
    cbf_error_set(&why, CBF_ENOTSUP,
                  "ibverbs: cbf was built without libibverbs (meson setup -Dibverbs=enabled, with "
                  "libibverbs-dev installed)");
#endif
    if (fallback) {
        cbf_log_warn("%s: %s; falling back to sockets", where, why.msg);
        return 0;
    }
    return cbf_error_set(err, CBF_ENOTSUP, "%s: %s", where, why.msg);
}
