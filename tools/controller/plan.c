/* plan.c: a product configuration as array descriptions (plan.h), one
 * per channeliser set: a gpucbf.antenna_channelised_voltage (wideband or
 * narrowband, or VLBI's whole-band narrowband), its correlator and its beams.
 *
 * What katsdpcontroller would run and cbf's planner cannot yet is refused
 * here, at the JSON path of the stream: real digitiser inputs, VLBI's
 * resampled beams (the V-engine), a channeliser without a
 * correlator or with two, and an antenna whose simulated digitiser does not
 * have exactly two pols. The rest maps onto array_desc field by field
 * (docs/notes/controller-research.md, section 3); plan_engines.c then
 * lists the engines and streams of the plans cbf-array's planner makes. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_priv.h"

#define PFB_MAX_TAPS 16      /* plugins/pfb's range */
#define PFB_MIN_CHANNELS 64
#define BEAM_SPECTRA_STEP 32 /* plugins/xbengine's spectra_per_heap with beams */

/* The product's streams the planner runs, found and checked: the sets
 * (plan.h) in the order of their channelisers in the document. */
typedef struct found {
    cbf_plan_set sets[CBF_PLAN_MAX_SETS];
    int n_sets;
    const cbf_product_stream *dig0;   /* the first digitiser: rate, bits, sync time of them all */
} found;

static int refuse(cbf_error *err, const char *section, const cbf_product_stream *s, const char *field,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* CBF_ECONFIG "SECTION.STREAM[.FIELD]: why". */
static int refuse(cbf_error *err, const char *section, const cbf_product_stream *s, const char *field,
                  const char *fmt, ...)
{
    char why[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return cbf_error_set(err, CBF_ECONFIG, "%s.%s%s%s: %s", section, s->name, field ? "." : "", field ? field : "",
                         why);
}

static cbf_plan_set *set_of(found *f, const cbf_product_stream *acv)
{
    for (int k = 0; k < f->n_sets; k++)
        if (f->sets[k].acv == acv)
            return &f->sets[k];
    return NULL;
}

static int find_streams(const cbf_product *p, found *f, cbf_error *err)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < p->n_streams; i++) {   /* digitisers and channelisers first */
        const cbf_product_stream *s = &p->streams[i];
        const char *sec = s->is_input ? "inputs" : "outputs";
        if (s->kind == CBF_STREAM_DIG) {
            if (!s->u.dig.simulated)
                return refuse(err, sec, s, NULL, "a real digitiser (dig.baseband_voltage) is not planned yet: "
                              "cbf-controller runs simulated ones (sim.dig.baseband_voltage)");
            f->dig0 = f->dig0 ? f->dig0 : s;
        } else if (s->kind == CBF_STREAM_ACV) {
            if (f->n_sets == CBF_PLAN_MAX_SETS)
                return refuse(err, sec, s, NULL, "more than %d channelisers in one product", CBF_PLAN_MAX_SETS);
            f->sets[f->n_sets++].acv = s;
        } else if (s->kind == CBF_STREAM_TARV) {
            return refuse(err, sec, s, "type", "%s (VLBI's resampled beams) has no cbf engine yet",
                          cbf_product_kind_name(s->kind, 0));
        }
    }
    for (int i = 0; i < p->n_streams; i++) {
        const cbf_product_stream *s = &p->streams[i];
        const char *sec = s->is_input ? "inputs" : "outputs";
        if (s->kind == CBF_STREAM_BCP) {
            cbf_plan_set *t = set_of(f, s->u.bcp.acv);
            if (!t)
                return refuse(err, sec, s, "src_streams", "its channeliser is not one cbf runs");
            if (t->bcp)
                return refuse(err, sec, s, NULL, "a second correlator of \"%s\" (after \"%s\"): cbf's planner "
                              "runs one gpucbf.baseline_correlation_products per channeliser", t->acv->name,
                              t->bcp->name);
            t->bcp = s;
        } else if (s->kind == CBF_STREAM_TACV) {
            cbf_plan_set *t = set_of(f, s->u.tacv.acv);
            if (!t)
                return refuse(err, sec, s, "src_streams", "its channeliser is not one cbf runs");
            if (t->n_tacv == ARRAY_MAX_BEAMS)
                return refuse(err, sec, s, NULL, "more than %d beams of \"%s\": cbf's X-engines form at most "
                              "that many", ARRAY_MAX_BEAMS, t->acv->name);
            t->tacv[t->n_tacv++] = s;
        }
    }
    if (!f->n_sets)
        return cbf_error_set(err, CBF_ECONFIG, "outputs: no gpucbf.antenna_channelised_voltage: there is nothing "
                             "for cbf's engines to run");
    for (int k = 0; k < f->n_sets; k++)
        if (!f->sets[k].bcp)
            return cbf_error_set(err, CBF_ECONFIG, "outputs: no gpucbf.baseline_correlation_products of \"%s\": "
                                 "cbf's X-engines always correlate, so each channeliser needs one",
                                 f->sets[k].acv->name);
    return 0;
}

