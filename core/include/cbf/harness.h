/* cbf/harness.h: one plugin, one thread, no YAML: a test harness for stage
 * plugins (GStreamer's GstHarness is the model).
 *
 * A test makes a harness for one plugin with its parameters, describes
 * what an upstream producer would put on each input, runs init, pushes
 * buffers (and requests, in order between them), ends the inputs, runs the
 * plugin's run() on its own thread until it returns, and pulls what came
 * out of each output:
 *
 *   cbf_harness *h;
 *   const char *params[] = {"window=hann", "gains=[1, 0.5]"};
 *   cbf_harness_new("rms", params, 2, &h, &err);
 *   cbf_harness_set_input_desc(h, "in", &adc, &err);   // as a producer's init would
 *   cbf_harness_init(h, &err);                          // the plugin's init
 *   cbf_buffer *b;
 *   cbf_harness_new_buffer(h, "in", &b, &err);           // shaped by the descriptor
 *   ... fill b->data, b->timestamp, b->present ...
 *   cbf_harness_push(h, "in", b, &err);
 *   cbf_harness_request(h, "gain", args, 1, &reply, &err);  // between buffers
 *   cbf_harness_end(h, NULL);
 *   cbf_harness_run(h, &err);                           // run() until it returns
 *   while (cbf_harness_pull(h, "out", &b) == 0) { ...check...; cbf_buffer_unref(b); }
 *   cbf_harness_free(h, &err);                          // fini, then the leak check
 *
 * Everything a plugin calls is the real libcbf: parameters are validated by
 * the loader's code (same messages, same syntax as YAML values), ports,
 * descriptors, pools, counters, gauges and the request mailbox are the
 * engine's; only the edges and the thread differ.
 *
 * One thread, and why it cannot deadlock. The plugin's run() runs on the
 * test's thread, so nobody could take its outputs or return its buffers
 * while it runs. Hence, in harness mode only:
 *  - each output goes into an unbounded queue the test pulls from after
 *    run() returns (a send never blocks);
 *  - each input is an unbounded queue filled, in the order the test pushed,
 *    whenever the plugin asks for its next buffer (cbf_port_recv, also
 *    from helper threads of its own); when the test's queue is used up
 *    every input ends, even without cbf_harness_end, since nothing more
 *    could ever come;
 *  - a pool of the node that runs dry grows by one buffer instead of
 *    waiting for one to come back, and the harness counts it (pool_grown in
 *    cbf_harness_stats): a test can thus also see how many buffers the
 *    plugin holds at once. Host payloads taken from the node's pools are
 *    filled with 0xa5 first, so output the plugin forgot to write shows.
 * The cost is memory proportional to what the test pushes, which is small
 * in tests; back-pressure itself is the engine's to test.
 *
 * Requests go through the node's real mailbox, and the plugin's `request`
 * runs inside cbf_port_recv, between buffers, as in the engine: a request
 * queued after buffer k and before buffer k+1 of an input is handled
 * before run() receives buffer k+1. A source (no inputs) gets one queued
 * request each time it calls cbf_node_stopping. Requests not delivered when
 * run() returns are answered CBF_ESTOPPED, as the engine does.
 *
 * The node is named after the plugin, its place is "harness", and it runs
 * the CPU path (cbf_node_use_gpu is false). Every declared port is wired to
 * the harness, the optional ones too, each with one edge (a `multi` input
 * gets one). Buffers made by cbf_harness_new_buffer are host memory. */
#ifndef CBF_HARNESS_H
#define CBF_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include "cbf/buffer.h"
#include "cbf/error.h"
#include "cbf/plugin.h"
#include "cbf/port.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cbf_harness cbf_harness;

/* Finds the plugin as cbf-run does (the registry of cbf/graph.h:
 * $CBF_PLUGIN_PATH, the build tree, the installed directory) and validates
 * params, each "name=value" with value written as in YAML: a number, a
 * word, or a flow list "[a, b]". Errors are the loader's (CBF_ECONFIG for
 * a bad parameter, CBF_EPLUGIN for a broken plugin file). */
int cbf_harness_new(const char *plugin, const char *const *params, size_t n_params,
                    cbf_harness **out, cbf_error *err);
/* The same for a descriptor already in hand (a plugin compiled into the
 * test); its declarations are checked as the registry checks a file's. */
