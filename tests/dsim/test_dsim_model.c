/* dsim's signal model (plugins/dsim/dsim_model.h) against the maths,
 * without the runtime: chunk independence, tone frequency and phase,
 * delays, rounding, exact saturation counts, noise statistics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dsim_model.h"
#include "pack.h"

#define FS_RATE 1712e6

static cbf_dsim_model *make(int antennas, int bits, const cbf_dsim_tone *tones, int n_tones,
                            double noise, double common, const double *delays, uint64_t seed)
{
    cbf_dsim_config cfg = {
        .antennas = antennas, .adc_sample_rate = FS_RATE, .bits = bits, .n_tones = n_tones,
        .tones = tones, .noise = noise, .common_noise = common, .delays = delays, .seed = seed,
    };
    cbf_dsim_model *m = NULL;
    char msg[256];
    assert_int_equal(cbf_dsim_model_create(&cfg, &m, msg, sizeof msg), 0);
    return m;
}

static int16_t *poisoned(size_t n)
{
    int16_t *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = INT16_MIN;   /* outside every width's range but 16 bits' extreme */
    return v;
}

/* Same samples whether produced in chunks of 4096, 65536 or 2^20, for
 * streams with tones, fractional delays, independent and common noise. */
static void chunk_independent(void **state)
{
    (void)state;
    const cbf_dsim_tone tones[2] = {{100.1e6, 0.2, {0.3, 1.1}}, {433.3e6, 0.1, {2.0, -1.0}}};
    const double delays[3] = {0.0, 3.25, -17.5};
    cbf_dsim_model *m = make(3, 10, tones, 2, 0.1, 0.05, delays, 42);
    const size_t total = (size_t)1 << 21;
    const size_t chunks[3] = {4096, 65536, (size_t)1 << 20};
    const int64_t start = (int64_t)1 << 36;   /* far from 0: phases must stay exact */
    for (int a = 0; a < 3; a++)
        for (int p = 0; p < 2; p++) {
            int16_t *ref = poisoned(total);
            uint64_t sat_ref = cbf_dsim_model_generate(m, a, p, start, total, ref);
            for (int c = 0; c < 3; c++) {
                int16_t *v = poisoned(total);
                uint64_t sat = 0;
                for (size_t off = 0; off < total; off += chunks[c])
                    sat += cbf_dsim_model_generate(m, a, p, start + (int64_t)off, chunks[c],
                                                   v + off);
                assert_memory_equal(v, ref, total * sizeof *v);
                assert_int_equal(sat, sat_ref);
                free(v);
            }
            /* And an odd cut, not on any block or pair boundary. */
            int16_t *v = poisoned(total);
            cbf_dsim_model_generate(m, a, p, start, 12345, v);
            cbf_dsim_model_generate(m, a, p, start + 12345, total - 12345, v + 12345);
            assert_memory_equal(v, ref, total * sizeof *v);
            free(v);
            free(ref);
        }
    cbf_dsim_model_free(m);
}

/* Every sample of a noiseless tone equals rint(FS A cos(2 pi f (t - d)/fs + phi))
 * computed here in long double from the formula. At t ~ 2^40 the phase in
 * cycles (~2^36) keeps 2^-27 cycles in a long double, i.e. 1e-4 LSB of
 * this tone, and the model's phasors are good to ~1e-9 LSB; so a sample may
 * differ by one only where the exact value is within 1e-3 LSB of a
 * rounding boundary (a phase error of 1e-5 rad, 0.02 LSB, flips hundreds). */
static void tone_samples_exact(void **state)
{
    (void)state;
    const cbf_dsim_tone tone = {123.456789e6, 0.9, {0.7, -2.2}};
    const double delays[2] = {0.0, 7.375};
    const int bits = 12;
    const double fs = (1 << (bits - 1)) - 1;
    cbf_dsim_model *m = make(2, bits, &tone, 1, 0.0, 0.0, delays, 1);
    const size_t n = 20000;
    const int64_t starts[2] = {0, ((int64_t)1 << 40) + 4096 * 3 + 77};
    int16_t *v = poisoned(n);
    for (int s = 0; s < 2; s++)
        for (int a = 0; a < 2; a++)
            for (int p = 0; p < 2; p++) {
                assert_int_equal(cbf_dsim_model_generate(m, a, p, starts[s], n, v), 0);
                for (size_t i = 0; i < n; i++) {
                    const long double t = (long double)(starts[s] + (int64_t)i) - delays[a];
                    /* cycles, reduced exactly enough in long double for t < 2^41 */
                    long double cyc = (long double)tone.frequency / FS_RATE * t;
                    cyc -= floorl(cyc);
                    const double x = (double)((long double)fs * tone.amplitude *
                                              cosl(2.0L * M_PI * cyc + tone.phase[p]));
                    const double want = rint(x);
                    const double dist = fabs(x - floor(x) - 0.5);
                    if (dist > 1e-3)
                        assert_int_equal(v[i], (int)want);
                    else
                        assert_true(abs(v[i] - (int)want) <= 1);
                }
            }
    free(v);
    cbf_dsim_model_free(m);
}

