/* desc.c: the array description and the budget file, read with libyaml and
 * checked by libcbf's parameter validation (yamldoc.c), so a wrong key,
 * type or range reads as it does in a pipeline: file:line:column, the
 * section, the key, and a "did you mean" where one is near. Each section is
 * checked as a node's parameters are; the checks that span sections (roles
 * without a host, groups that do not parse) name the value's place too. */
#include <arpa/inet.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "yamldoc.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const cbf_param_decl array_decls[] = {
    {"name", CBF_PARAM_STRING, "array", CBF_NORANGE, NULL, "names the engines (engine.name)"},
    {"antennas", CBF_PARAM_INT, NULL, CBF_RANGE(1, 4096), NULL, "dual-polarisation antennas"},
    {"channels", CBF_PARAM_INT, NULL, CBF_RANGE(2, 1 << 22), NULL, "F-engine channels"},
    {"adc_sample_rate", CBF_PARAM_FLOAT, "1712e6", CBF_RANGE(1, 1e12), NULL, "Hz, per polarisation"},
    {"bits", CBF_PARAM_INT, "10", CBF_RANGE(2, 16), NULL, "digitiser bits per sample"},
    {"spectra_per_heap", CBF_PARAM_INT, "256", CBF_RANGE(1, 65536), NULL, "spectra per F-engine heap"},
    {"xengines", CBF_PARAM_INT, "0", CBF_RANGE(0, 65536), NULL,
     "X-engines, each an equal channel range; 0: as many as --figures sizes from 'sizing'"},
    {"beams", CBF_PARAM_INT, "0", CBF_RANGE(0, ARRAY_MAX_BEAMS), NULL, "single-pol beams"},
    {"beam_pols", CBF_PARAM_INT_LIST, "[]", CBF_RANGE(0, 1), NULL,
     "each beam's polarisation, one per beam; []: beam b takes pol b mod 2"},
    {"heaps_per_dump", CBF_PARAM_INT, "0", CBF_RANGE(0, 1 << 20), NULL,
     "correlator heap_accumulation_threshold; 0: its default"},
    {"samples_per_chunk", CBF_PARAM_INT, "1048576", CBF_RANGE(4096, 1 << 30), NULL,
     "digitiser samples per chunk"},
    {"gain", CBF_PARAM_FLOAT, "1", CBF_RANGE(-1e9, 1e9), NULL, "F-engine gain (real)"},
    {"taps", CBF_PARAM_INT, "16", CBF_RANGE(1, 1024), NULL, "F-engine PFB taps (the pfb plugin takes 1 to 16)"},
    {"window", CBF_PARAM_CHOICE, "hann", CBF_NORANGE, "hann|rect", "F-engine PFB window"},
    {"w_cutoff", CBF_PARAM_FLOAT, "1", CBF_RANGE(0, 1e6), NULL, "F-engine PFB width of each channel's response"},
    {"dither", CBF_PARAM_BOOL, "true", CBF_NORANGE, NULL, "F-engine dither before quantising to 8 bits"},
    {"input_streams", CBF_PARAM_INT_LIST, "[]", CBF_RANGE(0, 2 * 4096 - 1), NULL,
     "the digitiser stream each F-engine input (2 x antenna + pol) reads; []: input i reads stream i"},
    {"sync_time", CBF_PARAM_FLOAT, "0", CBF_RANGE(0, 1e10), NULL,
     "UNIX time of timestamp 0, written into every engine (engine.sync_time); 0: none"},
    {"katcp", CBF_PARAM_INT, "0", CBF_RANGE(0, 65535), NULL,
     "first engine katcp port: process k in start order at +k, on its host's control address; 0: none"},
    {"record", CBF_PARAM_BOOL, "true", CBF_NORANGE, NULL,
     "X-engines write HDF5 and a beam receiver records the beams; false: neither (multicast.vis then)"},
    {"endless", CBF_PARAM_BOOL, "false", CBF_NORANGE, NULL,
     "receivers ignore stream stops: every engine runs until it is stopped (a controller's product)"},
    {"fill", CBF_PARAM_FLOAT, "0.9", CBF_RANGE(0.01, 1), NULL,
     "largest fraction of a NIC, PCIe or GPU budget a plan may use"},
    {"budget", CBF_PARAM_STRING, "", CBF_NORANGE, NULL,
     "budget file (cbf-bench's figures), relative to this file"},
    /* plugins/ddc takes a decimation that divides its 4096-sample heap (so
     * a power of two, 2 to 1024) and the narrowband pfb one up to 512; the
     * planner offers 2 to 64 (katgpucbf's qualification runs 8 and 16) */
    {"decimation", CBF_PARAM_INT, "1", CBF_RANGE(1, 64), NULL,
     "1: wideband; 2, 4, ... 64: narrowband, a ddc before each F-engine's pfb and the channels over "
     "adc_sample_rate / 2 / decimation (plugins/ddc: a power of two dividing its 4096-sample heap)"},
    {"ddc_centre_frequency", CBF_PARAM_FLOAT, "0", CBF_RANGE(0, 1e12), NULL,
     "Hz, narrowband only (and then required): the centre of the channels, the whole band inside "
     "0 .. adc_sample_rate / 2"},
    {"pass_bandwidth", CBF_PARAM_FLOAT, "0", CBF_RANGE(0, 1e12), NULL,
     "Hz, narrowband only: > 0 is VLBI's form, the whole band kept (no channel discarded) and the ddc's "
     "filter flat over this width about the centre, under adc_sample_rate / 2 / decimation; 0: the "
     "discarding form"},
    {"rx_reorder_tol", CBF_PARAM_FLOAT, ARRAY_RX_REORDER_TOL, CBF_RANGE(0, 60), NULL,
     "seconds an F-engine heap may arrive behind the newest and still be placed: the X-engines' receive "
     "window (katgpucbf's --rx-reorder-tol, 2^29 samples at L-band), at least 8 heaps, at most 256 MiB"},
};
static const cbf_param_decl mcast_decls[] = {
    {"digitiser", CBF_PARAM_STRING, NULL, CBF_NORANGE, NULL, "first group:port, input i at +i"},
    {"feng", CBF_PARAM_STRING, NULL, CBF_NORANGE, NULL, "first group:port, X-engine x at +x"},
    {"beam", CBF_PARAM_STRING, "", CBF_NORANGE, NULL, "first group:port, beam b at +b"},
    {"vis", CBF_PARAM_STRING, "", CBF_NORANGE, NULL,
     "first group:port of the visibilities, X-engine x at +x; empty: not sent"},
    {"same_port", CBF_PARAM_BOOL, "false", CBF_NORANGE, NULL,
     "every group of a stream on its first port (katgpucbf's a.b.c.d+N:port); false: group i on port + i"},
};
static const cbf_param_decl sim_decls[] = {
    {"digitisers", CBF_PARAM_INT, "1", CBF_RANGE(0, 4096), NULL, "dsim processes"},
    {"length", CBF_PARAM_INT, "0", CBF_RANGE(0, 1e18), NULL, "samples per pol; 0: endless"},
    {"noise", CBF_PARAM_FLOAT, "0.05", CBF_RANGE(0, 1), NULL, "Gaussian RMS"},
    {"tone_hz", CBF_PARAM_FLOAT, "284.5e6", CBF_RANGE(0, 1e12), NULL, "one tone"},
    {"tone_amplitude", CBF_PARAM_FLOAT, "0.1", CBF_RANGE(0, 1), NULL, "its amplitude"},
    {"delay_step", CBF_PARAM_FLOAT, "0", CBF_RANGE(-1e6, 1e6), NULL, "antenna a delayed a x this, samples"},
    {"rate_gbps", CBF_PARAM_FLOAT, "0", CBF_RANGE(0, 1e4), NULL, "sender rate limit; 0: none"},
    {"threads", CBF_PARAM_INT, "1", CBF_RANGE(1, 64), NULL,
     "threads each dsim computes its samples with (one was 83-90 % busy at 26.75 Msample/s per pol)"},
};
static const cbf_param_decl sizing_decls[] = {
    {"gpus_per_host", CBF_PARAM_INT, NULL, CBF_RANGE(1, 64), NULL, "GPUs in one host"},
    {"nics_per_host", CBF_PARAM_INT, NULL, CBF_RANGE(1, 64), NULL, "NICs (switch ports) per host"},
    {"nic_gbps", CBF_PARAM_FLOAT, NULL, CBF_RANGE(0.001, 1e5), NULL, "each NIC's rate"},
    {"first_interface", CBF_PARAM_STRING, "", CBF_NORANGE, NULL,
     "without 'hosts': the first data-interface address of the sized hosts, the others consecutive"},
};
static const cbf_param_decl budget_decls[] = {
    {"gpu", CBF_PARAM_STRING, "", CBF_NORANGE, NULL, "what was measured"},
    {"measured", CBF_PARAM_STRING, "", CBF_NORANGE, NULL, "when and with which commands"},
    {"pcie_h2d_gbs", CBF_PARAM_FLOAT, NULL, CBF_RANGE(0.001, 1e4), NULL, "GB/s host to GPU"},
    {"pcie_d2h_gbs", CBF_PARAM_FLOAT, NULL, CBF_RANGE(0.001, 1e4), NULL, "GB/s GPU to host"},
    {"feng_gsps", CBF_PARAM_FLOAT, NULL, CBF_RANGE(0.001, 1e6), NULL, "F-engine Gsample/s per GPU"},
    {"corr_ants", CBF_PARAM_INT_LIST, NULL, CBF_RANGE(1, 1 << 20), NULL, "correlator sizes N"},
    {"corr_tops", CBF_PARAM_FLOAT_LIST, NULL, CBF_RANGE(0.001, 1e6), NULL, "its Tops/s at each N"},
    {"beam_tflops", CBF_PARAM_FLOAT, NULL, CBF_RANGE(0.001, 1e6), NULL, "beamformer TFLOP/s"},
};

