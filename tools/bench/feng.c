/* cbf-bench feng: the wideband F-engine kernels on the GPU, each alone and
 * chained, against the bandwidth bound of this four-pass design; where
 * fft_post's fused cuFFTDx kernel runs the shape (fft_post.h, cfg.fft), the
 * fused chain too (FIR, then FFT + post in one kernel: bytes in/8 + 4 + 4
 * + 1 per sample), each chain also against the four-pass bound.
 *
 * Bytes per input sample (10-bit in, 8-bit out): the FIR reads bits/8 and
 * writes 4 (float32); cuFFT reads and writes 4 in place; post-processing
 * reads 4 and writes 1 (two int8 per complex channel, one channel per two
 * samples). The bound is the device-to-device copy rate measured in the same
 * run (bytes read + written) divided by those bytes. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fft_post.h"
#include "pfb.h"

#include <cuda_runtime.h>

#include "gpu_time.h"
#include "opts.h"
#ifdef CBF_BENCH_FENG_DX
#include "fft_dx.h"
#include "feng_dx.h"
#endif

#define MEERKAT_ANT_RATE (2 * 1712e6) /* samples/s of one L-band antenna, both pols */

typedef struct opts {
    int channels[8], n_channels, taps, bits, reps, unzip, dx, fused, variants, dither;
    size_t samples; /* per pol per run */
} opts;

#define CK(call) CBF_BENCH_CK("feng", call)

typedef struct chain {
    cudaStream_t stream;
    cbf_pfb_cuda *pfb;
    cbf_fft_post_cuda *post, *fused; /* four-pass and fused plans (fused: NULL if none) */
    cbf_pfb_job job;
    cbf_fft_post_args args;
    void *src, *dst; /* copy ceiling */
    size_t copy_bytes;
} chain;

static int report(const char *what, int rc, const char *msg)
{
    if (rc)
        fprintf(stderr, "cbf-bench feng: %s: %s\n", what, msg);
    return rc;
}

static int do_pfb(void *ctx)
{
    chain *c = ctx;
    char msg[256];
    return report("pfb", cbf_pfb_cuda_run(c->pfb, &c->job, c->stream, msg, sizeof msg), msg);
}
static int do_fft(void *ctx)
{
    chain *c = ctx;
    char msg[256];
    return report("fft", cbf_fft_post_cuda_fft(c->post, &c->args, msg, sizeof msg), msg);
}
static int do_post(void *ctx)
{
    chain *c = ctx;
    char msg[256];
    return report("post", cbf_fft_post_cuda_post(c->post, &c->args, msg, sizeof msg), msg);
}
static int do_chain(void *ctx)
{
    return do_pfb(ctx) || do_fft(ctx) || do_post(ctx);
}
static int do_fused(void *ctx)
{
    chain *c = ctx;
    char msg[256];
    return report("fused", cbf_fft_post_cuda_run(c->fused, &c->args, msg, sizeof msg), msg);
}
static int do_fused_chain(void *ctx)
{
    return do_pfb(ctx) || do_fused(ctx);
}
static int do_copy(void *ctx)
{
    chain *c = ctx;
    CK(cudaMemcpyAsync(c->dst, c->src, c->copy_bytes, cudaMemcpyDeviceToDevice, c->stream));
    return 0;
}

/* four_pass: the four-pass chain's bytes per sample for a chain's last
 * column (0: not a chain, left blank). */
static void row(const char *name, int channels, float ms, double samples, double bytes_per,
                double copy_rate, double four_pass)
{
    double rate = samples / (ms * 1e-3);
    double bound = copy_rate / bytes_per;
    printf("| %-6d | %-5s | %9.3f | %8.1f | %7.1f | %8.1f | %5.0f%% |", channels, name, ms,
           rate / 1e9, rate / MEERKAT_ANT_RATE, bound / 1e9, 100.0 * rate / bound);
    if (four_pass > 0)
        printf(" %5.0f%% |\n", 100.0 * rate / (copy_rate / four_pass));
    else
        printf(" |\n");
}

