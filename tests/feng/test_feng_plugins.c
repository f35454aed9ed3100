/* test_feng_plugins.c: the pfb and fft_post plugins' own logic, CPU path,
 * each plugin file run alone in the test harness (cbf/harness.h), so no
 * engine, thread or YAML is involved: staging across chunk boundaries,
 * output independent of the chunk size, coarse delay as the inverted delay
 * model, presence flags for a missing heap and for a gap in the input, and
 * digitiser power, each held against a direct computation over the whole
 * stream with the kernel API; the delay phase convention of pfb and
 * fft_post together against the float64 model (feng_ref.h), dither off;
 * fft_post's dither as a node (on by default, key, gauges, attributes,
 * feng_id, independent of the buffering). */
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

#include "cbf/cbf.h"
#include "cbf/harness.h"
#include "dither.h"
#include "feng_ref.h"
#include "pfb.h"

#define BITS 10
#define HEAP 4096
#define ANTS 2
#define ANT 1          /* the antenna channelised */
#define CH 256
#define STEP (2 * CH)
#define TAPS 16
#define SPB 64
#define SPH 16
#define LEN (1 << 20)  /* samples per pol in the stream */
#define MAX_BUFS 512

static uint64_t seed;

/* Nonzero: every input is this tone at fs / 4, the band centre (channel
 * CH / 2), instead of noise. Four samples a cycle, so exact in integers. */
static double centre_tone;

static int64_t sample(int ant, int pol, int64_t t)
{
    if (centre_tone != 0.0)
        return (int64_t)nearbyint(centre_tone * cos(0.5 * M_PI * (double)(t % 4) + 0.3));
    uint64_t z = seed ^ ((uint64_t)t * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)(ant * 2 + pol) << 56);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (int64_t)((z ^ (z >> 31)) % 1024) - 512;
}

typedef struct stream_opts {
    size_t spc;
    int64_t skip_chunk;      /* chunk index left out (a gap), or -1 */
    int64_t missing_heap;    /* heap flagged missing on (ANT, pol 1), or -1 */
} stream_opts;

static cbf_port_desc adc_desc(size_t spc)
{
    cbf_port_desc d;
    memset(&d, 0, sizeof d);
    d.type = "cbf.adc.packed";   /* pfb takes two types: say which this is */
    d.dtype = CBF_DTYPE_PACKED;
    d.bits = BITS;
    d.ndim = 3;
    d.shape[0] = ANTS;
    d.shape[1] = 2;
    d.shape[2] = spc * BITS / 8;
    d.n_present = ANTS * 2 * (spc / HEAP);
    d.timestamp_step = (int64_t)spc;
    const char *names[] = {"adc_sample_rate", "samples_per_chunk", "heap_samples"};
    double values[] = {1712e6, (double)spc, HEAP};
    for (int i = 0; i < 3; i++) {
        snprintf(d.attr_names[i], CBF_ATTR_NAME_MAX, "%s", names[i]);
        d.attr_values[i] = values[i];
    }
    d.n_attrs = 3;
    return d;
}

static void push_stream(cbf_harness *pfb, const stream_opts *o)
{
    size_t slab = o->spc * BITS / 8, heaps = o->spc / HEAP;
    cbf_error err;
    for (int64_t c = 0; c < LEN / (int64_t)o->spc; c++) {
        if (c == o->skip_chunk)
            continue;
        cbf_buffer *b;
        assert_int_equal(cbf_harness_new_buffer(pfb, "in", &b, &err), 0);
        assert_int_equal(b->size, ANTS * 2 * slab);
        assert_int_equal(b->n_present, ANTS * 2 * heaps);
        b->timestamp = c * (int64_t)o->spc;
        for (int a = 0; a < ANTS; a++)
            for (int p = 0; p < 2; p++)
                for (size_t i = 0; i < o->spc; i++)
                    feng_ref_put((uint8_t *)b->data + (size_t)(a * 2 + p) * slab, i, BITS,
                                 sample(a, p, b->timestamp + (int64_t)i));
        if (o->missing_heap >= 0 && o->missing_heap / (int64_t)heaps == c)
            b->present[(ANT * 2 + 1) * heaps + (size_t)(o->missing_heap % (int64_t)heaps)] = 0;
        assert_int_equal(cbf_harness_push(pfb, "in", b, &err), 0);
    }
}