/* A budget file's own key, named where a description was expected: the
 * file is one a description points to, not one to plan. */
static int budget_key(const char *s)
{
    for (int i = 0; s && i < N(budget_decls); i++)
        if (budget_decls[i].def == NULL && !strcmp(s, budget_decls[i].name))
            return 1;
    return 0;
}

static int top_keys(array_yaml *L, const yaml_node_t *root)
{
    static const char *const keys[] = {"array", "multicast", "simulate", "sizing", "hosts"};
    if (!array_yaml_get(L, root, "array"))
        for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(&L->doc, p->key);
            if (budget_key(array_yaml_scalar(k)))
                return array_yaml_fail(L, k, "'%s' is a budget file's key: this is a budget file (cbf-bench's "
                                       "figures), not an array description; a description names it in "
                                       "array.budget (docs/scaling.md, \"Budget files\")", array_yaml_scalar(k));
        }
    return array_yaml_known_sections(L, root, keys, N(keys));
}

int array_group_parse(const char *s, const char *what, const char *where, array_group *g, cbf_error *err)
{
    char ip[64];
    int port;
    struct in_addr a;
    const char *colon = strrchr(s, ':');
    if (!colon || (size_t)(colon - s) >= sizeof ip || sscanf(colon + 1, "%d", &port) != 1 || port < 1 ||
        port > 65535)
        return cbf_error_set(err, CBF_ECONFIG, "%s: %s: expected group:port, got '%s'", where, what, s);
    memcpy(ip, s, (size_t)(colon - s));
    ip[colon - s] = '\0';
    if (inet_pton(AF_INET, ip, &a) != 1 || (ntohl(a.s_addr) >> 28) != 0xe)
        return cbf_error_set(err, CBF_ECONFIG, "%s: %s: '%s' is not an IPv4 multicast group", where, what, ip);
    g->addr = ntohl(a.s_addr);
    g->port = port;
    return 0;
}

