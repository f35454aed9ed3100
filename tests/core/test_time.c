/* The engine's time reference: the YAML keys sync_time and adc_sample_rate
 * (each mistake refused at its file:line:column), and UNIX seconds turned
 * into ADC timestamps exactly, held against an int128 reference computed
 * from the decimal digits on fresh random inputs. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loader_util.h"
#include "base/timeref.h"

#define E(...) __VA_ARGS__, NULL
#define NODES "nodes:\n  src:\n    plugin: tsrc\n  sink:\n    plugin: tsink\nedges:\n  - src.out -> sink.in\n"

static void yaml_keys(void **state)
{
    (void)state;
    tu_expect_error("engine:\n  sync_time: abc\n  adc_sample_rate: 1e6\n" NODES, NULL, 0, CBF_ECONFIG, 2,
                    14, E("engine.sync_time", "expected a number", "'abc'"));
    tu_expect_error("engine:\n  sync_time: .nan\n  adc_sample_rate: 1e6\n" NODES, NULL, 0, CBF_ECONFIG, 2,
                    14, E("engine.sync_time", "expected a number"));
    tu_expect_error("engine:\n  sync_time: '1700000000'\n  adc_sample_rate: 1e6\n" NODES, NULL, 0,
                    CBF_ECONFIG, 2, 14, E("engine.sync_time", "expected a number"));
    tu_expect_error("engine:\n  sync_time: 0\n  adc_sample_rate: 1e6\n" NODES, NULL, 0, CBF_ECONFIG, 2, 14,
                    E("engine.sync_time", "0 < sync_time"));
    tu_expect_error("engine:\n  sync_time: -1700000000\n  adc_sample_rate: 1e6\n" NODES, NULL, 0, CBF_ECONFIG,
                    2, 14, E("engine.sync_time", "after 1970"));
    tu_expect_error("engine:\n  sync_time: 1700000000000\n  adc_sample_rate: 1e6\n" NODES, NULL, 0,
                    CBF_ECONFIG, 2, 14, E("engine.sync_time", "milliseconds given by mistake"));
    tu_expect_error("engine:\n  sync_time: [1]\n  adc_sample_rate: 1e6\n" NODES, NULL, 0, CBF_ECONFIG, 2, 14,
                    E("engine.sync_time", "a list or mapping"));
    tu_expect_error("engine:\n  adc_sample_rate: 0\n" NODES, NULL, 0, CBF_ECONFIG, 2, 20,
                    E("engine.adc_sample_rate", "0 < rate"));
    tu_expect_error("engine:\n  adc_sample_rate: -1712e6\n" NODES, NULL, 0, CBF_ECONFIG, 2, 20,
                    E("engine.adc_sample_rate", "0 < rate"));
    tu_expect_error("engine:\n  adc_sample_rate: .inf\n" NODES, NULL, 0, CBF_ECONFIG, 2, 20,
                    E("engine.adc_sample_rate", "expected a number"));
    tu_expect_error("engine:\n  adc_sample_rate: 1e13\n" NODES, NULL, 0, CBF_ECONFIG, 2, 20,
                    E("engine.adc_sample_rate", "1e12"));
    /* A sync_time alone cannot convert anything: refused where it is. */
    tu_expect_error("engine:\n  gpu: none\n  sync_time: 1700000000\n" NODES, NULL, 0, CBF_ECONFIG, 3, 14,
                    E("engine.sync_time needs engine.adc_sample_rate"));
    tu_expect_error("engine:\n  sync_tim: 1700000000\n" NODES, NULL, 0, CBF_ECONFIG, 2, 3,
                    E("unknown engine key 'sync_tim'", "did you mean 'sync_time'"));
    /* An override is checked as the YAML is. */
    const char *ov[] = {"engine.sync_time=abc"};
    tu_expect_error("engine:\n  adc_sample_rate: 1e6\n" NODES, ov, 1, CBF_ECONFIG, 2, 3,
                    E("override 'engine.sync_time=abc'", "engine.sync_time", "'abc'"));

    cbf_graph *g = NULL;
    cbf_error err = {0};
    int rc = tu_load("engine:\n  sync_time: 1700000000.123456789\n  adc_sample_rate: 1712e6\n" NODES, NULL, 0,
                     &g, &err);
    if (rc)
        fail_msg("%s", err.msg);
    assert_true(g->engine.has_sync_time);
    assert_int_equal(g->engine.sync_time.sec, 1700000000);
    assert_true(fabsl(g->engine.sync_time.frac - 0.123456789L) < 1e-18L);
    assert_true(g->engine.adc_sample_rate == 1712000000.0L);
    cbf_graph_free(g);
    rc = tu_load("engine:\n  adc_sample_rate: 1712e6\n" NODES, NULL, 0, &g, &err);
    if (rc)
        fail_msg("%s", err.msg);
    assert_false(g->engine.has_sync_time);
    cbf_graph_free(g);
}

/* 62 random bits from libc's generator (seeded and printed per run). */
static uint64_t rnd(void) { return (uint64_t)random() << 31 | (uint64_t)random(); }

