/* Narrowband delay tracking through the control plane, on a running
 * pipeline (in-process engine, control socket on ipc://).
 *
 * dsim makes two antennas of the same three tones, antenna 1 delayed by
 * D = 45.3 digitiser samples. Four narrowband chains (ddc -> pfb ->
 * fft_post, 256 channels of fs / 4096, 4096 digitiser samples a spectrum,
 * tones at the centres of channels 37, 128 and 203), in two frequency
 * plans: S = 8 keeping the inner half (centre 3 fs / 16), and S = 16
 * keeping the whole band (pass_bandwidth 80 MHz, centre 5 fs / 32):
 *   u: antenna 0, no delay (the undelayed signal);
 *   n: antenna 1, no delay;
 *   r: antenna 1, `delays` requests at T: delay -D, phase 2 pi f_c D / fs
 *      (the centre frequency's fringe term, which the delay leaves to the
 *      phase); pol 1 also with a delay rate, so its coarse delay walks
 *      across several ddc outputs, inside buffers;
 *   s: antenna 1, the same delay as static parameters (pfb coarse_delay in
 *      ddc outputs, fft_post fine_delay in digitiser samples and phase).
 * Checks:
 *   - timing: every spectrum of r before T equals n byte for byte, every
 *     one from T on equals s in pol 0 (at most 1 LSB off, >= 99.9% exact:
 *     the two paths round the rotation differently) and differs from n;
 *   - the float64 prediction: before T each tone channel of r is u's turned
 *     by -2 pi f D / fs (f the tone's frequency: the delay the dsim made),
 *     from T on it equals u (the delay undone, across the band), in pol 1
 *     turned by -2 pi (f - f_c) rate (t - T) / fs (the delay left over,
 *     about the centre), within the quantisation's bound;
 *   - the reply's coarse and fine delay.
 * A wrong mixer correction turns every channel by a constant, a wrong fine
 * delay sign or unit tilts the phase across the channels; either fails the
 * prediction by far more than its bound. `--gpu` runs the engine on the GPU
 * (77 without one). */
#include <complex.h>
#include <math.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capture_read.h"
#include "feng_run.h"
#include "inproc.h"

#define FS 1712e6
#define N_CH 256
#define SPECTRUM ((int64_t)4096)             /* digitiser samples between spectra, both plans */
#define SPB 32                           /* spectra per buffer (one heap) */
#define B (SPB * SPECTRUM)                   /* digitiser samples per output buffer */
#define CHUNK 65536
#define LENGTH (1 << 22)
#define T_DELAY (16 * B + 5 * SPECTRUM + 100)  /* inside buffer 16, from its spectrum 6 */
#define FROM (12 * B)
#define TO (22 * B)
#define D_PHYS 45.3                      /* antenna 1's delay, digitiser samples */
#define RATE1 6e-5                       /* pol 1's delay rate in r, s/s */
#define GAIN 0.025

/* A frequency plan. Centres at exact fixed-point mixer steps, so the tones
 * sit exactly at channel centres. */
typedef struct plan {
    const char *name;
    int S;           /* ddc decimation */
    double fc, pass; /* centre; pass_bandwidth (0: keep the inner half) */
} plan;

static const plan PLANS[2] = {{"inner half", 8, FS * 3.0 / 16.0, 0},
                              {"whole band", 16, FS * 5.0 / 32.0, 80e6}};
static const plan *P;
#define S (P->S)
#define FC (P->fc)
static const int TONE_CH[3] = {37, 128, 203};

static int use_gpu;
static char dir[256], endpoint[300];

static double tone_freq(int c)
{
    return FC + (double)(c - N_CH / 2) * FS / (double)SPECTRUM;
}

static void read_named(const char *name, capture *c)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.raw", dir, name);
    read_capture(path, c);
}

