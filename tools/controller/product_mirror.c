/* product_mirror.c: every engine's own sensors shown by the product
 * controller as TASK.NAME, as katsdpcontroller mirrors its tasks' sensors,
 * and under the product's stream names (product_renames.c):
 * a thread asks each engine that is up for `?sensor-value` about once a
 * second (one connection per engine, kept), adds a sensor the first time
 * it appears (its type from the engine's `?sensor-list`), and leaves an
 * engine's sensors unreachable while it is not up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "product_ctl_priv.h"

#define MIRROR_PERIOD_S 1.0
#define CALL_TIMEOUT_S 5.0

void pc_mirror_free(pc_engine *e)
{
    for (int i = 0; i < e->n_mirrored; i++) {
        free(e->mirrored[i]);
        free(e->last[i]);
    }
    free(e->mirrored);
    free(e->last);
    cbf_katcp_client_close(e->cl);
    e->cl = NULL;
}

void pc_mirror_unreachable(cbf_product_ctl *pc, int engine)
{
    if (!pc->srv)
        return;
    pc_engine *e = &pc->eng[engine];
    e->steady = -1;
    for (int i = 0; i < e->n_mirrored; i++) {
        /* the value stays as it was: only its status changes */
        if (e->last[i])
            cbf_katcp_sensor_set(pc->srv, e->mirrored[i], CBF_KATCP_UNREACHABLE, e->last[i], 0, NULL);
    }
    pc_renames_unreachable(pc, engine);
}

/* The index of the mirrored sensor so named, -1: none yet (under mu). */
static int known(const pc_engine *e, const char *name)
{
    for (int i = 0; i < e->n_mirrored; i++)
        if (!strcmp(e->mirrored[i], name))
            return i;
    return -1;
}

static cbf_katcp_type type_of(const char *t)
{
    static const struct {
        const char *word;
        cbf_katcp_type type;
    } types[] = {{"integer", CBF_KATCP_INTEGER},   {"float", CBF_KATCP_FLOAT},
                 {"boolean", CBF_KATCP_BOOLEAN},   {"discrete", CBF_KATCP_DISCRETE},
                 {"address", CBF_KATCP_ADDRESS},   {"timestamp", CBF_KATCP_TIMESTAMP}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(t, types[i].word))
            return types[i].type;
    return CBF_KATCP_STRING;
}

/* Adds one sensor to the server and to the engine's mirrored ones, unless
 * it is there already. */
static void add_mirrored(cbf_product_ctl *pc, pc_engine *e, const cbf_katcp_sensor_info *in)
{
    pthread_mutex_lock(&pc->mu);
    int have = known(e, in->name);
    pthread_mutex_unlock(&pc->mu);
    cbf_error err = {0};
    if (have >= 0 || cbf_katcp_sensor_add(pc->srv, in, &err))
        return;
    pthread_mutex_lock(&pc->mu);
    if (e->n_mirrored == e->cap_mirrored) {
        int cap = e->cap_mirrored ? 2 * e->cap_mirrored : 64;
        char **v = realloc(e->mirrored, (size_t)cap * sizeof *v);
        if (v)
            e->mirrored = v;
        char **l = v ? realloc(e->last, (size_t)cap * sizeof *l) : NULL;
        if (l) {
            e->last = l;
            e->cap_mirrored = cap;
        }
    }
    if (e->n_mirrored < e->cap_mirrored && (e->mirrored[e->n_mirrored] = strdup(in->name)))
        e->last[e->n_mirrored++] = NULL;
    pthread_mutex_unlock(&pc->mu);
}

/* Adds the engine's sensors named in a ?sensor-list reply as TASK.NAME,
 * and under each product name it is renamed to (product_renames.c). */
