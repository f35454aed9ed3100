/* beamformer: X-engine batches in, B single-polarisation tied-array beams
 * out ("cbf.beam.batch"), one output buffer per input buffer with the same
 * timestamp, batches and presence flags. It takes the correlator's input
 * type and, like the correlator, never writes its input, so one receiver or
 * gather output fans out to both without a copy.
 *
 * Coefficients follow katgpucbf (kernels/beamform/beamform.h): per beam a
 * polarisation and a quantisation gain, per beam and antenna a weight, a
 * delay (seconds) and a fringe offset (radians, at the band centre); they
 * are fixed at init (runtime requests come later). Antennas flagged missing
 * in a batch are left out of that batch's sums; the output keeps the flags,
 * from which a heap's beam_ants is counted.
 *
 * On the GPU the input (uploaded when it is host memory) is beamformed into
 * device memory and the per-beam saturation counts come back to the host
 * before the buffer is sent: one host wait per buffer, which keeps this
 * first version simple (the correlator's overlap of buffers is for later). */
#include <cbf/cbf.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "beamform.h"
#include "stage/contracts/beam.h"
#include "stage/contracts/feng.h"
#include "stage/contracts/xeng.h"
#include "stage/flow.h"
#include "stage/gpu.h"
#include "stage/input.h"
#include "stage/kern.h"

static const cbf_param_decl bf_params[] = {
    {.name = "beams", .type = CBF_PARAM_RECORDS, .def = "[{pol: 0}, {pol: 1}]",
     .choices = "pol,quant_gain=1",
     .doc = "one record per single-pol beam: input pol (0 or 1) and quantisation gain"},
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
    cbf_beam_coef *coef;         /* host [beam][antenna] */
    uint8_t *pol;                /* host [beam] */
    uint64_t *sat;               /* host [beam] (pinned on the GPU path) */
    int gpu;
    void *stream;
    uint8_t *d_in, *d_present, *d_pol;
    cbf_beam_coef *d_coef;
    uint64_t *d_sat;
    cbf_counter *c_batches, *c_missing, *c_sat;
} bf;

/* Value for (beam b, antenna a) of a per-antenna list: [] gives def,
 * n_ants values are shared by every beam, beams x n_ants are beam-major. */
static double bf_list_at(const cbf_params *p, const char *name, size_t b, size_t a, size_t n_ants,
                         double def)
{
    const size_t n = cbf_params_len(p, name);
    if (!n)
        return def;
    return cbf_params_float_at(p, name, n == n_ants ? a : b * n_ants + a);
}

static int bf_check_list(const cbf_params *p, const char *name, size_t beams, size_t n_ants,
                         cbf_error *err)
{
    const size_t n = cbf_params_len(p, name);
    if (n && n != n_ants && n != beams * n_ants)
        return cbf_error_set(err, CBF_ECONFIG,
                             "%s: '%s' has %zu values; want 0, %zu (one per antenna) or %zu "
                             "(beams x antennas)", cbf_params_where(p, name), name, n, n_ants,
                             beams * n_ants);
    return 0;
}

/* Per-beam pols and the coefficients from the parameters and the input's
 * band (katgpucbf: channel spacing bandwidth / channels, centre channel
 * channels / 2). */
static int bf_coefficients(bf *s, const cbf_params *p, const cbf_port_desc *in, cbf_error *err)
{
    const size_t A = (size_t)s->shape.n_ants, B = (size_t)s->shape.n_beams;
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
    if ((rc = bf_check_list(p, "weights", B, A, err)) ||
        (rc = bf_check_list(p, "delays", B, A, err)) ||
        (rc = bf_check_list(p, "fringe_offsets", B, A, err)))
        return rc;
    for (size_t b = 0; b < B; b++) {
        const double pol = cbf_params_field(p, "beams", b, "pol");
        const double gain = cbf_params_field(p, "beams", b, "quant_gain");
        if (pol != 0 && pol != 1)
            return cbf_error_set(err, CBF_ECONFIG, "%s: beam %zu: pol %g is not 0 or 1",
                                 cbf_params_where(p, "beams"), b, pol);
        s->pol[b] = (uint8_t)pol;
        for (size_t a = 0; a < A; a++)
            if (cbf_beam_coef_set(&s->coef[b * A + a], bf_list_at(p, "weights", b, a, A, 1.0), gain,
                                  bf_list_at(p, "delays", b, a, A, 0.0),
                                  bf_list_at(p, "fringe_offsets", b, a, A, 0.0), spacing, first,
                                  ch / 2))
                return cbf_error_set(err, CBF_ECONFIG,
                                     "beam %zu antenna %zu: weight, gain, delay or fringe offset "
                                     "is not finite (or too large)", b, a);
    }
    return 0;
}