/* What one plugin sent on its output, in order. */
typedef struct outputs {
    cbf_buffer *q[MAX_BUFS];
    size_t n;
    cbf_port_desc desc;
} outputs;

typedef struct chain {
    cbf_harness *pfb, *post;
    outputs pfb_out, post_out;
} chain;

static cbf_harness *start(const char *plugin, const char *const *params, size_t n,
                          const cbf_port_desc *in)
{
    cbf_harness *h;
    cbf_error err = {0};
    if (cbf_harness_new(plugin, params, n, &h, &err) || cbf_harness_set_input_desc(h, "in", in, &err) ||
        cbf_harness_init(h, &err))
        fail_msg("%s: %s", plugin, err.msg);
    return h;
}

static void finish(cbf_harness *h, outputs *o)
{
    cbf_error err = {0};
    if (cbf_harness_run(h, &err))
        fail_msg("run: %s", err.msg);
    o->desc = *cbf_harness_output_desc(h, "out");
    for (o->n = 0; o->n < MAX_BUFS && cbf_harness_pull(h, "out", &o->q[o->n]) == 0;)
        o->n++;
    cbf_buffer *more;
    assert_int_equal(cbf_harness_pull(h, "out", &more), CBF_EOS);
}

/* pfb's buffer size (fft_post's too): spectra per buffer. */
static const char *pfb_spb = "spectra_per_buffer=64";

/* pfb then fft_post; post_extra: up to 4 more fft_post parameters. */
static chain run_chain_with(const stream_opts *o, const char *delay, const char *gain,
                            const char *const *post_extra, size_t n_extra)
{
    char d[64], g[96];
    snprintf(d, sizeof d, "coarse_delay=%s", delay);
    snprintf(g, sizeof g, "gain=%s", gain);
    const char *pfb_over[] = {"channels=256", "taps=16", "antenna=1", pfb_spb, d};
    cbf_port_desc in = adc_desc(o->spc);
    chain c;
    c.pfb = start("pfb", pfb_over, 5, &in);
    push_stream(c.pfb, o);
    finish(c.pfb, &c.pfb_out);
    const char *post_over[6] = {"spectra_per_heap=16", g};
    for (size_t i = 0; i < n_extra && i < 4; i++)
        post_over[2 + i] = post_extra[i];
    c.post = start("fft_post", post_over, 2 + (n_extra < 4 ? n_extra : 4), &c.pfb_out.desc);
    /* fft_post transforms in place: it gets copies, the checks read pfb's own. */
    cbf_error err;
    for (size_t i = 0; i < c.pfb_out.n; i++) {
        cbf_buffer *f = c.pfb_out.q[i], *copy;
        assert_int_equal(cbf_harness_new_buffer(c.post, "in", &copy, &err), 0);
        assert_true(copy->size <= f->size && copy->n_present == f->n_present &&
                    copy->aux_size == f->aux_size);
        memcpy(copy->data, f->data, copy->size);
        memcpy(copy->present, f->present, f->n_present);
        memcpy(copy->aux, f->aux, f->aux_size);
        copy->timestamp = f->timestamp;
        copy->seq = f->seq;
        assert_int_equal(cbf_harness_push(c.post, "in", copy, &err), 0);
    }
    finish(c.post, &c.post_out);
    return c;
}

static chain run_chain(const stream_opts *o, const char *delay)
{
    return run_chain_with(o, delay, "[0.05, 0.01]", NULL, 0);
}

/* Releases the outputs; the harness then finds every buffer back. */
static void free_chain(chain *c)
{
    cbf_error err = {0};
    outputs *o[] = {&c->pfb_out, &c->post_out};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < o[k]->n; i++)
            cbf_buffer_unref(o[k]->q[i]);
    if (cbf_harness_free(c->pfb, &err) || cbf_harness_free(c->post, &err))
        fail_msg("%s", err.msg);
}

/* The whole stream of one pol of ANT, packed, for direct kernel calls. */
static uint8_t *whole(int pol)
{
    uint8_t *w = calloc(cbf_packed_bytes(LEN, BITS), 1);
    for (int64_t t = 0; t < LEN; t++)
        feng_ref_put(w, (size_t)t, BITS, sample(ANT, pol, t));
    return w;
}

/* Each output spectrum g against one direct FIR of the samples from
 * g STEP - delay[pol]; windows outside the stream must be flagged missing. */
