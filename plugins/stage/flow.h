/* stage/flow.h: how buffers enter and leave a stage, the loops every
 * source and filter would otherwise write again: an output port with the
 * pool its buffers come from, the receive loop of a filter, and the loop of
 * a source that fills numbered buffers until its length or a stop.
 *
 * They keep the runtime's rules in one place: CBF_EOS is the normal end,
 * CBF_ESTOPPED means the engine is stopping (a plugin unwinds quietly and
 * returns 0 from run), and a buffer taken is always given back. */
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

/* What a filter does with one input buffer; it must not drop the caller's
 * reference (cbf_stage_pull does, after fn returns). */
typedef int (*cbf_stage_buffer_fn)(void *user, cbf_buffer *in, cbf_error *err);

/* Receives every buffer of `in` in turn and hands it to fn. Returns 0 at
 * the end of the stream, CBF_ESTOPPED when the engine stops, or fn's error
 * (at the first one). */
int cbf_stage_pull(cbf_port *in, cbf_stage_buffer_fn fn, void *user, cbf_error *err);

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
    cbf_stage_buffer_fn fill;
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

#ifdef __cplusplus
}
#endif
#endif
