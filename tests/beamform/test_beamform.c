/* test_beamform.c: the beamformer kernels against a float64 reference
 * written from the maths of katgpucbf's beamformer (weights, quantisation
 * gain, delay slope and fringe offset about the band centre), not from the
 * kernels' fixed-point phases.
 *
 * `test_beamform` runs the CPU kernel; `test_beamform --gpu` the CUDA one
 * (exit 77 without a GPU) and also holds it to the CPU bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "beam_run.h"
#include "beamform.h"
#include "beamform_math.h"
#include "beam_rng.h"
#include "dither.h"

static int use_gpu;
/* about N(0, sd), rounded and clipped to [-127, 127] */
static int8_t sample(double sd)
{
    double g = (unif() + unif() + unif() + unif() - 2.0) * sqrt(3.0) * sd;
    g = rint(g);
    return (int8_t)(g > 127 ? 127 : g < -127 ? -127 : g);
}

/* One problem: inputs, physical beam parameters and the job. */
typedef struct bcase {
    cbf_beam_shape s;
    size_t batches;
    int8_t *in;
    uint8_t *present, *pol;
    double *weight, *delay, *fringe, *qgain;   /* [beam][ant], [beam][ant], ..., [beam] */
    double spacing, first, centre;
    cbf_beam_coef *coef;
    int8_t *out;
    float *raw;
    uint64_t *sat;
    cbf_beam_job job;
} bcase;

static void bcase_make(bcase *k, int A, int B, int C, int T, size_t n, double sd)
{
    memset(k, 0, sizeof *k);
    k->s = (cbf_beam_shape){A, B, C, T};
    k->batches = n;
    const size_t in_n = n * cbf_beam_in_batch_bytes(&k->s), out_n = n * cbf_beam_out_batch_bytes(&k->s);
    k->in = malloc(in_n);
    for (size_t i = 0; i < in_n; i++)
        k->in[i] = sample(sd);
    k->present = malloc(n * (size_t)A);
    memset(k->present, 1, n * (size_t)A);
    k->pol = malloc((size_t)B);
    k->weight = malloc((size_t)(A * B) * sizeof(double));
    k->delay = malloc((size_t)(A * B) * sizeof(double));
    k->fringe = malloc((size_t)(A * B) * sizeof(double));
    k->qgain = malloc((size_t)B * sizeof(double));
    k->coef = malloc((size_t)(A * B) * sizeof *k->coef);
    k->spacing = 856e6 / 4096;
    k->centre = 2048;
    k->first = (double)(rnd() % (4096 - (unsigned)C));
    for (int b = 0; b < B; b++) {
        k->pol[b] = (uint8_t)(rnd() & 1);
        k->qgain[b] = (0.5 + unif()) * 2.0 / sqrt((double)A);
        for (int a = 0; a < A; a++) {
            k->weight[b * A + a] = 2 * unif() - 1;
            k->delay[b * A + a] = (2 * unif() - 1) * 3e-9;     /* a few turns across the band */
            k->fringe[b * A + a] = (2 * unif() - 1) * M_PI;
        }
    }
    k->out = malloc(out_n);
    k->raw = malloc(out_n * 2 * sizeof(float));
    k->sat = calloc((size_t)B, sizeof(uint64_t));
}

static void bcase_job(bcase *k, int dither)
{
    const int A = k->s.n_ants, B = k->s.n_beams;
    for (int i = 0; i < A * B; i++)
        assert_int_equal(cbf_beam_coef_set(&k->coef[i], k->weight[i], k->qgain[i / A], k->delay[i],
                                           k->fringe[i], k->spacing, k->first, k->centre), 0);
    memset(k->sat, 0, (size_t)B * sizeof(uint64_t));
    k->job = (cbf_beam_job){k->s, k->batches, (const uint8_t *)k->in, k->present, k->coef, k->pol,
                            k->out, k->raw, k->sat, dither, 0x0123456789abcdefull,
                            rnd() >> 20, (uint64_t)k->first, 4096};
}