static void check_fir(const chain *c, const int64_t delay[2], const int64_t *bad_lo,
                      const int64_t *bad_hi)
{
    float w[STEP * TAPS], got[2 * STEP];
    char msg[256];
    assert_int_equal(cbf_pfb_weights(CH, TAPS, 1.0, CBF_PFB_HANN, w, msg, sizeof msg), 0);
    uint8_t *in[2] = {whole(0), whole(1)};
    assert_true(c->pfb_out.n >= 8);
    for (size_t k = 0; k < c->pfb_out.n; k++) {
        const cbf_buffer *b = c->pfb_out.q[k];
        assert_int_equal(b->timestamp, (int64_t)(k * SPB * STEP) + c->pfb_out.q[0]->timestamp);
        uint64_t power[2] = {0, 0};
        for (size_t i = 0; i < SPB; i++) {
            int64_t g = b->timestamp / STEP + (int64_t)i;
            int inside = 1, clean = 1;
            for (int p = 0; p < 2; p++) {
                int64_t a = g * STEP - delay[p];
                inside &= a >= 0 && a + STEP * TAPS <= LEN;
                if (bad_lo && a < bad_hi[p] && a + STEP * TAPS > bad_lo[p])
                    clean = 0;
            }
            if (b->present[i] != (inside && clean))
                fail_msg("buffer %zu spectrum %lld: present %d, expected %d", k, (long long)g,
                         b->present[i], inside && clean);
            if (!inside)
                continue;
            cbf_pfb_job job = {CH, TAPS, BITS, 1, {in[0], in[1]}, LEN,
                               {g * STEP - delay[0], g * STEP - delay[1]}, 1, got, STEP};
            assert_int_equal(cbf_pfb_fir_cpu(&job, w, power, msg, sizeof msg), 0);
            for (int p = 0; p < 2; p++)
                if (memcmp(got + p * STEP, (const float *)b->data + ((size_t)p * SPB + i) * STEP,
                           STEP * sizeof(float)))
                    fail_msg("buffer %zu spectrum %lld pol %d differs from a direct FIR", k,
                             (long long)g, p);
        }
        /* Spectra in the stream account for every sample they own, once. */
        int all_inside = 1;
        for (size_t i = 0; i < SPB; i++)
            for (int p = 0; p < 2; p++)
                all_inside &= (b->timestamp + (int64_t)(i * STEP)) - delay[p] >= 0;
        if (all_inside)
            assert_memory_equal(b->aux, power, sizeof power);
    }
    free(in[0]);
    free(in[1]);
}

static void test_chunking(void **state)
{
    (void)state;
    stream_opts a = {8192, -1, -1}, b = {65536, -1, -1};
    chain ca = run_chain(&a, "[0, 0]"), cb = run_chain(&b, "[0, 0]");
    const int64_t none[2] = {0, 0};
    check_fir(&ca, none, NULL, NULL);
    assert_int_equal(ca.post_out.n, cb.post_out.n);
    for (size_t i = 0; i < ca.post_out.n; i++) {
        const cbf_buffer *x = ca.post_out.q[i], *y = cb.post_out.q[i];
        assert_int_equal(x->timestamp, y->timestamp);
        assert_memory_equal(x->present, y->present, x->n_present);
        assert_memory_equal(x->aux, y->aux, x->aux_size);
        assert_memory_equal(x->data, y->data, ca.post_out.desc.shape[0] * CH * SPH * 2 * 2);
        /* No byte left as the pool's poison pattern (0xa5 pairs). */
        const uint8_t *d = x->data;
        size_t poison = 0;
        for (size_t j = 0; j + 1 < (size_t)(SPB * CH * 4); j += 2)
            poison += d[j] == 0xa5 && d[j + 1] == 0xa5;
        assert_true(poison < 8);
    }
    free_chain(&ca);
    free_chain(&cb);
}

static void test_coarse_delay(void **state)
{
    (void)state;
    stream_opts o = {16384, -1, -1};
    chain c = run_chain(&o, "[7, 1000]");
    const int64_t d[2] = {7, 1000};
    check_fir(&c, d, NULL, NULL);
    /* The first buffer starts at spectrum 0, whose windows begin before
     * the stream: flagged, and so is its batch. */
    assert_int_equal(c.pfb_out.q[0]->timestamp, 0);
    assert_int_equal(c.post_out.q[0]->present[0], 0);
    assert_int_equal(c.post_out.q[0]->present[1], 1);
    free_chain(&c);
}

