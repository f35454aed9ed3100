/* stream_sensors.c: the stream sensors of stream_sensors.h, one function per
 * stream type, in the order and with the descriptions of katsdpcontroller's
 * generator (_make_fgpu, _make_xbgpu), so a client that lists them sees what
 * it would see from katsdpcontroller. */
#include "stream_sensors.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cbf/control.h"

/* katgpucbf's packets carry 8192 bytes of data (katsdpcontroller's
 * GPUCBF_PACKET_PAYLOAD_BYTES); cbf's sender writes the same. */
#define PAYLOAD_BYTES 8192

typedef struct ss_ctx {
    cbf_stream_sensors *ss;
    const char *stream;
    int oom;
} ss_ctx;

static char *textf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Adds STREAM.name; value NULL (out of memory while making it) marks the set
 * incomplete. */
static void put(ss_ctx *c, const char *name, const char *type, const char *units, const char *desc,
                char *value)
{
    cbf_stream_sensors *ss = c->ss;
    if (!value) {
        c->oom = 1;
        return;
    }
    if (ss->n == ss->cap) {
        size_t cap = ss->cap ? 2 * ss->cap : 64;
        cbf_stream_sensor *s = realloc(ss->s, cap * sizeof *s);
        if (!s) {
            free(value);
            c->oom = 1;
            return;
        }
        ss->s = s;
        ss->cap = cap;
    }
    char *full = textf("%s.%s", c->stream, name);
    if (!full) {
        free(value);
        c->oom = 1;
        return;
    }
    ss->s[ss->n++] = (cbf_stream_sensor){full, type, units, desc, NULL, value};
}

static char *textf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

static void put_int(ss_ctx *c, const char *name, const char *desc, long long v)
{
    put(c, name, "integer", "", desc, textf("%lld", v));
}

static void put_float(ss_ctx *c, const char *name, const char *units, const char *desc, double v)
{
    char b[40];
    cbf_format_repr(v, b, sizeof b);
    put(c, name, "float", units, desc, strdup(b));
}

/* n copies of '0': the data-suspect masks, nothing suspect yet. */
static char *zeros(size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        memset(s, '0', n);
        s[n] = '\0';
    }
    return s;
}

/* The Python-list values are written to a memory stream; text_take gives
 * the text, or NULL when any write (or the stream itself) failed. */
typedef struct ss_text {
    FILE *f;
    char *p;
    size_t len;
} ss_text;

static int text_open(ss_text *t)
{
    t->p = NULL;
    t->f = open_memstream(&t->p, &t->len);
    return t->f ? 0 : -1;
}

static char *text_take(ss_text *t)
{
    int bad = ferror(t->f);
    if (fclose(t->f) || bad) {
        free(t->p);
        return NULL;
    }
    return t->p;
}

/* s as Python's repr writes a str: in single quotes, unless it holds one
 * and no double quote; backslashes and the quote escaped. */
static void text_py_str(FILE *f, const char *s)
{
    char q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
    fputc(q, f);
    for (const char *p = s; *p; p++) {
        if (*p == '\\' || *p == q)
            fputc('\\', f);
        fputc(*p, f);
    }
    fputc(q, f);
}

/* Every X/B stream repeats these from its channeliser, and has a
 * channel-data-suspect mask (katsdpcontroller's common stream sensors). */
static void common_xb(ss_ctx *c, const cbf_product_acv *a, int n_chans_per_substream)
{
    put_float(c, "scale-factor-timestamp", "Hz",
              "Factor by which to divide instrument timestamps to convert to seconds", a->adc_sample_rate);
    put_float(c, "sync-time", "s",
              "The time at which the digitisers were synchronised. Seconds since the Unix Epoch.",
              a->sync_time);
    put_float(c, "bandwidth", "Hz", "The analogue bandwidth of the digitised band", a->bandwidth);
    put_float(c, "pass-bandwidth", "Hz", "Bandwidth over which the CBF produces a flat response",
              a->pass_bandwidth);
    put_int(c, "n-chans", "The number of frequency channels in this stream's overall output", a->n_chans);
    put_int(c, "n-chans-per-substream", "Number of channels in each substream for this data stream",
            n_chans_per_substream);
    put(c, "channel-data-suspect", "string", "",
        "A bitmask of flags indicating whether each channel should be considered to be garbage.",
        zeros((size_t)a->n_chans));
}

