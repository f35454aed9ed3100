/* beamformer: X-engine batches in, B single-polarisation tied-array beams
 * out ("cbf.beam.batch"), one output buffer per input buffer with the same
 * timestamp, batches and presence flags. It takes the correlator's input
 * type and, like the correlator, never writes its input, so one receiver or
 * gather output fans out to both without a copy.
 *
 * Coefficients follow katgpucbf (kernels/beamform/beamform.h): per beam a
 * polarisation and a quantisation gain, per beam and antenna a weight, a
 * delay (seconds) and a fringe offset (radians, at the band centre), from
 * the YAML and then from requests (beamctl.c), each change from the
 * spectrum its timestamp names on: a buffer runs as segments of constant
 * coefficients, a change inside a heap splitting that heap between two
 * kernel jobs (the kernel's span of spectra). Antennas flagged missing
 * in a batch are left out of that batch's sums; the output keeps the flags,
 * from which a heap's beam_ants is counted.
 *
 * On the GPU the host never waits per buffer: host input is uploaded on a
 * stream of its own into two device slots in turn (stage/flight.h), the
 * kernels write device memory, the per-beam saturation counts are copied
 * into the output's aux (pinned) behind them, and the buffer's event is
 * recorded after that copy. The output then waits in flight until its
 * event has passed (normally while the next buffer's work runs) and goes
 * out with its counts summed into `saturated`, the counters and the clip
 * sensors (not at once, as the correlator's dumps go: a buffer's metadata
 * is complete when it is sent, and `saturated` is the GPU's count).
 * Coefficients are chosen when a buffer is queued, and a change inside a
 * buffer copies the new ones on the same stream after the kernels that
 * read the old ones: stream order keeps the change exact to the spectrum
 * without a host wait. The CPU path goes through the same flight (its
 * outputs are complete when pushed). */
#include <cbf/cbf.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "beamctl.h"
#include "beamform.h"
#include "stage/contracts/beam.h"
#include "stage/contracts/feng.h"
#include "stage/contracts/xeng.h"
#include "stage/flight.h"
#include "stage/flow.h"
#include "stage/gpu.h"
#include "stage/input.h"
#include "stage/kern.h"

/* Output buffers queued at most (stage/flight.h): one running on the GPU
 * while the next is queued behind it. */
#define BF_IN_FLIGHT 2

static const cbf_param_decl bf_params[] = {
    {.name = "beams", .type = CBF_PARAM_RECORDS, .def = "[{pol: 0}, {pol: 1}]",
     .choices = "pol,quant_gain=1",
     .doc = "one record per single-pol beam: input pol (0 or 1) and quantisation gain"},
    {.name = "names", .type = CBF_PARAM_STRING, .def = "",
     .doc = "beam names for requests and sensors, comma separated (katgpucbf's stream names); "
            "empty: beam0, beam1, ..."},
    {.name = "weights", .type = CBF_PARAM_FLOAT_LIST, .def = "[]",
     .doc = "real weight per antenna: [] = 1, n_ants values for every beam, or beams x n_ants "
            "(beam-major)"},
    {.name = "delays", .type = CBF_PARAM_FLOAT_LIST, .def = "[]",
     .doc = "delay per antenna, seconds, shaped as weights ([] = 0)"},
    {.name = "fringe_offsets", .type = CBF_PARAM_FLOAT_LIST, .def = "[]",
     .doc = "phase per antenna at the band centre, radians, shaped as weights ([] = 0)"},
    {.name = "dither", .type = CBF_PARAM_BOOL, .def = "true",
     .doc = "add uniform dither in (-1/2, 1/2) before rounding (katgpucbf's default)"},
    {.name = "dither_key", .type = CBF_PARAM_INT, .def = "1",
     .doc = "key of the counter-based dither generator (the same key repeats a run exactly)"},
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
    cbf_port *in, *out;
    cbf_pool *pool;
    cbf_beam_shape shape;
    size_t batches, in_bytes, out_bytes;
    int64_t sbs;                 /* digitiser samples between spectra */
    uint64_t first_channel, total_channels, key;
    int dither;
    bf_ctl ctl;                  /* names, values in force, pending changes, sensors */
    cbf_beam_coef *coef;         /* host [beam][antenna], from ctl */
    uint8_t *pol;                /* host [beam] */
    uint64_t *sat;               /* host [beam]: counts out of (CPU) or back from aux (an
                                    aux is not always 8-byte aligned: a harness's extras) */
    /* Outputs whose work is queued, with their inputs, sent once complete:
     * on the GPU the next buffer is queued before the oldest is waited for. */
    cbf_stage_flight flight;
    int gpu;
    void *stream;                /* everything but host input's uploads, in order */
    cbf_stage_upload up;         /* host input on the GPU */
    /* Read by the kernels in stream order: each is rewritten on `stream`
     * after the kernels that read it last, so one copy of each suffices. */
    uint8_t *d_present, *d_pol;
    cbf_beam_coef *d_coef;
    uint64_t *d_sat;
    cbf_counter *c_batches, *c_missing, *c_sat;
} bf;

