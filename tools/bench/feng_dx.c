/* cbf-bench feng --dx: cuFFTDx block FFTs (kernels/fft_post/fft_dx.h)
 * against cuFFT doing the four-pass chain's transform, in the same run, for
 * issue 17 item 1: is a device-side FFT cheap enough to be the transform
 * inside a fused F-engine kernel?
 *
 * Rows (complex fp32 points, spectra of m points, out of place unless
 * marked; "of bound": against the copy rate at 16 bytes per point, 10 for
 * dx+post, which reads 8 and writes 2):
 *   cufft        cuFFT's batched C2C plan, as fft_post makes it
 *   dx E x F     cuFFTDx, E elements per thread, F spectra per block (*:
 *                cuFFTDx's suggestion for sm_90)
 *   dx x4        the suggested variant transforming each spectrum 4 times
 *                in registers; "transform" below is (x4 - x1) / 3, the
 *                transform's own cost without its memory traffic
 *   dx+post      the suggested variant with the post-processing's cheap
 *                part (real-input combine, gain, int8 rounding)
 * Each transform row is checked against a float64 DFT of the first and last
 * spectrum (max |error| / rms of the spectrum, tolerance 1e-5), dx+post
 * against that DFT combined, gained and rounded in float64 (no byte off by
 * more than 1). */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <cufft.h>

#include "feng_dx.h"
#include "fft_dx.h"
#include "gpu_time.h"

#define CK(call) CBF_BENCH_CK("feng --dx", call)
#define TOL 1e-5

typedef struct dx_ctx {
    cudaStream_t s;
    cufftHandle plan;
    float2 *a, *b, *eff;
    unsigned long long *sat;
    size_t spectra;
    int variant, mode, in_place;
} dx_ctx;

static int do_cufft(void *p)
{
    dx_ctx *c = p;
    cufftResult r = cufftExecC2C(c->plan, (cufftComplex *)(c->in_place ? c->b : c->a),
                                 (cufftComplex *)c->b, CUFFT_FORWARD);
    if (r != CUFFT_SUCCESS)
        return fprintf(stderr, "cbf-bench feng --dx: cufftExecC2C: %d\n", (int)r), 1;
    return 0;
}

static int do_dx(void *p)
{
    dx_ctx *c = p;
    char msg[256];
    int rc = cbf_fft_dx_run(c->variant, (cbf_fft_dx_mode)c->mode, c->in_place ? c->b : c->a,
                            c->b, c->spectra, c->eff, c->sat, c->s, msg, sizeof msg);
    if (rc)
        fprintf(stderr, "cbf-bench feng --dx: %s\n", msg);
    return rc;
}

/* Float64 DFT of z (m points) into out; w: exp(-2 pi i j / m), j < m. */
static void dft(const float2 *z, int m, const double complex *w, double complex *out)
{
    for (int k = 0; k < m; k++) {
        double complex acc = 0;
        for (int j = 0; j < m; j++) {
            size_t e = (size_t)j * (size_t)k % (size_t)m;
            acc += (z[j].x + I * z[j].y) * w[e];
        }
        out[k] = acc;
    }
}

/* Host copies of spectrum g of the input (in) and of the output (out,
 * float2 or, for dx+post, 2 int8 per channel). */
