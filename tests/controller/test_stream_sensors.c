/* test_stream_sensors.c: the stream sensors a product controller shows
 * (tools/controller/stream_sensors.c) for the configuration katgpucbf's
 * qualification suite sends (data/suite-4ant-nb-beams.json: a narrowband
 * channeliser of 32768 channels at 1/8, a wideband one of 8192, their
 * correlators, 8 beams), each value worked out here by hand from
 * katsdpcontroller's generator (docs/notes/controller-research.md 2.3), and
 * the baseline ordering built the way the generator builds it (placing each
 * pair at its index) rather than in order as the code under test does.
 *
 *   test_stream_sensors DATA_DIR */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cbf/control.h"
#include "ctl_test.h"
#include "stream_sensors.h"

static const char *data_dir;
static cbf_product *prod;
static cbf_stream_sensors sens;

static int setup(void **state)
{
    (void)state;
    cbf_error err = {0};
    if (!(prod = ct_product(data_dir, "suite-4ant-nb-beams.json", NULL, &err))) {
        fprintf(stderr, "refused: %s\n", err.msg);
        return -1;
    }
    if (cbf_stream_sensors_make(prod, &sens, &err)) {
        fprintf(stderr, "sensors: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cbf_stream_sensors_free(&sens);
    cbf_product_free(prod);
    return 0;
}

static const cbf_stream_sensor *get(const char *name, const char *type)
{
    const cbf_stream_sensor *s = cbf_stream_sensors_find(&sens, name);
    if (!s)
        fail_msg("no sensor %s", name);
    if (strcmp(s->type, type))
        fail_msg("%s is a %s, not a %s", name, s->type, type);
    return s;
}

static void want_int(const char *name, long long v)
{
    const cbf_stream_sensor *s = get(name, "integer");
    if (strtoll(s->value, NULL, 10) != v)
        fail_msg("%s = %s, want %lld", name, s->value, v);
}

/* Floats must read back exactly: the suite does arithmetic with them. */
static void want_float(const char *name, double v)
{
    const cbf_stream_sensor *s = get(name, "float");
    if (strtod(s->value, NULL) != v)
        fail_msg("%s = %s, want %.17g", name, s->value, v);
}

static void want_text(const char *name, const char *v)
{
    const cbf_stream_sensor *s = get(name, "string");
    if (strcmp(s->value, v))
        fail_msg("%s = %.200s, want %.200s", name, s->value, v);
}

static void test_narrowband_channeliser(void **state)
{
    (void)state;
    const char *acv = "antenna-channelised-voltage";
    char n[128];
#define S(x) (snprintf(n, sizeof n, "%s.%s", acv, x), n)
    want_int(S("adc-bits"), 10);
    want_float(S("adc-sample-rate"), 1712e6);
    want_float(S("bandwidth"), 1712e6 / 2 / 8);
    want_float(S("pass-bandwidth"), 1712e6 / 2 / 8);
    want_int(S("decimation-factor"), 8);
    want_float(S("scale-factor-timestamp"), 1712e6);
    want_float(S("sync-time"), 1700000123.0);   /* CT_NOW in whole seconds */
    want_int(S("n-ants"), 4);
    want_int(S("n-inputs"), 8);
    want_int(S("n-fengs"), 4);
    want_int(S("feng-out-bits-per-sample"), 8);
    want_int(S("n-chans"), 32768);
    want_int(S("n-chans-per-substream"), 32768 / 4);
    want_int(S("n-samples-between-spectra"), 2 * 32768 * 8);
    want_int(S("spectra-per-heap"), (1 << 20) / 32768);
    /* PFB over 2 x 32768 internal channels, 16 taps, at 8x subsampling;
     * DDC of 16 x 8 taps. */
    want_float(S("pfb-group-delay"), -(65536.0 * 16 - 1) / 2 * 8);
    want_float(S("ddc-group-delay"), -(128.0 - 1) / 2);
    want_float(S("filter-group-delay"), -(65536.0 * 16 - 1) / 2 * 8 - 63.5);
    want_float(S("center-freq"), 352741644.85931396);
    want_int(S("payload-len"), 8192);
    want_int(S("pfb-taps"), 16);
    want_int(S("ddc-taps"), 128);
    want_float(S("w-cutoff"), 1.0);
    want_float(S("weight-pass"), 0.005);
    want_text(S("input-data-suspect"), "00000000");
    want_text(S("input-labels"), "['m800h', 'm800v', 'm801h', 'm801v', 'm802h', 'm802v', 'm803h', 'm803v']");
    const cbf_stream_sensor *w = get(S("window-function"), "discrete");
    assert_string_equal(w->value, "hann");
    assert_string_equal(w->values, "hann,rect");
#undef S
}

static void test_wideband_channeliser(void **state)
{
    (void)state;
    want_float("wideband-antenna-channelised-voltage.bandwidth", 856e6);
    want_float("wideband-antenna-channelised-voltage.center-freq", 428e6);
    want_int("wideband-antenna-channelised-voltage.n-samples-between-spectra", 16384);
    want_int("wideband-antenna-channelised-voltage.spectra-per-heap", 128);
    want_float("wideband-antenna-channelised-voltage.pfb-group-delay", -(2 * 8192.0 * 16 - 1) / 2);
    want_float("wideband-antenna-channelised-voltage.ddc-group-delay", 0.0);
    want_float("wideband-antenna-channelised-voltage.filter-group-delay", -(2 * 8192.0 * 16 - 1) / 2);
    want_int("wideband-antenna-channelised-voltage.ddc-taps", 0);
    want_float("wideband-antenna-channelised-voltage.weight-pass", 0.0);
}

static void test_correlator(void **state)
{
    (void)state;
    /* A heap is 524288 x 32 samples; 0.5 s is 51.02 heaps, rounded to 51. */
    double heap = 524288.0 * 32 / 1712e6;
    want_float("baseline-correlation-products.int-time", 51 * heap);
    want_int("baseline-correlation-products.n-accs", 51 * 32);
    want_int("baseline-correlation-products.n-xengs", 4);
    want_int("baseline-correlation-products.n-bls", 40);
    want_int("baseline-correlation-products.xeng-out-bits-per-sample", 32);
    want_int("baseline-correlation-products.n-chans-per-substream", 8192);
    want_float("baseline-correlation-products.bandwidth", 107e6);
    want_float("baseline-correlation-products.sync-time", 1700000123.0);   /* CT_NOW in whole seconds */
    const cbf_stream_sensor *m = get("baseline-correlation-products.channel-data-suspect", "string");
    assert_int_equal(strlen(m->value), 32768);
    assert_int_equal(strspn(m->value, "0"), 32768);
    /* The generator's way: each pair placed at its index. */
    const char *lab[8] = {"m800h", "m800v", "m801h", "m801v", "m802h", "m802v", "m803h", "m803v"};
    char *slot[40] = {0};
    for (int a2 = 0; a2 < 4; a2++)
        for (int a1 = 0; a1 <= a2; a1++)
            for (int p1 = 0; p1 < 2; p1++)
                for (int p2 = 0; p2 < 2; p2++) {
                    int idx = (a2 * (a2 + 1) / 2 + a1) * 4 + p1 + p2 * 2;
                    assert_null(slot[idx]);
                    assert_true(asprintf(&slot[idx], "('%s', '%s')", lab[2 * a1 + p1], lab[2 * a2 + p2]) > 0);
                }
    char want[4096] = "[";
    for (int i = 0; i < 40; i++) {
        assert_non_null(slot[i]);
        if (i)
            strcat(want, ", ");
        strcat(want, slot[i]);
        free(slot[i]);
    }
    strcat(want, "]");
    want_text("baseline-correlation-products.bls-ordering", want);
    want_int("wideband-baseline-correlation-products.n-accs",
             (long long)round(0.5 / (16384.0 * 128 / 1712e6)) * 128);
}

static void test_beams(void **state)
{
    (void)state;
    for (int b = 0; b < 4; b++)
        for (int pol = 0; pol < 2; pol++) {
            char n[128];
            snprintf(n, sizeof n, "tied-array-channelised-voltage-%d%c.source-indices", b, "xy"[pol]);
            want_text(n, pol ? "[1, 3, 5, 7]" : "[0, 2, 4, 6]");
            snprintf(n, sizeof n, "tied-array-channelised-voltage-%d%c.n-bengs", b, "xy"[pol]);
            want_int(n, 4);
            snprintf(n, sizeof n, "tied-array-channelised-voltage-%d%c.spectra-per-heap", b, "xy"[pol]);
            want_int(n, 32);
            snprintf(n, sizeof n, "tied-array-channelised-voltage-%d%c.beng-out-bits-per-sample", b, "xy"[pol]);
            want_int(n, 8);
        }
    /* No sensor twice: a katcp server keeps one value per name. */
    for (size_t i = 0; i < sens.n; i++)
        for (size_t j = i + 1; j < sens.n; j++)
            if (!strcmp(sens.s[i].name, sens.s[j].name))
                fail_msg("%s twice", sens.s[i].name);
}

static void test_float_text(void **state)
{
    (void)state;
    char b[40];
    cbf_format_repr(0.5, b, sizeof b);
    assert_string_equal(b, "0.5");
    cbf_format_repr(1712e6, b, sizeof b);
    assert_string_equal(b, "1712000000.0");
    cbf_format_repr(0.1, b, sizeof b);
    assert_string_equal(b, "0.1");
    cbf_format_repr(-4194363.5, b, sizeof b);
    assert_string_equal(b, "-4194363.5");
    cbf_format_repr(1e-7, b, sizeof b);
    assert_string_equal(b, "1e-07");
    cbf_format_repr(1e16, b, sizeof b);
    assert_string_equal(b, "1e+16");
    cbf_format_repr(123456.789e3, b, sizeof b);
    assert_string_equal(b, "123456789.0");
    cbf_format_repr(0.0001, b, sizeof b);
    assert_string_equal(b, "0.0001");
    double third = 1.0 / 3;
    cbf_format_repr(third, b, sizeof b);
    assert_true(strtod(b, NULL) == third);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_stream_sensors DATA_DIR\n");
        return 2;
    }
    data_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_narrowband_channeliser), cmocka_unit_test(test_wideband_channeliser),
        cmocka_unit_test(test_correlator), cmocka_unit_test(test_beams), cmocka_unit_test(test_float_text),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
