/* rt_graph.h: builds the loader's validated graph (graph_model.h) by hand
 * from the test plugins, so engine tests need no YAML. */
#ifndef RT_GRAPH_H
#define RT_GRAPH_H

#include "graph/graph_model.h"
#include "plugins/rt_common.h"

typedef struct rt_edge_spec {
    const char *from, *to;   /* "node.port" */
    size_t depth;            /* 0: the engine default */
} rt_edge_spec;

/* nodes: pairs of "name", "plugin", in topological order. Returns NULL
 * (after printing why) when a plugin or port is missing. */
cbf_graph *rt_graph(const char *const *nodes, size_t n_nodes, const rt_edge_spec *edges,
                    size_t n_edges, cbf_gpu_mode gpu);
void rt_graph_free(cbf_graph *g);
/* The knobs of a test plugin ("rt_count", ...), loaded on first use. */
rt_knobs *rt_knobs_of(const char *plugin);

#endif
