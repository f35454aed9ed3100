/* stage/netopt.h: the transport parameters every network stage (receiver,
 * sender) declares, and the cbf_net_choice they become, so that the two
 * ends read them alike. Header only: the stage library itself does not
 * link the network layer; a plugin including this has udp_dep. */
#ifndef CBF_STAGE_NETOPT_H
#define CBF_STAGE_NETOPT_H

#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include "cbf/params.h"
#include "udp.h"

/* Three entries of a cbf_param_decl table: transport, fallback and
 * ring_slots; `ring` says which ring ("receive", "send"). */
#define CBF_STAGE_NET_PARAMS(ring)                                                          \
    {.name = "transport", .type = CBF_PARAM_CHOICE, .def = "socket",                        \
     .choices = "socket|ibverbs",                                                          \
     .doc = "socket, or ibverbs raw-packet " ring " queues (an RDMA NIC behind interface)"}, \
    {.name = "fallback", .type = CBF_PARAM_BOOL, .def = "false",                            \
     .doc = "with transport ibverbs: use sockets (logged) when ibverbs is unavailable"},    \
    {.name = "ring_slots", .type = CBF_PARAM_INT, .def = "4096", .has_range = 1, .min = 64, \
     .max = 1 << 20, .doc = "ibverbs: frames in each " ring " ring of registered memory"}

/* The choice those parameters make (strings live as long as p). */
static inline cbf_net_choice cbf_stage_net_choice(const cbf_params *p)
{
    return (cbf_net_choice){.transport = cbf_params_string(p, "transport"),
                            .fallback = cbf_params_bool(p, "fallback"),
                            .where = cbf_params_where(p, "transport")};
}

/* The `affinity` entry of a network stage's table: which CPU core each of
 * its threads runs on (katgpucbf's --recv-affinity / --send-affinity). */
#define CBF_STAGE_AFFINITY_PARAM(what)                                                       \
    {.name = "affinity", .type = CBF_PARAM_INT_LIST, .def = "[]", .has_range = 1, .min = 0,   \
     .max = 65535,                                                                           \
     .doc = "CPU core of each " what " thread, one per thread in order; [] = wherever the "   \
            "kernel puts them"}

/* Reads `affinity` into cores (at most max): the count (0 when none is
 * given), or CBF_ECONFIG naming the parameter when the list does not give
 * one core per thread or names a core this process cannot run on. */
static inline int cbf_stage_affinity(const cbf_params *p, int threads, int *cores, int max, cbf_error *err)
{
    size_t n = cbf_params_len(p, "affinity");
    if (n == 0)
        return 0;
    if (n != (size_t)threads || n > (size_t)max)
        return cbf_error_set(err, CBF_ECONFIG, "%s: %zu cores for %d threads: give one core per thread",
                             cbf_params_where(p, "affinity"), n, threads);
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed))
        CPU_ZERO(&allowed);
    long online = sysconf(_SC_NPROCESSORS_CONF);
    for (size_t i = 0; i < n; i++) {
        int64_t c = cbf_params_int_at(p, "affinity", i);
        if (c >= online || c >= CPU_SETSIZE)
            return cbf_error_set(err, CBF_ECONFIG, "%s: core %lld does not exist (cores 0..%ld here)",
                                 cbf_params_where(p, "affinity"), (long long)c, online - 1);
        if (!CPU_ISSET((int)c, &allowed))
            return cbf_error_set(err, CBF_ECONFIG, "%s: core %lld is not one this process may run on",
                                 cbf_params_where(p, "affinity"), (long long)c);
        cores[i] = (int)c;
    }
    return (int)n;
}

/* Pins the calling thread to core. */
static inline int cbf_stage_pin_thread(int core, cbf_error *err)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core, &set);
    int e = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    return e ? cbf_error_set(err, CBF_EIO, "affinity: cannot run on core %d (error %d)", core, e) : 0;
}

#endif
