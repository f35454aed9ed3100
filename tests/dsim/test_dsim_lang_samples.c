/* Samples of katgpucbf's signal language (plugins/dsim/dsim_eval.h through
 * dsim_model) against a float64 model written here from katgpucbf's
 * definitions: a signal is computed for one period P and replayed, so
 * sample t is the signal at i = t mod P; cw(A, f) is A cos(2 pi w i / P)
 * with w = max(1, round(P f / fs)) whole waves; multicw the sum of its
 * cws; comb(A, f) is A at i = round(c P / w) for c < w; wgn(s, e) is s
 * times standard Gaussians keyed by e alone; delay(x, d) is x at i - d;
 * and each sample is rint(clip(FS x + dither, -FS, FS)), FS = 2^(bits-1) - 1,
 * the dither uniform in [-0.5, 0.5) per input unless nodither(...).
 *
 * Deterministic parts must match exactly (allowing one LSB only where the
 * exact value is within 1e-6 LSB of a rounding boundary); statistical
 * ones (wgn's std and mean, correlations, the dither's mean) within five
 * standard errors of their estimates, so a run fails by chance about once
 * in 10^6. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dsim_eval.h"
#include "dsim_lang.h"
#include "dsim_model.h"

#define FS_HZ 1712e6

static uint64_t counter(void *ctx)
{
    return (*(uint64_t *)ctx)++;
}

typedef struct lang_model {
    cbf_dsim_prog *prog;
    cbf_dsim_model *model;
    double full;        /* FS */
} lang_model;

/* A model whose input i plays output i of text, with period P. */
static lang_model make(const char *text, int antennas, int bits, int64_t period, uint64_t dseed)
{
    uint64_t next = 1000;
    cbf_error err;
    cbf_error_clear(&err);
    lang_model lm = {.full = (double)((1 << (bits - 1)) - 1)};
    if (cbf_dsim_prog_parse(text, counter, &next, &lm.prog, &err))
        fail_msg("'%s': %s", text, err.msg);
    assert_int_equal(lm.prog->n_outputs, 2 * antennas);
    cbf_dsim_lang_input in[64];
    for (int i = 0; i < 2 * antennas; i++)
        in[i] = (cbf_dsim_lang_input){lm.prog, i, period};
    cbf_dsim_config cfg = {.antennas = antennas, .adc_sample_rate = FS_HZ, .bits = bits,
                           .lang = in, .dither_seed = dseed};
    char msg[256];
    if (cbf_dsim_model_create(&cfg, &lm.model, msg, sizeof msg))
        fail_msg("'%s': %s", text, msg);
    return lm;
}

static void drop(lang_model *lm)
{
    cbf_dsim_model_free(lm->model);
    cbf_dsim_prog_unref(lm->prog);
}

static int16_t *gen(const lang_model *lm, int input, int64_t t0, size_t n, uint64_t *sat)
{
    int16_t *v = malloc(n * sizeof *v);
    assert_non_null(v);
    uint64_t s = cbf_dsim_model_generate(lm->model, input / 2, input % 2, t0, n, v);
    if (sat)
        *sat = s;
    return v;
}

/* ---- the float64 model ---- */

static int64_t pmod(int64_t t, int64_t p)
{
    return ((t % p) + p) % p;
}

static double waves(double f, int64_t P)
{
    double w = nearbyint((double)P * f / FS_HZ);   /* Python's round: half to even */
    return w > 1 ? w : 1;
}

static double cw(double a, double f, int64_t P, int64_t t)
{
    const long double w = fmodl((long double)waves(f, P), (long double)P);
    const long double i = (long double)pmod(t, P);
    return (double)((long double)a * cosl(2.0L * 3.14159265358979323846264338327950288L * w * i /
                                          (long double)P));
}

/* got is rint(clip(FS x)) for every sample; one LSB of slack only where
 * FS x is within 1e-6 of a half. Returns the samples checked. */
static void expect_samples(const lang_model *lm, const int16_t *got, const double *x, size_t n,
                           const char *what)
{
    const double full = lm->full;
    for (size_t j = 0; j < n; j++) {
        double y = full * x[j];
        y = y > full ? full : y < -full ? -full : y;
        const double want = rint(y), d = fabs(y - floor(y) - 0.5);
        if (got[j] != want && !(d < 1e-6 && fabs(got[j] - want) <= 1))
            fail_msg("%s: sample %zu is %d, the model %.9f", what, j, got[j], y);
    }
}

/* cw: amplitude, frequency rounded to whole waves per period (negative and
 * zero frequencies to one wave), phase 0 at every multiple of P, far out
 * in time too; + of several. */
