/* Several outputs from one input, through the real cbf-run: one dsim feeds a
 * wideband branch (pfb -> fft_post) and two narrowband branches (ddc -> pfb
 * -> fft_post) with different centres and decimations, each to its own
 * filesink. Each output must equal, bit for bit (data, timestamps, presence
 * flags), the output of an engine that runs that branch alone; each shows
 * its dsim tone in the channel the frequency plan says; the missing heap
 * flags some batches in every output, not all. With --gpu the engines run
 * on the GPU (exit 77 without one). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <math.h>

#include "../gpu_available.h"
#include "pipeline.h"

static int use_gpu;

/* fs = 1712 MHz. wide: 1024 channels of fs / 2048. narrow1: centre
 * 45 fs / 256, S 8, 256 channels of fs / 4096; narrow2: centre 100 fs / 256,
 * S 16, 128 channels of fs / 4096. Tone 1 = centre1 + 40 fs / 4096 (wide
 * channel 380, narrow1 128 + 40); tone 2 = centre2 - 20 fs / 4096 (wide
 * channel 790, narrow2 64 - 20). narrow1 unzips its 512-point transform
 * by 4 (as the automatic choice does past 4096 channels), narrow2 does not. */
static const char *dsim_yaml =
    "  dsim:\n"
    "    plugin: dsim\n"
    "    params: {antennas: 1, bits: 10, samples_per_chunk: 262144, length: 4194304, seed: 3,\n"
    "             noise: 0.05, missing: [300],\n"
    "             tones: [{frequency: 317656250.0, amplitude: 0.2},\n"
    "                     {frequency: 660390625.0, amplitude: 0.1}]}\n";

typedef struct branch {
    const char *name, *nodes, *edges;
    int channels, tone_channel, other_tone; /* other_tone: the weaker tone's channel, or -1 */
} branch;

static const branch branches[3] = {
    {"wide",
     "  pfb_w: {plugin: pfb, params: {channels: 1024, taps: 16, spectra_per_buffer: 64}}\n"
     "  post_w: {plugin: fft_post, params: {spectra_per_heap: 64, gain: [0.05, 0.0]}}\n",
     "  - %s.out -> pfb_w.in\n  - pfb_w.out -> post_w.in\n  - post_w.out -> sink_wide.in\n",
     1024, 380, 790},
    {"narrow1",
     "  ddc1: {plugin: ddc, params: {centre_frequency: 300.9375e6, decimation: 8}}\n"
     "  pfb_n1: {plugin: pfb, params: {channels: 256, taps: 16, spectra_per_buffer: 32,\n"
     "                               coarse_delay: [0, 3], unzip: 4}}\n"
     "  post_n1: {plugin: fft_post, params: {spectra_per_heap: 32, gain: [0.1, 0.02],\n"
     "                                      fine_delay: [0.0, 2.5], phase: [0.0, 0.5]}}\n",
     "  - %s.out -> ddc1.in\n  - ddc1.out -> pfb_n1.in\n  - pfb_n1.out -> post_n1.in\n"
     "  - post_n1.out -> sink_narrow1.in\n",
     256, 168, -1},
    {"narrow2",
     "  ddc2: {plugin: ddc, params: {centre_frequency: 668.75e6, decimation: 16}}\n"
     "  pfb_n2: {plugin: pfb, params: {channels: 128, taps: 8, spectra_per_buffer: 32}}\n"
     "  post_n2: {plugin: fft_post, params: {spectra_per_heap: 16, gain: [0.2, 0.0]}}\n",
     "  - %s.out -> ddc2.in\n  - ddc2.out -> pfb_n2.in\n  - pfb_n2.out -> post_n2.in\n"
     "  - post_n2.out -> sink_narrow2.in\n",
     128, 44, -1},
};
static const char *post_node[3] = {"post_w", "post_n1", "post_n2"};

typedef struct output {
    int8_t *data;
    int64_t *ts;
    uint8_t *present;
    hsize_t d[8], dt[8], dp[8];
} output;

static size_t count(const hsize_t *d, int rank)
{
    size_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= d[i];
    return n;
}

/* Runs the branches whose bit is set in `mask` in one engine, sinks in
 * <tmp>/<run>_<branch>.h5. The engine of all three feeds them through an
 * upload node (one copy to the GPU shared by reference; a pass-through on
 * the CPU), the single-branch engines straight from dsim. */