/* Per-beam pols from the parameters; the rest of each beam from bf_ctl,
 * with the input's band (katgpucbf: channel spacing bandwidth / channels,
 * centre channel channels / 2). */
static int bf_beams(bf *s, cbf_node *node, const cbf_params *p, const cbf_port_desc *in,
                    cbf_error *err)
{
    const size_t B = (size_t)s->shape.n_beams;
    double ch, sbs, rate, bw, first = 0;
    int rc;
    if ((rc = cbf_stage_input_attr(in, CBF_ATTR_CHANNELS, &ch, err)) ||
        (rc = cbf_stage_input_attr(in, CBF_ATTR_SAMPLES_BETWEEN_SPECTRA, &sbs, err)) ||
        (rc = cbf_stage_input_attr(in, CBF_ATTR_ADC_SAMPLE_RATE, &rate, err)))
        return rc;
    cbf_port_desc_get_attr(in, CBF_ATTR_FIRST_CHANNEL, &first);
    const double spacing = cbf_port_desc_get_attr(in, CBF_ATTR_BANDWIDTH, &bw) ? rate / sbs
                                                                              : bw / ch;
    s->sbs = (int64_t)sbs;
    s->first_channel = (uint64_t)first;
    s->total_channels = (uint64_t)ch;
    for (size_t b = 0; b < B; b++) {
        const double pol = cbf_params_field(p, "beams", b, "pol");
        if (pol != 0 && pol != 1)
            return cbf_error_set(err, CBF_ECONFIG, "%s: beam %zu: pol %g is not 0 or 1",
                                 cbf_params_where(p, "beams"), b, pol);
        s->pol[b] = (uint8_t)pol;
    }
    if ((rc = bf_ctl_init(&s->ctl, node, p, s->shape.n_ants, s->shape.n_beams, s->sbs, spacing,
                          first, ch / 2, err)))
        return rc;
    rc = bf_ctl_coef(&s->ctl, s->coef, err);
    return rc < 0 ? rc : 0;
}

#ifdef CBF_HAVE_CUDA
/* Stream, device copies of the coefficients, flags and counts, and (for
 * host input) the upload slots. */
static int bf_gpu_setup(bf *s, cbf_mem_kind in_mem, cbf_error *err)
{
    const size_t A = (size_t)s->shape.n_ants, B = (size_t)s->shape.n_beams;
    int rc;
    if ((rc = cbf_stage_stream_create(&s->stream, err)) ||
        (rc = cbf_stage_alloc(CBF_MEM_DEVICE, A * B * sizeof *s->coef, (void **)&s->d_coef,
                              "coefficients", err)) ||
        (rc = cbf_stage_alloc(CBF_MEM_DEVICE, B, (void **)&s->d_pol, "pols", err)) ||
        (rc = cbf_stage_alloc(CBF_MEM_DEVICE, B * sizeof(uint64_t), (void **)&s->d_sat,
                              "saturation counts", err)) ||
        (rc = cbf_stage_alloc(CBF_MEM_DEVICE, s->batches * A, (void **)&s->d_present,
                              "presence flags", err)) ||
        (rc = cbf_stage_copy(s->d_coef, CBF_MEM_DEVICE, s->coef, CBF_MEM_HOST,
                             A * B * sizeof *s->coef, NULL, "coefficients", err)) ||
        (rc = cbf_stage_copy(s->d_pol, CBF_MEM_DEVICE, s->pol, CBF_MEM_HOST, B, NULL, "pols",
                             err)))
        return rc;
    if (in_mem != CBF_MEM_DEVICE && (rc = cbf_stage_upload_init(&s->up, s->in_bytes, err)))
        return rc;
    cbf_log_info("beamformer on the GPU: %d beams, %d antennas, %s input", s->shape.n_beams,
                 s->shape.n_ants, cbf_mem_kind_name(in_mem));
    return 0;
}
#endif

