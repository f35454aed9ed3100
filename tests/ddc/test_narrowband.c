/* test_narrowband.c: the narrowband chain, ddc -> complex pfb -> fft_post
 * (complex mode), on the CPU (and, with --gpu, on the GPU: exit 77 without
 * one) against a float64 model written from the maths: bit-by-bit decode,
 * the mixer phase from the exact integer n x mix_step mod 2^32, direct FIR
 * and subsampling, the direct PFB FIR with the prototype filter of
 * docs/formats.md, a direct
 * DFT of 2N points, channel c = bin c - N/2, gains and fine delay indexed by
 * c. The input timestamps lie beyond 2^41 samples. The chain comparison
 * runs again keeping the whole band (fft_post keep_all: a PFB of step N,
 * an N-point DFT, every bin a channel), and unzipped by 2 and 4 (the FIR
 * doing the transform's first radix-n stage, fft_post n transforms of 2N /
 * n points). The complex FIR alone is held against itself on the CPU for
 * every unzip factor, spectra not a multiple of the taps (the GPU's tail
 * turn), with the unzip written out in float64 from the natural output.
 *
 * Tolerance: the float32 chain (DDC sums of 64 products, PFB sums of 8,
 * FFT of 512 points) carries relative errors near 1e-6 of the output rms
 * (about 20 counts here), so a quantised value can differ from the model
 * only when its exact value lies within ~1e-4 of a half-integer: at most
 * one step, and on far fewer than 0.1% of values (the wideband criterion,
 * issue 3). The same holds between CPU and GPU. */
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
#include "feng_ref.h"
#include "fft_post.h"
#include "filter_design.h"
#include "pfb.h"
#include "../gpu_available.h"

#ifdef CBF_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define N 256          /* output channels; the transform has 2N points */
#define TAPS 8         /* PFB taps */
#define S 8            /* decimation */
#define T_DDC 64       /* DDC taps */
#define SPH 32
#define BATCHES 2
#define SPECTRA (SPH * BATCHES)
#define STEP_MAX (2 * N)
/* Complex samples per spectrum: 2N, or N keeping the whole band. */
#define STEP (whole ? N : 2 * N)

static int use_gpu;
static int whole;      /* keep the whole band: N-point transforms, all bins kept */
static int unzip = 1;  /* the narrowband unzip factor (pfb.h), 1, 2 or 4 */
static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double uni(void) { return (double)(rnd() >> 11) * 0x1p-53; }

typedef struct chain {
    int bits;
    uint32_t mix_step;
    uint64_t t0;               /* timestamp of input sample 0 */
    int64_t start[2];          /* PFB window start per pol, in DDC outputs (coarse delay) */
    size_t outputs, in_samples;
    uint8_t *in[2];
    double h[T_DDC];
    float z[2 * T_DDC];
    float w[STEP_MAX * TAPS];
    float gains[4 * N];        /* [channel][pol][re, im] */
    float fine_delay[2], phase[2];   /* delay in DDC output samples */
} chain;

static void chain_init(chain *c, int bits, uint32_t mix_step, uint64_t t0)
{
    char msg[256];
    memset(c, 0, sizeof *c);
    c->bits = bits;
    c->mix_step = mix_step;
    c->t0 = t0;
    c->start[0] = 5;
    c->start[1] = 2; /* pol 1 three outputs (3 S digitiser samples) later than pol 0 */
    c->outputs = (size_t)(SPECTRA + TAPS - 1) * STEP + 8;
    c->in_samples = (c->outputs - 1) * S + T_DDC;
    for (int p = 0; p < 2; p++)
        c->in[p] = calloc(cbf_packed_bytes(c->in_samples, bits) + 8, 1);
    assert_int_equal(cbf_fd_ddc_design(T_DDC, S, 0.005, c->h, NULL, NULL, msg, sizeof msg), 0);
    cbf_ddc_config cfg = {bits, S, T_DDC, mix_step};
    assert_int_equal(cbf_ddc_weights(&cfg, c->h, c->z, msg, sizeof msg), 0);
    assert_int_equal(cbf_pfb_weights(STEP / 2, TAPS, 1.0, CBF_PFB_HANN, c->w, msg, sizeof msg), 0);
    for (int i = 0; i < 2 * N; i++) {
        c->gains[2 * i] = 1.0f;
        c->gains[2 * i + 1] = 0.0f;
    }
}

