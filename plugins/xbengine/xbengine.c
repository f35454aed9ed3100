/* xbengine: the XB-engine in one node. X-engine batches in; the
 * correlator's dumps out on `out` (as the correlator plugin, dumps.h) and
 * B single-polarisation tied-array beams on `beams` (as the beamformer
 * plugin, beams.h: the same parameters, requests and sensors), from one
 * copy of the input: host input is uploaded once for both.
 *
 * On the GPU, `fuse` chooses how the two share it:
 *  - the one kernel (xb_wgmma, cbf_xb_cuda_run): correlation and beams
 *    read each sample from memory once, on one stream. A piece of a
 *    buffer in which the beams' coefficients change runs the correlator
 *    and the beamformer's kernels one after the other instead, each
 *    stretch with its own coefficients (exact to the spectrum).
 *  - two streams: the correlator on the node's stream, the beams on a
 *    second one that starts when the buffer has arrived, as the two
 *    plugins side by side run; they join at the end of each buffer.
 * `auto` takes the one kernel where it serves the shape (Hopper, 8-bit,
 * N <= 64, B <= 8), where it measured cheaper at every buffer size
 * (correlator.h, cbf_xb_cuda_prefer_fused); the bytes out are the same
 * either way, and the same as the CPU's.
 *
 * Dumps go out as soon as their last kernel is queued (with its event);
 * a buffer's beams go out through the flight (stage/flight.h), which also
 * holds the input until every kernel reading it, on either stream, is
 * done. */
#include <cbf/cbf.h>

#include <stdlib.h>
#include <string.h>

#include "beams.h"
#include "dumps.h"
#include "stage/contracts/beam.h"
#include "stage/contracts/xeng.h"
#include "stage/flight.h"
#include "stage/flow.h"
#include "stage/gpu.h"
#include "stage/input.h"
#include "stage/kern.h"
#include "stage/path.h"

static const cbf_param_decl xb_params[] = {
    CBF_CORR_PARAMS,
    CBF_BEAMS_PARAMS,
    {.name = "buffers", .type = CBF_PARAM_INT, .def = "3", .has_range = 1, .min = 2, .max = 64,
     .doc = "accumulator buffers in the pool"},
    {.name = "beam_buffers", .type = CBF_PARAM_INT, .def = "3", .has_range = 1, .min = 2,
     .max = 64, .doc = "beam buffers in the pool"},
    {.name = "fuse", .type = CBF_PARAM_CHOICE, .def = "auto", .choices = "auto|on|off",
     .doc = "GPU: correlation and beams in one kernel (on), the two kernels on two streams "
            "(off), or the cheaper as measured (auto: the one kernel wherever it serves the shape, "
            "correlator.h)"},
};

static const cbf_port_decl xb_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = CBF_TYPE_XENG_BATCH,
     .doc = "X-engine batches (CI8)"},
    {.name = "out", .dir = CBF_PORT_OUT, .type = CBF_TYPE_XENG_ACCUM,
     .doc = "int64 accumulators [slice][channel][baseline][product], one buffer per dump"},
    {.name = "beams", .dir = CBF_PORT_OUT, .type = CBF_TYPE_BEAM_BATCH,
     .doc = "beams, CI8 [batch][beam][channel][spectrum], flags per (batch, antenna)"},
};

typedef struct xb {
    cbf_corr_dumps dumps;
    cbf_beams beams;             /* with the beams' pool and flight */
    cbf_stage_path path;         /* its stream: the correlator's; the beams' too when fused */
    int fused;
    void *side;                  /* the beams' when not fused */
    void *arrived, *corr_done;   /* not fused: the side stream's waits */
    /* The buffer being queued and its beams' job (for xb_piece). */
    const cbf_buffer *cur;
    cbf_beam_job job;
    cbf_counter *c_fused;
} xb;

static void xb_fini(cbf_node *node)
{
    xb *s = cbf_node_state(node);
    if (!s)
        return;
    /* after an error: nothing may still read or write what is freed below
     * (the side stream reads the upload slots too) */
    if (s->side) {
        cbf_error ignored;
        cbf_stage_stream_sync(s->side, "beams' stream", &ignored);
    }
    cbf_stage_path_fini(&s->path);
    cbf_corr_dumps_fini(&s->dumps);
    cbf_beams_fini(&s->beams);
    cbf_stage_event_destroy(s->arrived);
    cbf_stage_event_destroy(s->corr_done);
    cbf_stage_stream_destroy(s->side);
    free(s);
    cbf_node_set_state(node, NULL);
}

