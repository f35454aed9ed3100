/* beamformer: X-engine batches in, B single-polarisation tied-array beams
 * out ("cbf.beam.batch"), one output buffer per input buffer with the same
 * timestamp, batches and presence flags. It takes the correlator's input
 * type and, like the correlator, never writes its input, so one receiver or
 * gather output fans out to both without a copy (the xbengine plugin does
 * both in one node, from one upload and, where it pays, one kernel).
 *
 * The beams, their coefficients and requests are the shared stage code of
 * beams.h (katgpucbf's conventions, changes exact to the spectrum).
 * Antennas flagged missing in a batch are left out of that batch's sums;
 * the output keeps the flags, from which a heap's beam_ants is counted.
 *
 * On the GPU the host never waits per buffer: host input is uploaded on a
 * stream of its own into two device slots in turn (stage/path.h), the
 * kernels write device memory, the per-beam saturation counts are copied
 * into the output's aux (pinned) behind them, and the buffer's event is
 * recorded after that copy. The output then waits in flight
 * (stage/flight.h) until its event has passed (normally while the next
 * buffer's work runs) and goes out with its counts summed into
 * `saturated`, the counters and the clip sensors (not at once, as the
 * correlator's dumps go: a buffer's metadata is complete when it is sent,
 * and `saturated` is the GPU's count). The CPU path goes through the same
 * flight (its outputs are complete when pushed). */
#include <cbf/cbf.h>

#include <stdlib.h>

#include "beams.h"
#include "stage/contracts/beam.h"
#include "stage/contracts/xeng.h"
#include "stage/flight.h"
#include "stage/flow.h"
#include "stage/input.h"
#include "stage/path.h"

static const cbf_param_decl bf_params[] = {
    CBF_BEAMS_PARAMS,
    {.name = "buffers", .type = CBF_PARAM_INT, .def = "3", .has_range = 1, .min = 2, .max = 64,
     .doc = "output buffers in the pool"},
};

static const cbf_port_decl bf_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = CBF_TYPE_XENG_BATCH,
     .doc = "X-engine batches (CI8)"},
    {.name = "out", .dir = CBF_PORT_OUT, .type = CBF_TYPE_BEAM_BATCH,
     .doc = "beams, CI8 [batch][beam][channel][spectrum], flags per (batch, antenna)"},
};

typedef struct bf {
    cbf_beams beams;             /* with the output pool and the flight */
    cbf_stage_path path;         /* its stream: everything but host input's uploads, in order */
} bf;

static void bf_fini(cbf_node *node)
{
    bf *s = cbf_node_state(node);
    if (!s)
        return;
    cbf_stage_path_fini(&s->path); /* first: nothing may still read what is freed below */
    cbf_beams_fini(&s->beams);
    free(s);
    cbf_node_set_state(node, NULL);
}

static int bf_init(cbf_node *node, cbf_error *err)
{
    bf *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    cbf_node_set_state(node, s);
    const cbf_stage_path *path = &s->path;
    int rc;
    if ((rc = cbf_stage_path_open(&s->path, node, "in", err)) ||
        (rc = cbf_beams_init(&s->beams, node, path->in, path->gpu, path->stream, err)) ||
        (rc = cbf_stage_path_upload_init(&s->path, s->beams.in_bytes, err)))
        return rc;
    if (path->gpu)
        cbf_log_info("beamformer on the GPU: %d beams, %d antennas, %s input",
                     s->beams.shape.n_beams, s->beams.shape.n_ants,
                     cbf_mem_kind_name(path->in->mem));
    return cbf_beams_open(&s->beams, node, cbf_node_port(node, "out", 0), path->in,
                          (size_t)cbf_params_int(cbf_node_params(node), "buffers"), err);
}

/* Beamforms `in` into `out`, its per-beam counts into out->aux, in
 * stretches between the timestamps of changes: spectrum i of the buffer
 * (timestamp ts + i x samples_between_spectra) uses every change at or
 * before its timestamp. On the GPU it is all queued on the stream, out's
 * event recorded after the counts' copy. */
static int bf_compute(void *user, cbf_buffer *in, cbf_buffer *out, cbf_error *err)
{
    bf *s = user;
    cbf_beams *b = &s->beams;
    const uint8_t *data;
    cbf_beam_job job;
    int rc;
    if ((rc = cbf_stage_path_put(&s->path, in, &data, err)) ||
        (rc = cbf_beams_begin(b, in, data, out, &job, err)))
        return rc;
    const size_t S = b->batches * (size_t)b->shape.spectra_per_heap;
    if ((rc = cbf_beams_run(b, &job, in->timestamp, 0, S, err)) ||
        (rc = cbf_stage_path_read(&s->path, s->path.stream, err)))
        return rc;
    return cbf_beams_end(b, out, err);
}

static int bf_buffer(void *user, cbf_buffer *in, cbf_error *err)
{
    bf *s = user;
    void *const streams[2] = {s->path.up.stream, s->path.stream};
    return cbf_beams_buffer(&s->beams, in, bf_compute, s, streams, 2, err);
}

static int bf_run(cbf_node *node, cbf_error *err)
{
    bf *s = cbf_node_state(node);
    int rc = cbf_stage_input_loop(node, "in", bf_buffer, s, err);
    /* the end of the stream: every output goes; stopping or an error: fini drops them */
    if (!rc)
        rc = cbf_beams_drain(&s->beams, err);
    return rc == CBF_ESTOPPED ? 0 : rc;
}

/* On the node's thread, between buffers (cbf/control.h). */
static int bf_request(cbf_node *node, const cbf_request *req, cbf_reply *reply, cbf_error *err)
{
    bf *s = cbf_node_state(node);
    return cbf_beams_request(&s->beams, req, reply, err);
}

static const cbf_plugin_desc bf_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "beamformer",
    .version = "0.1.0",
    .summary = "tied-array beamformer: X-engine batches to 8-bit single-pol beams",
    .params = bf_params,
    .n_params = CBF_COUNT_OF(bf_params),
    .ports = bf_ports,
    .n_ports = CBF_COUNT_OF(bf_ports),
    .init = bf_init,
    .run = bf_run,
    .fini = bf_fini,
    .requests = cbf_beamctl_requests,
    .n_requests = CBF_BEAMS_N_REQUESTS,
    .request = bf_request,
};

CBF_PLUGIN_DEFINE(bf_desc)
