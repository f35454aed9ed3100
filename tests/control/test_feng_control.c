/* F-engine requests through the control plane, on a running pipeline:
 *
 * One dsim feeds four pfb -> fft_post chains in one engine (run in this
 * process, its control socket on ipc://): chain g gets a gain request at a
 * timestamp T in the middle of an output buffer; chains a and b run with
 * the old and the new gains fixed. Chain g must equal a, byte for byte, on
 * every spectrum before T and b on every spectrum from T on: the change is
 * exact and no spectrum mixes the two tables. Chain d gets a delay model
 * per polarisation (delay, delay rate, phase, phase rate) from a timestamp
 * on; its output is held against the float64 model (tests/feng/feng_ref.c)
 * applied offline to the captured digitiser samples: the coarse delay walks
 * across several samples, inside buffers and across chunk boundaries, and
 * the phase rotates per spectrum. Mistaken requests come first and are
 * corrected as an operator would: a far-future gain and delay model are
 * replaced by the right ones (refused before pending changes could be
 * replaced), a wrong later gain is replaced by a pol-1-only change (whose
 * pol 0 must come from the change before it, not the dropped one), and a
 * wrong later gain and delay model are cancelled; chains g and d show
 * that none of them took effect. Bad requests of each kind are sent too:
 * each is refused with a reason, and the exact comparisons show that none
 * changed anything. fft_post runs with `dither: false`: chain d is held
 * against the undithered model (tests/feng holds the dither itself).
 *
 * The requests reach the engine before its first buffer (the socket is
 * bound before the nodes start), and T is half-way through a finite
 * stream, so no reply is late; a reply that says otherwise fails the test
 * with that message. `--gpu` runs the same on the GPU (77 without one). */
#include <complex.h>
#include <math.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capture_read.h"
#include "feng_ref.h"
#include "feng_run.h"
#include "inproc.h"

#define N_CH 256
#define STEP (2 * N_CH)
#define TAPS 16
#define SPB 64                       /* spectra per output buffer */
#define SPH 32
#define B ((int64_t)SPB * STEP)      /* samples per output buffer */
#define CHUNK 65536
#define LENGTH (1 << 22)
#define T_GAIN ((1 << 21) + 3 * STEP + 100)   /* inside buffer 64, from its spectrum 4 */
#define T_DELAY ((1 << 21) + 10 * STEP)
#define T_DELAY2 (T_DELAY + 2 * B + 21 * STEP)  /* a second model for pol 0, a step up */
#define T_FAR (LENGTH * (int64_t)1000)     /* far beyond the stream */
#define RATE 1712e6

static int use_gpu;
static char dir[256], endpoint[300];

static void read_named(const char *name, capture *c)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.raw", dir, name);
    read_capture(path, c);
}

static const char *chain(char *buf, size_t n, const char *id, const char *gain)
{
    snprintf(buf, n,
             "  pfb_%s:\n"
             "    plugin: pfb\n"
             "    params: {channels: %d, taps: %d, spectra_per_buffer: %d}\n"
             "  post_%s:\n"
             "    plugin: fft_post\n"
             "    params: {spectra_per_heap: %d, gain: %s, dither: false}\n"
             "  cap_%s:\n"
             "    plugin: feng_capture\n"
             "    params: {path: %s/%s.raw, from: %lld, to: %lld}\n",
             id, N_CH, TAPS, SPB, id, SPH, gain, id, dir, id, (long long)(62 * B),
             (long long)(67 * B));
    return buf;
}

static void start_engine(inproc *r)
{
    char yaml[512], text[8192], c[4][1024];
    snprintf(yaml, sizeof yaml, "%s/feng-control.yaml", dir);
    snprintf(endpoint, sizeof endpoint, "ipc://%s/ctl", dir);
    snprintf(text, sizeof text,
             "engine: {gpu: %s, control: \"%s\"}\n"
             "nodes:\n"
             "  dsim:\n"
             "    plugin: dsim\n"
             "    params: {antennas: 1, bits: 10, samples_per_chunk: %d, length: %d, noise: 0.05,\n"
             "             tones: [{frequency: %.1f, amplitude: 0.2}]}\n"
             "  adc:\n"
             "    plugin: feng_capture\n"
             "    params: {path: %s/adc.raw, from: %lld, to: %lld}\n"
             "%s%s%s%s"
             "edges:\n"
             "  - dsim.out -> adc.in\n"
             "  - dsim.out -> pfb_g.in\n  - pfb_g.out -> post_g.in\n  - post_g.out -> cap_g.in\n"
             "  - dsim.out -> pfb_a.in\n  - pfb_a.out -> post_a.in\n  - post_a.out -> cap_a.in\n"
             "  - dsim.out -> pfb_b.in\n  - pfb_b.out -> post_b.in\n  - post_b.out -> cap_b.in\n"
             "  - dsim.out -> pfb_d.in\n  - pfb_d.out -> post_d.in\n  - post_d.out -> cap_d.in\n",
             use_gpu ? "required" : "none", endpoint, CHUNK, LENGTH, RATE / STEP * 37.25, dir,
             (long long)(30 * CHUNK), (long long)(36 * CHUNK),
             chain(c[0], sizeof c[0], "g", "[0.02, 0.0]"), chain(c[1], sizeof c[1], "a", "[0.02, 0.0]"),
             chain(c[2], sizeof c[2], "b", "[0.05, -0.01]"), chain(c[3], sizeof c[3], "d", "[0.1, 0.05]"));
    inproc_start(r, yaml, text);
}

