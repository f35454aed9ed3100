/* Parameter validation through the loader: every type, its range, its
 * default, RECORDS fields, the text form and the YAML place of each value. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "loader_util.h"

#define E(...) __VA_ARGS__, NULL
#define HEAD "nodes:\n  p:\n    plugin: tparams\n    params:\n      req: 1\n"

static cbf_graph *load_ok(const char *yaml)
{
    cbf_graph *g = NULL;
    cbf_error err = {0};
    if (tu_load(yaml, NULL, 0, &g, &err))
        fail_msg("%s\nfor:\n%s", err.msg, yaml);
    return g;
}

static const char *text_of(const cbf_params *p, const char *name)
{
    for (size_t i = 0; i < cbf_params_count(p); i++)
        if (!strcmp(cbf_params_name_at(p, i), name))
            return cbf_params_text_at(p, i);
    return NULL;
}

static void defaults(void **state)
{
    (void)state;
    cbf_graph *g = load_ok(HEAD);
    const cbf_params *p = g->nodes[0].params;
    assert_int_equal(cbf_params_count(p), 12);
    assert_int_equal(cbf_params_int(p, "n"), 16);
    assert_int_equal(cbf_params_int(p, "big"), 1048576);
    assert_true(cbf_params_float(p, "rate") == 1712e6);
    assert_false(cbf_params_bool(p, "on"));
    assert_string_equal(cbf_params_string(p, "label"), "hello");
    assert_string_equal(cbf_params_string(p, "empty"), "");
    assert_string_equal(cbf_params_string(p, "window"), "hann");
    assert_int_equal(cbf_params_len(p, "taps"), 3);
    assert_int_equal(cbf_params_int_at(p, "taps", 2), 3);
    assert_int_equal(cbf_params_len(p, "gains"), 0);
    assert_int_equal(cbf_params_len(p, "tones"), 0);
    assert_int_equal(cbf_params_int(p, "req"), 1);
    assert_false(cbf_params_given(p, "n"));
    assert_true(cbf_params_given(p, "req"));
    /* a default's place is the node's; a given value's is its own */
    char where[600];
    snprintf(where, sizeof where, "%s/p.yaml:2:3", tu_tmpdir());
    assert_string_equal(cbf_params_where(p, "n"), where);
    snprintf(where, sizeof where, "%s/p.yaml:5:12", tu_tmpdir());
    assert_string_equal(cbf_params_where(p, "req"), where);
    assert_string_equal(text_of(p, "n"), "16");
    assert_string_equal(text_of(p, "rate"), "1712000000");
    assert_string_equal(text_of(p, "taps"), "[1, 2, 3]");
    assert_string_equal(text_of(p, "gains"), "[]");
    assert_string_equal(text_of(p, "empty"), "\"\"");
    /* undeclared names are a plugin bug: zero values, never a crash */
    assert_int_equal(cbf_params_int(p, "nope"), 0);
    assert_null(cbf_params_string(p, "nope"));
    assert_non_null(cbf_params_where(p, "nope"));
    cbf_graph_free(g);
}

