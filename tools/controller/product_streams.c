/* product_streams.c: each stream type of a product configuration: its
 * fields as katsdpcontroller's schema 4.x has them (required, optional,
 * from which 4.x), the defaults its stream classes apply, the checks they
 * make once the sources are known, and the figures its stream sensors
 * report (docs/notes/controller-research.md derives each one). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "product_priv.h"

/* katsdpcontroller's defaults.py, which katgpucbf follows. */
#define PC_DIG_BITS 10
#define PC_DIG_SAMPLES_PER_HEAP 4096
#define PC_JONES_PER_BATCH (1 << 20)
#define PC_XB_MAX_SRC_RATE 5.45e9   /* bytes/s one X/B-engine is given at most */
#define PC_PFB_TAPS 16
#define PC_DDC_TAPS_RATIO 16
#define PC_WEIGHT_PASS 0.005

static const char *const pc_dithers[] = {"uniform", "none", NULL};
static const char *const pc_windows[] = {"hann", "rect", NULL};

static int is_pow2(long long x)
{
    return x > 0 && (x & (x - 1)) == 0;
}

static int nomem(pc_ctx *c)
{
    return cbf_error_set(c->err, CBF_ENOMEM, "out of memory reading %s", c->path);
}

/* src_streams: an array of stream names, between lo and hi of them. */
static int src_names(pc_ctx *c, cbf_product_stream *s, const json_t *obj, int lo, int hi)
{
    int rc = pc_strings(c, obj, "src_streams", 1, &s->src_names);
    if (rc)
        return rc;
    int n = s->src_names.n;
    if (n < lo || n > hi) {
        if (lo == hi)
            return pc_fail_at(c, "src_streams", "%d streams given: a %s takes exactly %d", n, s->type, lo);
        return pc_fail_at(c, "src_streams", "%d streams given: a %s takes at least %d", n, s->type, lo);
    }
    return 0;
}

/* ---- digitisers ---- */

/* spead://A.B.C.D[+N]:PORT, the form katsdpcontroller gives a digitiser's url. */
static int parse_url(pc_ctx *c, cbf_product_dig *d)
{
    unsigned a, b, cc, e, n = 0;
    int port, used = 0;
    const char *u = d->url;
    if (strncmp(u, "spead://", 8))
        return pc_fail_at(c, "url", "\"%s\" is not a spead:// url", u);
    u += 8;
    if (sscanf(u, "%u.%u.%u.%u%n", &a, &b, &cc, &e, &used) != 4 || a > 255 || b > 255 || cc > 255 || e > 255)
        return pc_fail_at(c, "url", "\"%s\" has no IPv4 address (spead://A.B.C.D[+N]:PORT)", d->url);
    u += used;
    if (*u == '+' && (sscanf(u, "+%u%n", &n, &used) != 1 || n > 255))
        return pc_fail_at(c, "url", "\"%s\": the +N after the address is not a small count", d->url);
    if (*u == '+')
        u += used;
    if (sscanf(u, ":%d%n", &port, &used) != 1 || u[used] || port < 1 || port > 65535)
        return pc_fail_at(c, "url", "\"%s\" has no port (spead://A.B.C.D[+N]:PORT)", d->url);
    d->group = a << 24 | b << 16 | cc << 8 | e;
    d->n_groups = (int)n + 1;
    d->port = port;
    return 0;
}

