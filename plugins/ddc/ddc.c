/* ddc plugin: one antenna of a "cbf.adc.packed" stream through the
 * narrowband down-converter (kernels/ddc), out as "cbf.ddc.complex"
 * buffers of a fixed number of complex outputs per polarisation.
 *
 * Output g (absolute) is the window starting at digitiser sample g x S, so
 * buffers sit at absolute multiples of `outputs_per_buffer` outputs and do
 * not depend on the input chunking; the mixer phase comes from the absolute
 * sample number (docs/narrowband.md). Input chunks are appended to a
 * staging area per polarisation (stage/staging.h; on the GPU that copy is
 * the upload); once it holds every window of the next buffer, that buffer
 * is made and the samples no later window needs are dropped. A short gap
 * in the input is filled with missing heaps (the blocks it touches go out
 * flagged), a long or backward jump restarts at the new timestamp; both
 * are counted in `input_gaps`. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cbf/cbf.h"
#include "ddc.h"
#include "filter_design.h"
#include "stage/contracts/adc.h"
#include "stage/contracts/ddc.h"
#include "stage/gpu.h"
#include "stage/input.h"
#include "stage/kern.h"
#include "stage/staging.h"

typedef struct ddc_state {
    cbf_node *node;
    cbf_ddc_config cfg;
    int antenna, gpu, per_thread;
    size_t S, T, n_out, chunk, heap, n_ant, block, n_blocks;
    double pass;          /* pass_bandwidth, Hz: > 0 keeps the whole band */
    float *z;
    cbf_ddc_cuda *plan;
    void *stream;
    cbf_staging st;       /* packed samples per pol, from a heap-aligned first sample */
    int64_t next;         /* first output of the next buffer (absolute) */
    cbf_pool *pool;
    cbf_counter *c_outputs, *c_missing;
} ddc_state;

static const cbf_param_decl ddc_params[] = {
    {.name = "centre_frequency", .type = CBF_PARAM_FLOAT, .has_range = 1, .min = -1e12,
     .max = 1e12, .doc = "Hz of the input band moved to DC (realised to adc_sample_rate / 2^32)"},
    {.name = "decimation", .type = CBF_PARAM_INT, .def = "8", .has_range = 1, .min = 2, .max = 1024,
     .doc = "subsampling factor S: output rate adc_sample_rate / S, kept band / (2 S)"},
    {.name = "taps", .type = CBF_PARAM_INT, .def = "0", .has_range = 1, .min = 0,
     .max = CBF_DDC_MAX_TAPS,
     .doc = "low-pass taps, 4, 8, 12 or 16 x decimation; 0 = 8 x decimation (16 x with "
            "pass_bandwidth)"},
    {.name = "pass_weight", .type = CBF_PARAM_FLOAT, .def = "0.005", .has_range = 1, .min = 1e-6,
     .max = 1e6,
     .doc = "passband error weight against alias bands (smaller: more suppression, more ripple)"},
    {.name = "pass_bandwidth", .type = CBF_PARAM_FLOAT, .def = "0", .has_range = 1, .min = 0,
     .max = 1e12,
     .doc = "Hz; > 0: keep the whole band adc_sample_rate / S (no channels discarded, VLBI), "
            "the filter flat over this width about the centre; 0: keep the inner half"},
    {.name = "antenna", .type = CBF_PARAM_INT, .def = "0", .has_range = 1, .min = 0, .max = 65535,
     .doc = "which antenna of the input"},
    {.name = "outputs_per_buffer", .type = CBF_PARAM_INT, .def = "0", .has_range = 1, .min = 0,
     .max = 1 << 28,
     .doc = "complex outputs per pol per buffer, a multiple of heap_samples / decimation; "
            "0 = samples_per_chunk / decimation"},
    {.name = "per_thread", .type = CBF_PARAM_INT, .def = "0", .has_range = 1, .min = 0, .max = 16,
     .doc = "GPU kernel: 0 = tensor cores where they apply (even bits up to 10, decimation a power "
            "of two from 8), else the FMA kernel with 8 outputs per CUDA thread; 4, 8 or 16 = "
            "the FMA kernel with that many"},
    {.name = "buffers", .type = CBF_PARAM_INT, .def = "4", .has_range = 1, .min = 2, .max = 64,
     .doc = "buffers in the output pool"},
};

static const cbf_port_decl ddc_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = CBF_TYPE_ADC_PACKED,
     .doc = "digitiser samples (all antennas)"},
    {.name = "out", .dir = CBF_PORT_OUT, .type = CBF_TYPE_DDC_COMPLEX,
     .doc = "complex float32 [pol][output], one presence flag per block of heap_samples / S "
            "outputs"},
};

