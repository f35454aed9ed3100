/* stage/netopt.h: the transport parameters every network stage (receiver,
 * sender) declares, and the cbf_net_choice they become, so that the two
 * ends read them alike. Header only: the stage library itself does not
 * link the network layer; a plugin including this has udp_dep. */
#ifndef CBF_STAGE_NETOPT_H
#define CBF_STAGE_NETOPT_H

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

#endif
