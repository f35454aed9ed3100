/* resources.h: what the controller hands out to products from the ranges
 * of its configuration (config.h): multicast groups, UDP ports, engine and
 * product-controller katcp ports. A product takes consecutive blocks, so
 * two products never share a group or a port, and gives them back when it
 * is deconfigured. Safe to use from several threads. */
#ifndef CBF_CONTROLLER_RESOURCES_H
#define CBF_CONTROLLER_RESOURCES_H

#include "config.h"

typedef enum {
    CBF_RES_GROUPS,          /* multicast groups (IPv4, host order) */
    CBF_RES_UDP_PORTS,
    CBF_RES_ENGINE_KATCP,
    CBF_RES_PRODUCT_KATCP,
    CBF_RES_KINDS
} cbf_res_kind;

typedef struct cbf_resources cbf_resources;

int cbf_resources_create(const cbf_controller_config *c, cbf_resources **out, cbf_error *err);
void cbf_resources_free(cbf_resources *r);
/* count consecutive ones, the lowest block free; *first its first. CBF_EAGAIN
 * naming the range (and its place in the configuration) when none is free. */
int cbf_resources_take(cbf_resources *r, cbf_res_kind k, int count, unsigned *first, cbf_error *err);
/* Gives back a block taken (count 0: nothing). */
void cbf_resources_give(cbf_resources *r, cbf_res_kind k, unsigned first, int count);
/* How many of kind k are taken now. */
int cbf_resources_used(cbf_resources *r, cbf_res_kind k);

#endif
