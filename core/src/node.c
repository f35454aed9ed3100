/* node.c: what a plugin sees of its node (cbf/node.h): ports, state, GPU
 * choice, the stop flag, owned pools and named counters. Counters and
 * statistics are relaxed atomics: they are read by the progress display
 * while node threads write them, and a value a moment old is fine there. */
#include <stdio.h>
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
    if (n == current_node)
        cbf_rt_node_drain(current_node);
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
    cbf_rt_pool_set_next(*out, n->pools);
    n->pools = *out;
    return CBF_OK;
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
}
