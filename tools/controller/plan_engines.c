/* plan_engines.c: the engines of a product's plan as the launcher and the
 * product controller need them (plan.h): katsdpcontroller's task name,
 * the host and katcp address, the files, and what each carries; where
 * each stream goes; and the plan's folder. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cbf/control.h"
#include "plan_priv.h"

static const char *kind_name(int kind)
{
    return kind == PROC_DIGITISER ? "dsim" : kind == PROC_FENG ? "feng" : kind == PROC_XENG ? "xeng" : "beams";
}

static void append(char *buf, size_t n, const char *fmt, const char *s)
{
    size_t l = strlen(buf);
    snprintf(buf + l, n > l ? n - l : 0, fmt, s);
}

/* The inputs engine e (of set t) carries, and the same in words. A dsim's
 * are set 0's channeliser's inputs that read its streams (the product
 * controller flags every channeliser's from its digitiser antennas). */
static int carried(cbf_product_plan *pl, const cbf_plan_set *t, cbf_plan_engine *e, const array_proc *q,
                   cbf_error *err)
{
    const array_desc *d = t->desc;
    const cbf_product_acv *a = &t->acv->u.acv;
    if (!(e->inputs = calloc((size_t)a->n_inputs, sizeof *e->inputs)))
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    for (int i = 0; i < a->n_inputs; i++) {
        int mine = q->kind == PROC_FENG ? i / 2 == q->index
                 : q->kind == PROC_DIGITISER ? d->input_streams[i] / 2 >= q->first &&
                                               d->input_streams[i] / 2 < q->first + q->count
                                             : 0;
        if (mine)
            e->inputs[e->n_inputs++] = i;
    }
    if (q->kind == PROC_XENG) {
        e->first_channel = q->first;
        e->n_channels = q->count;
        snprintf(e->carries, sizeof e->carries, "channels %d to %d of %s", q->first, q->first + q->count - 1,
                 t->acv->name);
        return 0;
    }
    if (q->kind == PROC_DIGITISER) {   /* its streams: digitiser streams 2k, 2k + 1 of its antennas */
        e->dig_first = q->first;
        e->dig_count = q->count;
        snprintf(e->carries, sizeof e->carries, "digitiser streams");
        const cbf_product *p = pl->product;
        for (int i = 0; i < p->n_streams; i++)
            if (pl->dig_stream[i] >= 0 && pl->dig_stream[i] / 2 >= q->first &&
                pl->dig_stream[i] / 2 < q->first + q->count)
                append(e->carries, sizeof e->carries, " %s", p->streams[i].name);
    }
    append(e->carries, sizeof e->carries, "%s", q->kind == PROC_DIGITISER ? ", read by inputs" : "inputs");
    for (int i = 0; i < e->n_inputs; i++)
        append(e->carries, sizeof e->carries, i ? ", %s" : " %s", a->input_labels[e->inputs[i]]);
    if (!e->n_inputs)
        append(e->carries, sizeof e->carries, "%s", " (none)");
    if (q->kind == PROC_FENG && pl->n_sets > 1)
        append(e->carries, sizeof e->carries, " of %s", t->acv->name);
    return 0;
}

/* katsdpcontroller's names: sim.ANTENNA.RATE (RATE as Python prints a
 * float), f.CHANNELISER.i, xb.CORRELATOR.i. */
static void task_name(const cbf_product_plan *pl, const cbf_plan_set *t, const array_proc *q, char *buf,
                      size_t n)
{
    if (q->kind == PROC_FENG) {
        snprintf(buf, n, "f.%s.%d", t->acv->name, q->index);
    } else if (q->kind == PROC_XENG) {
        snprintf(buf, n, "xb.%s.%d", t->bcp->name, q->index);
    } else {
        const cbf_product *p = pl->product;
        char rate[40];   /* a digitiser no stream names (none is planned so) */
        cbf_format_repr(t->desc->adc_sample_rate, rate, sizeof rate);
        snprintf(buf, n, "sim.?.%s", rate);
        for (int i = 0; i < p->n_streams; i++)
            if (pl->dig_stream[i] == 2 * q->first)
                cbf_product_dsim_task(&p->streams[i].u.dig, buf, n);
    }
}

