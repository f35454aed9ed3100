/* A narrowband output that keeps the whole band (katgpucbf's "no discard"
 * form, for VLBI), through the real cbf-run: dsim -> ddc (pass_bandwidth
 * set) -> pfb -> fft_post -> filesink.
 *
 * Frequency plan (docs/narrowband.md, "Keeping the whole band"): fs =
 * 1712 MHz, S = 16, centre 5 fs / 32 = 267.5 MHz, 256 channels over the
 * whole ddc band fs / S = 107 MHz, channel c centred at
 * f_c + (c - 128) fs / (256 S); the filter flat over 80 MHz about the
 * centre (channels 128 +- 95). Three 16-bit tones at the centres of
 * channels 188 and 38 (pass band) and 8 (the roll-off).
 *
 * Checks: the output has all 256 channels, and its attributes state the
 * band (bandwidth fs / S), the pass band and the centre; each tone lands in
 * its channel at the level of a float64 model, G (A / 2) sqrt(S) |H(x)|
 * sum(w) (A the tone's amplitude in counts, H the ddc filter's amplitude at
 * the tone's offset x, sum(w) the PFB prototype in double: a tone at a
 * channel centre adds up the window); the other channels hold next to
 * nothing. With --gpu the engine runs on the GPU (77 without one). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "feng_ref.h"
#include "filter_design.h"
#include "../gpu_available.h"
#include "pipeline.h"

#define FS 1712e6
#define S 16
#define N_CH 256
#define TAPS_PFB 16
#define TAPS_DDC (16 * S)          /* the default when keeping the whole band */
#define PASS_BW 80e6
#define AMP 0.01                     /* fraction of full scale */
#define FULL 32767.0                 /* 16-bit full scale */
#define PEAK 80.0                    /* the output level the gain is chosen for */

static const double FC = FS * 5.0 / 32.0;   /* an exact fixed-point mixer step */
static const int TONE_CH[3] = {188, 38, 8};
static int use_gpu;

static double tone_freq(int c)
{
    return FC + (double)(c - N_CH / 2) * FS / ((double)N_CH * S);
}

/* The ddc's filter as the plugin designs it (docs/narrowband.md), in
 * double; the design itself is held against its bands by filter_design. */
static double ddc_response(double x)
{
    static double h[TAPS_DDC];
    static int done;
    if (!done) {
        const double frac = PASS_BW * S / FS;
        const cbf_fd_band bands[2] = {{0.0, 0.5 * frac / S, 1.0, 0.005},
                                      {(1.0 - 0.5 * frac) / S, 0.5, 0.0, 1.0}};
        assert_int_equal(cbf_fd_remez(TAPS_DDC, bands, 2, 32, h, NULL, NULL, 0), 0);
        done = 1;
    }
    return cbf_fd_amplitude(h, TAPS_DDC, fabs(x));
}

/* A tone at a channel centre adds every window weight in phase. */
static double pfb_sum(void)
{
    static double w[N_CH * TAPS_PFB];
    feng_ref_weights(N_CH / 2, TAPS_PFB, 1.0, 1, w);
    double s = 0;
    for (int i = 0; i < N_CH * TAPS_PFB; i++)
        s += w[i];
    return s;
}

static double predicted(int c, double gain)
{
    double x = (tone_freq(c) - FC) / FS;
    return gain * (AMP * FULL / 2) * sqrt((double)S) * fabs(ddc_response(x)) * pfb_sum();
}

