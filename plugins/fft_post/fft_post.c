/* fft_post plugin: "cbf.feng.fir" buffers from pfb through the FFT and the
 * post-processing of kernels/fft_post, out as "cbf.feng.spectra": int8 (or
 * packed 4-bit) channelised data, one presence flag per batch of
 * spectra_per_heap spectra (0 when any spectrum in it touched missing input:
 * the sender drops that heap), saturation counts and digitiser power.
 *
 * The transform runs in place on the input buffer, so pfb.out must feed this
 * node alone. On the GPU the output is copied to pinned host memory, which
 * every host consumer (sender, filesink) reads directly.
 *
 * Narrowband (a pfb fed by ddc: the input carries `decimation`): the
 * kernel's complex mode, one 2 x channels-point transform per spectrum of
 * which the inner half is kept, channel 0 the lowest frequency and the
 * ddc's centre frequency at channel channels / 2; with `pass_bandwidth`
 * (a ddc keeping the whole band) one channels-point transform, all kept. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cbf/cbf.h"
#include "fft_post.h"
#include "stage/contracts/ddc.h"
#include "stage/contracts/feng.h"
#include "stage/flow.h"
#include "stage/gpu.h"
#include "stage/kern.h"
#include "stage/timed.h"

#define POST_MAX_PENDING 16
/* GPU buffers in flight: one queued while the host waits for the one
 * before, and at most one held while the node waits for input (so pfb's
 * pool never runs dry because of it). */
#define POST_DEPTH 2

/* One buffer on the GPU: its input is held until the kernels are done, its
 * saturation counts come back (asynchronously) to pinned memory, and its
 * output goes out once the download's event has passed. */
typedef struct post_flight {
    cbf_buffer *in, *out;
    void *d_out;            /* device output before the copy to the pinned buffer */
    uint64_t *sat;          /* pinned [2] */
    void *computed;         /* compute stream: kernels and counts done */
    cbf_gpu_timer *timer;   /* its kernels: the gpu_ms_per_buffer gauge */
} post_flight;

typedef struct post_state {
    cbf_fft_post_config cfg;
    int64_t step;           /* samples between spectra */
    float *gains;           /* [channel][pol][re, im]: the table in force (the kernel's from the
                               next spectrum on) */
    float *configured;      /* the YAML's table, which `default` restores */
    cbf_timed *pend;        /* gain changes waiting for their timestamps: whole tables, each
                               built on the one before it (or on the table in force) */
    int model_in_aux;       /* pfb sends a per-spectrum delay model in aux */
    int gpu;
    size_t out_bytes;
    float delay[2], phase[2];
    double decimation;      /* digitiser samples per FIR input sample (1: wideband) */
    cbf_fft_post_cpu *cpu;
    cbf_fft_post_cuda *cuda;
    void *stream;           /* kernels */
    void *down;             /* downloads, overlapping the next buffer's kernels */
    post_flight fl[POST_DEPTH];
    size_t fl_head, fl_n;
    uint64_t *sat_host;     /* pinned, [POST_DEPTH][2] */
    cbf_gauge *g_gpu_ms;
    cbf_pool *pool;
    cbf_stage_record gains_rec; /* optional record of the tables in force */
    int start_recorded;     /* the table at start has gone to gains_rec */
    cbf_counter *c_batches, *c_missing, *c_sat[2];
    cbf_text *t_eq[2];      /* katgpucbf's STREAM.inputN.eq: the gains in force */
} post_state;

static const cbf_param_decl post_params[] = {
    {.name = "spectra_per_heap", .type = CBF_PARAM_INT, .def = "256", .has_range = 1, .min = 1,
     .max = 65536, .doc = "spectra per output heap (batch); must divide pfb's spectra_per_buffer"},
    {.name = "out_bits", .type = CBF_PARAM_CHOICE, .def = "8", .choices = "8|4",
     .doc = "output sample width: 8 (CI8) or 4 (CI4, real in the high nibble)"},
    {.name = "gain", .type = CBF_PARAM_FLOAT_LIST, .def = "[1.0, 0.0]", .has_range = 1,
     .min = -1e9, .max = 1e9,
     .doc = "complex gain [re, im] for every channel, or [re, im] per channel (2 x channels values)"},
    {.name = "fine_delay", .type = CBF_PARAM_FLOAT_LIST, .def = "[0.0, 0.0]", .has_range = 1,
     .min = -1e6, .max = 1e6,
     .doc = "fine delay per polarisation in digitiser samples: channel k turns by -pi d (k - "
            "channels/2) / channels, the band centre left alone (narrowband: by -pi d (k - "
            "channels/2) / (channels x decimation))"},
    {.name = "phase", .type = CBF_PARAM_FLOAT_LIST, .def = "[0.0, 0.0]", .has_range = 1,
     .min = -1e6, .max = 1e6,
     .doc = "fringe phase per polarisation, radians: the phase of the band centre"},
    {.name = "feng_id", .type = CBF_PARAM_INT, .def = "-1", .has_range = 1, .min = -1,
     .max = 65535,
     .doc = "this F-engine's antenna in the array, in the dither counter (antennas never share "
            "dither) and the output's `antenna` attribute (the sender's feng_id); -1: the input's "
            "`antenna` (set it where one process channelises one antenna of many)"},
    {.name = "dither", .type = CBF_PARAM_BOOL, .def = "true",
     .doc = "add uniform dither in (-1/2, 1/2) to each part before rounding (katgpucbf's "
            "default); false: rounding alone"},
    {.name = "fft", .type = CBF_PARAM_CHOICE, .def = "auto", .choices = "auto|cufft|cufftdx",
     .doc = "GPU transform: auto (the path measured fastest for the shape), cufft (the "
            "four-pass path: cuFFT, then the post kernel), cufftdx (FFT and post in one cuFFTDx "
            "kernel: wideband, unzip 1, 4096 or 8192 channels, sm_90, built with cuFFTDx; an "
            "error elsewhere); the CPU path ignores it"},
    /* At most 2^53, so the gauge and the attribute (doubles) hold it exactly. */
    {.name = "dither_key", .type = CBF_PARAM_INT, .def = "1", .has_range = 1, .min = 0,
     .max = 9007199254740992.0,
     .doc = "key of the counter-based dither generator: a key draws the same dither on the CPU "
            "and the GPU however the stream is cut into buffers, so a run repeats exactly"},
};