static int ddc_read_input(cbf_node *node, ddc_state *s, double *rate, cbf_error *err)
{
    const cbf_port_desc *in = cbf_port_get_desc(cbf_node_port(node, "in", 0));
    double spc, heap;
    if (cbf_port_desc_get_attr(in, CBF_ATTR_ADC_SAMPLE_RATE, rate) ||
        cbf_port_desc_get_attr(in, CBF_ATTR_SAMPLES_PER_CHUNK, &spc) ||
        cbf_port_desc_get_attr(in, CBF_ATTR_HEAP_SAMPLES, &heap))
        return cbf_error_set(err, CBF_ECONFIG, "input lacks %s, %s or %s", CBF_ATTR_ADC_SAMPLE_RATE,
                             CBF_ATTR_SAMPLES_PER_CHUNK, CBF_ATTR_HEAP_SAMPLES);
    s->cfg.bits = in->bits;
    s->chunk = (size_t)spc;
    s->heap = (size_t)heap;
    s->n_ant = in->ndim == 3 ? in->shape[0] : 0;
    if (in->dtype != CBF_DTYPE_PACKED || in->ndim != 3 || in->shape[1] != 2 ||
        in->shape[2] != s->chunk * (size_t)in->bits / 8)
        return cbf_error_set(err, CBF_ECONFIG, "input is not [antenna][2 pols][bytes] of %zu "
                             "packed samples", s->chunk);
    if (!s->heap || s->heap % 32 || s->chunk % s->heap ||
        in->n_present != s->n_ant * 2 * (s->chunk / s->heap))
        return cbf_error_set(err, CBF_ECONFIG, "input heaps of %zu samples do not tile chunks of "
                             "%zu with one flag each", s->heap, s->chunk);
    return 0;
}

/* Keeping the whole band (katgpucbf's "no discard" form): flat over the
 * pass fraction f of the output band fs / S, |x| <= f / (2 S) cycles per
 * input sample, and stopped from (1 - f / 2) / S to 0.5, which holds every
 * band that aliases onto the pass band after subsampling; the roll-off
 * between lands, stated, at the output band's edges. The report takes the
 * ripple over the pass band and the suppression over the stop band. */
static int ddc_design_whole(ddc_state *s, double frac, double pass_weight, double *h,
                            cbf_fd_report *rep, char *msg, size_t msglen)
{
    const double S = (double)s->S, edge = 0.5 * frac / S, stop = (1.0 - 0.5 * frac) / S;
    const cbf_fd_band bands[2] = {{0.0, edge, 1.0, pass_weight}, {stop, 0.5, 0.0, 1.0}};
    int rc = cbf_fd_remez((int)s->T, bands, 2, 32, h, NULL, msg, msglen);
    if (rc)
        return rc;
    const int n = 32 * (int)s->T;
    rep->pass_min = INFINITY;
    rep->pass_max = rep->stop_max = 0;
    for (int i = 0; i <= n; i++) {
        double f = 0.5 * i / n, a = cbf_fd_amplitude(h, (int)s->T, f);
        if (f <= edge) {
            rep->pass_min = fmin(rep->pass_min, a);
            rep->pass_max = fmax(rep->pass_max, a);
        } else if (f >= stop) {
            rep->stop_max = fmax(rep->stop_max, fabs(a));
        }
    }
    rep->ripple_db = 20 * log10(rep->pass_max / rep->pass_min);
    rep->alias_db = -20 * log10(rep->stop_max / rep->pass_min);
    return 0;
}

