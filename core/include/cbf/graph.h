/* cbf/graph.h: plugin registry, pipeline loading and validation, running.
 * This is the API the tools (cbf-run, cbf-inspect) are written against. */
#ifndef CBF_GRAPH_H
#define CBF_GRAPH_H

#include <stddef.h>
#include <stdint.h>
#include "cbf/error.h"
#include "cbf/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Registry: which plugins exist. ----
 * Searched, in this order: directories given here (YAML engine.plugin_path
 * is added by cbf_graph_load), $CBF_PLUGIN_PATH (colon separated), the build
 * tree (found relative to the running executable), the installed plugin
 * directory. In each directory, files cbf_*.so, and those one level of
 * subdirectories down (a build tree keeps each plugin in its own folder).
 * A file with a wrong ABI or without the entry symbol, or a second plugin
 * of a name already seen, is an error naming the file(s). */
typedef struct cbf_registry cbf_registry;

int cbf_registry_open(const char *const *dirs, size_t n_dirs, cbf_registry **out, cbf_error *err);
int cbf_registry_add_dir(cbf_registry *r, const char *dir, cbf_error *err);
void cbf_registry_close(cbf_registry *r);
size_t cbf_registry_count(const cbf_registry *r);
const cbf_plugin_desc *cbf_registry_at(const cbf_registry *r, size_t i);
const char *cbf_registry_path_at(const cbf_registry *r, size_t i);
const cbf_plugin_desc *cbf_registry_find(const cbf_registry *r, const char *name);

/* ---- Graph: one pipeline YAML. ----
 * cbf_graph_load parses, applies overrides ("node.param=value", as YAML
 * scalars or flow sequences), resolves plugins and validates everything
 * that can be checked without running: on failure it returns CBF_ECONFIG
 * (or CBF_EPLUGIN) with a message starting "file:line:column: ". */
typedef struct cbf_graph cbf_graph;

int cbf_graph_load(const char *path, const char *const *overrides, size_t n_overrides,
                   cbf_registry *reg, cbf_graph **out, cbf_error *err);
void cbf_graph_free(cbf_graph *g);

/* ---- Running. ---- */
/* Named counters and gauges a node may have (cbf_node_counter,
 * cbf_node_gauge); more are refused with a warning. */
#define CBF_MAX_NODE_COUNTERS 32
#define CBF_MAX_NODE_GAUGES 16

typedef struct cbf_node_stats {
    const char *name;
    const char *plugin;
    uint64_t buffers_in, buffers_out;
    double wait_input_s;       /* blocked in cbf_port_recv */
    double wait_output_s;      /* blocked in cbf_pool_get or on a full queue */
    double busy_s;
    uint64_t bytes_out;
    int n_counters;
    const char *counter_names[CBF_MAX_NODE_COUNTERS];
    uint64_t counter_values[CBF_MAX_NODE_COUNTERS];
    int n_gauges;              /* values NaN until set */
    const char *gauge_names[CBF_MAX_NODE_GAUGES];
    double gauge_values[CBF_MAX_NODE_GAUGES];
} cbf_node_stats;

typedef struct cbf_engine cbf_engine;

/* Initialises every node (upstream first); a plugin's init error is
 * returned with the node name and YAML place prefixed; nothing is started. */
int cbf_engine_create(cbf_graph *g, cbf_engine **out, cbf_error *err);
/* Starts one thread per node and waits until the graph has drained (finite
 * sources ended, or cbf_engine_stop). Then runs fini and checks pools:
 * returns the first node error, or CBF_ELEAK, else 0. */
int cbf_engine_run(cbf_engine *e, cbf_error *err);
/* Async-signal-safe: asks sources to stop and the graph to drain. */
void cbf_engine_stop(cbf_engine *e);
/* Snapshot for progress displays (callable from another thread while running). */
size_t cbf_engine_stats(const cbf_engine *e, cbf_node_stats *out, size_t max);
double cbf_engine_elapsed(const cbf_engine *e);
void cbf_engine_free(cbf_engine *e);

#ifdef __cplusplus
}
#endif
#endif
