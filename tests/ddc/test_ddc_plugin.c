/* The ddc plugin through the real cbf-run: dsim -> ddc -> filesink, with
 * dsim's samples recorded beside. Every output buffer equals cbf_ddc_cpu run
 * on the recorded stream (bit for bit on the CPU engine; on the GPU engine
 * within 1e-5 of the buffer's largest value, the sincospif rounding);
 * buffer timestamps and presence flags follow the absolute output grid and
 * the missing heap; two input chunk sizes give the same bits. A chunk
 * dropped on the way in (a timestamp gap shorter than the staging's
 * max_gap) becomes missing heaps: the buffers stay on their grid, the
 * blocks that touch it are flagged, and every output equals the kernel run
 * on the stream with that chunk zeroed. The levels are katgpucbf's (taps
 * scaled by sqrt(S)): a tone's magnitude and the noise density over the
 * kept band against the maths. Skips (77) without cbf-run, and with --gpu
 * without a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <complex.h>
#include <math.h>

#include "ddc.h"
#include "filter_design.h"
#include "../gpu_available.h"
#include "pipeline.h"

#define S 8
#define TAPS 64
#define N_OUT 4096
#define LENGTH 196608
#define HEAP 4096
#define MISSING_HEAP 21

static int use_gpu;

static const char *yaml_fmt =
    "engine: {gpu: %s, plugin_path: [" DDC_TEST_PLUGIN_DIR "]}\n"
    "nodes:\n"
    "  dsim:\n"
    "    plugin: dsim\n"
    "    params: {antennas: 2, bits: 10, samples_per_chunk: %d, length: %d, seed: 5,\n"
    "             tones: [{frequency: 301.1e6, amplitude: 0.3}], noise: 0.05,\n"
    "             missing: [%d]}\n"
    "  gap:\n"
    "    plugin: test_gap\n"
    "    params: {drop: [%s]}\n"
    "  ddc:\n"
    "    plugin: ddc\n"
    "    params: {centre_frequency: 300e6, decimation: %d, taps: %d, antenna: 1,\n"
    "             outputs_per_buffer: %d}\n"
    "  sink:\n"
    "    plugin: filesink\n"
    "    params: {path: %s, overwrite: true}\n"
    "edges:\n"
    "  - dsim.out -> sink.in\n"
    "  - ddc.out -> sink.in\n"
    "  - dsim.out -> gap.in\n"
    "  - gap.out -> ddc.in\n";

typedef struct result {
    size_t n_chunks, n_buf, bytes;
    uint8_t *dsim;
    float *ddc;
    int64_t *ts;
    uint8_t *present;
} result;

/* Runs the engine, its log shown when it fails, and opens the file it wrote. */
static hid_t run_and_open(const char *name, const char *yaml, const char *path)
{
    hid_t f = pl_run_open(name, yaml, path);
    assert_true(f >= 0);
    return f;
}

/* drop: the index of a chunk test_gap drops, or -1. */
static result do_run(const char *name, int chunk, int drop)
{
    char yaml[2048], path[512], drops[32] = "";
    snprintf(path, sizeof path, "%s/%s.h5", pl_tmpdir(), name);
    if (drop >= 0)
        snprintf(drops, sizeof drops, "%d", drop);
    snprintf(yaml, sizeof yaml, yaml_fmt, use_gpu ? "required" : "none", chunk, LENGTH,
             MISSING_HEAP, drops, S, TAPS, N_OUT, path);
    hid_t f = run_and_open(name, yaml, path);
    result r = {0};
    int rank;
    hsize_t d[8];
    r.dsim = pl_read(f, "/dsim/data", H5T_NATIVE_UINT8, &rank, d);
    assert_non_null(r.dsim);
    assert_int_equal(rank, 4); /* [chunk][antenna][pol][byte] */
    r.n_chunks = d[0];
    r.bytes = d[3];
    r.ddc = pl_read(f, "/ddc/data", H5T_NATIVE_FLOAT, &rank, d);
    assert_non_null(r.ddc);
    assert_int_equal(rank, 4); /* [buffer][pol][sample][re_im] */
    assert_int_equal(d[1], 2);
    assert_int_equal(d[2], N_OUT);
    r.n_buf = d[0];
    r.ts = pl_read(f, "/ddc/timestamp", H5T_NATIVE_INT64, &rank, d);
    r.present = pl_read(f, "/ddc/present", H5T_NATIVE_UINT8, &rank, d);
    assert_non_null(r.ts);
    assert_non_null(r.present);
    assert_int_equal(d[1], N_OUT / (HEAP / S));
    double decimation;
    assert_int_equal(pl_attr_double(f, "/ddc", "decimation", &decimation), 0);
    assert_true(decimation == S);
    H5Fclose(f);
    return r;
}