static void test_missing_and_gap(void **state)
{
    (void)state;
    stream_opts o = {16384, 20, 37};   /* chunk 20 absent; heap 37 missing on pol 1 */
    chain c = run_chain(&o, "[0, 0]");
    /* Bad samples: chunk 20 (both pols) and heap 37 (pol 1). */
    const int64_t gap_lo[2] = {20 * 16384, 20 * 16384}, gap_hi[2] = {21 * 16384, 21 * 16384};
    const int64_t heap_lo[2] = {0, 37 * HEAP}, heap_hi[2] = {0, 38 * HEAP};
    size_t missing = 0;
    for (size_t k = 0; k < c.pfb_out.n; k++) {
        const cbf_buffer *b = c.pfb_out.q[k];
        for (size_t i = 0; i < SPB; i++) {
            int64_t g = b->timestamp / STEP + (int64_t)i, a = g * STEP;
            int bad = (a < gap_hi[0] && a + STEP * TAPS > gap_lo[0]) ||
                      (a < heap_hi[1] && a + STEP * TAPS > heap_lo[1]);
            if (b->present[i] == bad)
                fail_msg("spectrum %lld: present %d, expected %d", (long long)g, b->present[i], !bad);
            missing += bad;
        }
        /* Batches: present exactly when all their spectra are. */
        const cbf_buffer *out = c.post_out.q[k];
        for (size_t bt = 0; bt < SPB / SPH; bt++) {
            int ok = 1;
            for (size_t t = 0; t < SPH; t++)
                ok &= b->present[bt * SPH + t];
            assert_int_equal(out->present[bt], ok);
        }
    }
    assert_true(missing > (size_t)(16384 / STEP));
    free_chain(&c);
}

/* Deterministic draws from the test's seed: [0, 1). */
static double draw(uint64_t i)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

/* Output value (re, im) of spectrum i, channel k, pol p of an fft_post buffer. */
static double complex post_value(const cbf_buffer *b, size_t i, int k, int p)
{
    size_t idx = (((i / SPH) * CH + (size_t)k) * SPH + i % SPH) * 2 + (size_t)p;
    const int8_t *v = (const int8_t *)b->data + 2 * idx;
    return v[0] + I * v[1];
}

/* The delay phase convention, katgpucbf's (docs/formats.md "Delay and
 * phase"): of a total delay D = coarse + fine samples, channel k turns by
 * -pi D (k - CH/2) / CH, so the band centre, channel CH/2, keeps its phase
 * (plus the fringe phase) whatever the delay. pfb's coarse delay and
 * fft_post's fine delay and phase, drawn at random (the coarse delay not
 * a multiple of 4, where the old DC reference happened to agree):
 *   1. a tone at fs / 4 on both pols, pol 0 delayed by D: its centre
 *      channel equals pol 1's turned by the phase alone;
 *   2. noise, both pols delayed: every output value against the float64
 *      model, which states the convention in its own terms. */