#ifdef CBF_HAVE_CUDA
/* Stream, device copies of the coefficients, counts and (for host input)
 * an input buffer. */
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
    if (in_mem != CBF_MEM_DEVICE &&
        (rc = cbf_stage_alloc(CBF_MEM_DEVICE, s->in_bytes, (void **)&s->d_in, "input", err)))
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
    cbf_error ignored;
    if (s->stream)
        cbf_stage_stream_sync(s->stream, "stream", &ignored);
    cbf_stage_free(CBF_MEM_DEVICE, s->d_in);
    cbf_stage_free(CBF_MEM_DEVICE, s->d_present);
    cbf_stage_free(CBF_MEM_DEVICE, s->d_pol);
    cbf_stage_free(CBF_MEM_DEVICE, s->d_coef);
    cbf_stage_free(CBF_MEM_DEVICE, s->d_sat);
    cbf_stage_free(s->gpu ? CBF_MEM_PINNED : CBF_MEM_HOST, s->sat);
    cbf_stage_stream_destroy(s->stream);
    free(s->coef);
    free(s->pol);
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
    if (!s->coef || !s->pol)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    int rc = bf_coefficients(s, p, in, err);
    if (rc)
        return rc;
    s->dither = cbf_params_bool(p, "dither");
    s->key = (uint64_t)cbf_params_int(p, "dither_key");
    s->gpu = cbf_node_use_gpu(node);
    if ((rc = cbf_stage_alloc(s->gpu ? CBF_MEM_PINNED : CBF_MEM_HOST, B * sizeof(uint64_t),
                              (void **)&s->sat, "saturation counts", err)))
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

/* Beamforms `in` into `out` and fills s->sat; on the GPU the counts are
 * on the host when this returns. */
static int bf_compute(bf *s, cbf_buffer *in, cbf_buffer *out, cbf_error *err)
{
    const size_t B = (size_t)s->shape.n_beams, A = (size_t)s->shape.n_ants;
    if (in->timestamp < 0 || in->timestamp % s->sbs)
        return cbf_error_set(err, CBF_EINVAL, "buffer %llu: timestamp %lld is not a whole spectrum",
                             (unsigned long long)in->seq, (long long)in->timestamp);
    cbf_beam_job job = {s->shape, s->batches, in->data, in->present, s->coef, s->pol, out->data,
                        NULL, s->sat, s->dither, s->key, (uint64_t)(in->timestamp / s->sbs),
                        s->first_channel, s->total_channels};
    memset(s->sat, 0, B * sizeof(uint64_t));
    char msg[CBF_STAGE_MSG];
    if (!s->gpu)
        return cbf_stage_kern(cbf_beam_cpu(&job, msg, sizeof msg), msg, err);
#ifdef CBF_HAVE_CUDA
    int rc;
    if ((rc = cbf_buffer_wait_stream(in, s->stream, err)))
        return rc;
    if (in->kind != CBF_MEM_DEVICE) {
        if ((rc = cbf_stage_copy(s->d_in, CBF_MEM_DEVICE, in->data, in->kind, s->in_bytes,
                                 s->stream, "upload", err)))
            return rc;
        job.in = s->d_in;
    }
    job.present = s->d_present;
    job.coef = s->d_coef;
    job.pol = s->d_pol;
    job.saturated = s->d_sat;
    if ((rc = cbf_stage_copy(s->d_present, CBF_MEM_DEVICE, in->present, CBF_MEM_HOST,
                             s->batches * A, s->stream, "presence flags", err)) ||
        (rc = cbf_stage_fill(s->d_sat, CBF_MEM_DEVICE, 0, B * sizeof(uint64_t), s->stream,
                             "clearing counts", err)) ||
        (rc = cbf_stage_kern(cbf_beam_cuda_run(&job, s->stream, msg, sizeof msg), msg, err)) ||
        (rc = cbf_stage_copy(s->sat, CBF_MEM_PINNED, s->d_sat, CBF_MEM_DEVICE,
                             B * sizeof(uint64_t), s->stream, "saturation counts", err)) ||
        (rc = cbf_buffer_record(out, s->stream, err)))
        return rc;
    /* the counts, and the presence flags' and the input's staging, are read */
    return cbf_stage_stream_sync(s->stream, "beamformer", err);
#else
    (void)A;
    return cbf_error_set(err, CBF_ENOTSUP, "built without CUDA");
#endif
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
    if ((rc = bf_compute(s, in, out, err))) {
        cbf_buffer_unref(out);
        return rc;
    }
    const size_t B = (size_t)s->shape.n_beams, n_flags = s->batches * (size_t)s->shape.n_ants;
    out->timestamp = in->timestamp;
    out->seq = in->seq;
    out->n_present = n_flags;
    memcpy(out->present, in->present, n_flags);
    out->missing = 0;
    for (size_t i = 0; i < n_flags; i++)
        out->missing += !in->present[i];
    out->saturated = 0;
    for (size_t b = 0; b < B; b++)
        out->saturated += s->sat[b];
    memcpy(out->aux, s->sat, B * sizeof(uint64_t));
    cbf_counter_add(s->c_batches, s->batches);
    cbf_counter_add(s->c_missing, out->missing);
    cbf_counter_add(s->c_sat, out->saturated);
    return cbf_port_send(s->out, out);
}

static int bf_run(cbf_node *node, cbf_error *err)
{
    bf *s = cbf_node_state(node);
    int rc = cbf_stage_input_loop(node, "in", bf_buffer, s, err);
    return rc == CBF_ESTOPPED ? 0 : rc;
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
};

CBF_PLUGIN_DEFINE(bf_desc)