static void bcase_run(bcase *k, int gpu)
{
    char msg[256] = "";
    int rc = beam_run(gpu, &k->job, msg, sizeof msg);
    if (rc)
        fail_msg("beamformer: %d %s", rc, msg);
}

static void bcase_free(bcase *k)
{
    free(k->in); free(k->present); free(k->pol); free(k->weight); free(k->delay);
    free(k->fringe); free(k->qgain); free(k->coef); free(k->out); free(k->raw); free(k->sat);
}

/* A dither value from 16 bits j (docs/formats.md): (j + 1/2) 2^-16 - 1/2
 * (the kernels' float32 value is exactly this). */
static double ref_dither(unsigned h16)
{
    return ldexp((double)(h16 & 0xffffu) + 0.5, -16) - 0.5;
}

/* Spectrum spec's 32 bits of its draw (number spec / 2, as a counter
 * (draw x channels + channel) x beams + beam): the even spectrum's are the
 * high half. */
static uint32_t ref_bits(uint64_t key, uint64_t spec, uint64_t channel, uint64_t channels, uint64_t beams,
                         uint64_t beam)
{
    const uint64_t u = cbf_dither_u64(key, ((spec / 2) * channels + channel) * beams + beam);
    return spec % 2 ? (uint32_t)u : (uint32_t)(u >> 32);
}

/* Holds k's output to the float64 reference: the sums within the bound
 * of the coefficients' BF_COEF_BITS and float32 (docs/formats.md, "Beam
 * stream"), every 8-bit value within
 * 1 LSB, and exact except where the bound allows either side of a rounding
 * boundary. */
