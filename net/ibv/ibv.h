/* ibv.h: finding the RDMA NIC behind an interface address, for the
 * ibverbs raw-packet path. Only the probe exists so far: the receive and
 * send queues themselves are not written (see docs/network.md), so a
 * pipeline that asks for ibverbs gets a clear error, or the socket path
 * when it allows the fallback. */
#ifndef CBF_IBV_H
#define CBF_IBV_H

#include <stddef.h>
#include "cbf/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Finds the network interface that has IPv4 address iface_addr and the
 * RDMA device behind it (sysfs: /sys/class/net/<if>/device/infiniband/),
 * and checks that libibverbs lists that device. Returns 0 with the device
 * name in device, or CBF_ENOTSUP / CBF_ECONFIG with a message naming what
 * is missing (no such interface, no RDMA device on it, libibverbs sees no
 * device). */
int cbf_ibv_probe(const char *iface_addr, char *device, size_t cap, cbf_error *err);

#ifdef __cplusplus
}
#endif
#endif