static int ddc_design(ddc_state *s, const cbf_params *p, double rate, cbf_error *err)
{
    char msg[CBF_STAGE_MSG];
    const double frac = s->pass * (double)s->S / rate;
    if (s->pass > 0 && !(frac < 1))
        return cbf_error_set(err, CBF_ECONFIG, "%s: pass_bandwidth %g Hz must be less than the "
                             "band adc_sample_rate / decimation = %g Hz",
                             cbf_params_where(p, "pass_bandwidth"), s->pass, rate / (double)s->S);
    double *h = malloc(sizeof(double) * s->T);
    s->z = malloc(2 * sizeof(float) * s->T);
    if (!h || !s->z) {
        free(h);
        return cbf_error_set(err, CBF_ENOMEM, "taps");
    }
    cbf_fd_report rep;
    const double w = cbf_params_float(p, "pass_weight");
    int rc = s->pass > 0 ? ddc_design_whole(s, frac, w, h, &rep, msg, sizeof msg)
                         : cbf_fd_ddc_design((int)s->T, (int)s->S, w, h, NULL, &rep, msg, sizeof msg);
    /* The design passes 1; katgpucbf scales its DDC taps by sqrt(S), so that
     * noise keeps its spectral density over the kept band (the power gain S
     * undoes the subsampling's 1 / S), and so do we: a tone of amplitude A
     * comes out at sqrt(S) A / 2, and narrowband levels at a given gain are
     * katgpucbf's. */
    for (size_t k = 0; !rc && k < s->T; k++)
        h[k] *= sqrt((double)s->S);
    if (!rc)
        rc = cbf_ddc_weights(&s->cfg, h, s->z, msg, sizeof msg);
    free(h);
    if (rc)
        return cbf_error_set(err, CBF_ECONFIG, "%s: %s", cbf_params_where(p, "taps"), msg);
    cbf_log_info("%zu taps, decimation %zu, centre %.6f MHz, %s %.6f MHz: passband ripple "
                 "%.4f dB, alias suppression %.1f dB", s->T, s->S,
                 ldexp((double)s->cfg.mix_step, -32) * rate / 1e6,
                 s->pass > 0 ? "whole band kept, flat over" : "inner half kept,",
                 (s->pass > 0 ? s->pass : rate / (2.0 * (double)s->S)) / 1e6, rep.ripple_db,
                 rep.alias_db);
    return 0;
}

static int ddc_set_output(cbf_node *node, ddc_state *s, double rate, cbf_error *err)
{
    cbf_port_desc d;
    cbf_port_desc_init(&d, CBF_DTYPE_CF32, s->gpu ? CBF_MEM_DEVICE : CBF_MEM_HOST);
    cbf_port_desc_add_axis(&d, "pol", 2);
    cbf_port_desc_add_axis(&d, "sample", s->n_out);
    d.n_present = s->n_blocks;
    d.present_axis = "block";
    d.timestamp_step = (int64_t)(s->n_out * s->S);
    double centre = ldexp((double)s->cfg.mix_step, -32) * rate;
    cbf_port_desc_set_attr(&d, CBF_ATTR_ADC_SAMPLE_RATE, rate);
    cbf_port_desc_set_attr(&d, CBF_ATTR_DECIMATION, (double)s->S);
    cbf_port_desc_set_attr(&d, CBF_ATTR_TAPS, (double)s->T);
    cbf_port_desc_set_attr(&d, CBF_ATTR_CENTRE_FREQUENCY, centre > rate / 2 ? centre - rate : centre);
    /* The band the narrowband output keeps: the inner half, or all of it. */
    cbf_port_desc_set_attr(&d, CBF_ATTR_BANDWIDTH, rate / ((s->pass > 0 ? 1.0 : 2.0) * (double)s->S));
    if (s->pass > 0)
        cbf_port_desc_set_attr(&d, CBF_ATTR_PASS_BANDWIDTH, s->pass);
    cbf_port_desc_set_attr(&d, CBF_ATTR_GROUP_DELAY, 0.5 * (double)(s->T - 1));
    cbf_port_desc_set_attr(&d, CBF_ATTR_OUTPUTS_PER_BLOCK, (double)s->block);
    cbf_port_desc_set_attr(&d, CBF_ATTR_ANTENNA, s->antenna);
    cbf_port_desc_set_attr(&d, CBF_ATTR_BITS, s->cfg.bits);
    int rc = cbf_port_set_desc(cbf_node_port(node, "out", 0), &d, err);
    if (rc)
        return rc;
    const cbf_params *p = cbf_node_params(node);
    cbf_pool_config pc = {"out", d.mem, (size_t)cbf_params_int(p, "buffers"),
                          cbf_port_desc_bytes(&d), d.n_present, 0};
    return cbf_node_pool_create(node, &pc, &s->pool, err);
}