static void check_reference(bcase *k)
{
    const int A = k->s.n_ants, B = k->s.n_beams, C = k->s.channels, T = k->s.spectra_per_heap;
    size_t off_by_one = 0, total = 0, edge = 0;
    uint64_t sat_ref[CBF_BEAM_MAX_BEAMS] = {0};
    for (size_t n = 0; n < k->batches; n++)
        for (int b = 0; b < B; b++)
            for (int c = 0; c < C; c++)
                for (int t = 0; t < T; t++) {
                    double re = 0, im = 0, mag = 0, xsum = 0, gmax = 0;
                    for (int a = 0; a < A; a++)
                        gmax = fmax(gmax, fabs(k->weight[b * A + a] * k->qgain[b]));
                    for (int a = 0; a < A; a++) {
                        if (!k->present[n * (size_t)A + (size_t)a])
                            continue;
                        const int i = b * A + a;
                        const double ph = k->fringe[i] - 2 * M_PI * k->spacing *
                                                             (k->first + c - k->centre) * k->delay[i];
                        const double g = k->weight[i] * k->qgain[b];
                        const int8_t *x = k->in + ((((n * (size_t)A + (size_t)a) * (size_t)C + (size_t)c) *
                                                    (size_t)T + (size_t)t) * 4 + (size_t)(2 * k->pol[b]));
                        re += g * (cos(ph) * x[0] - sin(ph) * x[1]);
                        im += g * (cos(ph) * x[1] + sin(ph) * x[0]);
                        mag += fabs(g) * (fabs((double)x[0]) + fabs((double)x[1]));
                        xsum += fabs((double)x[0]) + fabs((double)x[1]);
                    }
                    /* The coefficient within 16 float32 ulps of the maths (conversion,
                     * polynomial, rotation by the gain), then made an integer in units of
                     * 2^-BF_COEF_BITS max|gain| (beamform_math.h): within half a unit and
                     * 2^-23 of itself (the roundings of W s_b and s_b); the integer sum
                     * exact, rounded to float32 and multiplied by 1 / s_b (an ulp of
                     * <= mag for the two). */
                    const double tol = ldexp(1.0, -BF_COEF_BITS - 1) * gmax * (1 + 0x1p-20) * xsum +
                                       20.0 * 0x1p-24 * mag + 1e-30;
                    const size_t o = ((n * (size_t)B + (size_t)b) * (size_t)C + (size_t)c) * (size_t)T + (size_t)t;
                    const float *r = &k->raw[o * 2];
                    if (fabs(r[0] - re) > tol || fabs(r[1] - im) > tol)
                        fail_msg("batch %zu beam %d ch %d spectrum %d: sum (%.9g, %.9g), reference "
                                 "(%.9g, %.9g), tolerance %.3g", n, b, c, t, r[0], r[1], re, im, tol);
                    if (k->job.dither) {
                        const uint64_t spec = k->job.first_spectrum + n * (uint64_t)T + (uint64_t)t;
                        const uint32_t h = ref_bits(k->job.dither_key, spec, (uint64_t)k->first + (uint64_t)c,
                                                    4096, (uint64_t)B, (uint64_t)b);
                        re += ref_dither(h >> 16);
                        im += ref_dither(h);
                    }
                    const double want[2] = {rint(re), rint(im)};
                    /* A sum within its tolerance of +-127.5 may round either
                     * side of the limit: clipped or not, with the same byte
                     * (127) either way, so the counts may differ there. */
                    edge += fabs(fabs(re) - 127.5) <= tol || fabs(fabs(im) - 127.5) <= tol;
                    int clipped = 0;
                    const double ref[2] = {re, im};
                    for (int p = 0; p < 2; p++) {
                        const double w = want[p] > 127 ? 127 : want[p] < -127 ? -127 : want[p];
                        clipped |= w != want[p];
                        const double d = fabs(k->out[o * 2 + (size_t)p] - w);
                        /* 1 LSB off only where the reference (dithered) lies within
                         * the sum's tolerance, and the dither add's float32
                         * rounding, of a rounding boundary: anywhere else the
                         * kernel's value rounds as the reference does */
                        const double frac = ref[p] - floor(ref[p]);
                        const int near = fabs(frac - 0.5) <= tol + 0x1p-23 * (fabs(ref[p]) + 1);
                        if (d > 1 || (d == 1 && !near))
                            fail_msg("batch %zu beam %d ch %d spectrum %d part %d: %d, want %g (reference "
                                     "%.9g, tolerance %.3g)", n, b, c, t, p, k->out[o * 2 + (size_t)p], w,
                                     ref[p], tol);
                        off_by_one += d == 1;
                        total++;
                    }
                    sat_ref[b] += (uint64_t)clipped;
                }
    for (int b = 0; b < B; b++) {
        const uint64_t d = k->sat[b] > sat_ref[b] ? k->sat[b] - sat_ref[b] : sat_ref[b] - k->sat[b];
        if (d > off_by_one + edge)
            fail_msg("beam %d: %" PRIu64 " saturated, reference %" PRIu64 " (%zu values 1 LSB off, "
                     "%zu at the limit)", b, k->sat[b], sat_ref[b], off_by_one, edge);
    }
    printf("#   %d beams x %d spectra, %d antennas: %zu of %zu values 1 LSB off\n", B, T, A, off_by_one, total);
}

/* The dither generator is SplitMix64: its first output from state 0. */
static void test_dither_generator(void **st)
{
    (void)st;
    assert_true(cbf_dither_u64(0, 0) == 0xe220a8397b1dcdafull);
    double mean = 0;
    /* the 16-bit values (the beams' and fft_post's): extremes stay inside
     * (-1/2, 1/2) and keep 127 at 127 in float32, exact, the reference's */
    const float hi16 = cbf_dither_float16(0xffffu), lo16 = cbf_dither_float16(0x10000u);
    assert_true(hi16 < 0.5f && lo16 > -0.5f && hi16 == -lo16 && hi16 == 0.5f - 0x1p-17f);
    assert_true(rintf(127.0f + hi16) == 127.0f && rintf(-127.0f + lo16) == -127.0f);
    /* symmetric: j and 2^16 - 1 - j give values of opposite sign, none zero */
    for (unsigned j = 0; j < 65536; j += 97)
        assert_true(cbf_dither_float16(j) == -cbf_dither_float16(0xffffu - j) &&
                    cbf_dither_float16(j) != 0.0f);
    for (unsigned h = 0; h < 65536; h += 257)
        assert_true((double)cbf_dither_float16(h) == ref_dither(h));
    for (uint64_t i = 0; i < 100000; i++)
        mean += cbf_dither_float16((uint32_t)cbf_dither_u64(7, i) >> 16);
    assert_true(fabs(mean / 100000) < 0.005);
}