static const cbf_param_decl post_gain_args[] = {
    {.name = "values", .type = CBF_PARAM_FLOAT_LIST, .def = "[]", .has_range = 1, .min = -1e9,
     .max = 1e9,
     .doc = "one real gain, one complex [re, im], one real per channel, or [re, im] per channel; "
            "none: only reply with the gains (in force now, or at `at` with the pending changes)"},
    {.name = "pol", .type = CBF_PARAM_INT, .def = "-1", .has_range = 1, .min = -1, .max = 1,
     .doc = "polarisation 0 or 1; -1: both"},
    {.name = "at", .type = CBF_PARAM_INT, .def = "-1", .has_range = 1, .min = -1, .max = 9.2e18,
     .doc = "digitiser timestamp from which spectra use the new gains; -1: the next spectrum",
     .flags = CBF_PARAM_TIMESTAMP},
    {.name = "default", .type = CBF_PARAM_BOOL, .def = "false",
     .doc = "set the gains the YAML configured (instead of values)"},
    CBF_TIMED_CANCEL_ARG,
};

static const cbf_request_decl post_requests[] = {
    {.name = "gain", .args = post_gain_args, .n_args = CBF_COUNT_OF(post_gain_args),
     .doc = "set the complex gains from a timestamp on (every spectrum uses all old or all new "
            "gains; it replaces pending changes after it), or read them (no values)",
     .flags = CBF_REQUEST_READS},
};

/* The transform runs in place on the input, so the loader refuses to fan
 * pfb.out out into this node (CBF_PORT_WRITES_INPUT). */
static const cbf_port_decl post_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = CBF_TYPE_FENG_FIR "|" CBF_TYPE_FENG_FIR_COMPLEX,
     .flags = CBF_PORT_WRITES_INPUT,
     .doc = "pfb output, transformed in place (" CBF_TYPE_FENG_FIR_COMPLEX ": narrowband)"},
    {.name = "out", .dir = CBF_PORT_OUT, .type = CBF_TYPE_FENG_SPECTRA,
     .doc = "[batch][channel][spectrum][pol] CI8 or CI4 for one antenna"},
    {.name = "gains", .dir = CBF_PORT_OUT, .type = CBF_TYPE_FENG_GAINS, .optional = 1,
     .doc = "every gain table in force, CF32 [channel][pol], timestamped with its first "
            "spectrum: the one at start, then each applied change (wire to a filesink to record "
            "runtime changes beside the data)"},
};

static int post_read_list2(const cbf_params *p, const char *name, float out[2], cbf_error *err)
{
    if (cbf_params_len(p, name) != 2)
        return cbf_error_set(err, CBF_ECONFIG, "%s: %s needs two values (pol 0, pol 1)",
                             cbf_params_where(p, name), name);
    for (int q = 0; q < 2; q++)
        out[q] = (float)cbf_params_float_at(p, name, (size_t)q);
    return 0;
}

/* katgpucbf's STREAM.inputN.eq sensors (fgpu's set_gains): each pol's
 * gains in force as "[re+imj, ...]" in format_complex's form, one value
 * when every channel has the same. */
static void post_show_gains(post_state *s)
{
    const size_t C = (size_t)s->cfg.channels;
    char *t = malloc(C * 52 + 3);
    for (int q = 0; t && q < 2; q++) {
        const float *g = s->gains + 2 * q;
        size_t n = 1, l = 1;
        for (size_t k = 1; k < C && n == 1; k++)
            n = g[4 * k] == g[0] && g[4 * k + 1] == g[1] ? 1 : C;
        t[0] = '[';
        for (size_t k = 0; k < n; k++) {
            char z[52];
            cbf_format_complex(g[4 * k], g[4 * k + 1], z, sizeof z);
            l += (size_t)sprintf(t + l, "%s%s", k ? ", " : "", z);
        }
        strcpy(t + l, "]");
        cbf_text_set(s->t_eq[q], t, CBF_STATUS_NOMINAL);
    }
    free(t);
}