static int dig_fields(pc_ctx *c, cbf_product_stream *s, const json_t *obj)
{
    cbf_product_dig *d = &s->u.dig;
    int sim = !s->is_input, rc;
    const pc_field f[] = {{"type", 0, 1},
                          {"url", 0, !sim},
                          {"sync_time", 0, !sim},
                          {"adc_sample_rate", 0, 1},
                          {"centre_frequency", 0, 1},
                          {"band", 0, 1},
                          {"antenna", 0, 1},
                          {"bits_per_sample", 9, 0},
                          {"samples_per_heap", 9, 0},
                          {"command_line_extra", 0, 0}};
    /* Both kinds have the first nine; only the simulated one takes extra
     * command-line arguments, only the real one a url. */
    pc_field g[10];
    int n = 0;
    for (int i = 0; i < 10; i++)
        if (!((sim && !strcmp(f[i].name, "url")) || (!sim && !strcmp(f[i].name, "command_line_extra"))))
            g[n++] = f[i];
    d->simulated = sim;
    d->bits_per_sample = PC_DIG_BITS;
    d->samples_per_heap = PC_DIG_SAMPLES_PER_HEAP;
    if ((rc = pc_check_fields(c, obj, g, n, s->type)) ||
        (rc = pc_number(c, obj, "sync_time", PC_ANY, &d->sync_time, &d->sync_time_given)) ||
        (rc = pc_number(c, obj, "adc_sample_rate", PC_POSITIVE, &d->adc_sample_rate, NULL)) ||
        (rc = pc_number(c, obj, "centre_frequency", PC_POSITIVE, &d->centre_frequency, NULL)) ||
        (rc = pc_string(c, obj, "band", &d->band)) || (rc = pc_string(c, obj, "antenna", &d->antenna)) ||
        (rc = pc_int(c, obj, "bits_per_sample", 1, 64, &d->bits_per_sample, NULL)) ||
        (rc = pc_int(c, obj, "samples_per_heap", 1, 1LL << 30, &d->samples_per_heap, NULL)) ||
        (rc = pc_strings(c, obj, "command_line_extra", 0, &d->command_line_extra)) ||
        (rc = pc_string(c, obj, "url", &d->url)))
        return rc;
    if (!is_pow2(d->samples_per_heap))
        return pc_fail_at(c, "samples_per_heap", "%d is not a power of two", d->samples_per_heap);
    if (d->url && (rc = parse_url(c, d)))
        return rc;
    /* The antenna is a name or a katpoint description, whose first field
     * is the name: the dsim and the F-engine are named after it. */
    size_t len = strcspn(d->antenna, ",");
    while (len && d->antenna[len - 1] == ' ')
        len--;
    const char *a = d->antenna;
    while (len && *a == ' ')
        a++, len--;
    char *name = pc_alloc(c, len + 1);
    if (!name)
        return nomem(c);
    memcpy(name, a, len);
    if (!len)
        return pc_fail_at(c, "antenna", "\"%s\" has no antenna name before its first comma", d->antenna);
    d->antenna_name = name;
    return 0;
}

/* ---- antenna-channelised-voltage ---- */