static void chain_free(chain *c)
{
    free(c->in[0]);
    free(c->in[1]);
}

/* Runs ddc, pfb (complex) and fft_post (complex); out gets
 * cbf_fft_post_out_bytes, poisoned with 0x88 first (-128 / -8, never
 * written). FIR outputs are NaN-poisoned and checked finite afterwards. */
static void chain_run(const chain *c, int gpu, uint8_t *out, uint64_t sat[2])
{
    char msg[512] = "";
    cbf_ddc_config dcfg = {c->bits, S, T_DDC, c->mix_step};
    cbf_fft_post_config pcfg = {N, unzip, SPH, SPECTRA, 8, 1, whole};
    size_t ddc_floats = 2 * 2 * c->outputs, fir_floats = 2 * (size_t)SPECTRA * 2 * STEP;
    size_t out_bytes = cbf_fft_post_out_bytes(&pcfg);
    float *ddc = malloc(ddc_floats * sizeof(float)), *fir = malloc(fir_floats * sizeof(float));
    for (size_t i = 0; i < fir_floats; i++)
        fir[i] = NAN;
    memset(out, 0x88, out_bytes);
    size_t in_bytes = cbf_packed_bytes(c->in_samples, c->bits);
    if (!gpu) {
        cbf_ddc_job dj = {{c->in[0], c->in[1]}, c->in_samples, c->t0, 0, c->outputs, ddc,
                          c->outputs};
        assert_int_equal(cbf_ddc_cpu(&dcfg, c->z, &dj, msg, sizeof msg), 0);
        cbf_pfb_cjob pj = {STEP / 2, TAPS, {ddc, ddc + 2 * c->outputs}, c->outputs,
                           {c->start[0], c->start[1]}, SPECTRA, fir, (size_t)SPECTRA * 2 * STEP,
                           unzip};
        assert_int_equal(cbf_pfb_fir_complex_cpu(&pj, c->w, msg, sizeof msg), 0);
        for (size_t i = 0; i < fir_floats; i++)
            assert_true(isfinite(fir[i]));
        cbf_fft_post_cpu *fp;
        assert_int_equal(cbf_fft_post_cpu_create(&pcfg, &fp, msg, sizeof msg), 0);
        cbf_fft_post_cpu_set_gains(fp, c->gains);
        cbf_fft_post_args a = {fir, (size_t)SPECTRA * 2 * STEP, out,
                               {c->fine_delay[0], c->fine_delay[1]}, {c->phase[0], c->phase[1]},
                               NULL, 0, 0};
        int rc = cbf_fft_post_cpu_run(fp, &a, sat, msg, sizeof msg);
        if (rc)
            fail_msg("%s", msg);
        cbf_fft_post_cpu_destroy(fp);
    } else {
#ifdef CBF_HAVE_CUDA
        uint8_t *d_in[2];
        float *d_ddc, *d_fir;
        void *d_out;
        for (int p = 0; p < 2; p++) {
            assert_int_equal(cudaMalloc((void **)&d_in[p], in_bytes), cudaSuccess);
            assert_int_equal(cudaMemcpy(d_in[p], c->in[p], in_bytes, cudaMemcpyHostToDevice),
                             cudaSuccess);
        }
        assert_int_equal(cudaMalloc((void **)&d_ddc, ddc_floats * sizeof(float)), cudaSuccess);
        assert_int_equal(cudaMalloc((void **)&d_fir, fir_floats * sizeof(float)), cudaSuccess);
        assert_int_equal(cudaMalloc(&d_out, out_bytes), cudaSuccess);
        assert_int_equal(cudaMemcpy(d_fir, fir, fir_floats * sizeof(float),
                                    cudaMemcpyHostToDevice), cudaSuccess);
        assert_int_equal(cudaMemcpy(d_out, out, out_bytes, cudaMemcpyHostToDevice), cudaSuccess);
        cudaStream_t st;
        assert_int_equal(cudaStreamCreate(&st), cudaSuccess);
        cbf_ddc_cuda *dp;
        cbf_pfb_cuda *pp;
        cbf_fft_post_cuda *fp;
        assert_int_equal(cbf_ddc_cuda_create(&dcfg, c->z, 0, &dp, msg, sizeof msg), 0);
        assert_int_equal(cbf_pfb_cuda_create(STEP / 2, TAPS, c->w, &pp, msg, sizeof msg), 0);
        assert_int_equal(cbf_fft_post_cuda_create(&pcfg, st, &fp, msg, sizeof msg), 0);
        assert_int_equal(cbf_fft_post_cuda_set_gains(fp, c->gains, msg, sizeof msg), 0);
        cbf_ddc_job dj = {{d_in[0], d_in[1]}, c->in_samples, c->t0, 0, c->outputs, d_ddc,
                          c->outputs};
        cbf_pfb_cjob pj = {STEP / 2, TAPS, {d_ddc, d_ddc + 2 * c->outputs}, c->outputs,
                           {c->start[0], c->start[1]}, SPECTRA, d_fir,
                           (size_t)SPECTRA * 2 * STEP, unzip};
        cbf_fft_post_args a = {d_fir, (size_t)SPECTRA * 2 * STEP, d_out,
                               {c->fine_delay[0], c->fine_delay[1]}, {c->phase[0], c->phase[1]},
                               NULL, 0, 0};
        int rc = cbf_ddc_cuda_run(dp, &dj, st, msg, sizeof msg);
        if (!rc)
            rc = cbf_pfb_cuda_run_complex(pp, &pj, st, msg, sizeof msg);
        if (!rc) {
            assert_int_equal(cudaStreamSynchronize(st), cudaSuccess);
            assert_int_equal(cudaMemcpy(fir, d_fir, fir_floats * sizeof(float),
                                        cudaMemcpyDeviceToHost), cudaSuccess);
            for (size_t i = 0; i < fir_floats; i++)
                assert_true(isfinite(fir[i]));
            rc = cbf_fft_post_cuda_run(fp, &a, msg, sizeof msg);
        }
        if (!rc)
            rc = cbf_fft_post_cuda_saturated(fp, sat, msg, sizeof msg);
        if (rc)
            fail_msg("%s", msg);
        assert_int_equal(cudaMemcpy(out, d_out, out_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
        cbf_ddc_cuda_destroy(dp);
        cbf_pfb_cuda_destroy(pp);
        cbf_fft_post_cuda_destroy(fp);
        cudaStreamDestroy(st);
        cudaFree(d_in[0]);
        cudaFree(d_in[1]);
        cudaFree(d_ddc);
        cudaFree(d_fir);
        cudaFree(d_out);
#else
        (void)in_bytes;
        fail_msg("built without CUDA");
#endif
    }
    free(ddc);
    free(fir);
}

/* The float64 model: X[pol][spectrum][channel] after delay, phase and gain. */
static double complex *reference(const chain *c)
{
    double *w = malloc(sizeof(double) * STEP * TAPS);
    feng_ref_weights(STEP / 2, TAPS, 1.0, 1, w);
    double complex *y = malloc(sizeof(double complex) * c->outputs);
    double complex *v = malloc(sizeof(double complex) * STEP);
    double complex *tw = malloc(sizeof(double complex) * STEP);
    double complex *X = malloc(sizeof(double complex) * 2 * SPECTRA * N);
    double *x = malloc(sizeof(double) * c->in_samples);
    double complex mix[T_DDC];
    for (int j = 0; j < STEP; j++)
        tw[j] = cexp(-2.0 * M_PI * I * j / STEP);
    for (int p = 0; p < 2; p++) {
        for (size_t i = 0; i < c->in_samples; i++)
            x[i] = (double)feng_ref_sample(c->in[p], i, c->bits);
        for (size_t m = 0; m < c->outputs; m++) {
            double complex acc = 0;
            for (int k = 0; k < T_DDC; k++) {
                uint64_t n = c->t0 + m * S + (uint64_t)k;
                uint32_t ph = (uint32_t)(n * (uint64_t)c->mix_step); /* exact mod 2^32 */
                mix[k] = cexp(-2.0 * M_PI * I * ldexp((double)ph, -32));
                acc += x[m * S + (size_t)k] * c->h[k] * mix[k];
            }
            y[m] = acc;
        }
        for (size_t sp = 0; sp < SPECTRA; sp++) {
            for (int j = 0; j < STEP; j++) {
                double complex acc = 0;
                for (int t = 0; t < TAPS; t++)
                    acc += w[t * STEP + j] * y[(size_t)c->start[p] + (sp + (size_t)t) * STEP + (size_t)j];
                v[j] = acc;
            }
            for (int ch = 0; ch < N; ch++) {
                int k = ch - N / 2; /* on-sky order: channel 0 lowest, DC at N/2 */
                double complex acc = 0;
                for (int j = 0; j < STEP; j++)
                    acc += v[j] * tw[(int)(((long)j * k % STEP + STEP) % STEP)];
                /* A delay d turns frequency k / STEP by -2 pi d k / STEP. */
                double ang = -2.0 * M_PI * c->fine_delay[p] * k / STEP + c->phase[p];
                double complex g = c->gains[4 * ch + 2 * p] + I * c->gains[4 * ch + 2 * p + 1];
                X[((size_t)p * SPECTRA + sp) * N + (size_t)ch] = acc * cexp(I * ang) * g;
            }
        }
    }
    free(w);
    free(y);
    free(v);
    free(tw);
    free(x);
    return X;
}

static void out_value(const uint8_t *out, int pol, size_t sp, int ch, int *re, int *im)
{
    size_t b = sp / SPH, t = sp % SPH;
    size_t idx = ((b * N + (size_t)ch) * SPH + t) * 2 + (size_t)pol;
    *re = (int8_t)out[2 * idx];
    *im = (int8_t)out[2 * idx + 1];
}

/* Random 10-bit noise plus a tone; gains with random phases scaled so the
 * output rms is about 20 counts; fine delay and phase per pol. */
static void random_case(chain *c)
{
    chain_init(c, 10, (uint32_t)rnd(), (1ull << 41) + (rnd() & 0xffffffffull));
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < c->in_samples; i++) {
            double v = 60.0 * (uni() + uni() + uni() + uni() - 2.0) * 1.7
                       + 150.0 * cos(2 * M_PI * 0.01 * (double)i + p);
            long q = lround(v);
            q = q > 511 ? 511 : q < -511 ? -511 : q;
            feng_ref_put(c->in[p], i, 10, q);
        }
    double complex *X = reference(c);
    double s2 = 0;
    for (size_t i = 0; i < 2 * SPECTRA * N; i++)
        s2 += creal(X[i] * conj(X[i]));
    free(X);
    double g = 20.0 / sqrt(s2 / (2.0 * SPECTRA * N));
    for (int i = 0; i < 2 * N; i++) {
        double a = 2 * M_PI * uni(), m = g * (0.8 + 0.4 * uni());
        c->gains[2 * i] = (float)(m * cos(a));
        c->gains[2 * i + 1] = (float)(m * sin(a));
    }
    c->fine_delay[0] = 0.3f;
    c->fine_delay[1] = -0.45f;
    c->phase[0] = 0.2f;
    c->phase[1] = -1.1f;
}

typedef struct stats {
    size_t n, exact, worse;
} stats;

static stats compare_ref(const chain *c, const double complex *X, const uint8_t *out)
{
    stats st = {0};
    for (int p = 0; p < 2; p++)
        for (size_t sp = 0; sp < SPECTRA; sp++)
            for (int ch = 0; ch < N; ch++) {
                double complex x = X[((size_t)p * SPECTRA + sp) * N + (size_t)ch];
                int clipped = 0, re, im;
                int qre = feng_ref_quant(creal(x), 127, &clipped);
                int qim = feng_ref_quant(cimag(x), 127, &clipped);
                out_value(out, p, sp, ch, &re, &im);
                int d = abs(re - qre) > abs(im - qim) ? abs(re - qre) : abs(im - qim);
                st.n++;
                st.exact += d == 0;
                st.worse += d > 1;
            }
    (void)c;
    return st;
}

static void check_stats(const char *what, stats st)
{
    printf("# %s: %zu values, %.4f%% exact, %zu more than 1 LSB off\n", what, st.n,
           100.0 * (double)st.exact / (double)st.n, st.worse);
    assert_int_equal(st.worse, 0);
    assert_true((double)st.exact >= 0.999 * (double)st.n);
}

static void chain_against_reference(void **state)
{
    (void)state;
    chain c;
    random_case(&c);
    double complex *X = reference(&c);
    size_t bytes = (size_t)SPECTRA * N * 2 * 2;
    uint8_t *cpu = malloc(bytes), *gpu = malloc(bytes);
    uint64_t sat_cpu[2], sat_gpu[2];
    chain_run(&c, 0, cpu, sat_cpu);
    check_stats("CPU against float64", compare_ref(&c, X, cpu));
    if (use_gpu) {
        chain_run(&c, 1, gpu, sat_gpu);
        check_stats("GPU against float64", compare_ref(&c, X, gpu));
        size_t same = 0, worse = 0;
        for (size_t i = 0; i < bytes; i++) {
            int d = abs((int8_t)cpu[i] - (int8_t)gpu[i]);
            same += d == 0;
            worse += d > 1;
        }
        printf("# GPU against CPU: %.4f%% of bytes identical, %zu more than 1 off\n",
               100.0 * (double)same / (double)bytes, worse);
        assert_int_equal(worse, 0);
        assert_true((double)same >= 0.999 * (double)bytes);
    }
    free(X);
    free(cpu);
    free(gpu);
    chain_free(&c);
}

/* The same, keeping the whole band: an N-point transform of step N, every
 * bin a channel, the delay's slope twice as steep per channel. */
static void whole_band_chain_against_reference(void **state)
{
    whole = 1;
    chain_against_reference(state);
    whole = 0;
}

/* Unzipped by n: the FIR does the 2N-point transform's first radix-n
 * stage, fft_post n transforms of 2N / n points; the same channels. */
static void unzip2_chain_against_reference(void **state)
{
    unzip = 2;
    chain_against_reference(state);
    unzip = 1;
}

static void unzip4_chain_against_reference(void **state)
{
    unzip = 4;
    chain_against_reference(state);
    unzip = 1;
}

/* The complex FIR for unzip 1, 2, 4 on random complex input, 2 x TAPS + 5
 * spectra (sections on the GPU end in a partial turn): the CPU's unzipped
 * output against the float64 unzip of its natural output, and the GPU's
 * (NaN-poisoned first) against the CPU's, relative to the output rms. */
static void fir_unzip_against_cpu(void **state)
{
    (void)state;
    char msg[256];
    const int n_ch = N, step = 2 * n_ch, spectra = 2 * TAPS + 5;
    const size_t in_c = (size_t)(spectra + TAPS - 1) * (size_t)step + 3;
    const size_t row = 2 * (size_t)step, outf = (size_t)spectra * row;
    float *in = malloc(2 * in_c * 2 * sizeof(float)), *w = malloc(sizeof(float) * step * TAPS);
    float *nat = malloc(2 * outf * sizeof(float)), *uz = malloc(2 * outf * sizeof(float));
    float *gpu = malloc(2 * outf * sizeof(float));
    for (size_t i = 0; i < 2 * in_c * 2; i++)
        in[i] = (float)(uni() - 0.5);
    assert_int_equal(cbf_pfb_weights(n_ch, TAPS, 1.0, CBF_PFB_HANN, w, msg, sizeof msg), 0);
    cbf_pfb_cjob j = {n_ch, TAPS, {in, in + 2 * in_c}, in_c, {3, 1}, (size_t)spectra, nat,
                      outf, 1};
    assert_int_equal(cbf_pfb_fir_complex_cpu(&j, w, msg, sizeof msg), 0);
    double s2 = 0;
    for (size_t i = 0; i < 2 * outf; i++)
        s2 += (double)nat[i] * nat[i];
    const double rms = sqrt(s2 / (double)(2 * outf));
    for (int n = 1; n <= 4; n *= 2) {
        const int m = step / n;
        j.unzip = n;
        j.out = uz;
        assert_int_equal(cbf_pfb_fir_complex_cpu(&j, w, msg, sizeof msg), 0);
        double worst = 0;
        for (size_t r = 0; r < 2 * (size_t)spectra; r++) {
            const float *y = nat + r * row, *u = uz + r * row;
            for (int jj = 0; jj < n; jj++)
                for (int q = 0; q < m; q++) {
                    double complex a = 0;
                    for (int rr = 0; rr < n; rr++)
                        a += (y[2 * (q + rr * m)] + I * (double)y[2 * (q + rr * m) + 1])
                             * cexp(-2.0 * M_PI * I * rr * jj / n);
                    a *= cexp(-2.0 * M_PI * I * (double)q * jj / step);
                    double complex got = u[2 * (jj * m + q)] + I * (double)u[2 * (jj * m + q) + 1];
                    worst = fmax(worst, cabs(got - a) / rms);
                }
        }
        printf("# complex FIR unzip %d, CPU against float64 unzip: worst %.2e of the rms\n", n,
               worst);
        assert_true(worst < 1e-5 * n);
#ifdef CBF_HAVE_CUDA
        if (!use_gpu)
            continue;
        float *d_in, *d_out;
        assert_int_equal(cudaMalloc((void **)&d_in, 2 * in_c * 2 * sizeof(float)), cudaSuccess);
        assert_int_equal(cudaMalloc((void **)&d_out, 2 * outf * sizeof(float)), cudaSuccess);
        assert_int_equal(cudaMemcpy(d_in, in, 2 * in_c * 2 * sizeof(float),
                                    cudaMemcpyHostToDevice), cudaSuccess);
        for (size_t i = 0; i < 2 * outf; i++)
            gpu[i] = NAN;
        assert_int_equal(cudaMemcpy(d_out, gpu, 2 * outf * sizeof(float),
                                    cudaMemcpyHostToDevice), cudaSuccess);
        cbf_pfb_cuda *pp;
        assert_int_equal(cbf_pfb_cuda_create(n_ch, TAPS, w, &pp, msg, sizeof msg), 0);
        cbf_pfb_cjob dj = j;
        dj.in[0] = d_in;
        dj.in[1] = d_in + 2 * in_c;
        dj.out = d_out;
        assert_int_equal(cbf_pfb_cuda_run_complex(pp, &dj, NULL, msg, sizeof msg), 0);
        assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
        assert_int_equal(cudaMemcpy(gpu, d_out, 2 * outf * sizeof(float),
                                    cudaMemcpyDeviceToHost), cudaSuccess);
        double gw = 0;
        for (size_t i = 0; i < 2 * outf; i++) {
            assert_true(isfinite(gpu[i]));
            gw = fmax(gw, fabs((double)gpu[i] - uz[i]) / rms);
        }
        printf("# complex FIR unzip %d, GPU against CPU: worst %.2e of the rms\n", n, gw);
        assert_true(gw < 1e-5 * n);
        cbf_pfb_cuda_destroy(pp);
        cudaFree(d_in);
        cudaFree(d_out);
#endif
    }
    free(in);
    free(w);
    free(nat);
    free(uz);
    free(gpu);
}

/* Writes a 16-bit tone of amplitude A and frequency step / 2^32 cycles per
 * sample to both pols, its phase exact at any timestamp. */
static void put_tone(chain *c, uint32_t step, double A)
{
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < c->in_samples; i++) {
            uint32_t ph = (uint32_t)((c->t0 + i) * (uint64_t)step);
            feng_ref_put(c->in[p], i, 16, lround(A * cos(2 * M_PI * ldexp(ph, -32))));
        }
}