/* [channel][pol][re, im] gains from the `gain` list. */
static int post_make_gains(const cbf_params *p, int channels, float **out, cbf_error *err)
{
    size_t n = cbf_params_len(p, "gain");
    if (n != 2 && n != 2 * (size_t)channels)
        return cbf_error_set(err, CBF_ECONFIG, "%s: gain has %zu values: give [re, im] or "
                             "2 x channels (%d) values", cbf_params_where(p, "gain"), n,
                             2 * channels);
    float *g = malloc(sizeof(float) * 4 * (size_t)channels);
    if (!g)
        return cbf_error_set(err, CBF_ENOMEM, "gains");
    for (int k = 0; k < channels; k++)
        for (int q = 0; q < 2; q++) {
            size_t src = n == 2 ? 0 : 2 * (size_t)k;
            g[4 * k + 2 * q] = (float)cbf_params_float_at(p, "gain", src);
            g[4 * k + 2 * q + 1] = (float)cbf_params_float_at(p, "gain", src + 1);
        }
    *out = g;
    return 0;
}

static int post_setup_backend(cbf_node *node, post_state *s, const float *gains, cbf_error *err)
{
    char msg[CBF_STAGE_MSG];
    int rc;
    s->gpu = cbf_node_use_gpu(node);
#ifdef CBF_HAVE_CUDA
    if (s->gpu) {
        if ((rc = cbf_stage_stream_create(&s->stream, err)) ||
            (rc = cbf_stage_stream_create(&s->down, err)) ||
            (rc = cbf_stage_alloc(CBF_MEM_PINNED, sizeof(uint64_t) * 2 * POST_DEPTH,
                                  (void **)&s->sat_host, "saturation counts", err)))
            return rc;
        for (int k = 0; k < POST_DEPTH; k++) {
            post_flight *f = &s->fl[k];
            f->sat = s->sat_host + 2 * k;
            if ((rc = cbf_gpu_timer_create(&f->timer, err)) ||
                (rc = cbf_stage_event_create(&f->computed, err)) ||
                (rc = cbf_stage_alloc(CBF_MEM_DEVICE, s->out_bytes, &f->d_out, "output", err)))
                return rc;
        }
        s->g_gpu_ms = cbf_node_gauge(node, "gpu_ms_per_buffer");
        cbf_gauge_describe(s->g_gpu_ms, "ms", "GPU time of the last buffer's FFT and requantisation");
        if ((rc = cbf_stage_kern(cbf_fft_post_cuda_create(&s->cfg, s->stream, &s->cuda, msg, sizeof msg),
                                 msg, err)))
            return rc;
        cbf_log_info("transform: %s", cbf_fft_post_cuda_fused(s->cuda)
                                          ? "fused cuFFTDx FFT + post kernel"
                                          : "cuFFT, then the post kernel");
        return cbf_stage_kern(cbf_fft_post_cuda_set_gains(s->cuda, gains, msg, sizeof msg), msg, err);
    }
#else
    if (s->gpu)
        return cbf_error_set(err, CBF_ENOTSUP, "built without CUDA");
#endif
    if ((rc = cbf_stage_kern(cbf_fft_post_cpu_create(&s->cfg, &s->cpu, msg, sizeof msg), msg, err)))
        return rc;
    return cbf_fft_post_cpu_set_gains(s->cpu, gains);
}

/* The gains output, when wired: the spectra's attributes (channels,
 * antenna, band) on a [channel][pol] table. */
static int post_gains_open(cbf_node *node, post_state *s, const cbf_port_desc *spectra,
                           cbf_error *err)
{
    cbf_port_desc d;
    cbf_port_desc_init(&d, CBF_DTYPE_CF32, CBF_MEM_HOST);
    d.type = CBF_TYPE_FENG_GAINS;
    cbf_port_desc_add_axis(&d, "channel", (size_t)s->cfg.channels);
    cbf_port_desc_add_axis(&d, "pol", 2);
    return cbf_stage_record_open(node, "gains", &d, spectra, &s->gains_rec, err);
}