/* What one set of engines needs the same in every digitiser: cbf's
 * simulated digitisers share one rate, bit width and sync time. */
static int check_digitisers(const cbf_product *p, const found *f, cbf_error *err)
{
    const cbf_product_dig *d0 = &f->dig0->u.dig;
    for (int i = 0; i < p->n_streams; i++) {
        const cbf_product_stream *s = &p->streams[i];
        if (s->kind != CBF_STREAM_DIG)
            continue;
        const cbf_product_dig *d = &s->u.dig;
        if (d->samples_per_heap != 4096)
            return refuse(err, "outputs", s, "samples_per_heap", "%d: cbf's digitiser streams carry 4096 samples "
                          "per heap", d->samples_per_heap);
        const char *what = d->bits_per_sample != d0->bits_per_sample ? "bits_per_sample"
                           : d->adc_sample_rate != d0->adc_sample_rate ? "adc_sample_rate"
                           : d->sync_time != d0->sync_time ? "sync_time" : NULL;
        if (what)
            return refuse(err, "outputs", s, what, "differs from \"%s\"'s: cbf's simulated digitisers of one "
                          "product share it", f->dig0->name);
    }
    return 0;
}

static int check_channeliser(const cbf_product_stream *acv, cbf_error *err)
{
    const cbf_product_acv *a = &acv->u.acv;
    if (a->taps > PFB_MAX_TAPS)
        return refuse(err, "outputs", acv, "taps", "%d: cbf's pfb takes 1 to %d taps", a->taps, PFB_MAX_TAPS);
    if (a->n_chans < PFB_MIN_CHANNELS)
        return refuse(err, "outputs", acv, "n_chans", "%d: cbf's pfb takes at least %d channels", a->n_chans,
                      PFB_MIN_CHANNELS);
    return 0;
}

/* Digitiser antennas in order of first appearance, and each stream's
 * place (stream_of, per product stream; -1 for a stream that is not a
 * digitiser's): stream 2k + pol is antenna k's pol-th stream in the
 * document, wherever the two stand. */
static int map_digitisers(const cbf_product *p, int *stream_of, int *n_antennas, cbf_error *err)
{
    const char *names[ARRAY_MAX_ANTENNAS];
    int n_streams[ARRAY_MAX_ANTENNAS], n = 0;
    for (int i = 0; i < p->n_streams; i++) {
        const cbf_product_stream *s = &p->streams[i];
        stream_of[i] = -1;
        if (s->kind != CBF_STREAM_DIG)
            continue;
        int k = 0;
        while (k < n && strcmp(names[k], s->u.dig.antenna_name))
            k++;
        if (k == n) {
            if (n == ARRAY_MAX_ANTENNAS)
                return refuse(err, "outputs", s, "antenna", "more than %d antennas", ARRAY_MAX_ANTENNAS);
            names[n] = s->u.dig.antenna_name;
            n_streams[n++] = 0;
        }
        if (n_streams[k] == 2)
            return refuse(err, "outputs", s, "antenna", "a third digitiser stream of antenna \"%s\": cbf's "
                          "simulated digitiser makes an antenna's two pols", names[k]);
        stream_of[i] = 2 * k + n_streams[k]++;
    }
    for (int k = 0; k < n; k++)
        if (n_streams[k] != 2)
            for (int i = 0; i < p->n_streams; i++)
                if (p->streams[i].kind == CBF_STREAM_DIG && !strcmp(p->streams[i].u.dig.antenna_name, names[k]))
                    return refuse(err, "outputs", &p->streams[i], "antenna", "antenna \"%s\" has one digitiser "
                                  "stream: cbf's simulated digitiser makes an antenna's two pols, so each "
                                  "antenna needs two streams", names[k]);
    *n_antennas = n;
    return 0;
}

