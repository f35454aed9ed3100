/* test_feng.c: the wideband F-engine kernels (pfb + fft_post) against the
 * float64 model in feng_ref.c. Run with --gpu for the CUDA kernels (exit 77,
 * skipped, without a GPU); the same cases hold on both.
 *
 * Tolerance: float32 FIR and FFT arithmetic leaves errors near 1e-5 of the
 * value before rounding; an output rounds differently from the float64
 * model only when its exact value lies that close to a half-integer, so at
 * most one step off and on far fewer than 0.1% of values (docs/feng.md, Tests).
 * Saturation counts are exact except for values within 1e-3 of the clip
 * edge, which the test counts as ambiguous and allows either way. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fft_post.h"
#include "feng_ref.h"
#include "feng_run.h"
#include "pfb.h"

static int use_gpu;

typedef struct cmp_stats {
    size_t n, exact, worse;
    uint64_t sat_sure[2], sat_ambiguous[2], power[2];
} cmp_stats;

/* Output value (re, im) of (pol, spectrum, channel); -128 / -8 mean unwritten. */
static void out_value(const feng_case *c, const uint8_t *out, int pol, size_t sp, int k, int *re,
                      int *im)
{
    size_t sph = (size_t)c->spectra_per_heap, b = sp / sph, t = sp % sph;
    size_t idx = ((b * (size_t)c->channels + (size_t)k) * sph + t) * 2 + (size_t)pol;
    if (c->out_bits == 8) {
        *re = (int8_t)out[2 * idx];
        *im = (int8_t)out[2 * idx + 1];
    } else {
        *re = (int8_t)(out[idx] & 0xf0) >> 4;
        *im = (int8_t)(uint8_t)(out[idx] << 4) >> 4;
    }
}

static double complex *ref_gains(const feng_case *c, const float *gains, int pol)
{
    double complex *g = malloc(sizeof(double complex) * (size_t)c->channels);
    for (int k = 0; k < c->channels; k++)
        g[k] = gains[4 * k + 2 * pol] + I * gains[4 * k + 2 * pol + 1];
    return g;
}

static void compare(const feng_case *c, const feng_result *r, cmp_stats *st)
{
    const int N = c->channels, lim = c->out_bits == 8 ? 127 : 7;
    const size_t step = 2 * (size_t)N, spectra = (size_t)c->spectra_per_heap * c->batches;
    double *w = malloc(sizeof(double) * step * (size_t)c->taps);
    double complex *X = malloc(sizeof(double complex) * (size_t)N);
    feng_ref_weights(N, c->taps, 1.0, 1, w);
    memset(st, 0, sizeof(*st));
    for (int pol = 0; pol < 2; pol++) {
        double complex *g = ref_gains(c, c->gains, pol);
        double complex *g_next = c->switch_gains ? ref_gains(c, c->next_gains, pol) : NULL;
        for (size_t sp = 0; sp < spectra; sp++) {
            /* The model as the maths has it, per spectrum: the fixed and the
             * per-spectrum delay and phase add; the gains switch tables. */
            feng_ref_setup s = {N, c->taps, c->bits, w, c->fine_delay[pol], c->phase[pol],
                                c->switch_gains && sp >= c->gain_switch ? g_next : g};
            if (c->spectrum_delay) {
                s.fine_delay += c->spectrum_delay[2 * ((size_t)pol * spectra + sp)];
                s.phase += c->spectrum_delay[2 * ((size_t)pol * spectra + sp) + 1];
            }
            int64_t start = c->start[pol] + (int64_t)(sp * step);
            feng_ref_spectrum(&s, c->in[pol], start, X);
            for (size_t i = 0; i < step; i++) {
                int64_t v = feng_ref_sample(c->in[pol], (size_t)start + i, c->bits);
                st->power[pol] += (uint64_t)(v * v);
            }
            for (int k = 0; k < N; k++) {
                int clipped = 0, re, im, ambiguous = 0;
                int qre = feng_ref_quant(creal(X[k]), lim, &clipped);
                int qim = feng_ref_quant(cimag(X[k]), lim, &clipped);
                ambiguous = fabs(fabs(creal(X[k])) - (lim + 0.5)) < 1e-3 ||
                            fabs(fabs(cimag(X[k])) - (lim + 0.5)) < 1e-3;
                if (ambiguous)
                    st->sat_ambiguous[pol]++;
                else
                    st->sat_sure[pol] += (uint64_t)clipped;
                out_value(c, r->out, pol, sp, k, &re, &im);
                int d = abs(re - qre) > abs(im - qim) ? abs(re - qre) : abs(im - qim);
                st->n++;
                if (re == -lim - 1 || im == -lim - 1 || d > 1)
                    st->worse++;
                else if (d == 0)
                    st->exact++;
            }
        }
        free(g);
        free(g_next);
    }
    free(X);
    free(w);
}