static void acv_sensors(ss_ctx *c, const cbf_product_stream *st)
{
    const cbf_product_acv *a = &st->u.acv;
    int adc_bits = st->n_src ? st->src[0]->u.dig.bits_per_sample : 0;
    put_int(c, "adc-bits", "ADC sample bitwidth", adc_bits);
    put_float(c, "adc-sample-rate", "Hz", "Sample rate of the ADC", a->adc_sample_rate);
    put_float(c, "bandwidth", "Hz", "The analogue bandwidth of the digitised band", a->bandwidth);
    put_float(c, "pass-bandwidth", "Hz", "Bandwidth over which the CBF produces a flat response",
              a->pass_bandwidth);
    put_int(c, "decimation-factor",
            "The factor by which the bandwidth of the incoming digitiser stream is decimated",
            a->decimation_factor);
    put_float(c, "scale-factor-timestamp", "Hz",
              "Factor by which to divide instrument timestamps to convert to seconds", a->adc_sample_rate);
    put_float(c, "sync-time", "s",
              "The time at which the digitisers were synchronised. Seconds since the Unix Epoch.",
              a->sync_time);
    put_int(c, "n-ants", "The number of antennas in the instrument", a->n_ants);
    put_int(c, "n-inputs", "The number of single polarisation inputs to the instrument", a->n_inputs);
    put_int(c, "n-fengs", "The number of F-engines in the instrument", a->n_fengs);
    put_int(c, "feng-out-bits-per-sample",
            "F-engine output bits per sample. Per number, not complex pair. Real and imaginary parts "
            "are both this wide", a->bits_per_sample);
    put_int(c, "n-chans", "Number of channels in the output spectrum", a->n_chans);
    put_int(c, "n-chans-per-substream", "Number of channels in each substream for this F-engine stream",
            a->n_chans_per_substream);
    put_int(c, "n-samples-between-spectra", "Number of samples between spectra",
            a->n_samples_between_spectra);
    put_float(c, "pfb-group-delay", "", "PFB group delay, specified in number of samples",
              a->pfb_group_delay);
    put_float(c, "ddc-group-delay", "", "DDC group delay, specified in number of samples",
              a->ddc_group_delay);
    put_float(c, "filter-group-delay", "",
              "Total group delay of all filters in the signal chain, specified in number of samples.",
              a->pfb_group_delay + a->ddc_group_delay);
    put_int(c, "spectra-per-heap", "Number of spectrum chunks per heap", a->spectra_per_heap);
    /* The baseband centre, not the sky's, as katsdpcontroller reports it. */
    put_float(c, "center-freq", "", "The centre frequency of the digitised band", a->center_freq);
    put_int(c, "payload-len", "The payload size, in bytes, of the F-engine data stream packets",
            PAYLOAD_BYTES);
    put_int(c, "pfb-taps", "Number of taps in the polyphase filter bank", a->taps);
    put_int(c, "ddc-taps",
            "Number of taps in the narrowband digital down-conversion filter (0 if there isn't one)",
            a->ddc_taps);
    size_t before = c->ss->n;
    put(c, "window-function", "discrete", "", "Window function for shaping the PFB filter weights",
        strdup(a->window == CBF_WINDOW_RECT ? "rect" : "hann"));
    if (c->ss->n > before)
        c->ss->s[before].values = "hann,rect";
    put_float(c, "w-cutoff", "", "Scaling factor for sinc component of PFB filter weights", a->w_cutoff);
    put_float(c, "weight-pass", "",
              "Weight given to passband in narrowband digital down-conversion filter (0 if there isn't one)",
              a->weight_pass);
    put(c, "input-data-suspect", "string", "",
        "A bitmask of flags indicating for each input whether the data for that input should be "
        "considered to be garbage. Input order matches input labels.", zeros((size_t)a->n_inputs));
    /* Not one of katsdpcontroller's sensors (it keeps the labels in telstate),
     * but what a client needs to turn an input label into an input index
     * without telstate. */
    ss_text t;
    if (text_open(&t)) {
        c->oom = 1;
        return;
    }
    fputc('[', t.f);
    for (int i = 0; i < a->n_inputs; i++) {
        fputs(i ? ", " : "", t.f);
        text_py_str(t.f, a->input_labels[i]);
    }
    fputc(']', t.f);
    put(c, "input-labels", "string", "", "The input labels, in input order (a Python list)", text_take(&t));
}