#ifdef CBF_HAVE_CUDA
/* Whether the one kernel runs, from the dumps' plan (before cbf_beams_init:
 * the beams' stream depends on it). */
static int xb_choose(xb *s, const cbf_params *p)
{
    const char *fuse = cbf_params_string(p, "fuse");
    if (!strcmp(fuse, "off"))
        return 0;
    const cbf_corr_shape *c = &s->dumps.shape;
    const cbf_beam_shape bs = {c->n_ants, (int)cbf_params_len(p, "beams"), c->channels,
                               c->spectra_per_heap};
    return !strcmp(fuse, "on") ? cbf_xb_cuda_can_fuse(s->dumps.plan, &bs)
                               : cbf_xb_cuda_prefer_fused(s->dumps.plan, &bs);
}

/* The plan, the way the two share the GPU, the side stream, the upload
 * slots. */
static int xb_gpu_setup(cbf_node *node, xb *s, cbf_error *err)
{
    const cbf_port_desc *in = s->path.in;
    int rc;
    if ((rc = cbf_corr_dumps_init(&s->dumps, node, in, s->path.stream, err)))
        return rc;
    s->fused = xb_choose(s, cbf_node_params(node));
    if (!s->fused && ((rc = cbf_stage_stream_create(&s->side, err)) ||
                      (rc = cbf_stage_event_create(&s->arrived, err)) ||
                      (rc = cbf_stage_event_create(&s->corr_done, err))))
        return rc;
    if ((rc = cbf_beams_init(&s->beams, node, in, 1, s->fused ? s->path.stream : s->side, err)) ||
        (rc = cbf_stage_path_upload_init(&s->path, s->dumps.in_bytes, err)))
        return rc;
    cbf_log_info("XB-engine on the GPU: %d antennas, %d beams, %s, %s input",
                 s->beams.shape.n_ants, s->beams.shape.n_beams,
                 s->fused ? "one kernel" : "two streams", cbf_mem_kind_name(in->mem));
    return 0;
}
#endif

static int xb_init(cbf_node *node, cbf_error *err)
{
    xb *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    cbf_node_set_state(node, s);
    int rc = cbf_stage_path_open(&s->path, node, "in", err);
    if (rc)
        return rc;
    const cbf_port_desc *in = s->path.in;
#ifdef CBF_HAVE_CUDA
    if (s->path.gpu && (rc = xb_gpu_setup(node, s, err)))
        return rc;
#endif
    if (!s->path.gpu && ((rc = cbf_corr_dumps_init(&s->dumps, node, in, NULL, err)) ||
                         (rc = cbf_beams_init(&s->beams, node, in, 0, NULL, err))))
        return rc;
    const cbf_params *p = cbf_node_params(node);
    if ((rc = cbf_corr_dumps_open(&s->dumps, node, cbf_node_port(node, "out", 0), in,
                                  (size_t)cbf_params_int(p, "buffers"), err)) ||
        (rc = cbf_beams_open(&s->beams, node, cbf_node_port(node, "beams", 0), in,
                             (size_t)cbf_params_int(p, "beam_buffers"), err)))
        return rc;
    s->c_fused = cbf_node_counter(node, "one_kernel_pieces");
    return 0;
}

/* One piece of the buffer into the open dump: with the beams of the same
 * batches in one kernel where the coefficients hold over the piece. */