/* multicast.KEY, "a.b.c.d:port", into g; the error names the value's place. */
static int group(const cbf_params *p, const char *key, array_group *g, cbf_error *err)
{
    char what[64];
    snprintf(what, sizeof what, "multicast.%s", key);
    return array_group_parse(cbf_params_string(p, key), what, cbf_params_where(p, key), g, err);
}

static int budget(const char *path, array_budget *b, cbf_error *err)
{
    array_yaml L = {.err = err};
    cbf_params *p = NULL;
    int rc = array_yaml_load(&L, path, "budget");
    if (!rc)
        rc = array_yaml_section(&L, array_yaml_root(&L), "budget", "cbf-array budget", budget_decls,
                                N(budget_decls), &p);
    if (!rc) {
        snprintf(b->path, sizeof b->path, "%s", path);
        snprintf(b->gpu, sizeof b->gpu, "%s", cbf_params_string(p, "gpu"));
        b->pcie_h2d_gbs = cbf_params_float(p, "pcie_h2d_gbs");
        b->pcie_d2h_gbs = cbf_params_float(p, "pcie_d2h_gbs");
        b->feng_gsps = cbf_params_float(p, "feng_gsps");
        b->beam_tflops = cbf_params_float(p, "beam_tflops");
        b->n_corr = (int)cbf_params_len(p, "corr_ants");
        snprintf(b->where_pcie_h2d, ARRAY_WHERE, "%s", cbf_params_where(p, "pcie_h2d_gbs"));
        snprintf(b->where_pcie_d2h, ARRAY_WHERE, "%s", cbf_params_where(p, "pcie_d2h_gbs"));
        snprintf(b->where_feng, ARRAY_WHERE, "%s", cbf_params_where(p, "feng_gsps"));
        snprintf(b->where_corr, ARRAY_WHERE, "%s", cbf_params_where(p, "corr_tops"));
        snprintf(b->where_beam, ARRAY_WHERE, "%s", cbf_params_where(p, "beam_tflops"));
        if (b->n_corr < 1 || b->n_corr > ARRAY_MAX_CORR || cbf_params_len(p, "corr_tops") != (size_t)b->n_corr)
            rc = cbf_error_set(err, CBF_ECONFIG, "%s: budget: corr_tops needs one figure per corr_ants "
                               "entry (1 to %d)", b->where_corr, ARRAY_MAX_CORR);
        for (int i = 0; !rc && i < b->n_corr; i++) {
            b->corr_ants[i] = (double)cbf_params_int_at(p, "corr_ants", (size_t)i);
            b->corr_tops[i] = cbf_params_float_at(p, "corr_tops", (size_t)i);
            if (i && b->corr_ants[i] <= b->corr_ants[i - 1])
                rc = cbf_error_set(err, CBF_ECONFIG, "%s: budget: corr_ants must increase",
                                   cbf_params_where(p, "corr_ants"));
        }
    }
    cbf_params_free(p);
    array_yaml_free(&L);
    return rc;
}

