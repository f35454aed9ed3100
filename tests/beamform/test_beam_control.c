/* test_beam_control.c: the beamformer's requests (beam-weights,
 * beam-delays, beam-quant-gains) through the plugin harness (cbf/harness.h:
 * the real request mailbox, requests handled between buffers in the order
 * pushed), on the CPU path.
 *
 * Four buffers of two heaps each; after the first buffer, changes of each
 * kind at timestamps inside heaps (one between two spectra, one inside the
 * second heap of a buffer, two in one buffer for different beams, two
 * pending in one beam's queue, one at the default `at`), and refusals of
 * every kind. The output is held to a float64 reference written from the
 * maths (katgpucbf's coefficients, the documented dither) in which each
 * spectrum uses the values whose timestamps are at or before its own: at
 * most 1 LSB off, >= 99.9% exact, so a change a spectrum early or late
 * (values many LSBs apart, checked) or a refused request that changed
 * something fails. An antenna flagged missing in one heap, its bytes
 * garbage, is left out of the reference's sums and counted in
 * `missing_heaps`. The GPU runs the same segments through the same code
 * with the CUDA kernel, whose spans test_beamform --gpu holds to the CPU's
 * bytes; test_beam_control.py covers the sensors and the katcp forms.
 *
 * --deferred runs the same with CBF_FLIGHT_DEFER=1 (stage/flight.h): the
 * node holds each output back until the next buffer is queued, as on a GPU
 * that is behind, so the requests are handled while a buffer is queued
 * and unsent (`at` -1 and "already processed" must follow what is queued,
 * not what is sent), and the last output goes out only when the stream
 * ends; every buffer's `saturated` must still be the sum of its per-beam
 * counts and the node's counters the totals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cbf/cbf.h>
#include <cbf/harness.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../gpu_available.h"   /* cbf_test_seed */
#include "beam_rng.h"
#include "dither.h"
#include "stage/contracts/xeng.h"

enum { A = 5, B = 3, C = 8, T = 32, NB = 2, BUFS = 4 };
#define SBS 16                         /* 2 x C: samples between spectra */
#define RATE 1712e6
#define KEY 5
#define TS0 ((int64_t)SBS * 4096)      /* the first buffer's timestamp */
#define BUF_SAMPLES ((int64_t)NB * T * SBS)
/* the timestamp of spectrum i (counted across heaps) of buffer k */
#define TS(k, i) (TS0 + (k) * BUF_SAMPLES + (int64_t)(i) * SBS)


/* The beams' values, as a reference tracks them. */
typedef struct beams {
    double w[B][A], d[B][A], f[B][A], qg[B];
} beams;

static const int pol[B] = {0, 1, 0};

/* One accepted change as the reference applies it. */
typedef struct change {
    int64_t at;
    int beam, kind;                /* 0 weights, 1 delays (delay, fringe pairs), 2 gain */
    double v[2 * A];
} change;

static change changes[8];
static int n_changes;

static void apply(beams *s, const change *c)
{
    for (int a = 0; a < A; a++) {
        if (c->kind == 0)
            s->w[c->beam][a] = c->v[a];
        if (c->kind == 1) {
            s->d[c->beam][a] = c->v[2 * a];
            s->f[c->beam][a] = c->v[2 * a + 1];
        }
    }
    if (c->kind == 2)
        s->qg[c->beam] = c->v[0];
}

/* Beam b at (channel c, spectrum t of batch n) of an input buffer, in
 * float64, before dither. */
static void ref_sum(const beams *s, const int8_t *x, const uint8_t *present, int n, int b, int c,
                    int t, double out[2])
{
    const double spacing = RATE / SBS, centre = C / 2.0;
    double re = 0, im = 0;
    for (int a = 0; a < A; a++) {
        if (!present[n * A + a])
            continue;
        const double ph = s->f[b][a] - 2 * M_PI * spacing * (c - centre) * s->d[b][a];
        const double g = s->w[b][a] * s->qg[b];
        const int8_t *v = x + ((((size_t)n * A + (size_t)a) * C + (size_t)c) * T + (size_t)t) * 4 +
                          2 * (size_t)pol[b];
        re += g * (cos(ph) * v[0] - sin(ph) * v[1]);
        im += g * (cos(ph) * v[1] + sin(ph) * v[0]);
    }
    out[0] = re;
    out[1] = im;
}