static void test_reference(void **st)
{
    (void)st;
    /* shapes that leave partial blocks of antennas, beams and spectra */
    const int shapes[][5] = {{5, 3, 4, 50, 2}, {37, 20, 3, 33, 2}, {64, 8, 6, 256, 1},
                             {1, 1, 1, 1, 3}, {17, 10, 2, 130, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int dither = 0; dither < 2; dither++) {
            bcase k;
            bcase_make(&k, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3],
                       (size_t)shapes[i][4], 20);
            bcase_job(&k, dither);
            bcase_run(&k, use_gpu);
            check_reference(&k);
            bcase_free(&k);
        }
}

/* Large gains: many values clip, and the counts per beam match. */
static void test_saturation(void **st)
{
    (void)st;
    bcase k;
    bcase_make(&k, 9, 5, 3, 64, 2, 40);
    for (int b = 0; b < 5; b++)
        k.qgain[b] = 0.5 * (b + 1);
    bcase_job(&k, 1);
    bcase_run(&k, use_gpu);
    check_reference(&k);
    assert_true(k.sat[4] > 0);
    bcase_free(&k);
}

/* Weight 1 on one antenna, 0 on the rest, no delay, gain 1: the beam is
 * that antenna's chosen pol, exactly (dither never moves an integer),
 * -128 clipped to -127 and counted. */
static void test_one_antenna(void **st)
{
    (void)st;
    for (int dither = 0; dither < 2; dither++) {
        bcase k;
        const int A = 6, B = 4, C = 3, T = 40;
        bcase_make(&k, A, B, C, T, 2, 60);
        k.in[5 * 4] = -128; /* batch 0, antenna 0, channel 0, spectrum 5, pol 0 re */
        for (int b = 0; b < B; b++) {
            k.qgain[b] = 1;
            k.pol[b] = (uint8_t)(b & 1);
            for (int a = 0; a < A; a++) {
                k.weight[b * A + a] = a == (b < 2 ? 0 : 3);
                k.delay[b * A + a] = 0;
                k.fringe[b * A + a] = 0;
            }
        }
        bcase_job(&k, dither);
        bcase_run(&k, use_gpu);
        uint64_t sat[4] = {0};
        for (size_t n = 0; n < 2; n++)
            for (int b = 0; b < B; b++)
                for (int c = 0; c < C; c++)
                    for (int t = 0; t < T; t++) {
                        const int a = b < 2 ? 0 : 3;
                        const int8_t *x = k.in + ((((n * A + (size_t)a) * C + (size_t)c) * T + (size_t)t) * 4 +
                                                  (size_t)(2 * k.pol[b]));
                        const int8_t *y = k.out + (((n * B + (size_t)b) * C + (size_t)c) * T + (size_t)t) * 2;
                        for (int p = 0; p < 2; p++) {
                            const int want = x[p] == -128 ? -127 : x[p];
                            sat[b] += x[p] == -128;
                            if (y[p] != want)
                                fail_msg("dither %d batch %zu beam %d ch %d t %d: %d, want %d", dither,
                                         n, b, c, t, y[p], want);
                        }
                    }
        for (int b = 0; b < B; b++)
            assert_int_equal(k.sat[b], sat[b]);
        assert_int_equal(k.sat[0], 1);
        bcase_free(&k);
    }
}

