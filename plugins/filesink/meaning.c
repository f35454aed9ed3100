/* meaning.c: see meaning.h. Everything here is derived from the
 * descriptor's axes and attributes, never from which plugin made the data,
 * so a new stage's stream is described as soon as it names its axes and
 * sets the common attributes (stage/contracts/common.h). */
#include "meaning.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5util.h"
#include "stage/contracts/common.h"
#include "stage/contracts/feng.h"

/* Nodes further up than this are not recorded (a pipeline is a few deep). */
#define FS_MAX_UPSTREAM 64

int fs_labels_parse(fs_labels *l, const char *text, cbf_error *err)
{
    memset(l, 0, sizeof *l);
    size_t n = 1;
    for (const char *c = text; *c; c++)
        n += *c == ',';
    l->text = strdup(text);
    l->name = calloc(n, sizeof *l->name);
    if (!l->text || !l->name)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    /* strsep keeps empty fields, so "a,,c" still names input 2 "c"; an
     * empty name gets the default. */
    for (char *rest = *text ? l->text : NULL, *t; (t = strsep(&rest, ","));) {
        while (*t == ' ')
            t++;
        for (char *e = t + strlen(t); e > t && e[-1] == ' ';)
            *--e = 0;
        l->name[l->n++] = t;
    }
    return 0;
}

void fs_labels_free(fs_labels *l)
{
    free(l->text);
    free(l->name);
    memset(l, 0, sizeof *l);
}

int fs_bits_of(const cbf_port_desc *d)
{
    switch (d->dtype) {
    case CBF_DTYPE_PACKED: return d->bits;
    case CBF_DTYPE_CI4: return 4;
    case CBF_DTYPE_CI8: case CBF_DTYPE_CI32: case CBF_DTYPE_CI64: case CBF_DTYPE_CF32:
        return (int)cbf_dtype_size(d->dtype) * 4;
    default: return (int)cbf_dtype_size(d->dtype) * 8;
    }
}

static int fs_axis(const cbf_port_desc *d, const char *name)
{
    for (int i = 0; i < d->ndim; i++)
        if (!strcmp(d->axes[i], name))
            return i;
    return -1;
}

static double fs_attr(const cbf_port_desc *d, const char *name)
{
    double v;
    return cbf_port_desc_get_attr(d, name, &v) ? NAN : v;
}

/* The engine's time reference (engine keys sync_time, adc_sample_rate):
 * UNIX time of timestamp ts = sync_time + ts / scale_factor_timestamp. */
static int fs_time(hid_t g, const cbf_port_desc *d, const cbf_node *n)
{
    double sync, engine_fs;
    int rc;
    if (cbf_node_time_ref(n, &sync, &engine_fs)) {
        rc = h5u_attr_double(g, "sync_time", sync);
    } else {
        rc = h5u_attr_double(g, "sync_time", 0.0);
        rc |= h5u_attr_string(g, "sync_time_note",
                              "no time reference is set (engine key sync_time): sync_time 0 is a "
                              "placeholder, and timestamps count digitiser samples from an arbitrary "
                              "sample 0");
    }
    /* The engine checked that a stage's rate agrees with its own. */
    double fs = fs_attr(d, CBF_ATTR_ADC_SAMPLE_RATE);
    if (!(fs > 0))
        fs = engine_fs;
    if (fs > 0)
        rc |= h5u_attr_double(g, "scale_factor_timestamp", fs);
    return rc;
}

/* The band of the channels a group holds: the channel axis gives how many
 * are here; the attributes say which and where. A stream that does not
 * carry its bandwidth or centre (X-engine input from the network) gets
 * them from the spectrum spacing: samples_between_spectra = 2 x channels x
 * decimation, and decimation 1 is the wideband band [0, fs/2). */
