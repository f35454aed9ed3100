/* fft_post_cpu.c: FFTW transforms, then the post-processing of fft_post.h
 * written plainly, one (pol, spectrum, s) at a time. */
#include "fft_post.h"
#include "fft_post_dither.h"

#include <complex.h>
#include <fftw3.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cbf_fft_post_cpu {
    cbf_fft_post_config cfg;
    fftwf_plan plan;          /* one in-place transform of m points */
    float complex *gains[2];  /* [channel][pol]: in force, and the next ones */
    float complex *twiddle;   /* [r][s]: exp(-2 pi i r s / channels), s < m */
    float complex *half;      /* [k]: exp(-pi i k / channels), k < channels */
    float complex *rot;       /* [k][pol]: this run's exp(i (-2 pi d (k - N/2) / M + phi)) */
};

/* FFTW's planner is one per process and not thread-safe: plans are made
 * and destroyed under one lock (engines in one process initialise on their
 * own threads), and when the last plan goes, fftwf_cleanup() frees the
 * planner's own memory, which valgrind otherwise reports as lost at exit.
 * fft_post is FFTW's only user in cbf, so no other plan can be alive then. */
static pthread_mutex_t fftw_lock = PTHREAD_MUTEX_INITIALIZER;
static int fftw_plans;

int cbf_fft_post_cpu_create(const cbf_fft_post_config *cfg, cbf_fft_post_cpu **out, char *msg,
                            size_t msglen)
{
    int rc = cbf_fft_post_config_check(cfg, msg, msglen);
    if (rc)
        return rc;
    const int N = cfg->channels, n = cfg->unzip;
    const int m = (cfg->complex_in ? (int)cbf_fft_post_spectrum_samples(cfg) : N) / n;
    cbf_fft_post_cpu *p = calloc(1, sizeof(*p));
    fftwf_complex *scratch = fftwf_alloc_complex((size_t)m);
    if (p) {
        p->cfg = *cfg;
        p->gains[0] = malloc(sizeof(float complex) * 2 * (size_t)N);
        p->gains[1] = malloc(sizeof(float complex) * 2 * (size_t)N);
        p->twiddle = malloc(sizeof(float complex) * (size_t)N);
        p->half = malloc(sizeof(float complex) * (size_t)N);
        p->rot = malloc(sizeof(float complex) * 2 * (size_t)N);
    }
    if (!p || !scratch || !p->gains[0] || !p->gains[1] || !p->twiddle || !p->half || !p->rot) {
        fftwf_free(scratch);
        cbf_fft_post_cpu_destroy(p);
        return cbf_kern_fail(msg, msglen, CBF_KERN_ENOMEM,
                             "fft_post: out of memory for a %d-channel plan", N);
    }
    /* UNALIGNED: buffers come from pools, not from fftwf_malloc. */
    pthread_mutex_lock(&fftw_lock);
    p->plan = fftwf_plan_dft_1d(m, scratch, scratch, FFTW_FORWARD,
                                FFTW_ESTIMATE | FFTW_UNALIGNED);
    fftw_plans += p->plan != NULL;
    pthread_mutex_unlock(&fftw_lock);
    fftwf_free(scratch);
    if (!p->plan) {
        cbf_fft_post_cpu_destroy(p);
        return cbf_kern_fail(msg, msglen, CBF_KERN_ENOMEM,
                             "fft_post: FFTW could not plan a %d-point transform", m);
    }
    for (int i = 0; i < 2 * N; i++)
        p->gains[0][i] = p->gains[1][i] = 1.0f;
    for (int r = 0; r < n && !cfg->complex_in; r++)
        for (int s = 0; s < m; s++) {
            double a = -2.0 * M_PI * r * s / N;
            p->twiddle[r * m + s] = (float)cos(a) + I * (float)sin(a);
        }
    for (int k = 0; k < N; k++) {
        double a = -M_PI * k / N;
        p->half[k] = (float)cos(a) + I * (float)sin(a);
    }
    *out = p;
    return 0;
}

int cbf_fft_post_cpu_set_next_gains(cbf_fft_post_cpu *plan, const float *gains)
{
    for (int i = 0; i < 2 * plan->cfg.channels; i++)
        plan->gains[1][i] = gains[2 * i] + I * gains[2 * i + 1];
    return 0;
}