static int post_init(cbf_node *node, cbf_error *err)
{
    const cbf_params *p = cbf_node_params(node);
    post_state *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "state");
    cbf_node_set_state(node, s);
    const cbf_port_desc *in = cbf_port_get_desc(cbf_node_port(node, "in", 0));
    double channels = 0, unzip = 0, rate = 0, antenna = 0, step = 0;
    if (cbf_port_desc_get_attr(in, CBF_ATTR_CHANNELS, &channels) ||
        cbf_port_desc_get_attr(in, CBF_ATTR_UNZIP, &unzip) ||
        cbf_port_desc_get_attr(in, CBF_ATTR_SAMPLES_BETWEEN_SPECTRA, &step) || in->ndim != 3)
        return cbf_error_set(err, CBF_ECONFIG, "input is not a pfb output");
    cbf_port_desc_get_attr(in, CBF_ATTR_ADC_SAMPLE_RATE, &rate);
    s->step = (int64_t)step;
    cbf_port_desc_get_attr(in, CBF_ATTR_ANTENNA, &antenna);
    if (cbf_params_int(p, "feng_id") >= 0)
        antenna = (double)cbf_params_int(p, "feng_id");
    s->decimation = 1;
    s->cfg.complex_in = !strcmp(in->type, CBF_TYPE_FENG_FIR_COMPLEX);
    if (s->cfg.complex_in && cbf_port_desc_get_attr(in, CBF_ATTR_DECIMATION, &s->decimation))
        return cbf_error_set(err, CBF_ECONFIG, "narrowband input without '%s'", CBF_ATTR_DECIMATION);
    /* A narrowband output keeping the whole band states its flat part. */
    double pass = 0;
    s->cfg.keep_all = s->cfg.complex_in &&
                      !cbf_port_desc_get_attr(in, CBF_ATTR_PASS_BANDWIDTH, &pass) && pass > 0;
    /* pfb output carries its delay model per spectrum in aux (fine delay
     * in FIR input samples: ddc outputs narrowband). */
    s->model_in_aux = in->aux_size >= cbf_feng_fir_aux_size(in->shape[1]);
    int rc;
    s->cfg.channels = (int)channels;
    s->cfg.unzip = (int)unzip;
    s->cfg.spectra = in->shape[1];
    s->cfg.spectra_per_heap = (int)cbf_params_int(p, "spectra_per_heap");
    s->cfg.out_bits = atoi(cbf_params_string(p, "out_bits"));
    /* Each antenna draws its own dither (the counter holds it), as
     * katgpucbf's engines draw from sequences of their own. */
    s->cfg.dither = cbf_params_bool(p, "dither");
    s->cfg.dither_key = (uint64_t)cbf_params_int(p, "dither_key");
    s->cfg.dither_antenna = antenna >= 0 && antenna < 65536 ? (int)antenna : -1;
    const char *fft = cbf_params_string(p, "fft");
    s->cfg.fft = !strcmp(fft, "cufft")     ? CBF_FFT_POST_FFT_CUFFT
                 : !strcmp(fft, "cufftdx") ? CBF_FFT_POST_FFT_CUFFTDX
                                           : CBF_FFT_POST_FFT_AUTO;
    if (s->cfg.spectra % (size_t)s->cfg.spectra_per_heap)
        return cbf_error_set(err, CBF_ECONFIG, "%s: spectra_per_heap %d does not divide the "
                             "%zu spectra of each input buffer (pfb spectra_per_buffer)",
                             cbf_params_where(p, "spectra_per_heap"), s->cfg.spectra_per_heap,
                             s->cfg.spectra);
    char msg[CBF_STAGE_MSG];
    if ((rc = cbf_stage_kern(cbf_fft_post_config_check(&s->cfg, msg, sizeof msg), msg, err)) ||
        (rc = post_read_list2(p, "fine_delay", s->delay, err)) ||
        (rc = post_read_list2(p, "phase", s->phase, err)))
        return rc;
    s->out_bytes = cbf_fft_post_out_bytes(&s->cfg);
    const size_t batches = s->cfg.spectra / (size_t)s->cfg.spectra_per_heap;
    float *gains = NULL;
    if ((rc = post_make_gains(p, s->cfg.channels, &gains, err)))
        return rc;
    rc = post_setup_backend(node, s, gains, err);
    s->gains = gains;
    if (rc)
        return rc;
    const size_t table = sizeof(float) * 4 * (size_t)s->cfg.channels;
    if (!(s->configured = malloc(table)))
        return cbf_error_set(err, CBF_ENOMEM, "gains");
    memcpy(s->configured, gains, table);
    if (!s->gpu && in->mem != CBF_MEM_HOST)
        return cbf_error_set(err, CBF_ECONFIG, "input in %s memory on the CPU path",
                             cbf_mem_kind_name(in->mem));
    if (s->gpu && in->mem != CBF_MEM_DEVICE)
        return cbf_error_set(err, CBF_ECONFIG, "GPU path needs device input, got %s",
                             cbf_mem_kind_name(in->mem));

    cbf_port_desc d;
    cbf_port_desc_init(&d, s->cfg.out_bits == 8 ? CBF_DTYPE_CI8 : CBF_DTYPE_CI4,
                       s->gpu ? CBF_MEM_PINNED : CBF_MEM_HOST);
    cbf_port_desc_add_axis(&d, "batch", batches);
    cbf_port_desc_add_axis(&d, "channel", (size_t)s->cfg.channels);
    cbf_port_desc_add_axis(&d, "spectrum", (size_t)s->cfg.spectra_per_heap);
    cbf_port_desc_add_axis(&d, "pol", 2);
    d.n_present = batches;
    d.present_axis = "batch";
    d.aux_size = sizeof(cbf_feng_spectra_aux);
    d.aux_layout = CBF_FENG_SPECTRA_AUX_LAYOUT;
    d.timestamp_step = in->timestamp_step;
    cbf_port_desc_set_attr(&d, CBF_ATTR_CHANNELS, channels);
    cbf_port_desc_set_attr(&d, CBF_ATTR_SPECTRA_PER_HEAP, s->cfg.spectra_per_heap);
    cbf_port_desc_set_attr(&d, CBF_ATTR_SAMPLES_BETWEEN_SPECTRA, step);
    cbf_port_desc_set_attr(&d, CBF_ATTR_ADC_SAMPLE_RATE, rate);
    cbf_port_desc_set_attr(&d, CBF_ATTR_ANTENNA, antenna);
    /* Whether the data were dithered and with which key, so a file says so. */
    cbf_port_desc_set_attr(&d, CBF_ATTR_DITHER, s->cfg.dither);
    cbf_port_desc_set_attr(&d, CBF_ATTR_DITHER_KEY, (double)s->cfg.dither_key);
    /* Wideband, first Nyquist zone of a real digitiser: channel 0 at DC of
     * the ADC band. Narrowband: the ddc's band, centre at channel N/2. */
    if (s->cfg.complex_in) {
        double v;
        cbf_port_desc_set_attr(&d, CBF_ATTR_DECIMATION, s->decimation);
        if (rate > 0)
            cbf_port_desc_set_attr(&d, CBF_ATTR_BANDWIDTH,
                                   rate / ((s->cfg.keep_all ? 1 : 2) * s->decimation));
        if (s->cfg.keep_all)
            cbf_port_desc_set_attr(&d, CBF_ATTR_PASS_BANDWIDTH, pass);
        if (!cbf_port_desc_get_attr(in, CBF_ATTR_CENTRE_FREQUENCY, &v))
            cbf_port_desc_set_attr(&d, CBF_ATTR_CENTRE_FREQUENCY, v);
    } else if (rate > 0) {
        cbf_port_desc_set_attr(&d, CBF_ATTR_BANDWIDTH, rate / 2);
    }
    if ((rc = cbf_port_set_desc(cbf_node_port(node, "out", 0), &d, err)))
        return rc;
    cbf_pool_config pc = {"out", d.mem, 4, s->out_bytes, batches, d.aux_size};
    if ((rc = cbf_node_pool_create(node, &pc, &s->pool, err)) ||
        (rc = post_gains_open(node, s, &d, err)))
        return rc;
    s->c_batches = cbf_node_counter(node, "batches");
    s->c_missing = cbf_node_counter(node, "missing_batches");
    s->c_sat[0] = cbf_node_counter(node, "saturated_pol0");
    s->c_sat[1] = cbf_node_counter(node, "saturated_pol1");
    /* clip counts rising: katgpucbf colours them warn */
    cbf_counter_warn_on_rise(s->c_sat[0]);
    cbf_counter_warn_on_rise(s->c_sat[1]);
    cbf_counter_describe(s->c_batches, "", "batches of spectra requantised and passed on");
    cbf_counter_describe(s->c_missing, "", "batches passed on without all their input (flagged missing)");
    cbf_counter_describe(s->c_sat[0], "", "output values of polarisation 0 clipped by the requantiser");
    cbf_counter_describe(s->c_sat[1], "", "output values of polarisation 1 clipped by the requantiser");
    cbf_gauge_set(cbf_node_gauge(node, "dither"), s->cfg.dither);
    cbf_gauge_set(cbf_node_gauge(node, "dither_key"), (double)s->cfg.dither_key);
    /* katgpucbf's names, the node standing for the output stream */
    cbf_text *seed = cbf_node_text(node, "dither-seed");
    char v[24];
    snprintf(v, sizeof v, "%llu", (unsigned long long)s->cfg.dither_key);
    cbf_text_set(seed, v, CBF_STATUS_NOMINAL);
    cbf_text_describe(seed, "", "Random seed used in dithering for quantisation");
    for (int q = 0; q < 2; q++) {
        char name[24];
        snprintf(name, sizeof name, "input%d.feng-clip-cnt", q);
        cbf_counter_katcp(s->c_sat[q], name, 0);
        snprintf(name, sizeof name, "input%d.eq", q);
        s->t_eq[q] = cbf_node_text(node, name);
        cbf_text_describe(s->t_eq[q], "", "For this input, the complex, unitless, per-channel digital scaling "
                          "factors implemented prior to requantisation");
    }
    post_show_gains(s);
    /* One change per input buffer: the kernel switches tables once. */
    cbf_timed_config tc = {.noun = "gain change", .payload = sizeof(float) * 4 * s->cfg.channels,
                           .max_pending = POST_MAX_PENDING,
                           .granule = (int64_t)s->cfg.spectra * s->step};
    return cbf_timed_create(&tc, &s->pend, err);
}