/* The groups of the product's streams, one block each: the digitisers',
 * then each set's F-engine, beam and visibility groups; and one UDP port
 * for each kind of stream of each set (the digitisers' shared):
 * katsdpcontroller's destinations (a.b.c.d+N:port) put every group of a
 * stream on one port, and katgpucbf's receivers join them so. */
static int set_groups_needed(const array_desc *d)
{
    return d->xengines + d->beams + d->xengines;
}

static int take(cbf_product_plan *pl, int n_groups, int n_udp, int n_procs, cbf_error *err)
{
    int rc = cbf_resources_take(pl->res, CBF_RES_GROUPS, n_groups, &pl->group0, err);
    if (!rc)
        pl->n_groups = n_groups;
    if (!rc && !(rc = cbf_resources_take(pl->res, CBF_RES_UDP_PORTS, n_udp, &pl->udp0, err)))
        pl->n_udp = n_udp;
    if (!rc && !(rc = cbf_resources_take(pl->res, CBF_RES_ENGINE_KATCP, n_procs, &pl->katcp0, err)))
        pl->n_katcp = n_procs;
    return rc ? cbf_error_prefix(err, "product \"%s\"", pl->name) : 0;
}

/* Set d's groups from *g and ports from *port on (the digitisers' from
 * dig), moving both past what it takes. */
static void set_groups(array_desc *d, array_group dig, unsigned *g, unsigned *port)
{
    d->dig = dig;
    array_group *streams[] = {&d->feng, &d->beam, &d->vis};
    int counts[] = {d->xengines, d->beams, d->xengines};
    for (int i = 0; i < 3; i++) {
        *streams[i] = (array_group){*g, (int)*port, 1};
        *g += (unsigned)counts[i];
        (*port)++;
    }
    d->has_vis = 1;
}

static void fill(const cbf_product *p, const found *f, const cbf_plan_set *t, int k, const char *name,
                 const cbf_controller_config *c, int dig_antennas, array_desc *d)
{
    const cbf_product_acv *a = &t->acv->u.acv;
    const cbf_product_dig *dig = &f->dig0->u.dig;
    snprintf(d->path, sizeof d->path, "product %s (cbf-controller)", name);
    snprintf(d->name, sizeof d->name, "%s", name);
    /* set 0's processes keep their plain names (feng0, xeng0); the next
     * channeliser's are c1-feng0, ... */
    if (k)
        snprintf(d->prefix, sizeof d->prefix, "c%d-", k);
    d->dig_antennas = dig_antennas;
    d->antennas = a->n_inputs / 2;
    d->channels = a->n_chans;
    d->adc_sample_rate = a->adc_sample_rate;
    d->bits = dig->bits_per_sample;
    d->spectra_per_heap = a->spectra_per_heap;
    d->xengines = a->n_substreams;
    d->heaps_per_dump = t->bcp->u.bcp.heaps_per_dump;
    d->beams = t->n_tacv;
    for (int b = 0; b < t->n_tacv; b++)
        d->beam_pols[b] = t->tacv[b]->u.tacv.src_pol;
    /* digitiser chunks of 2^20 samples, or of one F-engine heap's samples
     * where that is less (controller.jones_per_batch lowered for a slow
     * band): a chunk then lasts no longer than a heap */
    long long heap = (long long)a->n_samples_between_spectra * a->spectra_per_heap;
    d->samples_per_chunk = heap < (1 << 20) ? (int)(heap / 4096 > 0 ? heap / 4096 * 4096 : 4096) : 1 << 20;
    d->gain = 1;
    d->taps = a->taps;
    d->decimation = a->decimation_factor;
    d->ddc_centre_hz = a->narrowband ? a->nb_centre_frequency : 0;
    d->pass_bandwidth = a->vlbi ? a->pass_bandwidth : 0;
    snprintf(d->window, sizeof d->window, "%s", a->window == CBF_WINDOW_RECT ? "rect" : "hann");
    d->w_cutoff = a->w_cutoff;
    d->dither = a->dither != CBF_DITHER_NONE;
    d->sync_time = a->sync_time;
    d->record = 0;   /* the streams go to their subscribers; nothing is written to disk */
    d->endless = 1;  /* engines run until deconfigure, whatever their senders do */
    d->fill = 0.9;
    d->rx_reorder_tol = c->rx_reorder_tol;
    d->sim_threads = c->dsim_threads;
    /* one dsim per antenna, as katsdpcontroller's sim.ANT.RATE tasks, in set
     * 0; the other sets' F-engines join the same digitiser groups */
    d->digitisers = k ? 0 : dig_antennas;
    d->noise = 0.05;
    d->tone_hz = 284.5e6 * a->adc_sample_rate / 1712e6;
    d->tone_amplitude = 0.1;
    /* simulation.clock_ratio: each dsim sends its antenna's two pols at
     * clock_ratio x the real-time rate (0: unpaced, as fast as it can) */
    d->sim_rate_gbps = p->clock_ratio * 2 * array_dig_gbps_per_pol(d);
    memcpy(d->hosts, c->hosts, sizeof c->hosts[0] * (size_t)c->n_hosts);
    d->n_hosts = c->n_hosts;
    snprintf(d->where_root, ARRAY_WHERE, "product \"%s\"", name);
    snprintf(d->where_array, ARRAY_WHERE, "product \"%s\"", name);
    snprintf(d->where_xengines, ARRAY_WHERE, "outputs.%s (%d substreams)", t->acv->name, a->n_substreams);
    snprintf(d->where_beams, ARRAY_WHERE, "outputs.%s (a beam)", t->n_tacv ? t->tacv[0]->name : "?");
    snprintf(d->where_digitisers, ARRAY_WHERE, "outputs.%s (a simulated digitiser)", f->dig0->name);
    snprintf(d->where_hosts, ARRAY_WHERE, "the controller's hosts (%s)", c->where_hosts);
}

