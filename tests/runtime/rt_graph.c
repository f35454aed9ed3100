/* rt_graph.c: see rt_graph.h. Plugins are opened once per process and kept
 * open, so knob pointers stay valid across tests. RTLD_LAZY: the plugins'
 * params calls are never reached with params NULL. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_graph.h"

#define MAX_PLUGINS 8
static struct { char name[32]; void *h; const cbf_plugin_desc *desc; } plugins[MAX_PLUGINS];

static int open_plugin(const char *name)
{
    for (int i = 0; i < MAX_PLUGINS; i++)
        if (plugins[i].h && !strcmp(plugins[i].name, name))
            return i;
    const char *dir = getenv("CBF_RT_PLUGIN_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/cbf_%s.so", dir ? dir : ".", name);
    for (int i = 0; i < MAX_PLUGINS; i++) {
        if (plugins[i].h)
            continue;
        void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "rt_graph: %s\n", dlerror());
            return -1;
        }
        cbf_plugin_entry_fn entry = (cbf_plugin_entry_fn)dlsym(h, CBF_PLUGIN_ENTRY_SYMBOL);
        if (!entry) {
            fprintf(stderr, "rt_graph: %s: no entry symbol\n", path);
            return -1;
        }
        snprintf(plugins[i].name, sizeof plugins[i].name, "%s", name);
        plugins[i].h = h;
        plugins[i].desc = entry();
        return i;
    }
    return -1;
}

rt_knobs *rt_knobs_of(const char *plugin)
{
    int i = open_plugin(plugin);
    return i < 0 ? NULL : dlsym(plugins[i].h, "rt_test_knobs");
}

static int find_port(const cbf_plugin_desc *d, const char *name, cbf_port_dir dir)
{
    for (int i = 0; i < d->n_ports; i++)
        if (!strcmp(d->ports[i].name, name) && d->ports[i].dir == dir)
            return i;
    return -1;
}

static int split(const cbf_graph *g, const char *spec, cbf_port_dir dir, size_t *node, size_t *port)
{
    const char *dot = strchr(spec, '.');
    if (!dot)
        return -1;
    for (size_t i = 0; i < g->n_nodes; i++) {
        if (strlen(g->nodes[i].name) == (size_t)(dot - spec) &&
            !strncmp(g->nodes[i].name, spec, (size_t)(dot - spec))) {
            int p = find_port(g->nodes[i].plugin, dot + 1, dir);
            if (p < 0)
                return -1;
            *node = i;
            *port = (size_t)p;
            return 0;
        }
    }
    return -1;
}

cbf_graph *rt_graph(const char *const *nodes, size_t n_nodes, const rt_edge_spec *edges,
                    size_t n_edges, cbf_gpu_mode gpu)
{
    cbf_graph *g = calloc(1, sizeof *g);
    g->path = strdup("test.yaml");
    g->engine.name = strdup("test");
    g->engine.gpu = gpu;
    g->engine.queue_depth = 4;
    g->engine.sensor_period = 1.0;
    snprintf(g->engine.where, sizeof g->engine.where, "test.yaml:1:1");
    g->n_nodes = n_nodes;
    g->nodes = calloc(n_nodes, sizeof *g->nodes);
    for (size_t i = 0; i < n_nodes; i++) {
        int k = open_plugin(nodes[2 * i + 1]);
        if (k < 0) {
            rt_graph_free(g);
            return NULL;
        }
        g->nodes[i].name = strdup(nodes[2 * i]);
        g->nodes[i].plugin = plugins[k].desc;
        snprintf(g->nodes[i].where, sizeof g->nodes[i].where, "test.yaml:%zu:3", 10 + 3 * i);
    }
    g->n_edges = n_edges;
    g->edges = calloc(n_edges ? n_edges : 1, sizeof *g->edges);
    for (size_t i = 0; i < n_edges; i++) {
        cbf_graph_edge *e = &g->edges[i];
        if (split(g, edges[i].from, CBF_PORT_OUT, &e->from_node, &e->from_port) ||
            split(g, edges[i].to, CBF_PORT_IN, &e->to_node, &e->to_port)) {
            fprintf(stderr, "rt_graph: bad edge %s -> %s\n", edges[i].from, edges[i].to);
            rt_graph_free(g);
            return NULL;
        }
        for (size_t j = 0; j < i; j++)
            e->to_index += g->edges[j].to_node == e->to_node && g->edges[j].to_port == e->to_port;
        e->depth = edges[i].depth ? edges[i].depth : g->engine.queue_depth;
        snprintf(e->where, sizeof e->where, "test.yaml:%zu:5", 40 + i);
    }
    return g;
}

void rt_graph_free(cbf_graph *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n_nodes; i++)
        free(g->nodes[i].name);
    free(g->nodes);
    free(g->edges);
    free(g->engine.name);
    free(g->path);
    free(g);
}
