/* test_product.c: tools/controller/product.c against katsdpcontroller
 * product configurations (schema 4.x). The examples in data/ are the
 * configurations katgpucbf's qualification suite sends (4 antennas,
 * wideband + narrowband + 8 beams; the VLBI form) and one that sets every
 * optional field; each is read and every figure checked against the
 * arithmetic of docs/notes/controller-research.md. Then a table of broken
 * configurations, each made from an example by one change, each refused
 * with the JSON path of its fault.
 *
 *   test_product DATA_DIR */
#define _POSIX_C_SOURCE 200809L   /* strdup, strtok_r */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_test.h"
#include "product.h"

#define NOW CT_NOW

static const char *data_dir;

static cbf_product *parse_file(const char *name)
{
    size_t len;
    char *text = ct_slurp(data_dir, name, &len);
    cbf_product *p = NULL;
    cbf_error err = {0};
    int rc = cbf_product_parse(text, len, NOW, &p, &err);
    if (rc)
        fail_msg("%s refused: %s", name, err.msg);
    free(text);
    return p;
}

static const cbf_product_stream *get(const cbf_product *p, const char *name, cbf_stream_kind kind)
{
    const cbf_product_stream *s = cbf_product_find(p, name);
    if (!s)
        fail_msg("no stream %s", name);
    assert_int_equal(s->kind, kind);
    return s;
}

static void near(double got, double want)
{
    if (fabs(got - want) > 1e-9 * fabs(want) + 1e-12)
        fail_msg("got %.17g, want %.17g", got, want);
}

/* An integration time rounded to whole heaps, as katsdpcontroller rounds
 * it, worked out here from the channeliser's figures. */
static void check_bcp(const cbf_product_stream *b, const cbf_product_stream *acv, double asked)
{
    const cbf_product_acv *a = &acv->u.acv;
    assert_ptr_equal(b->u.bcp.acv, acv);
    double heap = (double)a->n_samples_between_spectra * a->spectra_per_heap / a->adc_sample_rate;
    int heaps = (int)lround(asked / heap);
    assert_int_equal(b->u.bcp.heaps_per_dump, heaps);
    near(b->u.bcp.int_time, heaps * heap);
    assert_int_equal(b->u.bcp.n_accs, heaps * a->spectra_per_heap);
    assert_int_equal(b->u.bcp.n_baselines, a->n_inputs * (a->n_inputs + 2) / 2);
    assert_int_equal(b->u.bcp.n_xengs, a->n_substreams);
    assert_int_equal(b->u.bcp.bits_per_sample, 32);
}

