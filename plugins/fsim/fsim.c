/* fsim: synthetic F-engine output for N antennas as X-engine batches
 * ("cbf.xeng.batch"): a common complex Gaussian signal seen by every
 * antenna at its own delay (a phase slope across channels), plus
 * independent noise, quantised to int8 or int4 complex. Every value is a
 * function of (seed, spectrum index, channel, antenna, pol) alone, so the
 * output does not depend on chunking. A CPU source on host buffers. */
#include <cbf/cbf.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stage/contracts/xeng.h"
#include "stage/flow.h"

static const cbf_param_decl fsim_params[] = {
    {.name = "antennas", .type = CBF_PARAM_INT, .def = "4", .has_range = 1, .min = 1,
     .max = 4096, .doc = "antennas (dual-pol)"},
    {.name = CBF_ATTR_CHANNELS, .type = CBF_PARAM_INT, .def = "64", .has_range = 1, .min = 1,
     .max = 65536,
     .doc = "channels (of the F-engines' full band; all of them go to this X-engine)"},
    {.name = CBF_ATTR_SPECTRA_PER_HEAP, .type = CBF_PARAM_INT, .def = "256", .has_range = 1,
     .min = 32, .max = 65504, .doc = "spectra per batch, a multiple of 32"},
    {.name = "batches", .type = CBF_PARAM_INT, .def = "8", .has_range = 1, .min = 1, .max = 4096,
     .doc = "batches per output buffer"},
    {.name = "bits", .type = CBF_PARAM_CHOICE, .def = "8", .choices = "8|4",
     .doc = "8: CI8, 4: CI4"},
    {.name = CBF_ATTR_ADC_SAMPLE_RATE, .type = CBF_PARAM_FLOAT, .def = "1712e6", .has_range = 1,
     .min = 1, .max = 1e12, .doc = "digitiser sample rate in Hz"},
    {.name = "start", .type = CBF_PARAM_INT, .def = "0", .has_range = 1, .min = 0, .max = 4.6e18,
     .doc = "timestamp of the first batch (digitiser samples)"},
    {.name = "length", .type = CBF_PARAM_INT, .def = "0", .has_range = 1, .min = 0,
     .max = 4.6e18, .doc = "batches to produce, a multiple of `batches`; 0 = endless"},
    {.name = "signal", .type = CBF_PARAM_FLOAT, .def = "20", .has_range = 1, .min = 0,
     .max = 1000, .doc = "RMS of the common signal per component, in quantised units"},
    {.name = "noise", .type = CBF_PARAM_FLOAT, .def = "10", .has_range = 1, .min = 0,
     .max = 1000, .doc = "RMS of each antenna's own noise per component, in quantised units"},
    {.name = "delays", .type = CBF_PARAM_FLOAT_LIST, .def = "[]",
     .doc = "per-antenna delay of the common signal in digitiser samples; [] = 0"},
    {.name = "seed", .type = CBF_PARAM_INT, .def = "1", .has_range = 1, .min = 0, .max = 9.2e18,
     .doc = "generator seed"},
    {.name = "missing_antennas", .type = CBF_PARAM_INT_LIST, .def = "[]", .has_range = 1,
     .min = 0, .max = 4095,
     .doc = "antennas whose heaps are flagged missing (zero data, presence 0)"},
    {.name = "missing_batches", .type = CBF_PARAM_INT_LIST, .def = "[]", .has_range = 1,
     .min = 0, .max = 4.6e18,
     .doc = "batch indices (counted from the first) where those antennas are missing; [] = all"},
    {.name = "buffers", .type = CBF_PARAM_INT, .def = "4", .has_range = 1, .min = 2, .max = 64,
     .doc = "output buffers in the pool"},
};

static const cbf_port_decl fsim_ports[] = {
    {.name = "out", .dir = CBF_PORT_OUT, .type = CBF_TYPE_XENG_BATCH,
     .doc = "X-engine batches [batch][antenna][channel][spectrum][pol]"},
};

typedef struct fsim {
    cbf_stage_source src;
    int ants, channels, sph, batches, bits;
    int64_t start, length, sbs; /* sbs: samples between spectra */
    double signal, noise;
    uint64_t seed;
    double *delays;
    uint8_t *ant_missing;
    int64_t *miss_batches;
    size_t n_miss_batches;
    double *cs;   /* per channel: cos, sin of the delay phase, per antenna */
    size_t batch_bytes;
} fsim;

static uint64_t fsim_mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL; /* splitmix64 finaliser */
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

/* Two independent standard normals keyed by (seed, a, b, c). */
static void fsim_gauss2(uint64_t seed, uint64_t a, uint64_t b, uint64_t c, double *g0, double *g1)
{
    uint64_t h = fsim_mix(seed ^ fsim_mix(a ^ fsim_mix(b ^ fsim_mix(c))));
    uint64_t h2 = fsim_mix(h);
    double u1 = ((double)(h >> 11) + 1.0) * 0x1.0p-53, u2 = (double)(h2 >> 11) * 0x1.0p-53;
    double r = sqrt(-2.0 * log(u1));
    *g0 = r * cos(2 * M_PI * u2);
    *g1 = r * sin(2 * M_PI * u2);
}

