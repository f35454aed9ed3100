/* pfb delay models at the plugin's defaults (4096 channels, 16 taps, 256
 * spectra per buffer, the default delay_headroom), on a running engine at
 * MeerKAT's L-band rate (1712 MHz):
 *
 * - MeerKAT's required delay range is 0 to 79.53 us (136155.4 samples): a
 *   step from 0 to 136156 samples (79.5304 us, whole samples so that the
 *   output can be compared byte for byte) at a buffer boundary is
 *   accepted, the staging still holds the samples it reads (no spectrum
 *   flagged missing), and from the step on the output equals, byte for
 *   byte, a chain that ran with that coarse delay from the start. A step
 *   one sample past half the headroom is refused, the message naming the
 *   bound.
 * - `coarse_delay_changes` counts every spectrum whose coarse delay
 *   differs from the one before: a 0 -> 4 sample step at a buffer boundary
 *   (where a model for "the next spectrum" lands) and a step back inside a
 *   later buffer give 2.
 *
 * `--gpu` runs the same on the GPU (77 without one). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capture_read.h"
#include "inproc.h"

#define RATE 1712e6
#define STEP 8192                   /* 2 x 4096 channels */
#define B ((int64_t)256 * STEP)     /* samples per output buffer */
#define HEADROOM 524288             /* pfb's default delay_headroom */
#define D_MAX 136156                /* samples: 79.5304 us >= MeerKAT's 79.53 us */
#define T_STEP (2 * B)              /* the steps' timestamp: buffer 2's first spectrum */

static int use_gpu;
static char dir[256], endpoint[300];

static void start_engine(inproc *r)
{
    char yaml[512], text[4096];
    snprintf(yaml, sizeof yaml, "%s/pfb-delays.yaml", dir);
    snprintf(endpoint, sizeof endpoint, "ipc://%s/ctl", dir);
    /* chain m takes the requests, chain r has D_MAX from the start, chain
     * s takes the small steps; only the capture window's buffers are kept */
    snprintf(text, sizeof text,
             "engine: {gpu: %s, control: \"%s\"}\n"
             "nodes:\n"
             "  dsim: {plugin: dsim, params: {antennas: 1, samples_per_chunk: 1048576, length: %lld,\n"
             "         noise: 0.05, tones: [{frequency: 300e6, amplitude: 0.2}]}}\n"
             "  pfb_m: {plugin: pfb, params: {spectra_per_buffer: 256}}\n"
             "  post_m: {plugin: fft_post, params: {dither: false}}\n"
             "  cap_m: {plugin: feng_capture, params: {path: %s/m.raw, from: %lld, to: %lld}}\n"
             "  pfb_r: {plugin: pfb, params: {spectra_per_buffer: 256, coarse_delay: [%d, %d]}}\n"
             "  post_r: {plugin: fft_post, params: {dither: false}}\n"
             "  cap_r: {plugin: feng_capture, params: {path: %s/r.raw, from: %lld, to: %lld}}\n"
             "  pfb_s: {plugin: pfb, params: {spectra_per_buffer: 256}}\n"
             "  sink_s: {plugin: discard}\n"
             "edges:\n"
             "  - dsim.out -> pfb_m.in\n  - pfb_m.out -> post_m.in\n  - post_m.out -> cap_m.in\n"
             "  - dsim.out -> pfb_r.in\n  - pfb_r.out -> post_r.in\n  - post_r.out -> cap_r.in\n"
             "  - dsim.out -> pfb_s.in\n  - pfb_s.out -> sink_s.in\n",
             use_gpu ? "required" : "none", endpoint, (long long)(6 * B), dir, (long long)B,
             (long long)(4 * B), D_MAX, D_MAX, dir, (long long)B, (long long)(4 * B));
    inproc_start(r, yaml, text);
}

static json_t *delays(const char *node, double samples, long long at)
{
    return inproc_request(endpoint, "{\"request\": \"delays\", \"node\": \"%s\", \"delay\": %.17g, "
                          "\"at\": %lld}", node, samples / RATE, at);
}

static void check_outputs(void)
{
    char path[512];
    capture m, r;
    snprintf(path, sizeof path, "%s/m.raw", dir);
    read_capture(path, &m);
    snprintf(path, sizeof path, "%s/r.raw", dir);
    read_capture(path, &r);
    assert_int_equal(m.n, 4); /* buffers 1..4 */
    size_t same = 0;
    for (size_t i = 0; i < m.n; i++) {
        const capbuf *x = &m.b[i];
        for (size_t f = 0; f < x->np; f++)
            if (!x->present[f])
                fail_msg("buffer at %lld: batch %zu flagged missing (the step's samples were not "
                         "kept)", (long long)x->ts, f);
        if (x->ts < T_STEP)
            continue;
        const capbuf *y = capture_find(&r, x->ts);
        assert_int_equal(x->bytes, y->bytes);
        if (memcmp(x->data, y->data, x->bytes))
            fail_msg("buffer at %lld: differs from the chain with a coarse delay of %d from the "
                     "start", (long long)x->ts, D_MAX);
        same++;
    }
    printf("%zu buffers after the %d-sample step equal the static chain's\n", same, D_MAX);
    assert_int_equal(same, 3);
    free_capture(&m);
    free_capture(&r);
}

static void test_delay_steps(void **state)
{
    (void)state;
    inproc r;
    start_engine(&r);
    /* One sample past the largest step the default headroom allows. */
    inproc_expect_refused("delays, one sample past half the headroom",
                          delays("pfb_m", HEADROOM / 2 + 1, T_STEP), "allows 262144");
    json_t *o = delays("pfb_m", D_MAX, T_STEP);
    if (!json_is_true(json_object_get(o, "ok")))
        fail_msg("delays of %d samples (MeerKAT's 79.53 us): refused: %s", D_MAX,
                 json_string_value(json_object_get(o, "error")));
    assert_int_equal(json_integer_value(json_object_get(o, "coarse_delay")), D_MAX);
    json_decref(o);
    inproc_expect_ok("delays 0 -> 4 samples", delays("pfb_s", 4, T_STEP));
    inproc_expect_ok("delays 4 -> 0 samples inside a buffer", delays("pfb_s", 0, T_STEP + B + 100 * STEP));
    inproc_wait(&r);
    const uint64_t changes = inproc_counter(&r, "pfb_s", "coarse_delay_changes");
    const uint64_t changes_m = inproc_counter(&r, "pfb_m", "coarse_delay_changes");
    printf("coarse_delay_changes: %llu after a step at a buffer boundary and one inside a buffer; "
           "%llu after the step to %d\n", (unsigned long long)changes,
           (unsigned long long)changes_m, D_MAX);
    assert_int_equal(changes, 2);
    assert_int_equal(changes_m, 1);
    assert_int_equal(inproc_counter(&r, "pfb_m", "missing_spectra"), 0);
    inproc_finish(&r);
    check_outputs();
}

int main(int argc, char **argv)
{
    if ((use_gpu = inproc_begin(argc, argv, "pfb-delays", dir, sizeof dir)) < 0)
        return use_gpu == -1 ? 77 : 1;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_delay_steps)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