static int ddc_init(cbf_node *node, cbf_error *err)
{
    const cbf_params *p = cbf_node_params(node);
    ddc_state *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "state");
    cbf_node_set_state(node, s);
    s->node = node;
    double rate;
    int rc = ddc_read_input(node, s, &rate, err);
    if (rc)
        return rc;
    s->antenna = (int)cbf_params_int(p, "antenna");
    if ((size_t)s->antenna >= s->n_ant)
        return cbf_error_set(err, CBF_ECONFIG, "%s: antenna %d: the input has %zu",
                             cbf_params_where(p, "antenna"), s->antenna, s->n_ant);
    s->S = (size_t)cbf_params_int(p, "decimation");
    s->T = (size_t)cbf_params_int(p, "taps");
    s->pass = cbf_params_float(p, "pass_bandwidth");
    /* Keeping the whole band leaves the filter a narrower transition
     * (the pass band's edge to the first alias of it), so it takes
     * katgpucbf's ratio of 16; the discard form reaches the float32
     * floor at 8 (docs/narrowband.md). */
    if (!s->T)
        s->T = (s->pass > 0 ? 16 : 8) * s->S;
    s->cfg.decimation = (int)s->S;
    s->cfg.taps = (int)s->T;
    s->cfg.mix_step = cbf_ddc_mix_step(cbf_params_float(p, "centre_frequency") / rate);
    char msg[CBF_STAGE_MSG];
    if (cbf_ddc_config_check(&s->cfg, msg, sizeof msg))
        return cbf_error_set(err, CBF_ECONFIG, "%s: %s", cbf_params_where(p, "taps"), msg);
    if (s->heap % s->S)
        return cbf_error_set(err, CBF_ECONFIG, "%s: decimation %zu must divide the %zu-sample "
                             "heap", cbf_params_where(p, "decimation"), s->S, s->heap);
    s->block = s->heap / s->S;
    s->n_out = (size_t)cbf_params_int(p, "outputs_per_buffer");
    if (!s->n_out)
        s->n_out = s->chunk / s->S;
    if (!s->n_out || s->n_out % s->block)
        return cbf_error_set(err, CBF_ECONFIG, "%s: %zu outputs: must be a positive multiple of "
                             "heap_samples / decimation = %zu",
                             cbf_params_where(p, "outputs_per_buffer"), s->n_out, s->block);
    s->n_blocks = s->n_out / s->block;
    s->per_thread = (int)cbf_params_int(p, "per_thread");
    if ((rc = ddc_design(s, p, rate, err)))
        return rc;

    s->gpu = cbf_node_use_gpu(node);
#ifdef CBF_HAVE_CUDA
    if (s->gpu) {
        if ((rc = cbf_stage_stream_create(&s->stream, err)) ||
            (rc = cbf_stage_kern(cbf_ddc_cuda_create(&s->cfg, s->z, s->per_thread, &s->plan, msg,
                                                     sizeof msg),
                                 msg, err)))
            return rc;
    }
#else
    if (s->gpu)
        return cbf_error_set(err, CBF_ENOTSUP, "built without CUDA");
#endif
    /* One buffer's windows, an input chunk and a heap of alignment slack;
     * a gap of up to a few buffers is filled with missing heaps. */
    size_t cap = s->n_out * s->S + s->T + s->chunk + 2 * s->heap;
    cap = (cap + s->heap - 1) / s->heap * s->heap;
    const size_t a = (size_t)s->antenna * 2;
    cbf_staging_config c = {
        .kind = s->gpu ? CBF_MEM_DEVICE : CBF_MEM_HOST,
        .stream = s->stream,
        .bits = s->cfg.bits,
        .heap = s->heap,
        .chunk = s->chunk,
        .cap = cap,
        .pol_bytes = cbf_packed_bytes(cap, s->cfg.bits),
        .slab = {a, a + 1},
        .flag_row = {a, a + 1},
        .max_gap = (int64_t)(4 * s->n_out * s->S + s->T),
        .gaps = cbf_node_counter(node, "input_gaps"),
    };
    if ((rc = cbf_staging_init(&s->st, &c, err)) || (rc = ddc_set_output(node, s, rate, err)))
        return rc;
    s->c_outputs = cbf_node_counter(node, "outputs");
    s->c_missing = cbf_node_counter(node, "missing_blocks");
    return 0;
}

/* The first buffer after a (re)start at ts: the first whose windows all
 * start inside the input. */
static void ddc_start_at(ddc_state *s, int64_t ts)
{
    int64_t per = (int64_t)(s->n_out * s->S);
    s->next = (ts > 0 ? (ts + per - 1) / per : 0) * (int64_t)s->n_out;
}

/* Block b of the buffer is present when every heap its windows touch,
 * samples [o, o + (block - 1) S + T) from its first window start o, is
 * present in both pols. */
static uint64_t ddc_flag_blocks(const ddc_state *s, cbf_buffer *out)
{
    const uint8_t *f = s->st.present;
    size_t cap_heaps = s->st.cfg.cap / s->heap;
    uint64_t missing = 0;
    for (size_t b = 0; b < s->n_blocks; b++) {
        size_t o = (size_t)((s->next + (int64_t)(b * s->block)) * (int64_t)s->S - s->st.first);
        size_t lo = o / s->heap, hi = (o + (s->block - 1) * s->S + s->T - 1) / s->heap;
        uint8_t ok = 1;
        for (int q = 0; q < 2; q++)
            for (size_t h = lo; h <= hi; h++)
                ok &= f[(size_t)q * cap_heaps + h] != 0;
        out->present[b] = ok;
        missing += !ok;
    }
    out->n_present = s->n_blocks;
    return missing;
}