/* The NICs at the rate the product will run: every figure of the budget
 * check scales with the ADC rate, so the check runs on a copy whose rate
 * is clock_ratio x the real one (the pipelines keep the real rate, which
 * sets the frequencies and the time stamps' meaning). Each set is checked
 * on its own: two channelisers on one host share its NICs beyond what
 * this sees. */
static int check_budget(const cbf_product *p, const cbf_product_plan *pl, const cbf_plan_set *t, cbf_error *err)
{
    if (p->clock_ratio <= 0)   /* unpaced: as fast as the engines go, nothing to check */
        return 0;
    array_desc *d = malloc(sizeof *d);
    if (!d)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    *d = *t->desc;
    d->adc_sample_rate *= p->clock_ratio;
    int rc = array_plan_check(d, &t->plan, NULL, err);
    free(d);
    if (rc)
        cbf_error_prefix(err, "product \"%s\" at simulation.clock_ratio %g (a lower one slows the simulated "
                         "digitisers)", pl->name, p->clock_ratio);
    return rc;
}

/* Each set's array description (pl->sets[k].desc), its groups and ports
 * taken from the controller's ranges, and cbf-array's plan of it. */
static int plan_sets(const cbf_product *p, const found *f, const cbf_controller_config *c, cbf_product_plan *pl,
                     cbf_error *err)
{
    int dig_antennas, rc = map_digitisers(p, pl->dig_stream, &dig_antennas, err);
    if (rc)
        return rc;
    int n_groups = 2 * dig_antennas, n_procs = 0;
    for (int k = 0; k < pl->n_sets; k++) {
        cbf_plan_set *t = &pl->sets[k];
        array_desc *d = t->desc;
        for (int i = 0; i < t->acv->n_src; i++)
            d->input_streams[i] = pl->dig_stream[t->acv->src[i]->index];
        fill(p, f, t, k, pl->name, c, dig_antennas, d);
        n_groups += set_groups_needed(d);
        n_procs += d->digitisers + d->antennas + d->xengines;
    }
    pl->dsim_rate_gbps = pl->sets[0].desc->sim_rate_gbps;
    if ((rc = take(pl, n_groups, 1 + 3 * pl->n_sets, n_procs, err)))
        return rc;
    const array_group dig = {pl->group0, (int)pl->udp0, 1};
    unsigned g = pl->group0 + 2u * (unsigned)dig_antennas, port = pl->udp0 + 1, katcp = pl->katcp0;
    for (int k = 0; !rc && k < pl->n_sets; k++) {
        cbf_plan_set *t = &pl->sets[k];
        set_groups(t->desc, dig, &g, &port);
        t->desc->katcp_port = (int)katcp;
        katcp += (unsigned)(t->desc->digitisers + t->desc->antennas + t->desc->xengines);
        rc = array_plan_make(t->desc, &t->plan, err);
        if (!rc)
            rc = check_budget(p, pl, t, err);
        /* Slurm binds each step to the one GPU it gives it, which the engine
         * then sees as device 0 (scripts/slurm/cbf-array.sbatch does the same) */
        for (int i = 0; !rc && c->launcher == CBF_LAUNCHER_SLURM && i < t->plan.n_procs; i++)
            if (t->plan.procs[i].gpu > 0)
                t->plan.procs[i].gpu = 0;
    }
    return rc;
}