#define request(...) inproc_request(endpoint, __VA_ARGS__)
#define expect_ok inproc_expect_ok
#define expect_refused inproc_expect_refused

/* Field key of reply o, which must be ok. */
static json_t *ok_field(json_t *o, const char *what, const char *key)
{
    if (!json_is_true(json_object_get(o, "ok")))
        fail_msg("%s: refused: %s", what, json_string_value(json_object_get(o, "error")));
    json_t *v = json_object_get(o, key);
    if (!v)
        fail_msg("%s: no '%s' in the reply", what, key);
    return v;
}

static void expect_int(json_t *o, const char *what, const char *key, long long want)
{
    long long got = json_integer_value(ok_field(o, what, key));
    if (got != want)
        fail_msg("%s: %s is %lld, not %lld", what, key, got, want);
}

/* A gain reply's pol list is [re, im]: one gain for every channel, each
 * the float32 the table holds (so compared exactly). */
static void expect_gain(json_t *o, const char *what, const char *pol, float re, float im)
{
    json_t *v = ok_field(o, what, pol);
    if (json_array_size(v) != 2 || json_real_value(json_array_get(v, 0)) != re ||
        json_real_value(json_array_get(v, 1)) != im)
        fail_msg("%s: %s is not [%g, %g]", what, pol, re, im);
}

/* ---- checks ---- */

/* Bytes of spectrum t (within its buffer) of every channel and pol. */
static int spectrum_equal(const capbuf *x, const capbuf *y, size_t t)
{
    size_t b = t / SPH, u = t % SPH;
    for (size_t k = 0; k < N_CH; k++) {
        size_t idx = ((b * N_CH + k) * SPH + u) * 2;   /* [pol][re, im] int8 */
        if (memcmp(x->data + 2 * idx, y->data + 2 * idx, 4))
            return 0;
    }
    return 1;
}

static void check_gain(void)
{
    capture g, a, bcap;
    read_named("g", &g);
    read_named("a", &a);
    read_named("b", &bcap);
    assert_int_equal(g.n, 6);
    const int64_t first = (T_GAIN + STEP - 1) / STEP;   /* first spectrum at or after T */
    size_t before = 0, after = 0;
    for (size_t i = 0; i < g.n; i++) {
        const capbuf *x = &g.b[i], *ya = capture_find(&a, x->ts);
        const capbuf *yb = capture_find(&bcap, x->ts);
        for (size_t t = 0; t < SPB; t++) {
            int64_t sp = x->ts / STEP + (int64_t)t;
            const capbuf *want = sp < first ? ya : yb;
            if (!spectrum_equal(x, want, t))
                fail_msg("spectrum %lld (T at spectrum %lld) differs from the %s-gain run", (long long)sp,
                         (long long)first, sp < first ? "old" : "new");
            if (spectrum_equal(ya, yb, t))
                fail_msg("spectrum %lld: old and new gains give the same bytes: the test cannot tell",
                         (long long)sp);
            before += sp < first;
            after += sp >= first;
        }
    }
    printf("gain: %zu spectra before T equal the old-gain run, %zu from T equal the new-gain run\n",
           before, after);
    assert_true(before > SPB && after > SPB);
    free_capture(&g);
    free_capture(&a);
    free_capture(&bcap);
}

/* The delay model of the request, per pol, in samples and radians. */
static const double D0[2] = {3.3, -2.6}, RT[2] = {4e-5, -3e-5}, PH0[2] = {0.5, -1.0},
                    PHR_HZ[2] = {1e5, -5e4};