static int quant(double v, int *clipped)
{
    const double r = rint(v);
    *clipped |= r > 127 || r < -127;
    return r > 127 ? 127 : r < -127 ? -127 : (int)r;
}

/* The 8-bit value the documentation gives for a sum (dither of
 * docs/formats.md on the absolute spectrum, channel and beam). */
static void ref_out(const double sum[2], int64_t ts, int c, int b, int q[2], int *clipped)
{
    const uint64_t spec = (uint64_t)(ts / SBS);
    const uint64_t u = cbf_dither_u64(KEY, ((spec / 2) * C + (uint64_t)c) * B + (uint64_t)b);
    const uint32_t h = spec % 2 ? (uint32_t)u : (uint32_t)(u >> 32);
    q[0] = quant(sum[0] + cbf_dither_float16(h >> 16), clipped);
    q[1] = quant(sum[1] + cbf_dither_float16(h), clipped);
}

static int8_t *inputs[BUFS];
static uint8_t *presents[BUFS];

static cbf_harness *make(void)
{
    const char *params[] = {"beams=[{pol: 0, quant_gain: 0.5}, {pol: 1, quant_gain: 0.3}, "
                            "{pol: 0, quant_gain: 0.25}]",
                            "names=bf.0x,bf.0y,third", "dither_key=5",
                            "weights=[1, 0.5, -0.25, 0.75, 1]",
                            "delays=[0, 1e-9, 2e-9, -1e-9, 0.5e-9]"};
    cbf_harness *h;
    cbf_error err;
    if (cbf_harness_new("beamformer", params, sizeof params / sizeof *params, &h, &err))
        fail_msg("harness: %s", err.msg);
    const cbf_xeng_batch xb = {CBF_DTYPE_CI8, NB, A, C, T};
    cbf_port_desc d;
    cbf_xeng_batch_desc(&d, &xb, CBF_MEM_HOST);
    cbf_port_desc_set_attr(&d, CBF_ATTR_CHANNELS, C);
    cbf_port_desc_set_attr(&d, CBF_ATTR_SAMPLES_BETWEEN_SPECTRA, SBS);
    cbf_port_desc_set_attr(&d, CBF_ATTR_ADC_SAMPLE_RATE, RATE);
    d.timestamp_step = BUF_SAMPLES;
    if (cbf_harness_set_input_desc(h, "in", &d, &err) || cbf_harness_init(h, &err))
        fail_msg("init: %s", err.msg);
    return h;
}

static void push(cbf_harness *h, int k)
{
    cbf_buffer *b;
    cbf_error err;
    assert_int_equal(cbf_harness_new_buffer(h, "in", &b, &err), 0);
    memcpy(b->data, inputs[k], (size_t)NB * A * C * T * 4);
    memcpy(b->present, presents[k], (size_t)NB * A);
    b->timestamp = TS(k, 0);
    b->seq = (uint64_t)k;
    assert_int_equal(cbf_harness_push(h, "in", b, &err), 0);
}

typedef struct sent {
    cbf_harness_reply *r;
    const char *what, *want;       /* want: NULL accepted, else part of the refusal */
    int64_t at;
} sent;

static sent reqs[16];
static int n_reqs;

/* Queues a request; `c` (accepted ones) goes to the reference. */
static void request(cbf_harness *h, const char *name, const char *what, const char *want,
                    const change *c, int64_t at, const char *beam, const char *values)
{
    char a_beam[64], a_vals[1024], a_at[40];
    snprintf(a_beam, sizeof a_beam, "beam=%s", beam);
    snprintf(a_vals, sizeof a_vals, "%s", values);
    snprintf(a_at, sizeof a_at, "at=%lld", (long long)at);
    const char *args[] = {a_beam, a_vals, a_at};
    cbf_error err;
    sent *s = &reqs[n_reqs++];
    *s = (sent){NULL, what, want, at};
    if (cbf_harness_request(h, name, args, 3, &s->r, &err))
        fail_msg("%s: not queued: %s", what, err.msg);
    if (c)
        changes[n_changes++] = *c;
}