static void test_suite_example(void **state)
{
    (void)state;
    cbf_product *p = parse_file("suite-4ant-nb-beams.json");
    assert_string_equal(p->version, "4.7");
    assert_int_equal(p->n_streams, 8 + 2 + 2 + 8);
    near(p->shutdown_delay, 0.0);
    near(p->develop_data_timeout, 30.0);
    assert_int_equal(p->mirror_sensors, 0);
    assert_int_equal(p->image_overrides.n, 1);
    assert_string_equal(p->image_overrides.v[0], "katgpucbf=harbor.sdp.kat.ac.za/dpp/katgpucbf:cbf");

    const cbf_product_stream *d = get(p, "dsim001v", CBF_STREAM_DIG);
    assert_true(d->u.dig.simulated);
    assert_string_equal(d->u.dig.antenna_name, "dsim001");
    near(d->u.dig.sync_time, 1700000123.0);   /* none given: now, whole seconds */
    assert_int_equal(d->u.dig.bits_per_sample, 10);
    assert_int_equal(d->u.dig.samples_per_heap, 4096);

    /* The narrowband channeliser: 1/8 of 856 MHz about 352.74 MHz. */
    const cbf_product_stream *nb = get(p, "antenna-channelised-voltage", CBF_STREAM_ACV);
    const cbf_product_acv *a = &nb->u.acv;
    double nbc = 1712e6 * (3456789.0 / 16777216.0);
    assert_int_equal(nb->n_src, 8);
    for (int i = 0; i < 8; i++) {
        char want[16];
        snprintf(want, sizeof want, "dsim%03d%c", i / 2, "hv"[i % 2]);
        assert_string_equal(nb->src[i]->name, want);
        snprintf(want, sizeof want, "m%d%c", 800 + i / 2, "hv"[i % 2]);
        assert_string_equal(a->input_labels[i], want);
    }
    assert_int_equal(a->n_ants, 4);
    assert_string_equal(a->antennas[3], "dsim003");
    assert_int_equal(a->n_fengs, 4);
    assert_true(a->narrowband && !a->vlbi);
    assert_int_equal(a->decimation_factor, 8);
    assert_int_equal(a->n_chans, 32768);
    near(a->bandwidth, 107e6);
    near(a->pass_bandwidth, 107e6);
    near(a->center_freq, nbc);
    near(a->centre_frequency, 1284e6 + nbc - 428e6);
    assert_int_equal(a->n_samples_between_spectra, 2 * 32768 * 8);
    assert_int_equal(a->spectra_per_heap, 32);
    assert_int_equal(a->n_substreams, 4);
    assert_int_equal(a->n_chans_per_substream, 8192);
    assert_int_equal(a->taps, 16);
    near(a->w_cutoff, 1.0);
    assert_int_equal(a->window, CBF_WINDOW_HANN);
    assert_int_equal(a->dither, CBF_DITHER_DEFAULT);
    assert_int_equal(a->subsampling, 8);
    assert_int_equal(a->ddc_taps, 128);
    near(a->weight_pass, 0.005);
    near(a->ddc_group_delay, -127 / 2.0);
    near(a->pfb_group_delay, -(2.0 * 32768 * 16 - 1) / 2 * 8);
    near(a->sync_time, 1700000123.0);
    assert_string_equal(a->band, "l");

    const cbf_product_stream *wb = get(p, "wideband-antenna-channelised-voltage", CBF_STREAM_ACV);
    assert_false(wb->u.acv.narrowband);
    assert_int_equal(wb->u.acv.decimation_factor, 1);
    near(wb->u.acv.bandwidth, 856e6);
    near(wb->u.acv.center_freq, 428e6);
    near(wb->u.acv.centre_frequency, 1284e6);
    assert_int_equal(wb->u.acv.spectra_per_heap, 128);
    near(wb->u.acv.pfb_group_delay, -(2.0 * 8192 * 16 - 1) / 2);
    near(wb->u.acv.ddc_group_delay, 0.0);

    /* 0.5 s: 51 heaps of 32 narrowband spectra (9.8 ms each), 408 of 128
     * wideband ones (1.225 ms each). */
    const cbf_product_stream *b = get(p, "baseline-correlation-products", CBF_STREAM_BCP);
    check_bcp(b, nb, 0.5);
    assert_int_equal(b->u.bcp.heaps_per_dump, 51);
    assert_int_equal(b->u.bcp.n_accs, 1632);
    assert_int_equal(b->u.bcp.n_baselines, 40);
    const cbf_product_stream *wbb = get(p, "wideband-baseline-correlation-products", CBF_STREAM_BCP);
    check_bcp(wbb, wb, 0.5);
    assert_int_equal(wbb->u.bcp.n_accs, 408 * 128);

    for (int beam = 0; beam < 4; beam++)
        for (int pol = 0; pol < 2; pol++) {
            char name[64];
            snprintf(name, sizeof name, "tied-array-channelised-voltage-%d%c", beam, "xy"[pol]);
            const cbf_product_stream *t = get(p, name, CBF_STREAM_TACV);
            assert_ptr_equal(t->u.tacv.acv, nb);
            assert_int_equal(t->u.tacv.src_pol, pol);
            assert_int_equal(t->u.tacv.n_sources, 4);
            assert_int_equal(t->u.tacv.spectra_per_heap, 32);
            assert_int_equal(t->u.tacv.n_bengs, 4);
            assert_int_equal(t->u.tacv.n_chans_per_substream, 8192);
        }
    cbf_product_free(p);
}