/* The first pending gain change that falls in this buffer becomes the
 * plan's next table and the spectrum it starts at; requests are refused
 * when a second one would fall in the same buffer, so none is ever late. */
static int post_take_gain_change(post_state *s, int64_t ts, cbf_fft_post_args *a, cbf_error *err)
{
    /* The table at start is in force from the first spectrum on. */
    if (!s->start_recorded) {
        s->start_recorded = 1;
        int rc = cbf_stage_record_send(&s->gains_rec, s->gains, ts);
        if (rc)
            return cbf_error_set(err, rc, "gains output stopped");
    }
    if (!cbf_timed_count(s->pend))
        return 0;
    const int64_t at = cbf_timed_at(s->pend, 0);
    const float *gains = cbf_timed_payload(s->pend, 0);
    if (at >= ts + (int64_t)s->cfg.spectra * s->step)
        return 0;
    int64_t k = at <= ts ? 0 : (at - ts + s->step - 1) / s->step;
    char msg[CBF_STAGE_MSG];
    int rc = 0;
#ifdef CBF_HAVE_CUDA
    if (s->gpu)
        rc = cbf_stage_kern(cbf_fft_post_cuda_set_next_gains(s->cuda, gains, msg, sizeof msg), msg, err);
    else
#endif
        rc = cbf_stage_kern(cbf_fft_post_cpu_set_next_gains(s->cpu, gains),
                            "cannot set the next gains", err);
    (void)msg;
    if (rc)
        return rc;
    a->switch_gains = 1;
    a->gain_switch = (size_t)k;
    if ((rc = cbf_stage_record_send(&s->gains_rec, gains, ts + k * s->step)))
        return cbf_error_set(err, rc, "gains output stopped");
    cbf_log_info("gain change at timestamp %lld: from spectrum %lld of the buffer at %lld",
                 (long long)at, (long long)k, (long long)ts);
    memcpy(s->gains, gains, sizeof(float) * 4 * (size_t)s->cfg.channels);
    cbf_timed_pop(s->pend, 1);
    post_show_gains(s);
    return 0;
}