static int acv_fields(pc_ctx *c, cbf_product_stream *s, const json_t *obj)
{
    cbf_product_acv *a = &s->u.acv;
    static const pc_field f[] = {{"type", 0, 1},     {"src_streams", 0, 1},     {"n_chans", 0, 1},
                                 {"input_labels", 0, 0}, {"w_cutoff", 0, 0},     {"window_function", 4, 0},
                                 {"taps", 4, 0},     {"narrowband", 0, 0},      {"dither", 2, 0},
                                 {"command_line_extra", 0, 0}};
    cbf_product_strings labels = {0};
    int rc, window = -1, dither = -1, taps_given, wc_given;
    if ((rc = pc_check_fields(c, obj, f, 10, s->type)) || (rc = src_names(c, s, obj, 2, 1 << 20)) ||
        (rc = pc_int(c, obj, "n_chans", 1, 1LL << 30, &a->n_chans, NULL)) ||
        (rc = pc_strings(c, obj, "input_labels", 1, &labels)) ||
        (rc = pc_number(c, obj, "w_cutoff", PC_NONNEG, &a->w_cutoff, &wc_given)) ||
        (rc = pc_choice(c, obj, "window_function", pc_windows, &window)) ||
        (rc = pc_int(c, obj, "taps", 1, 1 << 20, &a->taps, &taps_given)) ||
        (rc = pc_choice(c, obj, "dither", pc_dithers, &dither)) ||
        (rc = pc_strings(c, obj, "command_line_extra", 0, &a->command_line_extra)))
        return rc;
    if (!is_pow2(a->n_chans))
        return pc_fail_at(c, "n_chans", "%d is not a power of two", a->n_chans);
    if (a->n_chans > PC_JONES_PER_BATCH)
        return pc_fail_at(c, "n_chans", "%d is more than %d: a heap would hold no whole spectrum", a->n_chans,
                          PC_JONES_PER_BATCH);
    /* Labels must be distinct; without labels the sources name the inputs,
     * so they must be distinct instead. */
    const cbf_product_strings *names = labels.v ? &labels : &s->src_names;
    const char *field = labels.v ? "input_labels" : "src_streams";
    for (int i = 0; i < names->n; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(names->v[i], names->v[j])) {
                size_t o = pc_push_key(c, field);
                pc_push_index(c, (size_t)i);
                rc = pc_fail(c, "\"%s\" repeats %s[%d]%s", names->v[i], field, j,
                             labels.v ? "" : " (input_labels are needed to use a source twice)");
                pc_pop(c, o);
                return rc;
            }
    if (labels.v && labels.n != s->src_names.n)
        return pc_fail_at(c, "input_labels", "%d labels for %d src_streams: one label per input", labels.n,
                          s->src_names.n);
    a->n_inputs = s->src_names.n;
    a->input_labels = (const char **)names->v;

    const json_t *nb = json_object_get(obj, "narrowband");
    if (nb) {
        static const pc_field nf[] = {{"vlbi", 5, 0}, {"decimation_factor", 0, 1}, {"centre_frequency", 0, 1}};
        static const pc_field vf[] = {{"pass_bandwidth", 0, 1}};
        size_t o = pc_push_key(c, "narrowband");
        if ((rc = pc_want_object(c, nb)) || (rc = pc_check_fields(c, nb, nf, 3, "narrowband")) ||
            (rc = pc_int(c, nb, "decimation_factor", 1, 1 << 20, &a->decimation_factor, NULL)) ||
            (rc = pc_number(c, nb, "centre_frequency", PC_POSITIVE, &a->nb_centre_frequency, NULL)))
            return rc;
        const json_t *vl = json_object_get(nb, "vlbi");
        if (vl) {
            pc_push_key(c, "vlbi");
            if ((rc = pc_want_object(c, vl)) || (rc = pc_check_fields(c, vl, vf, 1, "narrowband.vlbi")) ||
                (rc = pc_number(c, vl, "pass_bandwidth", PC_NONNEG, &a->pass_bandwidth, NULL)))
                return rc;
            a->vlbi = 1;
        }
        pc_pop(c, o);
        a->narrowband = 1;
    } else {
        a->decimation_factor = 1;
    }
    /* VLBI keeps the whole decimated band unshaped: a one-tap rectangular
     * filter with no sinc, unless the configuration says otherwise. */
    if (!taps_given)
        a->taps = a->vlbi ? 1 : PC_PFB_TAPS;
    if (!wc_given)
        a->w_cutoff = a->vlbi ? 0.0 : 1.0;
    a->window = window >= 0 ? (cbf_window)window : a->vlbi ? CBF_WINDOW_RECT : CBF_WINDOW_HANN;
    a->dither = dither < 0 ? CBF_DITHER_DEFAULT : dither ? CBF_DITHER_NONE : CBF_DITHER_UNIFORM;
    return 0;
}

/* The digitiser figures a channeliser's sources must share (band aside). */
static const struct {
    const char *name;
    size_t off;
} agree[] = {{"adc_sample_rate", offsetof(cbf_product_dig, adc_sample_rate)},
             {"centre_frequency", offsetof(cbf_product_dig, centre_frequency)},
             {"sync_time", offsetof(cbf_product_dig, sync_time)}};