int cbf_fft_post_cpu_set_gains(cbf_fft_post_cpu *plan, const float *gains)
{
    cbf_fft_post_cpu_set_next_gains(plan, gains);
    memcpy(plan->gains[0], plan->gains[1], sizeof(float complex) * 2 * (size_t)plan->cfg.channels);
    return 0;
}

/* Round half to even and saturate symmetrically; returns 1 when clipped
 * (|v| at lim + 1/2 or above rounds past lim, lim being odd). NaN counts
 * as clipped and gives -lim, as the GPU's clamp-then-round does
 * (fft_post_dev.cuh). */
static int quant(float v, int lim, int *q)
{
    const float l = (float)lim;
    *q = (int)rintf(fminf(fmaxf(v, -l), l));
    return !(fabsf(v) < l + 0.5f);
}

static void emit(const cbf_fft_post_cpu *p, const cbf_fft_post_args *a, int pol, size_t sp,
                 int k, float complex x, uint64_t *sat)
{
    const int N = p->cfg.channels, sph = p->cfg.spectra_per_heap;
    x *= p->rot[2 * k + pol];
    if (a->spectrum_delay) {
        const float *dp = a->spectrum_delay + 2 * ((size_t)pol * p->cfg.spectra + sp);
        double M = (double)cbf_fft_post_spectrum_samples(&p->cfg);
        double ang = -2 * M_PI * (double)dp[0] * (k - N / 2) / M + (double)dp[1];
        x *= (float)cos(ang) + I * (float)sin(ang);
    }
    x *= p->gains[a->switch_gains && sp >= a->gain_switch][2 * k + pol];
    float xr = crealf(x), xi = cimagf(x);
    if (p->cfg.dither) {
        /* The draw of k's pair {k, N - k}, recomputed per value: the CPU
         * path is not where the hashing costs. */
        const uint64_t u = cbf_fft_post_dither_draw(
            p->cfg.dither_key, a->first_spectrum + sp, (uint64_t)N,
            cbf_fft_post_dither_pair((uint64_t)N, (uint64_t)k), pol,
            (uint64_t)p->cfg.dither_antenna);
        cbf_fft_post_dither_add(cbf_fft_post_dither_bits(u, (uint64_t)N, (uint64_t)k), &xr, &xi);
    }
    int re, im, lim = p->cfg.out_bits == 8 ? 127 : 7;
    int clipped = quant(xr, lim, &re);
    clipped |= quant(xi, lim, &im);
    *sat += (uint64_t)clipped;
    size_t b = sp / (size_t)sph, t = sp % (size_t)sph;
    size_t idx = ((b * (size_t)N + (size_t)k) * (size_t)sph + t) * 2 + (size_t)pol;
    if (p->cfg.out_bits == 8) {
        int8_t *o = (int8_t *)a->out + 2 * idx;
        o[0] = (int8_t)re;
        o[1] = (int8_t)im;
    } else {
        ((uint8_t *)a->out)[idx] = (uint8_t)(((unsigned)re & 15u) << 4 | ((unsigned)im & 15u));
    }
}

/* One spectrum: the last Cooley-Tukey stage gives Z_k and conj(Z_-k) from
 * the n sub-transforms; U = (Z + conj Z')/2 and V = (Z - conj Z')/2i are the
 * transforms of the even and odd samples; X_k = U_k + e^(-i pi k/N) V_k. */
static void post_spectrum(const cbf_fft_post_cpu *p, const cbf_fft_post_args *a, int pol,
                          size_t sp, const float complex *z, uint64_t *sat)
{
    const int N = p->cfg.channels, n = p->cfg.unzip, m = N / n;
    for (int s = 0; s <= m / 2; s++) {
        float complex zs[4], zc[4];
        for (int r = 0; r < n; r++) {
            float complex tw = p->twiddle[r * m + s];
            zs[r] = tw * z[r * m + s];
            zc[r] = tw * conjf(z[r * m + ((m - s) & (m - 1))]);
        }
        for (int pp = 0; pp < n; pp++) {
            float complex A = 0, B = 0;
            for (int r = 0; r < n; r++) {
                /* exp(-2 pi i r pp / n) for n <= 4 is a power of -i. */
                int e = (r * pp) % n * (4 / n);
                float complex w = e == 0 ? 1 : e == 1 ? -I : e == 2 ? -1 : I;
                A += w * zs[r];
                B += w * zc[r];
            }
            int k = pp * m + s;
            float complex U = 0.5f * (A + B), V = -0.5f * I * (A - B);
            float complex tv = p->half[k] * V;
            emit(p, a, pol, sp, k, U + tv, sat);
            if (s > 0 && s < m / 2)
                emit(p, a, pol, sp, N - k, conjf(U) - conjf(tv), sat);
        }
    }
}