static int64_t post_floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return q - (a % b != 0 && (a < 0) != (b < 0));
}

/* Makes out from in: at once on the CPU (sat set), queued on the GPU (the
 * counts come to f->sat, out->event fires when out is complete). */
static int post_process(post_state *s, cbf_buffer *in, cbf_buffer *out, uint64_t sat[2],
                        post_flight *f, cbf_error *err)
{
    char msg[CBF_STAGE_MSG];
    /* The kernel takes the fine delay in FIR input samples. */
    float dec = (float)s->decimation;
    cbf_fft_post_args a = {(float *)in->data, s->cfg.spectra * cbf_fft_post_row_floats(&s->cfg),
                           out->data, {s->delay[0] / dec, s->delay[1] / dec},
                           {s->phase[0], s->phase[1]}, NULL, 0, 0, 0};
    /* The dither counter's spectrum: absolute, so any buffering agrees. */
    a.first_spectrum = (uint64_t)post_floor_div(in->timestamp, s->step);
    /* pfb's delay model, evaluated per spectrum, when it turns anything. */
    const cbf_feng_fir_aux *fir = s->model_in_aux ? in->aux : NULL;
    if (fir && fir->rotate)
        a.spectrum_delay = fir->delay_phase;
    int grc = post_take_gain_change(s, in->timestamp, &a, err);
    if (grc)
        return grc;
#ifdef CBF_HAVE_CUDA
    if (s->gpu) {
        int rc = cbf_buffer_wait_stream(in, s->stream, err);
        a.out = f->d_out;
        if (!rc)
            rc = cbf_gpu_timer_start(f->timer, s->stream, err);
        if (!rc)
            rc = cbf_stage_kern(cbf_fft_post_cuda_run(s->cuda, &a, msg, sizeof msg), msg, err);
        if (!rc)
            rc = cbf_gpu_timer_stop(f->timer, s->stream, err);
        if (!rc)
            rc = cbf_stage_kern(cbf_fft_post_cuda_saturated_async(s->cuda, f->sat, msg, sizeof msg),
                                msg, err);
        if (!rc)
            rc = cbf_stage_event_record(f->computed, s->stream, err);
        if (!rc)
            rc = cbf_stage_stream_wait(s->down, f->computed, err);
        if (!rc)
            rc = cbf_stage_copy(out->data, out->kind, f->d_out, CBF_MEM_DEVICE, s->out_bytes,
                                s->down, "download", err);
        /* Its event covers the counts too: they were copied before `computed`. */
        if (!rc)
            rc = cbf_buffer_record(out, s->down, err);
        return rc;
    }
#endif
    (void)f;
    return cbf_stage_kern(cbf_fft_post_cpu_run(s->cpu, &a, sat, msg, sizeof msg), msg, err);
}

/* The rest of out's metadata, once its counts are known; in is released
 * and out sent. */
static int post_deliver(post_state *s, cbf_port *outp, cbf_buffer *in, cbf_buffer *out,
                        const uint64_t sat[2])
{
    const size_t batches = s->cfg.spectra / (size_t)s->cfg.spectra_per_heap;
    cbf_fft_post_batch_presence(in->present, s->cfg.spectra, s->cfg.spectra_per_heap, out->present);
    out->n_present = batches;
    out->missing = 0;
    for (size_t b = 0; b < batches; b++)
        out->missing += !out->present[b];
    out->timestamp = in->timestamp;
    out->seq = in->seq;
    out->saturated = sat[0] + sat[1];
    cbf_feng_spectra_aux aux = {.saturated = {sat[0], sat[1]}};
    if (in->aux && in->aux_size >= sizeof(cbf_feng_fir_aux))
        memcpy(aux.power_sum, ((const cbf_feng_fir_aux *)in->aux)->power_sum, sizeof aux.power_sum);
    memcpy(out->aux, &aux, sizeof aux);
    cbf_counter_add(s->c_batches, batches);
    cbf_counter_add(s->c_missing, out->missing);
    cbf_counter_add(s->c_sat[0], sat[0]);
    cbf_counter_add(s->c_sat[1], sat[1]);
    cbf_buffer_unref(in);
    return cbf_port_send(outp, out);
}