int cbf_product_plan_make(const cbf_product *p, const char *name, const cbf_controller_config *c,
                          cbf_resources *res, cbf_product_plan **out, cbf_error *err)
{
    *out = NULL;
    if (!cbf_product_name_ok(name))   /* it names a folder, files and units: nothing that could leave them */
        return cbf_error_set(err, CBF_ECONFIG, "product name \"%s\": letters, digits and '_' only, 1 to %zu of "
                             "them (katsdpcontroller's rule)", name, sizeof ((cbf_product_plan *)0)->name - 1);
    found f;
    int rc = find_streams(p, &f, err);
    if (!rc)
        rc = check_digitisers(p, &f, err);
    for (int k = 0; !rc && k < f.n_sets; k++) {
        rc = check_channeliser(f.sets[k].acv, err);
        const int sph = f.sets[k].acv->u.acv.spectra_per_heap;
        if (!rc && f.sets[k].n_tacv && sph % BEAM_SPECTRA_STEP)
            rc = refuse(err, "outputs", f.sets[k].tacv[0], NULL, "%d spectra per heap (controller.jones_per_batch / "
                        "n_chans of \"%s\"): cbf's beamformer takes a multiple of %d", sph,
                        f.sets[k].acv->name, BEAM_SPECTRA_STEP);
    }
    if (rc)
        return rc;
    cbf_product_plan *pl = calloc(1, sizeof *pl);
    if (!pl || !(pl->dig_stream = calloc((size_t)p->n_streams + 1, sizeof *pl->dig_stream))) {
        cbf_product_plan_free(pl);
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    snprintf(pl->name, sizeof pl->name, "%s", name);
    snprintf(pl->dir, sizeof pl->dir, "%s/%s", c->state_dir, name);
    pl->product = p;
    pl->res = res;
    for (int k = 0; k < f.n_sets; k++) {
        pl->sets[k] = f.sets[k];
        pl->sets[k].desc = NULL;
        pl->n_sets = k + 1;
        if (!(pl->sets[k].desc = calloc(1, sizeof *pl->sets[k].desc))) {
            cbf_product_plan_free(pl);
            return cbf_error_set(err, CBF_ENOMEM, "out of memory");
        }
    }
    rc = plan_sets(p, &f, c, pl, err);
    if (!rc)
        rc = cbf_plan_engines(pl, err);
    if (rc) {
        cbf_product_plan_free(pl);
        return rc;
    }
    *out = pl;
    return 0;
}

void cbf_product_plan_free(cbf_product_plan *pl)
{
    if (!pl)
        return;
    if (pl->res) {
        cbf_resources_give(pl->res, CBF_RES_GROUPS, pl->group0, pl->n_groups);
        cbf_resources_give(pl->res, CBF_RES_UDP_PORTS, pl->udp0, pl->n_udp);
        cbf_resources_give(pl->res, CBF_RES_ENGINE_KATCP, pl->katcp0, pl->n_katcp);
    }
    for (int i = 0; i < pl->n_engines; i++)
        free(pl->engines[i].inputs);
    free(pl->engines);
    free(pl->streams);
    free(pl->dig_stream);
    for (int k = 0; k < pl->n_sets; k++) {
        array_plan_free(&pl->sets[k].plan);
        free(pl->sets[k].desc);
    }
    free(pl);
}

const cbf_plan_set *cbf_product_plan_set_of(const cbf_product_plan *pl, const cbf_product_stream *s)
{
    const cbf_product_stream *acv = s->kind == CBF_STREAM_ACV    ? s
                                    : s->kind == CBF_STREAM_BCP  ? s->u.bcp.acv
                                    : s->kind == CBF_STREAM_TACV ? s->u.tacv.acv
                                                                 : NULL;
    for (int k = 0; acv && k < pl->n_sets; k++)
        if (pl->sets[k].acv == acv)
            return &pl->sets[k];
    return NULL;
}

int cbf_product_name_ok(const char *name)
{
    size_t n = strlen(name);
    return n > 0 && n < sizeof ((cbf_product_plan *)0)->name && strspn(name, "abcdefghijklmnopqrstuvwxyz"
                                                                           "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n;
}