/* A DFT in double of decoded (packed then unpacked) samples peaks at the
 * tone's bin, and the phase at that bin moves by -2 pi f d / fs with the
 * antenna delay d. The tone sits on a bin centre; quantisation noise (0.29
 * LSB RMS) against a 255-LSB tone over 4096 samples gives a phase error of
 * order 1e-4 rad, so 2e-3 rad is a safe bound that a wrong sign or a delay
 * off by a tenth of a sample (0.1 x 2 pi k / N >= 0.03 rad here) fails. */
static void tone_peak_and_delay_phase(void **state)
{
    (void)state;
    enum { N = 4096, K = 1000 };
    const double f = (double)K * FS_RATE / N;
    const cbf_dsim_tone tone = {f, 0.5, {0.4, 0.4}};
    const double delays[3] = {0.0, 2.5, -11.25};
    cbf_dsim_model *m = make(3, 10, &tone, 1, 0.01, 0.0, delays, 9);
    int16_t raw[N], dec[N];
    uint8_t packed[N * 2];
    double phase[3];
    for (int a = 0; a < 3; a++) {
        cbf_dsim_model_generate(m, a, 0, 8192, N, raw);
        assert_int_equal(cbf_pack(raw, N, 10, packed, NULL, 0), 0);
        assert_int_equal(cbf_unpack(packed, N, 10, dec, NULL, 0), 0);
        int best = -1;
        double best_pow = -1.0, re_k = 0.0, im_k = 0.0;
        for (int k = 0; k <= N / 2; k++) {
            double re = 0.0, im = 0.0;
            for (int t = 0; t < N; t++) {
                const double ang = -2.0 * M_PI * (double)((int64_t)k * t % N) / N;
                re += dec[t] * cos(ang);
                im += dec[t] * sin(ang);
            }
            if (re * re + im * im > best_pow) {
                best_pow = re * re + im * im;
                best = k;
                re_k = re;
                im_k = im;
            }
        }
        assert_int_equal(best, K);
        phase[a] = atan2(im_k, re_k);
    }
    for (int a = 1; a < 3; a++) {
        const double want = -2.0 * M_PI * f * delays[a] / FS_RATE;
        const double diff = remainder(phase[a] - phase[0] - want, 2.0 * M_PI);
        assert_true(fabs(diff) < 2e-3);
    }
    cbf_dsim_model_free(m);
}

/* Ties round to even, and saturation is counted once per clipped sample.
 * A DC "tone" (f = 0) makes exact half-integers: FS x A = 7 x 0.5 = 3.5. */
static void rounding_and_saturation(void **state)
{
    (void)state;
    int16_t v[64];
    cbf_dsim_tone dc = {0.0, 0.5, {0.0, M_PI}};
    cbf_dsim_model *m = make(1, 4, &dc, 1, 0.0, 0.0, NULL, 1);   /* FS = 7 */
    assert_int_equal(cbf_dsim_model_generate(m, 0, 0, 0, 64, v), 0);
    for (int i = 0; i < 64; i++)
        assert_int_equal(v[i], 4);    /* 3.5 -> 4 */
    assert_int_equal(cbf_dsim_model_generate(m, 0, 1, 0, 64, v), 0);
    for (int i = 0; i < 64; i++)
        assert_int_equal(v[i], -4);   /* -3.5 -> -4 */
    cbf_dsim_model_free(m);
    dc.amplitude = 2.5;   /* 2 bits: FS = 1, so 2.5 -> 2 (even), clipped to 1 */
    m = make(1, 2, &dc, 1, 0.0, 0.0, NULL, 1);
    assert_int_equal(cbf_dsim_model_generate(m, 0, 0, 0, 64, v), 64);
    for (int i = 0; i < 64; i++)
        assert_int_equal(v[i], 1);
    assert_int_equal(cbf_dsim_model_generate(m, 0, 1, 0, 64, v), 0);  /* -2.5 -> -2: fits */
    for (int i = 0; i < 64; i++)
        assert_int_equal(v[i], -2);
    cbf_dsim_model_free(m);

    /* An overdriven tone: the count equals the samples whose exact value
     * rounds outside [-512, 511], counted here from the formula. */
    const cbf_dsim_tone hot = {97.3e6, 1.7, {0.2, 0.9}};
    const size_t n = 3 * 4096 + 100;
    m = make(1, 10, &hot, 1, 0.0, 0.0, NULL, 1);
    int16_t *out = poisoned(n);
    for (int p = 0; p < 2; p++) {
        uint64_t want = 0;
        for (size_t i = 0; i < n; i++) {
            long double cyc = (long double)hot.frequency / FS_RATE * (long double)i;
            cyc -= floorl(cyc);
            const double x = rint((double)(511.0L * hot.amplitude *
                                           cosl(2.0L * M_PI * cyc + hot.phase[p])));
            want += (x > 511 || x < -512);
        }
        assert_true(want > n / 4);   /* the test means something */
        assert_int_equal(cbf_dsim_model_generate(m, 0, p, 0, n, out), want);
        for (size_t i = 0; i < n; i++)
            assert_true(out[i] >= -512 && out[i] <= 511);
    }
    free(out);
    cbf_dsim_model_free(m);
}