static int acv_figures(pc_ctx *c, cbf_product_stream *s)
{
    cbf_product_acv *a = &s->u.acv;
    int rc;
    if (s->n_src % 2)
        return pc_fail_at(c, "src_streams", "%d sources, not an even number: each F-engine takes two pols",
                          s->n_src);
    const cbf_product_dig *d0 = &s->src[0]->u.dig;
    a->antennas = pc_alloc(c, (size_t)s->n_src * sizeof *a->antennas);
    if (!a->antennas)
        return nomem(c);
    size_t o = pc_push_key(c, "src_streams");
    for (int i = 0; i < s->n_src; i++) {
        const cbf_product_dig *d = &s->src[i]->u.dig;
        const char *what = NULL;
        char have[64], want[64];
        if (strcmp(d->band, d0->band)) {
            what = "band";
            snprintf(have, sizeof have, "\"%s\"", d->band);
            snprintf(want, sizeof want, "\"%s\"", d0->band);
        } else {
            for (size_t k = 0; !what && k < sizeof agree / sizeof agree[0]; k++) {
                double x = *(const double *)((const char *)d + agree[k].off);
                double x0 = *(const double *)((const char *)d0 + agree[k].off);
                if (x != x0) {
                    what = agree[k].name;
                    snprintf(have, sizeof have, "%.17g", x);
                    snprintf(want, sizeof want, "%.17g", x0);
                }
            }
        }
        if (what) {
            size_t at = pc_push_index(c, (size_t)i);
            rc = pc_fail(c, "%s of \"%s\" is %s, but %s of \"%s\" (src_streams[0]) is %s: one channeliser's "
                         "sources must agree",
                         what, s->src[i]->name, have, what, s->src[0]->name, want);
            pc_pop(c, at);
            return rc;
        }
        int seen = 0;
        for (int k = 0; k < a->n_ants; k++)
            seen |= !strcmp(a->antennas[k], d->antenna_name);
        if (!seen)
            a->antennas[a->n_ants++] = d->antenna_name;
    }
    pc_pop(c, o);
    a->band = d0->band;
    a->adc_sample_rate = d0->adc_sample_rate;
    a->sync_time = d0->sync_time;
    a->n_fengs = s->n_src / 2;
    a->bits_per_sample = 8;

    double dig_bw = d0->adc_sample_rate / 2;
    a->bandwidth = dig_bw / a->decimation_factor;
    a->centre_frequency = d0->centre_frequency;
    a->center_freq = a->bandwidth / 2;
    if (a->narrowband) {
        double lo = a->bandwidth / 2, hi = dig_bw - a->bandwidth / 2;
        if (!(a->nb_centre_frequency >= lo && a->nb_centre_frequency <= hi)) {
            o = pc_push_key(c, "narrowband");
            rc = pc_fail_at(c, "centre_frequency",
                            "%.17g Hz is outside %.17g to %.17g Hz: the %.17g Hz band must lie inside the "
                            "digitised 0 to %.17g Hz",
                            a->nb_centre_frequency, lo, hi, a->bandwidth, dig_bw);
            pc_pop(c, o);
            return rc;
        }
        a->centre_frequency += a->nb_centre_frequency - dig_bw / 2;
        a->center_freq = a->nb_centre_frequency;
        if (a->vlbi && !(a->pass_bandwidth < a->bandwidth)) {
            o = pc_push_key(c, "narrowband");
            pc_push_key(c, "vlbi");
            rc = pc_fail_at(c, "pass_bandwidth", "%.17g Hz must be less than the output bandwidth, %.17g Hz",
                            a->pass_bandwidth, a->bandwidth);
            pc_pop(c, o);
            return rc;
        }
        a->subsampling = a->decimation_factor * (a->vlbi ? 2 : 1);
        a->ddc_taps = a->subsampling * PC_DDC_TAPS_RATIO;
        a->weight_pass = PC_WEIGHT_PASS;
        a->ddc_group_delay = -(a->ddc_taps - 1) / 2.0;
        int internal = a->n_chans * (a->vlbi ? 1 : 2);
        a->pfb_group_delay = -((double)internal * a->taps - 1) / 2 * a->subsampling;
    } else {
        a->subsampling = 1;
        a->pfb_group_delay = -(2.0 * a->n_chans * a->taps - 1) / 2;
    }
    if (!a->vlbi)
        a->pass_bandwidth = a->bandwidth;

    /* The X/B-engine count: at least 4 (SDP's ingest expects 4), doubled
     * while one engine would be given more than its share of the data. */
    double rate = d0->adc_sample_rate * s->n_src / a->decimation_factor;
    a->n_substreams = 4;
    while (a->n_substreams * PC_XB_MAX_SRC_RATE < rate)
        a->n_substreams *= 2;
    if (a->n_chans % a->n_substreams)
        return pc_fail_at(c, "n_chans",
                          "%d channels do not split over the %d X/B-engines that %d inputs at %.17g Hz need "
                          "(too few channels)",
                          a->n_chans, a->n_substreams, s->n_src, d0->adc_sample_rate);
    a->n_chans_per_substream = a->n_chans / a->n_substreams;
    a->n_samples_between_spectra = 2 * a->n_chans * a->decimation_factor;
    a->spectra_per_heap = PC_JONES_PER_BATCH / a->n_chans;
    return 0;
}