/* Sends the GPU buffers whose downloads are done, oldest first, waiting
 * for the oldest while more than `keep` are in flight. outp NULL: waits
 * for them all and drops them (fini, after an error). */
static int post_land(post_state *s, cbf_port *outp, size_t keep, cbf_error *err)
{
    while (s->fl_n) {
        post_flight *f = &s->fl[s->fl_head];
        int done = 1;
        if (!outp || s->fl_n > keep) {
            int rc = cbf_stage_event_sync(f->out->event, err);
            done = rc ? rc : 1;
        } else {
            done = cbf_stage_event_done(f->out->event, err);
        }
        if (!done)
            return 0;
        s->fl_head = (s->fl_head + 1) % POST_DEPTH;
        s->fl_n--;
        cbf_buffer *in = f->in, *out = f->out;
        f->in = f->out = NULL;
        if (done < 0 || !outp) {
            cbf_buffer_unref(in);
            cbf_buffer_unref(out);
            if (done < 0 && outp)
                return done;
            continue;
        }
#ifdef CBF_HAVE_CUDA
        cbf_gauge_set(s->g_gpu_ms, cbf_gpu_timer_ms(f->timer));
#endif
        int rc = post_deliver(s, outp, in, out, f->sat);
        if (rc)
            return rc;
    }
    return 0;
}

static int post_run(cbf_node *node, cbf_error *err)
{
    post_state *s = cbf_node_state(node);
    cbf_port *in = cbf_node_port(node, "in", 0), *outp = cbf_node_port(node, "out", 0);
    for (;;) {
        cbf_buffer *buf, *out;
        int rc = cbf_port_recv(in, &buf);
        if (rc == CBF_EOS)
            return post_land(s, outp, 0, err);
        if (rc)
            return rc;
        if ((rc = cbf_pool_get(s->pool, &out))) {
            cbf_buffer_unref(buf);
            return rc;
        }
        uint64_t sat[2] = {0, 0};
        post_flight *f = s->gpu ? &s->fl[(s->fl_head + s->fl_n) % POST_DEPTH] : NULL;
        rc = post_process(s, buf, out, sat, f, err);
        cbf_timed_processed(s->pend, buf->timestamp + (int64_t)s->cfg.spectra * s->step);
        if (rc) {
            cbf_buffer_unref(buf);
            cbf_buffer_unref(out);
            return rc;
        }
        if (!f) {
            if ((rc = post_deliver(s, outp, buf, out, sat)))
                return rc;
            continue;
        }
        f->in = buf;
        f->out = out;
        s->fl_n++;
        if ((rc = post_land(s, outp, POST_DEPTH - 1, err)))
            return rc;
    }
}

static void post_fini(cbf_node *node)
{
    post_state *s = cbf_node_state(node);
    if (!s)
        return;
    cbf_fft_post_cpu_destroy(s->cpu);
    free(s->gains);
    free(s->configured);
    cbf_timed_destroy(s->pend);
    cbf_error ignored;
    post_land(s, NULL, 0, &ignored);
#ifdef CBF_HAVE_CUDA
    cbf_fft_post_cuda_destroy(s->cuda);
    for (int k = 0; k < POST_DEPTH; k++)
        cbf_gpu_timer_destroy(s->fl[k].timer);
#endif
    for (int k = 0; k < POST_DEPTH; k++) {
        cbf_stage_event_destroy(s->fl[k].computed);
        cbf_stage_free(CBF_MEM_DEVICE, s->fl[k].d_out);
    }
    cbf_stage_free(CBF_MEM_PINNED, s->sat_host);
    cbf_stage_stream_destroy(s->down);
    cbf_stage_stream_destroy(s->stream);
    free(s);
}

/* The reply's gains of pol q in table g: [re, im] when every channel has
 * the same gain, else [re, im] per channel (what `values` takes back). */
static int post_reply_gains(const post_state *s, const float *g, int q, cbf_reply *reply)
{
    const int N = s->cfg.channels;
    int same = 1;
    for (int k = 1; k < N && same; k++)
        same = g[4 * k + 2 * q] == g[2 * q] && g[4 * k + 2 * q + 1] == g[2 * q + 1];
    const int n = same ? 1 : N;
    double *v = malloc(sizeof(double) * 2 * (size_t)n);
    if (!v)
        return CBF_ENOMEM;
    for (int k = 0; k < n; k++) {
        v[2 * k] = g[4 * k + 2 * q];
        v[2 * k + 1] = g[4 * k + 2 * q + 1];
    }
    int rc = cbf_reply_float_list(reply, q ? "pol1" : "pol0", v, 2 * (size_t)n);
    free(v);
    return rc;
}