/* The largest |out| in channel ch over every spectrum and pol. */
static double channel_peak(const uint8_t *out, int ch, double *worst_other)
{
    double peak = 0;
    *worst_other = 0;
    for (int p = 0; p < 2; p++)
        for (size_t sp = 0; sp < SPECTRA; sp++)
            for (int k = 0; k < N; k++) {
                int re, im;
                out_value(out, p, sp, k, &re, &im);
                double mag = hypot(re, im);
                if (k == ch)
                    peak = fmax(peak, mag);
                else
                    *worst_other = fmax(*worst_other, mag);
            }
    return peak;
}

/* H(f) = sum h_k exp(2 pi i f k): the DDC filter at baseband offset f. */
static double complex ddc_response(const chain *c, double f)
{
    double complex H = 0;
    for (int k = 0; k < T_DDC; k++)
        H += c->h[k] * cexp(2 * M_PI * I * f * k);
    return H;
}

static void set_gain(chain *c, double g)
{
    for (int i = 0; i < 2 * N; i++) {
        c->gains[2 * i] = (float)g;
        c->gains[2 * i + 1] = 0.0f;
    }
}

/* A tone one alias band up (offset delta + 1 / S from the centre) folds
 * onto the same channel as delta after subsampling. Through the whole chain
 * it must come out at G (A/2) |H(delta + 1/S)| sum(w), and that must be
 * within the alias suppression the design report states. The gain is
 * raised by the suppression so the alias reads about 50 counts. */