static int fetch(const dx_ctx *c, const float2 *src, size_t g, int m, float2 *in, void *out,
                 size_t out_bytes)
{
    CK(cudaMemcpy(in, src + g * (size_t)m, sizeof(float2) * (size_t)m, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(out, (const char *)c->b + g * out_bytes, out_bytes, cudaMemcpyDeviceToHost));
    return 0;
}

/* Worst error of the last run's output over the first and last spectrum:
 * transforms, max |error| / rms (float64 DFT); post, bytes off by > 1
 * (*post_off1: off by 1). */
static int check(const dx_ctx *c, int m, int post, const double complex *w, float2 g_eff,
                 double *err, long *post_off1)
{
    const size_t out_bytes = post ? 2 * (size_t)m : sizeof(float2) * (size_t)m;
    float2 *in = malloc(sizeof(float2) * (size_t)m);
    void *out = malloc(out_bytes);
    double complex *ref = malloc(sizeof(double complex) * (size_t)m);
    if (!in || !out || !ref)
        return fprintf(stderr, "cbf-bench feng --dx: out of memory\n"), 1;
    *err = 0;
    *post_off1 = 0;
    const size_t gs[2] = {0, c->spectra - 1};
    for (int i = 0; i < 2; i++) {
        /* The input is in a (in place, b was a copy of it). */
        if (fetch(c, c->a, gs[i], m, in, out, out_bytes))
            return 1;
        dft(in, m, w, ref);
        if (!post) {
            const float2 *o = out;
            double ss = 0, worst = 0;
            for (int k = 0; k < m; k++)
                ss += creal(ref[k] * conj(ref[k]));
            for (int k = 0; k < m; k++)
                worst = fmax(worst, cabs(o[k].x + I * o[k].y - ref[k]));
            *err = fmax(*err, worst / sqrt(ss / m));
            continue;
        }
        const signed char *o = out;
        const double complex g = g_eff.x + I * g_eff.y;
        for (int k = 0; k < m; k++) {
            double complex zk = ref[k], zmk = conj(ref[(m - k) % m]);
            double complex x = 0.5 * (zk + zmk) + cexp(-I * M_PI * k / m) * (zk - zmk) / (2 * I);
            x *= g;
            double v[2] = {creal(x), cimag(x)};
            for (int q = 0; q < 2; q++) {
                double r = fmin(127, fmax(-127, nearbyint(v[q])));
                double d = fabs(r - o[2 * k + q]);
                if (d > 1 || o[2 * k + q] == -128) /* -128: the poison, never written */
                    *err += 1;
                else if (d == 1)
                    (*post_off1)++;
            }
        }
    }
    free(in);
    free(out);
    free(ref);
    return 0;
}

static void row(int m, const char *name, float ms, size_t points, double bytes_per_point,
                double copy_rate, const char *err)
{
    double rate = (double)points / (ms * 1e-3);
    printf("| %d | %-12s | %8.3f | %7.1f | %7.1f | %4.0f%% | %s |\n", m, name, ms, rate / 1e9,
           copy_rate / bytes_per_point / 1e9, 100.0 * rate * bytes_per_point / copy_rate, err);
}

/* Times step (a transform, in place or not as c says), then runs it once
 * more on fresh input (in place: b refilled from a; else b poisoned with
 * NaN) and checks that output: *ms, *err as check's. */
static int time_checked(dx_ctx *c, cbf_bench_step step, int m, size_t points, int reps,
                        const double complex *w, float *ms, double *err)
{
    long off1;
    CK(cudaMemcpy(c->b, c->a, sizeof(float2) * points, cudaMemcpyDeviceToDevice));
    if (cbf_bench_time_ms(step, c, c->s, reps, ms))
        return 1;
    if (c->in_place)
        CK(cudaMemcpy(c->b, c->a, sizeof(float2) * points, cudaMemcpyDeviceToDevice));
    else
        CK(cudaMemset(c->b, 0xff, sizeof(float2) * points));
    return step(c) || check(c, m, 0, w, (float2){0, 0}, err, &off1);
}

/* Rows of one variant: dx (checked; in place too when suggested), dx x4,
 * transform, dx+post (checked). *best_tr, *best_post: the lowest
 * picoseconds per point seen of the transform alone and of dx+post. */
static int bench_variant(dx_ctx *c, int i, const cbf_fft_dx_variant *v, size_t points,
                         double copy_rate, int reps, const double complex *w, double *best_tr,
                         double *best_post)
{
    const int m = v->points;
    char name[32], msg[96];
    double err;
    long off1;
    float ms, t1 = 0, t4;
    c->variant = i;
    c->mode = CBF_FFT_DX_FFT;
    for (c->in_place = 0; c->in_place < 1 + v->suggested; c->in_place++) {
        if (time_checked(c, do_dx, m, points, reps, w, &ms, &err))
            return 1;
        snprintf(name, sizeof name, "dx %dx%d%s%s", v->ept, v->ffts_per_block,
                 v->suggested ? "*" : "", c->in_place ? " in pl." : "");
        snprintf(msg, sizeof msg, "%.1e%s", err, err > TOL || err != err ? " FAIL" : "");
        row(m, name, ms, points, 16, copy_rate, msg);
        if (err > TOL || err != err)
            return 1;
        if (!c->in_place)
            t1 = ms;
    }
    c->in_place = 0;
    c->mode = CBF_FFT_DX_FFT4;
    if (cbf_bench_time_ms(do_dx, c, c->s, reps, &t4))
        return 1;
    snprintf(name, sizeof name, "dx %dx%d x4", v->ept, v->ffts_per_block);
    row(m, name, t4, points, 16, copy_rate, "-");
    row(m, "transform", (t4 - t1) / 3, points, 16, copy_rate, "(x4 - x1) / 3");
    *best_tr = fmin(*best_tr, (t4 - t1) / 3 * 1e9 / (double)points);
    c->mode = CBF_FFT_DX_POST;
    const float2 g = {0.5f, 0.25f};
    float2 *h = malloc(sizeof(float2) * (size_t)m);
    if (!h)
        return 1;
    for (int k = 0; k < m; k++)
        h[k] = g;
    CK(cudaMemcpy(c->eff, h, sizeof(float2) * (size_t)m, cudaMemcpyHostToDevice));
    free(h);
    if (cbf_bench_time_ms(do_dx, c, c->s, reps, &ms))
        return 1;
    CK(cudaMemset(c->b, 0x80, 2 * points)); /* poisoned: -128, never written */
    CK(cudaMemset(c->sat, 0, sizeof *c->sat));
    if (do_dx(c) || check(c, m, 1, w, g, &err, &off1))
        return 1;
    unsigned long long sat;
    CK(cudaMemcpy(&sat, c->sat, sizeof sat, cudaMemcpyDeviceToHost));
    snprintf(name, sizeof name, "dx %dx%d+post", v->ept, v->ffts_per_block);
    snprintf(msg, sizeof msg, "%.0f off by >1, %ld by 1 of %d; %.2f%% clipped%s", err, off1,
             4 * m, 100.0 * (double)sat / (2.0 * (double)points), err > 0 ? " FAIL" : "");
    row(m, name, ms, points, 10, copy_rate, msg);
    *best_post = fmin(*best_post, ms * 1e9 / (double)points);
    return err > 0;
}

static int bench_m(dx_ctx *c, int m, size_t points, double copy_rate, int reps)
{
    char msg[64];
    double err;
    float ms;
    c->spectra = points / (size_t)m;
    double complex *w = malloc(sizeof(double complex) * (size_t)m);
    if (!w)
        return 1;
    for (int j = 0; j < m; j++)
        w[j] = cexp(-2 * M_PI * I * j / m);
    int n = (int)c->spectra;
    if (cufftPlanMany(&c->plan, 1, &m, NULL, 1, m, NULL, 1, m, CUFFT_C2C, n) != CUFFT_SUCCESS ||
        cufftSetStream(c->plan, c->s) != CUFFT_SUCCESS)
        return fprintf(stderr, "cbf-bench feng --dx: cuFFT plan of %d x %d failed\n", n, m), 1;
    for (c->in_place = 0; c->in_place < 2; c->in_place++) {
        if (time_checked(c, do_cufft, m, points, reps, w, &ms, &err))
            return 1;
        snprintf(msg, sizeof msg, "%.1e%s", err, err > TOL ? " FAIL" : "");
        row(m, c->in_place ? "cufft in pl." : "cufft", ms, points, 16, copy_rate, msg);
        if (err > TOL)
            return 1;
    }
    const cbf_fft_dx_variant *v;
    int nv = cbf_fft_dx_variants(&v);
    double best_tr = 1e30, best_post = 1e30;
    for (int i = 0; i < nv; i++)
        if (v[i].points == m &&
            bench_variant(c, i, &v[i], points, copy_rate, reps, w, &best_tr, &best_post))
            return 1;
    /* The fused chain's budget: the four-pass bound, 18.25 bytes per
     * sample, two samples per point. */
    const double budget = 36.5 / copy_rate * 1e12;
    printf("| %d | budget | four-pass bound %.2f ps per point; best transform %.2f (%.0f%%), "
           "best dx+post %.2f (%.0f%%) | | | | |\n",
           m, budget, best_tr, 100 * best_tr / budget, best_post, 100 * best_post / budget);
    cufftDestroy(c->plan);
    free(w);
    return 0;
}

int cbf_bench_feng_dx(double copy_rate, size_t samples, int reps)
{
    dx_ctx c = {0};
    const size_t points = samples; /* both pols' samples, two per complex point */
    CK(cudaStreamCreate(&c.s));
    CK(cudaMalloc((void **)&c.a, sizeof(float2) * points));
    CK(cudaMalloc((void **)&c.b, sizeof(float2) * points));
    CK(cudaMalloc((void **)&c.eff, sizeof(float2) * 8192));
    CK(cudaMalloc((void **)&c.sat, sizeof *c.sat));
    /* Uniform [-1, 1) values: 16 MiB made on the host, repeated. */
    const size_t blk = (size_t)1 << 21;
    float2 *h = malloc(sizeof(float2) * blk);
    if (!h)
        return 1;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < blk; i++) {
        float r[2];
        for (int q = 0; q < 2; q++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            r[q] = (float)((double)(x >> 11) / 4503599627370496.0 - 1.0);
        }
        h[i] = (float2){r[0], r[1]};
    }
    for (size_t off = 0; off < points; off += blk)
        CK(cudaMemcpy(c.a + off, h, sizeof(float2) * (points - off < blk ? points - off : blk),
                      cudaMemcpyHostToDevice));
    free(h);
    printf("\ncuFFTDx block FFTs against cuFFT, %zu complex fp32 points per call; rate in "
           "Gpoint/s; bound = copy rate / 16 bytes per point (dx+post: 10); error: max "
           "|error| / rms against a float64 DFT of 2 spectra, tolerance %.0e\n\n",
           points, TOL);
    printf("| points | kernel | ms | Gpoint/s | bound Gpoint/s | of bound | error |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- |\n");
    int rc = bench_m(&c, 4096, points, copy_rate, reps) || bench_m(&c, 8192, points, copy_rate, reps);
    cudaFree(c.a);
    cudaFree(c.b);
    cudaFree(c.eff);
    cudaFree(c.sat);
    cudaStreamDestroy(c.s);
    return rc;
}