static void test_vlbi_example(void **state)
{
    (void)state;
    cbf_product *p = parse_file("suite-4ant-vlbi.json");
    const cbf_product_stream *nb = get(p, "antenna-channelised-voltage", CBF_STREAM_ACV);
    const cbf_product_acv *a = &nb->u.acv;
    assert_true(a->narrowband && a->vlbi);
    near(a->bandwidth, 214e6);
    near(a->pass_bandwidth, 128e6);
    /* VLBI's defaults: one tap, rectangular, no sinc; twice the subsampling. */
    assert_int_equal(a->taps, 1);
    near(a->w_cutoff, 0.0);
    assert_int_equal(a->window, CBF_WINDOW_RECT);
    assert_int_equal(a->subsampling, 8);
    assert_int_equal(a->ddc_taps, 128);
    near(a->pfb_group_delay, -(32768.0 * 1 - 1) / 2 * 8);
    const cbf_product_stream *v = get(p, "tied-array-resampled-voltage", CBF_STREAM_TARV);
    assert_ptr_equal(v->u.tarv.acv, nb);
    assert_string_equal(v->src[1]->name, "tied-array-channelised-voltage-0y");
    near(v->u.tarv.bandwidth, 128e6);
    assert_int_equal(v->u.tarv.n_chans, 2);
    assert_string_equal(v->u.tarv.pols[1], "y");
    assert_string_equal(v->u.tarv.station_id, "me");
    cbf_product_free(p);
}

static void test_every_field(void **state)
{
    (void)state;
    cbf_product *p = parse_file("every-field.json");
    assert_int_equal(p->minor, 9);
    assert_true(p->develop_any_gpu && p->develop_disable_ibverbs && !p->develop_less_resources);
    near(p->develop_data_timeout, 10.0);
    assert_string_equal(p->vlbi_recorder_protocol, "udpsnor");
    assert_string_equal(p->vlbimeta_mode, "disabled");
    assert_string_equal(p->wrapper, "http://example.invalid/wrapper");
    assert_string_equal(p->image_tag, "cbf");
    near(p->shutdown_delay, 2.5);
    assert_int_equal(p->mirror_sensors, 1);
    assert_int_equal(p->n_service_overrides, 1);
    near(p->clock_ratio, 0.5);
    near(p->start_time, 1700000000.0);

    const cbf_product_stream *in = get(p, "m000v", CBF_STREAM_DIG);
    assert_true(in->is_input && !in->u.dig.simulated);
    assert_int_equal(in->u.dig.group, 239u << 24 | 10u << 16 | 8u);
    assert_int_equal(in->u.dig.n_groups, 8);
    assert_int_equal(in->u.dig.port, 7148);
    assert_int_equal(in->index, 1);   /* inputs first, in the document's order */

    const cbf_product_stream *s = get(p, "sim001h", CBF_STREAM_DIG);
    assert_string_equal(s->u.dig.antenna_name, "sim001");
    assert_int_equal(s->u.dig.bits_per_sample, 8);
    assert_int_equal(s->u.dig.samples_per_heap, 8192);
    assert_int_equal(s->u.dig.command_line_extra.n, 1);
    assert_string_equal(s->u.dig.command_line_extra.v[0], "--ttl=2");
    near(s->u.dig.sync_time, 1700000000.0);

    const cbf_product_stream *c = get(p, "acv", CBF_STREAM_ACV);
    assert_int_equal(c->u.acv.n_ants, 2);
    assert_string_equal(c->u.acv.antennas[1], "sim001");
    assert_string_equal(c->u.acv.input_labels[2], "s001h");
    near(c->u.acv.w_cutoff, 0.9);
    assert_int_equal(c->u.acv.window, CBF_WINDOW_RECT);
    assert_int_equal(c->u.acv.taps, 8);
    assert_int_equal(c->u.acv.dither, CBF_DITHER_NONE);
    assert_int_equal(c->u.acv.n_chans_per_substream, 1024);
    near(c->u.acv.bandwidth, 544e6);
    check_bcp(get(p, "bcp", CBF_STREAM_BCP), c, 0.25);
    assert_int_equal(get(p, "beam-0x", CBF_STREAM_TACV)->u.tacv.dither, CBF_DITHER_UNIFORM);
    cbf_product_free(p);
}

/* ---- refusals ---- */

typedef struct bad_case {
    const char *base;          /* a data file, or NULL: text is the whole document */
    const char *edits[3][2];   /* path, value (NULL: delete) */
    const char *text;
    const char *path;          /* the message starts "PATH: " */
    const char *says;          /* and contains this */
} bad_case;

#define SUITE "suite-4ant-nb-beams.json"
#define VLBI "suite-4ant-vlbi.json"
#define ACV "outputs/antenna-channelised-voltage"
#define ACVP "outputs.antenna-channelised-voltage"