static void whole_band_tones_and_attributes(void **state)
{
    (void)state;
    const double gain = PEAK / ((AMP * FULL / 2) * sqrt((double)S) * pfb_sum());
    char yaml[4096];
    snprintf(yaml, sizeof yaml,
             "engine: {gpu: %s}\n"
             "nodes:\n"
             "  dsim:\n"
             "    plugin: dsim\n"
             "    params: {antennas: 1, bits: 16, samples_per_chunk: 262144, length: 4194304,\n"
             "             noise: 0, tones: [{frequency: %.17g, amplitude: %g},\n"
             "                               {frequency: %.17g, amplitude: %g},\n"
             "                               {frequency: %.17g, amplitude: %g}]}\n"
             "  ddc: {plugin: ddc, params: {centre_frequency: %.17g, decimation: %d,\n"
             "                              pass_bandwidth: %g}}\n"
             "  pfb: {plugin: pfb, params: {channels: %d, taps: %d, spectra_per_buffer: 32}}\n"
             "  post: {plugin: fft_post, params: {spectra_per_heap: 32, gain: [%.17g, 0.0]}}\n"
             "  sink: {plugin: filesink, params: {path: %s/whole.h5, overwrite: true}}\n"
             "edges:\n"
             "  - dsim.out -> ddc.in\n  - ddc.out -> pfb.in\n  - pfb.out -> post.in\n"
             "  - post.out -> sink.in\n",
             use_gpu ? "required" : "none", tone_freq(TONE_CH[0]), AMP, tone_freq(TONE_CH[1]), AMP,
             tone_freq(TONE_CH[2]), AMP, FC, S, PASS_BW, N_CH, TAPS_PFB, gain, pl_tmpdir());
    int rc = pl_run("whole", yaml);
    if (rc)
        fprintf(stderr, "%s", pl_log("whole"));
    assert_int_equal(rc, 0);

    char path[512];
    snprintf(path, sizeof path, "%s/whole.h5", pl_tmpdir());
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    /* The attributes state the band, the pass band and the centre. */
    double bw = 0, pass = 0, centre = 0, channels = 0, dec = 0;
    assert_int_equal(pl_attr_double(f, "/post", "bandwidth", &bw), 0);
    assert_int_equal(pl_attr_double(f, "/post", "pass_bandwidth", &pass), 0);
    assert_int_equal(pl_attr_double(f, "/post", "centre_frequency", &centre), 0);
    assert_int_equal(pl_attr_double(f, "/post", "channels", &channels), 0);
    assert_int_equal(pl_attr_double(f, "/post", "decimation", &dec), 0);
    printf("# attributes: bandwidth %.6f MHz, pass_bandwidth %.6f MHz, centre %.6f MHz, "
           "%g channels, decimation %g\n", bw / 1e6, pass / 1e6, centre / 1e6, channels, dec);
    assert_true(fabs(bw - FS / S) < 1e-3);
    assert_true(fabs(pass - PASS_BW) < 1e-3);
    assert_true(fabs(centre - FC) < 1e-3);
    assert_int_equal((int)channels, N_CH);
    assert_int_equal((int)dec, S);

    int rank;
    hsize_t d[8];
    int8_t *data = pl_read(f, "/post/data", H5T_NATIVE_INT8, &rank, d);
    H5Fclose(f);
    assert_non_null(data);
    /* [buffer][batch][channel][spectrum][pol][re, im]: every channel kept. */
    assert_int_equal(rank, 6);
    assert_int_equal(d[2], N_CH);
    assert_true(d[0] >= 4);
    size_t outer = d[0] * d[1], per = d[3] * 2;
    double amp[N_CH] = {0};
    for (size_t k = 0; k < outer; k++)
        for (size_t c = 0; c < N_CH; c++)
            for (size_t i = 0; i < per; i++) {
                const int8_t *v = data + ((k * N_CH + c) * per + i) * 2;
                amp[c] += hypot(v[0], v[1]) / (double)(outer * per);
            }
    free(data);
    double rest = 0;
    for (int c = 0; c < N_CH; c++)
        if (c != TONE_CH[0] && c != TONE_CH[1] && c != TONE_CH[2])
            rest = fmax(rest, amp[c]);
    for (int j = 0; j < 3; j++) {
        const int c = TONE_CH[j];
        const double want = predicted(c, gain), x = (tone_freq(c) - FC) / FS;
        printf("# tone at %.6f MHz (offset %.3f of the band): channel %d, mean amplitude %.2f, "
               "float64 model %.2f (|H| %.5f)\n", tone_freq(c) / 1e6, x * S, c, amp[c], want,
               fabs(ddc_response(x)));
        /* The int8 rounding biases a mean amplitude by at most half a
         * count; the float32 chain and the 16-bit digitiser add far less
         * than 0.5%. */
        if (fabs(amp[c] - want) > 0.005 * want + 0.5)
            fail_msg("channel %d: %.2f against the model's %.2f", c, amp[c], want);
    }
    printf("# the largest other channel: %.2f\n", rest);
    assert_true(amp[TONE_CH[0]] > 60 && amp[TONE_CH[1]] > 60 && amp[TONE_CH[2]] > 5);
    assert_true(rest < 1.0);
}

int main(int argc, char **argv)
{
    if ((use_gpu = cbf_test_gpu_arg("test_whole_band", argc, argv)) < 0 || pl_setup())
        return 77;
    const struct CMUnitTest tests[] = {cmocka_unit_test(whole_band_tones_and_attributes)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