static void given_values(void **state)
{
    (void)state;
    cbf_graph *g = load_ok(HEAD "      n: 2**10\n      big: 1712e6\n      rate: 2**20\n      on: true\n"
                                "      label: 'a: b'\n      window: rect\n      taps: [-8, 7, 0x7]\n"
                                "      gains: [0.5, 10, 3]\n      empty: x\n"
                                "      tones:\n        - {frequency: 1.5e6, amplitude: 0.25}\n"
                                "        - {amplitude: 1, frequency: -2, phase: 0}\n");
    const cbf_params *p = g->nodes[0].params;
    assert_int_equal(cbf_params_int(p, "n"), 1024);
    assert_int_equal(cbf_params_int(p, "big"), 1712000000);
    assert_true(cbf_params_float(p, "rate") == 1048576.0);
    assert_true(cbf_params_bool(p, "on"));
    assert_string_equal(cbf_params_string(p, "label"), "a: b");
    assert_string_equal(text_of(p, "label"), "\"a: b\"");
    assert_string_equal(cbf_params_string(p, "window"), "rect");
    assert_int_equal(cbf_params_len(p, "taps"), 3);
    assert_int_equal(cbf_params_int_at(p, "taps", 0), -8);
    assert_int_equal(cbf_params_int_at(p, "taps", 2), 7);
    assert_int_equal(cbf_params_int_at(p, "taps", 3), 0);
    assert_true(cbf_params_float_at(p, "gains", 1) == 10.0);
    assert_int_equal(cbf_params_len(p, "tones"), 2);
    assert_true(cbf_params_field(p, "tones", 0, "frequency") == 1.5e6);
    assert_true(cbf_params_field(p, "tones", 0, "amplitude") == 0.25);
    assert_true(cbf_params_field(p, "tones", 0, "phase") == 0.5);   /* field default */
    assert_true(cbf_params_field(p, "tones", 1, "frequency") == -2.0);
    assert_true(cbf_params_field(p, "tones", 1, "phase") == 0.0);
    assert_string_equal(text_of(p, "tones"),
                        "[{frequency: 1500000, amplitude: 0.25, phase: 0.5}, {frequency: -2, amplitude: 1, phase: 0}]");
    assert_string_equal(text_of(p, "gains"), "[0.5, 10, 3]");
    assert_true(cbf_params_given(p, "tones"));
    cbf_graph_free(g);
}

static void integers(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int64_t want;
    } ok[] = {
        {"1048576", 1048576}, {"1_048_576", 1048576}, {"2**20", 1048576}, {"1e6", 1000000},
        {"1.5e3", 1500}, {"0x100000", 1048576}, {"-4", -4}, {"+7", 7}, {"1.000", 1},
        {"9223372036854775807", INT64_MAX}, {"-9223372036854775808", INT64_MIN}, {"2**62", INT64_C(1) << 62},
        {"12.5e1", 125}, {"0e99999", 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml, HEAD "      big: %s\n", ok[i].text);
        cbf_graph *g = load_ok(yaml);
        if (cbf_params_int(g->nodes[0].params, "big") != ok[i].want)
            fail_msg("'%s' read as %lld", ok[i].text, (long long)cbf_params_int(g->nodes[0].params, "big"));
        cbf_graph_free(g);
    }
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"1.5", "not a whole number"}, {"1e-3", "not a whole number"},
        {"9223372036854775808", "too large"}, {"2**63", "too large"}, {"1e19", "too large"},
        {"'16'", "quoted string"}, {"abc", "expected an integer"}, {"1e", "expected an integer"},
        {"0x", "expected an integer"}, {"[1]", "got a list"}, {"", "got nothing"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml, HEAD "      big: %s\n", bad[i].text);
        /* libyaml places an empty value just after the space that follows its key */
        tu_expect_error(yaml, NULL, 0, CBF_ECONFIG, 6, bad[i].text[0] ? 12 : 11,
                        E("node 'p'", "parameter 'big'", bad[i].why));
    }
}