static void fsim_fini(cbf_node *node)
{
    fsim *s = cbf_node_state(node);
    if (!s)
        return;
    free(s->delays);
    free(s->ant_missing);
    free(s->miss_batches);
    free(s->cs);
    free(s);
    cbf_node_set_state(node, NULL);
}

static int fsim_read_params(fsim *s, const cbf_params *p, cbf_error *err)
{
    s->ants = (int)cbf_params_int(p, "antennas");
    s->channels = (int)cbf_params_int(p, CBF_ATTR_CHANNELS);
    s->sph = (int)cbf_params_int(p, CBF_ATTR_SPECTRA_PER_HEAP);
    s->batches = (int)cbf_params_int(p, "batches");
    s->bits = atoi(cbf_params_string(p, "bits"));
    s->start = cbf_params_int(p, "start");
    s->length = cbf_params_int(p, "length");
    s->signal = cbf_params_float(p, "signal");
    s->noise = cbf_params_float(p, "noise");
    s->seed = (uint64_t)cbf_params_int(p, "seed");
    s->sbs = 2 * (int64_t)s->channels;
    if (s->sph % 32)
        return cbf_error_set(err, CBF_ECONFIG, "%s: spectra_per_heap = %d is not a multiple of 32",
                             cbf_params_where(p, CBF_ATTR_SPECTRA_PER_HEAP), s->sph);
    if (s->length % s->batches)
        return cbf_error_set(err, CBF_ECONFIG, "%s: length = %lld is not a multiple of batches (%d)",
                             cbf_params_where(p, "length"), (long long)s->length, s->batches);
    const size_t nd = cbf_params_len(p, "delays");
    if (nd != 0 && nd != (size_t)s->ants)
        return cbf_error_set(err, CBF_ECONFIG, "%s: delays has %zu values for %d antennas",
                             cbf_params_where(p, "delays"), nd, s->ants);
    s->delays = calloc((size_t)s->ants, sizeof *s->delays);
    s->ant_missing = calloc((size_t)s->ants, 1);
    s->n_miss_batches = cbf_params_len(p, "missing_batches");
    s->miss_batches = calloc(s->n_miss_batches + 1, sizeof *s->miss_batches);
    s->cs = malloc(sizeof(double) * 2 * (size_t)s->ants * (size_t)s->channels);
    if (!s->delays || !s->ant_missing || !s->miss_batches || !s->cs)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    for (size_t a = 0; a < nd; a++)
        s->delays[a] = cbf_params_float_at(p, "delays", a);
    for (size_t i = 0; i < cbf_params_len(p, "missing_antennas"); i++) {
        int64_t a = cbf_params_int_at(p, "missing_antennas", i);
        if (a >= s->ants)
            return cbf_error_set(err, CBF_ECONFIG, "%s: missing_antennas names antenna %lld of %d",
                                 cbf_params_where(p, "missing_antennas"), (long long)a, s->ants);
        s->ant_missing[a] = 1;
    }
    for (size_t i = 0; i < s->n_miss_batches; i++)
        s->miss_batches[i] = cbf_params_int_at(p, "missing_batches", i);
    /* The delay convention of docs/formats.md: channel k of an antenna
     * delayed by d samples turns by exp(-2 pi i d k / (2 channels)). */
    for (int a = 0; a < s->ants; a++)
        for (int k = 0; k < s->channels; k++) {
            double ph = -2 * M_PI * s->delays[a] * k / (2.0 * s->channels);
            s->cs[2 * ((size_t)a * s->channels + k)] = cos(ph);
            s->cs[2 * ((size_t)a * s->channels + k) + 1] = sin(ph);
        }
    return 0;
}

static int fsim_fill(void *user, cbf_buffer *buf, cbf_error *err);