/* Runs the case and holds it against the model; returns the result. */
static feng_result check_case(const feng_case *c, const char *what)
{
    feng_result r;
    char msg[512] = "";
    int rc = feng_run(use_gpu, c, &r, msg, sizeof msg);
    if (rc)
        fail_msg("%s: feng_run: %s", what, msg);
    cmp_stats st;
    compare(c, &r, &st);
    if (st.worse || st.exact < st.n - st.n / 1000)
        fail_msg("%s: %zu values, %zu exact, %zu off by more than 1 or unwritten", what, st.n,
                 st.exact, st.worse);
    for (int p = 0; p < 2; p++) {
        if (r.saturated[p] < st.sat_sure[p] ||
            r.saturated[p] > st.sat_sure[p] + st.sat_ambiguous[p])
            fail_msg("%s: pol %d saturated %llu, model %llu (+%llu ambiguous)", what, p,
                     (unsigned long long)r.saturated[p], (unsigned long long)st.sat_sure[p],
                     (unsigned long long)st.sat_ambiguous[p]);
        if (r.power[p] != st.power[p])
            fail_msg("%s: pol %d power %llu, model %llu", what, p,
                     (unsigned long long)r.power[p], (unsigned long long)st.power[p]);
    }
    return r;
}

static float *new_weights(int channels, int taps)
{
    return malloc(sizeof(float) * 2 * (size_t)channels * (size_t)taps);
}

/* Gains scaled so outputs have about `rms` per component for uniform
 * samples of the given width (the normalised PFB keeps the input power). */
static void set_random_gains(feng_case *c, double rms)
{
    double sigma = pow(2.0, c->bits - 1) / sqrt(3.0) / sqrt(2.0);
    float *g = (float *)c->gains;
    for (int i = 0; i < 2 * c->channels; i++) {
        double mag = rms / sigma * (0.7 + 0.6 * feng_uniform()), ph = 2 * M_PI * feng_uniform();
        g[2 * i] = (float)(mag * cos(ph));
        g[2 * i + 1] = (float)(mag * sin(ph));
    }
}

static void test_weights(void **state)
{
    (void)state;
    const int cases[][2] = {{64, 1}, {256, 4}, {4096, 16}, {32768, 16}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int N = cases[i][0], taps = cases[i][1];
        size_t n = 2 * (size_t)N * (size_t)taps;
        float *w = new_weights(N, taps);
        double *ref = malloc(sizeof(double) * n), sum2 = 0;
        char msg[256];
        assert_int_equal(cbf_pfb_weights(N, taps, 1.0, CBF_PFB_HANN, w, msg, sizeof msg), 0);
        feng_ref_weights(N, taps, 1.0, 1, ref);
        for (size_t j = 0; j < n; j++) {
            /* float32 storage: half an ulp of the largest weight at most. */
            if (fabs(w[j] - ref[j]) > 1e-7 * fabs(ref[j]) + 1e-12)
                fail_msg("weights %d x %d: w[%zu] = %.9g, model %.9g", N, taps, j, w[j], ref[j]);
            sum2 += (double)w[j] * w[j];
        }
        assert_true(fabs(sum2 - 1.0) < 1e-6);
        free(w);
        free(ref);
    }
    float w[4];
    char msg[256];
    assert_int_equal(cbf_pfb_weights(48, 16, 1.0, CBF_PFB_HANN, w, msg, sizeof msg),
                     CBF_KERN_EINVAL);
    assert_non_null(strstr(msg, "channels 48"));
}