static const char *chain(char *buf, size_t n, const char *id, int coarse, double fine,
                         double phase)
{
    snprintf(buf, n,
             "  pfb_%s:\n"
             "    plugin: pfb\n"
             "    params: {channels: %d, taps: 16, spectra_per_buffer: %d,\n"
             "             coarse_delay: [%d, %d]}\n"
             "  post_%s:\n"
             "    plugin: fft_post\n"
             "    params: {spectra_per_heap: %d, gain: [%g, 0.0], fine_delay: [%.17g, %.17g],\n"
             "             phase: [%.17g, %.17g]}\n"
             "  cap_%s:\n"
             "    plugin: feng_capture\n"
             "    params: {path: %s/%s.raw, from: %lld, to: %lld}\n",
             id, N_CH, SPB, coarse, coarse, id, SPB, GAIN, fine, fine, phase, phase, id, dir, id,
             (long long)FROM, (long long)TO);
    return buf;
}

/* The static equivalent of the request: coarse in ddc outputs, the rest in
 * digitiser samples, as pfb evaluates a model. */
static int static_coarse(void)
{
    return (int)floor(-D_PHYS / S + 0.5);
}

static double centre_phase(void)
{
    return remainder(2 * M_PI * FC * D_PHYS / FS, 2 * M_PI);
}

static void start_engine(inproc *r)
{
    char yaml[512], text[8192], c[4][1024];
    snprintf(yaml, sizeof yaml, "%s/narrow-control.yaml", dir);
    snprintf(endpoint, sizeof endpoint, "ipc://%s/ctl", dir);
    const int cs = static_coarse();
    const double fs_fine = -D_PHYS - (double)(cs * S);
    snprintf(text, sizeof text,
             "engine: {gpu: %s, control: \"%s\"}\n"
             "nodes:\n"
             "  dsim:\n"
             "    plugin: dsim\n"
             "    params: {antennas: 2, bits: 10, samples_per_chunk: %d, length: %d, noise: 0,\n"
             "             delays: [0.0, %.17g],\n"
             "             tones: [{frequency: %.17g, amplitude: 0.15, phase_x: 0.3, phase_y: 1.1},\n"
             "                     {frequency: %.17g, amplitude: 0.15, phase_x: -0.7, phase_y: 2.0},\n"
             "                     {frequency: %.17g, amplitude: 0.15, phase_x: 1.9, phase_y: -2.5}]}\n"
             "  ddc0: {plugin: ddc, params: {centre_frequency: %.17g, decimation: %d, antenna: 0,\n"
             "                               pass_bandwidth: %g}}\n"
             "  ddc1: {plugin: ddc, params: {centre_frequency: %.17g, decimation: %d, antenna: 1,\n"
             "                               pass_bandwidth: %g}}\n"
             "%s%s%s%s"
             "edges:\n"
             "  - dsim.out -> ddc0.in\n  - dsim.out -> ddc1.in\n"
             "  - ddc0.out -> pfb_u.in\n  - pfb_u.out -> post_u.in\n  - post_u.out -> cap_u.in\n"
             "  - ddc1.out -> pfb_n.in\n  - pfb_n.out -> post_n.in\n  - post_n.out -> cap_n.in\n"
             "  - ddc1.out -> pfb_r.in\n  - pfb_r.out -> post_r.in\n  - post_r.out -> cap_r.in\n"
             "  - ddc1.out -> pfb_s.in\n  - pfb_s.out -> post_s.in\n  - post_s.out -> cap_s.in\n",
             use_gpu ? "required" : "none", endpoint, CHUNK, LENGTH, D_PHYS,
             tone_freq(TONE_CH[0]), tone_freq(TONE_CH[1]), tone_freq(TONE_CH[2]), FC, S, P->pass, FC, S,
             P->pass,
             chain(c[0], sizeof c[0], "u", 0, 0, 0), chain(c[1], sizeof c[1], "n", 0, 0, 0),
             chain(c[2], sizeof c[2], "r", 0, 0, 0),
             chain(c[3], sizeof c[3], "s", cs, fs_fine, centre_phase()));
    inproc_start(r, yaml, text);
}