static void result_free(result *r)
{
    free(r->dsim);
    free(r->ddc);
    free(r->ts);
    free(r->present);
}

/* Antenna 1's two pols as contiguous packed streams (padded for the
 * kernel), with chunk `drop` (or none, -1) zero as the ddc stages it. */
static void streams(const result *r, int drop, uint8_t *pol[2])
{
    for (int p = 0; p < 2; p++) {
        pol[p] = calloc(cbf_packed_bytes(LENGTH, 10), 1);
        for (size_t c = 0; c < r->n_chunks; c++)
            if ((int)c != drop)
                memcpy(pol[p] + c * r->bytes, r->dsim + ((c * 2 + 1) * 2 + (size_t)p) * r->bytes,
                       r->bytes);
    }
}

static void check(const result *r, int chunk, int drop)
{
    /* Samples [gap_lo, gap_hi) never reached the ddc. */
    const size_t gap_lo = drop < 0 ? 0 : (size_t)drop * (size_t)chunk;
    const size_t gap_hi = drop < 0 ? 0 : gap_lo + (size_t)chunk;
    /* Buffer k holds outputs [k N, (k + 1) N): it needs samples up to
     * ((k + 1) N - 1) S + taps, so LENGTH holds 5 of them. */
    assert_int_equal(r->n_buf, 5);
    cbf_ddc_config cfg = {10, S, TAPS, cbf_ddc_mix_step(300e6 / 1712e6)};
    double h[TAPS];
    float z[2 * TAPS];
    char msg[256];
    assert_int_equal(cbf_fd_ddc_design(TAPS, S, 0.005, h, NULL, NULL, msg, sizeof msg), 0);
    /* The plugin's taps: the design (passband 1) times sqrt(S), katgpucbf's scaling. */
    for (int k = 0; k < TAPS; k++)
        h[k] *= sqrt((double)S);
    assert_int_equal(cbf_ddc_weights(&cfg, h, z, msg, sizeof msg), 0);
    uint8_t *pol[2];
    streams(r, drop, pol);
    float *want = malloc(4 * sizeof(float) * N_OUT);
    const size_t block = HEAP / S, blocks = N_OUT / block;
    for (size_t k = 0; k < r->n_buf; k++) {
        assert_int_equal(r->ts[k], (int64_t)(k * N_OUT * S));
        cbf_ddc_job job = {{pol[0], pol[1]}, LENGTH, 0, (size_t)r->ts[k], N_OUT, want, N_OUT};
        assert_int_equal(cbf_ddc_cpu(&cfg, z, &job, msg, sizeof msg), 0);
        const float *got = r->ddc + k * 4 * N_OUT;
        if (!use_gpu) {
            assert_memory_equal(got, want, 4 * sizeof(float) * N_OUT);
        } else {
            double big = 0.0, diff = 0.0;
            for (size_t i = 0; i < 4 * N_OUT; i++) {
                big = fmax(big, fabs(want[i]));
                diff = fmax(diff, fabs(got[i] - want[i]));
            }
            if (!(diff <= 1e-5 * big))
                fail_msg("buffer %zu: GPU differs from CPU by %g (largest %g)", k, diff, big);
        }
        for (size_t b = 0; b < blocks; b++) {
            size_t lo = (size_t)r->ts[k] + b * block * S, hi = lo + (block - 1) * S + TAPS;
            int touches = (lo < (MISSING_HEAP + 1) * HEAP && hi > MISSING_HEAP * HEAP) ||
                          (lo < gap_hi && hi > gap_lo);
            assert_int_equal(r->present[k * blocks + b], !touches);
        }
    }
    free(want);
    free(pol[0]);
    free(pol[1]);
}