/* The lists of the array section: beam_pols (one per beam) and
 * input_streams (one per input), and what follows from them. */
static int read_lists(array_yaml *L, const cbf_params *p, array_desc *d)
{
    size_t n = cbf_params_len(p, "beam_pols");
    if (n && n != (size_t)d->beams)
        return cbf_error_set(L->err, CBF_ECONFIG, "%s: array.beam_pols: %zu given for %d beams (one per beam, "
                             "or [] for pol b mod 2)", cbf_params_where(p, "beam_pols"), n, d->beams);
    for (int b = 0; b < d->beams; b++)
        d->beam_pols[b] = n ? (int)cbf_params_int_at(p, "beam_pols", (size_t)b) : b % 2;
    n = cbf_params_len(p, "input_streams");
    if (n && n != 2 * (size_t)d->antennas)
        return cbf_error_set(L->err, CBF_ECONFIG, "%s: array.input_streams: %zu given for %d inputs (2 x "
                             "array.antennas, or [] for input i from stream i)",
                             cbf_params_where(p, "input_streams"), n, 2 * d->antennas);
    int top = 0;
    for (int i = 0; i < 2 * d->antennas; i++) {
        d->input_streams[i] = n ? (int)cbf_params_int_at(p, "input_streams", (size_t)i) : i;
        top = d->input_streams[i] > top ? d->input_streams[i] : top;
    }
    d->dig_antennas = top / 2 + 1;   /* digitiser streams come in pairs: one antenna's two pols */
    return 0;
}