/* A list of n numbers written for a request. */
static void list(char *buf, size_t len, const char *key, const double *v, int n)
{
    size_t o = (size_t)snprintf(buf, len, "%s=[", key);
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%.17g", i ? ", " : "", v[i]);
    snprintf(buf + o, len - o, "]");
}

static change random_change(int64_t at, int beam, int kind)
{
    change c = {at, beam, kind, {0}};
    for (int a = 0; a < A; a++) {
        if (kind == 0)
            c.v[a] = 2 * unif() - 1;
        if (kind == 1) {
            c.v[2 * a] = (2 * unif() - 1) * 2e-9;
            c.v[2 * a + 1] = (2 * unif() - 1) * M_PI;
        }
    }
    if (kind == 2)
        c.v[0] = 0.5 + unif();
    return c;
}

/* c goes to the reference at c.at; the request says at=arg_at. */
static void send_change(cbf_harness *h, const char *what, change c, const char *beam,
                        int64_t arg_at)
{
    static const char *const names[] = {"beam-weights", "beam-delays", "beam-quant-gains"};
    char v[1024];
    if (c.kind == 2)
        snprintf(v, sizeof v, "gain=%.17g", c.v[0]);
    else
        list(v, sizeof v, c.kind == 0 ? "weights" : "delays", c.v, c.kind == 0 ? A : 2 * A);
    request(h, names[c.kind], what, NULL, &c, arg_at, beam, v);
}