static void bf_fini(cbf_node *node)
{
    bf *s = cbf_node_state(node);
    if (!s)
        return;
    cbf_stage_flight_fini(&s->flight);
    cbf_error ignored;
    if (s->stream) /* after an error: nothing may still read what is freed below */
        cbf_stage_stream_sync(s->stream, "stream", &ignored);
    cbf_stage_upload_fini(&s->up);
    cbf_stage_free(CBF_MEM_DEVICE, s->d_present);
    cbf_stage_free(CBF_MEM_DEVICE, s->d_pol);
    cbf_stage_free(CBF_MEM_DEVICE, s->d_coef);
    cbf_stage_free(CBF_MEM_DEVICE, s->d_sat);
    cbf_stage_stream_destroy(s->stream);
    bf_ctl_free(&s->ctl);
    free(s->coef);
    free(s->pol);
    free(s->sat);
    free(s);
    cbf_node_set_state(node, NULL);
}

static int bf_init(cbf_node *node, cbf_error *err)
{
    bf *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    cbf_node_set_state(node, s);
    const cbf_params *p = cbf_node_params(node);
    s->in = cbf_node_port(node, "in", 0);
    s->out = cbf_node_port(node, "out", 0);
    const cbf_port_desc *in = cbf_port_get_desc(s->in);
    cbf_xeng_batch xb;
    if (cbf_xeng_batch_of(in, &xb) || xb.dtype != CBF_DTYPE_CI8)
        return cbf_error_set(err, CBF_ECONFIG,
                             "input must be CI8 [batch][antenna][channel][spectrum][pol]");
    const size_t B = cbf_params_len(p, "beams");
    s->batches = xb.batches;
    s->shape = (cbf_beam_shape){(int)xb.n_ants, (int)B, (int)xb.channels, (int)xb.spectra};
    char msg[CBF_STAGE_MSG];
    if (cbf_beam_shape_check(&s->shape, msg, sizeof msg))
        return cbf_error_set(err, CBF_ECONFIG, "%s", msg);
    s->in_bytes = s->batches * cbf_beam_in_batch_bytes(&s->shape);
    s->out_bytes = s->batches * cbf_beam_out_batch_bytes(&s->shape);
    s->coef = calloc(B * xb.n_ants, sizeof *s->coef);
    s->pol = calloc(B, 1);
    s->sat = calloc(B, sizeof *s->sat);
    if (!s->coef || !s->pol || !s->sat)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    int rc = bf_beams(s, node, p, in, err);
    if (rc)
        return rc;
    s->dither = cbf_params_bool(p, "dither");
    s->key = (uint64_t)cbf_params_int(p, "dither_key");
    s->gpu = cbf_node_use_gpu(node);
    if ((rc = cbf_stage_flight_init(&s->flight, BF_IN_FLIGHT, err)))
        return rc;
#ifdef CBF_HAVE_CUDA
    if (s->gpu && (rc = bf_gpu_setup(s, in->mem, err)))
        return rc;
#else
    if (s->gpu)
        return cbf_error_set(err, CBF_ENOTSUP, "built without CUDA");
#endif
    if (!s->gpu && in->mem == CBF_MEM_DEVICE)
        return cbf_error_set(err, CBF_ECONFIG, "device input on the CPU path");
    const cbf_beam_batch ob = {s->batches, B, xb.channels, xb.spectra, xb.n_ants};
    cbf_port_desc d;
    cbf_beam_batch_desc(&d, &ob, s->gpu ? CBF_MEM_DEVICE : CBF_MEM_HOST, in);
    d.timestamp_step = in->timestamp_step;
    if ((rc = cbf_stage_out_open(node, s->out, &d, (size_t)cbf_params_int(p, "buffers"), &s->pool,
                                 err)))
        return rc;
    s->c_batches = cbf_node_counter(node, "batches");
    s->c_missing = cbf_node_counter(node, "missing_heaps");
    s->c_sat = cbf_node_counter(node, "saturated");
    cbf_counter_warn_on_rise(s->c_sat);
    return 0;
}

static int bf_kern(bf *s, const cbf_beam_job *job, cbf_error *err)
{
    char msg[CBF_STAGE_MSG];
#ifdef CBF_HAVE_CUDA
    if (s->gpu)
        return cbf_stage_kern(cbf_beam_cuda_run(job, s->stream, msg, sizeof msg), msg, err);
#else
    (void)s;
#endif
    return cbf_stage_kern(cbf_beam_cpu(job, msg, sizeof msg), msg, err);
}