/* Narrowband: bins [-N/2, N/2) of the M-point transform (M = 2N, or N
 * keeping the whole band), channel c from bin c - N/2 (mod M), so channel
 * 0 is the lowest frequency. */
static void post_complex_spectrum(const cbf_fft_post_cpu *p, const cbf_fft_post_args *a,
                                  int pol, size_t sp, const float complex *z, uint64_t *sat)
{
    const int N = p->cfg.channels, M = (int)cbf_fft_post_spectrum_samples(&p->cfg);
    const int n = p->cfg.unzip, m = M / n;
    for (int c = 0; c < N; c++) {
        int k = (c + M - N / 2) & (M - 1); /* bin n (k / n) + k % n of the unzipped halves */
        emit(p, a, pol, sp, c, z[(k % n) * m + k / n], sat);
    }
}

int cbf_fft_post_cpu_run(cbf_fft_post_cpu *plan, const cbf_fft_post_args *args,
                         uint64_t saturated[2], char *msg, size_t msglen)
{
    const cbf_fft_post_config *c = &plan->cfg;
    const size_t row = cbf_fft_post_row_floats(c);
    const size_t m = (c->complex_in ? row / 2 : (size_t)c->channels) / (size_t)c->unzip;
    if (args->data_pol_stride < c->spectra * row) {
        return cbf_kern_fail(msg, msglen, CBF_KERN_EINVAL,
                             "fft_post: data_pol_stride %zu < spectra x %zu floats",
                             args->data_pol_stride, c->spectra * row);
    }
    /* Delay and phase are fixed for a run: one rotation per channel. The
     * delay turns nothing at the band centre, channel channels / 2. */
    const double M = (double)cbf_fft_post_spectrum_samples(c);
    for (int k = 0; k < c->channels; k++)
        for (int pol = 0; pol < 2; pol++) {
            double kk = k - c->channels / 2;
            double ang = -2 * M_PI * (double)args->fine_delay[pol] * kk / M + args->phase[pol];
            plan->rot[2 * k + pol] = (float)cos(ang) + I * (float)sin(ang);
        }
    for (int pol = 0; pol < 2; pol++) {
        saturated[pol] = 0;
        for (size_t sp = 0; sp < c->spectra; sp++) {
            float *d = args->data + (size_t)pol * args->data_pol_stride + sp * row;
            for (int r = 0; r < c->unzip; r++) {
                fftwf_complex *v = (fftwf_complex *)d + (size_t)r * m;
                fftwf_execute_dft(plan->plan, v, v);
            }
            if (c->complex_in)
                post_complex_spectrum(plan, args, pol, sp, (const float complex *)d,
                                      &saturated[pol]);
            else
                post_spectrum(plan, args, pol, sp, (const float complex *)d, &saturated[pol]);
        }
    }
    if (args->switch_gains) {
        float complex *t = plan->gains[0];
        plan->gains[0] = plan->gains[1];
        plan->gains[1] = t;
    }
    return 0;
}

void cbf_fft_post_cpu_destroy(cbf_fft_post_cpu *plan)
{
    if (!plan)
        return;
    if (plan->plan) {
        pthread_mutex_lock(&fftw_lock);
        fftwf_destroy_plan(plan->plan);
        if (--fftw_plans == 0)
            fftwf_cleanup();
        pthread_mutex_unlock(&fftw_lock);
    }
    free(plan->gains[0]);
    free(plan->gains[1]);
    free(plan->twiddle);
    free(plan->half);
    free(plan->rot);
    free(plan);
}