/* "W.FFF" with nf fraction digits; value = (w x 10^nf + f) / 10^nf. */
static void decimal(char *out, size_t n, int64_t w, uint64_t f, int nf)
{
    if (nf)
        snprintf(out, n, "%" PRId64 ".%0*" PRIu64, w, nf, f);
    else
        snprintf(out, n, "%" PRId64, w);
}

static __int128 pow10i(int k)
{
    __int128 p = 1;
    while (k--)
        p *= 10;
    return p;
}

/* The reference: everything in units of 10^-12 s, integers throughout,
 * rounded half away from zero. Sets *near_half when the exact value is
 * within 1e-6 sample of a half: there a long double's ~1e-19 relative error
 * in the fraction (times a rate below 2^33: ~1e-9 sample) could tip either
 * way, and both answers are within the stated accuracy. */
static int64_t reference(int64_t uw, uint64_t uf, int unf, int64_t sw, uint64_t sf, int snf, uint64_t rate,
                         int *near_half)
{
    const __int128 scale = pow10i(12);
    __int128 u = (__int128)uw * scale + (__int128)uf * pow10i(12 - unf);
    __int128 s = (__int128)sw * scale + (__int128)sf * pow10i(12 - snf);
    __int128 num = (u - s) * (__int128)rate;
    int neg = num < 0;
    __int128 a = neg ? -num : num, q = a / scale, r = a % scale;
    __int128 twice = 2 * r - scale;   /* 0 at an exact half */
    *near_half = (twice < 0 ? -twice : twice) < 2 * scale / 1000000;
    if (2 * r >= scale)
        q++;
    return (int64_t)(neg ? -q : q);
}

static void exact_conversion(void **state)
{
    (void)state;
    unsigned seed = (unsigned)time(NULL);
    srandom(seed);
    print_message("seed %u\n", seed);
    int tested = 0, double_wrong = 0;
    for (int i = 0; i < 200000; i++) {
        int snf = (int)(rnd() % 10), unf = (int)(rnd() % 13);
        int64_t sw = 1000000000 + (int64_t)(rnd() % 800000000);
        uint64_t sf = snf ? rnd() % (uint64_t)pow10i(snf) : 0;
        /* Up to three years after the sync time (2^57 samples at 1.7 GHz). */
        int64_t uw = sw + (int64_t)(rnd() % 100000000);
        uint64_t uf = unf ? rnd() % (uint64_t)pow10i(unf) : 0;
        /* Integer rates from 1 MHz to 8 GHz (MeerKAT's 1712e6 among them). */
        uint64_t rate = i % 7 == 0 ? 1712000000u : 1000000 + rnd() % 8000000000ull;
        char st[64], ut[64];
        decimal(st, sizeof st, sw, sf, snf);
        decimal(ut, sizeof ut, uw, uf, unf);
        int near_half;
        int64_t want = reference(uw, uf, unf, sw, sf, snf, rate, &near_half);
        if (near_half)
            continue;
        cbf_unix_time s, u;
        assert_int_equal(cbf_time_parse(st, &s), 0);
        assert_int_equal(cbf_time_parse(ut, &u), 0);
        int64_t got;
        assert_int_equal(cbf_time_to_ts(&u, &s, (long double)rate, &got), 0);
        if (got != want)
            fail_msg("unix %s, sync %s, rate %" PRIu64 ": %" PRId64 ", want %" PRId64, ut, st, rate, got, want);
        /* What a double-precision conversion would give, to show the test
         * tells exact from nearly right. */
        double_wrong += (int64_t)llround((strtod(ut, NULL) - strtod(st, NULL)) * (double)rate) != want;
        tested++;
    }
    print_message("%d exact; a double conversion misses %d of them\n", tested, double_wrong);
    assert_true(tested > 190000);
    assert_true(double_wrong > tested / 2);
}

static void parse_forms(void **state)
{
    (void)state;
    cbf_unix_time t, s = {1700000000, 0.25L};
    assert_int_equal(cbf_time_parse("\"1700000001.25\"", &t), 0);   /* a JSON string */
    int64_t ts;
    assert_int_equal(cbf_time_to_ts(&t, &s, 1712e6L, &ts), 0);
    assert_int_equal(ts, 1712000000);
    assert_int_equal(cbf_time_parse("1.70000000125e9", &t), 0);    /* exponent: long double */
    assert_int_equal(cbf_time_to_ts(&t, &s, 1e6L, &ts), 0);
    assert_int_equal(ts, 1000000);
    assert_int_equal(cbf_time_parse("-0.25", &t), 0);
    assert_int_equal(t.sec, -1);
    assert_true(t.frac == 0.75L);
    assert_int_equal(cbf_time_parse("+12", &t), 0);
    assert_int_equal(t.sec, 12);
    /* Before the sync time: negative, to the nearest sample. */
    assert_int_equal(cbf_time_parse("1700000000.2499994", &t), 0);
    assert_int_equal(cbf_time_to_ts(&t, &s, 1e6L, &ts), 0);
    assert_int_equal(ts, -1);
    static const char *const bad[] = {"", "x", "1.2.3", "1e", ".nan", "inf", "1e400", "'", "\"1", "1 2",
                                      "0x10"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (!cbf_time_parse(bad[i], &t))
            fail_msg("'%s' was read as seconds", bad[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(yaml_keys),
        cmocka_unit_test(exact_conversion),
        cmocka_unit_test(parse_forms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
