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

static const cbf_param_decl params[] = {
    {"antennas", CBF_PARAM_INT, "4", CBF_RANGE(1, 4096), NULL, "antennas (dual-pol)"},
    {"channels", CBF_PARAM_INT, "64", CBF_RANGE(1, 65536), NULL,
     "channels (of the F-engines' full band; all of them go to this X-engine)"},
    {"spectra_per_heap", CBF_PARAM_INT, "256", CBF_RANGE(32, 65504), NULL,
     "spectra per batch, a multiple of 32"},
    {"batches", CBF_PARAM_INT, "8", CBF_RANGE(1, 4096), NULL, "batches per output buffer"},
    {"bits", CBF_PARAM_CHOICE, "8", CBF_NORANGE, "8|4", "8: CI8, 4: CI4"},
    {"adc_sample_rate", CBF_PARAM_FLOAT, "1712e6", CBF_RANGE(1, 1e12), NULL,
     "digitiser sample rate in Hz"},
    {"start", CBF_PARAM_INT, "0", CBF_RANGE(0, 4.6e18), NULL,
     "timestamp of the first batch (digitiser samples)"},
    {"length", CBF_PARAM_INT, "0", CBF_RANGE(0, 4.6e18), NULL,
     "batches to produce, a multiple of `batches`; 0 = endless"},
    {"signal", CBF_PARAM_FLOAT, "20", CBF_RANGE(0, 1000), NULL,
     "RMS of the common signal per component, in quantised units"},
    {"noise", CBF_PARAM_FLOAT, "10", CBF_RANGE(0, 1000), NULL,
     "RMS of each antenna's own noise per component, in quantised units"},
    {"delays", CBF_PARAM_FLOAT_LIST, "[]", CBF_NORANGE, NULL,
     "per-antenna delay of the common signal in digitiser samples; [] = 0"},
    {"seed", CBF_PARAM_INT, "1", CBF_RANGE(0, 9.2e18), NULL, "generator seed"},
    {"missing_antennas", CBF_PARAM_INT_LIST, "[]", CBF_RANGE(0, 4095), NULL,
     "antennas whose heaps are flagged missing (zero data, presence 0)"},
    {"missing_batches", CBF_PARAM_INT_LIST, "[]", CBF_RANGE(0, 4.6e18), NULL,
     "batch indices (counted from the first) where those antennas are missing; [] = all"},
    {"buffers", CBF_PARAM_INT, "4", CBF_RANGE(2, 64), NULL, "output buffers in the pool"},
};

static const cbf_port_decl ports[] = {
    {"out", CBF_PORT_OUT, "cbf.xeng.batch", 0, 0,
     "X-engine batches [batch][antenna][channel][spectrum][pol]"},
};

typedef struct fsim {
    cbf_pool *pool;
    cbf_port *out;
    int ants, channels, sph, batches, bits;
    int64_t start, length, sbs; /* sbs: samples between spectra */
    double signal, noise;
    uint64_t seed;
    double *delays;
    uint8_t *ant_missing;
    int64_t *miss_batches;
    size_t n_miss_batches;
    double *cs;   /* per channel: cos, sin of the delay phase, per antenna */
    cbf_counter *c_batches, *c_saturated, *c_missing;
} fsim;

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL; /* splitmix64 finaliser */
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

/* Two independent standard normals keyed by (seed, a, b, c). */
static void gauss2(uint64_t seed, uint64_t a, uint64_t b, uint64_t c, double *g0, double *g1)
{
    uint64_t h = mix(seed ^ mix(a ^ mix(b ^ mix(c))));
    uint64_t h2 = mix(h);
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

static int read_params(fsim *s, const cbf_params *p, cbf_error *err)
{
    s->ants = (int)cbf_params_int(p, "antennas");
    s->channels = (int)cbf_params_int(p, "channels");
    s->sph = (int)cbf_params_int(p, "spectra_per_heap");
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
                             cbf_params_where(p, "spectra_per_heap"), s->sph);
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
        return cbf_error_set(err, CBF_ENOMEM, "fsim: out of memory");
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
    /* SPEC.md's delay convention: channel k of an antenna delayed by d
     * samples turns by exp(-2 pi i d k / (2 channels)). */
    for (int a = 0; a < s->ants; a++)
        for (int k = 0; k < s->channels; k++) {
            double ph = -2 * M_PI * s->delays[a] * k / (2.0 * s->channels);
            s->cs[2 * ((size_t)a * s->channels + k)] = cos(ph);
            s->cs[2 * ((size_t)a * s->channels + k) + 1] = sin(ph);
        }
    return 0;
}

