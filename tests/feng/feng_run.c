/* feng_run.c: see feng_run.h. */
#include "feng_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fft_post.h"
#include "feng_ref.h"
#include "pfb.h"
#ifdef CBF_HAVE_CUDA
#include <cuda_runtime.h>
#endif

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

void feng_seed(uint64_t seed) { rng_state = seed ? seed : 1; }

uint64_t feng_rand(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

double feng_uniform(void) { return (double)(feng_rand() >> 11) * 0x1p-53; }

double feng_normal(void)
{
    double u = feng_uniform(), v = feng_uniform();
    return sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * v);
}

void feng_case_random(feng_case *c, int channels, int taps, int bits, int unzip, int sph,
                      int batches, float *weights_out)
{
    memset(c, 0, sizeof(*c));
    c->channels = channels;
    c->taps = taps;
    c->bits = bits;
    c->unzip = unzip;
    c->spectra_per_heap = sph;
    c->batches = batches;
    c->out_bits = 8;
    size_t step = 2 * (size_t)channels, spectra = (size_t)sph * batches;
    c->in_samples = (spectra + (size_t)taps - 1) * step;
    for (int p = 0; p < 2; p++) {
        size_t bytes = cbf_packed_bytes(c->in_samples, bits);
        c->in[p] = malloc(bytes);
        for (size_t i = 0; i < bytes; i++)
            c->in[p][i] = (uint8_t)feng_rand();
    }
    float *g = malloc(sizeof(float) * 4 * (size_t)channels);
    for (int i = 0; i < 2 * channels; i++) {
        g[2 * i] = 1.0f;
        g[2 * i + 1] = 0.0f;
    }
    c->gains = g;
    if (weights_out) {
        char msg[256];
        cbf_pfb_weights(channels, taps, 1.0, CBF_PFB_HANN, weights_out, msg, sizeof msg);
        c->weights = weights_out;
    }
}

void feng_case_free_input(feng_case *c)
{
    free(c->in[0]);
    free(c->in[1]);
    free((void *)c->gains);
    c->in[0] = c->in[1] = NULL;
    c->gains = NULL;
}

void feng_result_free(feng_result *r)
{
    free(r->fir);
    free(r->out);
    memset(r, 0, sizeof(*r));
}

int feng_have_gpu(void)
{
#ifdef CBF_HAVE_CUDA
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
    return 0;
#endif
}

static void fill_configs(const feng_case *c, cbf_pfb_job *job, cbf_fft_post_config *cfg)
{
    size_t spectra = (size_t)c->spectra_per_heap * c->batches;
    memset(job, 0, sizeof(*job));
    job->channels = c->channels;
    job->taps = c->taps;
    job->bits = c->bits;
    job->unzip = c->unzip;
    job->in_samples = c->in_samples;
    job->start[0] = c->start[0];
    job->start[1] = c->start[1];
    job->spectra = spectra;
    job->out_pol_stride = spectra * 2 * (size_t)c->channels;
    memset(cfg, 0, sizeof(*cfg));
    cfg->channels = c->channels;
    cfg->unzip = c->unzip;
    cfg->spectra_per_heap = c->spectra_per_heap;
    cfg->spectra = spectra;
    cfg->out_bits = c->out_bits;
    cfg->dither = c->dither;
    cfg->dither_key = c->dither_key;
    cfg->dither_antenna = c->dither_antenna;
    cfg->fft = c->fft;
}

typedef int (*fir_call)(void *ctx, const cbf_pfb_job *job, char *msg, size_t msglen);

/* Runs the FIR as the plugin does across chunk boundaries: in pieces, each
 * reading from a byte-aligned offset of the input (a multiple of 8 samples
 * is a whole number of bytes at every width). */
static int fir_pieces(const feng_case *c, const cbf_pfb_job *whole, uint8_t *const in[2],
                      fir_call call, void *ctx, char *msg, size_t msglen)
{
    size_t split = c->fir_split ? c->fir_split : whole->spectra, step = 2 * (size_t)c->channels;
    for (size_t a = 0; a < whole->spectra; a += split) {
        cbf_pfb_job job = *whole;
        job.spectra = a + split > whole->spectra ? whole->spectra - a : split;
        job.out = whole->out + a * step;
        /* One skip for both pols: in_samples is shared. */
        size_t first0 = (size_t)whole->start[0] + a * step, first1 = (size_t)whole->start[1] + a * step;
        size_t skip = (first0 < first1 ? first0 : first1) / 8 * 8;
        job.in_samples = whole->in_samples - skip;
        for (int p = 0; p < 2; p++) {
            job.in[p] = in[p] + skip * (size_t)c->bits / 8;
            job.start[p] = (int64_t)((p ? first1 : first0) - skip);
        }
        int rc = call(ctx, &job, msg, msglen);
        if (rc)
            return rc;
    }
    return 0;
}

