/* plan.c: a product configuration as an array description (plan.h).
 *
 * What katsdpcontroller would run and cbf's planner cannot yet is refused
 * here, at the JSON path of the stream: real digitiser inputs, narrowband
 * and VLBI channelisers, a second channeliser or correlator, VLBI's
 * resampled beams, and an antenna whose simulated digitiser does not have
 * exactly two pols. The rest maps onto array_desc field by field
 * (docs/notes/controller-research.md, section 3); plan_engines.c then
 * lists the engines and streams of the plan cbf-array's planner makes. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_priv.h"

#define PFB_MAX_TAPS 16      /* plugins/pfb's range */
#define PFB_MIN_CHANNELS 64

/* The product's streams the planner runs, found and checked. */
typedef struct found {
    const cbf_product_stream *acv, *bcp;
    const cbf_product_stream *tacv[ARRAY_MAX_BEAMS];
    int n_tacv;
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

static int find_streams(const cbf_product *p, found *f, cbf_error *err)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < p->n_streams; i++) {
        const cbf_product_stream *s = &p->streams[i];
        const char *sec = s->is_input ? "inputs" : "outputs";
        switch (s->kind) {
        case CBF_STREAM_DIG:
            if (!s->u.dig.simulated)
                return refuse(err, sec, s, NULL, "a real digitiser (dig.baseband_voltage) is not planned yet: "
                              "cbf-controller runs simulated ones (sim.dig.baseband_voltage)");
            f->dig0 = f->dig0 ? f->dig0 : s;
            break;
        case CBF_STREAM_ACV:
            if (f->acv)
                return refuse(err, sec, s, NULL, "a second channeliser (after \"%s\"): cbf's planner runs one "
                              "gpucbf.antenna_channelised_voltage per product (narrowband beside wideband is "
                              "not planned yet)", f->acv->name);
            if (s->u.acv.narrowband)
                return refuse(err, sec, s, "narrowband", "%s channelisers are not planned yet (cbf-array plans "
                              "wideband ones)", s->u.acv.vlbi ? "VLBI" : "narrowband");
            f->acv = s;
            break;
        case CBF_STREAM_BCP:
            if (f->bcp)
                return refuse(err, sec, s, NULL, "a second correlator (after \"%s\"): cbf's planner runs one "
                              "gpucbf.baseline_correlation_products per product", f->bcp->name);
            f->bcp = s;
            break;
        case CBF_STREAM_TACV:
            if (f->n_tacv == ARRAY_MAX_BEAMS)
                return refuse(err, sec, s, NULL, "more than %d beams: cbf's X-engines form at most that many",
                              ARRAY_MAX_BEAMS);
            f->tacv[f->n_tacv++] = s;
            break;
        case CBF_STREAM_TARV:
            return refuse(err, sec, s, "type", "%s (VLBI's resampled beams) has no cbf engine yet",
                          cbf_product_kind_name(s->kind, 0));
        }
    }
    if (!f->acv)
        return cbf_error_set(err, CBF_ECONFIG, "outputs: no gpucbf.antenna_channelised_voltage: there is nothing "
                             "for cbf's engines to run");
    if (!f->bcp)
        return cbf_error_set(err, CBF_ECONFIG, "outputs: no gpucbf.baseline_correlation_products: cbf's "
                             "X-engines always correlate, so a product needs one for \"%s\"", f->acv->name);
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
static int map_digitisers(const cbf_product *p, const found *f, array_desc *d, int *stream_of, cbf_error *err)
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
    d->dig_antennas = n;
    const cbf_product_stream *acv = f->acv;
    for (int i = 0; i < acv->n_src; i++)
        d->input_streams[i] = stream_of[acv->src[i]->index];
    return 0;
}

/* The groups of the product's streams, one block each, and one UDP port
 * for each kind of stream (digitisers, F-engines, beams, visibilities):
 * katsdpcontroller's destinations (a.b.c.d+N:port) put every group of a
 * stream on one port, and katgpucbf's receivers join them so. */
#define PLAN_UDP_PORTS 4

static int take(cbf_product_plan *pl, const array_desc *d, int n_procs, cbf_error *err)
{
    int n = 2 * d->dig_antennas + d->xengines + d->beams + d->xengines;
    int rc = cbf_resources_take(pl->res, CBF_RES_GROUPS, n, &pl->group0, err);
    if (!rc) {
        pl->n_groups = n;
        rc = cbf_resources_take(pl->res, CBF_RES_UDP_PORTS, PLAN_UDP_PORTS, &pl->udp0, err);
        if (rc) {
            cbf_resources_give(pl->res, CBF_RES_GROUPS, pl->group0, n);
            pl->n_groups = 0;
        }
    }
    if (!rc && !(rc = cbf_resources_take(pl->res, CBF_RES_ENGINE_KATCP, n_procs, &pl->katcp0, err)))
        pl->n_katcp = n_procs;
    return rc ? cbf_error_prefix(err, "product \"%s\"", pl->name) : 0;
}

static void set_groups(array_desc *d, unsigned g, unsigned port)
{
    array_group *streams[] = {&d->dig, &d->feng, &d->beam, &d->vis};
    int counts[] = {2 * d->dig_antennas, d->xengines, d->beams, d->xengines};
    for (int i = 0; i < 4; i++) {
        *streams[i] = (array_group){g, (int)port, 1};
        g += (unsigned)counts[i];
        port++;
    }
    d->has_vis = 1;
}