static void matches_kernel_for_two_chunkings(void **state)
{
    (void)state;
    result a = do_run("ddc_small_chunks", 16384, -1);
    check(&a, 16384, -1);
    result b = do_run("ddc_large_chunks", 65536, -1);
    check(&b, 65536, -1);
    assert_int_equal(a.n_buf, b.n_buf);
    assert_memory_equal(a.ddc, b.ddc, a.n_buf * 4 * sizeof(float) * N_OUT);
    result_free(&a);
    result_free(&b);
}

/* A dropped chunk inside buffer 3's windows, and one at a buffer edge:
 * missing heaps, the grid kept, the rest bit for bit (the CPU engine). */
static void short_gap_becomes_missing_heaps(void **state)
{
    (void)state;
    static const int drops[] = {7, 4};
    for (size_t i = 0; i < sizeof drops / sizeof drops[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "ddc_gap_%d", drops[i]);
        result r = do_run(name, 16384, drops[i]);
        check(&r, 16384, drops[i]);
        result_free(&r);
    }
}

/* dsim (one antenna, 10 bits, `signal` its noise and tones) -> ddc (centre
 * 300 MHz, S, TAPS) -> filesink, with dsim's samples in the file too when
 * record_input; returns the open file. */
static hid_t run_signal(const char *name, const char *signal, int record_input)
{
    char yaml[1024], path[512];
    snprintf(path, sizeof path, "%s/%s.h5", pl_tmpdir(), name);
    snprintf(yaml, sizeof yaml,
             "engine: {gpu: %s}\n"
             "nodes:\n"
             "  dsim: {plugin: dsim, params: {antennas: 1, bits: 10, samples_per_chunk: 16384,\n"
             "         length: %d, %s}}\n"
             "  ddc: {plugin: ddc, params: {centre_frequency: 300e6, decimation: %d, taps: %d,\n"
             "        outputs_per_buffer: %d}}\n"
             "  sink: {plugin: filesink, params: {path: %s, overwrite: true}}\n"
             "edges:\n"
             "  - dsim.out -> ddc.in\n"
             "  - ddc.out -> sink.in\n%s",
             use_gpu ? "required" : "none", LENGTH, signal, S, TAPS, N_OUT, path,
             record_input ? "  - dsim.out -> sink.in\n" : "");
    return run_and_open(name, yaml, path);
}

/* The narrowband level is katgpucbf's: its DDC taps are designed to pass 1
 * and then scaled by sqrt(S), so a tone A cos(2 pi f t) in the passband
 * comes out of the mixer and filter as a complex value of magnitude
 * sqrt(S) x A / 2 x H(f - centre), H the design's amplitude response
 * (1 within the 0.08 dB ripple), evaluated here in float64 from the
 * design alone. dsim writes the tone with no noise: A = 0.3 x 511 counts.
 * Tolerance: dsim rounds each sample to an integer (error at most 1/2);
 * over the >= 20000 outputs averaged, that moves the mean magnitude by far
 * less than 0.2%, while the unscaled level would be 1/sqrt(8) of it. */
static void tone_level_is_katgpucbfs(void **state)
{
    (void)state;
    hid_t f = run_signal("ddc_level", "noise: 0, tones: [{frequency: 301.1e6, amplitude: 0.3}]", 0);
    int rank;
    hsize_t d[8];
    float *y = pl_read(f, "/ddc/data", H5T_NATIVE_FLOAT, &rank, d);
    H5Fclose(f);
    assert_non_null(y);
    const size_t n = d[0] * d[1] * d[2];
    assert_true(n >= 20000);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += hypot(y[2 * i], y[2 * i + 1]);
    double h[TAPS];
    char msg[256];
    assert_int_equal(cbf_fd_ddc_design(TAPS, S, 0.005, h, NULL, NULL, msg, sizeof msg), 0);
    const double mix = ldexp((double)cbf_ddc_mix_step(300e6 / 1712e6), -32);
    const double A = 0.3 * 511, H = cbf_fd_amplitude(h, TAPS, 301.1e6 / 1712e6 - mix);
    const double expect = sqrt((double)S) * A / 2 * H, got = sum / (double)n;
    printf("tone level: %.4f, katgpucbf's scaling gives %.4f (sqrt(%d) x %.2f / 2 x %.5f)\n", got,
           expect, S, A, H);
    if (fabs(got - expect) > 2e-3 * expect)
        fail_msg("narrowband tone level %.4f, expected %.4f", got, expect);
    free(y);
}