/* Fills the pols asked of table g from the request: its values (1, 2, N or
 * 2N of them, see post_gain_args) or the configured table. */
static void post_fill(const post_state *s, const cbf_params *p, int pol, bool dflt, float *g)
{
    const int N = s->cfg.channels;
    size_t n = cbf_params_len(p, "values");
    bool cplx = n == 2 || n == 2 * (size_t)N;
    for (int k = 0; k < N; k++)
        for (int q = 0; q < 2; q++) {
            if (pol >= 0 && q != pol)
                continue;
            float *d = &g[4 * k + 2 * q];
            if (dflt) {
                d[0] = s->configured[4 * k + 2 * q];
                d[1] = s->configured[4 * k + 2 * q + 1];
                continue;
            }
            size_t src = n == 1 || n == 2 ? 0 : n == (size_t)N ? (size_t)k : 2 * (size_t)k;
            d[0] = (float)cbf_params_float_at(p, "values", src);
            d[1] = cplx ? (float)cbf_params_float_at(p, "values", src + 1) : 0.0f;
        }
}

/* On the node's thread, between buffers (cbf/control.h): checks the
 * request against this node's shape and what it has processed, then queues
 * the new table for its timestamp (replacing the changes after it), drops
 * pending changes (cancel), or only reads the gains (no values: those in
 * force, or at `at` with the pending changes). Refusals change nothing. */
static int post_request(cbf_node *node, const cbf_request *req, cbf_reply *reply, cbf_error *err)
{
    post_state *s = cbf_node_state(node);
    const cbf_params *p = cbf_request_args(req);
    const int N = s->cfg.channels;
    const size_t table = sizeof(float) * 4 * (size_t)N;
    size_t n = cbf_params_len(p, "values");
    const bool dflt = cbf_params_bool(p, "default"), cancel = cbf_params_bool(p, "cancel");
    if (n != 0 && n != 1 && n != 2 && n != (size_t)N && n != 2 * (size_t)N)
        return cbf_error_set(err, CBF_EINVAL, "gain: %zu values: give 1 (real), 2 (re, im), %d "
                             "(real per channel) or %d ([re, im] per channel)", n, N, 2 * N);
    if ((dflt || cancel) && (n || (dflt && cancel)))
        return cbf_error_set(err, CBF_EINVAL, "gain: give one of values, default or cancel");
    /* a read-only engine lets `gain` through only to read the gains */
    if ((n || dflt || cancel) && cbf_request_read_only(req))
        return cbf_error_set(err, CBF_EINVAL, "gain: refused: the engine is read-only (engine.read_only: "
                             "true); without values, default or cancel, gain only reads the gains");
    int pol = (int)cbf_params_int(p, "pol");
    const int64_t asked = cbf_params_int(p, "at");
    int64_t at = cbf_timed_resolve(s->pend, asked);
    const float *shown = s->gains;
    if (cancel) {
        if (pol >= 0)
            return cbf_error_set(err, CBF_EINVAL, "gain: cancel drops whole changes (both pols); "
                                 "leave pol out");
        cbf_timed_cancel(s->pend, at);
    } else if (n || dflt) {
        if (cbf_timed_check(s->pend, at, err))
            return cbf_error_prefix(err, "gain");
        /* A change to one polarisation keeps the other's from the table that
         * would be in force just before it: the pending change before `at`
         * (the changes after it are replaced), else the table in force. */
        const int before = cbf_timed_find(s->pend, at);
        const float *base = before >= 0 ? cbf_timed_payload(s->pend, before) : s->gains;
        int merged;
        float *g = cbf_timed_push(s->pend, at, &merged);
        if (!merged)
            memcpy(g, base, table);
        post_fill(s, p, pol, dflt, g);
        cbf_reply_int(reply, "spectrum", (at + s->step - 1) / s->step);
    } else if (asked >= 0) {
        const int i = cbf_timed_find(s->pend, at);
        if (i >= 0)
            shown = cbf_timed_payload(s->pend, i);
    }
    cbf_reply_int(reply, "at", at);
    cbf_timed_reply(s->pend, reply);
    /* Only a reading shows the table: a change's reply stays small however
     * long its table (a change's reply is ignored when it fails: the
     * change stands). */
    const bool reading = !n && !dflt && !cancel;
    for (int q = 0; q < 2 && reading; q++)
        if (pol < 0 || q == pol) {
            int rc = post_reply_gains(s, shown, q, reply);
            if (rc)
                return cbf_error_set(err, rc, "gain: reply: out of memory");
        }
    return 0;
}

static const cbf_plugin_desc post_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "fft_post",
    .version = "0.1.0",
    .summary = "FFT (wideband real or narrowband complex), gains, fine delay, dither, "
               "quantisation and heap transpose (F-engine back end)",
    .params = post_params,
    .n_params = CBF_COUNT_OF(post_params),
    .ports = post_ports,
    .n_ports = CBF_COUNT_OF(post_ports),
    .init = post_init,
    .run = post_run,
    .fini = post_fini,
    .requests = post_requests,
    .n_requests = CBF_COUNT_OF(post_requests),
    .request = post_request,
};

CBF_PLUGIN_DEFINE(post_desc)