/* [batch][channel][spectrum][pol][re, im] int8, one batch per buffer. */
static double complex value(const capbuf *x, size_t t, int k, int p)
{
    size_t idx = (((size_t)k * SPB + t) * 2 + (size_t)p) * 2;
    return (double)(int8_t)x->data[idx] + I * (double)(int8_t)x->data[idx + 1];
}

/* Largest difference of one part over all channels of spectrum t in the
 * pols [0, pols); *exact counts the values that match. */
static int spectrum_diff(const capbuf *x, const capbuf *y, size_t t, int pols, size_t *exact)
{
    int worst = 0;
    for (int k = 0; k < N_CH; k++)
        for (int p = 0; p < pols; p++) {
            double complex d = value(x, t, k, p) - value(y, t, k, p);
            int m = (int)fmax(fabs(creal(d)), fabs(cimag(d)));
            worst = m > worst ? m : worst;
            *exact += m == 0;
        }
    return worst;
}

static void check(void)
{
    capture u, n, r, s;
    read_named("u", &u);
    read_named("n", &n);
    read_named("r", &r);
    read_named("s", &s);
    assert_int_equal(r.n, (TO - FROM) / B + 1);
    const int64_t first = (T_DELAY + SPECTRUM - 1) / SPECTRUM;
    size_t before = 0, after = 0, values = 0, exact = 0, tone_values = 0, coarse_changes = 0;
    int64_t last_coarse = 0;
    double worst_err = 0, min_amp = 1e9, max_turn = 0;
    for (size_t i = 0; i < r.n; i++) {
        const capbuf *x = &r.b[i], *xu = capture_find(&u, x->ts);
        const capbuf *xn = capture_find(&n, x->ts), *xs = capture_find(&s, x->ts);
        for (size_t f = 0; f < x->np; f++)
            if (!x->present[f] || !xs->present[f])
                fail_msg("buffer at %lld flagged missing", (long long)x->ts);
        for (size_t t = 0; t < SPB; t++) {
            const int64_t sp = x->ts / SPECTRUM + (int64_t)t;
            const bool delayed = sp >= first;
            size_t ex = 0;
            if (!delayed) {
                if (spectrum_diff(x, xn, t, 2, &ex))
                    fail_msg("spectrum %lld (T at spectrum %lld): not the undelayed run's bytes",
                             (long long)sp, (long long)first);
                before++;
            } else {
                size_t ignored = 0;
                int d = spectrum_diff(x, xs, t, 1, &ex);
                if (d > 1)
                    fail_msg("spectrum %lld: %d LSB from the static-delay run", (long long)sp, d);
                if (spectrum_diff(x, xn, t, 2, &ignored) < 10)
                    fail_msg("spectrum %lld: the delay changed nothing: the test cannot tell",
                             (long long)sp);
                values += N_CH;
                exact += ex;
                after++;
                int64_t c = (int64_t)floor((-D_PHYS + RATE1 * (double)(sp * SPECTRUM - T_DELAY)) / S + 0.5);
                coarse_changes += after > 1 && c != last_coarse;
                last_coarse = c;
            }
            /* The float64 prediction, tone channel by tone channel. */
            for (int j = 0; j < 3; j++)
                for (int p = 0; p < 2; p++) {
                    const int k = TONE_CH[j];
                    double complex want = value(xu, t, k, p);
                    if (!delayed)
                        want *= cexp(-2 * M_PI * I * tone_freq(k) * D_PHYS / FS);
                    else if (p == 1)
                        want *= cexp(-2 * M_PI * I * (tone_freq(k) - FC) * RATE1 *
                                     (double)(sp * SPECTRUM - T_DELAY) / FS);
                    double complex got = value(x, t, k, p);
                    double amp = cabs(value(xu, t, k, p));
                    min_amp = fmin(min_amp, amp);
                    worst_err = fmax(worst_err, cabs(got - want));
                    max_turn = fmax(max_turn, cabs(value(xn, t, k, p) - value(xu, t, k, p)));
                    tone_values++;
                }
        }
    }
    printf("narrowband delays, %s: %zu spectra before T equal the undelayed run, %zu from T on within "
           "1 LSB of the static run (%zu of %zu values exact); tone channels (amplitude >= %.1f): "
           "worst |got - predicted| %.2f counts over %zu values (undelayed antennas %.1f apart); "
           "pol 1's coarse delay changed %zu times\n",
           P->name, before, after, exact, values, min_amp, worst_err, tone_values, max_turn,
           coarse_changes);
    assert_true(coarse_changes >= 2);
    assert_true(before >= SPB && after >= SPB);
    if (exact < values - values / 1000)
        fail_msg("only %zu of %zu values equal the static run", exact, values);
    /* Each part of u and r is rounded to the nearest count (0.5 each, so
     * |.| <= sqrt(2) per side, 2.83 for the difference); the float32 chain
     * and the DDC's 93 dB alias floor add far less than a count. A wrong
     * mixer term or delay slope turns amplitudes of >= 40 counts by
     * radians. */
    assert_true(min_amp > 40);
    if (worst_err > 2.9)
        fail_msg("a tone channel is %.2f counts from the float64 prediction", worst_err);
    assert_true(max_turn > 20);
    free_capture(&u);
    free_capture(&n);
    free_capture(&r);
    free_capture(&s);
}