static int fs_band(hid_t g, const cbf_port_desc *d)
{
    const int ax = fs_axis(d, "channel");
    if (ax < 0)
        return 0;
    const double held = (double)d->shape[ax];
    double channels = fs_attr(d, CBF_ATTR_CHANNELS), first = fs_attr(d, CBF_ATTR_FIRST_CHANNEL);
    double bw = fs_attr(d, CBF_ATTR_BANDWIDTH), centre = fs_attr(d, CBF_ATTR_CENTRE_FREQUENCY);
    const double fs = fs_attr(d, CBF_ATTR_ADC_SAMPLE_RATE);
    double dec = fs_attr(d, CBF_ATTR_DECIMATION);
    channels = isnan(channels) ? held : channels;
    first = isnan(first) ? 0 : first;
    if (isnan(dec))
        dec = fs_attr(d, CBF_ATTR_SAMPLES_BETWEEN_SPECTRA) / (2 * channels);
    if (isnan(bw) && fs > 0 && dec >= 1)
        bw = fs / (2 * dec);
    if (isnan(centre) && fs > 0 && dec == 1)
        centre = fs / 4;
    int rc = h5u_attr_double(g, CBF_ATTR_CHANNELS, channels);
    rc |= h5u_attr_double(g, CBF_ATTR_FIRST_CHANNEL, first);
    rc |= h5u_attr_double(g, "channel_count", held);
    rc |= h5u_attr_double(g, CBF_ATTR_BANDWIDTH, bw);
    rc |= h5u_attr_double(g, CBF_ATTR_CENTRE_FREQUENCY, centre);
    rc |= h5u_attr_double(g, "channel_width", bw / channels);
    rc |= h5u_attr_string(g, "frequency_note",
                          isnan(centre)
                              ? "the centre frequency is not known to this engine (a narrowband "
                                "stream from the network): channel_frequency is NaN"
                              : "frequencies are of the digitised signal (0 is the digitiser's DC), "
                                "not of the sky; channel c of the band is centred at "
                                "centre_frequency + (c - channels / 2) x channel_width");
    const hsize_t n = (hsize_t)held;
    double *f = malloc(sizeof(double) * (n ? n : 1));
    if (!f)
        return -1;
    for (hsize_t i = 0; i < n; i++)
        f[i] = centre + (first + (double)i - channels / 2) * bw / channels;
    rc |= h5u_write_array(g, "channel_frequency", H5T_NATIVE_DOUBLE, 1, &n, f);
    free(f);
    return rc;
}

/* Which antennas a group holds: its antenna axis, else all n_ants of an
 * X-engine product, else the one antenna an F-engine stream carries. */
static int fs_antennas(const cbf_port_desc *d, int *first)
{
    const int ax = fs_axis(d, "antenna");
    const double n = fs_attr(d, CBF_ATTR_N_ANTS), a = fs_attr(d, CBF_ATTR_ANTENNA);
    *first = 0;
    if (ax >= 0)
        return (int)d->shape[ax];
    if (n >= 1)
        return (int)n;
    if (a >= 0) {
        *first = (int)a;
        return 1;
    }
    return 0;
}

/* Labels of inputs 0 .. n - 1: given ones, then ant<a>p<pol>. */
static char **fs_label_table(const fs_labels *l, int n)
{
    char **t = calloc((size_t)n, sizeof *t);
    for (int i = 0; t && i < n; i++) {
        char gen[32];
        snprintf(gen, sizeof gen, "ant%dp%d", i / 2, i % 2);
        if (!(t[i] = strdup(i < l->n && *l->name[i] ? l->name[i] : gen))) {
            for (int j = 0; j < i; j++)
                free(t[j]);
            free(t);
            return NULL;
        }
    }
    return t;
}

/* bls_ordering as katgpucbf describes it: for every product, in data
 * order, the pair of inputs it correlates (docs/formats.md, "Correlation
 * products": baseline a2 (a2 + 1) / 2 + a1, product p1 + 2 p2). */