static void alias_suppressed_as_reported(void **state)
{
    (void)state;
    char msg[256];
    const int chans[] = {N / 2 + 21, N / 2 - 50};
    const double A = 20000.0;
    for (size_t ci = 0; ci < sizeof chans / sizeof chans[0]; ci++) {
        int c0 = chans[ci];
        chain c;
        uint32_t mix = (uint32_t)(0.2 * 4294967296.0);
        chain_init(&c, 16, mix, (1ull << 42) + 777);
        cbf_fd_report rep;
        assert_int_equal(cbf_fd_ddc_report(c.h, T_DDC, S, &rep, msg, sizeof msg), 0);
        /* 1 / S cycles per sample = 2^29 in mixer units (S = 8). */
        put_tone(&c, mix + (uint32_t)((c0 - N / 2) * (1 << 20)) + (1u << 29), A);
        double delta = (c0 - N / 2) / (2.0 * N * S), sumw = 0;
        for (int i = 0; i < STEP * TAPS; i++)
            sumw += c.w[i];
        double H = cabs(ddc_response(&c, delta + 1.0 / S));
        double G = 50.0 / ((A / 2) * rep.stop_max * sumw);
        double expect = G * (A / 2) * H * sumw, bound = 50.0;
        set_gain(&c, G);
        for (int dev = 0; dev <= use_gpu; dev++) {
            uint8_t *out = malloc((size_t)SPECTRA * N * 4);
            uint64_t sat[2];
            double other;
            chain_run(&c, dev, out, sat);
            double peak = channel_peak(out, c0, &other), got = 0;
            for (int p = 0; p < 2; p++)
                for (size_t sp = 0; sp < SPECTRA; sp++) {
                    int re, im;
                    out_value(out, p, sp, c0, &re, &im);
                    got += hypot(re, im) / (2.0 * SPECTRA);
                }
            printf("# %s alias tone onto channel %d: %.1f counts (mean; peak %.1f), expected %.1f, "
                   "report's bound "
                   "%.1f (suppression %.1f dB, this tone %.1f dB)\n", dev ? "GPU" : "CPU", c0,
                   got, peak, expect, bound, rep.alias_db, -20 * log10(H / rep.pass_min));
            assert_true(expect <= bound * (1 + 1e-6));
            /* The alias is the small remainder of sums whose terms are 10^4.6
             * times larger, so float32 rounding in the DDC (taps and
             * accumulation, near -130 dB of a term) leaves a few per cent on
             * each spectrum; the mean over 128 spectra keeps the rounding of
             * the 8-bit output (0.71) and about 1% of it. */
            assert_true(fabs(got - expect) <= 0.8 + 0.02 * expect);
            assert_true(peak <= bound + 0.8 + 0.1 * bound);
            free(out);
        }
        chain_free(&c);
    }
}