/* The output of one run of `run` (after which the stream is waited for). */
static int one_output(int (*run)(void *), void *ctx, cudaStream_t stream, void *d_out,
                      uint8_t *host, size_t bytes)
{
    CK(cudaMemsetAsync(d_out, 0x88, bytes, stream));
    if (run(ctx))
        return 1;
    CK(cudaMemcpyAsync(host, d_out, bytes, cudaMemcpyDeviceToHost, stream));
    CK(cudaStreamSynchronize(stream));
    return 0;
}

#ifdef CBF_BENCH_FENG_DX
/* The fused kernel's measured layouts, each alone (no delay model, no
 * dither), on the FIR output in c->args: rows "dx gG h|s pf|- bB" (G
 * spectra per block, pol 0's values held in registers or combined in
 * shared memory, next spectrum prefetched or not, B blocks per SM asked
 * for). */
typedef struct dx_variant_ctx {
    chain *c;
    cbf_fft_dx_post p;
} dx_variant_ctx;
static int do_dx_variant(void *ctx)
{
    dx_variant_ctx *x = ctx;
    char msg[256];
    return report("dx variant", cbf_fft_dx_post_run(&x->p, x->c->stream, msg, sizeof msg), msg);
}
static int bench_dx_variants(chain *c, const cbf_fft_post_config *cfg, int reps, double samples,
                             double copy_rate)
{
    const cbf_fft_dx_post_variant *v;
    int n = cbf_fft_dx_post_variants(&v);
    void *eff;
    unsigned long long *sat;
    const size_t eff_bytes = sizeof(float) * 8 * (size_t)cfg->channels;
    /* The benchmark's gains (0.05 + 0.01i) in both tables, no delay. */
    float *host = malloc(eff_bytes);
    if (!host)
        return 1;
    for (size_t i = 0; i < eff_bytes / sizeof(float); i += 2) {
        host[i] = 0.05f;
        host[i + 1] = 0.01f;
    }
    CK(cudaMalloc(&eff, eff_bytes));
    CK(cudaMemcpy(eff, host, eff_bytes, cudaMemcpyHostToDevice));
    free(host);
    CK(cudaMalloc((void **)&sat, 2 * sizeof(unsigned long long)));
    dx_variant_ctx x = {c, {c->args.data, c->args.data_pol_stride, c->args.out, cfg->channels,
                            cfg->spectra_per_heap, cfg->out_bits, cfg->spectra, eff, NULL,
                            LLONG_MAX, sat, 0, 0, 0, 0, 0}};
    /* Every layout computes the same bytes: each against the engine's. */
    const size_t bytes = cbf_fft_post_out_bytes(cfg);
    uint8_t *ref = malloc(bytes), *got = malloc(bytes);
    x.p.variant = -1;
    int rc = !ref || !got || one_output(do_dx_variant, &x, c->stream, c->args.out, ref, bytes);
    for (int i = 0; i < n && !rc; i++) {
        if (v[i].points != cfg->channels || cfg->spectra_per_heap % v[i].group)
            continue;
        x.p.variant = i;
        float t;
        char name[32];
        snprintf(name, sizeof name, "dx g%d %s %s b%d", v[i].group, v[i].hold ? "h" : "s",
                 v[i].prefetch ? "pf" : "-", v[i].min_blocks);
        rc = cbf_bench_time_ms(do_dx_variant, &x, c->stream, reps, &t) ||
             one_output(do_dx_variant, &x, c->stream, c->args.out, got, bytes);
        if (rc)
            break;
        row(name, cfg->channels, t, samples, 4 + 1, copy_rate, 0);
        size_t differ = 0;
        for (size_t k = 0; k < bytes; k++)
            differ += ref[k] != got[k];
        fprintf(stderr, "# %d channels, %s: %zu of %zu bytes differ from the engine's kernel\n",
                cfg->channels, name, differ, bytes);
    }
    free(ref);
    free(got);
    cudaFree(eff);
    cudaFree(sat);
    return rc;
}
#endif

