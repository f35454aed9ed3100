/* test_feng.c: the wideband F-engine kernels (pfb + fft_post) against the
 * float64 model in feng_ref.c. Run with --gpu for the CUDA kernels (exit 77,
 * skipped, without a GPU); the same cases hold on both.
 *
 * Tolerance: float32 FIR and FFT arithmetic leaves errors near 1e-5 of the
 * value before rounding; an output rounds differently from the float64
 * model only when its exact value lies that close to a half-integer, so at
 * most one step off and on far fewer than 0.1% of values (docs/feng.md, Tests).
 * Saturation counts are exact except for values within 1e-3 of the clip
 * edge, which the test counts as ambiguous and allows either way.
 *
 * Dither: the cases run with fft_post's dither off (the kernel's config
 * default, feng_case.dither = 0) are held against the undithered model,
 * which shows that dither off leaves today's output; the dither tests add
 * the dither docs/formats.md defines to the float64 values before rounding,
 * with the same tolerance.
 *
 * --gpu --dx: fft_post's fused cuFFTDx FFT + post kernel (cfg.fft cufftdx)
 * on the shapes it runs, 4096 and 8192 channels at unzip 1, held against
 * the same model with the same tolerance; exit 77 where it cannot run
 * (no GPU, built without cuFFTDx, not an sm_90 GPU), saying why. */
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

#include "dither.h"
#include "fft_post.h"
#include "fft_post_dither.h"
#include "feng_ref.h"
#include "feng_run.h"
#include "pfb.h"

static int use_gpu, use_dx;

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

/* The dither value of 16 bits j, in float64, from its definition
 * (docs/formats.md "Dither"): (j + 1/2) 2^-16 - 1/2 (exact in float32 too). */
static double ref_dither_value(uint32_t h)
{
    return ((double)(h & 0xffffu) + 0.5) * 0x1p-16 - 0.5;
}

/* fft_post's dither of (pol, spectrum sp of the run, channel k), written
 * from docs/formats.md: one draw per pair {k, N - k}, q = min(k, N - k),
 * counter ((s N + q) 2 + pol) 65536 + antenna for the absolute spectrum s;
 * k <= N/2 takes the draw's high 32 bits, the channel above the low 32,
 * whose high 16 dither re and low 16 im. */