/* Antennas flagged missing are left out: garbage in their place gives the
 * reference without them, bit for bit what zeros there would give. */
static void test_missing(void **st)
{
    (void)st;
    bcase k;
    const int A = 20, B = 6, C = 2, T = 64;
    const size_t n = 3;
    bcase_make(&k, A, B, C, T, n, 20);
    const int gone[][2] = {{0, 3}, {1, 0}, {1, 19}, {2, 7}, {2, 8}, {2, 16}};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) {
        const size_t bt = (size_t)gone[i][0], a = (size_t)gone[i][1];
        k.present[bt * A + a] = 0;
        memset(k.in + (bt * A + a) * (size_t)C * T * 4, 0x7f, (size_t)C * T * 4);
    }
    bcase_job(&k, 1);
    bcase_run(&k, use_gpu);
    check_reference(&k);
    const size_t out_n = n * cbf_beam_out_batch_bytes(&k.s);
    int8_t *first = malloc(out_n);
    memcpy(first, k.out, out_n);
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) {
        const size_t bt = (size_t)gone[i][0], a = (size_t)gone[i][1];
        k.present[bt * A + a] = 1;
        memset(k.in + (bt * A + a) * (size_t)C * T * 4, 0, (size_t)C * T * 4);
    }
    const uint64_t fs = k.job.first_spectrum;
    bcase_job(&k, 1);
    k.job.first_spectrum = fs;
    bcase_run(&k, use_gpu);
    assert_memory_equal(first, k.out, out_n);
    free(first);
    bcase_free(&k);
}

/* The dither of a value depends on its absolute spectrum only: batch 1 of
 * a run equals a run of that batch alone starting one heap later. */
static void test_dither_counter(void **st)
{
    (void)st;
    bcase k;
    bcase_make(&k, 4, 3, 5, 32, 2, 20);
    bcase_job(&k, 1);
    bcase_run(&k, use_gpu);
    const size_t ob = cbf_beam_out_batch_bytes(&k.s);
    int8_t *whole = malloc(2 * ob);
    memcpy(whole, k.out, 2 * ob);
    k.job.in = (const uint8_t *)k.in + cbf_beam_in_batch_bytes(&k.s);
    k.job.present = k.present + 4;
    k.job.batches = 1;
    k.job.first_spectrum += 32;
    bcase_run(&k, use_gpu);
    assert_memory_equal(whole + ob, k.out, ob);
    free(whole);
    bcase_free(&k);
}

/* A heap run as two jobs, spectra [0, k) with one set of coefficients and
 * [k, T) with another (what the plugin does for a change inside a heap),
 * equals the first set's whole run before k and the second's from k on,
 * dither included; each job leaves the other's values alone. */