/* A 16-bit tone at the centre of channel c0 (an exact fraction of the
 * mixer grid, so its phase is exact at any timestamp): after gain G it must
 * read G (A/2) |H(delta)| sum(w) in channel c0 and next to nothing
 * elsewhere, where H is the DDC filter's response at the tone's offset
 * delta from the centre and sum(w) the PFB's response at a channel centre. */
static void tone_lands_in_its_channel(void **state)
{
    (void)state;
    const int chans[] = {N / 2, N / 2 - 37, N / 2 + 90, 3};
    const double A = 20000.0;
    for (size_t ci = 0; ci < sizeof chans / sizeof chans[0]; ci++) {
        int c0 = chans[ci];
        chain c;
        uint32_t mix = (uint32_t)(0.2 * 4294967296.0);
        chain_init(&c, 16, mix, (1ull << 43) + 12345);
        /* delta = (c0 - N/2) / (2 N S) cycles per sample = (c0 - N/2) 2^20 / 2^32. */
        put_tone(&c, mix + (uint32_t)((c0 - N / 2) * (1 << 20)), A);
        double delta = (c0 - N / 2) / (2.0 * N * S), sumw = 0;
        double complex H = ddc_response(&c, delta);
        for (int i = 0; i < STEP * TAPS; i++)
            sumw += c.w[i];
        /* The passband response lies within the ripple the design reports. */
        char msg[256];
        cbf_fd_report rep;
        assert_int_equal(cbf_fd_ddc_report(c.h, T_DDC, S, &rep, msg, sizeof msg), 0);
        assert_true(cabs(H) >= rep.pass_min * (1 - 1e-4) && cabs(H) <= rep.pass_max * (1 + 1e-4));
        double G = 100.0 / ((A / 2) * cabs(H) * sumw), expect = 100.0;
        set_gain(&c, G);
        for (int dev = 0; dev <= use_gpu; dev++) {
            uint8_t *out = malloc((size_t)SPECTRA * N * 4);
            uint64_t sat[2];
            chain_run(&c, dev, out, sat);
            double worst_other = 0, worst_err = 0;
            for (int p = 0; p < 2; p++)
                for (size_t sp = 0; sp < SPECTRA; sp++) {
                    int re, im;
                    out_value(out, p, sp, c0, &re, &im);
                    worst_err = fmax(worst_err, fabs(hypot(re, im) - expect));
                }
            channel_peak(out, c0, &worst_other);
            printf("# %s tone in channel %d: amplitude off by at most %.2f of %.0f, "
                   "largest other channel %.2f\n", dev ? "GPU" : "CPU", c0, worst_err, expect,
                   worst_other);
            /* Rounding of re and im (0.71) plus the float chain (< 0.1). */
            assert_true(worst_err <= 0.8);
            /* The PFB at a channel centre leaks nothing beyond rounding. */
            assert_true(worst_other <= 2.0);
            assert_int_equal(sat[0] + sat[1], 0);
            free(out);
        }
        chain_free(&c);
    }
}