static void ranges_and_types(void **state)
{
    (void)state;
    tu_expect_error(HEAD "      n: 0\n", NULL, 0, CBF_ECONFIG, 6, 10, E("parameter 'n'", "out of range [1, 1024]"));
    tu_expect_error(HEAD "      n: 1025\n", NULL, 0, CBF_ECONFIG, 6, 10, E("parameter 'n'", "1025"));
    tu_expect_error(HEAD "      rate: -1\n", NULL, 0, CBF_ECONFIG, 6, 13, E("parameter 'rate'", "[0, 10000000000]"));
    tu_expect_error(HEAD "      rate: .nan\n", NULL, 0, CBF_ECONFIG, 6, 13, E("parameter 'rate'", "out of range"));
    tu_expect_error(HEAD "      rate: 1e400\n", NULL, 0, CBF_ECONFIG, 6, 13, E("parameter 'rate'", "too large"));
    tu_expect_error(HEAD "      rate: fast\n", NULL, 0, CBF_ECONFIG, 6, 13, E("expected a number"));
    /* Integers meet their range as integers: as doubles both equal 9.2e18. */
    tu_expect_error(HEAD "      at: 9200000000000000001\n", NULL, 0, CBF_ECONFIG, 6, 11,
                    E("parameter 'at'", "9200000000000000001 is out of range"));
    cbf_graph_free(load_ok(HEAD "      at: 9200000000000000000\n"));
    tu_expect_error(HEAD "      on: yes\n", NULL, 0, CBF_ECONFIG, 6, 11, E("parameter 'on'", "true or false"));
    tu_expect_error(HEAD "      label: {a: 1}\n", NULL, 0, CBF_ECONFIG, 6, 14, E("parameter 'label'", "a mapping"));
    tu_expect_error(HEAD "      window: han\n", NULL, 0, CBF_ECONFIG, 6, 15,
                    E("parameter 'window'", "hann|hamming|rect", "did you mean 'hann'"));
    /* list items are placed at the item itself */
    tu_expect_error(HEAD "      taps: [1, 2, 9]\n", NULL, 0, CBF_ECONFIG, 6, 20,
                    E("parameter 'taps'", "item [2]", "out of range [-8, 7]"));
    tu_expect_error(HEAD "      taps: [1, 2.5]\n", NULL, 0, CBF_ECONFIG, 6, 17, E("item [1]", "whole number"));
    tu_expect_error(HEAD "      gains: 3\n", NULL, 0, CBF_ECONFIG, 6, 14, E("parameter 'gains'", "expected a list"));
    tu_expect_error(HEAD "      gains: [1, x]\n", NULL, 0, CBF_ECONFIG, 6, 18, E("item [1]", "expected a number"));
}

static void records(void **state)
{
    (void)state;
    tu_expect_error(HEAD "      tones: [{frequency: 1}]\n", NULL, 0, CBF_ECONFIG, 6, 15,
                    E("parameter 'tones'", "item [0]", "field 'amplitude' is required"));
    tu_expect_error(HEAD "      tones: [{frequency: 1, amplitude: 1}, {frequncy: 1, amplitude: 2}]\n", NULL, 0,
                    CBF_ECONFIG, 6, 46, E("item [1]", "unknown field 'frequncy'", "did you mean 'frequency'"));
    tu_expect_error(HEAD "      tones: [{frequency: x, amplitude: 1}]\n", NULL, 0, CBF_ECONFIG, 6, 27,
                    E("item [0] field 'frequency'", "expected a number"));
    tu_expect_error(HEAD "      tones: [3]\n", NULL, 0, CBF_ECONFIG, 6, 15, E("item [0]", "expected a record"));
    tu_expect_error(HEAD "      tones: [{frequency: 1, amplitude: 1, frequency: 2}]\n", NULL, 0, CBF_ECONFIG,
                    6, 44, E("field 'frequency' is given twice"));
}

static void list_override(void **state)
{
    (void)state;
    const char *ov[] = {"p.taps=[4, -4]", "p.tones=[{frequency: 3, amplitude: 4}]", "p.n=2**3"};
    cbf_graph *g = NULL;
    cbf_error err = {0};
    if (tu_load(HEAD, ov, 3, &g, &err))
        fail_msg("%s", err.msg);
    const cbf_params *p = g->nodes[0].params;
    assert_int_equal(cbf_params_len(p, "taps"), 2);
    assert_int_equal(cbf_params_int_at(p, "taps", 1), -4);
    assert_true(cbf_params_field(p, "tones", 0, "amplitude") == 4.0);
    assert_int_equal(cbf_params_int(p, "n"), 8);
    cbf_graph_free(g);
    const char *bad[] = {"p.taps=[4, 40]"};
    tu_expect_error(HEAD, bad, 1, CBF_ECONFIG, 2, 3, E("override 'p.taps=[4, 40]'", "item [1]", "out of range"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults),
        cmocka_unit_test(given_values),
        cmocka_unit_test(integers),
        cmocka_unit_test(ranges_and_types),
        cmocka_unit_test(records),
        cmocka_unit_test(list_override),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