static void test_spectrum_span(void **st)
{
    (void)st;
    const int shapes[][5] = {{7, 5, 3, 96, 2}, {20, 12, 2, 64, 3}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        bcase k;
        const int A = shapes[i][0], B = shapes[i][1], C = shapes[i][2], T = shapes[i][3];
        bcase_make(&k, A, B, C, T, (size_t)shapes[i][4], 20);
        const size_t out_n = k.batches * cbf_beam_out_batch_bytes(&k.s);
        int8_t *old_run = malloc(out_n), *new_run = malloc(out_n);
        bcase_job(&k, 1);
        const uint64_t fs = k.job.first_spectrum;
        bcase_run(&k, use_gpu);
        memcpy(old_run, k.out, out_n);
        cbf_beam_coef *old_coef = malloc((size_t)(A * B) * sizeof *old_coef);
        memcpy(old_coef, k.coef, (size_t)(A * B) * sizeof *old_coef);
        for (int j = 0; j < A * B; j++) {
            k.weight[j] = 2 * unif() - 1;
            k.delay[j] = (2 * unif() - 1) * 3e-9;
        }
        k.qgain[0] *= 2;
        bcase_job(&k, 1);
        k.job.first_spectrum = fs;
        bcase_run(&k, use_gpu);
        memcpy(new_run, k.out, out_n);
        const int split = 1 + (int)(rnd() % (unsigned)(T - 1));
        /* a span alone writes that span and nothing else */
        const int a0 = split / 2, a1 = split + (T - split) / 2;
        memset(k.out, 0x55, out_n);
        k.job.spectrum_begin = a0;
        k.job.spectrum_end = a1;
        bcase_run(&k, use_gpu);
        for (size_t v = 0; v < out_n / 2; v++) {
            const int t = (int)(v % (size_t)T);
            const int8_t sentinel[2] = {0x55, 0x55};
            if (memcmp(k.out + 2 * v, t >= a0 && t < a1 ? new_run + 2 * v : sentinel, 2))
                fail_msg("shape %zu, span [%d, %d): spectrum %d %s", i, a0, a1, t,
                         t >= a0 && t < a1 ? "differs from the whole run" : "was written");
        }
        memset(k.out, 0x55, out_n);
        k.job.spectrum_begin = split;
        k.job.spectrum_end = T;
        bcase_run(&k, use_gpu);
        memcpy(k.coef, old_coef, (size_t)(A * B) * sizeof *old_coef);
        k.job.spectrum_begin = 0;
        k.job.spectrum_end = split;
        bcase_run(&k, use_gpu);
        for (size_t v = 0; v < out_n / 2; v++) {
            const int t = (int)(v % (size_t)T);
            const int8_t *want = (t < split ? old_run : new_run) + 2 * v;
            if (memcmp(k.out + 2 * v, want, 2))
                fail_msg("shape %zu, split at %d: spectrum %d differs from the %s coefficients' run", i,
                         split, t, t < split ? "old" : "new");
        }
        char msg[128];
        k.job.spectrum_begin = 5;
        k.job.spectrum_end = 5;
        assert_int_equal(cbf_beam_cpu(&k.job, msg, sizeof msg), CBF_KERN_EINVAL);
        k.job.spectrum_end = T + 1;
        assert_int_equal(cbf_beam_cpu(&k.job, msg, sizeof msg), CBF_KERN_EINVAL);
        free(old_run);
        free(new_run);
        free(old_coef);
        bcase_free(&k);
    }
}

/* n / d (d > 0) rounded to nearest, ties to even, in integers. */
static int64_t round_half_even(int64_t n, int64_t d)
{
    int64_t q = n / d, r = n % d;
    if (r < 0) {
        q--;
        r += d;
    }
    if (2 * r > d || (2 * r == d && (q & 1)))
        q++;
    return q;
}

/* Decimal quantisation gains p / q with weights 1 (and weights 1, 1/2,
 * 1/4, 3/4 on a second beam per gain), no delay, no fringe: the exact
 * beam is the rational p S / (4 q), S = sum of 4 w_a x_a, and its ties
 * (k + 1/2, 1 in 20 values at gain 0.05) round to even. The kernels give
 * the float32 of S times the float32 gain, rounded (beamform_math.h):
 * where that gain is within 2^-25 of p / q relative (0.05, 0.1, 0.2, 0.4,
 * 0.025, and the binary 0.25 and 0.375) every value, dither off or on,
 * must be the exact rounding, none 1 LSB off; for the others (0.3) a
 * value may be 1 LSB off only at a tie of the exact maths, which the
 * float32 gain moves. (Coefficients of scale 2^e_b made 0.05 into
 * 13107 / 2^18 = 0.0499992, so every tie rounded toward zero: 2.1% of the
 * values 1 LSB off at weights 1.) */
/* Whether the float32 of p / q is within 2^-25 of it, relative: the
 * product of an integer and that float32 then rounds a tie of the exact
 * product back to the tie. */
static int keeps_ties(int64_t p, int64_t q)
{
    const double g = (double)p / (double)q;
    return fabs((double)(float)g - g) <= 0x1p-25 * g;
}