static void add_listed(cbf_product_ctl *pc, int engine, const cbf_katcp_result *r)
{
    const cbf_plan_engine *pe = &pc->rp->plan->engines[engine];
    pc_engine *e = &pc->eng[engine];
    for (size_t k = 0; k < r->n_informs; k++) {
        const cbf_katcp_msg *m = &r->informs[k];
        if (m->n_args < 4)
            continue;
        char full[512];
        snprintf(full, sizeof full, "%s.%s", pe->task, m->args[0]);
        cbf_katcp_sensor_info in = {full, m->args[1], m->args[2], type_of(m->args[3]),
                                    (const char *const *)m->args + 4, m->n_args - 4};
        if (in.type != CBF_KATCP_DISCRETE)
            in.n_values = 0;
        add_mirrored(pc, e, &in);
        int at = 0;
        while ((in.name = pc_renames_next(e, m->args[0], &at)))
            add_mirrored(pc, e, &in);
    }
}

/* A mirrored sensor set, and its value kept for while it is unreachable
 * (under mu). */
static void show(cbf_product_ctl *pc, pc_engine *e, const char *name, cbf_katcp_status st, const char *value,
                 double timestamp)
{
    int at = known(e, name);
    if (at < 0 || cbf_katcp_sensor_set(pc->srv, name, st, value, timestamp, NULL))
        return;
    char *v = strdup(value);
    if (v) {
        free(e->last[at]);
        e->last[at] = v;
    }
}

static int call(cbf_katcp_client *cl, const char *name, const char *arg, cbf_katcp_result *r)
{
    cbf_error err = {0};
    const char *args[] = {arg};
    if (cbf_katcp_client_call(cl, name, arg ? 1 : 0, args, CALL_TIMEOUT_S, r, &err))
        return -1;
    if (strcmp(cbf_katcp_result_status(r), "ok")) {
        cbf_katcp_result_free(r);
        return -1;
    }
    return 0;
}

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

/* Sets engine i's sensors from a ?sensor-value reply; a sensor not
 * mirrored yet is listed first through cl (NULL: skipped). The largest
 * nominal steady-state-timestamp read, -1: none. gen: the engine's
 * `refreshed` when the reply was asked for (a newer reading has been set
 * since: nothing is set from this one); NULL: set whatever. */
static long long apply_reading(cbf_product_ctl *pc, int i, const cbf_katcp_result *r, cbf_katcp_client *cl,
                               const unsigned long *gen)
{
    const cbf_plan_engine *pe = &pc->rp->plan->engines[i];
    pc_engine *e = &pc->eng[i];
    long long steady = -1;
    for (size_t k = 0; k < r->n_informs; k++) {
        const cbf_katcp_msg *m = &r->informs[k];   /* timestamp 1 NAME STATUS VALUE */
        if (m->n_args < 5)
            continue;
        char full[512];
        snprintf(full, sizeof full, "%s.%s", pe->task, m->args[2]);
        pthread_mutex_lock(&pc->mu);
        int have = known(e, full);
        pthread_mutex_unlock(&pc->mu);
        if (have < 0) {   /* a sensor that appeared since: its type first */
            cbf_katcp_result l = {0};
            if (!cl || call(cl, "sensor-list", m->args[2], &l))
                continue;
            add_listed(pc, i, &l);
            cbf_katcp_result_free(&l);
        }
        int status = cbf_katcp_status_parse(m->args[3]);
        if (status < 0)
            status = CBF_KATCP_UNKNOWN;
        pthread_mutex_lock(&pc->mu);
        /* not over the unreachable of an engine just gone, nor over a
         * fresher reading */
        if (e->state == CBF_ENGINE_UP && pc->srv && (!gen || *gen == e->refreshed)) {
            double ts = atof(m->args[0]);
            show(pc, e, full, (cbf_katcp_status)status, m->args[4], ts);
            int at = 0;
            for (const char *to; (to = pc_renames_next(e, m->args[2], &at));)
                show(pc, e, to, (cbf_katcp_status)status, m->args[4], ts);
            pc_renames_reading(pc, i, m->args[2], (cbf_katcp_status)status, m->args[4], ts);
        }
        pthread_mutex_unlock(&pc->mu);
        if (ends_with(m->args[2], "steady-state-timestamp") && status == CBF_KATCP_NOMINAL) {
            long long v = atoll(m->args[4]);
            steady = v > steady ? v : steady;
        }
    }
    return steady;
}