static int fsim_init(cbf_node *node, cbf_error *err)
{
    fsim *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    cbf_node_set_state(node, s);
    const cbf_params *p = cbf_node_params(node);
    int rc = fsim_read_params(s, p, err);
    if (rc)
        return rc;
    const cbf_xeng_batch b = {
        .dtype = s->bits == 8 ? CBF_DTYPE_CI8 : CBF_DTYPE_CI4,
        .batches = (size_t)s->batches,
        .n_ants = (size_t)s->ants,
        .channels = (size_t)s->channels,
        .spectra = (size_t)s->sph,
    };
    cbf_port_desc d;
    cbf_xeng_batch_desc(&d, &b, CBF_MEM_HOST);
    d.timestamp_step = (int64_t)s->batches * s->sph * s->sbs;
    cbf_port_desc_set_attr(&d, CBF_ATTR_CHANNELS, s->channels);
    cbf_port_desc_set_attr(&d, CBF_ATTR_SPECTRA_PER_HEAP, s->sph);
    cbf_port_desc_set_attr(&d, CBF_ATTR_SAMPLES_BETWEEN_SPECTRA, (double)s->sbs);
    cbf_port_desc_set_attr(&d, CBF_ATTR_N_ANTS, s->ants);
    cbf_port_desc_set_attr(&d, CBF_ATTR_ADC_SAMPLE_RATE,
                           cbf_params_float(p, CBF_ATTR_ADC_SAMPLE_RATE));
    s->batch_bytes = cbf_port_desc_bytes(&d) / (size_t)s->batches;
    s->src = (cbf_stage_source){
        .node = node,
        .out = cbf_node_port(node, "out", 0),
        .start = s->start,
        .step = d.timestamp_step,
        .buffers = (uint64_t)(s->length / s->batches),
        .n_present = d.n_present,
        .fill = fsim_fill,
        .user = s,
        .units = (uint64_t)s->batches,
    };
    if ((rc = cbf_stage_out_open(node, s->src.out, &d, (size_t)cbf_params_int(p, "buffers"),
                                 &s->src.pool, err)))
        return rc;
    s->src.c_units = cbf_node_counter(node, "batches");
    s->src.c_saturated = cbf_node_counter(node, "saturated");
    cbf_counter_warn_on_rise(s->src.c_saturated);
    s->src.c_missing = cbf_node_counter(node, "missing_heaps");
    return 0;
}

static int fsim_quant(double v, int lim, uint64_t *sat)
{
    double r = rint(v);
    if (r > lim || r < -lim) {
        (*sat)++;
        return r > 0 ? lim : -lim;
    }
    return (int)r;
}

static int fsim_batch_missing(const fsim *s, int64_t batch)
{
    if (!s->n_miss_batches)
        return 1;
    for (size_t i = 0; i < s->n_miss_batches; i++)
        if (s->miss_batches[i] == batch)
            return 1;
    return 0;
}

/* Batch b (absolute index from the first) into out; returns saturations. */
static uint64_t fsim_fill_batch(fsim *s, int64_t b, uint8_t *out, uint8_t *present)
{
    const int lim = s->bits == 8 ? 127 : 7;
    const size_t vals = (size_t)s->channels * s->sph * 2, bpv = s->bits == 8 ? 2 : 1;
    uint64_t sat = 0;
    for (int a = 0; a < s->ants; a++) {
        uint8_t *o = out + (size_t)a * vals * bpv;
        present[a] = !(s->ant_missing[a] && fsim_batch_missing(s, b));
        if (!present[a]) {
            memset(o, 0, vals * bpv);
            continue;
        }
        for (int k = 0; k < s->channels; k++)
            for (int t = 0; t < s->sph; t++) {
                const uint64_t spec = (uint64_t)b * s->sph + t;
                const double c = s->cs[2 * ((size_t)a * s->channels + k)];
                const double sn = s->cs[2 * ((size_t)a * s->channels + k) + 1];
                for (int pol = 0; pol < 2; pol++) {
                    double cr, ci, nr, ni;
                    fsim_gauss2(s->seed, spec, (uint64_t)k, (uint64_t)pol, &cr, &ci);
                    fsim_gauss2(s->seed + 1, spec, (uint64_t)k, ((uint64_t)(a + 1) << 1) | pol, &nr, &ni);
                    double re = s->signal * (cr * c - ci * sn) + s->noise * nr;
                    double im = s->signal * (cr * sn + ci * c) + s->noise * ni;
                    int qr = fsim_quant(re, lim, &sat), qi = fsim_quant(im, lim, &sat);
                    size_t i = ((size_t)k * s->sph + t) * 2 + pol;
                    if (s->bits == 8) {
                        o[2 * i] = (uint8_t)(int8_t)qr;
                        o[2 * i + 1] = (uint8_t)(int8_t)qi;
                    } else {
                        o[i] = (uint8_t)(((qr & 15) << 4) | (qi & 15));
                    }
                }
            }
    }
    return sat;
}

static int fsim_fill(void *user, cbf_buffer *buf, cbf_error *err)
{
    (void)err;
    fsim *s = user;
    const int64_t b0 = (int64_t)buf->seq * s->batches;
    for (int k = 0; k < s->batches; k++)
        buf->saturated += fsim_fill_batch(s, b0 + k, (uint8_t *)buf->data + k * s->batch_bytes,
                                          buf->present + (size_t)k * s->ants);
    return 0;
}

static int fsim_run(cbf_node *node, cbf_error *err)
{
    fsim *s = cbf_node_state(node);
    return cbf_stage_source_run(&s->src, err);
}

static const cbf_plugin_desc fsim_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "fsim",
    .version = "0.1.0",
    .summary = "F-engine simulator: delayed common signal plus noise as X-engine batches",
    .params = fsim_params,
    .n_params = CBF_COUNT_OF(fsim_params),
    .ports = fsim_ports,
    .n_ports = CBF_COUNT_OF(fsim_ports),
    .init = fsim_init,
    .run = fsim_run,
    .fini = fsim_fini,
};

CBF_PLUGIN_DEFINE(fsim_desc)