static int fs_baselines(hid_t g, const cbf_port_desc *d, int n_ants, char **label)
{
    int ax = fs_axis(d, "baseline_product");
    const size_t n_bl = (size_t)n_ants * ((size_t)n_ants + 1) / 2;
    size_t per = 4;
    if (ax < 0 && (ax = fs_axis(d, "baseline")) >= 0)
        per = 1;
    if (ax < 0 || d->shape[ax] * (per == 1 ? 4 : 1) != n_bl * 4)
        return 0;
    const char **pair = malloc(sizeof *pair * n_bl * 8);
    if (!pair)
        return -1;
    for (int a2 = 0; a2 < n_ants; a2++)
        for (int a1 = 0; a1 <= a2; a1++)
            for (int p = 0; p < 4; p++) {
                const size_t prod = 4 * ((size_t)a2 * ((size_t)a2 + 1) / 2 + (size_t)a1) + (size_t)p;
                pair[2 * prod] = label[2 * a1 + (p & 1)];
                pair[2 * prod + 1] = label[2 * a2 + (p >> 1)];
            }
    const hsize_t dims[2] = {n_bl * 4, 2};
    int rc = h5u_write_strings(g, "bls_ordering", 2, dims, pair);
    free(pair);
    return rc;
}

static int fs_inputs(hid_t g, const cbf_port_desc *d, const fs_labels *l)
{
    int first, n = fs_antennas(d, &first);
    if (n <= 0)
        return 0;
    const int inputs = 2 * (first + n);
    char **label = fs_label_table(l, inputs);
    if (!label)
        return -1;
    const hsize_t held = 2 * (hsize_t)n;
    int rc = h5u_write_strings(g, "input_labels", 1, &held, (const char *const *)label + 2 * first);
    if (first == 0)
        rc |= fs_baselines(g, d, n, label);
    for (int i = 0; i < inputs; i++)
        free(label[i]);
    free(label);
    return rc;
}

/* Inputs are followed by the name every cbf plugin gives them, "in"; the
 * walk stops at a source or at a plugin whose inputs are named otherwise. */
static int fs_upstream(hid_t g, cbf_node *producer)
{
    hid_t up = H5Gcreate2(g, "upstream", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (up < 0)
        return -1;
    cbf_node *queue[FS_MAX_UPSTREAM];
    int hops[FS_MAX_UPSTREAM], head = 0, tail = 0, rc = 0;
    queue[tail] = producer;
    hops[tail++] = 0;
    while (head < tail && rc == 0) {
        cbf_node *n = queue[head];
        const int hop = hops[head++];
        if (H5Lexists(up, cbf_node_name(n), H5P_DEFAULT) > 0)
            continue;   /* reached again through another branch */
        hid_t ng = H5Gcreate2(up, cbf_node_name(n), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        hid_t pg = ng >= 0 ? H5Gcreate2(ng, "params", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : -1;
        if (pg < 0) {
            rc = -1;
        } else {
            rc |= h5u_attr_string(ng, "plugin", cbf_node_plugin(n));
            rc |= h5u_attr_i64(ng, "hops", hop);
            const cbf_params *p = cbf_node_params(n);
            for (size_t i = 0; p && i < cbf_params_count(p); i++)
                rc |= h5u_attr_string(pg, cbf_params_name_at(p, i), cbf_params_text_at(p, i));
        }
        if (pg >= 0)
            H5Gclose(pg);
        if (ng >= 0)
            H5Gclose(ng);
        for (int i = 0; i < cbf_node_port_count(n, "in") && tail < FS_MAX_UPSTREAM; i++) {
            cbf_node *peer = cbf_port_peer(cbf_node_port(n, "in", i));
            if (peer) {
                queue[tail] = peer;
                hops[tail++] = hop + 1;
            }
        }
    }
    H5Gclose(up);
    return rc;
}

int fs_meaning_write(hid_t group, const cbf_port_desc *d, cbf_node *producer,
                     const fs_labels *labels)
{
    int rc = fs_time(group, d, producer);
    rc |= fs_band(group, d);
    rc |= fs_inputs(group, d, labels);
    rc |= fs_upstream(group, producer);
    return rc ? -1 : 0;
}