struct cpu_ctx {
    const float *weights;
    uint64_t *power;
};

static int cpu_fir(void *ctx, const cbf_pfb_job *job, char *msg, size_t msglen)
{
    struct cpu_ctx *x = ctx;
    return cbf_pfb_fir_cpu(job, x->weights, x->power, msg, msglen);
}

static int run_cpu(const feng_case *c, feng_result *r, char *msg, size_t msglen)
{
    cbf_pfb_job job;
    cbf_fft_post_config cfg;
    fill_configs(c, &job, &cfg);
    size_t floats = 2 * job.out_pol_stride;
    float *data = malloc(floats * sizeof(float));
    memset(data, 0xff, floats * sizeof(float));
    job.out = data;
    struct cpu_ctx ctx = {c->weights, r->power};
    int rc = fir_pieces(c, &job, c->in, cpu_fir, &ctx, msg, msglen);
    if (!rc) {
        memcpy(r->fir, data, floats * sizeof(float));
        cbf_fft_post_cpu *plan = NULL;
        rc = cbf_fft_post_cpu_create(&cfg, &plan, msg, msglen);
        if (!rc) {
            cbf_fft_post_cpu_set_gains(plan, c->gains);
            if (c->switch_gains)
                cbf_fft_post_cpu_set_next_gains(plan, c->next_gains);
            cbf_fft_post_args a = {data, job.out_pol_stride, r->out,
                                   {c->fine_delay[0], c->fine_delay[1]},
                                   {c->phase[0], c->phase[1]},
                                   c->spectrum_delay, c->switch_gains, c->gain_switch,
                                   c->first_spectrum};
            rc = cbf_fft_post_cpu_run(plan, &a, r->saturated, msg, msglen);
        }
        cbf_fft_post_cpu_destroy(plan);
    }
    free(data);
    return rc;
}

#ifdef CBF_HAVE_CUDA
#define TRY(call)                                                                         \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            snprintf(msg, msglen, "%s: %s", #call, cudaGetErrorString(e_));               \
            rc = -6;                                                                      \
            goto out;                                                                     \
        }                                                                                 \
    } while (0)

struct gpu_ctx {
    cbf_pfb_cuda *plan;
    cudaStream_t stream;
};

static int gpu_fir(void *ctx, const cbf_pfb_job *job, char *msg, size_t msglen)
{
    struct gpu_ctx *x = ctx;
    return cbf_pfb_cuda_run(x->plan, job, x->stream, msg, msglen);
}

static int run_gpu(const feng_case *c, feng_result *r, char *msg, size_t msglen)
{
    cbf_pfb_job job;
    cbf_fft_post_config cfg;
    fill_configs(c, &job, &cfg);
    size_t floats = 2 * job.out_pol_stride, in_bytes = cbf_packed_bytes(c->in_samples, c->bits);
    uint8_t *d_in[2] = {NULL, NULL}, *d_out = NULL;
    float *d_data = NULL;
    cbf_pfb_cuda *pfb = NULL;
    cbf_fft_post_cuda *post = NULL;
    cudaStream_t stream = NULL;
    int rc = 0;
    TRY(cudaStreamCreate(&stream));
    for (int p = 0; p < 2; p++) {
        TRY(cudaMalloc((void **)&d_in[p], in_bytes));
        TRY(cudaMemcpy(d_in[p], c->in[p], in_bytes, cudaMemcpyHostToDevice));
    }
    TRY(cudaMalloc((void **)&d_data, floats * sizeof(float)));
    TRY(cudaMemset(d_data, 0xff, floats * sizeof(float)));
    TRY(cudaMalloc((void **)&d_out, r->out_bytes));
    TRY(cudaMemset(d_out, 0x88, r->out_bytes));
    if ((rc = cbf_pfb_cuda_create(c->channels, c->taps, c->weights, &pfb, msg, msglen)))
        goto out;
    job.out = d_data;
    struct gpu_ctx ctx = {pfb, stream};
    if ((rc = fir_pieces(c, &job, d_in, gpu_fir, &ctx, msg, msglen)) ||
        (rc = cbf_pfb_cuda_power(pfb, stream, r->power, msg, msglen)))
        goto out;
    TRY(cudaMemcpy(r->fir, d_data, floats * sizeof(float), cudaMemcpyDeviceToHost));
    if ((rc = cbf_fft_post_cuda_create(&cfg, stream, &post, msg, msglen)) ||
        (rc = cbf_fft_post_cuda_set_gains(post, c->gains, msg, msglen)) ||
        (c->switch_gains && (rc = cbf_fft_post_cuda_set_next_gains(post, c->next_gains, msg, msglen))))
        goto out;
    cbf_fft_post_args a = {d_data, job.out_pol_stride, d_out,
                           {c->fine_delay[0], c->fine_delay[1]}, {c->phase[0], c->phase[1]},
                           c->spectrum_delay, c->switch_gains, c->gain_switch,
                           c->first_spectrum};
    if ((rc = cbf_fft_post_cuda_run(post, &a, msg, msglen)) ||
        (rc = cbf_fft_post_cuda_saturated(post, r->saturated, msg, msglen)))
        goto out;
    TRY(cudaMemcpy(r->out, d_out, r->out_bytes, cudaMemcpyDeviceToHost));
out:
    cbf_fft_post_cuda_destroy(post);
    cbf_pfb_cuda_destroy(pfb);
    cudaFree(d_in[0]);
    cudaFree(d_in[1]);
    cudaFree(d_data);
    cudaFree(d_out);
    if (stream)
        cudaStreamDestroy(stream);
    return rc;
}
#endif

