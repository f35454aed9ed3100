/* resources.c: first-fit blocks from the configured ranges (resources.h),
 * one byte per group or port. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "resources.h"

struct cbf_resources {
    pthread_mutex_t mu;
    cbf_range range[CBF_RES_KINDS];
    unsigned char *used[CBF_RES_KINDS];
};

static const char *const what[CBF_RES_KINDS] = {"multicast groups", "UDP ports", "engine katcp ports",
                                                "product katcp ports"};
static const char *const key[CBF_RES_KINDS] = {"ranges.multicast", "ranges.udp_ports", "ranges.engine_katcp",
                                               "ranges.product_katcp"};

int cbf_resources_create(const cbf_controller_config *c, cbf_resources **out, cbf_error *err)
{
    cbf_resources *r = calloc(1, sizeof *r);
    if (!r)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    pthread_mutex_init(&r->mu, NULL);
    r->range[CBF_RES_GROUPS] = c->groups;
    r->range[CBF_RES_UDP_PORTS] = c->udp_ports;
    r->range[CBF_RES_ENGINE_KATCP] = c->engine_katcp;
    r->range[CBF_RES_PRODUCT_KATCP] = c->product_katcp;
    for (int k = 0; k < CBF_RES_KINDS; k++)
        if (!(r->used[k] = calloc((size_t)(r->range[k].last - r->range[k].first) + 1, 1))) {
            cbf_resources_free(r);
            return cbf_error_set(err, CBF_ENOMEM, "out of memory");
        }
    *out = r;
    return 0;
}

void cbf_resources_free(cbf_resources *r)
{
    if (!r)
        return;
    for (int k = 0; k < CBF_RES_KINDS; k++)
        free(r->used[k]);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

int cbf_resources_take(cbf_resources *r, cbf_res_kind k, int count, unsigned *first, cbf_error *err)
{
    *first = 0;
    if (count <= 0)
        return 0;
    pthread_mutex_lock(&r->mu);
    unsigned size = r->range[k].last - r->range[k].first + 1, run = 0;
    for (unsigned i = 0; i < size; i++) {
        run = r->used[k][i] ? 0 : run + 1;
        if (run == (unsigned)count) {
            unsigned start = i + 1 - run;
            memset(r->used[k] + start, 1, run);
            pthread_mutex_unlock(&r->mu);
            *first = r->range[k].first + start;
            return 0;
        }
    }
    int used = 0;
    for (unsigned i = 0; i < size; i++)
        used += r->used[k][i];
    pthread_mutex_unlock(&r->mu);
    return cbf_error_set(err, CBF_EAGAIN, "no %d consecutive free %s in %s (%s): %u of them, %d taken by the "
                         "products configured now", count, what[k], key[k], r->range[k].where, size, used);
}

void cbf_resources_give(cbf_resources *r, cbf_res_kind k, unsigned first, int count)
{
    if (!r || count <= 0)
        return;
    pthread_mutex_lock(&r->mu);
    unsigned start = first - r->range[k].first;
    memset(r->used[k] + start, 0, (size_t)count);
    pthread_mutex_unlock(&r->mu);
}

int cbf_resources_used(cbf_resources *r, cbf_res_kind k)
{
    pthread_mutex_lock(&r->mu);
    int n = 0;
    for (unsigned i = 0; i <= r->range[k].last - r->range[k].first; i++)
        n += r->used[k][i];
    pthread_mutex_unlock(&r->mu);
    return n;
}