static void test_timed_changes(void **st)
{
    (void)st;
    const size_t in_n = (size_t)NB * A * C * T * 4;
    for (int k = 0; k < BUFS; k++) {
        inputs[k] = malloc(in_n);
        presents[k] = malloc((size_t)NB * A);
        for (size_t i = 0; i < in_n; i++)
            inputs[k][i] = (int8_t)((int)(rnd() % 61) - 30);
        memset(presents[k], 1, (size_t)NB * A);
    }
    /* antenna 2 missing from buffer 2's second heap, garbage in its place */
    presents[2][1 * A + 2] = 0;
    memset(inputs[2] + (size_t)(1 * A + 2) * C * T * 4, 0x7f, (size_t)C * T * 4);

    cbf_harness *h = make();
    push(h, 0);
    /* After buffer 0: changes inside heaps of later buffers. */
    send_change(h, "weights of bf.0x between spectra 13 and 14 of buffer 1",
                random_change(TS(1, 13) + 5, 0, 0), "bf.0x", TS(1, 13) + 5);
    send_change(h, "delays of bf.0y at spectrum 39 of buffer 2 (its second heap)",
                random_change(TS(2, T + 7), 1, 1), "bf.0y", TS(2, T + 7));
    send_change(h, "quant gain of beam 2 (by index) at spectrum 20 of buffer 2",
                random_change(TS(2, 20), 2, 2), "2", TS(2, 20));
    send_change(h, "weights of bf.0x again, at spectrum 41 of buffer 3",
                random_change(TS(3, T + 9), 0, 0), "bf.0x", TS(3, T + 9));
    /* at -1: from the next unprocessed spectrum, buffer 1's first */
    send_change(h, "weights of third from the next spectrum", random_change(TS(1, 0), 2, 0),
                "third", -1);
    /* Refusals: each changes nothing (the comparison below would show it). */
    request(h, "beam-weights", "four weights for five antennas", "4 values", NULL, TS(2, 0),
            "bf.0x", "weights=[1, 1, 1, 1]");
    request(h, "beam-weights", "a timestamp already processed", "already been processed", NULL,
            TS(0, 5), "bf.0x", "weights=[1, 1, 1, 1, 1]");
    request(h, "beam-weights", "an empty weight list", "0 values", NULL, TS(1, 10), "bf.0x",
            "weights=[]");
    request(h, "beam-delays", "three delay values", "3 values", NULL, TS(2, 0), "bf.0y",
            "delays=[0, 0, 0]");
    request(h, "beam-quant-gains", "an unknown beam", "no beam 'nope'", NULL, TS(2, 0), "nope",
            "gain=1");
    request(h, "beam-quant-gains", "a beam index out of range", "no beam '3'", NULL, TS(2, 0),
            "3", "gain=1");
    /* NaN and unknown arguments stop at the core's checks, before the node. */
    cbf_harness_reply *r;
    cbf_error err;
    const char *nan_args[] = {"beam=bf.0x", "weights=[1, .nan, 1, 1, 1]"};
    assert_int_not_equal(cbf_harness_request(h, "beam-weights", nan_args, 2, &r, &err), 0);
    printf("# NaN weight refused: %s\n", err.msg);
    const char *inf_args[] = {"beam=bf.0x", "gain=.inf"};
    assert_int_not_equal(cbf_harness_request(h, "beam-quant-gains", inf_args, 2, &r, &err), 0);
    for (int k = 1; k < BUFS; k++)
        push(h, k);
    assert_int_equal(cbf_harness_end(h, NULL, &err), 0);
    if (cbf_harness_run(h, &err))
        fail_msg("run: %s", err.msg);

    for (int i = 0; i < n_reqs; i++) {
        const int rc = cbf_harness_reply_status(reqs[i].r, &err);
        if (!reqs[i].want && rc)
            fail_msg("%s: refused: %s", reqs[i].what, err.msg);
        if (reqs[i].want && (!rc || !strstr(err.msg, reqs[i].want)))
            fail_msg("%s: %s, want a refusal saying '%s'", reqs[i].what, rc ? err.msg : "accepted",
                     reqs[i].want);
        if (rc)
            printf("# refused as it should be: %s\n", err.msg);
        int64_t at, spectrum, pending;
        if (!rc) {
            assert_int_equal(cbf_harness_reply_int(reqs[i].r, "at", &at), 0);
            assert_int_equal(cbf_harness_reply_int(reqs[i].r, "spectrum", &spectrum), 0);
            assert_int_equal(cbf_harness_reply_int(reqs[i].r, "pending", &pending), 0);
            assert_int_equal(at, reqs[i].at < 0 ? TS(1, 0) : reqs[i].at);
            assert_int_equal(spectrum, (at + SBS - 1) / SBS);
        }
    }
    const char *bname;
    assert_int_equal(cbf_harness_reply_string(reqs[2].r, "beam", &bname), 0);
    assert_string_equal(bname, "third");

    /* The reference: values from the YAML, then each change from its
     * timestamp on. */
    beams s;
    static const double yw[A] = {1, 0.5, -0.25, 0.75, 1}, yd[A] = {0, 1e-9, 2e-9, -1e-9, 0.5e-9};
    const double yq[B] = {0.5, 0.3, 0.25};
    for (int b = 0; b < B; b++) {
        s.qg[b] = yq[b];
        for (int a = 0; a < A; a++) {
            s.w[b][a] = yw[a];
            s.d[b][a] = yd[a];
            s.f[b][a] = 0;
        }
    }
    int applied = 0;
    size_t total = 0, off = 0, tell = 0;
    uint64_t sat_total = 0;
    for (int k = 0; k < BUFS; k++) {
        cbf_buffer *out;
        assert_int_equal(cbf_harness_pull(h, "out", &out), 0);
        assert_int_equal(out->timestamp, TS(k, 0));
        const int8_t *y = out->data;
        uint64_t sat[B] = {0};
        for (int n = 0; n < NB; n++)
            for (int t = 0; t < T; t++) {
                const int64_t ts = TS(k, n * T + t);
                beams before = s;
                while (applied < n_changes) {
                    int pick = -1;   /* the earliest change not yet applied */
                    for (int i = 0; i < n_changes; i++)
                        if (changes[i].at <= ts && changes[i].beam >= 0 &&
                            (pick < 0 || changes[i].at < changes[pick].at))
                            pick = i;
                    if (pick < 0)
                        break;
                    apply(&s, &changes[pick]);
                    changes[pick].beam = -1 - changes[pick].beam;
                    applied++;
                }
                const int changed = memcmp(&before, &s, sizeof s) != 0;
                for (int b = 0; b < B; b++)
                    for (int c = 0; c < C; c++) {
                        double sum[2], old[2];
                        int q[2], qo[2], clipped = 0, ignore = 0;
                        ref_sum(&s, inputs[k], presents[k], n, b, c, t, sum);
                        ref_out(sum, ts, c, b, q, &clipped);
                        if (changed) {
                            /* the values just before the change would be told apart */
                            ref_sum(&before, inputs[k], presents[k], n, b, c, t, old);
                            ref_out(old, ts, c, b, qo, &ignore);
                            tell += abs(q[0] - qo[0]) > 2 || abs(q[1] - qo[1]) > 2;
                        }
                        const int8_t *o = y + ((((size_t)n * B + (size_t)b) * C + (size_t)c) * T +
                                               (size_t)t) * 2;
                        for (int p = 0; p < 2; p++) {
                            const int e = abs(o[p] - q[p]);
                            if (e > 1)
                                fail_msg("buffer %d heap %d spectrum %d (timestamp %lld) beam %d "
                                         "channel %d: %d, the reference %d", k, n, t, (long long)ts,
                                         b, c, o[p], q[p]);
                            off += e == 1;
                            total++;
                        }
                        sat[b] += (uint64_t)clipped;
                    }
            }
        if (!off)
            assert_memory_equal(out->aux, sat, sizeof sat);
        uint64_t aux[B], aux_sum = 0;
        memcpy(aux, out->aux, sizeof aux);
        for (int b = 0; b < B; b++)
            aux_sum += aux[b];
        assert_int_equal(out->saturated, aux_sum);
        sat_total += aux_sum;
        cbf_buffer_unref(out);
    }
    assert_int_equal(applied, n_changes);
    printf("# %zu values, %zu 1 LSB off; %zu values at the changes' first spectra differ from "
           "the old values' by more than 2\n", total, off, tell);
    if (off * 1000 > total)
        fail_msg("%zu of %zu values 1 LSB off", off, total);
    assert_true(tell > 20);
    uint64_t missing;
    assert_int_equal(cbf_harness_counter(h, "missing_heaps", &missing), 0);
    assert_int_equal(missing, 1);
    uint64_t counted, batches;
    assert_int_equal(cbf_harness_counter(h, "saturated", &counted), 0);
    assert_int_equal(counted, sat_total);
    assert_int_equal(cbf_harness_counter(h, "batches", &batches), 0);
    assert_int_equal(batches, (uint64_t)BUFS * NB);
    cbf_buffer *extra;
    assert_int_equal(cbf_harness_pull(h, "out", &extra), CBF_EOS);
    assert_int_equal(cbf_harness_free(h, &err), 0);
    for (int k = 0; k < BUFS; k++) {
        free(inputs[k]);
        free(presents[k]);
    }
}

