/* engine.c: turns a validated graph into running nodes.
 *
 * One thread per node; a bounded queue per edge. A node's run returning
 * closes its outputs (end of stream flows downstream) and detaches its
 * inputs (so a producer is never left blocked on a consumer that is gone).
 * Stop is a flag sources poll, so the graph drains and nothing is dropped;
 * an error is an abort, which wakes every blocked call with CBF_ESTOPPED so
 * all threads unwind, and the first error is what run returns. The
 * control front ends are whichever registered themselves (frontend.h). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cbf/gpu.h"
#include "cbf/log.h"
#include "frontend.h"
#include "runtime.h"

struct cbf_engine {
    cbf_graph *g;
    cbf_node *nodes;
    cbf_port *inputs;          /* one per edge, in edge order */
    bool use_gpu;
    int gpu_device;
    atomic_bool stopping, aborting;
    atomic_uint_least64_t t_start_ns, t_end_ns;

    pthread_mutex_t mu;        /* guards the first error */
    int first_rc;
    cbf_error first_err;

    bool ran, torn_down;
    /* The registered front ends (frontend.h), in order, and each one's
     * state (NULL: not open, or the settings configure none of it). */
    const cbf_frontend *const *fe;
    size_t n_fe;
    void *fe_state[CBF_MAX_FRONTENDS];
};

const cbf_graph *cbf_rt_engine_graph(const cbf_engine *e) { return e->g; }
cbf_node *cbf_rt_engine_node(cbf_engine *e, size_t i) { return i < e->g->n_nodes ? &e->nodes[i] : NULL; }

/* ---- front ends (frontend.h): opened, started and closed in order ---- */

static int frontends_open(cbf_engine *e, cbf_error *err)
{
    int rc = cbf_rt_frontends(&e->fe, &e->n_fe, err);
    for (size_t i = 0; i < e->n_fe && rc == CBF_OK; i++)
        rc = e->fe[i]->open(e, &e->fe_state[i], err);
    return rc;
}

static int frontends_start(cbf_engine *e, cbf_error *err)
{
    for (size_t i = 0; i < e->n_fe; i++) {
        int rc = e->fe_state[i] ? e->fe[i]->start(e->fe_state[i], err) : CBF_OK;
        if (rc != CBF_OK)
            return rc;
    }
    return CBF_OK;
}

static void frontends_close(cbf_engine *e)
{
    for (size_t i = 0; i < e->n_fe; i++) {
        if (e->fe_state[i])
            e->fe[i]->close(e->fe_state[i]);
        e->fe_state[i] = NULL;
    }
}

const char *cbf_rt_engine_queue(cbf_engine *e, size_t i, size_t *fill, size_t *depth)
{
    cbf_port *in = &e->inputs[i];
    pthread_mutex_lock(&in->mu);
    *fill = in->count;
    *depth = in->depth;
    pthread_mutex_unlock(&in->mu);
    return in->name;
}

static atomic_flag said_no_gpu = ATOMIC_FLAG_INIT;

static int decide_gpu(cbf_engine *e, cbf_error *err)
{
    const cbf_engine_settings *s = &e->g->engine;
    e->gpu_device = s->gpu_device;
    if (s->gpu == CBF_GPU_NONE)
        return CBF_OK;
    int n = cbf_gpu_count();
    if (n > 0 && s->gpu_device >= 0 && s->gpu_device < n) {
        e->use_gpu = true;
        cbf_log_info("using GPU %d: %s", s->gpu_device, cbf_gpu_describe(s->gpu_device));
        return CBF_OK;
    }
    if (s->gpu == CBF_GPU_REQUIRED) {
        if (n == 0)
            return cbf_error_set(err, CBF_ENOTSUP, "%s: engine: gpu: required, but no GPU is usable (%s)",
                                 s->where, cbf_gpu_describe(0));
        return cbf_error_set(err, CBF_ENOTSUP, "%s: engine: gpu_device %d, but this machine has %d GPU(s)",
                             s->where, s->gpu_device, n);
    }
    if (n > 0)
        return cbf_error_set(err, CBF_ECONFIG, "%s: engine: gpu_device %d, but this machine has %d GPU(s)",
                             s->where, s->gpu_device, n);
    if (!atomic_flag_test_and_set(&said_no_gpu))
        cbf_log_info("no GPU: using the CPU path (%s)", cbf_gpu_describe(0));
    return CBF_OK;
}

