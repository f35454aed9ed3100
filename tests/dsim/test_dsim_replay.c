/* dsim's replay mode, realtime pacing and memory choice through the real
 * cbf-run and filesink: replay of a noiseless on-grid tone equals compute
 * bit for bit; with noise it equals the periodic model (tones rounded to
 * the grid, noise indices wrapped), repeats with the period, and its first
 * period equals compute's; missing heaps and saturation are as in compute
 * mode; realtime paces to the sample clock; memory: pinned without a GPU
 * is refused. Skips (77) until cbf-run exists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dsim_model.h"
#include "pack.h"
#include "pipeline.h"

#define ANTS 2
#define FS 1712e6
#define PERIOD 65536

static const char *yaml_fmt =
    "engine: {gpu: none}\n"
    "nodes:\n"
    "  dsim:\n"
    "    plugin: dsim\n"
    "    params: {antennas: %d, bits: 8, samples_per_chunk: %zu, length: %zu, seed: 5,\n"
    "             tones: [{frequency: %.17g, amplitude: %g, phase_x: 0.5, phase_y: 2.0}],\n"
    "             noise: %g, common_noise: %g, delays: [0.0, 9.75], missing: [%s],\n"
    "             mode: %s, period: %d, threads: %d, start: %lld, realtime: %s,\n"
    "             adc_sample_rate: %.17g}\n"
    "  sink:\n"
    "    plugin: filesink\n"
    "    params: {path: %s, overwrite: true}\n"
    "edges:\n"
    "  - dsim.out -> sink.in\n";

typedef struct signal {
    double freq, amp, noise, common;
    const char *missing;
} signal;

typedef struct run {
    size_t spc, length, n_buffers, stream_bytes;
    uint8_t *data, *present;
    uint64_t *saturated;
} run;

static run do_run(const char *name, const signal *sg, const char *mode, size_t spc,
                  size_t length, int threads, long long start, const char *realtime, double fs)
{
    char yaml[2048], path[512];
    snprintf(path, sizeof path, "%s/%s.h5", pl_tmpdir(), name);
    snprintf(yaml, sizeof yaml, yaml_fmt, ANTS, spc, length, sg->freq, sg->amp, sg->noise,
             sg->common, sg->missing, mode, PERIOD, threads, start, realtime, fs, path);
    hid_t f = pl_run_open(name, yaml, path);
    assert_true(f >= 0);
    run r = {.spc = spc, .length = length, .stream_bytes = cbf_pack_bytes(spc, 8)};
    int rank;
    hsize_t dims[8];
    r.data = pl_read(f, "/dsim/data", H5T_NATIVE_UINT8, &rank, dims);
    assert_non_null(r.data);
    r.n_buffers = dims[0];
    assert_int_equal(r.n_buffers, length / spc);
    r.present = pl_read(f, "/dsim/present", H5T_NATIVE_UINT8, &rank, dims);
    r.saturated = pl_read(f, "/dsim/saturated", H5T_NATIVE_UINT64, &rank, dims);
    assert_true(r.present && r.saturated);
    H5Fclose(f);
    return r;
}

static void free_run(run *r)
{
    free(r->data);
    free(r->present);
    free(r->saturated);
}

/* Samples [0, length) of one stream (8 bits: one byte each). */
static int8_t *stream(const run *r, int input)
{
    int8_t *v = malloc(r->length);
    assert_non_null(v);
    for (size_t b = 0; b < r->n_buffers; b++)
        memcpy(v + b * r->spc, r->data + (b * 2 * ANTS + (size_t)input) * r->stream_bytes,
               r->spc);
    return v;
}

static cbf_dsim_model *model(const signal *sg, int64_t period)
{
    const cbf_dsim_tone tone = {sg->freq, sg->amp, {0.5, 2.0}};
    const double delays[ANTS] = {0.0, 9.75};
    cbf_dsim_config cfg = {.antennas = ANTS, .adc_sample_rate = FS, .bits = 8, .n_tones = 1,
                           .tones = &tone, .noise = sg->noise, .common_noise = sg->common,
                           .delays = delays, .seed = 5, .period = period};
    cbf_dsim_model *m;
    assert_int_equal(cbf_dsim_model_create(&cfg, &m, NULL, 0), 0);
    return m;
}

/* Bin 1234 of the period's grid, overdriven so that saturation counts are
 * compared too; chunks smaller and larger than the period, several threads. */
static void on_grid_replay_equals_compute(void **state)
{
    (void)state;
    const signal sg = {.freq = 1234.0 * FS / PERIOD, .amp = 1.2, .missing = "3, 40"};
    const size_t spcs[2] = {16384, 4 * PERIOD}, length = 8 * PERIOD;
    for (int c = 0; c < 2; c++) {
        run a = do_run("grid_compute", &sg, "compute", spcs[c], length, 1, 4096, "false", FS);
        run b = do_run("grid_replay", &sg, "replay", spcs[c], length, 3, 4096, "false", FS);
        assert_memory_equal(a.data, b.data, a.n_buffers * 2 * ANTS * a.stream_bytes);
        assert_memory_equal(a.present, b.present, a.n_buffers * 2 * ANTS * a.spc / 4096);
        assert_memory_equal(a.saturated, b.saturated, a.n_buffers * sizeof *a.saturated);
        uint64_t sat = 0;
        for (size_t i = 0; i < a.n_buffers; i++)
            sat += a.saturated[i];
        assert_true(sat > 0);
        free_run(&a);
        free_run(&b);
    }
}