/* Pol 0's second model, from T_DELAY2: the delay steps up by ~5 samples. */
static const double D2 = 12.25, RT2 = -2e-5, PH2 = 0.2, PHR2_HZ = 3e4;

static void model(int pol, int64_t sp, int64_t *coarse, double *fine, double *phase)
{
    int64_t t = sp * STEP;
    if (t < T_DELAY) {
        *coarse = 0;
        *fine = *phase = 0;
        return;
    }
    int second = pol == 0 && t >= T_DELAY2;
    double dt = (double)(t - (second ? T_DELAY2 : T_DELAY));
    double d = second ? D2 + RT2 * dt : D0[pol] + RT[pol] * dt;
    *coarse = (int64_t)floor(d + 0.5);
    *fine = d - (double)*coarse;
    *phase = second ? PH2 + 2 * M_PI * PHR2_HZ / RATE * dt : PH0[pol] + 2 * M_PI * PHR_HZ[pol] / RATE * dt;
}

static void check_delay(void)
{
    capture d, adc;
    read_named("d", &d);
    read_named("adc", &adc);
    assert_int_equal(d.n, 6);
    /* The digitiser stream per pol, from the first captured chunk on. */
    const int bits = 10;
    const size_t slab = CHUNK / 8 * bits;
    const int64_t s0 = adc.b[0].ts;
    uint8_t *stream[2];
    for (int p = 0; p < 2; p++) {
        stream[p] = calloc(adc.n * slab + 8, 1);
        for (size_t i = 0; i < adc.n; i++) {
            assert_int_equal(adc.b[i].ts, s0 + (int64_t)i * CHUNK);
            memcpy(stream[p] + i * slab, adc.b[i].data + (size_t)p * slab, slab);
        }
    }
    double w[STEP * TAPS];
    feng_ref_weights(N_CH, TAPS, 1.0, 1, w);
    double complex gains[N_CH], X[N_CH];
    for (int k = 0; k < N_CH; k++)
        gains[k] = 0.1 + 0.05 * I;
    size_t n = 0, exact = 0, worse = 0, coarse_changes = 0;
    int64_t last_coarse[2] = {0, 0}, lo = 0, hi = 0;
    double max_phase_step = 0;
    for (size_t i = 0; i < d.n; i++) {
        const capbuf *x = &d.b[i];
        for (size_t f = 0; f < x->np; f++)
            if (!x->present[f])
                fail_msg("buffer at %lld: batch %zu flagged missing (a delay step lost its samples)",
                         (long long)x->ts, f);
        for (size_t t = 0; t < SPB; t++) {
            int64_t sp = x->ts / STEP + (int64_t)t;
            for (int p = 0; p < 2; p++) {
                int64_t c;
                double fine, ph;
                model(p, sp, &c, &fine, &ph);
                if (c != last_coarse[p])
                    coarse_changes++;
                last_coarse[p] = c;
                lo = c < lo ? c : lo;
                hi = c > hi ? c : hi;
                double prev_ph, pf;
                int64_t pc;
                model(p, sp - 1, &pc, &pf, &prev_ph);
                const int64_t ts = sp * STEP;
                bool same_model = ts - STEP >= T_DELAY && (p == 1 || ts < T_DELAY2 || ts - STEP >= T_DELAY2);
                if (same_model)
                    max_phase_step = fmax(max_phase_step, fabs(remainder(ph - prev_ph, 2 * M_PI)));
                feng_ref_setup s = {N_CH, TAPS, bits, w, fine, ph, gains, c};
                int64_t start = sp * STEP - c - s0;
                assert_true(start >= 0 && (size_t)(start + STEP * TAPS) <= adc.n * CHUNK);
                feng_ref_spectrum(&s, stream[p], start, X);
                size_t b = t / SPH, u = t % SPH;
                for (int k = 0; k < N_CH; k++) {
                    int clipped = 0;
                    int qre = feng_ref_quant(creal(X[k]), 127, &clipped);
                    int qim = feng_ref_quant(cimag(X[k]), 127, &clipped);
                    size_t idx = ((b * N_CH + (size_t)k) * SPH + u) * 2 + (size_t)p;
                    int re = (int8_t)x->data[2 * idx], im = (int8_t)x->data[2 * idx + 1];
                    int dd = abs(re - qre) > abs(im - qim) ? abs(re - qre) : abs(im - qim);
                    n++;
                    exact += dd == 0;
                    worse += dd > 1 || re == -128 || im == -128;
                }
            }
        }
    }
    printf("delay model: %zu values, %zu exact, %zu off by more than 1 LSB; coarse delay from %lld "
           "to %lld samples with %zu changes; phase steps up to %.3f rad per spectrum\n",
           n, exact, worse, (long long)lo, (long long)hi, coarse_changes, max_phase_step);
    /* float32 transform against float64: at most 1 LSB off, >= 99.9% exact,
     * as every F-engine chain test (docs/feng.md). */
    if (worse || exact < n - n / 1000)
        fail_msg("delay model: %zu of %zu values off by more than 1 LSB, %zu exact", worse, n, exact);
    assert_true(coarse_changes >= 6);     /* walked across several samples, both pols */
    assert_true(max_phase_step > 0.1);    /* the phase rate turned it spectrum by spectrum */
    for (int p = 0; p < 2; p++)
        free(stream[p]);
    free_capture(&d);
    free_capture(&adc);
}

