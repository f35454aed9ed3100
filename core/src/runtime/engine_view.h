/* engine_view.h (private to libcbf): what a front end (frontends/) may read
 * of a running engine and do to it, and nothing more. A front end includes
 * this header and frontend.h, never runtime.h: nodes, ports and engines
 * are opaque here, so the structure of the runtime can change without a
 * front end noticing. Every function may be called from a front end's own
 * threads while the engine runs (each takes the locks it needs).
 *
 * What the view gives: the validated graph (graph_model.h, read-only),
 * each node's runtime counts (cbf_engine_stats, cbf/graph.h), its input
 * queues, its counters, gauges and texts with their status, the engine's
 * device status, a plugin request handed to its node and the answer, and
 * the engine's stop. */
#ifndef CBF_ENGINE_VIEW_H
#define CBF_ENGINE_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cbf/control.h"
#include "cbf/graph.h"
#include "cbf/node.h"
#include "graph/graph_model.h"

#ifndef CBF_RT_HIDDEN
#define CBF_RT_HIDDEN __attribute__((visibility("hidden")))
#endif

/* ---- the graph and its nodes (engine.c, node.c) ---- */
CBF_RT_HIDDEN const cbf_graph *cbf_rt_engine_graph(const cbf_engine *e);
/* Node i in graph order (i < the graph's n_nodes), else NULL. */
CBF_RT_HIDDEN cbf_node *cbf_rt_engine_node(cbf_engine *e, size_t i);
/* The input queue of edge i: its name, buffers waiting, capacity. */
CBF_RT_HIDDEN const char *cbf_rt_engine_queue(cbf_engine *e, size_t i, size_t *fill, size_t *depth);
/* Input queue k of node n, in the order of its port declarations (a
 * multi-input's edges in index order): its name, fill and depth; NULL
 * past the last. */
CBF_RT_HIDDEN const char *cbf_rt_node_queue(cbf_node *n, size_t k, size_t *fill, size_t *depth);

/* Every node with a timed request has this counter (engine.c, request.c):
 * katgpucbf's steady-state-timestamp, per node; over katcp also the
 * engine's, the largest over its nodes. */
#define CBF_RT_STEADY_STATE "steady_state_timestamp"

/* ---- clocks ---- */
CBF_RT_HIDDEN uint64_t cbf_rt_now_ns(void);   /* CLOCK_MONOTONIC */
CBF_RT_HIDDEN double cbf_rt_unix_now(void);   /* UNIX seconds */

/* ---- sensors (sensor.c) ----
 * Counter and gauge k are the ones cbf_engine_stats names at index k. */
/* A reader's look at counter / gauge k of n at time now: its value, its
 * status by the rules, and when its value last changed as seen by readers
 * (the first look at a value counts as its change). */
CBF_RT_HIDDEN cbf_status cbf_rt_counter_look(cbf_node *n, int k, double now, uint64_t *v, double *updated);
CBF_RT_HIDDEN cbf_status cbf_rt_gauge_look(cbf_node *n, int k, double now, double *v, double *updated);
/* Text sensor i of n (i < cbf_rt_text_count): name, a malloc'd copy of the
 * value ("" before the first set; NULL when out of memory), status, time set. */
CBF_RT_HIDDEN size_t cbf_rt_text_count(cbf_node *n);
CBF_RT_HIDDEN const char *cbf_rt_text_look(cbf_node *n, size_t i, char **value, cbf_status *st,
                                           double *updated);
/* What the plugin said of one of its sensors, for readers: units and a
 * one-line description (cbf_*_describe; "": none), and the name katgpucbf
 * gives it over katcp with how it reads there (cbf_*_katcp; katcp "":
 * none, flags CBF_SENSOR_*). Set from init, read-only afterwards. */
#define CBF_SENSOR_UNITS_MAX 16
#define CBF_SENSOR_DOC_MAX 160
#define CBF_SENSOR_KATCP_MAX 96
typedef struct cbf_rt_about {
    char units[CBF_SENSOR_UNITS_MAX], doc[CBF_SENSOR_DOC_MAX];
    char katcp[CBF_SENSOR_KATCP_MAX];
    unsigned katcp_flags;
} cbf_rt_about;
typedef enum cbf_rt_kind { CBF_RT_COUNTER, CBF_RT_GAUGE, CBF_RT_TEXT } cbf_rt_kind;
/* The about of n's sensor `name` of kind k; NULL when n has no such sensor. */
CBF_RT_HIDDEN const cbf_rt_about *cbf_rt_sensor_about(cbf_node *n, const char *name, cbf_rt_kind k);
/* The worst status over every node's counters, gauges and texts, unknown
 * aside (nominal when all are unknown): the engine's device-status. */
CBF_RT_HIDDEN cbf_status cbf_rt_engine_status(cbf_engine *e, double now);
/* katgpucbf's device-status words for a status: ok, degraded, fail. */
CBF_RT_HIDDEN const char *cbf_rt_device_status_word(cbf_status s);

/* ---- one plugin request, shared by the ZeroMQ and katcp front ends (request.c) ---- */
struct cbf_text_kv;
/* Finds the node answering `name` (the one named by `node`, or the only one
 * declaring it), checks the arguments (text, one YAML value each) against
 * the declaration, hands the request to the node and waits for its answer.
 * 0 with *reply (the plugin's fields; cbf_rt_reply_free it) and *node_at;
 * CBF_ENOTSUP: no such request (an unknown one); CBF_EINVAL: bad node or
 * arguments; else the node's refusal. The message is in err. */
CBF_RT_HIDDEN int cbf_rt_request_call(cbf_engine *e, const char *name, const char *node,
                                      const struct cbf_text_kv *args, size_t n_args, size_t *node_at,
                                      cbf_reply **reply, cbf_error *err);
CBF_RT_HIDDEN void cbf_rt_reply_free(struct cbf_reply *r);
CBF_RT_HIDDEN void *cbf_rt_reply_json(struct cbf_reply *r);   /* json_t *, borrowed */

#endif