/* ---- baseline-correlation-products, tied-array-channelised-voltage ---- */

static int bcp_fields(pc_ctx *c, cbf_product_stream *s, const json_t *obj)
{
    static const pc_field f[] = {
        {"type", 0, 1}, {"src_streams", 0, 1}, {"int_time", 0, 1}, {"command_line_extra", 0, 0}};
    cbf_product_bcp *b = &s->u.bcp;
    int rc;
    if ((rc = pc_check_fields(c, obj, f, 4, s->type)) || (rc = src_names(c, s, obj, 1, 1)) ||
        (rc = pc_number(c, obj, "int_time", PC_POSITIVE, &b->int_time_requested, NULL)) ||
        (rc = pc_strings(c, obj, "command_line_extra", 0, &b->command_line_extra)))
        return rc;
    return 0;
}

static void bcp_figures(cbf_product_stream *s)
{
    cbf_product_bcp *b = &s->u.bcp;
    b->acv = s->src[0];
    const cbf_product_acv *a = &b->acv->u.acv;
    /* Whole heaps per dump, the nearest to what was asked (at least one);
     * nearbyint rounds halves to even as Python's round() does. */
    double heap_time = (double)a->n_samples_between_spectra / a->adc_sample_rate * a->spectra_per_heap;
    double heaps = nearbyint(b->int_time_requested / heap_time);
    if (heaps < 1)
        heaps = 1;
    b->heaps_per_dump = (int)heaps;
    b->int_time = heaps * heap_time;
    b->n_accs = (int)nearbyint(b->int_time * a->adc_sample_rate / a->n_samples_between_spectra);
    /* 4 products per pair of dual-pol antennas, autocorrelations included. */
    b->n_baselines = a->n_inputs * (a->n_inputs + 2) / 2;
    b->n_xengs = a->n_substreams;
    b->n_chans_per_substream = a->n_chans_per_substream;
    b->bits_per_sample = 32;
}

static int tacv_fields(pc_ctx *c, cbf_product_stream *s, const json_t *obj)
{
    static const pc_field f[] = {{"type", 0, 1},   {"src_streams", 0, 1},        {"src_pol", 0, 1},
                                 {"dither", 2, 0}, {"command_line_extra", 0, 0}};
    cbf_product_tacv *t = &s->u.tacv;
    int rc, dither = -1;
    if ((rc = pc_check_fields(c, obj, f, 5, s->type)) || (rc = src_names(c, s, obj, 1, 1)) ||
        (rc = pc_int(c, obj, "src_pol", 0, 1, &t->src_pol, NULL)) ||
        (rc = pc_choice(c, obj, "dither", pc_dithers, &dither)) ||
        (rc = pc_strings(c, obj, "command_line_extra", 0, &t->command_line_extra)))
        return rc;
    t->dither = dither < 0 ? CBF_DITHER_DEFAULT : dither ? CBF_DITHER_NONE : CBF_DITHER_UNIFORM;
    return 0;
}