static const bad_case bad[] = {
    {SUITE, {{"version", "\"3.5\""}}, NULL, "version", "cbf takes 4.0 to 4.9"},
    {SUITE, {{"version", NULL}}, NULL, "version", "missing"},
    {SUITE, {{"version", "4.7"}}, NULL, "version", "expected a string"},
    {SUITE, {{"version", "\"4.10\""}}, NULL, "version", "not accepted"},
    {SUITE, {{"outptus", "{}"}}, NULL, "outptus", "did you mean 'outputs'"},
    {SUITE, {{"outputs", NULL}}, NULL, "outputs", "missing"},
    {SUITE, {{"outputs", "[]"}}, NULL, "outputs", "expected an object"},
    {SUITE, {{ACV "/src_streams/2", "\"dig_m803h\""}}, NULL, ACVP ".src_streams[2]",
     "no output named \"dig_m803h\""},
    {SUITE, {{ACV "/src_streams/2", "\"dsim01h\""}}, NULL, ACVP ".src_streams[2]", "did you mean 'dsim001h'"},
    {SUITE, {{ACV "/src_streams/0", "7"}}, NULL, ACVP ".src_streams[0]", "expected a string"},
    {SUITE, {{ACV "/src_streams/0", "\"a.b\""}}, NULL, ACVP ".src_streams[0]", "not a stream name"},
    {SUITE, {{"outputs/dsim000h/type", "\"sim.dig.baseband_voltag\""}}, NULL, "outputs.dsim000h.type",
     "did you mean 'sim.dig.baseband_voltage'"},
    {SUITE, {{"outputs/dsim000h/type", "\"sdp.vis\""}}, NULL, "outputs.dsim000h.type", "cbf does not run it"},
    {SUITE, {{"outputs/dsim000h/type", "\"dig.baseband_voltage\""}}, NULL, "outputs.dsim000h.type",
     "an input type"},
    {SUITE, {{"outputs/dsim000h/type", NULL}}, NULL, "outputs.dsim000h.type", "missing"},
    {SUITE, {{"outputs/dsim000h/src_streams", "[\"dsim000v\"]"}}, NULL, "outputs.dsim000h.src_streams",
     "has no such field"},
    {SUITE, {{"outputs/dsim000h/antenna", "\", 0:0:0\""}}, NULL, "outputs.dsim000h.antenna", "no antenna name"},
    {SUITE, {{"outputs/dsim000h/adc_sample_rate", "-1712e6"}}, NULL, "outputs.dsim000h.adc_sample_rate",
     "greater than 0"},
    {SUITE, {{"outputs/dsim000h/samples_per_heap", "4096"}}, NULL, "outputs.dsim000h.samples_per_heap",
     "not in schema version 4.7"},
    {SUITE, {{"version", "\"4.9\""}, {"outputs/dsim000h/samples_per_heap", "4000"}}, NULL,
     "outputs.dsim000h.samples_per_heap", "not a power of two"},
    {SUITE, {{"outputs/bad name", "{\"type\": \"sim.dig.baseband_voltage\"}"}}, NULL, "outputs[\"bad name\"]",
     "not a stream name"},
    {SUITE, {{ACV "/n_chans", "\"32768\""}}, NULL, ACVP ".n_chans", "expected an integer, got a string"},
    {SUITE, {{ACV "/n_chans", "32768.5"}}, NULL, ACVP ".n_chans", "expected an integer"},
    {SUITE, {{ACV "/n_chans", "30000"}}, NULL, ACVP ".n_chans", "not a power of two"},
    {SUITE, {{ACV "/n_chans", "0"}}, NULL, ACVP ".n_chans", "out of range"},
    {SUITE, {{ACV "/n_chans", "2"}}, NULL, ACVP ".n_chans", "do not split over the 4 X/B-engines"},
    {SUITE, {{ACV "/n_chans", NULL}}, NULL, ACVP ".n_chans", "missing"},
    {SUITE, {{ACV "/nchans", "8"}}, NULL, ACVP ".nchans", "did you mean 'n_chans'"},
    {SUITE, {{ACV "/input_labels/3", "\"m800v\""}}, NULL, ACVP ".input_labels[3]", "repeats input_labels[1]"},
    {SUITE, {{ACV "/input_labels", NULL}, {ACV "/src_streams/3", "\"dsim000h\""}}, NULL, ACVP ".src_streams[3]",
     "repeats src_streams[0]"},
    {SUITE, {{ACV "/input_labels/7", NULL}}, NULL, ACVP ".input_labels", "7 labels for 8 src_streams"},
    {SUITE, {{ACV "/input_labels/7", NULL}, {ACV "/src_streams/7", NULL}}, NULL, ACVP ".src_streams",
     "not an even number"},
    {SUITE, {{ACV "/src_streams", "[\"dsim000h\"]"}, {ACV "/input_labels", NULL}}, NULL, ACVP ".src_streams",
     "at least 2"},
    {SUITE, {{"outputs/dsim001h/adc_sample_rate", "1750e6"}}, NULL, ACVP ".src_streams[2]",
     "adc_sample_rate of \"dsim001h\" is 1750000000"},
    {SUITE, {{"outputs/dsim001v/band", "\"u\""}}, NULL, ACVP ".src_streams[3]", "band of \"dsim001v\""},
    {SUITE, {{"outputs/dsim001v/sync_time", "1.5"}}, NULL, ACVP ".src_streams[3]", "sync_time"},
    {SUITE, {{ACV "/narrowband/centre_frequency", "10e6"}}, NULL, ACVP ".narrowband.centre_frequency",
     "outside 53500000 to 802500000 Hz"},
    {SUITE, {{ACV "/narrowband/decimation_factor", NULL}}, NULL, ACVP ".narrowband.decimation_factor", "missing"},
    {SUITE, {{ACV "/narrowband/decimation_factor", "0"}}, NULL, ACVP ".narrowband.decimation_factor",
     "out of range"},
    {SUITE, {{ACV "/window_function", "\"hamming\""}}, NULL, ACVP ".window_function",
     "\"hamming\" is not one of \"hann\", \"rect\""},
    {SUITE, {{"version", "\"4.3\""}, {"config/mirror_sensors", NULL}, {ACV "/window_function", "\"rect\""}}, NULL,
     ACVP ".window_function", "not in schema version 4.3"},
    {SUITE, {{"version", "\"4.5\""}}, NULL, "config.mirror_sensors", "from 4.6 on"},
    {SUITE, {{"config/develop", "\"yes\""}}, NULL, "config.develop", "expected true, false or an object"},
    {SUITE, {{"config/develop/data_timeout", "-1"}}, NULL, "config.develop.data_timeout", "0 or more"},
    {SUITE, {{"config/image_overrides/katgpucbf", "1"}}, NULL, "config.image_overrides.katgpucbf",
     "expected a string"},
    {SUITE, {{"outputs/baseline-correlation-products/int_time", NULL}}, NULL,
     "outputs.baseline-correlation-products.int_time", "missing"},
    {SUITE, {{"outputs/baseline-correlation-products/int_time", "true"}}, NULL,
     "outputs.baseline-correlation-products.int_time", "expected a number, got a boolean"},
    {SUITE, {{"outputs/baseline-correlation-products/int_time", "0"}}, NULL,
     "outputs.baseline-correlation-products.int_time", "greater than 0"},
    {SUITE, {{"outputs/baseline-correlation-products/src_streams/1", "\"wideband-antenna-channelised-voltage\""}},
     NULL, "outputs.baseline-correlation-products.src_streams", "exactly 1"},
    {SUITE, {{"outputs/tied-array-channelised-voltage-0x/src_pol", "2"}}, NULL,
     "outputs.tied-array-channelised-voltage-0x.src_pol", "out of range 0 to 1"},
    {SUITE, {{"outputs/tied-array-channelised-voltage-0x/src_streams/0", "\"dsim000h\""}}, NULL,
     "outputs.tied-array-channelised-voltage-0x.src_streams[0]",
     "\"dsim000h\" is a sim.dig.baseband_voltage; a gpucbf.tied_array_channelised_voltage takes"},
    {SUITE, {{"inputs/dsim000h", "{\"type\": \"dig.baseband_voltage\", \"url\": \"spead://239.1.0.0+7:7148\", "
                                 "\"sync_time\": 1, \"adc_sample_rate\": 1712e6, \"centre_frequency\": 1284e6, "
                                 "\"band\": \"l\", \"antenna\": \"m000\"}"}},
     NULL, "outputs.dsim000h", "also the name of an input"},
    {SUITE, {{"inputs/m000h", "{\"type\": \"dig.baseband_voltage\", \"url\": \"http://x:1\", \"sync_time\": 1, "
                              "\"adc_sample_rate\": 1712e6, \"centre_frequency\": 1284e6, \"band\": \"l\", "
                              "\"antenna\": \"m000\"}"}},
     NULL, "inputs.m000h.url", "not a spead:// url"},
    {SUITE, {{"inputs/m000h", "{\"type\": \"dig.baseband_voltage\", \"adc_sample_rate\": 1712e6}"}}, NULL,
     "inputs.m000h.url", "missing"},
    {SUITE, {{"inputs/cam", "{\"type\": \"cam.http\", \"url\": \"http://x\"}"}}, NULL, "inputs.cam.type",
     "cbf does not run it"},
    {VLBI, {{ACV "/narrowband/vlbi/pass_bandwidth", "300e6"}}, NULL, ACVP ".narrowband.vlbi.pass_bandwidth",
     "less than the output bandwidth"},
    {VLBI, {{"version", "\"4.4\""}, {"config/mirror_sensors", NULL}, {"outputs/tied-array-resampled-voltage", NULL}},
     NULL, ACVP ".narrowband.vlbi", "not in schema version 4.4"},
    {VLBI, {{ACV "/narrowband/vlbi/pass_bandwidth", "100e6"}}, NULL, "outputs.tied-array-resampled-voltage.src_streams",
     "must be 107/64"},
    {VLBI, {{"outputs/tied-array-resampled-voltage/n_chans", "4"}}, NULL,
     "outputs.tied-array-resampled-voltage.n_chans", "makes 2 channels"},
    {VLBI, {{"outputs/tied-array-resampled-voltage/pols", "[\"y\", \"x\"]"}}, NULL,
     "outputs.tied-array-resampled-voltage.pols", "expected [\"x\", \"y\"]"},
    {VLBI, {{"outputs/tied-array-resampled-voltage/station_id", "\"m\""}}, NULL,
     "outputs.tied-array-resampled-voltage.station_id", "not two printable characters"},
    {VLBI, {{ACV "/narrowband/vlbi", NULL}}, NULL, "outputs.tied-array-resampled-voltage.src_streams",
     "has no narrowband.vlbi"},
    {VLBI, {{"version", "\"4.6\""}, {"config/mirror_sensors", NULL}}, NULL,
     "outputs.tied-array-resampled-voltage.type", "not in schema version 4.6"},
    {NULL, {{0}}, "{\"version\": \"4.7\", \"outputs\": {", "line 1 column 31", "not valid JSON"},
    {NULL, {{0}}, "{\"version\": \"4.7\", \"version\": \"4.7\", \"outputs\": {}}", "line 1 column 28", "duplicate object key"},
    {NULL, {{0}}, "[]", "the configuration", "expected a JSON object, got an array"},
};