static void test_narrowband_delay_request(void **state)
{
    P = *state;
    assert_int_equal((P->pass > 0 ? 1 : 2) * N_CH * S, SPECTRUM);
    snprintf(dir, sizeof dir, "/tmp/cbf-narrow-control-XXXXXX");
    if (!mkdtemp(dir))
        fail_msg("no temporary folder");
    inproc r;
    start_engine(&r);
    inproc_expect_ok("delays pol 1", inproc_request(
        endpoint, "{\"request\": \"delays\", \"node\": \"pfb_r\", \"pol\": 1, \"delay\": %.17g, "
        "\"delay_rate\": %.17g, \"phase\": %.17g, \"at\": %lld}", -D_PHYS / FS, RATE1,
        centre_phase(), (long long)T_DELAY));
    json_t *o = inproc_request(endpoint, "{\"request\": \"delays\", \"node\": \"pfb_r\", "
                               "\"pol\": 0, \"delay\": %.17g, \"phase\": %.17g, \"at\": %lld}",
                               -D_PHYS / FS, centre_phase(), (long long)T_DELAY);
    if (!json_is_true(json_object_get(o, "ok")))
        fail_msg("delays: %s", json_string_value(json_object_get(o, "error")));
    /* The reply states the model at its first spectrum, in ddc outputs. */
    assert_int_equal(json_integer_value(json_object_get(o, "spectrum")), (T_DELAY + SPECTRUM - 1) / SPECTRUM);
    assert_int_equal(json_integer_value(json_object_get(o, "coarse_delay")), static_coarse());
    assert_true(fabs(json_real_value(json_object_get(o, "fine_delay")) -
                     (-D_PHYS / S - static_coarse())) < 1e-6);
    json_decref(o);
    inproc_expect_refused("delays, a step beyond the staging",
                          inproc_request(endpoint, "{\"request\": \"delays\", \"node\": \"pfb_r\", "
                                         "\"delay\": 0.01, \"at\": %lld}", (long long)(T_DELAY + 4 * B)),
                          "delay_headroom");
    inproc_finish(&r);
    check();
}

int main(int argc, char **argv)
{
    if ((use_gpu = inproc_gpu_arg(argc, argv)) < 0)
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(test_narrowband_delay_request, (void *)&PLANS[0]),
        cmocka_unit_test_prestate(test_narrowband_delay_request, (void *)&PLANS[1]),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