/* The DFT corner (katgpucbf's w_cutoff = 0): taps 1, rect window, no
 * sinc. The weights are all 1 / sqrt(step) (sum of squares 1), so each
 * output is a plain DFT of its frame of step samples, scaled by that and
 * the gain: X_k = g_k / sqrt(step) sum_j x_j exp(-2 pi i j k / step),
 * written here directly in float64 (no weights, no FIR). Same tolerance
 * as every chain test: at most 1 LSB off, >= 99.9% exact. Every unzip. */
static void test_dft_corner(void **state)
{
    (void)state;
    const int N = 256, step = 2 * N, sph = 16, batches = 2;
    float w[2 * 256];
    char msg[256];
    for (int unzip = 1; unzip <= 4; unzip *= 2) {
        feng_case c;
        feng_case_random(&c, N, 1, 10, unzip, sph, batches, NULL);
        assert_int_equal(cbf_pfb_weights(N, 1, 0.0, CBF_PFB_RECT, w, msg, sizeof msg), 0);
        for (int j = 0; j < step; j++)
            if (fabs(w[j] - 1.0 / sqrt(step)) > 1e-7 / sqrt(step))  /* float32 rounding */
                fail_msg("w[%d] = %.9g, expected 1/sqrt(%d)", j, w[j], step);
        c.weights = w;
        set_random_gains(&c, 25.0);
        feng_result r;
        if (feng_run(use_gpu, &c, &r, msg, sizeof msg))
            fail_msg("unzip %d: %s", unzip, msg);
        size_t n = 0, exact = 0, worse = 0;
        for (int pol = 0; pol < 2; pol++)
            for (size_t sp = 0; sp < (size_t)sph * batches; sp++) {
                double x[2 * 256];
                for (int j = 0; j < step; j++)
                    x[j] = (double)feng_ref_sample(c.in[pol], sp * step + (size_t)j, 10);
                for (int k = 0; k < N; k++) {
                    double complex acc = 0;
                    for (int j = 0; j < step; j++)
                        acc += x[j] * cexp(-2 * M_PI * I * (double)((j * k) % step) / step);
                    double complex g = c.gains[4 * k + 2 * pol] + I * c.gains[4 * k + 2 * pol + 1];
                    double complex X = acc / sqrt(step) * g;
                    int clipped = 0, re, im;
                    int qre = feng_ref_quant(creal(X), 127, &clipped);
                    int qim = feng_ref_quant(cimag(X), 127, &clipped);
                    out_value(&c, r.out, pol, sp, k, &re, &im);
                    int d = abs(re - qre) > abs(im - qim) ? abs(re - qre) : abs(im - qim);
                    n++;
                    exact += d == 0;
                    worse += d > 1 || re == -128 || im == -128;
                }
            }
        if (worse || exact < n - n / 1000)
            fail_msg("DFT corner, unzip %d: %zu values, %zu exact, %zu off by more than 1 LSB",
                     unzip, n, exact, worse);
        feng_result_free(&r);
        feng_case_free_input(&c);
    }
}

static void test_chain_random(void **state)
{
    (void)state;
    float *w = new_weights(256, 16);
    feng_case c;
    feng_case_random(&c, 256, 16, 10, 1, 32, 2, w);
    set_random_gains(&c, 25.0);
    /* Different coarse offsets per pol: the input grows by the larger. */
    c.start[0] = 3;
    c.start[1] = 17;
    c.in_samples += 17;
    for (int p = 0; p < 2; p++) {
        size_t bytes = cbf_packed_bytes(c.in_samples, c.bits);
        c.in[p] = realloc(c.in[p], bytes);
        for (size_t i = 0; i < bytes; i++)
            c.in[p][i] = (uint8_t)feng_rand();
    }
    for (int p = 0; p < 2; p++) {
        c.fine_delay[p] = (float)(feng_uniform() - 0.5);
        c.phase[p] = (float)(2 * M_PI * feng_uniform() - M_PI);
    }
    feng_result r = check_case(&c, "10-bit, 256 channels, delays and gains");
    feng_result_free(&r);
    c.out_bits = 4;
    set_random_gains(&c, 3.0);
    r = check_case(&c, "4-bit output");
    feng_result_free(&r);
    feng_case_free_input(&c);
    free(w);
}