void pc_mirror_reading(cbf_product_ctl *pc, int engine, const cbf_katcp_result *r)
{
    pthread_mutex_lock(&pc->mu);
    pc->eng[engine].refreshed++;
    pthread_mutex_unlock(&pc->mu);
    long long steady = apply_reading(pc, engine, r, NULL, NULL);
    pthread_mutex_lock(&pc->mu);
    pc_engine *e = &pc->eng[engine];
    if (e->state == CBF_ENGINE_UP && steady > e->steady)
        e->steady = steady;
    pthread_mutex_unlock(&pc->mu);
}

/* One reading of one engine's sensors. */
static void poll_engine(cbf_product_ctl *pc, int i)
{
    const cbf_plan_engine *pe = &pc->rp->plan->engines[i];
    pthread_mutex_lock(&pc->mu);
    pc_engine *e = &pc->eng[i];
    cbf_engine_state st = e->state;
    const unsigned long gen = e->refreshed;
    pthread_mutex_unlock(&pc->mu);
    if (st != CBF_ENGINE_UP) {
        cbf_katcp_client_close(e->cl);
        e->cl = NULL;
        return;
    }
    cbf_katcp_result r = {0};
    if (!e->cl) {
        char addr[128];
        cbf_error err = {0};
        snprintf(addr, sizeof addr, "%s:%d", pe->address, pe->katcp_port);
        if (cbf_katcp_client_connect(addr, 1.0, &e->cl, &err))
            return;
        if (!call(e->cl, "sensor-list", NULL, &r)) {
            add_listed(pc, i, &r);
            cbf_katcp_result_free(&r);
        }
    }
    if (call(e->cl, "sensor-value", NULL, &r)) {
        cbf_katcp_client_close(e->cl);
        e->cl = NULL;
        return;
    }
    long long steady = apply_reading(pc, i, &r, e->cl, &gen);
    cbf_katcp_result_free(&r);
    pthread_mutex_lock(&pc->mu);
    if (e->state == CBF_ENGINE_UP && gen == e->refreshed)
        e->steady = steady;
    pthread_mutex_unlock(&pc->mu);
}

int pc_mirror_wait_first(cbf_product_ctl *pc, double timeout_s)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)timeout_s;
    pthread_mutex_lock(&pc->mu);
    int rc = 0;
    while (pc->mirror_passes < 1 && !pc->stop && rc == 0)
        rc = pthread_cond_timedwait(&pc->cv, &pc->mu, &until);
    int done = pc->mirror_passes >= 1;
    pthread_mutex_unlock(&pc->mu);
    return done ? 0 : -1;
}

void *pc_mirror_main(void *arg)
{
    cbf_product_ctl *pc = arg;
    int n = pc->rp->plan->n_engines;
    pthread_mutex_lock(&pc->mu);
    while (!pc->stop) {
        pthread_mutex_unlock(&pc->mu);
        for (int i = 0; i < n && i < pc->n_eng; i++)
            poll_engine(pc, i);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)MIRROR_PERIOD_S;
        pthread_mutex_lock(&pc->mu);
        pc->mirror_passes++;
        pthread_cond_broadcast(&pc->cv);
        while (!pc->stop && pthread_cond_timedwait(&pc->cv, &pc->mu, &until) == 0) {
        }
    }
    pthread_mutex_unlock(&pc->mu);
    for (int i = 0; i < pc->n_eng; i++) {
        cbf_katcp_client_close(pc->eng[i].cl);
        pc->eng[i].cl = NULL;
    }
    return NULL;
}