static int wire_output(cbf_engine *e, cbf_node *n, size_t ni, int pi, cbf_error *err)
{
    cbf_port_slot *s = &n->slots[pi];
    size_t k = 0;
    for (size_t i = 0; i < e->g->n_edges; i++)
        k += e->g->edges[i].from_node == ni && e->g->edges[i].from_port == (size_t)pi;
    if (!k)
        return CBF_OK;
    s->ports = calloc(1, sizeof *s->ports);
    cbf_port *p = calloc(1, sizeof *p);
    if (!s->ports || !p) {
        free(p);
        return cbf_error_set(err, CBF_ENOMEM, "node '%s': out of memory for ports", n->g->name);
    }
    s->ports[0] = p;
    s->n = 1;
    char name[64];
    snprintf(name, sizeof name, "%s.%s", n->g->name, s->decl->name);
    int rc = cbf_rt_port_init_output(p, n, name, k, err);
    p->type = s->decl->type;
    for (size_t i = 0; i < e->g->n_edges && rc == CBF_OK; i++)
        if (e->g->edges[i].from_node == ni && e->g->edges[i].from_port == (size_t)pi)
            cbf_rt_port_link(p, &e->inputs[i]);
    return rc;
}

static int wire_input(cbf_engine *e, cbf_node *n, size_t ni, int pi, cbf_error *err)
{
    cbf_port_slot *s = &n->slots[pi];
    int k = 0;
    for (size_t i = 0; i < e->g->n_edges; i++)
        k += e->g->edges[i].to_node == ni && e->g->edges[i].to_port == (size_t)pi;
    if (!k)
        return CBF_OK;
    s->ports = calloc((size_t)k, sizeof *s->ports);
    if (!s->ports)
        return cbf_error_set(err, CBF_ENOMEM, "node '%s': out of memory for ports", n->g->name);
    s->n = k;
    for (size_t i = 0; i < e->g->n_edges; i++) {
        const cbf_graph_edge *ed = &e->g->edges[i];
        if (ed->to_node != ni || ed->to_port != (size_t)pi)
            continue;
        if (ed->to_index < 0 || ed->to_index >= k || s->ports[ed->to_index])
            return cbf_error_set(err, CBF_EINTERNAL, "%s: edge index %d of input '%s.%s' out of order",
                                 ed->where, ed->to_index, n->g->name, s->decl->name);
        char name[64];
        if (s->decl->multi)
            snprintf(name, sizeof name, "%s.%s[%d]", n->g->name, s->decl->name, ed->to_index);
        else
            snprintf(name, sizeof name, "%s.%s", n->g->name, s->decl->name);
        size_t depth = ed->depth ? ed->depth : e->g->engine.queue_depth;
        int rc = cbf_rt_port_init_input(&e->inputs[i], n, name, depth, &e->aborting, err);
        if (rc != CBF_OK)
            return rc;
        e->inputs[i].type = s->decl->type;
        e->inputs[i].flags = s->decl->flags;
        s->ports[ed->to_index] = &e->inputs[i];
    }
    return CBF_OK;
}

static int build(cbf_engine *e, cbf_error *err)
{
    const cbf_graph *g = e->g;
    e->nodes = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *e->nodes);
    e->inputs = calloc(g->n_edges ? g->n_edges : 1, sizeof *e->inputs);
    if (!e->nodes || !e->inputs)
        return cbf_error_set(err, CBF_ENOMEM, "engine: out of memory");
    for (size_t ni = 0; ni < g->n_nodes; ni++) {
        cbf_node *n = &e->nodes[ni];
        n->engine = e;
        n->use_gpu = e->use_gpu;
        n->gpu_device = e->gpu_device;
        int rc = cbf_rt_node_setup(n, &g->nodes[ni], &e->stopping, &e->aborting, err);
        if (rc != CBF_OK)
            return rc;
    }
    /* Inputs first: an output links to the input ports' queues. */
    for (int pass = 0; pass < 2; pass++) {
        cbf_port_dir dir = pass ? CBF_PORT_OUT : CBF_PORT_IN;
        for (size_t ni = 0; ni < g->n_nodes; ni++) {
            cbf_node *n = &e->nodes[ni];
            for (int pi = 0; pi < n->g->plugin->n_ports; pi++) {
                if (n->slots[pi].decl->dir != dir)
                    continue;
                int rc = pass ? wire_output(e, n, ni, pi, err) : wire_input(e, n, ni, pi, err);
                if (rc != CBF_OK)
                    return rc;
            }
        }
    }
    return CBF_OK;
}