/* A delay model evaluated per spectrum (fine delay and phase differ from
 * one spectrum to the next) and a gain change in the middle of a run, not
 * on a heap boundary: each spectrum against the float64 model with its own
 * delay, phase and gain table. Same tolerance as every chain test: at most
 * 1 LSB off (float32 transform against float64) and >= 99.9% exact. */
static void test_spectrum_delay_and_gain_switch(void **state)
{
    (void)state;
    const int N = 256, sph = 32, batches = 3;
    const size_t spectra = (size_t)sph * batches;
    float *w = new_weights(N, 16);
    feng_case c;
    feng_case_random(&c, N, 16, 10, 2, sph, batches, w);
    set_random_gains(&c, 25.0);
    float *next = malloc(sizeof(float) * 4 * N), *sd = malloc(sizeof(float) * 4 * spectra);
    memcpy(next, c.gains, sizeof(float) * 4 * N);
    for (int i = 0; i < 4 * N; i++)
        next[i] *= 0.5f;  /* halved: a change the comparison cannot miss */
    for (size_t i = 0; i < 2 * spectra; i++) {
        sd[2 * i] = (float)(feng_uniform() - 0.5);
        sd[2 * i + 1] = (float)(2 * M_PI * feng_uniform() - M_PI);
    }
    c.fine_delay[1] = 0.25f;   /* the fixed part still applies on top */
    c.phase[0] = 1.0f;
    c.spectrum_delay = sd;
    c.next_gains = next;
    c.switch_gains = 1;
    c.gain_switch = 45;        /* inside the second heap */
    feng_result r = check_case(&c, "per-spectrum delay model, gains switched at spectrum 45");
    feng_result_free(&r);
    c.gain_switch = 0;         /* the whole run takes the new gains */
    c.spectrum_delay = NULL;
    r = check_case(&c, "gains switched at spectrum 0");
    feng_result_free(&r);
    free(next);
    free(sd);
    feng_case_free_input(&c);
    free(w);
}

static void test_bit_widths(void **state)
{
    (void)state;
    const int widths[] = {2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 16};
    float *w = new_weights(64, 8);
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        feng_case c;
        feng_case_random(&c, 64, 8, widths[i], 1, 16, 2, w);
        set_random_gains(&c, 20.0);
        char what[64];
        snprintf(what, sizeof what, "%d-bit input", widths[i]);
        feng_result r = check_case(&c, what);
        feng_result_free(&r);
        feng_case_free_input(&c);
    }
    free(w);
}

static void test_unzip_agree(void **state)
{
    (void)state;
    float *w = new_weights(1024, 16);
    feng_case c;
    feng_case_random(&c, 1024, 16, 10, 1, 16, 2, w);
    set_random_gains(&c, 30.0);
    feng_result r[3];
    const int unzips[3] = {1, 2, 4};
    for (int u = 0; u < 3; u++) {
        c.unzip = unzips[u];
        char what[32];
        snprintf(what, sizeof what, "unzip %d", unzips[u]);
        r[u] = check_case(&c, what);
    }
    for (int u = 1; u < 3; u++) {
        size_t same = 0;
        for (size_t i = 0; i < r[0].out_bytes; i++) {
            int d = abs((int8_t)r[0].out[i] - (int8_t)r[u].out[i]);
            assert_true(d <= 1);
            same += d == 0;
        }
        assert_true(same >= r[0].out_bytes - r[0].out_bytes / 1000);
    }
    for (int u = 0; u < 3; u++)
        feng_result_free(&r[u]);
    feng_case_free_input(&c);
    free(w);
}