static void cw_samples(void **state)
{
    (void)state;
    const int64_t P = 65536, t0 = (INT64_C(5) << 40) + 777;
    const size_t n = 3 * (size_t)P;
    lang_model lm = make("nodither(cw(0.3, 123.4e6));"
                         "nodither(cw(0.2, 400e6) + cw(0.1, -5e6) + cw(0.05, 0) - cw(0.25, 856e6));",
                         1, 16, P, 1);
    double *x = malloc(n * sizeof *x);
    for (int input = 0; input < 2; input++) {
        int16_t *got = gen(&lm, input, t0, n, NULL);
        for (size_t j = 0; j < n; j++) {
            const int64_t t = t0 + (int64_t)j;
            x[j] = input == 0 ? cw(0.3, 123.4e6, P, t)
                              : cw(0.2, 400e6, P, t) + cw(0.1, -5e6, P, t) + cw(0.05, 0, P, t) -
                                    cw(0.25, 856e6, P, t);
        }
        expect_samples(&lm, got, x, n, input ? "cw sum" : "cw");
        free(got);
    }
    /* 123.4 MHz is 4723.9 waves in 2^16 samples: 4724; 856 MHz (fs / 2) is
     * 32768 waves, -1 and +1 on alternate samples. */
    assert_true(waves(123.4e6, P) == 4724 && waves(-5e6, P) == 1 && waves(856e6, P) == 32768);
    free(x);
    drop(&lm);
}

static void multicw_samples(void **state)
{
    (void)state;
    const int64_t P = 65536;
    const size_t n = (size_t)P + 1000;
    lang_model lm = make("nodither(multicw(4, 0.1, 0.05, 50e6, 30.3e6));"
                         "nodither(multicw(0, 1, 1, 1e6, 1e6) + 0.125);", 1, 16, P, 1);
    int16_t *got = gen(&lm, 0, -17, n, NULL), *zero = gen(&lm, 1, 0, n, NULL);
    double *x = malloc(n * sizeof *x), *c = malloc(n * sizeof *c);
    for (size_t j = 0; j < n; j++) {
        x[j] = 0;
        for (int k = 0; k < 4; k++)
            x[j] += cw(0.1 + k * 0.05, k * 30.3e6 + 50e6, P, -17 + (int64_t)j);
        c[j] = 0.125;
    }
    expect_samples(&lm, got, x, n, "multicw");
    expect_samples(&lm, zero, c, n, "multicw of no tones");
    free(x);
    free(c);
    free(got);
    free(zero);
    drop(&lm);
}

/* comb: pulses of the amplitude at round(c P / w), half to even, none
 * elsewhere (katgpucbf's test: every 8 samples for fs / 8); every sample
 * once there are P or more pulses per period. */
static void comb_samples(void **state)
{
    (void)state;
    const int64_t P = 65536;
    const size_t n = 2 * (size_t)P;
    lang_model lm = make("nodither(comb(0.5, 234e6)); nodither(comb(0.25, 214e6)); "
                         "nodither(comb(0.1, 2e9)); nodither(comb(0.75, 3e6) + comb(0.125, 1e4));",
                         2, 16, P, 1);
    const double freqs[4][2] = {{234e6, 0}, {214e6, 0}, {2e9, 0}, {3e6, 1e4}};
    const double amps[4][2] = {{0.5, 0}, {0.25, 0}, {0.1, 0}, {0.75, 0.125}};
    double *x = malloc(n * sizeof *x);
    for (int input = 0; input < 4; input++) {
        for (size_t j = 0; j < n; j++)
            x[j] = 0;
        for (int q = 0; q < 2 && amps[input][q]; q++) {
            const double w = waves(freqs[input][q], P);
            if (w >= (double)P) {
                for (size_t j = 0; j < n; j++)
                    x[j] += amps[input][q];
                continue;
            }
            for (int64_t c = 0; c < (int64_t)w; c++) {
                const int64_t at = (int64_t)rintl((long double)c * (long double)P / (long double)w);
                x[at] += amps[input][q];
                x[at + P] += amps[input][q];
            }
        }
        int16_t *got = gen(&lm, input, 0, n, NULL);
        expect_samples(&lm, got, x, n, "comb");
        free(got);
    }
    /* fs / 8: exactly every 8th sample. */
    lang_model e = make("nodither(comb(1.0, 214e6)); 0;", 1, 8, P, 1);
    int16_t *got = gen(&e, 0, 0, (size_t)P, NULL);
    for (int64_t j = 0; j < P; j++)
        assert_int_equal(got[j], j % 8 ? 0 : 127);
    free(got);
    drop(&e);
    free(x);
    drop(&lm);
}