/* After every thread has finished (or none started): release what is still
 * queued, fini every initialised node, then check the pools. Leaked pools
 * stay allocated on purpose: a buffer still out may yet be written. */
static int teardown(cbf_engine *e, cbf_error *err)
{
    if (e->torn_down)
        return CBF_OK;
    e->torn_down = true;
    bool aborted = atomic_load(&e->aborting);
    for (size_t i = 0; i < e->g->n_edges; i++) {
        cbf_port *in = &e->inputs[i];
        if (!in->ring)
            continue;
        uint64_t dropped = cbf_rt_port_detach(in);
        if (dropped && !aborted)
            cbf_log_warn("input '%s': %llu buffers released unread (its node returned before the "
                         "stream ended)", in->name, (unsigned long long)dropped);
    }
    for (size_t i = 0; i < e->g->n_nodes; i++) {
        cbf_node *n = &e->nodes[i];
        if (!n->init_called || !n->g->plugin->fini)
            continue;
        cbf_log_set_thread_name(n->g->name);
        n->g->plugin->fini(n);
    }
    cbf_log_set_thread_name(NULL);
    int first = CBF_OK;
    for (size_t i = 0; i < e->g->n_nodes; i++) {
        cbf_error perr;
        int rc = cbf_rt_node_free_pools(&e->nodes[i], &perr);
        if (rc != CBF_OK && first == CBF_OK) {
            first = rc;
            if (err)
                *err = perr;
        }
    }
    return first;
}

