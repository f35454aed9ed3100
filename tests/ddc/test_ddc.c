/* The DDC kernel (CPU, or CUDA with --gpu: exit 77 without a GPU) against a
 * float64 reference written from ddc.h's definition: every sample mixed by
 * exp(-2 pi i phi(n) / 2^32) with phi(n) = n x step mod 2^32 from the
 * absolute sample number, filtered by the double taps, every S-th output
 * kept. Inputs are fresh random packed samples; outputs are poisoned with
 * NaN first, so an unwritten value fails every comparison.
 *
 * Tolerance, per output: |y - ref| <= 2 (taps + 8) 2^-24 sum_k |x_k h_k|.
 * The kernel rounds z_k = h_k e^(...) to float (2^-24 relative per
 * component), accumulates taps products with FMA (at most taps roundings,
 * the classic dot-product bound gamma_taps), and rotates with sincospif and
 * two more roundings (a few 2^-24 of |acc|); the factor 2 covers a complex
 * value's two components. The reference's own error is ~1e-16: nothing. */
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
#include <time.h>

#include "ddc.h"
#include "filter_design.h"
#include "../gpu_available.h"

#ifdef CBF_HAVE_CUDA
#include <cuda_runtime.h>
#endif

static int use_gpu, per_thread;
static uint64_t rng_state;

static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Packs bit by bit from the layout (ddc.h): sample i's bit b, MSB first, is
 * stream bit i bits + b, stream bit k is bit 7 - k % 8 of byte k / 8. */
static uint8_t *pack_ref(const int32_t *v, size_t n, int bits)
{
    size_t bytes = cbf_packed_bytes(n, bits);
    uint8_t *out = calloc(bytes, 1);
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < bits; b++) {
            size_t k = i * (size_t)bits + (size_t)b;
            if (((uint32_t)v[i] >> (bits - 1 - b)) & 1)
                out[k / 8] |= (uint8_t)(0x80u >> (k % 8));
        }
    for (size_t i = (n * (size_t)bits + 7) / 8; i < bytes; i++)
        out[i] = (uint8_t)rng(); /* padding the decoder must ignore */
    return out;
}

typedef struct ddc_case {
    cbf_ddc_config cfg;
    double *h;
    float *z;
    int32_t *x[2];
    uint8_t *packed[2];
    size_t n_in, outputs, start, stride;
    uint64_t t0;
    float *out;
} ddc_case;

static void case_free(ddc_case *c)
{
    free(c->h);
    free(c->z);
    for (int p = 0; p < 2; p++) {
        free(c->x[p]);
        free(c->packed[p]);
    }
    free(c->out);
}

/* Designed taps (the filter the engine uses) and folded weights. */
static void case_taps(ddc_case *c)
{
    char msg[256];
    c->h = malloc(sizeof(double) * (size_t)c->cfg.taps);
    c->z = malloc(2 * sizeof(float) * (size_t)c->cfg.taps);
    if (cbf_fd_ddc_design(c->cfg.taps, c->cfg.decimation, 0.005, c->h, NULL, NULL, msg,
                          sizeof msg))
        fail_msg("design: %s", msg);
    if (cbf_ddc_weights(&c->cfg, c->h, c->z, msg, sizeof msg))
        fail_msg("weights: %s", msg);
}

static void case_pack(ddc_case *c)
{
    for (int p = 0; p < 2; p++)
        c->packed[p] = pack_ref(c->x[p], c->n_in, c->cfg.bits);
    c->stride = c->outputs + 3;
    c->out = malloc(2 * 2 * sizeof(float) * c->stride);
    for (size_t i = 0; i < 4 * c->stride; i++)
        c->out[i] = NAN;
}