static int bench_one(const opts *o, int channels, double copy_rate, chain *c)
{
    char msg[512];
    const size_t step = 2 * (size_t)channels, sph = 256;
    size_t spectra = o->samples / step / sph * sph;
    if (spectra < sph)
        spectra = sph;
    const int unzip = o->unzip ? o->unzip : cbf_pfb_auto_unzip(channels);
    const size_t in_samples = (spectra + (size_t)o->taps - 1) * step;
    const size_t in_bytes = cbf_packed_bytes(in_samples, o->bits);
    float *weights = malloc(sizeof(float) * step * (size_t)o->taps);
    uint8_t *host = malloc(in_bytes);
    uint8_t *d_in[2];
    float *d_data;
    void *d_out;
    cbf_fft_post_config cfg = {channels, unzip, (int)sph, spectra, 8, 0};
    cfg.dither = o->dither; /* the plugin's default is on; the table's runs are without */
    cfg.fft = CBF_FFT_POST_FFT_CUFFT; /* the four-pass plan, whatever auto would take */
    size_t out_bytes = cbf_fft_post_out_bytes(&cfg);
    if (!weights || !host)
        return 1;
    if (report("weights", cbf_pfb_weights(channels, o->taps, 1.0, CBF_PFB_HANN, weights, msg,
                                          sizeof msg), msg))
        return 1;
    for (int p = 0; p < 2; p++) {
        CK(cudaMalloc((void **)&d_in[p], in_bytes));
        cbf_bench_random_bytes(host, in_bytes, 0x1234567ull + (uint64_t)p * 77 + (uint64_t)channels);
        CK(cudaMemcpy(d_in[p], host, in_bytes, cudaMemcpyHostToDevice));
    }
    CK(cudaMalloc((void **)&d_data, 2 * spectra * step * sizeof(float)));
    CK(cudaMalloc(&d_out, out_bytes));
    if (report("pfb plan", cbf_pfb_cuda_create(channels, o->taps, weights, &c->pfb, msg,
                                               sizeof msg), msg) ||
        report("fft_post plan", cbf_fft_post_cuda_create(&cfg, c->stream, &c->post, msg,
                                                         sizeof msg), msg))
        return 1;
    memset(&c->job, 0, sizeof c->job);
    c->job = (cbf_pfb_job){channels, o->taps, o->bits, unzip, {d_in[0], d_in[1]}, in_samples,
                           {0, 0}, spectra, d_data, spectra * step};
    c->args = (cbf_fft_post_args){d_data, spectra * step, d_out, {0.1f, -0.2f}, {0.3f, 0.5f},
                                  NULL, 0, 0};
    /* Gains that keep most outputs inside int8, as an observation would. */
    float *g = malloc(sizeof(float) * 4 * (size_t)channels);
    for (int i = 0; i < 2 * channels; i++) {
        g[2 * i] = 0.05f;
        g[2 * i + 1] = 0.01f;
    }
    if (report("gains", cbf_fft_post_cuda_set_gains(c->post, g, msg, sizeof msg), msg))
        return 1;
    /* The fused plan where the kernel runs this shape (fft: cufftdx). */
    cbf_fft_post_config fcfg = cfg;
    fcfg.fft = CBF_FFT_POST_FFT_CUFFTDX;
    char why[256] = "";
    c->fused = NULL;
    if (o->fused && !cbf_fft_post_cuda_fused_check(&fcfg, why, sizeof why)) {
        if (report("fused plan", cbf_fft_post_cuda_create(&fcfg, c->stream, &c->fused, msg,
                                                          sizeof msg), msg) ||
            report("gains", cbf_fft_post_cuda_set_gains(c->fused, g, msg, sizeof msg), msg))
            return 1;
    } else if (o->fused) {
        fprintf(stderr, "# %d channels: no fused chain: %s\n", channels, why);
    }
    free(g);
    float t_pfb, t_fft, t_post, t_chain, t_fused = 0, t_fchain = 0;
    if (cbf_bench_time_ms(do_pfb, c, c->stream, o->reps, &t_pfb) ||
        cbf_bench_time_ms(do_fft, c, c->stream, o->reps, &t_fft) ||
        /* post on a spectrum as the chain gives it: fft's repeats in place
         * have grown the data past float range (NaN counts as clipped, so
         * post would time its saturation count instead). */
        do_pfb(c) || do_fft(c) ||
        cbf_bench_time_ms(do_post, c, c->stream, o->reps, &t_post) ||
        cbf_bench_time_ms(do_chain, c, c->stream, o->reps, &t_chain))
        return 1;
    uint64_t power[2], sat[2];
    if (report("power", cbf_pfb_cuda_power(c->pfb, c->stream, power, msg, sizeof msg), msg) ||
        report("saturated", cbf_fft_post_cuda_saturated(c->post, sat, msg, sizeof msg), msg))
        return 1;
    const double samples = 2.0 * (double)spectra * (double)step, in_b = o->bits / 8.0;
    const double four_pass = in_b + 4 + 8 + 4 + 1;
    row("pfb", channels, t_pfb, samples, in_b + 4, copy_rate, 0);
    row("fft", channels, t_fft, samples, 8, copy_rate, 0);
    row("post", channels, t_post, samples, 4 + 1, copy_rate, 0);
    row("chain", channels, t_chain, samples, four_pass, copy_rate, four_pass);
    fprintf(stderr,
            "# %d channels: unzip %d, %zu spectra per pol, last run saturated %llu + %llu\n",
            channels, unzip, spectra, (unsigned long long)sat[0], (unsigned long long)sat[1]);
    if (c->fused) {
        /* The FIR output afresh (fft transformed it in place), then the
         * fused kernel alone on it, which leaves it as it is. */
        uint64_t fsat[2];
        if (do_pfb(c) || cbf_bench_time_ms(do_fused, c, c->stream, o->reps, &t_fused) ||
            cbf_bench_time_ms(do_fused_chain, c, c->stream, o->reps, &t_fchain) ||
            report("saturated", cbf_fft_post_cuda_saturated(c->fused, fsat, msg, sizeof msg),
                   msg))
            return 1;
        row("dx", channels, t_fused, samples, 4 + 1, copy_rate, 0);
#ifdef CBF_BENCH_FENG_DX
        if (o->variants && bench_dx_variants(c, &cfg, o->reps, samples, copy_rate))
            return 1;
#endif
        row("dx chain", channels, t_fchain, samples, in_b + 4 + 4 + 1, copy_rate, four_pass);
        /* Both chains' outputs of the same input: how far the transforms'
         * rounding moves them (the tests hold both to the float64 model). */
        uint8_t *a = malloc(out_bytes), *b = malloc(out_bytes);
        if (!a || !b || one_output(do_chain, c, c->stream, d_out, a, out_bytes) ||
            one_output(do_fused_chain, c, c->stream, d_out, b, out_bytes))
            return 1;
        size_t differ = 0, worse = 0;
        for (size_t i = 0; i < out_bytes; i++) {
            int d = abs((int)(int8_t)a[i] - (int)(int8_t)b[i]);
            differ += d != 0;
            worse += d > 1 || (int8_t)b[i] == -128;
        }
        fprintf(stderr, "# %d channels, fused: last run saturated %llu + %llu; output against "
                        "the four-pass chain's: %zu of %zu bytes differ, %zu by more than 1 or "
                        "unwritten\n",
                channels, (unsigned long long)fsat[0], (unsigned long long)fsat[1], differ,
                out_bytes, worse);
        free(a);
        free(b);
        cbf_fft_post_cuda_destroy(c->fused);
    }
    cbf_pfb_cuda_destroy(c->pfb);
    cbf_fft_post_cuda_destroy(c->post);
    cudaFree(d_in[0]);
    cudaFree(d_in[1]);
    cudaFree(d_data);
    cudaFree(d_out);
    free(weights);
    free(host);
    return 0;
}

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){{4096, 8192, 32768}, 3, 16, 10, 20, 0, 0, 1, 0, 0, (size_t)1 << 28};
    const cbf_bench_opt table[] = {
        {"--channels", CBF_BOPT_INTS, o->channels, &o->n_channels, 8, 2, 1 << 20},
        {"--taps", CBF_BOPT_INT, &o->taps, .lo = 1, .hi = 256},
        {"--bits", CBF_BOPT_INT, &o->bits, .lo = 2, .hi = 16},
        {"--samples", CBF_BOPT_SIZE, &o->samples, .lo = 1, .hi = 1e12},
        {"--reps", CBF_BOPT_INT, &o->reps, .lo = 1, .hi = 64},
        {"--unzip", CBF_BOPT_INT, &o->unzip, .lo = 0, .hi = 4},
        {"--dx", CBF_BOPT_FLAG, &o->dx, .set = 1},
        {"--four-pass", CBF_BOPT_FLAG, &o->fused, .set = 0},
        {"--dx-variants", CBF_BOPT_FLAG, &o->variants, .set = 1},
        {"--dither", CBF_BOPT_FLAG, &o->dither, .set = 1},
        {0},
    };
    return cbf_bench_parse("feng",
                           "usage: cbf-bench feng [--channels 4096,8192,32768] [--taps 16] [--bits 10]\n"
                           "                      [--samples 268435456] [--reps 20] [--unzip 0|1|2|4]\n"
                           "                      [--four-pass] [--dx-variants] [--dither] [--dx]\n"
                           "samples: per polarisation per run; unzip 0 chooses as the engine does\n"
                           "rows dx, dx chain: fft_post's fused cuFFTDx FFT + post kernel, alone and\n"
                           "      after the FIR, where it runs the shape; --four-pass leaves them out;\n"
                           "      --dx-variants adds its measured layouts (rows dx g...)\n"
                           "--dither: post-processing with dither (fft_post's default), both chains\n"
                           "--dx: instead of the chain, cuFFTDx block FFTs of 4096 and 8192 points\n"
                           "      against cuFFT (issue 17; built where meson found cuFFTDx)\n",
                           argc, argv, table);
}