static void run_engine(const char *run, unsigned mask)
{
    char yaml[8192], *p = yaml;
    size_t left = sizeof yaml;
    const char *src = mask == 7 ? "up" : "dsim";
    int n = snprintf(p, left, "engine: {gpu: %s}\nnodes:\n%s%s", use_gpu ? "required" : "none",
                     dsim_yaml, mask == 7 ? "  up: {plugin: upload}\n" : "");
    p += n, left -= (size_t)n;
    for (int b = 0; b < 3; b++)
        if (mask >> b & 1) {
            n = snprintf(p, left, "%s  sink_%s: {plugin: filesink, params: {path: %s/%s_%s.h5, "
                         "overwrite: true}}\n", branches[b].nodes, branches[b].name,
                         pl_tmpdir(), run, branches[b].name);
            p += n, left -= (size_t)n;
        }
    n = snprintf(p, left, "edges:\n%s", mask == 7 ? "  - dsim.out -> up.in\n" : "");
    p += n, left -= (size_t)n;
    for (int b = 0; b < 3; b++)
        if (mask >> b & 1) {
            n = snprintf(p, left, branches[b].edges, src);
            p += n, left -= (size_t)n;
        }
    assert_true(left > 1);
    int rc = pl_run(run, yaml);
    if (rc)
        fprintf(stderr, "%s", pl_log(run));
    assert_int_equal(rc, 0);
}

static output read_output(const char *run, int b)
{
    char path[512], ds[128];
    snprintf(path, sizeof path, "%s/%s_%s.h5", pl_tmpdir(), run, branches[b].name);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    output o;
    int rank;
    snprintf(ds, sizeof ds, "/%s/data", post_node[b]);
    o.data = pl_read(f, ds, H5T_NATIVE_INT8, &rank, o.d);
    assert_non_null(o.data);
    /* [buffer][batch][channel][spectrum][pol][re, im] */
    assert_int_equal(rank, 6);
    assert_int_equal(o.d[2], (hsize_t)branches[b].channels);
    snprintf(ds, sizeof ds, "/%s/timestamp", post_node[b]);
    o.ts = pl_read(f, ds, H5T_NATIVE_INT64, &rank, o.dt);
    snprintf(ds, sizeof ds, "/%s/present", post_node[b]);
    o.present = pl_read(f, ds, H5T_NATIVE_UINT8, &rank, o.dp);
    assert_non_null(o.ts);
    assert_non_null(o.present);
    H5Fclose(f);
    return o;
}

static void output_free(output *o)
{
    free(o->data);
    free(o->ts);
    free(o->present);
}

/* The tone's channel holds the largest mean amplitude, far above the rest
 * (the weaker tone, which the wideband output also sees, aside). */
static void check_tone(const output *o, int b)
{
    size_t chans = o->d[2], per = o->d[3] * 2, outer = o->d[0] * o->d[1];
    double *amp = calloc(chans, sizeof(double));
    for (size_t k = 0; k < outer; k++)
        for (size_t c = 0; c < chans; c++)
            for (size_t i = 0; i < per; i++) {
                const int8_t *v = o->data + ((k * chans + c) * per + i) * 2;
                amp[c] += hypot(v[0], v[1]);
            }
    size_t best = 0;
    double second = 0;
    for (size_t c = 1; c < chans; c++)
        if (amp[c] > amp[best])
            best = c;
    for (size_t c = 0; c < chans; c++)
        if (c != best && (int)c != branches[b].other_tone && amp[c] > second)
            second = amp[c];
    printf("# %s: %llu buffers, tone in channel %zu (want %d), mean amplitude %.1f, next %.2f\n",
           branches[b].name, (unsigned long long)o->d[0], best, branches[b].tone_channel,
           amp[best] / (double)(outer * per), second / (double)(outer * per));
    assert_int_equal((int)best, branches[b].tone_channel);
    assert_true(amp[best] > 20 * second);
    if (branches[b].other_tone >= 0)
        assert_true(amp[branches[b].other_tone] > 20 * second);
    assert_true(amp[best] / (double)(outer * per) > 10.0);
    free(amp);
}

static void three_outputs_equal_three_engines(void **state)
{
    (void)state;
    run_engine("all", 7);
    for (int b = 0; b < 3; b++) {
        char run[32];
        snprintf(run, sizeof run, "only_%d", b);
        run_engine(run, 1u << b);
        output all = read_output("all", b), one = read_output(run, b);
        assert_true(all.d[0] >= 2);
        assert_memory_equal(all.d, one.d, sizeof all.d);
        assert_memory_equal(all.dp, one.dp, sizeof all.dp);
        assert_memory_equal(all.data, one.data, count(all.d, 6));
        assert_memory_equal(all.ts, one.ts, all.d[0] * sizeof(int64_t));
        assert_memory_equal(all.present, one.present, count(all.dp, 2));
        check_tone(&all, b);
        size_t absent = 0, n = count(all.dp, 2);
        for (size_t i = 0; i < n; i++)
            absent += !all.present[i];
        printf("# %s: %zu of %zu batches flagged missing\n", branches[b].name, absent, n);
        assert_true(absent > 0 && absent < n);
        output_free(&all);
        output_free(&one);
    }
}

int main(int argc, char **argv)
{
    if ((use_gpu = cbf_test_gpu_arg("test_wide_narrow", argc, argv)) < 0 || pl_setup())
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(three_outputs_equal_three_engines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