static void test_refusals(void **state)
{
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const bad_case *k = &bad[i];
        char *text;
        size_t len;
        if (k->base) {
            char *raw = ct_slurp(data_dir, k->base, &len);
            json_error_t je;
            json_t *root = json_loads(raw, 0, &je);
            assert_non_null(root);
            free(raw);
            for (int e = 0; e < 3 && k->edits[e][0]; e++)
                ct_mutate(root, k->edits[e][0], k->edits[e][1]);
            text = json_dumps(root, 0);
            json_decref(root);
        } else {
            text = strdup(k->text);
        }
        len = strlen(text);
        cbf_product *p = NULL;
        cbf_error err = {0};
        int rc = cbf_product_parse(text, len, NOW, &p, &err);
        char want[512];
        snprintf(want, sizeof want, "%s: ", k->path);
        if (rc != CBF_ECONFIG || p) {
            printf("case %zu (%s): accepted (rc %d), want a refusal at %s\n", i, k->edits[0][0] ? k->edits[0][0] : "",
                   rc, k->path);
            failures++;
        } else if (strncmp(err.msg, want, strlen(want)) || !strstr(err.msg, k->says)) {
            printf("case %zu: got   \"%s\"\n         want  \"%s...%s...\"\n", i, err.msg, want, k->says);
            failures++;
        } else {
            printf("case %zu: %s\n", i, err.msg);
        }
        cbf_product_free(p);
        free(text);
    }
    printf("%d of %zu malformed configurations not refused as expected\n", failures, sizeof bad / sizeof bad[0]);
    assert_int_equal(failures, 0);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_product DATA_DIR\n");
        return 2;
    }
    data_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_suite_example),
        cmocka_unit_test(test_vlbi_example),
        cmocka_unit_test(test_every_field),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