int cbf_bench_feng(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    struct cudaDeviceProp prop;
    if (cbf_bench_gpu("feng", &prop))
        return 1;
    chain c = {0};
    CK(cudaStreamCreate(&c.stream));
    c.copy_bytes = (size_t)1 << 32;
    CK(cudaMalloc(&c.src, c.copy_bytes));
    CK(cudaMalloc(&c.dst, c.copy_bytes));
    CK(cudaMemset(c.src, 0x5a, c.copy_bytes));
    float t_copy;
    if (cbf_bench_time_ms(do_copy, &c, c.stream, 10, &t_copy))
        return 1;
    double copy_rate = 2.0 * (double)c.copy_bytes / (t_copy * 1e-3);
    cudaFree(c.src);
    cudaFree(c.dst);
    printf("GPU: %s (%d SMs); device-to-device copy %.3f TB/s (4 GiB, read + write, median)\n",
           prop.name, prop.multiProcessorCount, copy_rate / 1e12);
    if (o.dx) {
#ifdef CBF_BENCH_FENG_DX
        rc = cbf_bench_feng_dx(copy_rate, o.samples, o.reps);
        cudaStreamDestroy(c.stream);
        return rc;
#else
        fprintf(stderr, "cbf-bench feng: --dx: built without cuFFTDx (meson option mathdx_dir)\n");
        return 1;
#endif
    }
    printf("taps %d, %d-bit in, 8-bit out, %.0f Msample/s per pol per antenna; rate in Gsample/s "
           "(both pols); bound = copy rate / bytes moved per sample\n\n",
           o.taps, o.bits, MEERKAT_ANT_RATE / 2e6);
    printf("| channels | kernel | ms | Gsample/s | antennas | bound Gsample/s | of bound | "
           "of four-pass bound |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (int i = 0; i < o.n_channels; i++)
        if (bench_one(&o, o.channels[i], copy_rate, &c))
            return 1;
    cudaStreamDestroy(c.stream);
    return 0;
}