static void test_requests_on_running_feng(void **state)
{
    (void)state;
    inproc r;
    start_engine(&r);

    /* Before any data, the gains in force are the YAML's. */
    json_t *o = request("{\"request\": \"gain\", \"node\": \"post_g\"}");
    expect_gain(o, "gain query", "pol0", 0.02f, 0.0f);
    expect_gain(o, "gain query", "pol1", 0.02f, 0.0f);
    json_decref(o);
    /* A far-future change (a typing error), then the right one, which
     * replaces it. */
    o = request("{\"request\": \"gain\", \"node\": \"post_g\", \"values\": [0.3], \"at\": %lld}",
                (long long)T_FAR);
    expect_int(o, "far gain", "pending", 1);
    json_decref(o);
    o = request("{\"request\": \"gain\", \"node\": \"post_g\", \"values\": [0.05, -0.01], "
                "\"at\": %d}", T_GAIN);
    expect_int(o, "gain", "at", T_GAIN);
    expect_int(o, "gain", "replaced", 1);
    expect_int(o, "gain", "pending", 1);
    json_decref(o);
    /* A wrong change two buffers on, then pol 1 alone one buffer on: it
     * drops the wrong one, and keeps pol 0 from the change at T_GAIN. */
    o = request("{\"request\": \"gain\", \"node\": \"post_g\", \"values\": [0.7], \"at\": %lld}",
                (long long)(T_GAIN + 2 * B));
    expect_int(o, "wrong gain", "pending", 2);
    json_decref(o);
    o = request("{\"request\": \"gain\", \"node\": \"post_g\", \"pol\": 1, "
                "\"values\": [0.05, -0.01], \"at\": %lld}", (long long)(T_GAIN + B));
    expect_int(o, "pol 1 gain", "replaced", 1);
    json_decref(o);
    /* A wrong change inside the capture, cancelled. */
    o = request("{\"request\": \"gain\", \"node\": \"post_g\", \"values\": [0.9], \"at\": %lld}",
                (long long)(T_GAIN + 2 * B + 7 * STEP));
    expect_int(o, "gain to cancel", "pending", 3);
    json_decref(o);
    o = request("{\"request\": \"gain\", \"node\": \"post_g\", \"cancel\": true, \"at\": %lld}",
                (long long)(T_GAIN + B + 1));
    expect_int(o, "gain cancel", "replaced", 1);
    expect_int(o, "gain cancel", "pending", 2);
    json_decref(o);
    /* The table at a timestamp, pending changes included; and now. */
    o = request("{\"request\": \"gain\", \"node\": \"post_g\", \"at\": %lld}",
                (long long)(T_GAIN + 3 * B));
    expect_gain(o, "gain query at", "pol0", 0.05f, -0.01f);
    expect_gain(o, "gain query at", "pol1", 0.05f, -0.01f);
    json_decref(o);
    o = request("{\"request\": \"gain\", \"node\": \"post_g\", \"pol\": 0}");
    expect_gain(o, "gain query now", "pol0", 0.02f, 0.0f);
    if (json_object_get(o, "pol1"))
        fail_msg("gain query of pol 0: the reply shows pol 1 too");
    json_decref(o);

    o = request("{\"request\": \"delays\", \"node\": \"pfb_d\", \"delay\": 0, \"at\": %lld}",
                (long long)T_FAR);
    expect_int(o, "far delays", "pending", 1);
    json_decref(o);
    o = request(
        "{\"request\": \"delays\", \"node\": \"pfb_d\", \"pol\": 0, \"delay\": %.17g, "
        "\"delay_rate\": %.17g, \"phase\": %.17g, \"phase_rate\": %.17g, \"at\": %d}",
        D0[0] / RATE, RT[0], PH0[0], 2 * M_PI * PHR_HZ[0], T_DELAY);
    expect_int(o, "delays pol 0", "replaced", 1);
    json_decref(o);
    expect_ok("delays pol 1", request(
        "{\"request\": \"delays\", \"node\": \"pfb_d\", \"pol\": 1, \"delay\": %.17g, "
        "\"delay_rate\": %.17g, \"phase\": %.17g, \"phase_rate\": %.17g, \"at\": %d}",
        D0[1] / RATE, RT[1], PH0[1], 2 * M_PI * PHR_HZ[1], T_DELAY));
    expect_ok("delays pol 0, second model", request(
        "{\"request\": \"delays\", \"node\": \"pfb_d\", \"pol\": 0, \"delay\": %.17g, "
        "\"delay_rate\": %.17g, \"phase\": %.17g, \"phase_rate\": %.17g, \"at\": %lld}",
        D2 / RATE, RT2, PH2, 2 * M_PI * PHR2_HZ, (long long)T_DELAY2));
    /* A wrong model (a phase a radian off) inside the capture, cancelled. */
    o = request("{\"request\": \"delays\", \"node\": \"pfb_d\", \"delay\": %.17g, "
                "\"delay_rate\": %.17g, \"phase\": %.17g, \"at\": %lld}", D2 / RATE, RT2, PH2 + 1,
                (long long)(T_DELAY2 + 5 * STEP));
    expect_int(o, "delays to cancel", "pending", 3);
    json_decref(o);
    o = request("{\"request\": \"delays\", \"node\": \"pfb_d\", \"cancel\": true, \"at\": %lld}",
                (long long)(T_DELAY2 + 1));
    expect_int(o, "delays cancel", "replaced", 1);
    json_decref(o);

    /* Bad requests of each kind: refused, nothing changed (checked below). */
    expect_refused("gain without a node", request("{\"request\": \"gain\", \"values\": [1]}"),
                   "several nodes accept 'gain'");
    expect_refused("gain, 3 values", request("{\"request\": \"gain\", \"node\": \"post_g\", "
                                             "\"values\": [1, 2, 3]}"), "3 values");
    expect_refused("gain, pol 2", request("{\"request\": \"gain\", \"node\": \"post_g\", "
                                          "\"values\": [1], \"pol\": 2}"), "out of range");
    expect_refused("gain, values not numbers", request("{\"request\": \"gain\", \"node\": \"post_g\", "
                                                       "\"values\": \"loud\"}"), "argument 'values'");
    expect_refused("gain, unknown argument", request("{\"request\": \"gain\", \"node\": \"post_g\", "
                                                     "\"values\": [1], \"gian\": 1}"), "no argument 'gian'");
    expect_refused("gain, same buffer as a pending one",
                   request("{\"request\": \"gain\", \"node\": \"post_g\", \"values\": [1], \"at\": %d}",
                           T_GAIN + STEP), "one change per buffer");
    expect_refused("gain, values and cancel",
                   request("{\"request\": \"gain\", \"node\": \"post_g\", \"values\": [1], "
                           "\"cancel\": true}"), "one of values, default or cancel");
    expect_refused("gain on a pfb", request("{\"request\": \"gain\", \"node\": \"pfb_g\", "
                                            "\"values\": [1]}"), "has no request 'gain'");
    expect_refused("gain, no such node", request("{\"request\": \"gain\", \"node\": \"post_x\", "
                                                 "\"values\": [1]}"), "no node 'post_x'");
    expect_refused("delays, rate out of range",
                   request("{\"request\": \"delays\", \"node\": \"pfb_d\", \"delay\": 0, "
                           "\"delay_rate\": 0.5, \"at\": %d}", T_DELAY + 8 * (int)B), "out of range");
    expect_refused("delays, step beyond the staging",
                   request("{\"request\": \"delays\", \"node\": \"pfb_d\", \"delay\": 0.001, "
                           "\"at\": %d}", T_DELAY + 8 * (int)B), "delay_headroom");
    expect_refused("delays, no delay", request("{\"request\": \"delays\", \"node\": \"pfb_d\"}"),
                   "argument 'delay' is required");
    expect_refused("delays, cancel with a model",
                   request("{\"request\": \"delays\", \"node\": \"pfb_d\", \"delay\": 0, "
                           "\"cancel\": true}"), "cancel drops whole changes");

    inproc_finish(&r);
    check_gain();
    check_delay();
}

int main(int argc, char **argv)
{
    if ((use_gpu = inproc_begin(argc, argv, "feng-control", dir, sizeof dir)) < 0)
        return use_gpu == -1 ? 77 : 1;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_requests_on_running_feng)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