/* A tone of amplitude A at f cycles per sample, both pols. */
static void put_tone(feng_case *c, double A, double f, double theta)
{
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < c->in_samples; i++)
            feng_ref_put(c->in[p], i, c->bits,
                         (int64_t)nearbyint(A * cos(2 * M_PI * f * (double)i + theta)));
}

/* |sum_i w_i exp(2 pi i delta i / step)|: the PFB's response to a tone
 * delta channels away from a channel's centre. */
static double response(const double *w, size_t n, size_t step, double delta)
{
    double complex acc = 0;
    for (size_t i = 0; i < n; i++)
        acc += w[i] * cexp(2 * M_PI * I * delta * (double)i / (double)step);
    return cabs(acc);
}

static void tone_case(double offset, int unzip)
{
    const int N = 256, taps = 16, k = 77;
    const size_t step = 2 * N, n = step * taps;
    float *w = new_weights(N, taps);
    double *wd = malloc(sizeof(double) * n);
    feng_ref_weights(N, taps, 1.0, 1, wd);
    feng_case c;
    feng_case_random(&c, N, taps, 10, unzip, 16, 1, w);
    const double A = 400.0, f = (k + offset) / (double)step;
    put_tone(&c, A, f, 2 * M_PI * feng_uniform());
    /* Unit gain scaled so the channel-centre response is 100 counts. */
    double g = 100.0 / (A / 2 * response(wd, n, step, 0.0));
    float *gains = (float *)c.gains;
    for (int i = 0; i < 2 * N; i++)
        gains[2 * i] = (float)g;
    feng_result r;
    char msg[512];
    if (feng_run(use_gpu, &c, &r, msg, sizeof msg))
        fail_msg("tone: %s", msg);
    for (int ch = k - 3; ch <= k + 4; ch++) {
        double expect = g * A / 2 * response(wd, n, step, k + offset - ch);
        for (int t = 0; t < 16; t++) {
            int re, im;
            out_value(&c, r.out, t % 2, (size_t)t, ch, &re, &im);
            double got = hypot(re, im);
            /* Rounding re and im moves the magnitude by at most 0.71; the
             * tone's own 10-bit rounding adds far less after the FIR. */
            if (fabs(got - expect) > 1.0)
                fail_msg("tone at channel %d%+.2f: channel %d spectrum %d has %.2f, expected %.2f",
                         k, offset, ch, t, got, expect);
        }
    }
    feng_result_free(&r);
    feng_case_free_input(&c);
    free(w);
    free(wd);
}

static void test_tone_centre(void **state)
{
    (void)state;
    tone_case(0.0, 1);
    tone_case(0.0, 4);
}

static void test_tone_between(void **state)
{
    (void)state;
    tone_case(0.5, 1);
    tone_case(0.5, 2);
    tone_case(0.25, 4);
}

static void test_saturation(void **state)
{
    (void)state;
    float *w = new_weights(128, 16);
    feng_case c;
    feng_case_random(&c, 128, 16, 10, 2, 16, 2, w);
    set_random_gains(&c, 150.0);
    /* Overdrive pol 1 only, so a count mixed up between pols shows. */
    float *g = (float *)c.gains;
    for (int k = 0; k < c.channels; k++) {
        g[4 * k] *= 0.1f;
        g[4 * k + 1] *= 0.1f;
    }
    feng_result r = check_case(&c, "overdriven");
    assert_true(r.saturated[1] > r.saturated[0]);
    assert_true(r.saturated[1] > 1000);
    feng_result_free(&r);
    feng_case_free_input(&c);
    free(w);
}

static void test_chunking(void **state)
{
    (void)state;
    float *w = new_weights(512, 16);
    feng_case c;
    feng_case_random(&c, 512, 16, 10, 2, 8, 4, w);
    set_random_gains(&c, 30.0);
    feng_result whole;
    char msg[512];
    if (feng_run(use_gpu, &c, &whole, msg, sizeof msg))
        fail_msg("%s", msg);
    const size_t splits[] = {1, 3, 7, 13};
    for (size_t i = 0; i < 4; i++) {
        c.fir_split = splits[i];
        feng_result part;
        if (feng_run(use_gpu, &c, &part, msg, sizeof msg))
            fail_msg("%s", msg);
        size_t floats = 2 * 32 * 2 * 512;
        if (memcmp(part.fir, whole.fir, floats * sizeof(float)) ||
            memcmp(part.out, whole.out, whole.out_bytes) || part.power[0] != whole.power[0] ||
            part.power[1] != whole.power[1])
            fail_msg("FIR in pieces of %zu spectra differs from one call", splits[i]);
        feng_result_free(&part);
    }
    feng_result_free(&whole);
    feng_case_free_input(&c);
    free(w);
}