static void fill(const cbf_product *p, const found *f, const char *name, const cbf_controller_config *c,
                 array_desc *d)
{
    const cbf_product_acv *a = &f->acv->u.acv;
    const cbf_product_dig *dig = &f->dig0->u.dig;
    snprintf(d->path, sizeof d->path, "product %s (cbf-controller)", name);
    snprintf(d->name, sizeof d->name, "%s", name);
    d->antennas = a->n_inputs / 2;
    d->channels = a->n_chans;
    d->adc_sample_rate = a->adc_sample_rate;
    d->bits = dig->bits_per_sample;
    d->spectra_per_heap = a->spectra_per_heap;
    d->xengines = a->n_substreams;
    d->heaps_per_dump = f->bcp->u.bcp.heaps_per_dump;
    d->beams = f->n_tacv;
    for (int b = 0; b < f->n_tacv; b++)
        d->beam_pols[b] = f->tacv[b]->u.tacv.src_pol;
    d->samples_per_chunk = 1 << 20;
    d->gain = 1;
    d->taps = a->taps;
    d->decimation = 1;
    snprintf(d->window, sizeof d->window, "%s", a->window == CBF_WINDOW_RECT ? "rect" : "hann");
    d->w_cutoff = a->w_cutoff;
    d->dither = a->dither != CBF_DITHER_NONE;
    d->sync_time = a->sync_time;
    d->record = 0;   /* the streams go to their subscribers; nothing is written to disk */
    d->endless = 1;  /* engines run until deconfigure, whatever their senders do */
    d->fill = 0.9;
    d->digitisers = d->dig_antennas;   /* one dsim per antenna, as katsdpcontroller's sim.ANT.RATE tasks */
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
    snprintf(d->where_xengines, ARRAY_WHERE, "outputs.%s (%d substreams)", f->acv->name, a->n_substreams);
    snprintf(d->where_beams, ARRAY_WHERE, "outputs.%s (a beam)", f->n_tacv ? f->tacv[0]->name : "?");
    snprintf(d->where_digitisers, ARRAY_WHERE, "outputs.%s (a simulated digitiser)", f->dig0->name);
    snprintf(d->where_hosts, ARRAY_WHERE, "the controller's hosts (%s)", c->where_hosts);
}

/* The NICs at the rate the product will run: every figure of the budget
 * check scales with the ADC rate, so the check runs on a copy whose rate
 * is clock_ratio x the real one (the pipelines keep the real rate, which
 * sets the frequencies and the time stamps' meaning). */
static int check_budget(const cbf_product *p, cbf_product_plan *pl, cbf_error *err)
{
    if (p->clock_ratio <= 0)   /* unpaced: as fast as the engines go, nothing to check */
        return 0;
    array_desc *d = malloc(sizeof *d);
    if (!d)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    *d = *pl->desc;
    d->adc_sample_rate *= p->clock_ratio;
    int rc = array_plan_check(d, &pl->plan, NULL, err);
    free(d);
    if (rc)
        cbf_error_prefix(err, "product \"%s\" at simulation.clock_ratio %g (a lower one slows the simulated "
                         "digitisers)", pl->name, p->clock_ratio);
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
    if (!rc)
        rc = check_channeliser(f.acv, err);
    if (rc)
        return rc;
    cbf_product_plan *pl = calloc(1, sizeof *pl);
    if (!pl || !(pl->dig_stream = calloc((size_t)p->n_streams + 1, sizeof *pl->dig_stream)) ||
        !(pl->desc = calloc(1, sizeof *pl->desc))) {
        cbf_product_plan_free(pl);
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    snprintf(pl->name, sizeof pl->name, "%s", name);
    snprintf(pl->dir, sizeof pl->dir, "%s/%s", c->state_dir, name);
    pl->product = p;
    pl->acv = f.acv;
    pl->bcp = f.bcp;
    pl->res = res;
    array_desc *d = pl->desc;
    rc = map_digitisers(p, &f, d, pl->dig_stream, err);
    if (!rc) {
        fill(p, &f, name, c, d);
        pl->dsim_rate_gbps = d->sim_rate_gbps;
        rc = take(pl, d, d->digitisers + d->antennas + d->xengines, err);
    }
    if (!rc) {
        set_groups(d, pl->group0, pl->udp0);
        d->katcp_port = (int)pl->katcp0;
        rc = array_plan_make(d, &pl->plan, err);
    }
    if (!rc)
        rc = check_budget(p, pl, err);
    /* Slurm binds each step to the one GPU it gives it, which the engine
     * then sees as device 0 (scripts/slurm/cbf-array.sbatch does the same) */
    for (int i = 0; !rc && c->launcher == CBF_LAUNCHER_SLURM && i < pl->plan.n_procs; i++)
        if (pl->plan.procs[i].gpu > 0)
            pl->plan.procs[i].gpu = 0;
    if (!rc)
        rc = cbf_plan_engines(pl, f.tacv, f.n_tacv, err);
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
        cbf_resources_give(pl->res, CBF_RES_UDP_PORTS, pl->udp0, pl->n_groups ? PLAN_UDP_PORTS : 0);
        cbf_resources_give(pl->res, CBF_RES_ENGINE_KATCP, pl->katcp0, pl->n_katcp);
    }
    for (int i = 0; i < pl->n_engines; i++)
        free(pl->engines[i].inputs);
    free(pl->engines);
    free(pl->streams);
    free(pl->dig_stream);
    array_plan_free(&pl->plan);
    free(pl->desc);
    free(pl);
}

int cbf_product_name_ok(const char *name)
{
    size_t n = strlen(name);
    return n > 0 && n < sizeof ((cbf_product_plan *)0)->name && strspn(name, "abcdefghijklmnopqrstuvwxyz"
                                                                           "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n;
}

