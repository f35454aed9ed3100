/* sized.c: what --out and --check plan with where a description leaves it
 * to its sizing (docs/scaling.md, "Planning from the sizing"). The shipped
 * descriptions (pipelines/plans/) size an array rather than list its hosts:
 * array.xengines 0 and no `hosts` section. They plan on what --figures
 * counts, so the plan --out writes is the array the figures describe:
 * array.xengines 0 becomes --figures' X-engine count, and without `hosts`
 * the hosts are --figures' F-engine and X-engine hosts (f0..., x0...), a
 * beam receiver b0 with beams, a host per simulated digitiser (d0...),
 * each with the `sizing` host's GPUs and NICs, their addresses consecutive
 * from sizing.first_interface (the launcher may set the real ones: the
 * Slurm script's CBF_DATA_IFACE). */
#include <stdio.h>
#include <string.h>

#include "array.h"

typedef struct maker {
    array_desc *d;
    unsigned next_if;   /* the next interface address, host order */
    cbf_error *err;
} maker;

static int add_host(maker *m, char prefix, int i, unsigned roles, int gpus, int nics)
{
    array_desc *d = m->d;
    if (d->n_hosts == ARRAY_MAX_HOSTS)
        return cbf_error_set(m->err, CBF_ECONFIG, "%s: sizing: the plan needs more than %d hosts", d->where_sizing,
                             ARRAY_MAX_HOSTS);
    if (nics > ARRAY_MAX_IFS)
        return cbf_error_set(m->err, CBF_ECONFIG, "%s: sizing.nics_per_host: %d; a planned host has at most %d",
                             d->where_sizing, nics, ARRAY_MAX_IFS);
    array_host *h = &d->hosts[d->n_hosts++];
    memset(h, 0, sizeof *h);
    snprintf(h->name, sizeof h->name, "%c%d", prefix, i);
    h->roles = roles;
    h->gpus = gpus;
    h->nic_gbps = d->size_nic_gbps;
    snprintf(h->where, sizeof h->where, "%s (sized)", d->where_sizing);
    for (int k = 0; k < nics; k++) {
        unsigned a = m->next_if++;
        if (!m->next_if)   /* a was 255.255.255.255: no address after it */
            return cbf_error_set(m->err, CBF_ECONFIG, "%s: sizing.first_interface: the %d hosts' addresses "
                                 "run past 255.255.255.255", d->where_sizing, d->n_hosts);
        snprintf(h->ifs[k], sizeof h->ifs[k], "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
    }
    h->n_ifs = nics;
    return 0;
}

static int make_hosts(array_desc *d, const array_size *s, cbf_error *err)
{
    if (!d->size_first_if)
        return cbf_error_set(err, CBF_ECONFIG, "%s: sizing.first_interface is not given: without a 'hosts' "
                             "section the plan's hosts are the sized ones, and their first data-interface "
                             "address is needed", d->where_sizing);
    maker m = {d, d->size_first_if, err};
    int g = d->size_gpus_per_host, nics = d->size_nics_per_host, rc = 0;
    int x_hosts = (d->xengines + g - 1) / g;
    for (int i = 0; !rc && i < s->f_hosts; i++)
        rc = add_host(&m, 'f', i, ROLE_FENG, g, nics);
    for (int i = 0; !rc && i < x_hosts; i++)
        rc = add_host(&m, 'x', i, ROLE_XENG, g, nics);
    if (!rc && d->beams)
        rc = add_host(&m, 'b', 0, ROLE_BEAMS, 0, 1);
    for (int i = 0; !rc && i < d->digitisers; i++)
        rc = add_host(&m, 'd', i, ROLE_DIGITISER, 0, nics);
    d->hosts_sized = 1;
    return rc;
}

int array_desc_complete(array_desc *d, cbf_error *err)
{
    if (d->xengines && d->n_hosts)
        return 0;
    array_size s;
    int rc = array_size_make(d, &s, err);
    if (rc && !d->xengines)
        return cbf_error_prefix(err, "%s: array.xengines is 0, which leaves the count to the sizing",
                                d->where_xengines);
    if (rc)
        return cbf_error_prefix(err, "%s: section 'hosts' is missing, which plans on the sized hosts",
                                d->where_root);
    if (!d->xengines)
        d->xengines = s.xengines;
    return d->n_hosts ? 0 : make_hosts(d, &s, err);
}