static int streams(cbf_product_plan *pl, cbf_error *err)
{
    const cbf_product *p = pl->product;
    const array_group dig = pl->sets[0].desc->dig;
    if (!(pl->streams = calloc((size_t)p->n_streams, sizeof *pl->streams)))
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    for (int i = 0; i < p->n_streams; i++) {
        const cbf_product_stream *s = &p->streams[i];
        cbf_plan_stream *ps = &pl->streams[pl->n_streams++];
        ps->stream = s;
        int k = pl->dig_stream[i];
        const cbf_plan_set *t = cbf_product_plan_set_of(pl, s);
        if (k >= 0) {
            ps->first = (array_group){dig.addr + (unsigned)k, dig.port, 1};
            ps->count = 1;
        } else if (t && s == t->acv) {
            ps->first = t->desc->feng;
            ps->count = t->desc->xengines;
        } else if (t && s == t->bcp) {
            ps->first = t->desc->vis;
            ps->count = t->desc->xengines;
        } else if (t) {
            for (int b = 0; b < t->n_tacv; b++)
                if (t->tacv[b] == s) {
                    ps->first = (array_group){t->desc->beam.addr + (unsigned)b, t->desc->beam.port, 1};
                    ps->count = 1;
                }
        }
    }
    return 0;
}

int cbf_plan_engines(cbf_product_plan *pl, cbf_error *err)
{
    int n = 0;
    for (int k = 0; k < pl->n_sets; k++)
        n += pl->sets[k].plan.n_procs;
    if (!(pl->engines = calloc((size_t)n + 1, sizeof *pl->engines)))
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    /* In start order, kind by kind across the sets (every X-engine, then
     * every F-engine, then the dsims): a new kind is a new stage. */
    static const int order[] = {PROC_BEAMS, PROC_XENG, PROC_FENG, PROC_DIGITISER};
    for (int o = 0; o < 4; o++) {
        int first = 1;
        for (int k = 0; k < pl->n_sets; k++) {
            const cbf_plan_set *t = &pl->sets[k];
            for (int i = 0; i < t->plan.n_procs; i++) {
                const array_proc *q = &t->plan.procs[i];
                if (q->kind != order[o])
                    continue;
                const array_host *h = &t->desc->hosts[q->host];
                cbf_plan_engine *e = &pl->engines[pl->n_engines];
                snprintf(e->name, sizeof e->name, "%s", q->name);
                e->kind = q->kind;
                e->kind_name = kind_name(q->kind);
                e->index = q->index;
                e->stage = pl->n_engines ? e[-1].stage + first : 0;
                first = 0;
                e->set = k;
                e->acv = q->kind == PROC_DIGITISER ? NULL : t->acv;
                e->bcp = q->kind == PROC_XENG ? t->bcp : NULL;
                snprintf(e->host, sizeof e->host, "%s", h->name);
                snprintf(e->address, sizeof e->address, "%s", h->control[0] ? h->control : "127.0.0.1");
                snprintf(e->netns, sizeof e->netns, "%s", h->netns);
                e->katcp_port = q->katcp_port;
                e->gpu = q->gpu;
                snprintf(e->pipeline, sizeof e->pipeline, "%s/%s.yaml", pl->dir, q->name);
                snprintf(e->log, sizeof e->log, "%s/%s.log", pl->dir, q->name);
                task_name(pl, t, q, e->task, sizeof e->task);
                pl->n_engines++;
                int rc = carried(pl, t, e, q, err);
                if (rc)
                    return rc;
            }
        }
    }
    pl->n_stages = pl->n_engines ? pl->engines[pl->n_engines - 1].stage + 1 : 0;
    return streams(pl, err);
}

const cbf_plan_stream *cbf_product_plan_stream(const cbf_product_plan *pl, const char *name)
{
    for (int i = 0; i < pl->n_streams; i++)
        if (!strcmp(pl->streams[i].stream->name, name))
            return &pl->streams[i];
    return NULL;
}

/* mkdir -p */
static int make_dirs(const char *path, cbf_error *err)
{
    char p[1100];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0777) && errno != EEXIST)
                return cbf_error_set(err, CBF_EIO, "%s: cannot make the folder: %s", p, strerror(errno));
            *s = '/';
        }
    if (mkdir(p, 0777) && errno != EEXIST)
        return cbf_error_set(err, CBF_EIO, "%s: cannot make the folder: %s", p, strerror(errno));
    return 0;
}

int cbf_product_plan_write(const cbf_product_plan *pl, cbf_error *err)
{
    int rc = make_dirs(pl->dir, err);
    /* the sets' prefixes keep their files apart in the one folder */
    for (int k = 0; !rc && k < pl->n_sets; k++)
        rc = array_write(pl->sets[k].desc, &pl->sets[k].plan, pl->dir, err);
    return rc;
}
