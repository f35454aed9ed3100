/* cbf/node.h: what a plugin sees of the node it runs as. */
#ifndef CBF_NODE_H
#define CBF_NODE_H

#include <stdbool.h>
#include <stdint.h>
#include "cbf/buffer.h"
#include "cbf/error.h"
#include "cbf/params.h"
#include "cbf/port.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cbf_node cbf_node;

const char *cbf_node_name(const cbf_node *n);
/* The plugin name, e.g. "pfb". */
const char *cbf_node_plugin(const cbf_node *n);
const cbf_params *cbf_node_params(const cbf_node *n);

/* The port of that declared name; for a port declared `multi`, index picks
 * one of its edges in YAML order. NULL when the port is not wired (an
 * optional port) or index is out of range. */
cbf_port *cbf_node_port(cbf_node *n, const char *name, int index);
/* How many edges are wired to the named port (0 for an unwired optional one). */
int cbf_node_port_count(const cbf_node *n, const char *name);

/* First thing on a thread a plugin starts for node n (the node's own thread
 * is named by the engine): names the OS thread "<node>/<role><index>"
 * (15 characters at most, the node name shortened first), which is what
 * top -H, perf and cbf-bench's thread profile show, and prefixes the
 * thread's log lines with the node's name. */
void cbf_node_thread_start(const cbf_node *n, const char *role, int index);

/* Plugin-private state, set in init, freed by the plugin in fini. */
void *cbf_node_state(const cbf_node *n);
void cbf_node_set_state(cbf_node *n, void *state);

/* Whether the engine decided this run uses the GPU (engine `gpu:` setting
 * and what is present), and which device: the core has already called
 * cudaSetDevice on the node's thread. */
bool cbf_node_use_gpu(const cbf_node *n);
int cbf_node_gpu_device(const cbf_node *n);

/* The engine's time reference (engine keys sync_time and adc_sample_rate,
 * docs/control.md "Time"): returns whether the YAML gave sync_time (UNIX
 * seconds of ADC sample 0), with *sync_time; *adc_sample_rate is the
 * engine's rate in Hz, 0 when not given. False, 0 for a harness's node.
 * Either pointer may be NULL. */
bool cbf_node_time_ref(const cbf_node *n, double *sync_time, double *adc_sample_rate);
/* UNIX seconds of ADC timestamp ts through the engine's reference; NaN
 * when the engine has no sync_time. */
double cbf_node_unix_time(const cbf_node *n, int64_t ts);
/* The ADC timestamp of UNIX time unix_s, rounded to the nearest sample.
 * CBF_EINVAL when the engine has no sync_time. */
int cbf_node_timestamp_of(const cbf_node *n, double unix_s, int64_t *ts);

/* Sources poll this between buffers: true once SIGINT/SIGTERM or an error
 * elsewhere asks the graph to drain. A source then returns from run; the
 * core closes its outputs and the end of stream flows downstream. */
bool cbf_node_stopping(const cbf_node *n);

/* Makes a pool owned by this node (named "<node>.<cfg->name>"); the engine
 * checks and frees it after every thread has finished. Call from init. */
int cbf_node_pool_create(cbf_node *n, const cbf_pool_config *cfg, cbf_pool **out, cbf_error *err);

/* Named counters of the node (samples, drops, saturated, ...): printed in
 * the table at exit and published as sensors. Handles live as long as the
 * node; add is thread-safe and lock-free. Call cbf_node_counter from init. */
typedef struct cbf_counter cbf_counter;
cbf_counter *cbf_node_counter(cbf_node *n, const char *name);
void cbf_counter_add(cbf_counter *c, uint64_t v);
void cbf_counter_set(cbf_counter *c, uint64_t v);
uint64_t cbf_counter_get(const cbf_counter *c);

/* Named floating-point sensors of a node (digitiser power in dBFS, GPU
 * milliseconds per buffer, ...): published with the counters. Call
 * cbf_node_gauge from init; set from any thread. NaN means "no value yet". */
typedef struct cbf_gauge cbf_gauge;
cbf_gauge *cbf_node_gauge(cbf_node *n, const char *name);
void cbf_gauge_set(cbf_gauge *g, double v);
double cbf_gauge_get(const cbf_gauge *g);

