/* dumps.h: a node's correlation dumps, the stage code the correlator and
 * xbengine plugins share (built here as the static library
 * cbf_corr_stage). Dumps hold heap_accumulation_threshold batches and
 * start at multiples of that interval in timestamp (auto-resync), so a dump
 * may begin or end inside an input buffer; the presence flags of a dump
 * say, per (batch of the dump, antenna), whether data arrived. A dump only
 * partly seen at the start of the stream goes out with its unseen batches
 * flagged missing; the unfinished dump at the end of the stream is dropped
 * and counted.
 *
 * cbf_corr_dumps_add cuts an input buffer at the dumps' edges and hands
 * each piece to the caller as a correlator job on the open dump's
 * accumulators (the caller runs the kernels: the correlator's, or the
 * one kernel that also forms beams); a dump closed by a piece goes out at
 * once, on the GPU with its event recorded on the stream after the piece's
 * kernels. */
#ifndef CBF_CORR_DUMPS_H
#define CBF_CORR_DUMPS_H

#include <cbf/cbf.h>

#include <stdint.h>

#include "correlator.h"

/* The correlation parameters both plugins take. */
#define CBF_CORR_PARAMS                                                                           \
    {.name = CBF_ATTR_HEAP_ACCUMULATION_THRESHOLD, .type = CBF_PARAM_INT, .def = "4",            \
     .has_range = 1, .min = 1, .max = 1 << 24, .doc = "batches per dump"},                      \
    {.name = "slices", .type = CBF_PARAM_INT, .def = "0", .has_range = 1, .min = 0,              \
     .max = 65535,                                                                              \
     .doc = "GPU: accumulator slices (one per blockIdx.z), 0 = enough to fill the GPU; the CPU " \
            "and the Hopper kernel add into slice 0 alone"},                                    \
    {.name = "block_ants", .type = CBF_PARAM_CHOICE, .def = "auto", .choices = "auto|32|48|64",  \
     .doc = "GPU: antennas per thread block of the tensor-core kernel"}

typedef struct cbf_corr_dumps {
    cbf_port *out;
    cbf_pool *pool;
    cbf_corr_shape shape;
    int batches;             /* per input buffer */
    int64_t batch_step, dump_batches;
    cbf_buffer *acc;         /* the open dump, or NULL */
    int64_t open_dump;
    int slices;              /* accumulator slices per buffer (1 on the CPU) */
    size_t acc_bytes, in_bytes;
    void *stream;            /* GPU: the kernels' (clears, events); NULL on the CPU */
    cbf_corr_cuda *plan;     /* GPU */
    cbf_counter *c_dumps, *c_dropped;
} cbf_corr_dumps;

/* The shape from the node's X-engine input and its parameters
 * (CBF_CORR_PARAMS); on the GPU (stream not NULL) the plan and slices. On
 * failure cbf_corr_dumps_fini frees what was made (d is zeroed first). */
int cbf_corr_dumps_init(cbf_corr_dumps *d, cbf_node *node, const cbf_port_desc *in, void *stream,
                        cbf_error *err);
/* Opens the output port `out` with `buffers` accumulator buffers. */
int cbf_corr_dumps_open(cbf_corr_dumps *d, cbf_node *node, cbf_port *out,
                        const cbf_port_desc *in, size_t buffers, cbf_error *err);
/* Drops the open dump (the caller has waited for the stream). */
void cbf_corr_dumps_fini(cbf_corr_dumps *d);

/* One piece of an input buffer: job->batch_begin..batch_end of the buffer
 * (job->in its samples, device memory on the GPU) into the open dump. */
typedef int (*cbf_corr_piece_fn)(void *user, const cbf_corr_job *job, cbf_error *err);
/* Cuts `in` (samples at data) at the dumps' edges, opening and sending
 * dumps around the pieces. */
int cbf_corr_dumps_add(cbf_corr_dumps *d, const cbf_buffer *in, const uint8_t *data,
                       cbf_corr_piece_fn piece, void *user, cbf_error *err);
/* The correlator's kernels for one piece (the CPU's or the plan's). */
int cbf_corr_dumps_kernel(cbf_corr_dumps *d, const cbf_corr_job *job, cbf_error *err);
/* The end of the stream: the unfinished dump is dropped and counted. */
void cbf_corr_dumps_end(cbf_corr_dumps *d);

#endif