static double mean_of(const int16_t *v, size_t n)
{
    double s = 0;
    for (size_t j = 0; j < n; j++)
        s += v[j];
    return s / (double)n;
}

static double corr(const int16_t *a, const int16_t *b, size_t n)
{
    const double ma = mean_of(a, n), mb = mean_of(b, n);
    double sab = 0, saa = 0, sbb = 0;
    for (size_t j = 0; j < n; j++) {
        sab += (a[j] - ma) * (b[j] - mb);
        saa += (a[j] - ma) * (a[j] - ma);
        sbb += (b[j] - mb) * (b[j] - mb);
    }
    return sab / sqrt(saa * sbb);
}

/* wgn: std (in LSB, FS std) and mean within five standard errors over a
 * period of 2^20 samples, the fraction within one std as a Gaussian's;
 * independent entropies uncorrelated, one entropy the same noise whatever
 * the std or the input, a variable the same noise on both pols; the noise
 * repeats with the period. */
static void wgn_samples(void **state)
{
    (void)state;
    const int64_t P = (int64_t)1 << 20;
    const size_t n = (size_t)P;
    lang_model lm = make("c = wgn(0.1); nodither(wgn(0.1)); nodither(wgn(0.1)); "
                         "nodither(wgn(0.05, 5)); nodither(wgn(0.1, 5)); nodither(c); nodither(c);",
                         3, 16, P, 1);
    int16_t *v[6];
    for (int i = 0; i < 6; i++)
        v[i] = gen(&lm, i, 12345, n, NULL);
    const double sigma = 0.1 * lm.full, sqn = sqrt((double)n);
    for (int i = 0; i < 6; i++) {
        const double m = mean_of(v[i], n), want = i == 2 ? sigma / 2 : sigma;
        double ss = 0;
        size_t inside = 0;
        for (size_t j = 0; j < n; j++) {
            ss += (v[i][j] - m) * (v[i][j] - m);
            inside += fabs((double)v[i][j]) <= want;
        }
        const double sd = sqrt(ss / (double)(n - 1));
        /* std's standard error sigma / sqrt(2n); quantisation adds 1/12 LSB^2. */
        if (fabs(sd / want - 1) > 5 / sqrt(2.0 * (double)n) || fabs(m) > 5 * want / sqn)
            fail_msg("input %d: std %.3f LSB (want %.3f), mean %.3f", i, sd, want, m);
        const double frac = (double)inside / (double)n;   /* 0.6827 for a Gaussian */
        if (fabs(frac - 0.682689) > 5 * sqrt(0.6827 * 0.3173 / (double)n))
            fail_msg("input %d: %.5f of samples within one std", i, frac);
    }
    if (fabs(corr(v[0], v[1], n)) > 5 / sqn)
        fail_msg("two wgn without entropy correlate: %f", corr(v[0], v[1], n));
    for (size_t j = 0; j < n; j++) {
        /* wgn(0.1, 5) is twice wgn(0.05, 5), each rounded once (neither
         * clips: 0.1 FS is ten std below full scale). */
        assert_true(abs(v[3][j] - 2 * v[2][j]) <= 1);
        assert_int_equal(v[4][j], v[5][j]);
    }
    int16_t *again = gen(&lm, 0, 12345 + 3 * P, n, NULL);
    assert_memory_equal(again, v[0], n * sizeof *again);
    free(again);
    for (int i = 0; i < 6; i++)
        free(v[i]);
    drop(&lm);
}

/* Dither: a constant of 0.3 LSB plays 0 without dither and, with it, 1 on
 * 30 % of samples (uniform in [-0.5, 0.5)), each input its own dither;
 * every sample is rint(clip(FS x + d)) with the model's dither d. */