/* Noise keeps its spectral density: white input noise of variance v comes
 * out of the DDC flat at v over the kept band (the inner half of the
 * output's), the level a wideband channel sees, which is what the sqrt(S)
 * scaling is for. Measured as the mean periodogram |DFT_M(y)|^2 / M over
 * the kept bins against v measured on the recorded input. Tolerance 5%:
 * the mean of ~2 x 12000 exponential values has a relative spread of
 * 0.65%; the passband ripple (0.08 dB) is 1.8% in power at most and the
 * rectangular blocks leak about 0.6% away; the unscaled level is 1/8. */
static void noise_density_is_the_inputs(void **state)
{
    (void)state;
    hid_t f = run_signal("ddc_noise", "noise: 0.1, tones: [], seed: 11", 1);
    int rank;
    hsize_t dx[8], dy[8];
    uint8_t *x = pl_read(f, "/dsim/data", H5T_NATIVE_UINT8, &rank, dx);
    float *y = pl_read(f, "/ddc/data", H5T_NATIVE_FLOAT, &rank, dy);
    H5Fclose(f);
    assert_non_null(x);
    assert_non_null(y);
    double v = 0;
    size_t nx = 0;
    for (size_t c = 0; c < dx[0]; c++)
        for (int p = 0; p < 2; p++)
            for (size_t i = 0; i < dx[3] * 8 / 10; i++, nx++) {
                double s = cbf_packed_sample(x + (c * 2 + (size_t)p) * dx[3], i, 10);
                v += s * s;
            }
    v /= (double)nx;
    enum { M = 256 };
    double complex tw[M];
    for (int j = 0; j < M; j++)
        tw[j] = cexp(-2 * M_PI * I * j / M);
    double kept = 0;
    size_t bins = 0;
    const size_t per_pol = dy[2];
    for (size_t b = 0; b < dy[0]; b++)
        for (size_t p = 0; p < 2; p++)
            for (size_t o = 0; o + M <= per_pol; o += M) {
                const float *z = y + ((b * 2 + p) * per_pol + o) * 2;
                for (int k = -M / 4 + 1; k < M / 4; k++, bins++) {
                    double complex acc = 0;
                    for (int j = 0; j < M; j++)
                        acc += (z[2 * j] + I * z[2 * j + 1]) * tw[(j * (k + M)) % M];
                    kept += creal(acc * conj(acc)) / M;
                }
            }
    const double ratio = kept / (double)bins / v;
    printf("input variance %.2f; kept-band noise density / input's: %.4f over %zu bins\n", v,
           ratio, bins);
    assert_true(bins > 20000);
    if (fabs(ratio - 1.0) > 0.05)
        fail_msg("kept-band noise density %.4f of the input's, expected 1", ratio);
    free(x);
    free(y);
}

static void bad_parameters_are_config_errors(void **state)
{
    (void)state;
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "engine: {gpu: none}\n"
             "nodes:\n"
             "  dsim: {plugin: dsim, params: {samples_per_chunk: 16384, length: 16384}}\n"
             "  ddc: {plugin: ddc, params: {centre_frequency: 1e8, decimation: 8, taps: 40}}\n"
             "  sink: {plugin: filesink, params: {path: %s/bad.h5, overwrite: true}}\n"
             "edges:\n"
             "  - dsim.out -> ddc.in\n"
             "  - ddc.out -> sink.in\n", pl_tmpdir());
    int rc = pl_run("ddc_bad_taps", yaml);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(pl_log("ddc_bad_taps"), "taps 40"));
}

int main(int argc, char **argv)
{
    if ((use_gpu = cbf_test_gpu_arg("test_ddc_plugin", argc, argv)) < 0 || pl_setup())
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matches_kernel_for_two_chunkings),
        cmocka_unit_test(short_gap_becomes_missing_heaps),
        cmocka_unit_test(tone_level_is_katgpucbfs),
        cmocka_unit_test(noise_density_is_the_inputs),
        cmocka_unit_test(bad_parameters_are_config_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