int cbf_harness_new_desc(const cbf_plugin_desc *desc, const char *const *params, size_t n_params,
                         cbf_harness **out, cbf_error *err);

/* What an upstream producer would have set on the input port (copied).
 * Before cbf_harness_init; an input left without one reads NULL. */
int cbf_harness_set_input_desc(cbf_harness *h, const char *port, const cbf_port_desc *desc,
                               cbf_error *err);
/* Runs the plugin's init; its error comes back as the engine reports it.
 * Called by cbf_harness_run when the test has not. */
int cbf_harness_init(cbf_harness *h, cbf_error *err);
/* The descriptor the plugin set on an output in init, or NULL. */
const cbf_port_desc *cbf_harness_output_desc(const cbf_harness *h, const char *port);
/* The node, for what cbf/node.h offers a test (params, state). */
cbf_node *cbf_harness_node(cbf_harness *h);

/* A host buffer shaped for the input: cbf_port_desc_bytes of its
 * descriptor (which must be set), its n_present flags (all 1) and aux_size
 * bytes of aux, payload and aux zeroed, timestamp and seq 0. The test owns
 * the one reference until it pushes the buffer. */
int cbf_harness_new_buffer(cbf_harness *h, const char *port, cbf_buffer **out, cbf_error *err);
/* Queues a buffer for the input, handing over the caller's reference (also
 * on failure). Before cbf_harness_run. */
int cbf_harness_push(cbf_harness *h, const char *port, cbf_buffer *buf, cbf_error *err);
/* Ends one input (NULL: all): after what was pushed so far, it reports
 * end of stream. */
int cbf_harness_end(cbf_harness *h, const char *port, cbf_error *err);

/* Queues request `name` with args ("name=value", as for params), after
 * what was pushed so far. The arguments are validated now, by the same
 * code as the control plane's (an error returns here, nothing queued); the
 * plugin's answer is in *reply once run() has taken it. The harness owns
 * the reply (freed by cbf_harness_free). */
typedef struct cbf_harness_reply cbf_harness_reply;
int cbf_harness_request(cbf_harness *h, const char *name, const char *const *args, size_t n_args,
                        cbf_harness_reply **reply, cbf_error *err);
/* 1 while not yet delivered; else the plugin's return code (0 or a
 * negative CBF_E*), with its message in err. */
int cbf_harness_reply_status(const cbf_harness_reply *r, cbf_error *err);
/* Fields the plugin added to the reply: 0, or CBF_EINVAL when absent or
 * of another type. The string lives as long as the harness. */
int cbf_harness_reply_int(const cbf_harness_reply *r, const char *key, int64_t *v);
int cbf_harness_reply_float(const cbf_harness_reply *r, const char *key, double *v);
int cbf_harness_reply_string(const cbf_harness_reply *r, const char *key, const char **v);

/* Runs the plugin's run() on this thread until it returns (once). A
 * negative code is the plugin's error, prefixed as the engine prefixes it. */
int cbf_harness_run(cbf_harness *h, cbf_error *err);
/* The next buffer the plugin sent on the output, in order: 0 (the caller
 * owns one reference), or CBF_EOS when none is left. */
int cbf_harness_pull(cbf_harness *h, const char *port, cbf_buffer **out);

typedef struct cbf_harness_stats {
    uint64_t pool_grown;     /* buffers added to the node's pools because one ran dry */
    uint64_t pushed;         /* buffers the test pushed */
    uint64_t received;       /* of those, taken by the plugin (cbf_port_recv) */
    uint64_t sent;           /* buffers the plugin sent, all outputs */
    uint64_t requests;       /* requests the plugin handled */
} cbf_harness_stats;
void cbf_harness_get_stats(const cbf_harness *h, cbf_harness_stats *out);
/* A counter or gauge of the node by name: 0, or CBF_EINVAL when the
 * plugin made none of that name. */
int cbf_harness_counter(const cbf_harness *h, const char *name, uint64_t *v);
int cbf_harness_gauge(const cbf_harness *h, const char *name, double *v);

/* Releases what is still queued, runs fini (when init ran), then checks
 * every pool as the engine does: CBF_ELEAK naming the pool when a buffer
 * never came back (the test's own unreleased ones count too), else 0.
 * NULL is accepted. */
int cbf_harness_free(cbf_harness *h, cbf_error *err);

#ifdef __cplusplus
}
#endif
#endif
