#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include "ibv.h"

static int interface_of(const char *addr, char *name, size_t cap, cbf_error *err)
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
        return cbf_error_set(err, CBF_ECONFIG, "ibverbs: no network interface has address %s", addr);
    return 0;
}

int cbf_ibv_probe(const char *iface_addr, char *device, size_t cap, cbf_error *err)
{
    char ifname[IF_NAMESIZE + 1], path[128];
    int rc = interface_of(iface_addr, ifname, sizeof ifname, err);
    if (rc)
        return rc;
    snprintf(path, sizeof path, "/sys/class/net/%s/device/infiniband", ifname);
    DIR *d = opendir(path);
    struct dirent *e = NULL;
    while (d && (e = readdir(d)) && e->d_name[0] == '.')
        ;
    if (!d || !e) {
        if (d)
            closedir(d);
        return cbf_error_set(err, CBF_ENOTSUP,
                             "ibverbs: interface %s (%s) is not on an RDMA NIC (no %s); "
                             "use transport: socket, or allow fallback", ifname, iface_addr, path);
    }
    snprintf(device, cap, "%s", e->d_name);
    closedir(d);
    int n = 0;
    struct ibv_device **devs = ibv_get_device_list(&n);
    int listed = 0;
    for (int i = 0; devs && i < n && !listed; i++)
        listed = strcmp(ibv_get_device_name(devs[i]), device) == 0;
    if (devs)
        ibv_free_device_list(devs);
    if (!listed)
        return cbf_error_set(err, CBF_ENOTSUP,
                             "ibverbs: interface %s has RDMA device %s but libibverbs does not list it "
                             "(%d devices; is the provider library installed?)", ifname, device, n);
    return 0;
}
