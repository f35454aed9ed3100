/* stage/flow.h: how buffers leave a stage, what every producer would
 * otherwise write again: an output port with the pool its buffers come
 * from, and the loop of a source that fills numbered buffers until its
 * length or a stop (the receive loop of a filter is stage/input.h).
 *
 * The loop keeps the runtime's rules in one place: CBF_ESTOPPED means the
 * engine is stopping (a source unwinds quietly and returns 0 from run), and
 * a buffer taken is always sent or given back. */
#ifndef CBF_STAGE_FLOW_H
#define CBF_STAGE_FLOW_H

#include <stddef.h>
#include <stdint.h>
#include "cbf/buffer.h"
#include "cbf/error.h"
#include "cbf/node.h"
#include "cbf/port.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets out's descriptor to d and makes the node's pool for it, named after
 * the port: `count` buffers of d's payload, presence flags and aux bytes,
 * in d's memory kind. Call from init. */
int cbf_stage_out_open(cbf_node *node, cbf_port *out, const cbf_port_desc *d, size_t count,
                       cbf_pool **pool, cbf_error *err);

/* A source of numbered buffers: buffer k has seq k and timestamp
 * start + k x step. */
typedef struct cbf_stage_source {
    cbf_node *node;
    cbf_port *out;
    cbf_pool *pool;
    int64_t start, step;
    uint64_t buffers;        /* how many to send; 0: until the engine stops */
    size_t n_present;        /* presence flags per buffer */
    /* Writes buf's payload, every presence flag and buf->saturated (0 on
     * entry); seq and timestamp are set. */
    int (*fill)(void *user, cbf_buffer *buf, cbf_error *err);
    void *user;
    /* Added to per buffer: `units` to c_units (samples, batches: what a
     * buffer holds), buf->saturated to c_saturated, the flags left at 0 to
     * c_missing (also buf->missing). Any of them may be NULL. */
    uint64_t units;
    cbf_counter *c_units, *c_saturated, *c_missing;
} cbf_stage_source;

/* Sends src->buffers buffers (or until cbf_node_stopping): 0 when done or
 * stopped, else the error of getting or filling a buffer. */
int cbf_stage_source_run(const cbf_stage_source *src, cbf_error *err);

/* An optional output recording what a stage put in force (a gain table, a
 * delay model) and from which timestamp: one small host buffer per change,
 * made only when the port is wired, so a sink can keep runtime changes
 * beside the data they changed. */
typedef struct cbf_stage_record {
    cbf_port *out;           /* NULL: the port is not wired, nothing is recorded */
    cbf_pool *pool;
    uint64_t seq;            /* records sent */
    size_t bytes;
} cbf_stage_record;

/* Opens the output named `port` when it is wired: d (type and axes set by
 * the caller, host memory) gets the numeric attributes of `like` (the data
 * the records belong to). Call from init. */
int cbf_stage_record_open(cbf_node *node, const char *port, cbf_port_desc *d,
                          const cbf_port_desc *like, cbf_stage_record *r, cbf_error *err);
/* Sends a copy of payload (the descriptor's bytes) as in force from ts;
 * 0 and nothing when unwired. Returns 0 or CBF_ESTOPPED. */
int cbf_stage_record_send(cbf_stage_record *r, const void *payload, int64_t ts);

#ifdef __cplusplus
}
#endif
#endif
