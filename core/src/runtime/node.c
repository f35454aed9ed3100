/* node.c: what a plugin sees of its node (cbf/node.h): ports, state, GPU
 * choice, the stop flag, owned pools and named counters. Counters and
 * statistics are relaxed atomics: they are read by the progress display
 * while node threads write them, and a value a moment old is fine there. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cbf/log.h"
#include "runtime.h"

static _Thread_local cbf_node *current_node;

uint64_t cbf_rt_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

cbf_node *cbf_rt_node_current(void) { return current_node; }
void cbf_rt_node_set_current(cbf_node *n) { current_node = n; }

void cbf_rt_node_add_wait(cbf_node *n, bool output, uint64_t ns)
{
    if (n)
        atomic_fetch_add_explicit(output ? &n->wait_out_ns : &n->wait_in_ns, ns, memory_order_relaxed);
}

const char *cbf_node_name(const cbf_node *n) { return n->g->name; }
void cbf_node_thread_start(const cbf_node *n, const char *role, int index)
{
    char tail[16], name[16];
    int t = snprintf(tail, sizeof tail, "/%s%d", role, index);
    int room = (int)sizeof name - 1 - (t < (int)sizeof tail ? t : (int)sizeof tail - 1);
    snprintf(name, sizeof name, "%.*s%s", room > 0 ? room : 0, n->g->name, tail);
    pthread_setname_np(pthread_self(), name);
    cbf_log_set_thread_name(n->g->name);
}

const char *cbf_node_plugin(const cbf_node *n) { return n->g->plugin->name; }
const cbf_params *cbf_node_params(const cbf_node *n) { return n->g->params; }
void *cbf_node_state(const cbf_node *n) { return n->state; }
void cbf_node_set_state(cbf_node *n, void *state) { n->state = state; }
bool cbf_node_use_gpu(const cbf_node *n) { return n->use_gpu; }
int cbf_node_gpu_device(const cbf_node *n) { return n->use_gpu ? n->gpu_device : -1; }

static const cbf_port_slot *find_slot(const cbf_node *n, const char *name)
{
    for (int i = 0; i < n->g->plugin->n_ports; i++)
        if (!strcmp(n->slots[i].decl->name, name))
            return &n->slots[i];
    return NULL;
}

cbf_port *cbf_node_port(cbf_node *n, const char *name, int index)
{
    const cbf_port_slot *s = find_slot(n, name);
    if (!s || index < 0 || index >= s->n)
        return NULL;
    return s->ports[index];
}

int cbf_node_port_count(const cbf_node *n, const char *name)
{
    const cbf_port_slot *s = find_slot(n, name);
    if (!s)
        return 0;
    /* An output counts its edges, not its one port object. */
    if (s->decl->dir == CBF_PORT_OUT)
        return s->n ? (int)s->ports[0]->n_consumers : 0;
    return s->n;
}

bool cbf_node_stopping(const cbf_node *n)
{
    /* Sources poll this between buffers: their requests are handled here. */
    if (n == current_node) {
        if (current_node->driver)
            current_node->driver->feed(current_node->driver->ctx, NULL);
        cbf_rt_node_drain(current_node);
    }
    return atomic_load(n->stopping) || atomic_load(n->aborting);
}

int cbf_node_pool_create(cbf_node *n, const cbf_pool_config *cfg, cbf_pool **out, cbf_error *err)
{
    char name[128];
    snprintf(name, sizeof name, "%s.%s", n->g->name, cfg->name ? cfg->name : "pool");
    cbf_pool_config c = *cfg;
    c.name = name;
    int rc = cbf_pool_create(&c, out, err);
    if (rc != CBF_OK)
        return rc;
    if (n->driver)
        n->driver->pool(n->driver->ctx, *out);
    cbf_rt_pool_set_next(*out, n->pools);
    n->pools = *out;
    return CBF_OK;
}

int cbf_rt_node_setup(cbf_node *n, const cbf_graph_node *g, const atomic_bool *stopping,
                      const atomic_bool *aborting, cbf_error *err)
{
    n->g = g;
    n->stopping = stopping;
    n->aborting = aborting;
    cbf_rt_node_mailbox_init(n);
    cbf_rt_node_sensors_init(n);
    int np = g->plugin->n_ports;
    n->slots = calloc(np ? (size_t)np : 1, sizeof *n->slots);
    if (!n->slots)
        return cbf_error_set(err, CBF_ENOMEM, "node '%s': out of memory", g->name);
    for (int pi = 0; pi < np; pi++)
        n->slots[pi].decl = &g->plugin->ports[pi];
    return CBF_OK;
}

void cbf_rt_node_release(cbf_node *n)
{
    for (int pi = 0; n->slots && pi < n->g->plugin->n_ports; pi++) {
        cbf_port_slot *s = &n->slots[pi];
        if (s->decl->dir == CBF_PORT_OUT && s->n) {
            cbf_rt_port_destroy(s->ports[0]);
            free(s->ports[0]);
        }
        free(s->ports);
    }
    free(n->slots);
    n->slots = NULL;
    cbf_rt_node_mailbox_destroy(n);
    cbf_rt_node_sensors_destroy(n);
}

void cbf_rt_node_fail(const cbf_node *n, const char *what, int rc, cbf_error *err)
{
    if (!err)
        return;
    if (!err->msg[0])
        cbf_error_set(err, rc, "%s failed: %s", what, cbf_error_name(rc));
    err->code = rc;
    cbf_error_prefix(err, "%s: node '%s' (plugin %s)", n->g->where, n->g->name, n->g->plugin->name);
}