static void test_coarse_delay(void **state)
{
    (void)state;
    const int N = 256, taps = 16;
    const int64_t d[2] = {5, 1234};
    float *w = new_weights(N, taps);
    feng_case a, b;
    feng_case_random(&a, N, taps, 10, 1, 8, 2, w);
    set_random_gains(&a, 30.0);
    feng_case_random(&b, N, taps, 10, 1, 8, 2, w);
    memcpy((void *)b.gains, a.gains, sizeof(float) * 4 * N);
    /* a: input x with the windows starting d samples in; b: x shifted by d. */
    for (int p = 0; p < 2; p++) {
        free(a.in[p]);
        a.in[p] = calloc(cbf_packed_bytes(b.in_samples + (size_t)d[p], 10), 1);
        for (size_t i = 0; i < b.in_samples + (size_t)d[p]; i++) {
            int64_t v = (int64_t)(feng_rand() % 1024) - 512;
            feng_ref_put(a.in[p], i, 10, v);
            if (i >= (size_t)d[p])
                feng_ref_put(b.in[p], i - (size_t)d[p], 10, v);
        }
        a.start[p] = d[p];
    }
    a.in_samples = b.in_samples + (size_t)d[1];
    feng_result ra, rb;
    char msg[512];
    if (feng_run(use_gpu, &a, &ra, msg, sizeof msg) || feng_run(use_gpu, &b, &rb, msg, sizeof msg))
        fail_msg("%s", msg);
    assert_memory_equal(ra.out, rb.out, ra.out_bytes);
    assert_int_equal(ra.power[0], rb.power[0]);
    assert_int_equal(ra.power[1], rb.power[1]);
    feng_result_free(&ra);
    feng_result_free(&rb);
    feng_case_free_input(&a);
    feng_case_free_input(&b);
    free(w);
}

/* The delay convention (katgpucbf's, docs/formats.md "Delay and phase"):
 * phases are referenced to the band centre, so a fine delay d turns a tone
 * in channel k by -pi d (k - N/2) / N, plus the phase phi, and leaves the
 * centre channel N/2 at phi whatever d is. Pol 1 (no delay) is the
 * reference for pol 0; a tone sits at the centre of channel k. */
static void test_fine_delay(void **state)
{
    (void)state;
    const int N = 256, taps = 16, channels[] = {N / 2, 100, 200};
    float *w = new_weights(N, taps);
    double *wd = malloc(sizeof(double) * 2 * N * taps);
    feng_ref_weights(N, taps, 1.0, 1, wd);
    const double delays[] = {0.37, -0.5, 2.25, feng_uniform() - 0.5};
    for (size_t j = 0; j < sizeof channels / sizeof channels[0]; j++) {
        const int k = channels[j];
        feng_case c;
        feng_case_random(&c, N, taps, 10, 1, 8, 1, w);
        put_tone(&c, 400.0, k / (2.0 * N), 0.3);
        double g = 100.0 / (200.0 * response(wd, 2 * (size_t)N * taps, 2 * N, 0.0));
        float *gains = (float *)c.gains;
        for (int i = 0; i < 2 * N; i++)
            gains[2 * i] = (float)g;
        for (int i = 0; i < 4; i++) {
            const double phi = 2 * M_PI * feng_uniform() - M_PI;
            c.fine_delay[0] = (float)delays[i];
            c.phase[0] = (float)phi;
            feng_result r;
            char msg[512];
            if (feng_run(use_gpu, &c, &r, msg, sizeof msg))
                fail_msg("%s", msg);
            for (size_t t = 0; t < 8; t++) {
                int re0, im0, re1, im1;
                out_value(&c, r.out, 0, t, k, &re0, &im0);
                out_value(&c, r.out, 1, t, k, &re1, &im1);
                double got = carg((re0 + I * im0) / (re1 + I * im1));
                double expect = carg(cexp(I * (-M_PI * delays[i] * (k - N / 2) / N + phi)));
                double err = fabs(carg(cexp(I * (got - expect))));
                /* Rounding each part of a 100-count value moves its angle by
                 * at most 0.0071 rad; two values compared: 0.015. */
                if (err > 0.015)
                    fail_msg("channel %d, fine delay %g, phase %.4f: phase %.4f, expected %.4f",
                             k, delays[i], phi, got, expect);
            }
            feng_result_free(&r);
        }
        feng_case_free_input(&c);
    }
    free(w);
    free(wd);
}