static void test_exact_gains(void **st)
{
    (void)st;
    static const int gains[][2] = {{1, 20}, {1, 10}, {1, 5}, {1, 4}, {3, 8}, {2, 5}, {1, 40}, {3, 10}};
    static const int w4[4] = {4, 2, 1, 3}; /* the second beam's weights x 4 */
    const int A = 4, G = (int)(sizeof gains / sizeof gains[0]), B = 2 * G, C = 8, T = 256;
    for (int dither = 0; dither < 2; dither++) {
        bcase k;
        bcase_make(&k, A, B, C, T, 2, 20);
        for (int b = 0; b < B; b++) {
            k.qgain[b] = (double)gains[b / 2][0] / gains[b / 2][1];
            for (int a = 0; a < A; a++) {
                k.weight[b * A + a] = b % 2 ? w4[a] / 4.0 : 1.0;
                k.delay[b * A + a] = k.fringe[b * A + a] = 0;
            }
        }
        bcase_job(&k, dither);
        bcase_run(&k, use_gpu);
        size_t off[2 * 8] = {0}, ties = 0, n_val = 0;
        for (size_t n = 0; n < k.batches; n++)
            for (int b = 0; b < B; b++)
                for (int c = 0; c < C; c++)
                    for (int t = 0; t < T; t++) {
                        const int64_t p = gains[b / 2][0], q = gains[b / 2][1];
                        int64_t S[2] = {0, 0};
                        for (int a = 0; a < A; a++) {
                            const int8_t *x = k.in + ((((n * (size_t)A + (size_t)a) * (size_t)C + (size_t)c) *
                                                       (size_t)T + (size_t)t) * 4 + (size_t)(2 * k.pol[b]));
                            const int64_t w = b % 2 ? w4[a] : 4;
                            S[0] += w * x[0];
                            S[1] += w * x[1];
                        }
                        const size_t o = ((n * (size_t)B + (size_t)b) * (size_t)C + (size_t)c) * (size_t)T + (size_t)t;
                        uint32_t h = 0;
                        if (dither)
                            h = ref_bits(k.job.dither_key, k.job.first_spectrum + n * (uint64_t)T + (uint64_t)t,
                                         (uint64_t)k.first + (uint64_t)c, 4096, (uint64_t)B, (uint64_t)b);
                        for (int part = 0; part < 2; part++) {
                            /* p S / (4 q) + dither, the dither an odd multiple of 2^-17 */
                            const double dv = dither ? ref_dither(part ? h : h >> 16) : 0.0;
                            const int64_t D = 4 * q * 131072;
                            const int64_t N = p * S[part] * 131072 + (int64_t)ldexp(dv, 17) * 4 * q;
                            int64_t want = round_half_even(N, D);
                            want = want > 127 ? 127 : want < -127 ? -127 : want;
                            const int tie = (2 * N) % (2 * D) == D || (2 * N) % (2 * D) == -D;
                            ties += tie;
                            const int8_t got = k.out[o * 2 + (size_t)part];
                            if (got != want && (!tie || llabs(got - want) > 1 || keeps_ties(p, q)))
                                fail_msg("dither %d, gain %d/%d, beam %d, batch %zu, channel %d, spectrum "
                                         "%d, part %d: %d, want %lld (the exact %.9g)", dither, (int)p,
                                         (int)q, b, n, c, t, part, got, (long long)want,
                                         (double)N / (double)D);
                            off[b] += got != want;
                            n_val++;
                        }
                    }
        size_t total = 0;
        for (int b = 0; b < B; b++) {
            total += off[b];
            if (off[b])
                printf("#   dither %d, gain %d/%d, weights %s: %zu of %zu values 1 LSB off the exact "
                       "rounding\n", dither, gains[b / 2][0], gains[b / 2][1], b % 2 ? "1, 1/2, 1/4, 3/4" : "1",
                       off[b], n_val / (size_t)B);
        }
        printf("#   exact gains, dither %d: %zu of %zu values 1 LSB off the exact rounding, all at "
               "ties of gain 3/10 (%zu ties of the exact sums)\n", dither, total, n_val, ties);
        assert_true(dither || ties > n_val / 100); /* the ties are there to be tested */
        bcase_free(&k);
    }
}