static void test_delay_centre_reference(void **state)
{
    (void)state;
    const int64_t c0 = 4 * (1 + (int64_t)(draw(0) * 40)) + 1 + (int64_t)(draw(1) * 3);
    const int64_t c1 = (int64_t)(draw(2) * 200);
    const double f0 = 0.8 * draw(3) - 0.4, f1 = draw(4) - 0.5;
    const double ph0 = 2 * M_PI * draw(5) - M_PI, ph1 = 2 * M_PI * draw(6) - M_PI;
    printf("# coarse %lld, %lld; fine %.4f, %.4f; phase %.4f, %.4f\n", (long long)c0,
           (long long)c1, f0, f1, ph0, ph1);
    stream_opts o = {16384, -1, -1};
    char delay[64], fine[64], phase[64], gain[64];

    /* 1. The centre tone: unit gain scaled so its channel holds ~100 counts. */
    double wd[STEP * TAPS];
    feng_ref_weights(CH, TAPS, 1.0, 1, wd);
    double sum = 0;
    for (int i = 0; i < STEP * TAPS; i++)
        sum += wd[i];
    const double A = 300.0;
    centre_tone = A;
    snprintf(delay, sizeof delay, "[%lld, 0]", (long long)c0);
    snprintf(fine, sizeof fine, "fine_delay=[%.9g, 0]", f0);
    snprintf(phase, sizeof phase, "phase=[%.9g, 0]", ph0);
    snprintf(gain, sizeof gain, "[%.9g, 0]", 100.0 / (A / 2 * fabs(sum)));
    /* Dither off: both parts hold values against undithered rounding. */
    const char *extra[] = {fine, phase, "dither=false"};
    chain c = run_chain_with(&o, delay, gain, extra, 3);
    centre_tone = 0;
    size_t checked = 0;
    for (size_t k = 0; k < c.post_out.n; k++) {
        const cbf_buffer *b = c.post_out.q[k];
        for (size_t i = 0; i < SPB; i++) {
            if (!b->present[i / SPH])
                continue;
            double complex x0 = post_value(b, i, CH / 2, 0), x1 = post_value(b, i, CH / 2, 1);
            assert_true(cabs(x1) > 90 && cabs(x1) < 110);
            double err = fabs(carg(x0 / x1 * cexp(-I * ph0)));
            /* Rounding each part of a 100-count value moves its angle by at
             * most 0.0071 rad; two values compared: 0.015. The DC reference
             * was off by pi D / 2 mod 2 pi, at least 0.9 rad here. */
            if (err > 0.015)
                fail_msg("buffer %zu spectrum %zu: centre channel off by %.4f rad (delay %.4f)", k,
                         i, carg(x0 / x1 * cexp(-I * ph0)), (double)c0 + f0);
            checked++;
        }
    }
    assert_true(checked > 1000);
    free_chain(&c);

    /* 2. Noise against the float64 model. */
    snprintf(delay, sizeof delay, "[%lld, %lld]", (long long)c0, (long long)c1);
    snprintf(fine, sizeof fine, "fine_delay=[%.9g, %.9g]", f0, f1);
    snprintf(phase, sizeof phase, "phase=[%.9g, %.9g]", ph0, ph1);
    c = run_chain_with(&o, delay, "[0.05, 0.01]", extra, 3);
    const int64_t cd[2] = {c0, c1};
    /* The values fft_post was given, as float32 (the model uses them exactly). */
    const double fine_f[2] = {(float)f0, (float)f1}, ph_f[2] = {(float)ph0, (float)ph1};
    double complex gains[CH], X[CH];
    for (int k = 0; k < CH; k++)
        gains[k] = (double)0.05f + I * (double)0.01f;
    uint8_t *in[2] = {whole(0), whole(1)};
    size_t n = 0, exact = 0, worse = 0;
    for (size_t k = 2; k < 6 && k < c.post_out.n; k++) {
        const cbf_buffer *b = c.post_out.q[k];
        for (size_t i = 0; i < SPB; i++) {
            int64_t g = b->timestamp / STEP + (int64_t)i;
            for (int p = 0; p < 2; p++) {
                feng_ref_setup su = {CH, TAPS, BITS, wd, fine_f[p], ph_f[p], gains, cd[p]};
                int64_t a = g * STEP - cd[p];
                assert_true(b->present[i / SPH] && a >= 0 && a + STEP * TAPS <= LEN);
                feng_ref_spectrum(&su, in[p], a, X);
                for (int ch = 0; ch < CH; ch++) {
                    int clipped = 0;
                    int qre = feng_ref_quant(creal(X[ch]), 127, &clipped);
                    int qim = feng_ref_quant(cimag(X[ch]), 127, &clipped);
                    double complex v = post_value(b, i, ch, p);
                    int re = (int)creal(v), im = (int)cimag(v);
                    int d = abs(re - qre) > abs(im - qim) ? abs(re - qre) : abs(im - qim);
                    n++;
                    exact += d == 0;
                    worse += d > 1 || re == -128 || im == -128;
                }
            }
        }
    }
    /* float32 transform against float64: at most 1 LSB off, >= 99.9% exact,
     * as every F-engine chain test (docs/feng.md). */
    if (worse || exact < n - n / 1000)
        fail_msg("%zu values, %zu exact, %zu off by more than 1 LSB", n, exact, worse);
    assert_true(n == 4 * SPB * 2 * CH);
    free(in[0]);
    free(in[1]);
    free_chain(&c);
}