static void bad_configs(void **state)
{
    (void)state;
    char msg[256];
    cbf_fft_post_config cfg = {N, 2, SPH, SPECTRA, 8, 1, 1};
    assert_int_equal(cbf_fft_post_config_check(&cfg, msg, sizeof msg), CBF_KERN_EINVAL);
    assert_non_null(strstr(msg, "unzip 1"));
    cfg.keep_all = 0;
    assert_int_equal(cbf_fft_post_config_check(&cfg, msg, sizeof msg), 0);
    cbf_fft_post_config wide_all = {N, 1, SPH, SPECTRA, 8, 0, 1};
    assert_int_equal(cbf_fft_post_config_check(&wide_all, msg, sizeof msg), CBF_KERN_EINVAL);
    assert_non_null(strstr(msg, "keep_all"));
    float buf[16];
    cbf_pfb_cjob j = {N, TAPS, {buf, buf}, 16, {0, 0}, 1, buf, 2 * STEP};
    assert_int_equal(cbf_pfb_cjob_check(&j, msg, sizeof msg), CBF_KERN_EINVAL);
    assert_non_null(strstr(msg, "windows need"));
    j.unzip = 3;
    assert_int_equal(cbf_pfb_cjob_check(&j, msg, sizeof msg), CBF_KERN_EINVAL);
    assert_non_null(strstr(msg, "unzip 3"));
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--gpu"))
            use_gpu = 1;
    char why[256];
    if (use_gpu && !cbf_test_gpu_available(why, sizeof why))
        return printf("skipped: %s\n", why), 77;
    rng_state = cbf_test_seed("CBF_TEST_SEED", use_gpu ? "test_narrowband --gpu (CPU and GPU)"
                                                       : "test_narrowband");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chain_against_reference),
        cmocka_unit_test(whole_band_chain_against_reference),
        cmocka_unit_test(unzip2_chain_against_reference),
        cmocka_unit_test(unzip4_chain_against_reference),
        cmocka_unit_test(fir_unzip_against_cpu),
        cmocka_unit_test(tone_lands_in_its_channel),
        cmocka_unit_test(alias_suppressed_as_reported),
        cmocka_unit_test(bad_configs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