static void tacv_figures(cbf_product_stream *s)
{
    cbf_product_tacv *t = &s->u.tacv;
    t->acv = s->src[0];
    const cbf_product_acv *a = &t->acv->u.acv;
    t->spectra_per_heap = a->spectra_per_heap;
    t->n_bengs = a->n_substreams;
    t->n_chans_per_substream = a->n_chans_per_substream;
    t->n_sources = a->n_inputs / 2;
    t->bits_per_sample = 8;
}

/* ---- tied-array-resampled-voltage (VLBI) ---- */

static int tarv_fields(pc_ctx *c, cbf_product_stream *s, const json_t *obj)
{
    static const pc_field f[] = {
        {"type", 0, 1}, {"src_streams", 0, 1}, {"n_chans", 0, 1}, {"pols", 0, 1}, {"station_id", 0, 1}};
    cbf_product_tarv *v = &s->u.tarv;
    int rc;
    if ((rc = pc_check_fields(c, obj, f, 5, s->type)) || (rc = src_names(c, s, obj, 2, 2)) ||
        (rc = pc_int(c, obj, "n_chans", 1, 1 << 30, &v->n_chans, NULL)))
        return rc;
    cbf_product_strings pols = {0};
    if ((rc = pc_strings(c, obj, "pols", 0, &pols)))
        return rc;
    if (!(pols.n == 2 && ((!strcmp(pols.v[0], "x") && !strcmp(pols.v[1], "y")) ||
                          (!strcmp(pols.v[0], "R") && !strcmp(pols.v[1], "L")))))
        return pc_fail_at(c, "pols", "expected [\"x\", \"y\"] or [\"R\", \"L\"]");
    v->pols[0] = pols.v[0];
    v->pols[1] = pols.v[1];
    if ((rc = pc_string(c, obj, "station_id", &v->station_id)))
        return rc;
    /* Two printable ASCII characters, the first not a space or punctuation
     * below '0' (VDIF's station field). */
    const char *id = v->station_id;
    if (!(strlen(id) == 2 && id[0] >= '0' && id[0] <= '~' && id[1] >= ' ' && id[1] <= '~'))
        return pc_fail_at(c, "station_id", "\"%s\" is not two printable characters (the first '0' to '~')", id);
    return 0;
}

static int tarv_figures(pc_ctx *c, cbf_product_stream *s)
{
    cbf_product_tarv *v = &s->u.tarv;
    const cbf_product_stream *acv0 = s->src[0]->src[0], *acv1 = s->src[1]->src[0];
    if (acv0 != acv1) {
        size_t o = pc_push_key(c, "src_streams");
        pc_push_index(c, 1);
        int rc = pc_fail(c, "\"%s\" beams \"%s\" but \"%s\" beams \"%s\": both pols must come from one channeliser",
                         s->src[1]->name, acv1->name, s->src[0]->name, acv0->name);
        pc_pop(c, o);
        return rc;
    }
    const cbf_product_acv *a = &acv0->u.acv;
    if (!a->vlbi)
        return pc_fail_at(c, "src_streams", "their channeliser \"%s\" has no narrowband.vlbi", acv0->name);
    /* The resampler needs output bandwidth / pass_bandwidth = 107/64
     * exactly; fma gives 107 p - 64 b with one rounding, so it is zero only
     * when the ratio is exact. */
    if (fma(107.0, a->pass_bandwidth, -64.0 * a->bandwidth) != 0.0)
        return pc_fail_at(c, "src_streams",
                          "their channeliser \"%s\" has bandwidth %.17g Hz and pass_bandwidth %.17g Hz: the ratio "
                          "must be 107/64",
                          acv0->name, a->bandwidth, a->pass_bandwidth);
    if (v->n_chans != 2)
        return pc_fail_at(c, "n_chans", "%d: the VLBI resampler makes 2 channels", v->n_chans);
    v->acv = acv0;
    v->bandwidth = a->pass_bandwidth;
    v->bits_per_sample = 2;
    return 0;
}

