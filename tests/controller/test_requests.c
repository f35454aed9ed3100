/* test_requests.c: katsdpcontroller's product requests checked against
 * the suite's 4-antenna configuration (data/suite-4ant-nb-beams.json) and
 * split into engine requests (tools/controller/requests.c): which engine
 * gets which arguments, and each malformed request refused, naming its
 * argument, before any engine would be asked. The complex-number table
 * is what Python's complex() accepts and refuses (checked with CPython 3.11).
 *
 *   test_requests DATA_DIR */
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
#include "requests.h"

static const char *data_dir;
static cbf_product *prod;

static int setup(void **state)
{
    (void)state;
    cbf_error err = {0};
    if (!(prod = ct_product(data_dir, "suite-4ant-nb-beams.json", NULL, &err))) {
        fprintf(stderr, "refused: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cbf_product_free(prod);
    return 0;
}

/* Splits "name a b c" on spaces into a request and plans it. */
static int plan(const char *line, long long ts, cbf_fanout *f, cbf_error *err)
{
    static char buf[4096];
    static const char *argv[64];
    snprintf(buf, sizeof buf, "%s", line);
    int n = 0;
    char *save, *name = strtok_r(buf, " ", &save);
    for (char *t; (t = strtok_r(NULL, " ", &save));)
        argv[n++] = t;
    cbf_product_request r = {name, n, argv};
    memset(err, 0, sizeof *err);
    return cbf_product_request_plan(prod, &r, ts, f, err);
}

/* The call's arguments joined by spaces. */
static const char *joined(const cbf_engine_call *c)
{
    static char b[4096];
    b[0] = '\0';
    for (int i = 0; i < c->n_args; i++) {
        if (i)
            strcat(b, " ");
        strcat(b, c->args[i]);
    }
    return b;
}

static void refused(const char *line, const char *want)
{
    cbf_fanout f;
    cbf_error err;
    int rc = plan(line, 0, &f, &err);
    if (rc != CBF_EINVAL)
        fail_msg("'%s' not refused (rc %d)", line, rc);
    if (!strstr(err.msg, want))
        fail_msg("'%s': message '%s' lacks '%s'", line, err.msg, want);
    assert_int_equal(f.n, 0);
}

static void test_delays(void **state)
{
    (void)state;
    cbf_fanout f;
    cbf_error err;
    assert_int_equal(plan("delays antenna-channelised-voltage 1700000210.5 0,0:0,0 1e-9,0:0,0 2e-9,0:0,0 "
                          "3e-9,0:0,0 4e-9,0:0.5,0 5e-9,0:0,0 6e-9,0:0,0 7e-9,1e-12:0,0.1", 0, &f, &err), 0);
    assert_int_equal(f.n, 4);
    for (int e = 0; e < 4; e++) {
        assert_int_equal(f.calls[e].task, CBF_TASK_F);
        assert_int_equal(f.calls[e].index, e);
        assert_string_equal(f.calls[e].acv->name, "antenna-channelised-voltage");
    }
    assert_string_equal(joined(&f.calls[2]),
                        "delays antenna-channelised-voltage 1700000210.5 4e-9,0:0.5,0 5e-9,0:0,0");
    assert_string_equal(joined(&f.calls[3]),
                        "delays antenna-channelised-voltage 1700000210.5 6e-9,0:0,0 7e-9,1e-12:0,0.1");
    assert_false(f.reply_from_first);
    cbf_fanout_free(&f);

    /* A start before the sync time: the models moved to the sync time,
     * each value taken there on its own line (dt = 5 s here). */
    const double sync = cbf_product_find(prod, "antenna-channelised-voltage")->u.acv.sync_time;
    char line[1024], want[512];
    snprintf(line, sizeof line, "delays antenna-channelised-voltage %.17g 0,0:0,0 1e-9,0:0,0 2e-9,0:0,0 "
             "3e-9,0:0,0 4e-9,0:0.5,0 5e-9,0:0,0 6e-9,2e-12:1,-0.25 7e-9,1e-12:0,0.1", sync - 5);
    assert_int_equal(plan(line, 0, &f, &err), 0);
    assert_int_equal(f.n, 4);
    snprintf(want, sizeof want, "delays antenna-channelised-voltage %.0f 4e-09,0:0.5,0 5e-09,0:0,0", sync);
    assert_string_equal(joined(&f.calls[2]), want);
    snprintf(want, sizeof want, "delays antenna-channelised-voltage %.0f 6.01e-09,2e-12:-0.25,-0.25 "
             "7.005e-09,1e-12:0.5,0.1", sync);
    assert_string_equal(joined(&f.calls[3]), want);
    cbf_fanout_free(&f);
    refused("delays antenna-channelised-voltage 0 0,0:0,0", "Wrong number of coefficient sets (1, expected 8)");
    refused("delays antenna-channelised-voltage 0 0,0:0,0 0,0:0,0 0,0:0,0 0,0:0,0 0,0:0,0 0,0:0 0,0:0,0 0,0:0,0",
            "argument 8 (input m802v): Invalid coefficient-set '0,0:0'");
    refused("delays antenna-channelised-voltage 0 0,0:0,0 0,0:0,0 0,0:0,0 0,0:0,0 0,0:0,0 0,0:0,0 0,0:0,0 x,0:0,0",
            "argument 10 (input m803v)");
    refused("delays antenna-channelised-voltage soon", "argument 2: 'soon' is not a time");
    refused("delays baseline-correlation-products 0", "stream 'baseline-correlation-products' is of the wrong type");
    refused("delays nosuch 0", "argument 1: no stream named 'nosuch'");
    refused("delays dsim000h 0", "stream 'dsim000h' is of the wrong type (a sim.dig.baseband_voltage)");
}

static void test_gain(void **state)
{
    (void)state;
    cbf_fanout f;
    cbf_error err;
    assert_int_equal(plan("gain antenna-channelised-voltage m802v 0.5+0.25j", 0, &f, &err), 0);
    assert_int_equal(f.n, 1);
    assert_int_equal(f.calls[0].task, CBF_TASK_F);
    assert_int_equal(f.calls[0].index, 2);   /* input 5: the third F-engine, its pol 1 */
    assert_string_equal(joined(&f.calls[0]), "gain antenna-channelised-voltage 1 0.5+0.25j");
    assert_true(f.reply_from_first);
    cbf_fanout_free(&f);
    assert_int_equal(plan("gain antenna-channelised-voltage m800h", 0, &f, &err), 0);   /* a query */
    assert_string_equal(joined(&f.calls[0]), "gain antenna-channelised-voltage 0");
    cbf_fanout_free(&f);
    refused("gain antenna-channelised-voltage m809h 1", "argument 2: Unknown input 'm809h'");
    refused("gain antenna-channelised-voltage m800h 1 2", "Expected 0, 1, or 32768 values, received 2");
    refused("gain antenna-channelised-voltage m800h 1+2", "argument 3: '1+2' is not a complex number");
    refused("gain tied-array-channelised-voltage-0x m800h 1", "is of the wrong type");
}

static void test_gain_all(void **state)
{
    (void)state;
    cbf_fanout f;
    cbf_error err;
    assert_int_equal(plan("gain-all antenna-channelised-voltage default", 0, &f, &err), 0);
    assert_int_equal(f.n, 4);
    assert_string_equal(joined(&f.calls[1]), "gain-all antenna-channelised-voltage default");
    cbf_fanout_free(&f);
    /* A value per channel of the wideband stream (8192). */
    const char **argv = malloc(8193 * sizeof *argv);
    argv[0] = "wideband-antenna-channelised-voltage";
    for (int i = 1; i <= 8192; i++)
        argv[i] = i == 4000 ? "(0.5-1j)" : "1";
    cbf_product_request r = {"gain-all", 8193, argv};
    assert_int_equal(cbf_product_request_plan(prod, &r, 0, &f, &err), 0);
    assert_int_equal(f.n, 4);
    assert_int_equal(f.calls[3].n_args, 8194);
    assert_string_equal(f.calls[3].args[4000 + 1], "(0.5-1j)");
    cbf_fanout_free(&f);
    argv[8000] = "1+";
    assert_int_equal(cbf_product_request_plan(prod, &r, 0, &f, &err), CBF_EINVAL);
    assert_non_null(strstr(err.msg, "argument 8001: '1+' is not a complex number"));
    r.n_args = 3;
    assert_int_equal(cbf_product_request_plan(prod, &r, 0, &f, &err), CBF_EINVAL);
    assert_non_null(strstr(err.msg, "Expected 1, or 8192 values, received 2"));
    free(argv);
    refused("gain-all antenna-channelised-voltage", "Expected 1, or 32768 values, received 0");
    refused("gain-all antenna-channelised-voltage defaults", "'defaults' is not a complex number");
}

static void test_beams(void **state)
{
    (void)state;
    cbf_fanout f;
    cbf_error err;
    assert_int_equal(plan("beam-weights tied-array-channelised-voltage-1y 1 0.5 0 2", 0, &f, &err), 0);
    assert_int_equal(f.n, 1);
    assert_int_equal(f.calls[0].task, CBF_TASK_XB);
    assert_int_equal(f.calls[0].index, -1);
    assert_string_equal(f.calls[0].acv->name, "antenna-channelised-voltage");
    assert_string_equal(joined(&f.calls[0]), "beam-weights tied-array-channelised-voltage-1y 1 0.5 0 2");
    cbf_fanout_free(&f);
    assert_int_equal(plan("beam-delays tied-array-channelised-voltage-0x 1e-9:0.5 0:0 2e-9:-1 0:3.14", 0, &f, &err), 0);
    cbf_fanout_free(&f);
    assert_int_equal(plan("beam-quant-gains tied-array-channelised-voltage-0x 0.25", 0, &f, &err), 0);
    cbf_fanout_free(&f);
    refused("beam-weights tied-array-channelised-voltage-0x 1 1 1", "Expected 4 values, received 3");
    refused("beam-weights tied-array-channelised-voltage-0x 1 1 1 x", "argument 5: 'x' is not a real number");
    refused("beam-delays tied-array-channelised-voltage-0x 0:0 0:0 0,1:0 0:0", "argument 4: Invalid coefficient-set");
    refused("beam-delays tied-array-channelised-voltage-0x 0:0 0:0 0:0 0", "argument 5: Invalid coefficient-set '0'");
    refused("beam-quant-gains tied-array-channelised-voltage-0x", "Expected 1 value, received 0");
    refused("beam-weights baseline-correlation-products 1 1 1 1", "is of the wrong type");
}

static void test_capture(void **state)
{
    (void)state;
    cbf_fanout f;
    cbf_error err;
    assert_int_equal(plan("capture-start baseline-correlation-products", 123456789, &f, &err), 0);
    assert_string_equal(joined(&f.calls[0]), "capture-start baseline-correlation-products 123456789");
    assert_string_equal(f.calls[0].acv->name, "antenna-channelised-voltage");
    cbf_fanout_free(&f);
    assert_int_equal(plan("capture-start wideband-baseline-correlation-products 42", 7, &f, &err), 0);
    assert_string_equal(joined(&f.calls[0]), "capture-start wideband-baseline-correlation-products 42");
    assert_string_equal(f.calls[0].acv->name, "wideband-antenna-channelised-voltage");
    cbf_fanout_free(&f);
    assert_int_equal(plan("capture-stop tied-array-channelised-voltage-3y", 7, &f, &err), 0);
    assert_string_equal(joined(&f.calls[0]), "capture-stop tied-array-channelised-voltage-3y");
    cbf_fanout_free(&f);
    refused("capture-start antenna-channelised-voltage", "is of the wrong type");
    refused("capture-start baseline-correlation-products -5", "argument 2: '-5' is not a timestamp");
    refused("capture-stop baseline-correlation-products 5", "takes the stream alone");
}

static void test_dsim(void **state)
{
    (void)state;
    cbf_fanout f;
    cbf_error err;
    assert_int_equal(plan("dsim-signals sim.dsim002.1712000000.0 common=wgn(0.1);common;common; 65536", 0, &f,
                          &err), 0);
    assert_int_equal(f.calls[0].task, CBF_TASK_SIM);
    assert_string_equal(f.calls[0].dsim, "sim.dsim002.1712000000.0");
    assert_string_equal(joined(&f.calls[0]), "signals common=wgn(0.1);common;common; 65536");
    assert_true(f.reply_from_first);
    cbf_fanout_free(&f);
    assert_int_equal(plan("dsim-time sim.dsim000.1712000000.0", 0, &f, &err), 0);
    assert_string_equal(joined(&f.calls[0]), "time");
    cbf_fanout_free(&f);
    refused("dsim-time sim.dsim009.1712000000.0", "No dsim named sim.dsim009.1712000000.0");
    refused("dsim-time sim.dsim000.1712000000", "No dsim named");
    refused("dsim-signals sim.dsim000.1712000000.0", "takes DSIM SIGNALS [PERIOD]");
    refused("dsim-signals sim.dsim000.1712000000.0 0;0; 0", "argument 3: '0' is not a period");
}

static void test_unknown(void **state)
{
    (void)state;
    cbf_fanout f;
    cbf_error err;
    assert_int_equal(plan("product-configure x", 0, &f, &err), CBF_ENOTSUP);
}

static void test_py_complex(void **state)
{
    (void)state;
    static const struct { const char *s; double re, im; } good[] = {
        {"1", 1, 0}, {"-0.5", -0.5, 0}, {"2j", 0, 2}, {"1+2j", 1, 2}, {"(1-2.5e-3j)", 1, -2.5e-3},
        {"j", 0, 1}, {"-j", 0, -1}, {"+j", 0, 1}, {"1e3", 1000, 0}, {"  1+1j ", 1, 1}, {"( 1+1j )", 1, 1},
        {"1+j", 1, 1}, {"1-J", 1, -1}, {".5j", 0, 0.5},
    };
    static const char *bad[] = {"1 + 2j", "1+2", "abc", "", "0x10", "1j+1", "()", "(1", "1+2jj", "1e", "--1"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        double re = NAN, im = NAN;
        if (cbf_parse_py_complex(good[i].s, &re, &im) || re != good[i].re || im != good[i].im)
            fail_msg("'%s' read as %g%+gj", good[i].s, re, im);
    }
    double re, im;
    assert_int_equal(cbf_parse_py_complex("inf", &re, &im), 0);
    assert_true(isinf(re));
    assert_int_equal(cbf_parse_py_complex("infj", &re, &im), 0);
    assert_true(isinf(im));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (!cbf_parse_py_complex(bad[i], &re, &im))
            fail_msg("'%s' accepted, Python refuses it", bad[i]);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_requests DATA_DIR\n");
        return 2;
    }
    data_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delays), cmocka_unit_test(test_gain), cmocka_unit_test(test_gain_all),
        cmocka_unit_test(test_beams), cmocka_unit_test(test_capture), cmocka_unit_test(test_dsim),
        cmocka_unit_test(test_unknown), cmocka_unit_test(test_py_complex),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
