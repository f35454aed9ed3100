/* test_rms: tests the example plugin on its own with the cbf test harness
 * (<cbf/harness.h>): no pipeline YAML, no engine, one thread. The harness
 * loads cbf_rms.so as cbf-run would (CBF_PLUGIN_PATH), plays the upstream
 * producer (the input's descriptor, buffers to push), runs the plugin and
 * then checks every buffer came back. rms reports through its log, so the
 * test reads its log; a plugin with outputs would be checked with
 * cbf_harness_pull instead.
 *
 * Build and run: `meson setup build && meson test -C build`, or by hand:
 *   cc -std=c11 test_rms.c $(pkg-config --cflags --libs cbf) -lcmocka -o test_rms
 *   CBF_PLUGIN_PATH=$PWD ./test_rms */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <cbf/cbf.h>
#include <cbf/harness.h>

#define HEAP 256           /* samples per heap */
#define HEAPS 4            /* heaps per chunk and stream */
#define SAMPLES (HEAP * HEAPS)

/* What a digitiser source would describe: 1 antenna, 2 pols, 8-bit
 * samples (one byte each, so the test writes them directly). */
static cbf_port_desc adc(void)
{
    cbf_port_desc d;
    cbf_port_desc_init(&d, CBF_DTYPE_PACKED, CBF_MEM_HOST);
    d.bits = 8;
    cbf_port_desc_add_axis(&d, "antenna", 1);
    cbf_port_desc_add_axis(&d, "pol", 2);
    cbf_port_desc_add_axis(&d, "byte", SAMPLES);
    d.n_present = 2 * HEAPS;
    d.present_axis = "heap";
    cbf_port_desc_set_attr(&d, "heap_samples", HEAP);
    return d;
}

/* The plugin logs to stderr; the test sends stderr to a file for a while. */
static FILE *log_file;
static int saved_stderr;

static void capture_log(void)
{
    log_file = tmpfile();
    assert_non_null(log_file);
    fflush(stderr);
    saved_stderr = dup(2);
    dup2(fileno(log_file), 2);
}

static const char *captured_log(void)
{
    static char text[8192];
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    rewind(log_file);
    size_t n = fread(text, 1, sizeof text - 1, log_file);
    text[n] = '\0';
    fclose(log_file);
    return text;
}

/* A square wave of +-64 has an RMS of 64: 20 log10(64 / 127) = -5.95 dBFS.
 * One heap, flagged missing, holds full-scale junk that must not count. */
static void rms_of_a_square_wave(void **state)
{
    (void)state;
    cbf_harness *h;
    cbf_error err;
    const char *params[] = {"every=1"};
    assert_int_equal(cbf_harness_new("rms", params, 1, &h, &err), 0);
    cbf_port_desc d = adc();
    assert_int_equal(cbf_harness_set_input_desc(h, "in", &d, &err), 0);
    assert_int_equal(cbf_harness_init(h, &err), 0);
    for (int chunk = 0; chunk < 3; chunk++) {
        cbf_buffer *b;
        assert_int_equal(cbf_harness_new_buffer(h, "in", &b, &err), 0);
        b->seq = (uint64_t)chunk;
        b->timestamp = chunk * SAMPLES;
        int8_t *s = b->data;
        for (size_t i = 0; i < 2 * SAMPLES; i++)
            s[i] = i % 2 ? -64 : 64;
        memset(s + HEAP, 127, HEAP);   /* pol x, heap 1: junk ... */
        b->present[1] = 0;             /* ... flagged missing */
        assert_int_equal(cbf_harness_push(h, "in", b, &err), 0);
    }
    cbf_harness_end(h, NULL, &err);
    capture_log();
    int rc = cbf_harness_run(h, &err);
    const char *log = captured_log();
    assert_int_equal(rc, 0);
    assert_non_null(strstr(log, "rms chunk 0 (t=0): 0x -5.95 dBFS 0y -5.95 dBFS"));
    assert_non_null(strstr(log, "rms chunk 2 (t=2048): 0x -5.95 dBFS 0y -5.95 dBFS"));
    cbf_harness_stats st;
    cbf_harness_get_stats(h, &st);
    assert_int_equal(st.received, 3);
    /* fini runs, and every buffer must have come back: 0, not CBF_ELEAK. */
    assert_int_equal(cbf_harness_free(h, &err), 0);
}

/* What the loader and the plugin refuse, with the message a user sees. */
static void refusals(void **state)
{
    (void)state;
    cbf_harness *h;
    cbf_error err;
    const char *zero[] = {"every=0"};
    assert_int_equal(cbf_harness_new("rms", zero, 1, &h, &err), CBF_ECONFIG);
    assert_non_null(strstr(err.msg, "parameter 'every'"));

    assert_int_equal(cbf_harness_new("rms", NULL, 0, &h, &err), 0);
    cbf_port_desc flat;
    cbf_port_desc_init(&flat, CBF_DTYPE_PACKED, CBF_MEM_HOST);
    cbf_port_desc_add_axis(&flat, "byte", 1024);
    assert_int_equal(cbf_harness_set_input_desc(h, "in", &flat, &err), 0);
    assert_int_equal(cbf_harness_init(h, &err), CBF_ECONFIG);
    assert_non_null(strstr(err.msg, "input is not [antenna][pol][byte] packed"));
    assert_int_equal(cbf_harness_free(h, &err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rms_of_a_square_wave),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