/* ---- dispatch ---- */

int pc_stream_fields(pc_ctx *c, cbf_product_stream *s, const json_t *obj)
{
    switch (s->kind) {
    case CBF_STREAM_DIG: return dig_fields(c, s, obj);
    case CBF_STREAM_ACV: return acv_fields(c, s, obj);
    case CBF_STREAM_BCP: return bcp_fields(c, s, obj);
    case CBF_STREAM_TACV: return tacv_fields(c, s, obj);
    case CBF_STREAM_TARV: return tarv_fields(c, s, obj);
    }
    return cbf_error_set(c->err, CBF_EINTERNAL, "%s: no reader for its kind", c->path);
}

int pc_stream_figures(pc_ctx *c, cbf_product_stream *s, const json_t *obj)
{
    (void)obj;
    switch (s->kind) {
    case CBF_STREAM_DIG: return 0;
    case CBF_STREAM_ACV: return acv_figures(c, s);
    case CBF_STREAM_BCP: bcp_figures(s); return 0;
    case CBF_STREAM_TACV: tacv_figures(s); return 0;
    case CBF_STREAM_TARV: return tarv_figures(c, s);
    }
    return 0;
}

int pc_source_ok(const cbf_product_stream *s, const cbf_product_stream *src)
{
    switch (s->kind) {
    case CBF_STREAM_ACV: return src->kind == CBF_STREAM_DIG;
    case CBF_STREAM_BCP:
    case CBF_STREAM_TACV: return src->kind == CBF_STREAM_ACV;
    case CBF_STREAM_TARV: return src->kind == CBF_STREAM_TACV;
    default: return 0;
    }
}

const char *pc_source_kinds(const cbf_product_stream *s)
{
    switch (s->kind) {
    case CBF_STREAM_ACV: return "sim.dig.baseband_voltage or dig.baseband_voltage sources";
    case CBF_STREAM_BCP:
    case CBF_STREAM_TACV: return "a gpucbf.antenna_channelised_voltage source";
    case CBF_STREAM_TARV: return "gpucbf.tied_array_channelised_voltage sources";
    default: return "no sources";
    }
}

int cbf_product_set_jones_per_batch(cbf_product *p, int jones, cbf_error *err)
{
    for (int i = 0; i < p->n_streams; i++) {
        const cbf_product_stream *s = &p->streams[i];
        if (s->kind == CBF_STREAM_ACV && s->u.acv.n_chans > jones)
            return cbf_error_set(err, CBF_ECONFIG, "controller.jones_per_batch %d: fewer than the %d channels of "
                                 "outputs.%s (a heap holds at least one spectrum)", jones, s->u.acv.n_chans,
                                 s->name);
    }
    /* the channelisers first: the correlators' and beams' figures follow theirs */
    for (int i = 0; i < p->n_streams; i++)
        if (p->streams[i].kind == CBF_STREAM_ACV)
            p->streams[i].u.acv.spectra_per_heap = jones / p->streams[i].u.acv.n_chans;
    for (int i = 0; i < p->n_streams; i++) {
        if (p->streams[i].kind == CBF_STREAM_BCP)
            bcp_figures(&p->streams[i]);
        else if (p->streams[i].kind == CBF_STREAM_TACV)
            tacv_figures(&p->streams[i]);
    }
    return 0;
}
