/* graph_model.h (private to libcbf): the validated pipeline, as the loader
 * (graph.c) hands it to the engine (engine.c). Everything here has already
 * been checked: plugins resolved, parameters typed and in range, edges join
 * existing ports of accepted buffer types, no fan-out into an input that
 * writes its buffers, required ports wired, no cycle. The harness
 * (harness.c) makes one such node without a graph. */
#ifndef CBF_GRAPH_MODEL_H
#define CBF_GRAPH_MODEL_H

#include <stddef.h>
#include "cbf/graph.h"
#include "cbf/plugin.h"
#include "base/timeref.h"

#define CBF_WHERE_MAX 512   /* "file:line:column" */

typedef enum cbf_gpu_mode {
    CBF_GPU_AUTO = 0,       /* use a GPU when one is there, else CPU (said once in the log) */
    CBF_GPU_REQUIRED = 1,   /* no GPU is a start-up error */
    CBF_GPU_NONE = 2,       /* CPU path even when a GPU is there */
} cbf_gpu_mode;

typedef struct cbf_engine_settings {
    char *name;                 /* engine.name, default: the YAML file's stem */
    cbf_gpu_mode gpu;           /* engine.gpu: auto | required | none */
    int gpu_device;             /* engine.gpu_device, default 0 */
    size_t queue_depth;         /* engine.queue_depth: default edge depth (4) */
    char *control;              /* engine.control: ZeroMQ REP endpoint, or NULL */
    char *sensors;              /* engine.sensors: ZeroMQ PUB endpoint, or NULL */
    double sensor_period;       /* engine.sensor_period in seconds (1.0) */
    char *prometheus;           /* engine.prometheus: HTTP address of /metrics, or NULL */
    char prometheus_where[CBF_WHERE_MAX];   /* of its value, for errors found when binding */
    char *katcp;                /* engine.katcp: katcp v5 server address, or NULL */
    char katcp_where[CBF_WHERE_MAX];
    double katcp_idle_timeout;  /* engine.katcp_idle_timeout: seconds a katcp client may send
                                   nothing (300); 0: no limit */
    bool read_only;             /* engine.read_only: refuse requests that change the signal path */
    char read_only_where[CBF_WHERE_MAX];
    bool has_sync_time;         /* engine.sync_time: UNIX seconds of ADC sample 0 */
    cbf_unix_time sync_time;
    char sync_time_where[CBF_WHERE_MAX];
    long double adc_sample_rate; /* engine.adc_sample_rate in Hz; 0: not given */
    char adc_sample_rate_where[CBF_WHERE_MAX];
    char where[CBF_WHERE_MAX];  /* of the engine mapping */
} cbf_engine_settings;

typedef struct cbf_graph_node {
    char *name;
    const cbf_plugin_desc *plugin;
    char *plugin_path;          /* the .so it came from */
    cbf_params *params;         /* validated values (params.c) */
    char where[CBF_WHERE_MAX];  /* of the node's mapping */
} cbf_graph_node;

typedef struct cbf_graph_edge {
    size_t from_node, from_port;   /* node index, index into plugin->ports */
    size_t to_node, to_port;
    int to_index;                  /* which edge of a multi input (YAML order), else 0 */
    size_t depth;                  /* queue depth */
    char where[CBF_WHERE_MAX];
} cbf_graph_edge;

struct cbf_graph {
    char *path;
    cbf_engine_settings engine;
    cbf_registry *reg;             /* borrowed: outlives the graph */
    size_t n_nodes;
    cbf_graph_node *nodes;         /* topological order: producers before consumers */
    size_t n_edges;
    cbf_graph_edge *edges;
};

/* params.c, used by graph.c; exposed here for unit tests of validation. */
void cbf_params_free(cbf_params *p);

/* registry.c: a descriptor's ABI and declarations, as checked when its file
 * is loaded (also for one handed to the harness). CBF_EPLUGIN naming what. */
int cbf_registry_check_desc(const cbf_plugin_desc *d, cbf_error *err);

#endif