/* array.decimation and array.ddc_centre_frequency: a narrowband of
 * adc_sample_rate / 2 / decimation about the centre, all of it inside the
 * digitiser's band 0 .. adc_sample_rate / 2 (katgpucbf's narrowband); the
 * centre is given exactly when the decimation is above 1. */
static int read_narrowband(array_yaml *L, const cbf_params *p, array_desc *d)
{
    d->decimation = (int)cbf_params_int(p, "decimation");
    d->ddc_centre_hz = cbf_params_float(p, "ddc_centre_frequency");
    const char *at_dec = cbf_params_where(p, "decimation"), *at_c = cbf_params_where(p, "ddc_centre_frequency");
    int given = cbf_params_given(p, "ddc_centre_frequency");
    if (d->decimation & (d->decimation - 1))
        return cbf_error_set(L->err, CBF_ECONFIG, "%s: array.decimation: %d is not a power of two (1: wideband; "
                             "2, 4, 8, 16, 32 or 64: narrowband)", at_dec, d->decimation);
    if (d->decimation == 1 && cbf_params_given(p, "pass_bandwidth"))
        return cbf_error_set(L->err, CBF_ECONFIG, "%s: array.pass_bandwidth: given for a wideband array "
                             "(array.decimation 1); VLBI's form is a narrowband one",
                             cbf_params_where(p, "pass_bandwidth"));
    if (d->decimation == 1)
        return given ? cbf_error_set(L->err, CBF_ECONFIG, "%s: array.ddc_centre_frequency: given for a wideband "
                                     "array (array.decimation 1); a narrowband one sets array.decimation 2 to 64",
                                     at_c) : 0;
    if (!given)
        return cbf_error_set(L->err, CBF_ECONFIG, "%s: array.decimation: %d needs array.ddc_centre_frequency "
                             "(Hz, the narrowband's centre)", at_dec, d->decimation);
    double nyquist = d->adc_sample_rate / 2, half = nyquist / d->decimation / 2;
    if (d->ddc_centre_hz - half < 0 || d->ddc_centre_hz + half > nyquist)
        return cbf_error_set(L->err, CBF_ECONFIG, "%s: array.ddc_centre_frequency: %.9g MHz puts the %.9g MHz "
                             "narrowband (array.decimation %d) at %.9g .. %.9g MHz, outside the digitiser's "
                             "0 .. %.9g MHz (the centre must lie in %.9g .. %.9g MHz)", at_c,
                             d->ddc_centre_hz / 1e6, 2 * half / 1e6, d->decimation, (d->ddc_centre_hz - half) / 1e6,
                             (d->ddc_centre_hz + half) / 1e6, nyquist / 1e6, half / 1e6, (nyquist - half) / 1e6);
    d->pass_bandwidth = cbf_params_float(p, "pass_bandwidth");
    if (d->pass_bandwidth > 0 && !(d->pass_bandwidth < 2 * half))
        return cbf_error_set(L->err, CBF_ECONFIG, "%s: array.pass_bandwidth: %.9g MHz is not under the "
                             "narrowband's %.9g MHz (array.decimation %d)", cbf_params_where(p, "pass_bandwidth"),
                             d->pass_bandwidth / 1e6, 2 * half / 1e6, d->decimation);
    return 0;
}

