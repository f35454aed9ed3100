/* metrics.h (private to libcbf): the Prometheus exporter (engine key
 * `prometheus:`, docs/control.md).
 *
 * metrics_text.c writes the text exposition format (version 0.0.4) from a
 * list of samples and knows nothing of the engine or of HTTP, so a unit test
 * compiles it alone (tests/control/test_metrics_text.c). metrics_names.c
 * holds katgpucbf's names for the node counters that mean the same thing.
 * metrics.c gathers an engine's samples and serves them with libmicrohttpd. */
#ifndef CBF_METRICS_H
#define CBF_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CBF_METRICS_HIDDEN __attribute__((visibility("hidden")))

typedef enum cbf_metric_type { CBF_METRIC_COUNTER, CBF_METRIC_GAUGE } cbf_metric_type;

typedef struct cbf_metric_label {
    const char *name;    /* a valid label name: the caller's own, never user text */
    const char *value;   /* any UTF-8 text: escaped when written */
} cbf_metric_label;

/* ---- metrics_text.c ---- */
typedef struct cbf_metrics_text cbf_metrics_text;

CBF_METRICS_HIDDEN cbf_metrics_text *cbf_metrics_text_new(void);
CBF_METRICS_HIDDEN void cbf_metrics_text_free(cbf_metrics_text *t);
/* One sample of family `name` (made a valid metric name: other characters
 * become '_'). A counter's sample is written as name + "_total". A family
 * keeps the type and help of its first sample; a sample of another type
 * under a taken name goes to name + "_" + its type word ("_gauge",
 * "_counter"), so the page stays valid whatever names the nodes chose.
 * Integers are written exactly; 0 or CBF_ENOMEM. */
CBF_METRICS_HIDDEN int cbf_metrics_text_add_int(cbf_metrics_text *t, const char *name,
                                                cbf_metric_type type, const char *help,
                                                const cbf_metric_label *labels, size_t n_labels,
                                                uint64_t value);
CBF_METRICS_HIDDEN int cbf_metrics_text_add_float(cbf_metrics_text *t, const char *name,
                                                  cbf_metric_type type, const char *help,
                                                  const cbf_metric_label *labels, size_t n_labels,
                                                  double value);
/* The page: families in the order first added, each with its HELP and TYPE
 * lines before its samples. A malloc'd NUL-terminated string (its length in
 * *len), or NULL when out of memory. */
CBF_METRICS_HIDDEN char *cbf_metrics_text_render(const cbf_metrics_text *t, size_t *len);

/* ---- metrics_names.c ---- */
typedef struct cbf_metric_alias {
    const char *plugin, *counter;
    const char *input_prefix;   /* only when the node's input type starts so; NULL: any */
    const char *name;           /* katgpucbf's, without its namespace and "_total" */
    const char *help;
    const char *label, *label_value;   /* an extra label (katgpucbf's "pol"), or NULL */
} cbf_metric_alias;

/* katgpucbf's name for counter `counter` of a node of `plugin` whose input
 * has type `input_type` (NULL: none), or NULL when it has none. */
CBF_METRICS_HIDDEN const cbf_metric_alias *cbf_metrics_alias(const char *plugin, const char *counter,
                                                              const char *input_type);

/* What a node sensor means where a name alone would mislead: a counter
 * that holds a timestamp (a value, so a gauge: it is not a count of
 * events), a gauge that holds a configuration value (a label of the
 * node's cbf_node_config_info, the Prometheus idiom, not a number to
 * graph), and the help text of gauges the exporter would otherwise
 * describe by name only. */
typedef struct cbf_metric_meaning {
    const char *plugin;    /* NULL: any (the runtime's own, or a name several plugins share) */
    const char *sensor;    /* the counter's or gauge's name */
    bool config;           /* a configuration value: label `sensor` of cbf_node_config_info */
    bool boolean;          /* (config) written true/false, not 1/0 */
    const char *help;
} cbf_metric_meaning;

/* The meaning of sensor `sensor` of a node of `plugin`, or NULL. */
CBF_METRICS_HIDDEN const cbf_metric_meaning *cbf_metrics_meaning(const char *plugin, const char *sensor);
/* cbf_node_config_info's help: every configuration label the table has. */
CBF_METRICS_HIDDEN extern const char cbf_metrics_config_help[];

#endif