static void dither_samples(void **state)
{
    (void)state;
    const int64_t P = (int64_t)1 << 20;
    const size_t n = (size_t)P;
    char text[256];
    const double c = 0.3 / 32767;
    snprintf(text, sizeof text, "c = %.17g; c; nodither(c); c; cw(0.5, 1e8) - c;", c);
    lang_model lm = make(text, 2, 16, P, 77);
    int16_t *d0 = gen(&lm, 0, 0, n, NULL), *nd = gen(&lm, 1, 0, n, NULL);
    int16_t *d2 = gen(&lm, 2, 0, n, NULL), *d3 = gen(&lm, 3, -5, n, NULL);
    const double sqn = sqrt((double)n);
    for (size_t j = 0; j < n; j++) {
        assert_int_equal(nd[j], 0);
        assert_true(d0[j] == 0 || d0[j] == 1);
        /* The model's own dither, its quantiser by the formula. */
        const int64_t t = -5 + (int64_t)j;
        const double dj = cbf_dsim_dither(77, 3, t, P);
        assert_true(dj >= -0.5 && dj < 0.5);
        const double y = lm.full * (cw(0.5, 1e8, P, t) - c) + dj;
        const double d = fabs(y - floor(y) - 0.5);
        if (d3[j] != rint(y) && !(d < 1e-6 && fabs(d3[j] - rint(y)) <= 1))
            fail_msg("dithered cw: sample %zu is %d, the model %.9f", j, d3[j], y);
    }
    const double m0 = mean_of(d0, n), m2 = mean_of(d2, n);
    const double se = 5 * sqrt(0.3 * 0.7) / sqn;
    if (fabs(m0 - 0.3) > se || fabs(m2 - 0.3) > se)
        fail_msg("0.3 LSB dithered averages %.5f and %.5f", m0, m2);
    if (fabs(corr(d0, d2, n)) > 5 / sqn)
        fail_msg("two inputs' dithers correlate: %f", corr(d0, d2, n));
    /* The dither's distribution: mean 0, variance 1/12. */
    double s = 0, s2 = 0;
    for (int64_t t = 0; t < P; t++) {
        const double dj = cbf_dsim_dither(5, 0, t, P);
        s += dj;
        s2 += dj * dj;
    }
    s /= (double)n;
    s2 = s2 / (double)n - s * s;
    if (fabs(s) > 5 * sqrt(1.0 / 12) / sqn || fabs(s2 * 12 - 1) > 5 * sqrt(0.8) / sqn)
        fail_msg("dither mean %.6f, variance %.6f (want 0, 1/12)", s, s2);
    /* Another seed, another dither; the same seed, the same samples. */
    lang_model other = make(text, 2, 16, P, 78), same = make(text, 2, 16, P, 77);
    int16_t *o0 = gen(&other, 0, 0, n, NULL), *s0 = gen(&same, 0, 0, n, NULL);
    assert_memory_equal(s0, d0, n * sizeof *s0);
    assert_true(memcmp(o0, d0, n * sizeof *o0) != 0);
    free(o0);
    free(s0);
    drop(&other);
    drop(&same);
    free(d0);
    free(nd);
    free(d2);
    free(d3);
    drop(&lm);
}

/* delay(x, d) is x d samples later, round the period too; delays add. */
static void delay_samples(void **state)
{
    (void)state;
    const int64_t P = 65536;
    const size_t n = 3 * (size_t)P;
    lang_model lm = make("nodither(delay(wgn(0.1, 3), 5)); nodither(wgn(0.1, 3));"
                         "nodither(delay(wgn(0.1, 3), -70000)); "
                         "nodither(delay(delay(wgn(0.1, 3), 2) + delay(cw(0.1, 1e8), 3), 3));",
                         2, 16, P, 1);
    const int64_t t0 = 1000;
    int16_t *a = gen(&lm, 0, t0, n, NULL), *b = gen(&lm, 1, t0 - 70000, n + 80000, NULL);
    int16_t *c = gen(&lm, 2, t0, n, NULL), *d = gen(&lm, 3, t0, n, NULL);
    lang_model ref = make("nodither(cw(0.1, 1e8)); 0;", 1, 16, P, 1);
    int16_t *tone = gen(&ref, 0, t0 - 6, n, NULL);
    for (size_t j = 0; j < n; j++) {
        /* b[k] is sample t0 - 70000 + k of the undelayed noise. */
        assert_int_equal(a[j], b[j + 70000 - 5]);
        assert_int_equal(c[j], b[j + 70000 + 70000 - P]);   /* 70000 later: 4464 later */
        const double want = b[j + 70000 - 5] + (double)tone[j];
        assert_true(fabs(d[j] - want) <= 1);   /* two roundings apart */
    }
    free(a);
    free(b);
    free(c);
    free(d);
    free(tone);
    drop(&ref);
    drop(&lm);
}

/* Clipping at +-FS (never -FS - 1), saturation counted at either extreme;
 * * - + sample by sample. */