static double complex ref_dither(const feng_case *c, int pol, size_t sp, int k)
{
    const uint64_t s = c->first_spectrum + sp, N = (uint64_t)c->channels;
    const uint64_t q = (uint64_t)k <= N / 2 ? (uint64_t)k : N - (uint64_t)k;
    const uint64_t ctr = ((s * N + q) * 2 + (uint64_t)pol) * 65536 + (uint64_t)c->dither_antenna;
    const uint64_t u = cbf_dither_u64(c->dither_key, ctr);
    const uint32_t h = (uint64_t)k <= N / 2 ? (uint32_t)(u >> 32) : (uint32_t)u;
    return ref_dither_value(h >> 16) + I * ref_dither_value(h);
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
                if (c->dither)
                    X[k] += ref_dither(c, pol, sp, k);
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

/* Different coarse offsets per pol (s1 >= s0; the input grows by s1, fresh
 * random samples) and random fine delays and phases. */
static void random_offsets_delays(feng_case *c, int64_t s0, int64_t s1)
{
    c->start[0] = s0;
    c->start[1] = s1;
    c->in_samples += (size_t)s1;
    for (int p = 0; p < 2; p++) {
        size_t bytes = cbf_packed_bytes(c->in_samples, c->bits);
        c->in[p] = realloc(c->in[p], bytes);
        for (size_t i = 0; i < bytes; i++)
            c->in[p][i] = (uint8_t)feng_rand();
        c->fine_delay[p] = (float)(feng_uniform() - 0.5);
        c->phase[p] = (float)(2 * M_PI * feng_uniform() - M_PI);
    }
}

static void test_chain_random(void **state)
{
    (void)state;
    float *w = new_weights(256, 16);
    feng_case c;
    feng_case_random(&c, 256, 16, 10, 1, 32, 2, w);
    set_random_gains(&c, 25.0);
    random_offsets_delays(&c, 3, 17);
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

/* Dither on (docs/formats.md "Dither"): every output value against the
 * float64 model with the documented dither added before rounding, with the
 * chain tests' tolerance (at most 1 LSB off, >= 99.9% exact: the float32
 * transform's errors, dither or not), at a large absolute spectrum, a
 * random key and antenna, 8-bit and 4-bit. Outputs near 3 (1.5) counts
 * rms, where dither matters. The undithered model then misses about 44%
 * of the values (a part x + d rounds away from round(x) with probability
 * |frac(x)|, 1/4 on average; either of two parts: 7/16), so the check
 * tells dither from none: at most 90% may match it. */
static void test_dither_reference(void **state)
{
    (void)state;
    float *w = new_weights(256, 16);
    feng_case c;
    feng_case_random(&c, 256, 16, 10, 2, 16, 2, w);
    c.dither = 1;
    c.dither_key = feng_rand();
    c.dither_antenna = (int)(feng_rand() % 65536);
    c.first_spectrum = feng_rand() >> 24;
    for (int p = 0; p < 2; p++) {
        c.fine_delay[p] = (float)(feng_uniform() - 0.5);
        c.phase[p] = (float)(2 * M_PI * feng_uniform() - M_PI);
    }
    const int bits[2] = {8, 4};
    const double rms[2] = {3.0, 1.5};
    for (int i = 0; i < 2; i++) {
        c.out_bits = bits[i];
        set_random_gains(&c, rms[i]);
        char what[64];
        snprintf(what, sizeof what, "dither on, %d-bit output", bits[i]);
        feng_result r = check_case(&c, what);
        cmp_stats st;
        c.dither = 0;
        compare(&c, &r, &st);
        c.dither = 1;
        if (st.exact > st.n / 10 * 9)
            fail_msg("%s: %zu of %zu values equal the undithered model: no dither?", what,
                     st.exact, st.n);
        feng_result_free(&r);
    }
    feng_case_free_input(&c);
    free(w);
}

/* The dither is a function of the key, the antenna and the absolute
 * spectrum only: the same case repeats exactly; the second half of a run
 * equals a run of its own that starts there (first_spectrum advanced), as
 * any cut of the stream into buffers; another key, another antenna or a
 * wrongly numbered spectrum changes many values. */
static void test_dither_runs(void **state)
{
    (void)state;
    const int N = 256, sph = 8;
    const size_t step = 2 * (size_t)N;
    float *w = new_weights(N, 16);
    feng_case c;
    feng_case_random(&c, N, 16, 10, 1, sph, 4, w);
    set_random_gains(&c, 3.0);
    c.dither = 1;
    c.dither_key = feng_rand() >> 11;
    c.dither_antenna = 3;
    c.first_spectrum = 1000 + feng_rand() % 1000;
    feng_result whole, again, part;
    char msg[512];
    if (feng_run(use_gpu, &c, &whole, msg, sizeof msg) ||
        feng_run(use_gpu, &c, &again, msg, sizeof msg))
        fail_msg("%s", msg);
    assert_memory_equal(whole.out, again.out, whole.out_bytes);
    feng_result_free(&again);
    /* Batches 2 and 3 alone: windows from spectrum 2 sph of the same input. */
    feng_case h = c;
    h.batches = 2;
    h.start[0] = h.start[1] = (int64_t)(2 * sph * step);
    h.first_spectrum = c.first_spectrum + 2 * sph;
    if (feng_run(use_gpu, &h, &part, msg, sizeof msg))
        fail_msg("%s", msg);
    assert_int_equal(part.out_bytes, whole.out_bytes / 2);
    assert_memory_equal(part.out, whole.out + whole.out_bytes / 2, part.out_bytes);
    feng_result_free(&part);
    /* Each of these must change a good share of the values (7/16 expected). */
    feng_case changed[3] = {h, h, h};
    changed[0].dither_key ^= 1;
    changed[1].dither_antenna = 4;
    changed[2].first_spectrum = c.first_spectrum;
    const char *what[3] = {"another key", "another antenna", "the run's own numbering"};
    for (int i = 0; i < 3; i++) {
        if (feng_run(use_gpu, &changed[i], &part, msg, sizeof msg))
            fail_msg("%s", msg);
        size_t differ = 0;
        for (size_t j = 0; j < part.out_bytes; j += 2)
            differ += memcmp(part.out + j, whole.out + whole.out_bytes / 2 + j, 2) != 0;
        if (differ < part.out_bytes / 2 / 5)
            fail_msg("%s: only %zu of %zu values differ", what[i], differ, part.out_bytes / 2);
        feng_result_free(&part);
    }
    feng_result_free(&whole);
    feng_case_free_input(&c);
    free(w);
}

/* FIR rows whose transforms are exact in float32 on any FFT: one non-zero
 * value, the first of each row (an impulse: every bin equals it, the
 * post-processing's unit twiddles keep it). Pol p of spectrum t gets
 * value(p, t); the rest 0. */
static float *impulse_rows(const cbf_fft_post_config *cfg, double (*value)(int, size_t))
{
    const size_t row = cbf_fft_post_row_floats(cfg), n = 2 * cfg->spectra * row;
    float *fir = calloc(n, sizeof(float));
    for (int p = 0; p < 2; p++)
        for (size_t t = 0; t < cfg->spectra; t++)
            fir[((size_t)p * cfg->spectra + t) * row] = (float)value(p, t);
    return fir;
}

/* The dither's statistics, four values per draw (docs/formats.md
 * "Dither"): over 2^20 draws (consecutive pairs of both pols, spectrum
 * after spectrum, a random key), each of a draw's four values (re and im
 * of channels q and N - q) lies in (-1/2, 1/2) and has mean 0 and variance
 * 1/12 within 5 standard errors (2.8e-4 and 7.3e-5: the variance of x^2 is
 * 1/180), and no two of them correlate (|r| < 5 / sqrt(2^20) = 4.9e-3):
 * four values from one hash stay independent. */
static void test_dither_statistics(void **state)
{
    (void)state;
    const uint64_t key = feng_rand(), N = 4096;
    const int draws = 1 << 20;
    double sum[4] = {0}, sq[4] = {0}, cross[4][4] = {{0}};
    for (int d = 0; d < draws; d++) {
        const uint64_t pair = (uint64_t)d >> 1, s = pair / (N / 2 - 1), q = 1 + pair % (N / 2 - 1);
        const int pol = d & 1;
        const uint64_t u = cbf_fft_post_dither_draw(key, s, N, q, pol, 7);
        float v[4] = {0, 0, 0, 0};
        cbf_fft_post_dither_add(cbf_fft_post_dither_bits(u, N, q), &v[0], &v[1]);
        cbf_fft_post_dither_add(cbf_fft_post_dither_bits(u, N, N - q), &v[2], &v[3]);
        for (int i = 0; i < 4; i++) {
            if (!(v[i] > -0.5f && v[i] < 0.5f))
                fail_msg("draw %d value %d: %g outside (-1/2, 1/2)", d, i, (double)v[i]);
            sum[i] += v[i];
            sq[i] += (double)v[i] * v[i];
            for (int j = 0; j < i; j++)
                cross[i][j] += (double)v[i] * v[j];
        }
    }
    const double n = draws, se_mean = sqrt(1.0 / 12 / n), se_var = sqrt(1.0 / 180 / n);
    for (int i = 0; i < 4; i++) {
        const double mean = sum[i] / n, var = sq[i] / n - mean * mean;
        if (fabs(mean) > 5 * se_mean || fabs(var - 1.0 / 12) > 5 * se_var)
            fail_msg("value %d of a draw: mean %.5f, variance %.5f (want 0, %.5f)", i, mean, var,
                     1.0 / 12);
        for (int j = 0; j < i; j++) {
            const double r = (cross[i][j] / n - mean * (sum[j] / n)) / (1.0 / 12);
            if (fabs(r) > 5 / sqrt(n))
                fail_msg("values %d and %d of a draw correlate: r = %.5f", i, j, r);
        }
    }
}

static double unit_value(int p, size_t t)
{
    (void)p;
    (void)t;
    return 1.0;
}

/* Dither never moves a value that is an integer already (its largest
 * size, 1/2 - 2^-17, still rounds back, up to 127): unit impulses times
 * integer gains give exactly the gains, dither on, every mode. */
static void test_dither_keeps_integers(void **state)
{
    (void)state;
    const int N = 128;
    const cbf_fft_post_config cfgs[] = {
        {N, 1, 8, 16, 8, 0, 0, 1, 7, 5},  {N, 4, 8, 16, 8, 0, 0, 1, 7, 5},
        {N, 2, 8, 16, 4, 0, 0, 1, 7, 5},  {N, 1, 8, 16, 8, 1, 0, 1, 7, 5},
        {N, 1, 8, 16, 8, 1, 1, 1, 7, 5},
    };
    float gains[4 * 128];
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        const cbf_fft_post_config *cfg = &cfgs[i];
        const int lim = cfg->out_bits == 8 ? 127 : 7;
        for (int j = 0; j < 4 * N; j++)
            gains[j] = (float)((int)(feng_rand() % (uint64_t)(2 * lim + 1)) - lim);
        float *fir = impulse_rows(cfg, unit_value);
        uint8_t *out = malloc(cbf_fft_post_out_bytes(cfg));
        char msg[512];
        if (feng_post_only(use_gpu, cfg, fir, gains, feng_rand() >> 20, out, msg, sizeof msg))
            fail_msg("config %zu: %s", i, msg);
        feng_case shape = {.channels = N, .spectra_per_heap = 8, .out_bits = cfg->out_bits};
        for (int p = 0; p < 2; p++)
            for (size_t t = 0; t < cfg->spectra; t++)
                for (int k = 0; k < N; k++) {
                    int re, im;
                    out_value(&shape, out, p, t, k, &re, &im);
                    if (re != (int)gains[4 * k + 2 * p] || im != (int)gains[4 * k + 2 * p + 1])
                        fail_msg("config %zu pol %d spectrum %zu channel %d: %d%+di, gain %g%+gi",
                                 i, p, t, k, re, im, gains[4 * k + 2 * p],
                                 gains[4 * k + 2 * p + 1]);
                }
        free(out);
        free(fir);
    }
}

/* A tone's time series in one channel, for the dither's effect. */
typedef struct tone_series {
    double complex *y[2];   /* [pol][spectrum] output values of the channel */
    size_t T;
} tone_series;

/* Tone of amplitude A at channel k0 + b0 / T (its phase turns b0 / T of a
 * cycle per spectrum), the gain set so that the channel's value has
 * amplitude `level` counts (from the float64 PFB response); T spectra. */
static tone_series tone_run(int dither, double level, int k0, int b0, size_t T)
{
    const int N = 256, taps = 16, sph = 256;
    const size_t step = 2 * N, n = step * taps;
    float *w = new_weights(N, taps);
    double *wd = malloc(sizeof(double) * n);
    feng_ref_weights(N, taps, 1.0, 1, wd);
    feng_case c;
    feng_case_random(&c, N, taps, 10, 1, sph, (int)(T / sph), w);
    const double A = 400.0, off = (double)b0 / (double)T;
    put_tone(&c, A, (k0 + off) / (double)step, 0.7);
    const double g = level / (A / 2 * response(wd, n, step, off));
    float *gains = (float *)c.gains;
    for (int i = 0; i < 2 * N; i++)
        gains[2 * i] = (float)g;
    c.dither = dither;
    c.dither_key = 1;
    c.first_spectrum = 12345;
    feng_result r;
    char msg[512];
    if (feng_run(use_gpu, &c, &r, msg, sizeof msg))
        fail_msg("tone: %s", msg);
    tone_series ts = {{malloc(sizeof(double complex) * T), malloc(sizeof(double complex) * T)}, T};
    for (int p = 0; p < 2; p++)
        for (size_t t = 0; t < T; t++) {
            int re, im;
            out_value(&c, r.out, p, t, k0, &re, &im);
            ts.y[p][t] = re + I * im;
        }
    feng_result_free(&r);
    feng_case_free_input(&c);
    free(w);
    free(wd);
    return ts;
}

/* |Y(b)|^2 for every b, Y(b) = 1/T sum_t y_t exp(-2 pi i b t / T). */
static void power_spectrum(const double complex *y, size_t T, double *P)
{
    double complex *tw = malloc(sizeof(double complex) * T);
    for (size_t j = 0; j < T; j++)
        tw[j] = cexp(-2 * M_PI * I * (double)j / (double)T);
    for (size_t b = 0; b < T; b++) {
        double complex acc = 0;
        for (size_t t = 0; t < T; t++)
            acc += y[t] * tw[(b * t) % T];
        P[b] = creal(acc * conj(acc)) / ((double)T * (double)T);
    }
    free(tw);
}

/* The effect of dither on a low-level tone (issue 19; katgpucbf dithers
 * for linearity). Per pol, the channel's T = 4096 values, their spectrum
 * over time; the tone turns b0 = 37 bins per T spectra. The input is a
 * 10-bit tone with no noise, so the channel's value without dither is a
 * clean rotating phasor (the 10-bit rounding reaches it ~1e-8 counts rms
 * at these gains) and its quantisation error is deterministic.
 *
 * 1. A tone of 0.3 counts, below half an LSB: without dither every value
 *    is 0 (the tone is gone); with dither the tone is there on average:
 *    |Y(b0)| within 0.06 of 0.3. Why 0.06: with uniform dither the total
 *    error of a part has mean 0 for any value and variance f (1 - f) <=
 *    1/4 (f its fractional part), independent from spectrum to spectrum,
 *    so Y(b0) is off by a complex error of variance <= 1/(2T), standard
 *    deviation <= 0.011: 0.06 is over 5 of them.
 * 2. A tone of 1.3 counts: without dither, rounding a phasor makes odd
 *    harmonics ((1 - 4j) b0; the -3rd is -17 dB here, the spur-free
 *    dynamic range 17 dB, from simulating the rounding in float64);
 *    with dither the error is white: every other bin has mean power
 *    <= 1/(2T) = 1.2e-4, -41.4 dB below the tone's 1.69, exponentially
 *    distributed. Asserted: without dither SFDR < 20 dB and the largest of
 *    the harmonics -3, 5, -7 above -25 dB; with dither SFDR > 26 dB (the
 *    largest of 4095 bins above 30 x the mean: probability 4095 e^-30 =
 *    4e-10) and those harmonics below -30 dB (11.4 dB over the mean, 13.8
 *    x: 3 e^-13.8 = 3e-6), the tone's power within 10% of 1.69 (its error
 *    0.011 in amplitude is 1.7% of the power), and dither improves the
 *    SFDR by at least 6 dB (17 dB expected). */
static void test_dither_tone(void **state)
{
    (void)state;
    const int k0 = 77, b0 = 37;
    const size_t T = 4096;
    double *P = malloc(sizeof(double) * T);
    for (int dither = 0; dither < 2; dither++) {
        tone_series ts = tone_run(dither, 0.3, k0, b0, T);
        for (int p = 0; p < 2; p++) {
            power_spectrum(ts.y[p], T, P);
            const double amp = sqrt(P[b0]);
            size_t nonzero = 0;
            for (size_t t = 0; t < T; t++)
                nonzero += ts.y[p][t] != 0;
            printf("# 0.3-count tone, dither %d, pol %d: |Y(b0)| %.4f, %zu of %zu values non-zero\n",
                   dither, p, amp, nonzero, T);
            if (!dither && nonzero)
                fail_msg("0.3-count tone without dither: %zu values non-zero", nonzero);
            if (dither && fabs(amp - 0.3) > 0.06)
                fail_msg("0.3-count tone with dither, pol %d: |Y(b0)| %.4f, expected 0.3 +- 0.06",
                         p, amp);
        }
        free(ts.y[0]);
        free(ts.y[1]);
    }
    double sfdr[2][2];
    for (int dither = 0; dither < 2; dither++) {
        tone_series ts = tone_run(dither, 1.3, k0, b0, T);
        for (int p = 0; p < 2; p++) {
            power_spectrum(ts.y[p], T, P);
            double spur = 0, harm = 0;
            for (size_t b = 0; b < T; b++)
                if (b != (size_t)b0 && P[b] > spur)
                    spur = P[b];
            const int h[3] = {-3, 5, -7};
            for (int j = 0; j < 3; j++) {
                size_t b = (size_t)(((h[j] * b0) % (int)T + (int)T) % (int)T);
                harm = P[b] > harm ? P[b] : harm;
            }
            sfdr[dither][p] = 10 * log10(P[b0] / spur);
            const double harm_db = 10 * log10(harm / P[b0] + 1e-300);
            printf("# 1.3-count tone, dither %d, pol %d: power %.4f (1.69), SFDR %.1f dB, "
                   "harmonics -3, 5, -7 at most %.1f dB\n",
                   dither, p, P[b0], sfdr[dither][p], harm_db);
            if (!dither && (sfdr[0][p] > 20 || harm_db < -25))
                fail_msg("without dither, pol %d: SFDR %.1f dB, harmonics %.1f dB: expected the "
                         "rounding's spurs", p, sfdr[0][p], harm_db);
            if (dither && (sfdr[1][p] < 26 || harm_db > -30 || fabs(P[b0] / 1.69 - 1) > 0.1))
                fail_msg("with dither, pol %d: SFDR %.1f dB, harmonics %.1f dB, power %.4f", p,
                         sfdr[1][p], harm_db, P[b0]);
        }
        free(ts.y[0]);
        free(ts.y[1]);
    }
    for (int p = 0; p < 2; p++)
        if (sfdr[1][p] - sfdr[0][p] < 6)
            fail_msg("pol %d: dither improves the SFDR by %.1f dB only", p, sfdr[1][p] - sfdr[0][p]);
    free(P);
}

static double impulse_value(int p, size_t t)
{
    /* Any float: values mixed in size, so gains make fractional outputs. */
    return (double)((int)((p * 7919 + t * 104729) % 2001) - 1000) / 37.0;
}

/* GPU only: the CUDA kernels dither exactly as the CPU's. Where the values
 * before dither are equal on both (impulse rows: exact transforms; any
 * gains), the outputs are equal byte for byte, dither on, in every mode;
 * dither changes about 7/16 of them, so equality is not for want of it.
 * Then a random chain, where the two FFTs round differently: at most 1 LSB
 * apart and >= 99.9% equal (as each against the model; a GPU drawing other
 * dither would differ on ~7/16). */
static void test_dither_cpu_gpu(void **state)
{
    (void)state;
    if (!use_gpu)
        skip();
    const int N = 256;
    const uint64_t key = feng_rand(), first = feng_rand() >> 22;
    const cbf_fft_post_config cfgs[] = {
        {N, 1, 16, 64, 8, 0, 0, 1, key, 17}, {N, 2, 16, 64, 8, 0, 0, 1, key, 17},
        {N, 4, 16, 64, 4, 0, 0, 1, key, 17}, {N, 1, 16, 64, 8, 1, 0, 1, key, 17},
        {N, 1, 16, 64, 4, 1, 1, 1, key, 17},
    };
    float gains[4 * 256];
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        cbf_fft_post_config cfg = cfgs[i];
        const double rms = cfg.out_bits == 8 ? 20.0 : 3.0;
        for (int j = 0; j < 4 * N; j++)
            gains[j] = (float)(rms / 15.0 * (2 * feng_uniform() - 1));
        float *fir = impulse_rows(&cfg, impulse_value);
        const size_t bytes = cbf_fft_post_out_bytes(&cfg);
        uint8_t *cpu = malloc(bytes), *gpu = malloc(bytes), *plain = malloc(bytes);
        char msg[512];
        if (feng_post_only(0, &cfg, fir, gains, first, cpu, msg, sizeof msg) ||
            feng_post_only(1, &cfg, fir, gains, first, gpu, msg, sizeof msg))
            fail_msg("config %zu: %s", i, msg);
        if (memcmp(cpu, gpu, bytes)) {
            size_t differ = 0;
            for (size_t j = 0; j < bytes; j++)
                differ += cpu[j] != gpu[j];
            fail_msg("config %zu (unzip %d, complex %d, keep_all %d, %d-bit): %zu of %zu bytes "
                     "differ between CPU and GPU", i, cfg.unzip, cfg.complex_in, cfg.keep_all,
                     cfg.out_bits, differ, bytes);
        }
        cfg.dither = 0;
        if (feng_post_only(0, &cfg, fir, gains, first, plain, msg, sizeof msg))
            fail_msg("config %zu: %s", i, msg);
        size_t changed = 0;
        for (size_t j = 0; j < bytes; j++)
            changed += plain[j] != cpu[j];
        assert_true(changed > bytes / 8);
        free(cpu);
        free(gpu);
        free(plain);
        free(fir);
    }

    float *w = new_weights(N, 16);
    feng_case c;
    feng_case_random(&c, N, 16, 10, 2, 32, 2, w);
    set_random_gains(&c, 3.0);
    c.dither = 1;
    c.dither_key = key;
    c.dither_antenna = 9;
    c.first_spectrum = first;
    feng_result rc, rg;
    char msg[512];
    if (feng_run(0, &c, &rc, msg, sizeof msg) || feng_run(1, &c, &rg, msg, sizeof msg))
        fail_msg("%s", msg);
    size_t n = rc.out_bytes / 2, same = 0;
    for (size_t j = 0; j < n; j++) {
        int dr = abs((int8_t)rc.out[2 * j] - (int8_t)rg.out[2 * j]);
        int di = abs((int8_t)rc.out[2 * j + 1] - (int8_t)rg.out[2 * j + 1]);
        if (dr > 1 || di > 1)
            fail_msg("random chain: value %zu differs by more than 1 LSB", j);
        same += dr == 0 && di == 0;
    }
    if (same < n - n / 1000)
        fail_msg("random chain, dither on: %zu of %zu values equal on CPU and GPU", same, n);
    feng_result_free(&rc);
    feng_result_free(&rg);
    feng_case_free_input(&c);
    free(w);
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

/* The fused kernel (--dx): every path its templates and group sizes take.
 * A: 8-bit, different coarse offsets, fixed delays and phases, a
 * per-spectrum delay model, gains switched at spectrum 5 (inside a group
 * of 4 spectra, so per spectrum), dither (delay model and dither kernel).
 * B: 4-bit with dither alone, the engine's usual run (dither is on by
 * default in the plugin). C: 3 spectra per heap (one spectrum per block),
 * neither, gains that saturate a good share of values. D: 8192 channels. */
static void dx_case(int channels, int sph, int batches, int out_bits, double rms, int extras,
                    int dither, const char *what)
{
    float *w = new_weights(channels, 16);
    feng_case c;
    feng_case_random(&c, channels, 16, 10, 1, sph, batches, w);
    c.fft = CBF_FFT_POST_FFT_CUFFTDX;
    c.out_bits = out_bits;
    set_random_gains(&c, rms);
    const size_t spectra = (size_t)sph * batches;
    float *next = NULL, *sd = NULL;
    if (extras) {
        random_offsets_delays(&c, 5, 40);
        next = malloc(sizeof(float) * 4 * (size_t)channels);
        sd = malloc(sizeof(float) * 4 * spectra);
        for (int i = 0; i < 4 * channels; i++)
            next[i] = 0.5f * c.gains[i];
        for (size_t i = 0; i < 2 * spectra; i++) {
            sd[2 * i] = (float)(feng_uniform() - 0.5);
            sd[2 * i + 1] = (float)(2 * M_PI * feng_uniform() - M_PI);
        }
        c.spectrum_delay = sd;
        c.next_gains = next;
        c.switch_gains = 1;
        c.gain_switch = 5;
    }
    if (dither) {
        c.dither = 1;
        c.dither_key = feng_rand();
        c.dither_antenna = (int)(feng_rand() % 65536);
        c.first_spectrum = feng_rand() >> 24;
    }
    feng_result r = check_case(&c, what);
    feng_result_free(&r);
    free(next);
    free(sd);
    feng_case_free_input(&c);
    free(w);
}

static void test_dx_4096_delays_switch_dither(void **state)
{
    (void)state;
    dx_case(4096, 8, 2, 8, 25.0, 1, 1,
            "fused, 4096 channels: delays, delay model, gain switch at 5, dither");
}

static void test_dx_4096_4bit_dither(void **state)
{
    (void)state;
    dx_case(4096, 8, 2, 4, 3.0, 0, 1, "fused, 4096 channels: 4-bit, dither");
}

static void test_dx_4096_group1_saturating(void **state)
{
    (void)state;
    dx_case(4096, 3, 2, 8, 150.0, 0, 0, "fused, 4096 channels: 3 spectra per heap, saturating");
}

static void test_dx_8192(void **state)
{
    (void)state;
    dx_case(8192, 4, 2, 8, 25.0, 1, 0, "fused, 8192 channels: delays, delay model, gain switch");
}

int main(int argc, char **argv)
{
    use_gpu = argc > 1 && !strcmp(argv[1], "--gpu");
    use_dx = use_gpu && argc > 2 && !strcmp(argv[2], "--dx");
    if (use_gpu && !feng_have_gpu()) {
        printf("SKIP: no CUDA GPU here (or built without CUDA)\n");
        return 77;
    }
#ifdef CBF_HAVE_CUDA
    if (use_dx) {
        cbf_fft_post_config probe = {4096, 1, 8, 16, 8, 0};
        char why[256];
        if (cbf_fft_post_cuda_fused_check(&probe, why, sizeof why)) {
            printf("SKIP: the fused cuFFTDx kernel cannot run here: %s\n", why);
            return 77;
        }
    }
#endif
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    if (getenv("FENG_SEED"))
        seed = strtoull(getenv("FENG_SEED"), NULL, 0);
    feng_seed(seed);
    printf("# %s kernels, seed %llu (FENG_SEED=%llu repeats it)\n",
           use_dx ? "fused cuFFTDx" : use_gpu ? "CUDA" : "CPU",
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
        cmocka_unit_test(test_dither_reference),
        cmocka_unit_test(test_dither_runs),
        cmocka_unit_test(test_dither_keeps_integers),
        cmocka_unit_test(test_dither_statistics),
        cmocka_unit_test(test_dither_tone),
        cmocka_unit_test(test_dither_cpu_gpu),
    };
    const struct CMUnitTest dx_tests[] = {
        cmocka_unit_test(test_dx_4096_delays_switch_dither),
        cmocka_unit_test(test_dx_4096_4bit_dither),
        cmocka_unit_test(test_dx_4096_group1_saturating),
        cmocka_unit_test(test_dx_8192),
    };
    if (use_dx)
        return cmocka_run_group_tests(dx_tests, NULL, NULL);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