#ifdef CBF_HAVE_CUDA
static int post_only_gpu(const cbf_fft_post_config *cfg, float *fir, size_t pol_stride,
                         const float *gains, uint64_t first_spectrum, uint8_t *out, char *msg,
                         size_t msglen)
{
    const size_t bytes = cbf_fft_post_out_bytes(cfg);
    float *d_fir = NULL;
    uint8_t *d_out = NULL;
    cbf_fft_post_cuda *post = NULL;
    cudaStream_t stream = NULL;
    int rc = 0;
    TRY(cudaStreamCreate(&stream));
    TRY(cudaMalloc((void **)&d_fir, 2 * pol_stride * sizeof(float)));
    TRY(cudaMemcpy(d_fir, fir, 2 * pol_stride * sizeof(float), cudaMemcpyHostToDevice));
    TRY(cudaMalloc((void **)&d_out, bytes));
    TRY(cudaMemset(d_out, 0x88, bytes));
    if ((rc = cbf_fft_post_cuda_create(cfg, stream, &post, msg, msglen)) ||
        (rc = cbf_fft_post_cuda_set_gains(post, gains, msg, msglen)))
        goto out;
    cbf_fft_post_args a = {d_fir, pol_stride, d_out, {0, 0}, {0, 0}, NULL, 0, 0, first_spectrum};
    if ((rc = cbf_fft_post_cuda_run(post, &a, msg, msglen)))
        goto out;
    TRY(cudaMemcpy(out, d_out, bytes, cudaMemcpyDeviceToHost));
out:
    cbf_fft_post_cuda_destroy(post);
    cudaFree(d_fir);
    cudaFree(d_out);
    if (stream)
        cudaStreamDestroy(stream);
    return rc;
}
#endif

int feng_post_only(int gpu, const cbf_fft_post_config *cfg, const float *fir, const float *gains,
                   uint64_t first_spectrum, uint8_t *out, char *msg, size_t msglen)
{
    const size_t pol_stride = cfg->spectra * cbf_fft_post_row_floats(cfg);
    float *data = malloc(2 * pol_stride * sizeof(float));
    if (!data) {
        snprintf(msg, msglen, "out of memory");
        return -1;
    }
    memcpy(data, fir, 2 * pol_stride * sizeof(float));
    memset(out, 0x88, cbf_fft_post_out_bytes(cfg));
    int rc = 0;
    if (gpu) {
#ifdef CBF_HAVE_CUDA
        rc = post_only_gpu(cfg, data, pol_stride, gains, first_spectrum, out, msg, msglen);
#else
        snprintf(msg, msglen, "built without CUDA");
        rc = -5;
#endif
    } else {
        cbf_fft_post_cpu *plan = NULL;
        rc = cbf_fft_post_cpu_create(cfg, &plan, msg, msglen);
        if (!rc) {
            cbf_fft_post_cpu_set_gains(plan, gains);
            cbf_fft_post_args a = {data, pol_stride, out, {0, 0}, {0, 0}, NULL, 0, 0,
                                   first_spectrum};
            uint64_t sat[2];
            rc = cbf_fft_post_cpu_run(plan, &a, sat, msg, msglen);
        }
        cbf_fft_post_cpu_destroy(plan);
    }
    free(data);
    return rc;
}

int feng_run(int gpu, const feng_case *c, feng_result *r, char *msg, size_t msglen)
{
    memset(r, 0, sizeof(*r));
    size_t spectra = (size_t)c->spectra_per_heap * c->batches;
    size_t floats = 2 * spectra * 2 * (size_t)c->channels;
    r->out_bytes = spectra * (size_t)c->channels * 2 * (c->out_bits == 8 ? 2 : 1);
    r->fir = malloc(floats * sizeof(float));
    r->out = malloc(r->out_bytes);
    memset(r->out, 0x88, r->out_bytes);
    if (!gpu)
        return run_cpu(c, r, msg, msglen);
#ifdef CBF_HAVE_CUDA
    return run_gpu(c, r, msg, msglen);
#else
    snprintf(msg, msglen, "built without CUDA");
    return -5;
#endif
}
