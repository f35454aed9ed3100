/* test_beamform_pipeline.c: the beamformer plugin through the real cbf-run.
 * fsim feeds the beamformer and, by fan-out, the correlator and a filesink
 * (one copy of the data for both products); the test reads the input and
 * the beams back from one HDF5 file and holds the beams to a float64
 * reference written from the maths (katgpucbf's conventions, the dither
 * of docs/formats.md), the presence flags and beam_ants to fsim's missing
 * antennas, and the per-beam saturation counts (aux) to the output. One
 * beam steered at fsim's delayed common signal must gain it coherently,
 * which ties the sign of `delays` to cbf's delay convention.
 *
 * Two xbengine nodes (fuse: on and off) take the same input with the same
 * beams: their beams and dumps must equal the beamformer's and the
 * correlator's byte for byte (on a Hopper GPU, the one kernel and the two
 * streams).
 *
 * `test_beamform_pipeline` runs with `gpu: none`; `--gpu` with
 * `gpu: required` (exit 77 without a GPU), and there also compares the
 * beams with the CPU run's byte for byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "beam_run.h"
#include "dither.h"
#include "pipeline.h"   /* pl_read */
#include "stage/contracts/beam.h"

static char exe[1024];
static int use_gpu;

enum { A = 4, C = 16, T = 64, NB = 2, LEN = 8, B = 4 };
static const double fsim_delay[A] = {0, 1.5, 3, 4.5}; /* digitiser samples */
#define RATE 1712e6
#define KEY 77