static int fsim_init(cbf_node *node, cbf_error *err)
{
    fsim *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "fsim: out of memory");
    cbf_node_set_state(node, s);
    const cbf_params *p = cbf_node_params(node);
    int rc = read_params(s, p, err);
    if (rc)
        return rc;
    cbf_port_desc d;
    cbf_port_desc_init(&d, s->bits == 8 ? CBF_DTYPE_CI8 : CBF_DTYPE_CI4, CBF_MEM_HOST);
    cbf_port_desc_add_axis(&d, "batch", (size_t)s->batches);
    cbf_port_desc_add_axis(&d, "antenna", (size_t)s->ants);
    cbf_port_desc_add_axis(&d, "channel", (size_t)s->channels);
    cbf_port_desc_add_axis(&d, "spectrum", (size_t)s->sph);
    cbf_port_desc_add_axis(&d, "pol", 2);
    d.n_present = (size_t)s->batches * (size_t)s->ants;
    d.present_axis = "batch_antenna";
    d.timestamp_step = (int64_t)s->batches * s->sph * s->sbs;
    cbf_port_desc_set_attr(&d, "channels", s->channels);
    cbf_port_desc_set_attr(&d, "spectra_per_heap", s->sph);
    cbf_port_desc_set_attr(&d, "samples_between_spectra", (double)s->sbs);
    cbf_port_desc_set_attr(&d, "n_ants", s->ants);
    cbf_port_desc_set_attr(&d, "adc_sample_rate", cbf_params_float(p, "adc_sample_rate"));
    s->out = cbf_node_port(node, "out", 0);
    if ((rc = cbf_port_set_desc(s->out, &d, err)) != 0)
        return rc;
    cbf_pool_config pc = {
        .name = "out",
        .kind = CBF_MEM_HOST,
        .count = (size_t)cbf_params_int(p, "buffers"),
        .size = cbf_port_desc_bytes(&d),
        .n_present = d.n_present,
    };
    if ((rc = cbf_node_pool_create(node, &pc, &s->pool, err)) != 0)
        return rc;
    s->c_batches = cbf_node_counter(node, "batches");
    s->c_saturated = cbf_node_counter(node, "saturated");
    s->c_missing = cbf_node_counter(node, "missing_heaps");
    return 0;
}

static int quant(double v, int lim, uint64_t *sat)
{
    double r = rint(v);
    if (r > lim || r < -lim) {
        (*sat)++;
        return r > 0 ? lim : -lim;
    }
    return (int)r;
}

static int batch_missing(const fsim *s, int64_t batch)
{
    if (!s->n_miss_batches)
        return 1;
    for (size_t i = 0; i < s->n_miss_batches; i++)
        if (s->miss_batches[i] == batch)
            return 1;
    return 0;
}

/* Batch b (absolute index from the first) into out; returns saturations. */
static uint64_t fill_batch(fsim *s, int64_t b, uint8_t *out, uint8_t *present)
{
    const int lim = s->bits == 8 ? 127 : 7;
    const size_t vals = (size_t)s->channels * s->sph * 2, bpv = s->bits == 8 ? 2 : 1;
    uint64_t sat = 0;
    for (int a = 0; a < s->ants; a++) {
        uint8_t *o = out + (size_t)a * vals * bpv;
        present[a] = !(s->ant_missing[a] && batch_missing(s, b));
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
                    gauss2(s->seed, spec, (uint64_t)k, (uint64_t)pol, &cr, &ci);
                    gauss2(s->seed + 1, spec, (uint64_t)k, ((uint64_t)(a + 1) << 1) | pol, &nr, &ni);
                    double re = s->signal * (cr * c - ci * sn) + s->noise * nr;
                    double im = s->signal * (cr * sn + ci * c) + s->noise * ni;
                    int qr = quant(re, lim, &sat), qi = quant(im, lim, &sat);
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

static int fsim_run(cbf_node *node, cbf_error *err)
{
    fsim *s = cbf_node_state(node);
    const size_t batch_bytes = cbf_port_desc_bytes(cbf_port_get_desc(s->out)) / s->batches;
    for (uint64_t seq = 0;; seq++) {
        const int64_t b0 = (int64_t)seq * s->batches;
        if ((s->length && b0 >= s->length) || cbf_node_stopping(node))
            return 0;
        cbf_buffer *buf;
        int rc = cbf_pool_get(s->pool, &buf);
        if (rc == CBF_ESTOPPED)
            return 0;
        if (rc)
            return cbf_error_set(err, rc, "fsim: no output buffer");
        buf->timestamp = s->start + b0 * s->sph * s->sbs;
        buf->seq = seq;
        buf->n_present = (size_t)s->batches * s->ants;
        buf->saturated = buf->missing = 0;
        for (int k = 0; k < s->batches; k++)
            buf->saturated += fill_batch(s, b0 + k, (uint8_t *)buf->data + k * batch_bytes,
                                         buf->present + (size_t)k * s->ants);
        for (size_t i = 0; i < buf->n_present; i++)
            buf->missing += !buf->present[i];
        cbf_counter_add(s->c_batches, (uint64_t)s->batches);
        cbf_counter_add(s->c_saturated, buf->saturated);
        cbf_counter_add(s->c_missing, buf->missing);
        if (cbf_port_send(s->out, buf) == CBF_ESTOPPED)
            return 0;
    }
}

static const cbf_plugin_desc desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "fsim",
    .version = "0.1.0",
    .summary = "F-engine simulator: delayed common signal plus noise as X-engine batches",
    .params = params,
    .n_params = CBF_COUNT_OF(params),
    .ports = ports,
    .n_ports = CBF_COUNT_OF(ports),
    .init = fsim_init,
    .run = fsim_run,
    .fini = fsim_fini,
};

CBF_PLUGIN_DEFINE(desc)