/* Bad beam names fail at start-up, naming the parameter. */
static void test_bad_names(void **st)
{
    (void)st;
    const char *bad[] = {"names=a,a", "names=a", "names=a,b,c", "names=a b,c", "names=a/b,c"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *params[] = {bad[i]};
        cbf_harness *h;
        cbf_error err;
        assert_int_equal(cbf_harness_new("beamformer", params, 1, &h, &err), 0);
        const cbf_xeng_batch xb = {CBF_DTYPE_CI8, 1, A, C, T};
        cbf_port_desc d;
        cbf_xeng_batch_desc(&d, &xb, CBF_MEM_HOST);
        cbf_port_desc_set_attr(&d, CBF_ATTR_CHANNELS, C);
        cbf_port_desc_set_attr(&d, CBF_ATTR_SAMPLES_BETWEEN_SPECTRA, SBS);
        cbf_port_desc_set_attr(&d, CBF_ATTR_ADC_SAMPLE_RATE, RATE);
        assert_int_equal(cbf_harness_set_input_desc(h, "in", &d, &err), 0);
        const int rc = cbf_harness_init(h, &err);
        if (!rc || !strstr(err.msg, "names"))
            fail_msg("%s: %s", bad[i], rc ? err.msg : "accepted");
        printf("# %s: %s\n", bad[i], err.msg);
        cbf_harness_free(h, &err);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--deferred"))
        setenv("CBF_FLIGHT_DEFER", "1", 1);
    else if (argc > 1)
        return fprintf(stderr, "usage: test_beam_control [--deferred]\n"), 2;
    rng_state = cbf_test_seed("CBF_TEST_STATE", argc > 1 ? "test_beam_control --deferred" : "test_beam_control");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timed_changes),
        cmocka_unit_test(test_bad_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
