/* sensors_json.h (private to libcbf): the engine's node sensors as one
 * JSON object (sensors_json.c), read through the engine view. The ZeroMQ
 * plane publishes it (with rates) and answers its `sensors` request with
 * it; the katcp front end flattens it into its NODE.NAME sensors; so both
 * show the same values under the same rules. */
#ifndef CBF_SENSORS_JSON_H
#define CBF_SENSORS_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cbf/graph.h"

#ifndef CBF_FE_HIDDEN
#define CBF_FE_HIDDEN __attribute__((visibility("hidden")))
#endif

/* One node's counts at the last publication, for rates. */
typedef struct cbf_fe_node_counts {
    uint64_t buffers_in, buffers_out, bytes_out;
} cbf_fe_node_counts;

/* {NODE: {plugin, buffers_in, ..., queues: {NAME: {fill, depth}},
 * counters, gauges, texts, status, updated}, ...}: runtime counts, queue
 * fills, plugin counters, gauges and texts, each with its status and the
 * UNIX time its value last changed (docs/control.md). prev (one per node,
 * or NULL): with dt > 0 the rates since then are added (NAME_per_s);
 * advance: the counts now are stored in it. NULL when out of memory. */
CBF_FE_HIDDEN json_t *cbf_fe_sensors_nodes(cbf_engine *e, cbf_fe_node_counts *prev, double dt, bool advance);

#endif