static void test_missing_heap(void **state)
{
    (void)state;
    const size_t heap = 4096, heaps = 64, step = 2 * 1024, taps = 16, window = step * taps;
    const int sph = 4;
    const int64_t start[2] = {100, 2100};
    const size_t spectra = (heaps * heap - window - 2100) / step / sph * sph;
    uint8_t flags[2 * 64], pres[128], batch[32], expect[32];
    uint32_t scratch[65];
    for (int trial = 0; trial < 20; trial++) {
        memset(flags, 1, sizeof flags);
        size_t pol = feng_rand() % 2, h = feng_rand() % heaps;
        flags[pol * heaps + h] = 0;
        char msg[256];
        assert_int_equal(cbf_pfb_spectrum_presence(flags, heaps, heap, start, step, window,
                                                   spectra, scratch, pres, msg, sizeof msg), 0);
        cbf_fft_post_batch_presence(pres, spectra, sph, batch);
        /* Brute force: a batch is missing when any of its spectra's windows
         * overlaps the missing heap's samples. */
        int64_t lo = (int64_t)(h * heap), hi = lo + (int64_t)heap;
        for (size_t b = 0; b < spectra / sph; b++) {
            expect[b] = 1;
            for (int t = 0; t < sph; t++) {
                int64_t a = start[pol] + (int64_t)((b * sph + (size_t)t) * step);
                if (a < hi && a + (int64_t)window > lo)
                    expect[b] = 0;
            }
        }
        assert_memory_equal(batch, expect, spectra / sph);
    }
    /* Windows reaching before the first or past the last heap are missing. */
    memset(flags, 1, sizeof flags);
    const int64_t early[2] = {-1, 0};
    char msg[256];
    cbf_pfb_spectrum_presence(flags, heaps, heap, early, step, window, 2, scratch, pres, msg,
                              sizeof msg);
    assert_int_equal(pres[0], 0);
    assert_int_equal(pres[1], 1);
}

int main(int argc, char **argv)
{
    use_gpu = argc > 1 && !strcmp(argv[1], "--gpu");
    if (use_gpu && !feng_have_gpu()) {
        printf("SKIP: no CUDA GPU here (or built without CUDA)\n");
        return 77;
    }
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    if (getenv("FENG_SEED"))
        seed = strtoull(getenv("FENG_SEED"), NULL, 0);
    feng_seed(seed);
    printf("# %s kernels, seed %llu (FENG_SEED=%llu repeats it)\n", use_gpu ? "CUDA" : "CPU",
           (unsigned long long)seed, (unsigned long long)seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weights),
        cmocka_unit_test(test_chain_random),
        cmocka_unit_test(test_dft_corner),
        cmocka_unit_test(test_bit_widths),
        cmocka_unit_test(test_unzip_agree),
        cmocka_unit_test(test_tone_centre),
        cmocka_unit_test(test_tone_between),
        cmocka_unit_test(test_saturation),
        cmocka_unit_test(test_chunking),
        cmocka_unit_test(test_coarse_delay),
        cmocka_unit_test(test_fine_delay),
        cmocka_unit_test(test_spectrum_delay_and_gain_switch),
        cmocka_unit_test(test_missing_heap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