/* Noise RMS and the common signal's correlation at the antennas' delay
 * difference. Over 2^18 samples the sample RMS of a Gaussian is within
 * 0.3% (1 sigma = 1/sqrt(2n)); 2% bounds are > 6 sigma. The normalised
 * correlation of two streams sharing common RMS c and own RMS s is
 * c^2 / (c^2 + s^2) = 0.8 here; its estimator's sigma is ~1/sqrt(n) = 0.002. */
static void noise_statistics(void **state)
{
    (void)state;
    const size_t n = (size_t)1 << 18;
    const double delays[2] = {0.0, 5.0};
    cbf_dsim_model *m = make(2, 16, NULL, 0, 0.05, 0.1, delays, 1234);
    int16_t *x = poisoned(n + 16), *y = poisoned(n + 16);
    cbf_dsim_model_generate(m, 0, 0, 4096, n, x);
    cbf_dsim_model_generate(m, 1, 0, 4096 + 5, n, y);   /* antenna 1 lags by 5 samples */
    double sxx = 0, syy = 0, sxy = 0, mean = 0;
    for (size_t i = 0; i < n; i++) {
        sxx += (double)x[i] * x[i];
        syy += (double)y[i] * y[i];
        sxy += (double)x[i] * y[i];
        mean += x[i];
    }
    const double want_rms = sqrt(0.05 * 0.05 + 0.1 * 0.1) * 32767.0;
    assert_true(fabs(sqrt(sxx / n) / want_rms - 1.0) < 0.02);
    assert_true(fabs(sqrt(syy / n) / want_rms - 1.0) < 0.02);
    assert_true(fabs(mean / n) < 0.02 * want_rms);
    assert_true(fabs(sxy / sqrt(sxx * syy) - 0.8) < 0.02);
    /* Without the lag the streams are unrelated. */
    cbf_dsim_model_generate(m, 1, 0, 4096, n, y);
    sxy = 0;
    syy = 0;
    for (size_t i = 0; i < n; i++) {
        sxy += (double)x[i] * y[i];
        syy += (double)y[i] * y[i];
    }
    assert_true(fabs(sxy / sqrt(sxx * syy)) < 0.02);
    /* Gaussian, not just the right RMS: the kurtosis E[x^4]/E[x^2]^2 is 3
     * (a uniform gives 1.8); its estimator's sigma is sqrt(24/n) = 0.01. */
    double m2 = 0, m4 = 0;
    for (int64_t t = 0; t < (int64_t)n; t++) {
        const double g = cbf_dsim_gauss(99, 1, 1, t);
        m2 += g * g;
        m4 += g * g * g * g;
    }
    assert_true(fabs(m2 / n - 1.0) < 0.02);
    assert_true(fabs(m4 / n / (m2 / n * m2 / n) - 3.0) < 0.1);
    /* Independent noise of another seed, pol or antenna differs. */
    assert_true(cbf_dsim_gauss(1, 0, 0, 77) != cbf_dsim_gauss(2, 0, 0, 77));
    assert_true(cbf_dsim_gauss(1, 0, 0, 77) != cbf_dsim_gauss(1, 0, 1, 77));
    assert_true(cbf_dsim_gauss(1, 0, 0, 77) != cbf_dsim_gauss(1, 1, 0, 77));
    free(x);
    free(y);
    cbf_dsim_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chunk_independent),
        cmocka_unit_test(tone_samples_exact),
        cmocka_unit_test(tone_peak_and_delay_phase),
        cmocka_unit_test(rounding_and_saturation),
        cmocka_unit_test(noise_statistics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