/* GPU only: the CUDA output equals the CPU's bit for bit, dither on. */
static void test_cpu_gpu_identical(void **st)
{
    (void)st;
    if (!use_gpu)
        skip();
    /* the last: enough channels that a block takes all 40 batches, one
     * missing an antenna past the 32nd (the kernel keeps a 64-bit mask of
     * a block's batches with gaps) */
    const int shapes[][5] = {{64, 8, 16, 256, 2}, {37, 24, 5, 100, 2}, {130, 4, 3, 512, 1},
                             {8, 2, 1100, 32, 40}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        bcase k;
        bcase_make(&k, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3],
                   (size_t)shapes[i][4], 25);
        k.present[3] = 0;
        if (k.batches > 35)
            k.present[35 * (size_t)k.s.n_ants + 5] = 0;
        bcase_job(&k, 1);
        const size_t out_n = k.batches * cbf_beam_out_batch_bytes(&k.s);
        int8_t *gpu_out = malloc(out_n);
        float *gpu_raw = malloc(out_n * 2 * sizeof(float));
        uint64_t gpu_sat[32];
        bcase_run(&k, 1);
        memcpy(gpu_out, k.out, out_n);
        memcpy(gpu_raw, k.raw, out_n * 2 * sizeof(float));
        memcpy(gpu_sat, k.sat, (size_t)k.s.n_beams * sizeof(uint64_t));
        memset(k.sat, 0, (size_t)k.s.n_beams * sizeof(uint64_t));
        bcase_run(&k, 0);
        assert_memory_equal(gpu_raw, k.raw, out_n * 2 * sizeof(float));
        assert_memory_equal(gpu_out, k.out, out_n);
        assert_memory_equal(gpu_sat, k.sat, (size_t)k.s.n_beams * sizeof(uint64_t));
        free(gpu_out);
        free(gpu_raw);
        bcase_free(&k);
    }
}

static void test_bad_args(void **st)
{
    (void)st;
    char msg[128];
    cbf_beam_shape s = {0, 8, 4, 256};
    assert_int_equal(cbf_beam_shape_check(&s, msg, sizeof msg), CBF_KERN_EINVAL);
    s = (cbf_beam_shape){4, 0, 4, 256};
    assert_int_equal(cbf_beam_shape_check(&s, msg, sizeof msg), CBF_KERN_EINVAL);
    cbf_beam_coef c;
    assert_int_equal(cbf_beam_coef_set(&c, NAN, 1, 0, 0, 1, 0, 0), CBF_KERN_EINVAL);
    assert_int_equal(cbf_beam_coef_set(&c, 1, 1, INFINITY, 0, 1, 0, 0), CBF_KERN_EINVAL);
    cbf_beam_job j = {{4, 2, 8, 16}, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 8};
    assert_int_equal(cbf_beam_cpu(&j, msg, sizeof msg), CBF_KERN_EINVAL);
}

int main(int argc, char **argv)
{
    if ((use_gpu = cbf_test_gpu_arg("test_beamform", argc, argv)) < 0)
        return 77;
    rng_state = cbf_test_seed("CBF_TEST_STATE", use_gpu ? "test_beamform --gpu" : "test_beamform");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_args),       cmocka_unit_test(test_dither_generator),
        cmocka_unit_test(test_reference),      cmocka_unit_test(test_saturation),
        cmocka_unit_test(test_one_antenna),    cmocka_unit_test(test_missing),
        cmocka_unit_test(test_dither_counter), cmocka_unit_test(test_spectrum_span),
        cmocka_unit_test(test_cpu_gpu_identical), cmocka_unit_test(test_exact_gains),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