static int run_cbf(const char *yaml_path)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl(exe, exe, yaml_path, "--quiet", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A whole dataset as `type` (pl_read), with its number of elements. */
static void *read_ds(hid_t f, const char *name, hid_t type, size_t *count)
{
    int rank = 0;
    hsize_t dims[8];
    void *p = pl_read(f, name, type, &rank, dims);
    *count = 1;
    for (int i = 0; i < rank; i++)
        *count *= dims[i];
    return p;
}

/* A dataset's bytes as stored (its own type), for comparing two. */
static uint8_t *read_raw(hid_t f, const char *name, size_t *bytes)
{
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    if (ds < 0)
        return NULL;
    hid_t t = H5Dget_type(ds);
    size_t n;
    H5Dclose(ds);
    uint8_t *p = read_ds(f, name, t, &n);
    *bytes = n * H5Tget_size(t);
    H5Tclose(t);
    return p;
}

/* Beam parameters (as written into the YAML below). Beam 0: antenna 0
 * alone; beam 1: all four steered onto fsim's common signal (delay -d / fs
 * undoes fsim's delay d, fringe pi d / 2 its phase at the band centre);
 * beam 2: the same weights, no steering; beam 3: pol 1, random-ish. */
static const int pol[B] = {0, 0, 0, 1};
static const double qgain[B] = {1, 0.25, 0.25, 0.7};
static double weight[B][A], delay[B][A], fringe[B][A];

static void beam_params(void)
{
    for (int a = 0; a < A; a++) {
        weight[0][a] = a == 0;
        weight[1][a] = weight[2][a] = 1;
        delay[1][a] = -fsim_delay[a] / RATE;
        fringe[1][a] = M_PI * fsim_delay[a] / 2;
        weight[3][a] = 0.5 + 0.25 * a;
        delay[3][a] = (a - 1.5) * 1e-9;
        fringe[3][a] = 0.3 * a;
    }
}

static void list(char *buf, size_t len, double v[B][A])
{
    size_t o = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < B * A; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%.17g", i ? ", " : "", v[i / A][i % A]);
    snprintf(buf + o, len - o, "]");
}

typedef struct result {
    int8_t *beams;
    size_t n_beams_vals;
} result;

/* Runs the graph, checks the file, returns the beams. */
static result run_and_check(const char *gpu)
{
    char yaml[256], h5[256], w[2048], d[2048], f[2048];
    snprintf(yaml, sizeof yaml, "/tmp/beam-pipe-%d.yaml", (int)getpid());
    snprintf(h5, sizeof h5, "/tmp/beam-pipe-%d-%s.h5", (int)getpid(), gpu);
    list(w, sizeof w, weight);
    list(d, sizeof d, delay);
    list(f, sizeof f, fringe);
    /* the beams' parameters, the same in the beamformer and the xbengines */
    char bp[8192];
    snprintf(bp, sizeof bp,
             "      beams: [{pol: %d, quant_gain: %g}, {pol: %d, quant_gain: %g},\n"
             "              {pol: %d, quant_gain: %g}, {pol: %d, quant_gain: %g}]\n"
             "      weights: %s\n      delays: %s\n      fringe_offsets: %s\n"
             "      dither_key: %d\n",
             pol[0], qgain[0], pol[1], qgain[1], pol[2], qgain[2], pol[3], qgain[3], w, d, f, KEY);
    FILE *y = fopen(yaml, "w");
    assert_non_null(y);
    fprintf(y,
            "engine: {name: beamtest, gpu: %s}\n"
            "nodes:\n"
            "  fsim:\n"
            "    plugin: fsim\n"
            "    params: {antennas: %d, channels: %d, spectra_per_heap: %d, batches: %d, length: %d,\n"
            "             start: 123904, delays: [0, 1.5, 3, 4.5], signal: 12, noise: 4,\n"
            "             missing_antennas: [2], missing_batches: [3, 6]}\n"
            "  beam:\n    plugin: beamformer\n    params:\n%s"
            "  xb:\n    plugin: xbengine\n    params:\n%s      fuse: \"on\"\n      heap_accumulation_threshold: 3\n"
            "  xs:\n    plugin: xbengine\n    params:\n%s      fuse: \"off\"\n      heap_accumulation_threshold: 3\n"
            /* dumps of 3 batches, across the buffers of 2 */
            "  corr: {plugin: correlator, params: {heap_accumulation_threshold: 3}}\n"
            "  reduce: {plugin: reducer}\n"
            "  xreduce: {plugin: reducer}\n"
            "  sreduce: {plugin: reducer}\n"
            "  sink:\n"
            "    plugin: filesink\n"
            "    params: {path: %s, overwrite: true}\n"
            "edges:\n"
            "  - fsim.out -> beam.in\n"
            "  - fsim.out -> corr.in\n"
            "  - corr.out -> reduce.in\n"
            "  - beam.out -> sink.in\n"
            "  - fsim.out -> sink.in\n"
            "  - reduce.out -> sink.in\n"
            "  - fsim.out -> xb.in\n"
            "  - fsim.out -> xs.in\n"
            "  - xb.out -> xreduce.in\n"
            "  - xs.out -> sreduce.in\n"
            "  - xb.beams -> sink.in\n"
            "  - xs.beams -> sink.in\n"
            "  - xreduce.out -> sink.in\n"
            "  - sreduce.out -> sink.in\n",
            gpu, A, C, T, NB, LEN, bp, bp, bp, h5);
    fclose(y);
    assert_int_equal(run_cbf(yaml), 0);
    unlink(yaml);

    hid_t fh = H5Fopen(h5, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(fh >= 0);
    size_t nx, nb, np, nfp, nts, naux, nsat;
    int8_t *x = read_ds(fh, "/fsim/data", H5T_NATIVE_INT8, &nx);
    int8_t *y8 = read_ds(fh, "/beam/data", H5T_NATIVE_INT8, &nb);
    uint8_t *pres = read_ds(fh, "/beam/present", H5T_NATIVE_UINT8, &np);
    uint8_t *fpres = read_ds(fh, "/fsim/present", H5T_NATIVE_UINT8, &nfp);
    int64_t *ts = read_ds(fh, "/beam/timestamp", H5T_NATIVE_INT64, &nts);
    uint8_t *aux = read_ds(fh, "/beam/aux", H5T_NATIVE_UINT8, &naux);
    uint64_t *sat = read_ds(fh, "/beam/saturated", H5T_NATIVE_UINT64, &nsat);
    /* the xbengine nodes' beams and visibilities as the two plugins' */
    static const char *const same[][2] = {
        {"/xb/data", "/beam/data"}, {"/xb/aux", "/beam/aux"}, {"/xb/present", "/beam/present"},
        {"/xb/saturated", "/beam/saturated"}, {"/xb/timestamp", "/beam/timestamp"},
        {"/xb/beam_ants", "/beam/beam_ants"}, {"/xs/data", "/beam/data"},
        {"/xs/aux", "/beam/aux"}, {"/xs/saturated", "/beam/saturated"},
        {"/xreduce/data", "/reduce/data"}, {"/xreduce/present", "/reduce/present"},
        {"/xreduce/timestamp", "/reduce/timestamp"}, {"/sreduce/data", "/reduce/data"},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        size_t n0, n1;
        uint8_t *a = read_raw(fh, same[i][0], &n0);
        uint8_t *b = read_raw(fh, same[i][1], &n1);
        if (!a || !b || n0 != n1 || n0 == 0 || memcmp(a, b, n0))
            fail_msg("gpu %s: %s differs from %s", gpu, same[i][0], same[i][1]);
        free(a);
        free(b);
    }
    H5Fclose(fh);
    unlink(h5);
    assert_non_null(x);
    assert_non_null(y8);
    assert_non_null(pres);
    assert_non_null(fpres);
    assert_non_null(ts);
    assert_non_null(aux);
    assert_non_null(sat);
    const size_t bufs = LEN / NB;
    assert_int_equal(nx, bufs * NB * A * C * T * 4);
    assert_int_equal(nb, bufs * NB * B * C * T * 2);
    assert_int_equal(nts, bufs);
    assert_int_equal(naux, bufs * B * 8);
    /* flags as the input's; beam_ants 3 in fsim's batches 3 and 6 */
    assert_int_equal(np, nfp);
    assert_memory_equal(pres, fpres, np);
    for (size_t bt = 0; bt < LEN; bt++)
        assert_int_equal(cbf_beam_ants(pres, A, bt), bt == 3 || bt == 6 ? 3 : 4);

    const double spacing = RATE / (2.0 * C), centre = C / 2.0;
    size_t off = 0, total = 0;
    double steered = 0, unsteered = 0;
    for (size_t k = 0; k < bufs; k++) {
        uint64_t sat_buf = 0, sat_beam[B] = {0};
        for (size_t n = 0; n < NB; n++) {
            const size_t bt = k * NB + n;
            for (int b = 0; b < B; b++)
                for (int c = 0; c < C; c++)
                    for (int t = 0; t < T; t++) {
                        double re = 0, im = 0;
                        for (int a = 0; a < A; a++) {
                            if (!pres[bt * A + (size_t)a])
                                continue;
                            const double ph = fringe[b][a] - 2 * M_PI * spacing * (c - centre) * delay[b][a];
                            const double g = weight[b][a] * qgain[b];
                            const int8_t *v = x + (((bt * A + (size_t)a) * C + (size_t)c) * T + (size_t)t) * 4 + 2 * pol[b];
                            re += g * (cos(ph) * v[0] - sin(ph) * v[1]);
                            im += g * (cos(ph) * v[1] + sin(ph) * v[0]);
                        }
                        if (b == 1)
                            steered += re * re + im * im;
                        if (b == 2)
                            unsteered += re * re + im * im;
                        const uint64_t spec = (uint64_t)(ts[k] / (2 * C)) + n * T + (uint64_t)t;
                        /* docs/formats.md: draw spec / 2, 32 bits per spectrum, 16 per part */
                        const uint64_t u = cbf_dither_u64(KEY, ((spec / 2) * C + (uint64_t)c) * B + (uint64_t)b);
                        const uint32_t h = spec % 2 ? (uint32_t)u : (uint32_t)(u >> 32);
                        const float dr = cbf_dither_float16(h >> 16), di = cbf_dither_float16(h);
                        const double want[2] = {rint(re + dr), rint(im + di)};
                        const int8_t *o = y8 + (((bt * B + (size_t)b) * C + (size_t)c) * T + (size_t)t) * 2;
                        int clipped = 0;
                        for (int p = 0; p < 2; p++) {
                            const double wv = want[p] > 127 ? 127 : want[p] < -127 ? -127 : want[p];
                            clipped |= wv != want[p];
                            const double e = fabs(o[p] - wv);
                            if (e > 1)
                                fail_msg("batch %zu beam %d ch %d t %d: %d, want %g", bt, b, c, t, o[p], wv);
                            off += e == 1;
                            total++;
                            /* antenna 0 is never missing, and fsim never makes -128 */
                            if (b == 0 && o[p] != x[(((bt * A) * C + (size_t)c) * T + (size_t)t) * 4 + (size_t)p])
                                fail_msg("beam 0 is not antenna 0's pol 0 at batch %zu", bt);
                        }
                        sat_beam[b] += (uint64_t)clipped;
                    }
        }
        const uint64_t *aux_k = (const uint64_t *)(aux + k * B * 8);
        for (int b = 0; b < B; b++) {
            sat_buf += aux_k[b];
            if (!off)
                assert_int_equal(aux_k[b], sat_beam[b]);
        }
        assert_int_equal(sat[k], sat_buf);
    }
    if (off * 1000 > total)
        fail_msg("%zu of %zu values 1 LSB off", off, total);
    /* Steered, the n antennas present add in phase: (0.25 n)^2 x 2 x 12^2
     * of signal power per value, plus 0.25^2 n x 2 x 4^2 of noise. */
    double expect = 0;
    for (size_t bt = 0; bt < LEN; bt++) {
        const double n = (double)cbf_beam_ants(pres, A, bt);
        expect += (0.0625 * n * n * 288 + 0.0625 * n * 32) / LEN;
    }
    steered /= LEN * C * T;
    unsteered /= LEN * C * T;
    printf("# gpu %s: beam power steered %.1f (coherent sum %.1f), unsteered %.1f\n", gpu,
           steered, expect, unsteered);
    assert_true(fabs(steered - expect) < 0.1 * expect);
    assert_true(unsteered < 0.6 * steered);
    free(x);
    free(pres);
    free(fpres);
    free(ts);
    free(aux);
    free(sat);
    return (result){y8, nb};
}

static void test_pipeline(void **st)
{
    (void)st;
    beam_params();
    result r = run_and_check(use_gpu ? "required" : "none");
    if (use_gpu) {
        result cpu = run_and_check("none");
        assert_int_equal(cpu.n_beams_vals, r.n_beams_vals);
        assert_memory_equal(cpu.beams, r.beams, r.n_beams_vals);
        free(cpu.beams);
    }
    free(r.beams);
}

/* A weight list of the wrong length, a pol of 2 and CI4 input fail at
 * start-up. */
static void test_refused(void **st)
{
    (void)st;
    const char *bad[] = {
        "beam: {plugin: beamformer, params: {weights: [1, 2, 3]}}",
        "beam: {plugin: beamformer, params: {beams: [{pol: 2}]}}",
        "beam: {plugin: beamformer, params: {delays: [0, 0, 0, .nan]}}",
    };
    const char *fsim_bits[] = {"8", "8", "8", "4"};
    char yaml[256];
    snprintf(yaml, sizeof yaml, "/tmp/beam-bad-%d.yaml", (int)getpid());
    for (int i = 0; i < 4; i++) {
        FILE *y = fopen(yaml, "w");
        assert_non_null(y);
        fprintf(y,
                "engine: {name: beambad, gpu: none}\n"
                "nodes:\n"
                "  fsim: {plugin: fsim, params: {antennas: 4, channels: 8, spectra_per_heap: 32,\n"
                "                                batches: 1, length: 2, bits: %s}}\n"
                "  %s\n"
                "  sink: {plugin: discard}\n"
                "edges:\n  - fsim.out -> beam.in\n  - beam.out -> sink.in\n",
                fsim_bits[i], i < 3 ? bad[i] : "beam: {plugin: beamformer}");
        fclose(y);
        const int rc = run_cbf(yaml);
        if (rc == 0 || rc >= 127)
            fail_msg("case %d: cbf-run exited %d, want a start-up error", i, rc);
    }
    unlink(yaml);
}

int main(int argc, char **argv)
{
    if ((use_gpu = cbf_test_gpu_arg("test_beamform_pipeline", argc, argv)) < 0 ||
        cbf_test_cbf_run("test_beamform_pipeline", exe, sizeof exe))
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