/* Every sensor (counter, gauge, text, and the runtime's own) carries a
 * status, katcp's four, and the time it last changed; readers (the sensor
 * message, katcp, Prometheus, cbf-ctl) show both, and the engine's
 * `device-status` is the worst status of them all (unknown aside).
 * Without a rule a counter is nominal, and a gauge is nominal once it has
 * a value (unknown while NaN). */
typedef enum cbf_status {
    CBF_STATUS_UNKNOWN = 0,
    CBF_STATUS_NOMINAL,
    CBF_STATUS_WARN,
    CBF_STATUS_ERROR,
} cbf_status;
const char *cbf_status_name(cbf_status s);   /* "unknown", "nominal", "warn", "error" */

/* Rules, set from init. A counter that must not grow (saturation, clipped
 * samples) is `warn` while it has risen within the last CBF_RISE_HOLD_S
 * seconds, as the readers sample it. A gauge with a nominal range is
 * `warn` outside [lo, hi] (digitiser RMS: -30 to -10 dBFS, as katgpucbf). */
#define CBF_RISE_HOLD_S 10.0
void cbf_counter_warn_on_rise(cbf_counter *c);
void cbf_gauge_nominal_range(cbf_gauge *g, double lo, double hi);
/* A value and its status together, for a gauge whose status the plugin
 * decides (receiver synchronised: 1 nominal, 0 error). Once called, the
 * gauge keeps the status given last instead of its range rule. */
void cbf_gauge_set_status(cbf_gauge *g, double v, cbf_status st);

/* A sensor's units ("dBFS", "s", "B"; "" or NULL: none) and one-line
 * description, shown by katcp's ?sensor-list: call from init, after
 * making it. Both are copied (units up to 15 characters, the description
 * up to 159). Without one a reader makes a plain description from the
 * name. */
void cbf_counter_describe(cbf_counter *c, const char *units, const char *doc);
void cbf_gauge_describe(cbf_gauge *g, const char *units, const char *doc);

/* Named text sensors (beam weights in force, an applied delay model): any
 * number per node, made from init, set from any thread (the value is
 * copied, up to CBF_TEXT_MAX bytes; longer values are cut and end in
 * "..."). Until the first set a text is empty and unknown. */
#define CBF_TEXT_MAX (4u << 20)   /* room for katgpucbf's gain list of 32768 channels */
typedef struct cbf_text cbf_text;
cbf_text *cbf_node_text(cbf_node *n, const char *name);
void cbf_text_set(cbf_text *t, const char *value, cbf_status st);
void cbf_text_describe(cbf_text *t, const char *units, const char *doc);

/* katgpucbf's names over katcp (docs/control.md "katcp"), so that an
 * engine is a drop-in for katgpucbf's. Over katcp every sensor is
 * NODE.NAME ('_' as '-'): an integer (a counter), a float (a gauge) or a
 * string (a text). cbf_*_katcp publishes it also under `name` exactly as
 * given (letters, digits, '.', '-', '_'): as NODE.name, the node standing
 * for katgpucbf's stream (fft_post's `input0.eq` is `post.input0.eq`), or,
 * with CBF_SENSOR_ENGINE, as name alone, katgpucbf's engine-level form
 * (`input0.dig-rms-dbfs`). An engine-level name that several nodes claim
 * is published as NODE.name for each (with a warning at start): no node's
 * value hides another's. The other flags give katgpucbf's katcp type where
 * it is not the kind's own: a gauge as a boolean (0 false, else true) or a
 * timestamp (UNIX seconds; NaN reads -1 and unknown) or an integer (a
 * whole-number gauge, rounded), a text as an integer or a float (the text
 * is its value, as katcp writes it). One
 * name per sensor (a later call replaces it); call from init, after
 * making the sensor. Where the name equals NODE.NAME it is published once. */
enum {
    CBF_SENSOR_ENGINE = 1u << 0,
    CBF_SENSOR_BOOLEAN = 1u << 1,
    CBF_SENSOR_TIMESTAMP = 1u << 2,
    CBF_SENSOR_INTEGER = 1u << 3,
    CBF_SENSOR_FLOAT = 1u << 4,
};
void cbf_counter_katcp(cbf_counter *c, const char *name, unsigned flags);
void cbf_gauge_katcp(cbf_gauge *g, const char *name, unsigned flags);
void cbf_text_katcp(cbf_text *t, const char *name, unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
