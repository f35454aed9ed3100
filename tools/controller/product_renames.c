/* product_renames.c: the engines' sensors under the product's stream names,
 * as katsdpcontroller's generator renames them (_make_fgpu, _make_xbgpu's
 * sensor_renames) and aggregates them (its SumSensor, SyncSensor and
 * LatestSensor over the tasks' sensors).
 *
 * An F-engine's per-input sensors become ACV.LABEL.NAME (its input0 and
 * input1 the labels of the two inputs it carries, engine-level ones
 * replicated to both); an X/B-engine i's become STREAM.i.NAME for the
 * correlator and each beam; what katsdpcontroller hides per engine
 * (rx.synchronised, xeng-clip-cnt, and the beams' weight, delay,
 * quantiser-gain and beng-clip-cnt) feeds one product-level sensor per
 * stream instead. TASK.NAME stays beside each (product_mirror.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "product_ctl_priv.h"

typedef enum { PER_INPUT, PER_ENGINE, AGG_SUM, AGG_SYNC, AGG_LATEST } rename_how;

/* The mapping. from: the engine's name, "%s" standing for the input
 * (input0, input1) or the beam (pc_beam_name); a name without one is
 * engine-level. to: the product's, after STREAM.LABEL., STREAM.i. or (an
 * aggregate) STREAM. */
static const struct rule {
    int engine;               /* PROC_FENG, PROC_XENG */
    unsigned streams;         /* 1 << cbf_stream_kind: the streams it is renamed into */
    const char *from, *to;
    rename_how how;
    cbf_katcp_type type;      /* an aggregate's */
    const char *description;  /* an aggregate's, katsdpcontroller's words */
} rules[] = {
#define ACV (1u << CBF_STREAM_ACV)
#define BCP (1u << CBF_STREAM_BCP)
#define TACV (1u << CBF_STREAM_TACV)
    {PROC_FENG, ACV, "%s.dig-clip-cnt", "dig-clip-cnt", PER_INPUT, 0, NULL},
    {PROC_FENG, ACV, "%s.dig-rms-dbfs", "dig-rms-dbfs", PER_INPUT, 0, NULL},
    /* katgpucbf's fgpu has them per input; cbf's receiver counts both pols */
    {PROC_FENG, ACV, "rx.timestamp", "rx.timestamp", PER_INPUT, 0, NULL},
    {PROC_FENG, ACV, "rx.unixtime", "rx.unixtime", PER_INPUT, 0, NULL},
    {PROC_FENG, ACV, "rx.missing-unixtime", "rx.missing-unixtime", PER_INPUT, 0, NULL},
    {PROC_FENG, ACV, PC_NODE_EQ ".%s.eq", "eq", PER_INPUT, 0, NULL},
    {PROC_FENG, ACV, PC_NODE_DELAY ".%s.delay", "delay", PER_INPUT, 0, NULL},
    {PROC_FENG, ACV, PC_NODE_EQ ".%s.feng-clip-cnt", "feng-clip-cnt", PER_INPUT, 0, NULL},
    {PROC_FENG, ACV, PC_NODE_EQ ".dither-seed", "dither-seed", PER_INPUT, 0, NULL},
    {PROC_XENG, BCP | TACV, "rx.timestamp", "rx.timestamp", PER_ENGINE, 0, NULL},
    {PROC_XENG, BCP | TACV, "rx.unixtime", "rx.unixtime", PER_ENGINE, 0, NULL},
    {PROC_XENG, BCP | TACV, "rx.missing-unixtime", "rx.missing-unixtime", PER_ENGINE, 0, NULL},
    {PROC_XENG, BCP, PC_NODE_CORR ".chan-range", "chan-range", PER_ENGINE, 0, NULL},
    {PROC_XENG, BCP, PC_NODE_RECV ".rx.synchronised", "rx.synchronised", AGG_SYNC, CBF_KATCP_BOOLEAN,
     "For the latest accumulation, was data present from all F-Engines for all X-Engines"},
    {PROC_XENG, BCP, PC_NODE_REDUCE ".xeng-clip-cnt", "xeng-clip-cnt", AGG_SUM, CBF_KATCP_INTEGER,
     "Number of visibilities that saturated"},
    {PROC_XENG, TACV, "%s.chan-range", "chan-range", PER_ENGINE, 0, NULL},
    /* one sender for every beam of an engine */
    {PROC_XENG, TACV, PC_NODE_BSEND ".tx.next-timestamp", "tx.next-timestamp", PER_ENGINE, 0, NULL},
    {PROC_XENG, TACV, "%s.dither-seed", "dither-seed", PER_ENGINE, 0, NULL},
    {PROC_XENG, TACV, "%s.beng-clip-cnt", "beng-clip-cnt", AGG_SUM, CBF_KATCP_INTEGER,
     "Number of complex samples that saturated"},
    {PROC_XENG, TACV, "%s.quantiser-gain", "quantiser-gain", AGG_LATEST, CBF_KATCP_FLOAT,
     "Non-complex post-summation quantiser gain applied to this beam"},
    {PROC_XENG, TACV, "%s.delay", "delay", AGG_LATEST, CBF_KATCP_STRING,
     "The delay settings of the inputs for this beam"},
    {PROC_XENG, TACV, "%s.weight", "weight", AGG_LATEST, CBF_KATCP_STRING,
     "The summing weights applied to all the inputs of this beam"},
#undef ACV
#undef BCP
#undef TACV
};