/* Batches [n, n + count) of base's, spectra [t0, t1) of each (0, 0: all). */
static int bf_part(bf *s, const cbf_beam_job *base, size_t n, size_t count, int t0, int t1,
                   cbf_error *err)
{
    cbf_beam_job j = *base;
    j.in += n * cbf_beam_in_batch_bytes(&s->shape);
    j.present += n * (size_t)s->shape.n_ants;
    j.out += n * cbf_beam_out_batch_bytes(&s->shape);
    j.batches = count;
    j.first_spectrum += n * (uint64_t)s->shape.spectra_per_heap;
    j.spectrum_begin = t0;
    j.spectrum_end = t1;
    return bf_kern(s, &j, err);
}

/* Spectra [s0, s1) of the buffer (counted across its batches) with the
 * coefficients in force: a partial heap at each end, whole heaps between. */
static int bf_segment(bf *s, const cbf_beam_job *base, size_t s0, size_t s1, cbf_error *err)
{
    const size_t T = (size_t)s->shape.spectra_per_heap;
    size_t n0 = s0 / T, n1 = s1 / T;
    const int t0 = (int)(s0 % T), t1 = (int)(s1 % T);
    int rc;
    if (n0 == n1)
        return bf_part(s, base, n0, 1, t0, t1, err);
    if (t0) {
        if ((rc = bf_part(s, base, n0, 1, t0, (int)T, err)))
            return rc;
        n0++;
    }
    if (n1 > n0 && (rc = bf_part(s, base, n0, n1 - n0, 0, 0, err)))
        return rc;
    return t1 ? bf_part(s, base, n1, 1, 0, t1, err) : 0;
}

/* The coefficients changed: on the GPU the new ones are copied on the
 * stream, so the kernels queued before read the old ones and those after
 * the new (the source is pageable host memory, which CUDA stages when the
 * copy is queued: s->coef may change again at once). */
static int bf_coef_changed(bf *s, cbf_error *err)
{
    if (!s->gpu)
        return 0;
    return cbf_stage_copy(s->d_coef, CBF_MEM_DEVICE, s->coef, CBF_MEM_HOST,
                          (size_t)s->shape.n_ants * (size_t)s->shape.n_beams * sizeof *s->coef,
                          s->stream, "coefficients", err);
}

/* On the GPU: the input where the kernels read it (uploading host input),
 * its flags, and the counts cleared, all queued on the stream. */
static int bf_gpu_input(bf *s, cbf_buffer *in, cbf_beam_job *job, cbf_error *err)
{
    const size_t B = (size_t)s->shape.n_beams, A = (size_t)s->shape.n_ants;
    int rc;
    if (in->kind == CBF_MEM_DEVICE)
        rc = cbf_buffer_wait_stream(in, s->stream, err);
    else
        rc = cbf_stage_upload_put(&s->up, in, s->stream, &job->in, err);
    if (rc || (rc = cbf_stage_copy(s->d_present, CBF_MEM_DEVICE, in->present, CBF_MEM_HOST,
                                   s->batches * A, s->stream, "presence flags", err)) ||
        (rc = cbf_stage_fill(s->d_sat, CBF_MEM_DEVICE, 0, B * sizeof(uint64_t), s->stream,
                             "clearing counts", err)))
        return rc;
    job->present = s->d_present;
    job->coef = s->d_coef;
    job->pol = s->d_pol;
    job->saturated = s->d_sat;
    return 0;
}

/* Beamforms `in` into `out`, its per-beam counts into out->aux, in
 * segments between the timestamps of changes: spectrum i of the buffer
 * (timestamp ts + i x samples_between_spectra) uses every change at or
 * before its timestamp. On the GPU it is all queued on the stream, out's
 * event recorded after the counts' copy. */