int cbf_rt_node_init(cbf_node *n, cbf_error *err)
{
    cbf_log_set_thread_name(n->g->name);
    cbf_rt_node_set_current(n);
    n->init_called = true;
    cbf_error_clear(err);
    int rc = n->g->plugin->init ? n->g->plugin->init(n, err) : CBF_OK;
    cbf_rt_node_set_current(NULL);
    cbf_log_set_thread_name(NULL);
    if (rc >= 0)
        return CBF_OK;
    cbf_rt_node_fail(n, "init", rc, err);
    return rc;
}

int cbf_rt_node_free_pools(cbf_node *n, cbf_error *err)
{
    int first = CBF_OK;
    cbf_pool *kept = NULL;
    for (cbf_pool *p = n->pools, *next; p; p = next) {
        next = cbf_rt_pool_next(p);
        cbf_error perr;
        if (cbf_pool_destroy(p, &perr) != CBF_OK) {
            cbf_error_prefix(&perr, "%s: node '%s' (plugin %s)", n->g->where, n->g->name,
                             n->g->plugin->name);
            cbf_log_error("%s", perr.msg);
            if (first == CBF_OK) {
                first = perr.code;
                if (err)
                    *err = perr;
            }
            cbf_rt_pool_set_next(p, kept);
            kept = p;
        }
    }
    n->pools = kept;
    return first;
}

cbf_counter *cbf_node_counter(cbf_node *n, const char *name)
{
    int k = atomic_load(&n->n_counters);
    for (int i = 0; i < k; i++)
        if (!strcmp(n->counters[i].name, name))
            return &n->counters[i];
    if (k >= CBF_MAX_COUNTERS) {
        cbf_log_warn("node '%s': more than %d counters; '%s' is not recorded", n->g->name,
                     CBF_MAX_COUNTERS, name);
        return NULL;
    }
    cbf_counter *c = &n->counters[k];
    snprintf(c->name, sizeof c->name, "%s", name);
    atomic_init(&c->value, 0);
    atomic_init(&c->warn_on_rise, false);
    /* Published after the name is written, for a concurrent stats reader. */
    atomic_store_explicit(&n->n_counters, k + 1, memory_order_release);
    return c;
}

void cbf_counter_add(cbf_counter *c, uint64_t v)
{
    if (c)
        atomic_fetch_add_explicit(&c->value, v, memory_order_relaxed);
}

void cbf_counter_set(cbf_counter *c, uint64_t v)
{
    if (c)
        atomic_store_explicit(&c->value, v, memory_order_relaxed);
}

uint64_t cbf_counter_get(const cbf_counter *c)
{
    return c ? atomic_load_explicit(&c->value, memory_order_relaxed) : 0;
}

void cbf_rt_node_stats(const cbf_node *n, uint64_t now_ns, cbf_node_stats *out)
{
    memset(out, 0, sizeof *out);
    out->name = n->g->name;
    out->plugin = n->g->plugin->name;
    out->buffers_in = atomic_load_explicit(&n->buffers_in, memory_order_relaxed);
    out->buffers_out = atomic_load_explicit(&n->buffers_out, memory_order_relaxed);
    out->bytes_out = atomic_load_explicit(&n->bytes_out, memory_order_relaxed);
    uint64_t win = atomic_load_explicit(&n->wait_in_ns, memory_order_relaxed);
    uint64_t wout = atomic_load_explicit(&n->wait_out_ns, memory_order_relaxed);
    out->wait_input_s = 1e-9 * (double)win;
    out->wait_output_s = 1e-9 * (double)wout;
    uint64_t start = atomic_load(&n->run_start_ns), end = atomic_load(&n->run_end_ns);
    if (start) {
        uint64_t span = (end ? end : now_ns) - start;
        /* busy = time in run not spent blocked in the runtime */
        out->busy_s = span > win + wout ? 1e-9 * (double)(span - win - wout) : 0.0;
    }
    int k = atomic_load_explicit(&n->n_counters, memory_order_acquire);
    out->n_counters = k;
    for (int i = 0; i < k; i++) {
        out->counter_names[i] = n->counters[i].name;
        out->counter_values[i] = atomic_load_explicit(&n->counters[i].value, memory_order_relaxed);
    }
    k = atomic_load_explicit(&n->n_gauges, memory_order_acquire);
    out->n_gauges = k;
    for (int i = 0; i < k; i++) {
        out->gauge_names[i] = n->gauges[i].name;
        out->gauge_values[i] = cbf_gauge_get(&n->gauges[i]);
    }
}

const char *cbf_rt_node_queue(cbf_node *n, size_t k, size_t *fill, size_t *depth)
{
    for (int pi = 0; pi < n->g->plugin->n_ports; pi++) {
        const cbf_port_slot *s = &n->slots[pi];
        if (s->decl->dir != CBF_PORT_IN)
            continue;
        if (k >= (size_t)s->n) {
            k -= (size_t)s->n;
            continue;
        }
        cbf_port *in = s->ports[k];
        pthread_mutex_lock(&in->mu);
        *fill = in->count;
        *depth = in->depth;
        pthread_mutex_unlock(&in->mu);
        return in->name;
    }
    return NULL;
}