/* One product-level sensor made from one sensor of each X/B-engine. */
struct pc_aggregate {
    char *name;
    rename_how how;
    int n_children;
    char *valid;              /* per child: its last reading had a valid status */
    long long *value;         /* per child: the count (sum), 1 or 0 (sync) */
    /* latest: what it shows */
    int have;
    double timestamp;
    char *latest;
    cbf_katcp_status status;
};

void pc_beam_name(const cbf_product *p, const cbf_product_stream *s, char *buf, size_t n)
{
    int b = 0;   /* among its channeliser's beams: the X-engines of that set form them */
    for (int i = 0; i < s->index; i++)
        b += p->streams[i].kind == CBF_STREAM_TACV && p->streams[i].u.tacv.acv == s->u.tacv.acv;
    snprintf(buf, n, "beam%d", b);
}

/* pattern with its "%s" (if any) replaced by part. */
static void expand(char *out, size_t n, const char *pattern, const char *part)
{
    const char *at = strstr(pattern, "%s");
    if (at)
        snprintf(out, n, "%.*s%s%s", (int)(at - pattern), pattern, part, at + 2);
    else
        snprintf(out, n, "%s", pattern);
}

static int grow(pc_engine *e)
{
    if (e->n_renames < e->cap_renames)
        return 0;
    int cap = e->cap_renames ? 2 * e->cap_renames : 32;
    pc_rename *r = realloc(e->renames, (size_t)cap * sizeof *r);
    if (!r)
        return -1;
    e->renames = r;
    e->cap_renames = cap;
    return 0;
}

static int put(pc_engine *e, const char *from, const char *to, int agg, int child)
{
    if (grow(e))
        return -1;
    pc_rename *r = &e->renames[e->n_renames];
    *r = (pc_rename){strdup(from), to ? strdup(to) : NULL, agg, child};
    if (!r->from || (to && !r->to)) {
        free(r->from);
        free(r->to);
        return -1;
    }
    e->n_renames++;
    return 0;
}

/* The index of the aggregate so named, made (and its sensor added) the
 * first time; a negative cbf error code. */