static void clip_and_arithmetic(void **state)
{
    (void)state;
    const int64_t P = 65536;
    const size_t n = (size_t)P;
    lang_model lm = make("nodither(cw(1.5, 100e6)); "
                         "nodither(cw(0.2, 10e6) * cw(0.5, 20e6) - 0.1 + 0.05 * 2 * cw(1, 3e6));",
                         1, 10, P, 1);
    uint64_t sat;
    int16_t *got = gen(&lm, 0, 0, n, &sat), *ar = gen(&lm, 1, 0, n, NULL);
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    uint64_t extremes = 0;
    for (size_t j = 0; j < n; j++) {
        const int64_t t = (int64_t)j;
        x[j] = cw(1.5, 100e6, P, t);
        y[j] = cw(0.2, 10e6, P, t) * cw(0.5, 20e6, P, t) - 0.1 + 0.05 * 2 * cw(1, 3e6, P, t);
        assert_true(got[j] >= -511 && got[j] <= 511);
        extremes += abs(got[j]) == 511;
    }
    expect_samples(&lm, got, x, n, "clipped cw");
    expect_samples(&lm, ar, y, n, "arithmetic");
    assert_int_equal(sat, extremes);
    assert_true(extremes > n / 4);
    free(x);
    free(y);
    free(got);
    free(ar);
    drop(&lm);
}

/* The same samples whatever the cut: any start, negative too, any length. */
static void cut_independent(void **state)
{
    (void)state;
    const int64_t P = 65536, t0 = -3 * P + 17;
    const size_t n = 5 * 4096 + 123;
    lang_model lm = make("a = wgn(0.05) + multicw(3, 0.1, 0, 1e7, 1e7); a + comb(0.2, 1e6); "
                         "delay(a, -9) * cw(1, 5e6);", 1, 12, P, 9);
    static const size_t cuts[] = {1, 511, 512, 513, 4095, 4097, 9999};
    for (int input = 0; input < 2; input++) {
        int16_t *ref = gen(&lm, input, t0, n, NULL);
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            int16_t *v = malloc(n * sizeof *v);
            for (size_t off = 0; off < n; off += cuts[c]) {
                const size_t len = n - off < cuts[c] ? n - off : cuts[c];
                cbf_dsim_model_generate(lm.model, 0, input, t0 + (int64_t)off, len, v + off);
            }
            assert_memory_equal(v, ref, n * sizeof *v);
            free(v);
        }
        free(ref);
    }
    drop(&lm);
}

/* What an output may expand to: refused with the reason. */
static void eval_limits(void **state)
{
    (void)state;
    char text[4096];
    size_t l = (size_t)snprintf(text, sizeof text, "a0 = cw(1, 1e6);");
    for (int k = 1; k <= 17; k++)
        l += (size_t)snprintf(text + l, sizeof text - l, " a%d = a%d + a%d;", k, k - 1, k - 1);
    snprintf(text + l, sizeof text - l, " a17;");
    uint64_t next = 1;
    cbf_error err;
    cbf_dsim_prog *p;
    cbf_dsim_eval *e = NULL;
    assert_int_equal(cbf_dsim_prog_parse(text, counter, &next, &p, &err), 0);
    assert_int_equal(cbf_dsim_eval_create(p, 0, FS_HZ, 65536, &e, &err), CBF_EINVAL);
    assert_non_null(strstr(err.msg, "expands to more than 65536 terms"));
    cbf_dsim_prog_unref(p);
    l = 0;
    for (int k = 0; k < 20; k++)
        l += (size_t)snprintf(text + l, sizeof text - l, "1 + (");
    l += (size_t)snprintf(text + l, sizeof text - l, "1");
    for (int k = 0; k < 20; k++)
        l += (size_t)snprintf(text + l, sizeof text - l, ")");
    snprintf(text + l, sizeof text - l, ";");
    assert_int_equal(cbf_dsim_prog_parse(text, counter, &next, &p, &err), 0);
    assert_int_equal(cbf_dsim_eval_create(p, 0, FS_HZ, 65536, &e, &err), CBF_EINVAL);
    assert_non_null(strstr(err.msg, "more than 16 partial results"));
    cbf_dsim_prog_unref(p);
    /* Written left to right, a long sum needs two. */
    l = 0;
    for (int k = 0; k < 100; k++)
        l += (size_t)snprintf(text + l, sizeof text - l, "%scw(0.01, %de6)", k ? " + " : "", k + 1);
    snprintf(text + l, sizeof text - l, ";");
    assert_int_equal(cbf_dsim_prog_parse(text, counter, &next, &p, &err), 0);
    assert_int_equal(cbf_dsim_eval_create(p, 0, FS_HZ, 65536, &e, &err), 0);
    cbf_dsim_eval_free(e);
    cbf_dsim_prog_unref(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cw_samples),       cmocka_unit_test(multicw_samples),
        cmocka_unit_test(comb_samples),     cmocka_unit_test(wgn_samples),
        cmocka_unit_test(dither_samples),   cmocka_unit_test(delay_samples),
        cmocka_unit_test(clip_and_arithmetic), cmocka_unit_test(cut_independent),
        cmocka_unit_test(eval_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