static int xb_piece(void *user, const cbf_corr_job *job, cbf_error *err)
{
    xb *s = user;
    if (!s->fused)
        return cbf_corr_dumps_kernel(&s->dumps, job, err);
    const size_t T = (size_t)s->beams.shape.spectra_per_heap;
    const size_t b0 = job->batch_begin, n = job->batch_end - job->batch_begin;
    size_t s1;
    int rc = cbf_beams_coef_until(&s->beams, s->cur->timestamp, b0 * T, (b0 + n) * T, &s1, err);
    if (rc)
        return rc;
    if (s1 < (b0 + n) * T) { /* a change inside the piece: the two kernels, the
                                 beams in stretches (the first's coefficients,
                                 made above, are found unchanged) */
        if ((rc = cbf_corr_dumps_kernel(&s->dumps, job, err)))
            return rc;
        return cbf_beams_run(&s->beams, &s->job, s->cur->timestamp, b0 * T, (b0 + n) * T, err);
    }
#ifdef CBF_HAVE_CUDA
    /* The one kernel takes its batches from 0: both jobs start at b0. */
    cbf_corr_job cj = *job;
    cj.in += b0 * cbf_corr_batch_bytes(&job->shape);
    cj.batch_begin = 0;
    cj.batch_end = n;
    cj.slices = 1;
    const cbf_beam_job bj = cbf_beams_part(&s->beams, &s->job, b0, n, 0, 0);
    char msg[CBF_STAGE_MSG];
    cbf_counter_add(s->c_fused, cbf_xb_cuda_fused(s->dumps.plan, &cj, &bj));
    return cbf_stage_kern(
        cbf_xb_cuda_run(s->dumps.plan, &cj, &bj, s->path.stream, msg, sizeof msg), msg, err);
#else
    return cbf_error_set(err, CBF_EINTERNAL, "one kernel without CUDA"); /* never: fused is 0 */
#endif
}

/* Queues the correlation and the beams of `in` (samples at data), out's
 * event recorded after every kernel reading the input, on either stream. */
static int xb_compute(void *user, cbf_buffer *in, cbf_buffer *out, cbf_error *err)
{
    xb *s = user;
    void *const stream = s->path.stream;
    const uint8_t *data;
    s->cur = in;
    int rc = cbf_stage_path_put(&s->path, in, &data, err);
    if (!rc && s->side && ((rc = cbf_stage_event_record(s->arrived, stream, err)) ||
                           (rc = cbf_stage_stream_wait(s->side, s->arrived, err))))
        return rc;
    if (rc || (rc = cbf_beams_begin(&s->beams, in, data, out, &s->job, err)) ||
        (rc = cbf_corr_dumps_add(&s->dumps, in, data, xb_piece, s, err)))
        return rc;
    const size_t S = s->beams.batches * (size_t)s->beams.shape.spectra_per_heap;
    if (!s->fused && (rc = cbf_beams_run(&s->beams, &s->job, in->timestamp, 0, S, err)))
        return rc;
    if (s->side && ((rc = cbf_stage_event_record(s->corr_done, stream, err)) ||
                    (rc = cbf_stage_stream_wait(s->side, s->corr_done, err))))
        return rc;
    if ((rc = cbf_stage_path_read(&s->path, s->beams.stream, err)))
        return rc;
    return cbf_beams_end(&s->beams, out, err);
}

static int xb_buffer(void *user, cbf_buffer *in, cbf_error *err)
{
    xb *s = user;
    void *const streams[3] = {s->path.up.stream, s->side, s->path.stream};
    return cbf_beams_buffer(&s->beams, in, xb_compute, s, streams, 3, err);
}

static int xb_run(cbf_node *node, cbf_error *err)
{
    xb *s = cbf_node_state(node);
    int rc = cbf_stage_input_loop(node, "in", xb_buffer, s, err);
    /* the end of the stream: every beam buffer goes, the unfinished dump
     * is dropped; stopping or an error: fini drops them */
    if (!rc) {
        cbf_corr_dumps_end(&s->dumps);
        rc = cbf_beams_drain(&s->beams, err);
    }
    return rc == CBF_ESTOPPED ? 0 : rc;
}

/* On the node's thread, between buffers (cbf/control.h). */
static int xb_request(cbf_node *node, const cbf_request *req, cbf_reply *reply, cbf_error *err)
{
    xb *s = cbf_node_state(node);
    return cbf_beams_request(&s->beams, req, reply, err);
}

static const cbf_plugin_desc xb_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "xbengine",
    .version = "0.1.0",
    .summary = "XB-engine: X-engine batches to correlator dumps and tied-array beams in one node",
    .params = xb_params,
    .n_params = CBF_COUNT_OF(xb_params),
    .ports = xb_ports,
    .n_ports = CBF_COUNT_OF(xb_ports),
    .init = xb_init,
    .run = xb_run,
    .fini = xb_fini,
    .requests = cbf_beamctl_requests,
    .n_requests = CBF_BEAMS_N_REQUESTS,
    .request = xb_request,
};

CBF_PLUGIN_DEFINE(xb_desc)