static int aggregate(cbf_product_ctl *pc, const struct rule *ru, const char *name, int n_children, cbf_error *err)
{
    for (int i = 0; i < pc->n_aggs; i++)
        if (!strcmp(pc->aggs[i].name, name))
            return i;
    pc_aggregate *a = realloc(pc->aggs, (size_t)(pc->n_aggs + 1) * sizeof *a);
    if (!a)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    pc->aggs = a;
    a = &pc->aggs[pc->n_aggs];
    *a = (pc_aggregate){.name = strdup(name), .how = ru->how, .n_children = n_children,
                        .valid = calloc((size_t)n_children + 1, 1),
                        .value = calloc((size_t)n_children + 1, sizeof *a->value)};
    if (!a->name || !a->valid || !a->value) {
        free(a->name);
        free(a->valid);
        free(a->value);
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    pc->n_aggs++;
    cbf_katcp_sensor_info in = {name, ru->description, "", ru->type, NULL, 0};
    int rc = cbf_katcp_sensor_add(pc->srv, &in, err);
    /* as katsdpcontroller's before any child: none known (sum), not synchronised */
    if (!rc && ru->how == AGG_SUM)
        rc = cbf_katcp_sensor_set(pc->srv, name, CBF_KATCP_FAILURE, "0", 0, err);
    if (!rc && ru->how == AGG_SYNC)
        rc = cbf_katcp_sensor_set(pc->srv, name, CBF_KATCP_ERROR, "0", 0, err);
    return rc ? rc : pc->n_aggs - 1;
}

/* Every rename of one engine (the F-engine's inputs, or the X/B-engine
 * child of each aggregate). */
static int engine_renames(cbf_product_ctl *pc, int k, int child, int n_xb, cbf_error *err)
{
    const cbf_product *p = pc->rp->product;
    const cbf_product_plan *pl = pc->rp->plan;
    const cbf_plan_engine *pe = &pl->engines[k];
    pc_engine *e = &pc->eng[k];
    char from[256], to[512], part[64];
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        const struct rule *ru = &rules[r];
        if (ru->engine != pe->kind)
            continue;
        for (int s = 0; s < p->n_streams; s++) {
            const cbf_product_stream *st = &p->streams[s];
            if (st->is_input || !(ru->streams & (1u << st->kind)))
                continue;
            if (ru->how == PER_INPUT) {
                if (st != pe->acv)
                    continue;
                for (int j = 0; j < pe->n_inputs; j++) {
                    snprintf(part, sizeof part, "input%d", j);
                    expand(from, sizeof from, ru->from, part);
                    snprintf(to, sizeof to, "%s.%s.%s", st->name, st->u.acv.input_labels[pe->inputs[j]], ru->to);
                    if (put(e, from, to, -1, 0))
                        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
                }
                continue;
            }
            if (st->kind == CBF_STREAM_BCP && st != pe->bcp)
                continue;   /* an X-engine carries its set's one correlator */
            if (st->kind == CBF_STREAM_TACV && st->u.tacv.acv != pe->acv)
                continue;   /* and its set's beams */
            part[0] = '\0';
            if (st->kind == CBF_STREAM_TACV)
                pc_beam_name(p, st, part, sizeof part);
            expand(from, sizeof from, ru->from, part);
            int agg = -1;
            if (ru->how == PER_ENGINE) {
                snprintf(to, sizeof to, "%s.%d.%s", st->name, pe->index, ru->to);
            } else {
                snprintf(to, sizeof to, "%s.%s", st->name, ru->to);
                if ((agg = aggregate(pc, ru, to, n_xb, err)) < 0)
                    return agg;
            }
            if (put(e, from, agg < 0 ? to : NULL, agg, child))
                return cbf_error_set(err, CBF_ENOMEM, "out of memory");
        }
    }
    return 0;
}

int pc_renames_make(cbf_product_ctl *pc, cbf_error *err)
{
    const cbf_product_plan *pl = pc->rp->plan;
    int rc = 0;
    pthread_mutex_lock(&pc->mu);
    /* an X-engine is child `index` of its set's aggregates, of as many as
     * the set has X-engines */
    for (int k = 0; !rc && k < pl->n_engines && k < pc->n_eng; k++)
        rc = engine_renames(pc, k, pl->engines[k].index, pl->sets[pl->engines[k].set].desc->xengines, err);
    pthread_mutex_unlock(&pc->mu);
    return rc;
}