/* The DFT corner is a configuration pfb accepts: taps 1, rect window,
 * w_cutoff 0 (no sinc). Each FIR output is then its own sample times
 * 1 / sqrt(step) (one weight per column, all equal), so fft_post's
 * transform of it is a plain DFT of the frame (the kernel test
 * test_dft_corner holds that part against a float64 DFT). */
static void test_dft_corner(void **state)
{
    (void)state;
    const char *over[] = {"channels=256", "taps=1", "window=rect", "w_cutoff=0", "antenna=1",
                          "spectra_per_buffer=64"};
    stream_opts o = {16384, -1, -1};
    cbf_port_desc in = adc_desc(o.spc);
    cbf_harness *h = start("pfb", over, 6, &in);
    push_stream(h, &o);
    outputs out;
    finish(h, &out);
    assert_int_equal(out.n, LEN / (SPB * STEP));
    const double w = 1.0 / sqrt(STEP);
    for (size_t k = 0; k < out.n; k++) {
        const cbf_buffer *b = out.q[k];
        for (int p = 0; p < 2; p++)
            for (size_t i = 0; i < SPB; i++) {
                int64_t t0 = b->timestamp + (int64_t)(i * STEP);
                assert_true(b->present[i]);
                for (int j = 0; j < STEP; j++) {
                    double x = (double)sample(ANT, p, t0 + j) * w;
                    double got = ((const float *)b->data)[((size_t)p * SPB + i) * STEP + (size_t)j];
                    /* One float32 product: within an ulp of the exact value. */
                    if (fabs(got - x) > 1.2e-7 * fabs(x))
                        fail_msg("buffer %zu pol %d spectrum %zu column %d: %.9g, expected %.9g",
                                 k, p, i, j, got, x);
                }
            }
    }
    for (size_t i = 0; i < out.n; i++)
        cbf_buffer_unref(out.q[i]);
    cbf_error err = {0};
    if (cbf_harness_free(h, &err))
        fail_msg("%s", err.msg);
}

/* fft_post's dither as a node: on by default with key 1, the key and
 * whether dither is on shown as gauges and output attributes (files record
 * them). Each value against the same value without dither (`dither:
 * false`), from its counter written here from docs/formats.md (spectrum
 * from the buffer's timestamp, the input's antenna or `feng_id`): with d
 * its dither, round(v + d) differs from round(v) by at most 1 and only in
 * the direction of d (d > 0 can only raise it), so every changed value
 * must move with the sign of its d; a counter off by anything agrees in
 * sign on about half of them. At least 10% change (7/16 expected for a
 * value's two parts). Then the output does not depend on how pfb cut the
 * stream into buffers (64 or 32 spectra each), dither on. (The kernel's
 * values against the float64 model with dither are in test_feng.c; this
 * test calls no kernel itself: the plugin's FFTW copy and the test's would
 * each clean FFTW up when their own last plan goes.) */
static int dither_sign(uint64_t key, uint64_t s, int k, int p, int antenna, int im)
{
    /* One draw per pair {k, CH - k}; k <= CH/2 takes its high 32 bits. */
    const int q = k <= CH / 2 ? k : CH - k;
    const uint64_t ctr = ((s * CH + (uint64_t)q) * 2 + (uint64_t)p) * 65536 + (uint64_t)antenna;
    const uint64_t u = cbf_dither_u64(key, ctr);
    const uint32_t h = k <= CH / 2 ? (uint32_t)(u >> 32) : (uint32_t)u;
    /* (j + 1/2) 2^-16 - 1/2 for the 16 bits j: never 0, positive from 2^15. */
    return ((im ? h : h >> 16) & 0xffffu) >= 0x8000u ? 1 : -1;
}