static int read_array(array_yaml *L, const yaml_node_t *m, array_desc *d)
{
    cbf_params *p;
    int rc = array_yaml_section(L, m, "array", "cbf-array", array_decls, N(array_decls), &p);
    if (rc)
        return rc;
    snprintf(d->name, sizeof d->name, "%s", cbf_params_string(p, "name"));
    d->antennas = (int)cbf_params_int(p, "antennas");
    d->channels = (int)cbf_params_int(p, "channels");
    d->adc_sample_rate = cbf_params_float(p, "adc_sample_rate");
    d->bits = (int)cbf_params_int(p, "bits");
    d->spectra_per_heap = (int)cbf_params_int(p, "spectra_per_heap");
    d->xengines = (int)cbf_params_int(p, "xengines");
    d->beams = (int)cbf_params_int(p, "beams");
    d->heaps_per_dump = (int)cbf_params_int(p, "heaps_per_dump");
    d->rx_reorder_tol = cbf_params_float(p, "rx_reorder_tol");
    d->samples_per_chunk = (int)cbf_params_int(p, "samples_per_chunk");
    d->gain = cbf_params_float(p, "gain");
    d->taps = (int)cbf_params_int(p, "taps");
    snprintf(d->window, sizeof d->window, "%s", cbf_params_string(p, "window"));
    d->w_cutoff = cbf_params_float(p, "w_cutoff");
    d->dither = cbf_params_bool(p, "dither");
    d->sync_time = cbf_params_float(p, "sync_time");
    d->katcp_port = (int)cbf_params_int(p, "katcp");
    d->record = cbf_params_bool(p, "record");
    d->endless = cbf_params_bool(p, "endless");
    d->fill = cbf_params_float(p, "fill");
    snprintf(d->where_xengines, ARRAY_WHERE, "%s", cbf_params_where(p, "xengines"));
    snprintf(d->where_beams, ARRAY_WHERE, "%s", cbf_params_where(p, "beams"));
    snprintf(d->where_record, ARRAY_WHERE, "%s", cbf_params_where(p, "record"));
    array_yaml_where(L, m, d->where_array);
    const char *b = cbf_params_string(p, "budget");
    if (d->samples_per_chunk % 4096)
        rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: array.samples_per_chunk: not a multiple of 4096",
                           cbf_params_where(p, "samples_per_chunk"));
    if (!rc)
        rc = read_narrowband(L, p, d);
    if (!rc)
        rc = read_lists(L, p, d);
    if (!rc && b[0]) {
        char dir[512], path[1024];
        snprintf(dir, sizeof dir, "%s", d->path);
        snprintf(path, sizeof path, "%s/%s", b[0] == '/' ? "" : dirname(dir), b);
        rc = budget(b[0] == '/' ? b : path, &d->budget, L->err);
        if (rc) {   /* a budget that cannot be read is a bad description too: exit 2 */
            cbf_error_prefix(L->err, "%s: array.budget", cbf_params_where(p, "budget"));
            rc = L->err->code = CBF_ECONFIG;
        }
        d->has_budget = !rc;
    }
    cbf_params_free(p);
    return rc;
}

static int read_multicast(array_yaml *L, const yaml_node_t *root, array_desc *d)
{
    const yaml_node_t *m = array_yaml_get(L, root, "multicast");
    if (!m)
        return array_yaml_fail(L, root, "section 'multicast' is missing (first group:port of digitiser, feng%s)",
                               d->beams ? ", beam" : "");
    cbf_params *p = NULL;
    int rc = array_yaml_section(L, m, "multicast", "cbf-array", mcast_decls, N(mcast_decls), &p);
    if (!rc)
        rc = group(p, "digitiser", &d->dig, L->err);
    if (!rc)
        rc = group(p, "feng", &d->feng, L->err);
    if (!rc && (d->beams || cbf_params_string(p, "beam")[0]))
        rc = group(p, "beam", &d->beam, L->err);
    if (!rc && cbf_params_string(p, "vis")[0]) {
        rc = group(p, "vis", &d->vis, L->err);
        d->has_vis = !rc;
    }
    if (!rc && cbf_params_bool(p, "same_port"))
        d->dig.same_port = d->feng.same_port = d->beam.same_port = d->vis.same_port = 1;
    if (!rc && !d->record && !d->has_vis)
        rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: array.record: false needs multicast.vis (the X-engines' "
                           "visibilities would go nowhere)", d->where_record);
    cbf_params_free(p);
    return rc;
}