void pc_renames_free(cbf_product_ctl *pc)
{
    for (int k = 0; k < pc->n_eng; k++) {
        pc_engine *e = &pc->eng[k];
        for (int i = 0; i < e->n_renames; i++) {
            free(e->renames[i].from);
            free(e->renames[i].to);
        }
        free(e->renames);
        e->renames = NULL;
        e->n_renames = e->cap_renames = 0;
    }
    for (int i = 0; i < pc->n_aggs; i++) {
        free(pc->aggs[i].name);
        free(pc->aggs[i].valid);
        free(pc->aggs[i].value);
        free(pc->aggs[i].latest);
    }
    free(pc->aggs);
    pc->aggs = NULL;
    pc->n_aggs = 0;
}

static int valid(cbf_katcp_status st)
{
    return st == CBF_KATCP_NOMINAL || st == CBF_KATCP_WARN || st == CBF_KATCP_ERROR;
}

/* A sum or sync aggregate's reading from its children's, as
 * katsdpcontroller's: the sum of the known ones, nominal once all are
 * known, else failure; synchronised when every child is, nominal, else
 * error (under mu). */
static void compute(cbf_product_ctl *pc, pc_aggregate *a)
{
    long long total = 0;
    int known = 0;
    for (int c = 0; c < a->n_children; c++)
        if (a->valid[c]) {
            total += a->value[c];
            known++;
        }
    char v[32];
    if (a->how == AGG_SUM) {
        snprintf(v, sizeof v, "%lld", total);
        cbf_katcp_sensor_set(pc->srv, a->name, known == a->n_children ? CBF_KATCP_NOMINAL : CBF_KATCP_FAILURE, v,
                             0, NULL);
    } else {
        int sync = total == a->n_children;
        cbf_katcp_sensor_set(pc->srv, a->name, sync ? CBF_KATCP_NOMINAL : CBF_KATCP_ERROR, sync ? "1" : "0", 0,
                             NULL);
    }
}

/* One child's reading: the latest aggregate takes a valid one that is not
 * older than what it shows and differs from it (katsdpcontroller's
 * LatestSensor), and keeps it while the child goes away (under mu). */
static void child_reading(cbf_product_ctl *pc, pc_aggregate *a, int child, cbf_katcp_status st, const char *value,
                          double timestamp)
{
    if (a->how != AGG_LATEST) {
        a->valid[child] = (char)valid(st);
        a->value[child] = a->how == AGG_SUM ? atoll(value) : !strcmp(value, "1");
        compute(pc, a);
        return;
    }
    if (!valid(st) || (a->have && a->timestamp > timestamp) ||
        (a->have && a->status == st && !strcmp(a->latest, value)))
        return;
    char *v = strdup(value);
    if (!v || cbf_katcp_sensor_set(pc->srv, a->name, st, value, timestamp, NULL)) {
        free(v);
        return;
    }
    free(a->latest);
    a->latest = v;
    a->have = 1;
    a->timestamp = timestamp;
    a->status = st;
}

const char *pc_renames_next(const pc_engine *e, const char *name, int *at)
{
    for (; *at < e->n_renames; ++*at)
        if (e->renames[*at].to && !strcmp(e->renames[*at].from, name))
            return e->renames[(*at)++].to;
    return NULL;
}

void pc_renames_reading(cbf_product_ctl *pc, int engine, const char *name, cbf_katcp_status st,
                        const char *value, double timestamp)
{
    pc_engine *e = &pc->eng[engine];
    for (int i = 0; i < e->n_renames; i++) {
        const pc_rename *r = &e->renames[i];
        if (r->agg >= 0 && !strcmp(r->from, name))
            child_reading(pc, &pc->aggs[r->agg], r->child, st, value, timestamp);
    }
}

void pc_renames_unreachable(cbf_product_ctl *pc, int engine)
{
    pc_engine *e = &pc->eng[engine];
    for (int i = 0; i < e->n_renames; i++) {
        const pc_rename *r = &e->renames[i];
        if (r->agg >= 0 && pc->aggs[r->agg].how != AGG_LATEST && pc->aggs[r->agg].valid[r->child]) {
            pc->aggs[r->agg].valid[r->child] = 0;
            compute(pc, &pc->aggs[r->agg]);
        }
    }
}