static void check_post_dither(const chain *on, const chain *off, uint64_t key, int antenna)
{
    size_t n = 0, changed = 0;
    assert_int_equal(on->post_out.n, off->post_out.n);
    for (size_t b = 0; b < on->post_out.n; b++) {
        const cbf_buffer *x = on->post_out.q[b], *y = off->post_out.q[b];
        assert_int_equal(x->timestamp, y->timestamp);
        for (size_t i = 0; i < SPB; i++)
            for (int k = 0; k < CH; k++)
                for (int p = 0; p < 2; p++) {
                    const double complex a = post_value(x, i, k, p), c = post_value(y, i, k, p);
                    const double dv[2] = {creal(a) - creal(c), cimag(a) - cimag(c)};
                    const uint64_t s = (uint64_t)(x->timestamp / STEP) + i;
                    for (int im = 0; im < 2; im++) {
                        n++;
                        if (dv[im] == 0)
                            continue;
                        changed++;
                        if (fabs(dv[im]) > 1 || (dv[im] > 0 ? 1 : -1) != dither_sign(key, s, k, p,
                                                                                   antenna, im))
                            fail_msg("key %llu antenna %d, spectrum %llu channel %d pol %d %s: "
                                     "%g with dither, %g without, against its dither's sign %d",
                                     (unsigned long long)key, antenna, (unsigned long long)s, k,
                                     p, im ? "im" : "re", im ? cimag(a) : creal(a),
                                     im ? cimag(c) : creal(c),
                                     dither_sign(key, s, k, p, antenna, im));
                    }
                }
    }
    if (changed < n / 10)
        fail_msg("key %llu: dither changed %zu of %zu parts only", (unsigned long long)key,
                 changed, n);
}

static void test_dither_node(void **state)
{
    (void)state;
    stream_opts o = {16384, -1, -1};
    /* Gains for values of a few counts rms, where dither moves many. */
    const char *gain = "[0.01, 0.004]";
    const char *no[] = {"dither=false"};
    chain off = run_chain_with(&o, "[0, 0]", gain, no, 1);
    double v;
    assert_int_equal(cbf_port_desc_get_attr(&off.post_out.desc, "dither", &v), 0);
    assert_true(v == 0);
    assert_int_equal(cbf_harness_gauge(off.post, "dither", &v), 0);
    assert_true(v == 0);
    struct {
        const char *extra[2];
        size_t n;
        int antenna;
        uint64_t key;
    } cases[] = {
        {{NULL, NULL}, 0, ANT, 1},
        {{"dither_key=9007199254740992", "feng_id=42"}, 2, 42, 9007199254740992ull},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        chain c = run_chain_with(&o, "[0, 0]", gain, cases[i].extra, cases[i].n);
        assert_int_equal(cbf_port_desc_get_attr(&c.post_out.desc, "dither", &v), 0);
        assert_true(v == 1);
        assert_int_equal(cbf_port_desc_get_attr(&c.post_out.desc, "dither_key", &v), 0);
        assert_true(v == (double)cases[i].key);
        assert_int_equal(cbf_port_desc_get_attr(&c.post_out.desc, "antenna", &v), 0);
        assert_true(v == cases[i].antenna);
        assert_int_equal(cbf_harness_gauge(c.post, "dither", &v), 0);
        assert_true(v == 1);
        assert_int_equal(cbf_harness_gauge(c.post, "dither_key", &v), 0);
        assert_true(v == (double)cases[i].key);
        check_post_dither(&c, &off, cases[i].key, cases[i].antenna);
        free_chain(&c);
    }
    free_chain(&off);
    /* Another buffering of the same stream: the same bytes, dither on. */
    chain a = run_chain(&o, "[0, 0]");
    pfb_spb = "spectra_per_buffer=32";
    chain b = run_chain(&o, "[0, 0]");
    pfb_spb = "spectra_per_buffer=64";
    const size_t half = SPB / 2 * CH * 2 * 2;
    /* The shorter buffers may reach one buffer further at the stream's end. */
    assert_true(b.post_out.n >= 2 * a.post_out.n && a.post_out.n >= 8);
    for (size_t k = 0; k < 2 * a.post_out.n; k++) {
        assert_int_equal(b.post_out.q[k]->timestamp,
                         a.post_out.q[k / 2]->timestamp + (int64_t)(k % 2 * SPB / 2 * STEP));
        assert_memory_equal(b.post_out.q[k]->data,
                            (const uint8_t *)a.post_out.q[k / 2]->data + k % 2 * half, half);
    }
    free_chain(&a);
    free_chain(&b);
}

int main(void)
{
    seed = 0x5eed0000ull ^ (uint64_t)(uintptr_t)&seed;
    printf("# sample seed %llu\n", (unsigned long long)seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunking),
        cmocka_unit_test(test_coarse_delay),
        cmocka_unit_test(test_missing_and_gap),
        cmocka_unit_test(test_delay_centre_reference),
        cmocka_unit_test(test_dft_corner),
        cmocka_unit_test(test_dither_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