/* A buffer that comes back unchanged still holds its samples: replay skips
 * the copy (and counts it), and the output is compute's, bit for bit. The
 * test environment poisons returned buffers, which must turn the skip off:
 * the run with poisoning copies every chunk and is still right. */
static void reused_buffers_equal_compute(void **state)
{
    (void)state;
    const signal sg = {.freq = 1234.0 * FS / PERIOD, .amp = 0.5, .missing = ""};
    const size_t spc = PERIOD, length = 16 * PERIOD;
    run a = do_run("reuse_compute", &sg, "compute", spc, length, 1, 4096, "false", FS);
    static const char *const poison[2] = {"0", "1"};
    for (int k = 0; k < 2; k++) {
        setenv("CBF_POOL_POISON", poison[k], 1);
        run b = do_run("reuse_replay", &sg, "replay", spc, length, 2, 4096, "false", FS);
        const long long reused = pl_table_value(pl_log("reuse_replay"), "dsim", "replay_reused_chunks");
        assert_memory_equal(a.data, b.data, a.n_buffers * 2 * ANTS * a.stream_bytes);
        assert_memory_equal(a.present, b.present, a.n_buffers * 2 * ANTS * a.spc / 4096);
        assert_memory_equal(a.saturated, b.saturated, a.n_buffers * sizeof *a.saturated);
        /* A pool of 4: every chunk after the first 4 finds its buffer as it left it. */
        if (k == 0 && reused < (long long)(length / spc) - 4)
            fail_msg("%lld chunks reused without poisoning; expected at least %zu", reused,
                     length / spc - 4);
        if (k == 1)
            assert_int_equal(reused, 0);
        free_run(&b);
    }
    free_run(&a);
}

/* Off-grid tone, independent and common noise, a fractional delay. */
static void noisy_replay_is_the_periodic_model(void **state)
{
    (void)state;
    const signal sg = {.freq = 100.3e6, .amp = 0.3, .noise = 0.1, .common = 0.05,
                       .missing = ""};
    const size_t spc = 3 * 4096 * 4, length = 6 * spc;   /* 4.5 periods, chunks straddle */
    run r = do_run("noisy_replay", &sg, "replay", spc, length, 2, 0, "false", FS);
    cbf_dsim_model *periodic = model(&sg, PERIOD);
    signal on_grid = sg;
    on_grid.freq = cbf_dsim_grid_frequency(sg.freq, FS, PERIOD);
    cbf_dsim_model *plain = model(&on_grid, 0);
    int16_t *want = malloc(length * sizeof *want);
    for (int in = 0; in < 2 * ANTS; in++) {
        int8_t *got = stream(&r, in);
        cbf_dsim_model_generate(periodic, in / 2, in % 2, 0, length, want);
        for (size_t t = 0; t < length; t++)
            assert_int_equal(got[t], want[t]);
        for (size_t t = PERIOD; t < length; t++)
            assert_int_equal(got[t], got[t - PERIOD]);
        /* The first period is compute's with the tone on the grid, except
         * where the delayed common noise reaches back before sample 0 and
         * replay wraps it (antenna 1: round(9.75) = 10 samples). */
        cbf_dsim_model_generate(plain, in / 2, in % 2, 0, PERIOD, want);
        for (size_t t = in / 2 ? 10 : 0; t < PERIOD; t++)
            assert_int_equal(got[t], want[t]);
        free(got);
    }
    free(want);
    cbf_dsim_model_free(periodic);
    cbf_dsim_model_free(plain);
    free_run(&r);
}

/* Pacing holds chunk k until k x spc / fs after the first: at 2^20 Hz,
 * 4 chunks of 2^16 samples cannot drain in less than 3/16 s. */
static void realtime_is_paced(void **state)
{
    (void)state;
    const signal sg = {.freq = 0.0, .amp = 0.1, .missing = ""};
    const double fs = 1048576.0;
    run r = do_run("realtime", &sg, "replay", 65536, 4 * 65536, 1, 0, "true", fs);
    free_run(&r);
    const char *log = pl_log("realtime");
    const char *at = strstr(log, "drained after ");
    assert_non_null(at);
    assert_true(atof(at + strlen("drained after ")) >= 3.0 / 16.0);
    assert_non_null(strstr(log, "late_chunks="));
}

static void pinned_needs_a_gpu(void **state)
{
    (void)state;
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "engine: {gpu: none}\n"
             "nodes:\n"
             "  dsim: {plugin: dsim, params: {length: 1048576, memory: pinned}}\n"
             "  sink: {plugin: discard}\n"
             "edges:\n"
             "  - dsim.out -> sink.in\n");
    assert_int_equal(pl_run("pinned", yaml), 2);
    assert_non_null(strstr(pl_log("pinned"), "memory: pinned needs the GPU"));
}

int main(void)
{
    int rc = pl_setup();
    if (rc)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(on_grid_replay_equals_compute),
        cmocka_unit_test(noisy_replay_is_the_periodic_model),
        cmocka_unit_test(reused_buffers_equal_compute),
        cmocka_unit_test(realtime_is_paced),
        cmocka_unit_test(pinned_needs_a_gpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