static int bf_compute(bf *s, cbf_buffer *in, cbf_buffer *out, cbf_error *err)
{
    const size_t B = (size_t)s->shape.n_beams;
    const int64_t ts = in->timestamp;
    if (ts < 0 || ts % s->sbs)
        return cbf_error_set(err, CBF_EINVAL, "buffer %llu: timestamp %lld is not a whole spectrum",
                             (unsigned long long)in->seq, (long long)ts);
    cbf_beam_job job = {s->shape, s->batches, in->data, in->present, s->coef, s->pol, out->data,
                        NULL, s->sat, s->dither, s->key, (uint64_t)(ts / s->sbs),
                        s->first_channel, s->total_channels, 0, 0};
    memset(s->sat, 0, B * sizeof(uint64_t));
    int rc;
    if (s->gpu && (rc = bf_gpu_input(s, in, &job, err)))
        return rc;
    const size_t S = s->batches * (size_t)s->shape.spectra_per_heap;
    for (size_t s0 = 0, s1; s0 < S; s0 = s1) {
        bf_ctl_apply(&s->ctl, ts + (int64_t)s0 * s->sbs);
        const int64_t next = bf_ctl_next_change(&s->ctl);
        /* the first spectrum at or after the next change (after s0: the
         * changes up to s0's timestamp are in force) */
        s1 = next < ts + (int64_t)S * s->sbs ? (size_t)((next - ts + s->sbs - 1) / s->sbs) : S;
        if ((rc = bf_ctl_coef(&s->ctl, s->coef, err)) < 0 ||
            (rc && (rc = bf_coef_changed(s, err))) ||
            (rc = bf_segment(s, &job, s0, s1, err)))
            return rc;
    }
    if (!s->gpu) {
        memcpy(out->aux, s->sat, B * sizeof(uint64_t));
        return 0;
    }
    if (in->kind != CBF_MEM_DEVICE && (rc = cbf_stage_upload_read(&s->up, s->stream, err)))
        return rc;
    if ((rc = cbf_stage_copy(out->aux, CBF_MEM_PINNED, s->d_sat, CBF_MEM_DEVICE,
                             B * sizeof(uint64_t), s->stream, "saturation counts", err)))
        return rc;
    return cbf_buffer_record(out, s->stream, err);
}

/* A landed output (stage/flight.h): its counts are in aux; the rest of its
 * metadata, the counters and the clip sensors follow, and it goes out. */
static int bf_land(void *user, cbf_buffer *in, cbf_buffer *out, cbf_error *err)
{
    (void)err;
    bf *s = user;
    const size_t B = (size_t)s->shape.n_beams, n_flags = s->batches * (size_t)s->shape.n_ants;
    uint64_t *sat = s->sat;
    memcpy(sat, out->aux, B * sizeof(uint64_t));
    out->timestamp = in->timestamp;
    out->seq = in->seq;
    out->n_present = n_flags;
    memcpy(out->present, in->present, n_flags);
    out->missing = 0;
    for (size_t i = 0; i < n_flags; i++)
        out->missing += !in->present[i];
    out->saturated = 0;
    for (size_t b = 0; b < B; b++)
        out->saturated += sat[b];
    cbf_counter_add(s->c_batches, s->batches);
    cbf_counter_add(s->c_missing, out->missing);
    cbf_counter_add(s->c_sat, out->saturated);
    bf_ctl_clips(&s->ctl, sat);
    return cbf_port_send(s->out, out);
}

static int bf_buffer(void *user, cbf_buffer *in, cbf_error *err)
{
    bf *s = user;
    if (!s->gpu && in->kind != CBF_MEM_HOST) {
        int rc = cbf_buffer_sync_host(in, err);
        if (rc)
            return rc;
    }
    cbf_buffer *out;
    int rc = cbf_pool_get(s->pool, &out);
    if (rc)
        return rc == CBF_ESTOPPED ? rc : cbf_error_set(err, rc, "no output buffer");
    rc = bf_compute(s, in, out, err);
    /* the coefficients of every spectrum up to here are chosen */
    bf_ctl_processed(&s->ctl, in->timestamp + (int64_t)(s->batches * (size_t)s->shape.spectra_per_heap) * s->sbs);
    if (!rc)
        rc = cbf_stage_flight_push(&s->flight, in, out, err);
    if (rc) {
        /* work queued before the failure may still touch in and out */
        cbf_error ignored;
        if (s->up.stream)
            cbf_stage_stream_sync(s->up.stream, "upload", &ignored);
        if (s->gpu)
            cbf_stage_stream_sync(s->stream, "stream", &ignored);
        cbf_buffer_unref(out);
        return rc;
    }
    return cbf_stage_flight_land(&s->flight, BF_IN_FLIGHT - 1, bf_land, s, err);
}

static int bf_run(cbf_node *node, cbf_error *err)
{
    bf *s = cbf_node_state(node);
    int rc = cbf_stage_input_loop(node, "in", bf_buffer, s, err);
    /* the end of the stream: every output goes; stopping or an error: fini drops them */
    if (!rc)
        rc = cbf_stage_flight_land(&s->flight, 0, bf_land, s, err);
    return rc == CBF_ESTOPPED ? 0 : rc;
}

/* On the node's thread, between buffers (cbf/control.h). */
static int bf_request(cbf_node *node, const cbf_request *req, cbf_reply *reply, cbf_error *err)
{
    bf *s = cbf_node_state(node);
    return bf_ctl_request(&s->ctl, req, reply, err);
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
    .requests = bf_requests,
    .n_requests = BF_N_REQUESTS,
    .request = bf_request,
};

CBF_PLUGIN_DEFINE(bf_desc)