/* Drops the samples before the next buffer's first window, from a heap
 * boundary (timestamps are non-negative). */
static int ddc_trim(ddc_state *s, cbf_error *err)
{
    int64_t keep = s->next * (int64_t)s->S;
    keep -= keep % (int64_t)s->heap;
    return cbf_staging_keep(&s->st, keep, err);
}

static int ddc_produce(cbf_node *node, ddc_state *s, cbf_error *err)
{
    char msg[CBF_STAGE_MSG];
    cbf_buffer *out;
    int rc = cbf_pool_get(s->pool, &out);
    if (rc)
        return rc;
    out->timestamp = s->next * (int64_t)s->S;
    out->seq = (uint64_t)(s->next / (int64_t)s->n_out);
    out->missing = ddc_flag_blocks(s, out);
    const cbf_staging *st = &s->st;
    cbf_ddc_job job = {{st->data[0], st->data[1]}, st->len, (uint64_t)st->first,
                       (size_t)(out->timestamp - st->first), s->n_out, (float *)out->data, s->n_out};
#ifdef CBF_HAVE_CUDA
    if (s->gpu) {
        if (!(rc = cbf_stage_kern(cbf_ddc_cuda_run(s->plan, &job, s->stream, msg, sizeof msg), msg, err)))
            rc = cbf_buffer_record(out, s->stream, err);
    } else
#endif
        rc = cbf_stage_kern(cbf_ddc_cpu(&s->cfg, s->z, &job, msg, sizeof msg), msg, err);
    if (rc) {
        cbf_buffer_unref(out);
        return rc;
    }
    cbf_counter_add(s->c_outputs, s->n_out);
    cbf_counter_add(s->c_missing, out->missing);
    s->next += (int64_t)s->n_out;
    if ((rc = cbf_port_send(cbf_node_port(node, "out", 0), out)))
        return rc;
    return ddc_trim(s, err);
}

static int ddc_ready(const ddc_state *s)
{
    int64_t end = (s->next + (int64_t)s->n_out - 1) * (int64_t)s->S + (int64_t)s->T;
    return end <= cbf_staging_end(&s->st);
}

/* Every buffer the staging holds the windows of; before the first, only
 * what its windows need is kept. */
static int ddc_drain(void *ctx, cbf_error *err)
{
    ddc_state *s = ctx;
    int rc = 0;
    while (!rc && ddc_ready(s))
        rc = ddc_produce(s->node, s, err);
    return rc ? rc : ddc_trim(s, err);
}

static int ddc_take(void *ctx, cbf_buffer *buf, cbf_error *err)
{
    ddc_state *s = ctx;
    if (buf->timestamp < 0 || buf->timestamp % (int64_t)s->heap)
        return cbf_error_set(err, CBF_EINVAL, "input timestamp %lld is not a non-negative "
                             "multiple of the heap size %zu", (long long)buf->timestamp, s->heap);
    int how, rc = cbf_staging_place(&s->st, buf->timestamp, ddc_drain, s, &how, err);
    if (!rc && how == CBF_STAGING_RESTARTED)
        ddc_start_at(s, buf->timestamp);
    if (!rc)
        rc = cbf_staging_append(&s->st, buf, err);
    return rc ? rc : ddc_drain(s, err);
}

static int ddc_run(cbf_node *node, cbf_error *err)
{
    return cbf_stage_input_loop(node, "in", ddc_take, cbf_node_state(node), err);
}

static void ddc_fini(cbf_node *node)
{
    ddc_state *s = cbf_node_state(node);
    if (!s)
        return;
    cbf_staging_fini(&s->st);
#ifdef CBF_HAVE_CUDA
    cbf_ddc_cuda_destroy(s->plan);
#endif
    cbf_stage_stream_destroy(s->stream);
    free(s->z);
    free(s);
}

static const cbf_plugin_desc ddc_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "ddc",
    .version = "0.1.0",
    .summary = "narrowband down-conversion: fixed-point mixer, alias-band low-pass, subsampling",
    .params = ddc_params,
    .n_params = CBF_COUNT_OF(ddc_params),
    .ports = ddc_ports,
    .n_ports = CBF_COUNT_OF(ddc_ports),
    .init = ddc_init,
    .run = ddc_run,
    .fini = ddc_fini,
};

CBF_PLUGIN_DEFINE(ddc_desc)