/* Runs the job on the CPU or the GPU; 0 or the kernel's code. */
static int run(ddc_case *c, size_t start, size_t outputs, uint64_t t0, float *out)
{
    char msg[256] = "";
    cbf_ddc_job job = {{c->packed[0], c->packed[1]}, c->n_in, t0, start, outputs, out,
                       c->stride};
    int rc = CBF_KERN_EINVAL;
    if (!use_gpu) {
        rc = cbf_ddc_cpu(&c->cfg, c->z, &job, msg, sizeof msg);
    } else {
#ifdef CBF_HAVE_CUDA
        size_t in_bytes = cbf_packed_bytes(c->n_in, c->cfg.bits);
        size_t out_bytes = 4 * sizeof(float) * c->stride;
        uint8_t *d_in[2];
        float *d_out;
        cbf_ddc_cuda *plan;
        assert_int_equal(cudaMalloc((void **)&d_in[0], in_bytes), cudaSuccess);
        assert_int_equal(cudaMalloc((void **)&d_in[1], in_bytes), cudaSuccess);
        assert_int_equal(cudaMalloc((void **)&d_out, out_bytes), cudaSuccess);
        for (int p = 0; p < 2; p++)
            assert_int_equal(cudaMemcpy(d_in[p], c->packed[p], in_bytes, cudaMemcpyHostToDevice),
                             cudaSuccess);
        assert_int_equal(cudaMemcpy(d_out, out, out_bytes, cudaMemcpyHostToDevice), cudaSuccess);
        job.in[0] = d_in[0];
        job.in[1] = d_in[1];
        job.out = d_out;
        rc = cbf_ddc_cuda_create(&c->cfg, c->z, per_thread, &plan, msg, sizeof msg);
        if (!rc) {
            rc = cbf_ddc_cuda_run(plan, &job, NULL, msg, sizeof msg);
            assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
            cbf_ddc_cuda_destroy(plan);
        }
        assert_int_equal(cudaMemcpy(out, d_out, out_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
        cudaFree(d_in[0]);
        cudaFree(d_in[1]);
        cudaFree(d_out);
#else
        fail_msg("built without CUDA");
#endif
    }
    if (rc)
        print_message("ddc: %s\n", msg);
    return rc;
}

/* The definition, in double, one sample at a time; bound as in the header. */
static double complex ref_output(const ddc_case *c, int pol, size_t m, uint64_t t0,
                                 double *bound)
{
    const size_t S = (size_t)c->cfg.decimation;
    double complex acc = 0.0;
    double l1 = 0.0;
    for (int k = 0; k < c->cfg.taps; k++) {
        size_t i = c->start + m * S + (size_t)k;
        uint32_t phi = cbf_ddc_phase(t0 + i, c->cfg.mix_step);
        double v = c->x[pol][i] * c->h[k];
        acc += v * cexp(-2.0 * M_PI * I * ldexp((double)phi, -32));
        l1 += fabs(v);
    }
    *bound = 2.0 * (c->cfg.taps + 8) * 0x1p-24 * l1;
    return acc;
}

static void compare(const ddc_case *c, const float *out, const char *what)
{
    double worst = 0.0, num = 0.0, den = 0.0;
    for (int p = 0; p < 2; p++) {
        for (size_t m = 0; m < c->outputs; m++) {
            double bound;
            double complex r = ref_output(c, p, m, c->t0, &bound);
            const float *y = out + 2 * ((size_t)p * c->stride + m);
            double complex d = (y[0] + I * y[1]) - r;
            if (!(cabs(d) <= bound))
                fail_msg("%s: pol %d output %zu = (%g, %g), reference (%g, %g), bound %g", what,
                         p, m, y[0], y[1], creal(r), cimag(r), bound);
            worst = fmax(worst, cabs(d) / bound);
            num += cabs(d) * cabs(d);
            den += cabs(r) * cabs(r);
        }
        for (size_t m = c->outputs; m < c->stride; m++)
            assert_true(isnan(out[2 * ((size_t)p * c->stride + m)]));
    }
    printf("# %s: worst error %.3f of bound, relative rms %.2e\n", what, worst, sqrt(num / den));
}

static void random_case_n(ddc_case *c, int bits, int S, int W, uint64_t t0, size_t outputs)
{
    memset(c, 0, sizeof(*c));
    c->cfg = (cbf_ddc_config){bits, S, S * W, (uint32_t)rng()};
    case_taps(c);
    c->outputs = outputs;
    c->start = rng() % 37; /* any bit alignment */
    c->n_in = c->start + cbf_ddc_in_samples(&c->cfg, c->outputs) + rng() % 5;
    c->t0 = t0;
    const int32_t lo = -(1 << (bits - 1)), span = 1 << bits;
    for (int p = 0; p < 2; p++) {
        c->x[p] = malloc(sizeof(int32_t) * c->n_in);
        for (size_t i = 0; i < c->n_in; i++)
            c->x[p][i] = lo + (int32_t)(rng() % (uint64_t)span);
    }
    case_pack(c);
}

static void random_case(ddc_case *c, int bits, int S, int W, uint64_t t0)
{
    random_case_n(c, bits, S, W, t0, 200 + rng() % 300);
}

static void every_width_against_reference(void **state)
{
    (void)state;
    static const int shapes[][2] = {{8, 8}, {16, 4}, {4, 12}, {2, 16}, {32, 8}, {6, 8}};
    for (int bits = 2; bits <= 16; bits++) {
        ddc_case c;
        const int *sh = shapes[bits % 6];
        random_case(&c, bits, sh[0], sh[1], rng() >> (rng() % 64));
        assert_int_equal(run(&c, c.start, c.outputs, c.t0, c.out), 0);
        char what[96];
        snprintf(what, sizeof what, "%d bits, S %d, taps %d, t0 %llu", bits, sh[0],
                 sh[0] * sh[1], (unsigned long long)c.t0);
        compare(&c, c.out, what);
        case_free(&c);
    }
}

/* The tensor-core kernel's shapes (even bits up to 10, S a power of two
 * from 8, every W), over several blocks and a partial last one, any start
 * alignment: with --gpu and the default per_thread the plan must run it. */
static void tensor_core_shapes_against_reference(void **state)
{
    (void)state;
    static const int dec[] = {8, 16, 32, 64};
    for (int bits = 2; bits <= 10; bits += 2)
        for (int d = 0; d < 4; d++) {
            ddc_case c;
            const int S = dec[d], W = 4 * (1 + (int)(rng() % 4));
            random_case_n(&c, bits, S, W, rng() >> (rng() % 64),
                          100 + rng() % (24000 / (size_t)S));
#ifdef CBF_HAVE_CUDA
            if (use_gpu && !per_thread) {
                cbf_ddc_cuda *plan;
                char msg[256];
                assert_int_equal(cbf_ddc_cuda_create(&c.cfg, c.z, 0, &plan, msg, sizeof msg), 0);
                assert_true(cbf_ddc_cuda_tensor(plan));
                cbf_ddc_cuda_destroy(plan);
            }
#endif
            assert_int_equal(run(&c, c.start, c.outputs, c.t0, c.out), 0);
            char what[96];
            snprintf(what, sizeof what, "%d bits, S %d, taps %d, %zu outputs from %zu", bits, S,
                     S * W, c.outputs, c.start);
            compare(&c, c.out, what);
            case_free(&c);
        }
}

/* Beyond 2^40 samples (about 10 minutes at 1712 Msample/s) and up to 2^62
 * the fixed-point mixer holds; a float32 phase, f t rounded to float, is
 * off by whole cycles there and fails the same bound at once. */
static void mixer_phase_at_large_timestamps(void **state)
{
    (void)state;
    const uint64_t stamps[] = {(1ull << 40) + 12345, (1ull << 47) + 7, (1ull << 62) + 999};
    for (size_t s = 0; s < 3; s++) {
        ddc_case c;
        random_case(&c, 10, 16, 8, stamps[s]);
        assert_int_equal(run(&c, c.start, c.outputs, c.t0, c.out), 0);
        char what[64];
        snprintf(what, sizeof what, "t0 = %llu", (unsigned long long)c.t0);
        compare(&c, c.out, what);
        /* The float-phase mixer on the same samples, accumulated in double. */
        const float f = (float)ldexp((double)c.cfg.mix_step, -32);
        int failed = 0;
        for (size_t m = 0; m < 8 && !failed; m++) {
            double bound, complex_err;
            double complex r = ref_output(&c, 0, m, c.t0, &bound), y = 0.0;
            for (int k = 0; k < c.cfg.taps; k++) {
                size_t i = c.start + m * (size_t)c.cfg.decimation + (size_t)k;
                float ph = f * (float)(c.t0 + i);
                y += c.x[0][i] * c.h[k] * cexp(-2.0 * M_PI * I * (double)(ph - floorf(ph)));
            }
            complex_err = cabs(y - r);
            failed = complex_err > bound;
        }
        assert_true(failed);
        case_free(&c);
    }
}

/* The phase comes from the absolute sample number, so outputs cut into two
 * jobs equal one job bit for bit (the engine's chunks rely on it). Four
 * cuts, one per residue mod 4: the tensor-core kernel places four outputs
 * in a row, and must place them by the absolute output grid. */
static void chunking_changes_nothing(void **state)
{
    (void)state;
    ddc_case c;
    random_case(&c, 10, 8, 8, (1ull << 41) + 3);
    float *two = malloc(4 * sizeof(float) * c.stride);
    float *tail = malloc(4 * sizeof(float) * c.stride);
    const size_t S = (size_t)c.cfg.decimation;
    assert_int_equal(run(&c, c.start, c.outputs, c.t0, c.out), 0);
    for (size_t cut = 0; cut < 4; cut++) {
        const size_t a = c.outputs / 3 + cut;
        for (size_t i = 0; i < 4 * c.stride; i++)
            two[i] = NAN;
        assert_int_equal(run(&c, c.start, a, c.t0, two), 0);
        /* The second job sees the input from its own first window on. */
        ddc_case d = c;
        d.packed[0] = pack_ref(c.x[0] + c.start + a * S, c.n_in - c.start - a * S, c.cfg.bits);
        d.packed[1] = pack_ref(c.x[1] + c.start + a * S, c.n_in - c.start - a * S, c.cfg.bits);
        d.n_in = c.n_in - c.start - a * S;
        assert_int_equal(run(&d, 0, c.outputs - a, c.t0 + c.start + a * S, tail), 0);
        for (int p = 0; p < 2; p++)
            memcpy(two + 2 * ((size_t)p * c.stride + a), tail + 2 * (size_t)p * c.stride,
                   2 * sizeof(float) * (c.outputs - a));
        for (int p = 0; p < 2; p++)
            assert_memory_equal(two + 2 * (size_t)p * c.stride, c.out + 2 * (size_t)p * c.stride,
                                2 * sizeof(float) * c.outputs);
        free(d.packed[0]);
        free(d.packed[1]);
    }
    free(two);
    free(tail);
    case_free(&c);
}

/* A real tone a cos(2 pi f0 n + theta) with f0 = fc + delta: after the DDC
 * it is (a / 2) A(delta) e^(i theta) e^(2 pi i delta (n + (taps - 1) / 2)),
 * n the window start. With every frequency on the grid 1 / (S M), a DFT over
 * the M outputs puts it in bin delta S M alone. A tone in an alias band
 * (delta + 1 / S) lands in the same bin, suppressed by the design's stop_max.
 * 16-bit samples keep quantisation noise (~1e-4 of a / 2 per bin) under both
 * checks; the tolerances below say so. */
static void tone_lands_in_its_bin(void **state)
{
    (void)state;
    const int S = 8, W = 8, M = 1024, bins = S * M;
    const int fc_bin = 1000, offsets[] = {37, -101, 250, 37 + M, -60 - 2 * M};
    for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++) {
        ddc_case c;
        memset(&c, 0, sizeof c);
        c.cfg = (cbf_ddc_config){16, S, S * W, (uint32_t)((uint64_t)fc_bin << 32 >> 13)};
        case_taps(&c);
        cbf_fd_report rep;
        char msg[128];
        assert_int_equal(cbf_fd_ddc_report(c.h, c.cfg.taps, S, &rep, msg, sizeof msg), 0);
        c.outputs = (size_t)M;
        c.t0 = (1ull << 41) + 12345;
        c.n_in = cbf_ddc_in_samples(&c.cfg, c.outputs);
        const double a = 30000.0, theta = 0.7;
        const int f0 = fc_bin + offsets[o];
        for (int p = 0; p < 2; p++) {
            c.x[p] = malloc(sizeof(int32_t) * c.n_in);
            for (size_t i = 0; i < c.n_in; i++) {
                uint64_t ph = ((c.t0 + i) % (uint64_t)bins) * (uint64_t)(f0 + bins) % bins;
                c.x[p][i] = (int32_t)rint(a * cos(2 * M_PI * (double)ph / bins + theta));
            }
        }
        case_pack(&c);
        assert_int_equal(run(&c, 0, c.outputs, c.t0, c.out), 0);
        const int delta = ((offsets[o] % M) + M + M / 2) % M - M / 2; /* its alias in the output */
        const int bin = (delta + M) % M;
        double complex best = 0;
        int best_k = -1;
        double second = 0.0;
        for (int k = 0; k < M; k++) {
            double complex acc = 0;
            for (int m = 0; m < M; m++)
                acc += (c.out[2 * m] + I * c.out[2 * m + 1]) * cexp(-2 * M_PI * I * k * m / M);
            acc /= M;
            if (cabs(acc) > cabs(best)) {
                second = cabs(best);
                best = acc;
                best_k = k;
            } else {
                second = fmax(second, cabs(acc));
            }
        }
        double fd = (double)offsets[o] / bins;
        double amp = cbf_fd_amplitude(c.h, c.cfg.taps, fabs(fd));
        uint64_t tph = (c.t0 % (uint64_t)bins) * (uint64_t)(offsets[o] + 2 * bins) % bins;
        double complex want = a / 2 * amp *
                              cexp(I * (theta + 2 * M_PI * ((double)tph / bins +
                                                            fd * (c.cfg.taps - 1) / 2.0)));
        printf("# offset %d bins (output bin %d): strongest bin %d at |Y| / (a/2) = %.6g; "
               "A(offset) = %.6g\n", offsets[o], bin, best_k, cabs(best) / (a / 2), amp);
        if (offsets[o] == delta) { /* in the passband */
            assert_int_equal(best_k, bin);
            assert_true(amp >= rep.pass_min && amp <= rep.pass_max);
            assert_true(cabs(best - want) < 1e-4 * a / 2);
            assert_true(second < 1e-4 * a / 2);
        } else { /* an alias: suppressed as the report says */
            double complex y = 0;
            for (int m = 0; m < M; m++)
                y += (c.out[2 * m] + I * c.out[2 * m + 1]) * cexp(-2 * M_PI * I * bin * m / M);
            y /= M;
            assert_true(cabs(y - want) < 1e-4 * a / 2);
            assert_true(cabs(y) <= a / 2 * rep.stop_max + 1e-4 * a / 2);
        }
        case_free(&c);
    }
}

static void bad_jobs(void **state)
{
    (void)state;
    char msg[256] = "";
    cbf_ddc_config cfg = {10, 8, 8 * 5, 0};
    assert_int_equal(cbf_ddc_config_check(&cfg, msg, sizeof msg), CBF_KERN_EINVAL);
    assert_non_null(strstr(msg, "taps 40"));
    cfg.taps = 64;
    cfg.bits = 17;
    assert_int_equal(cbf_ddc_config_check(&cfg, msg, sizeof msg), CBF_KERN_EINVAL);
    cfg.bits = 10;
    uint32_t buf[64] = {0};
    float out[64];
    cbf_ddc_job job = {{(uint8_t *)buf, (uint8_t *)buf}, 100, 0, 0, 8, out, 8};
    assert_int_equal(cbf_ddc_job_check(&cfg, &job, msg, sizeof msg), CBF_KERN_EINVAL);
    assert_non_null(strstr(msg, "need 120"));
    job.outputs = 5;
    assert_int_equal(cbf_ddc_job_check(&cfg, &job, msg, sizeof msg), 0);
    job.in[1] = (uint8_t *)buf + 1;
    assert_int_equal(cbf_ddc_job_check(&cfg, &job, msg, sizeof msg), CBF_KERN_EINVAL);
    assert_int_equal(cbf_ddc_mix_step(0.25), 1u << 30);
    assert_int_equal(cbf_ddc_mix_step(-0.25), 3u << 30);
    assert_int_equal(cbf_ddc_phase(UINT64_MAX, 3), (uint32_t)(UINT64_MAX * 3));
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--gpu"))
            use_gpu = 1;
        else if (!strcmp(argv[i], "--per-thread") && i + 1 < argc)
            per_thread = atoi(argv[++i]);
    }
    char why[256];
    if (use_gpu && !cbf_test_gpu_available(why, sizeof why))
        return printf("skipped: %s\n", why), 77;
    rng_state = cbf_test_seed("CBF_TEST_SEED", use_gpu ? "test_ddc --gpu" : "test_ddc");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_width_against_reference),
        cmocka_unit_test(tensor_core_shapes_against_reference),
        cmocka_unit_test(mixer_phase_at_large_timestamps),
        cmocka_unit_test(chunking_changes_nothing),
        cmocka_unit_test(tone_lands_in_its_bin),
        cmocka_unit_test(bad_jobs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