static void bcp_sensors(ss_ctx *c, const cbf_product_stream *st)
{
    const cbf_product_bcp *b = &st->u.bcp;
    const cbf_product_acv *a = &b->acv->u.acv;
    common_xb(c, a, b->n_chans_per_substream);
    put_int(c, "n-xengs", "The number of X-engines in the instrument", b->n_xengs);
    put_int(c, "n-accs", "The number of spectra that are accumulated per X-engine output", b->n_accs);
    put_float(c, "int-time", "s", "The time, in seconds, for which the X-engines accumulate.", b->int_time);
    put_int(c, "xeng-out-bits-per-sample",
            "X-engine output bits per sample. Per number, not complex pair- Real and imaginary parts "
            "are both this wide", b->bits_per_sample);
    /* Baseline (a1, a2), a1 <= a2, at a2 (a2 + 1) / 2 + a1; its four
     * products at 4 x that + p1 + 2 p2, each the pair (a1's pol p1, a2's
     * pol p2) by label. */
    int n_ants = a->n_inputs / 2;
    ss_text t;
    if (text_open(&t)) {
        c->oom = 1;
        return;
    }
    fputc('[', t.f);
    for (int idx = 0, a2 = 0; a2 < n_ants; a2++)
        for (int a1 = 0; a1 <= a2; a1++)
            for (int k = 0; k < 4; k++, idx++) {
                int p1 = k & 1, p2 = k >> 1;
                fputs(idx ? ", (" : "(", t.f);
                text_py_str(t.f, a->input_labels[2 * a1 + p1]);
                fputs(", ", t.f);
                text_py_str(t.f, a->input_labels[2 * a2 + p2]);
                fputc(')', t.f);
            }
    fputc(']', t.f);
    put(c, "bls-ordering", "string", "",
        "A string showing the output ordering of baseline data produced by the X-engines in this "
        "instrument, as a list of correlation pairs given by input label.", text_take(&t));
    put_int(c, "n-bls", "The number of baselines produced by this correlator instrument.", b->n_baselines);
    put_int(c, "payload-len", "The payload size, in bytes, of the X-engine data stream packets",
            PAYLOAD_BYTES);
}

static void tacv_sensors(ss_ctx *c, const cbf_product_stream *st)
{
    const cbf_product_tacv *b = &st->u.tacv;
    const cbf_product_acv *a = &b->acv->u.acv;
    common_xb(c, a, b->n_chans_per_substream);
    put_int(c, "n-bengs", "The number of B-engines in the instrument", b->n_bengs);
    put_int(c, "beng-out-bits-per-sample",
            "B-engine output bits per sample. Per number, not complex pair- Real and imaginary parts "
            "are both this wide", b->bits_per_sample);
    put_int(c, "spectra-per-heap", "Number of spectra per heap of beamformer output", b->spectra_per_heap);
    ss_text t;
    if (text_open(&t)) {
        c->oom = 1;
        return;
    }
    fputc('[', t.f);
    for (int i = b->src_pol; i < a->n_inputs; i += 2)
        fprintf(t.f, i == b->src_pol ? "%d" : ", %d", i);
    fputc(']', t.f);
    put(c, "source-indices", "string", "", "The global input indices of the sources summed in this beam",
        text_take(&t));
    put_int(c, "payload-len", "The payload size, in bytes, of the B-engine data stream packets",
            PAYLOAD_BYTES);
}

int cbf_stream_sensors_make(const cbf_product *p, cbf_stream_sensors *out, cbf_error *err)
{
    ss_ctx c = {out, NULL, 0};
    for (int i = 0; i < p->n_streams && !c.oom; i++) {
        const cbf_product_stream *st = &p->streams[i];
        c.stream = st->name;
        switch (st->kind) {
        case CBF_STREAM_ACV: acv_sensors(&c, st); break;
        case CBF_STREAM_BCP: bcp_sensors(&c, st); break;
        case CBF_STREAM_TACV: tacv_sensors(&c, st); break;
        default: break;   /* digitisers and VLBI: their engines' own sensors */
        }
    }
    if (c.oom)
        return cbf_error_set(err, CBF_ENOMEM, "stream sensors: out of memory");
    return 0;
}

cbf_stream_sensor *cbf_stream_sensors_find(cbf_stream_sensors *ss, const char *name)
{
    for (size_t i = 0; i < ss->n; i++)
        if (!strcmp(ss->s[i].name, name))
            return &ss->s[i];
    return NULL;
}

void cbf_stream_sensors_free(cbf_stream_sensors *ss)
{
    for (size_t i = 0; i < ss->n; i++) {
        free(ss->s[i].name);
        free(ss->s[i].value);
    }
    free(ss->s);
    memset(ss, 0, sizeof *ss);
}