static void release(cbf_engine *e)
{
    if (e->nodes)
        for (size_t i = 0; i < e->g->n_nodes; i++)
            if (e->nodes[i].g)
                cbf_rt_node_release(&e->nodes[i]);
    if (e->inputs)
        for (size_t i = 0; i < e->g->n_edges; i++)
            cbf_rt_port_destroy(&e->inputs[i]);
    free(e->inputs);
    free(e->nodes);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

/* ---- time reference ---- */

static const cbf_engine_settings *node_settings(const cbf_node *n)
{
    return n && n->engine ? &n->engine->g->engine : NULL;
}

bool cbf_node_time_ref(const cbf_node *n, double *sync_time, double *adc_sample_rate)
{
    const cbf_engine_settings *s = node_settings(n);
    bool has = s && s->has_sync_time;
    if (sync_time)
        *sync_time = has ? cbf_time_to_double(&s->sync_time) : 0.0;
    if (adc_sample_rate)
        *adc_sample_rate = s ? (double)s->adc_sample_rate : 0.0;
    return has;
}

double cbf_node_unix_time(const cbf_node *n, int64_t ts)
{
    const cbf_engine_settings *s = node_settings(n);
    if (!s || !s->has_sync_time)
        return NAN;
    return (double)((long double)s->sync_time.sec + (s->sync_time.frac + (long double)ts / s->adc_sample_rate));
}

int cbf_node_timestamp_of(const cbf_node *n, double unix_s, int64_t *ts)
{
    const cbf_engine_settings *s = node_settings(n);
    if (!s || !s->has_sync_time || !isfinite(unix_s))
        return CBF_EINVAL;
    long double w = floorl((long double)unix_s);
    cbf_unix_time t = {(int64_t)w, (long double)unix_s - w};
    return cbf_time_to_ts(&t, &s->sync_time, s->adc_sample_rate, ts) ? CBF_EINVAL : CBF_OK;
}

/* A stage that states the ADC rate on its output (the port attribute of
 * the engine key's name) and an engine that states another one would
 * convert UNIX times with one rate and the data with the other. */
static int check_adc_rate(cbf_engine *e, cbf_error *err)
{
    const cbf_engine_settings *s = &e->g->engine;
    if (!(s->adc_sample_rate > 0))
        return CBF_OK;
    const double want = (double)s->adc_sample_rate;
    for (size_t i = 0; i < e->g->n_nodes; i++) {
        cbf_node *n = &e->nodes[i];
        for (int pi = 0; pi < n->g->plugin->n_ports; pi++) {
            cbf_port_slot *sl = &n->slots[pi];
            double v;
            if (sl->decl->dir != CBF_PORT_OUT || !sl->n || !sl->ports[0]->desc_set ||
                cbf_port_desc_get_attr(&sl->ports[0]->desc, "adc_sample_rate", &v))
                continue;
            /* Both come from decimal text through a double or two. */
            if (fabs(v - want) > 1e-9 * want)
                return cbf_error_set(err, CBF_ECONFIG, "%s: engine.adc_sample_rate is %.17g Hz, but node "
                                     "'%s' (%s) states adc_sample_rate %.17g Hz on its output '%s'",
                                     s->adc_sample_rate_where, want, n->g->name, n->g->where, v,
                                     sl->decl->name);
        }
    }
    return CBF_OK;
}

/* Made here, before any front end runs, so that the request path only
 * finds it (request.c). */
static void add_steady_state(cbf_node *n)
{
    const cbf_plugin_desc *d = n->g->plugin;
    for (int q = 0; q < d->n_requests; q++)
        for (int k = 0; k < d->requests[q].n_args; k++)
            if (d->requests[q].args[k].flags & CBF_PARAM_TIMESTAMP) {
                cbf_counter_describe(cbf_node_counter(n, CBF_RT_STEADY_STATE), "",
                                     "ADC timestamp from which every change requested so far is in force");
                return;
            }
}

static int init_nodes(cbf_engine *e, cbf_error *err)
{
    if (e->use_gpu) {
        int rc = cbf_rt_gpu_set_device(e->gpu_device, err);
        if (rc != CBF_OK)
            return cbf_error_prefix(err, "%s: engine", e->g->engine.where);
    }
    for (size_t i = 0; i < e->g->n_nodes; i++) {
        int rc = cbf_rt_node_init(&e->nodes[i], err);
        if (rc < 0)
            return rc;
        add_steady_state(&e->nodes[i]);
    }
    return check_adc_rate(e, err);
}

int cbf_engine_create(cbf_graph *g, cbf_engine **out, cbf_error *err)
{
    *out = NULL;
    cbf_engine *e = calloc(1, sizeof *e);
    if (!e)
        return cbf_error_set(err, CBF_ENOMEM, "engine: out of memory");
    e->g = g;
    pthread_mutex_init(&e->mu, NULL);
    atomic_init(&e->stopping, false);
    atomic_init(&e->aborting, false);
    int rc = decide_gpu(e, err);
    if (rc == CBF_OK)
        rc = build(e, err);
    if (rc == CBF_OK)
        rc = init_nodes(e, err);
    if (rc == CBF_OK)
        rc = frontends_open(e, err);
    if (rc != CBF_OK) {
        frontends_close(e);
        /* fini runs for every node whose init was called, the failing one
         * included: init may have allocated before it failed. */
        if (e->nodes) {
            cbf_error leak;
            teardown(e, &leak);
        }
        release(e);
        return rc;
    }
    *out = e;
    return CBF_OK;
}

static void abort_all(cbf_engine *e)
{
    atomic_store(&e->aborting, true);
    for (size_t i = 0; i < e->g->n_edges; i++)
        if (e->inputs[i].ring)
            cbf_rt_port_wake(&e->inputs[i]);
    for (size_t i = 0; i < e->g->n_nodes; i++)
        for (cbf_pool *p = e->nodes[i].pools; p; p = cbf_rt_pool_next(p))
            cbf_rt_pool_abort(p);
}

static void fail(cbf_engine *e, cbf_node *n, int rc, cbf_error *nerr)
{
    cbf_rt_node_fail(n, "run", rc, nerr);
    cbf_log_error("%s", nerr->msg);
    pthread_mutex_lock(&e->mu);
    bool first = e->first_rc == CBF_OK;
    if (first) {
        e->first_rc = rc;
        e->first_err = *nerr;
    }
    pthread_mutex_unlock(&e->mu);
    if (first)
        abort_all(e);
}

static void *node_main(void *arg)
{
    cbf_node *n = arg;
    cbf_engine *e = n->engine;
    cbf_log_set_thread_name(n->g->name);
    char os_name[16];   /* the OS keeps 15 characters */
    snprintf(os_name, sizeof os_name, "%s", n->g->name);
    pthread_setname_np(pthread_self(), os_name);
    cbf_rt_node_set_current(n);
    cbf_error_clear(&n->err);
    int rc = CBF_OK;
    if (n->use_gpu)
        rc = cbf_rt_gpu_set_device(n->gpu_device, &n->err);
    atomic_store(&n->run_start_ns, cbf_rt_now_ns());
    if (rc == CBF_OK)
        rc = n->g->plugin->run(n, &n->err);
    atomic_store(&n->run_end_ns, cbf_rt_now_ns());
    if (rc == CBF_ESTOPPED && atomic_load(&e->aborting))
        rc = CBF_OK;  /* unwinding after another node's error: not a second error */
    n->rc = rc < 0 ? rc : CBF_OK;
    cbf_rt_node_mailbox_close(n);
    if (n->rc < 0)
        fail(e, n, n->rc, &n->err);
    for (int pi = 0; pi < n->g->plugin->n_ports; pi++) {
        cbf_port_slot *s = &n->slots[pi];
        if (s->decl->dir == CBF_PORT_OUT && s->n)
            for (size_t c = 0; c < s->ports[0]->n_consumers; c++)
                cbf_rt_port_close(s->ports[0]->consumers[c]);
        else if (s->decl->dir == CBF_PORT_IN)
            for (int k = 0; k < s->n; k++)
                cbf_rt_port_detach(s->ports[k]);
    }
    cbf_log_debug("run returned (%s)", cbf_error_name(rc));
    cbf_rt_node_set_current(NULL);
    cbf_log_set_thread_name(NULL);
    return NULL;
}

int cbf_engine_run(cbf_engine *e, cbf_error *err)
{
    if (e->ran)
        return cbf_error_set(err, CBF_EINVAL, "engine: run may be called once");
    e->ran = true;
    atomic_store(&e->t_start_ns, cbf_rt_now_ns());
    int crc = frontends_start(e, err);
    if (crc != CBF_OK) {
        teardown(e, NULL);
        return crc;
    }
    size_t started = 0;
    for (; started < e->g->n_nodes; started++) {
        cbf_node *n = &e->nodes[started];
        if (pthread_create(&n->thread, NULL, node_main, n) != 0) {
            cbf_error terr;
            cbf_error_set(&terr, CBF_ENOMEM, "cannot start its thread");
            fail(e, n, CBF_ENOMEM, &terr);
            break;
        }
    }
    for (size_t i = 0; i < started; i++)
        pthread_join(e->nodes[i].thread, NULL);
    atomic_store(&e->t_end_ns, cbf_rt_now_ns());
    frontends_close(e);   /* after the nodes: last messages carry the final counts */
    cbf_error leak;
    cbf_error_clear(&leak);
    int lrc = teardown(e, &leak);
    if (e->first_rc != CBF_OK) {
        if (err)
            *err = e->first_err;
        return e->first_rc;
    }
    if (lrc != CBF_OK && err)
        *err = leak;
    return lrc;
}

void cbf_engine_stop(cbf_engine *e)
{
    if (e)
        atomic_store(&e->stopping, true);
}

size_t cbf_engine_stats(const cbf_engine *e, cbf_node_stats *out, size_t max)
{
    size_t n = e->g->n_nodes < max ? e->g->n_nodes : max;
    uint64_t now = cbf_rt_now_ns();
    for (size_t i = 0; i < n; i++)
        cbf_rt_node_stats(&e->nodes[i], now, &out[i]);
    return n;
}

double cbf_engine_elapsed(const cbf_engine *e)
{
    uint64_t t0 = atomic_load(&e->t_start_ns), t1 = atomic_load(&e->t_end_ns);
    if (!t0)
        return 0.0;
    return 1e-9 * (double)((t1 ? t1 : cbf_rt_now_ns()) - t0);
}

void cbf_engine_free(cbf_engine *e)
{
    if (!e)
        return;
    frontends_close(e);
    if (!e->torn_down) {
        cbf_error leak;
        teardown(e, &leak);
    }
    release(e);
}