static int read_rest(array_yaml *L, const yaml_node_t *root, array_desc *d)
{
    cbf_params *p = NULL;
    const yaml_node_t *m;
    int rc = read_multicast(L, root, d);
    if (!rc && (m = array_yaml_get(L, root, "simulate"))) {
        rc = array_yaml_section(L, m, "simulate", "cbf-array", sim_decls, N(sim_decls), &p);
        if (!rc) {
            d->digitisers = (int)cbf_params_int(p, "digitisers");
            d->length = (long long)cbf_params_int(p, "length");
            d->noise = cbf_params_float(p, "noise");
            d->tone_hz = cbf_params_float(p, "tone_hz");
            d->tone_amplitude = cbf_params_float(p, "tone_amplitude");
            d->delay_step = cbf_params_float(p, "delay_step");
            d->sim_rate_gbps = cbf_params_float(p, "rate_gbps");
            d->sim_threads = (int)cbf_params_int(p, "threads");
            snprintf(d->where_digitisers, ARRAY_WHERE, "%s", cbf_params_where(p, "digitisers"));
            if (d->digitisers > d->dig_antennas)
                rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: simulate.digitisers: %d is more than the %d "
                                   "antennas", cbf_params_where(p, "digitisers"), d->digitisers, d->dig_antennas);
            if (!rc && d->length % d->samples_per_chunk)
                rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: simulate.length: not a multiple of "
                                   "array.samples_per_chunk (%d)", cbf_params_where(p, "length"),
                                   d->samples_per_chunk);
        }
        cbf_params_free(p);
        p = NULL;
    }
    if (!rc && (m = array_yaml_get(L, root, "sizing"))) {
        rc = array_yaml_section(L, m, "sizing", "cbf-array", sizing_decls, N(sizing_decls), &p);
        if (!rc) {
            d->has_sizing = 1;
            d->size_gpus_per_host = (int)cbf_params_int(p, "gpus_per_host");
            d->size_nics_per_host = (int)cbf_params_int(p, "nics_per_host");
            d->size_nic_gbps = cbf_params_float(p, "nic_gbps");
            array_yaml_where(L, m, d->where_sizing);
            const char *a = cbf_params_string(p, "first_interface");
            struct in_addr ia;
            if (a[0] && inet_pton(AF_INET, a, &ia) != 1)
                rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: sizing.first_interface: '%s' is not an IPv4 "
                                   "address", cbf_params_where(p, "first_interface"), a);
            else if (a[0])
                d->size_first_if = ntohl(ia.s_addr);
        }
        cbf_params_free(p);
    }
    if (!rc && (m = array_yaml_get(L, root, "hosts")))
        rc = array_yaml_hosts(L, m, d->hosts, &d->n_hosts, d->where_hosts);
    return rc;
}

int array_desc_load(const char *path, array_desc *d, cbf_error *err)
{
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", path);
    array_yaml L = {.err = err};
    int rc = array_yaml_load(&L, path, "array description");
    const yaml_node_t *root = rc ? NULL : array_yaml_root(&L), *m;
    if (!rc) {
        array_yaml_where(&L, root, d->where_root);
        snprintf(d->where_hosts, ARRAY_WHERE, "%s", d->where_root);   /* until a 'hosts' section */
        rc = top_keys(&L, root);
    }
    if (!rc && !(m = array_yaml_get(&L, root, "array")))
        rc = array_yaml_fail(&L, root, "section 'array' is missing (antennas, channels, xengines, ...)");
    if (!rc)
        rc = read_array(&L, m, d);
    if (!rc)
        rc = read_rest(&L, root, d);
    array_yaml_free(&L);
    return rc;
}
