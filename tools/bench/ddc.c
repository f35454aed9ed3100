/* cbf-bench ddc: the narrowband down-converter on the GPU, over decimations,
 * taps and kernels (the default, tensor cores where they apply, and the FMA
 * kernel with C outputs per thread), against the two ceilings measured in
 * the same run:
 *
 * - memory: the input read once (bits / 8 bytes per sample) and the output
 *   written once (8 bytes per complex float32 output, one per S samples),
 *   at the device-to-device copy rate (bytes read + written);
 * - arithmetic: 2 taps FMAs per output, i.e. 4 W flops per input sample
 *   (W = taps / S), at the FP32 FMA rate of a probe kernel.
 *
 * The smaller bound applies: the DDC sits near the crossover, memory-bound
 * at few taps, arithmetic-bound at many. Decoding and the output rotation
 * are overheads on top of the counted FMAs. The tensor-core kernel does
 * those products on tensor cores, so it can pass the arithmetic bound; the
 * table keeps the FP32 bound so that its rows compare with the FMA
 * kernel's.
 *
 * Then the narrowband chain (ddc -> complex pfb -> cuFFT of 2N points ->
 * post; past 4096 channels unzipped: the pfb does the transform's first
 * radix-n stage and cuFFT n transforms of 2N / n points, one pass each),
 * per (S, channels[, unzip]) of --chain, stage by stage and as a whole,
 * against the same two ceilings applied to the chain's totals per input
 * sample: bytes = bits / 8 (DDC read) + 8 / S (DDC write) + 16 / S (FIR
 * read + write) + 16 / S (FFT read + write, one pass) +
 * 4 / S (post reads the kept half) + 1 / S (8-bit output), and flops =
 * 4 W (DDC) + 4 taps_pfb / S (FIR). The DDC's FMAs dominate the flops but
 * the bytes dominate the time at these ratios: the chain is memory-bound. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddc.h"
#include "filter_design.h"
#ifdef CBF_BENCH_NARROW
#include "fft_post.h"
#include "pfb.h"
#endif

#include <cuda_runtime.h>

#include "gpu_time.h"
#include "opts.h"

#define MEERKAT_ANT_RATE (2 * 1712e6) /* samples/s of one L-band antenna, both pols */

#define CK(call)                                                                     \
    do {                                                                             \
        cudaError_t e_ = (call);                                                     \
        if (e_ != cudaSuccess) {                                                     \
            fprintf(stderr, "cbf-bench ddc: %s: %s\n", #call, cudaGetErrorString(e_)); \
            return 1;                                                                \
        }                                                                            \
    } while (0)

typedef struct opts {
    int dec[8], n_dec, ratio[4], n_ratio, per_thread[4], n_pt, bits, reps;
    size_t samples; /* per pol */
    int chain_s[8], chain_n[8], chain_u[8], n_chain, pfb_taps; /* chain_u 0: auto unzip */
} opts;

typedef struct ctx {
    cudaStream_t s;
    cbf_ddc_cuda *plan;
    cbf_ddc_job job;
    void *src, *dst;
    size_t copy_bytes;
    float *probe_out;
    int probe_blocks;
    double probe_flops;
} ctx;

static int do_copy(void *p)
{
    ctx *c = p;
    CK(cudaMemcpyAsync(c->dst, c->src, c->copy_bytes, cudaMemcpyDeviceToDevice, c->s));
    return 0;
}

static int do_probe(void *p)
{
    ctx *c = p;
    char msg[256];
    if (cbf_ddc_cuda_fma_probe(c->probe_blocks, 4096, c->probe_out, c->s, &c->probe_flops, msg,
                               sizeof msg)) {
        fprintf(stderr, "cbf-bench ddc: %s\n", msg);
        return 1;
    }
    return 0;
}

static int do_ddc(void *p)
{
    ctx *c = p;
    char msg[256];
    if (cbf_ddc_cuda_run(c->plan, &c->job, c->s, msg, sizeof msg)) {
        fprintf(stderr, "cbf-bench ddc: %s\n", msg);
        return 1;
    }
    return 0;
}

static int bench_one(const opts *o, int S, int W, int C, const uint8_t *const d_in[2],
                     size_t in_samples, float *d_out, double copy_rate, double fma_rate,
                     ctx *c)
{
    char msg[512];
    cbf_ddc_config cfg = {o->bits, S, S * W, cbf_ddc_mix_step(0.3)};
    double *h = malloc(sizeof(double) * (size_t)cfg.taps);
    float *z = malloc(2 * sizeof(float) * (size_t)cfg.taps);
    if (!h || !z)
        return 1;
    if (cbf_fd_ddc_design(cfg.taps, S, CBF_FD_DEFAULT_PASS_WEIGHT, h, NULL, NULL, msg,
                          sizeof msg) ||
        cbf_ddc_weights(&cfg, h, z, msg, sizeof msg) ||
        cbf_ddc_cuda_create(&cfg, z, C, &c->plan, msg, sizeof msg)) {
        printf("| %3d | %4d | %2d | - | - | - | - | - | - | (%s) |\n", S, cfg.taps, C, msg);
        free(h);
        free(z);
        return 0;
    }
    size_t outputs = (in_samples - (size_t)cfg.taps) / (size_t)S + 1;
    c->job = (cbf_ddc_job){{d_in[0], d_in[1]}, in_samples, (1ull << 42) + 17, 0, outputs, d_out,
                           outputs};
    float ms;
    if (cbf_bench_time_ms(do_ddc, c, c->s, o->reps, &ms))
        return 1;
    const double samples = 2.0 * (double)outputs * S, rate = samples / (ms * 1e-3);
    const double mem_bound = copy_rate / (o->bits / 8.0 + 8.0 / S);
    const double fma_bound = fma_rate / (4.0 * W);
    const int mem = mem_bound < fma_bound;
    const double bound = mem ? mem_bound : fma_bound;
    char kind[16];
    if (cbf_ddc_cuda_tensor(c->plan))
        snprintf(kind, sizeof kind, "tensor");
    else
        snprintf(kind, sizeof kind, "fma %d", C ? C : CBF_DDC_DEFAULT_PER_THREAD);
    printf("| %3d | %4d | %-6s | %8.3f | %8.1f | %6.1f | %8.0f | %8.0f | %-10s | %5.1f%% |\n", S,
           cfg.taps, kind, ms, rate / 1e9, rate / MEERKAT_ANT_RATE, mem_bound / 1e9,
           fma_bound / 1e9, mem ? "memory" : "arithmetic", 100.0 * rate / bound);
    cbf_ddc_cuda_destroy(c->plan);
    free(h);
    free(z);
    return 0;
}

/* --chain S:channels[:unzip],...: the narrowband chains to time ("": none). */
static int parse_chain(const char *v, void *value)
{
    opts *o = value;
    o->n_chain = 0;
    for (const char *q = v; *q;) {
        char *e;
        if (o->n_chain == 8)
            return -1;
        o->chain_s[o->n_chain] = (int)strtol(q, &e, 10);
        if (*e != ':' || o->chain_s[o->n_chain] < 1)
            return -1;
        o->chain_n[o->n_chain] = (int)strtol(e + 1, &e, 10);
        o->chain_u[o->n_chain++] = *e == ':' ? (int)strtol(e + 1, &e, 10) : 0;
        if (*e && *e != ',')
            return -1;
        q = *e ? e + 1 : e;
    }
    return 0;
}

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){{8, 16, 32}, 3, {8, 16}, 2, {0, 4, 8, 16}, 4, 10, 20, (size_t)1 << 28,
                {8, 16, 32, 8, 8}, {4096, 4096, 1024, 32768, 32768}, {0, 0, 0, 0, 1}, 5, 16};
    const cbf_bench_opt table[] = {
        {"--decimation", CBF_BOPT_INTS, o->dec, &o->n_dec, 8, 1, 1024},
        {"--ratio", CBF_BOPT_INTS, o->ratio, &o->n_ratio, 4, 1, 64},
        {"--per-thread", CBF_BOPT_INTS, o->per_thread, &o->n_pt, 4, 0, 64},
        {"--bits", CBF_BOPT_INT, &o->bits, .lo = 2, .hi = 16},
        {"--samples", CBF_BOPT_SIZE, &o->samples, .lo = 1, .hi = 1e12},
        {"--chain", CBF_BOPT_TEXT, o, .check = parse_chain},
        {"--pfb-taps", CBF_BOPT_INT, &o->pfb_taps, .lo = 1, .hi = 256},
        {"--reps", CBF_BOPT_INT, &o->reps, .lo = 1, .hi = 64},
        {0},
    };
    return cbf_bench_parse("ddc",
                           "usage: cbf-bench ddc [--decimation 8,16,32] [--ratio 8,16]\n"
                           "                     [--per-thread 0,4,8,16] [--bits 10] [--samples 268435456]\n"
                           "                     [--reps 20]\n"
                           "                     [--chain 8:4096,16:4096,32:1024,8:32768,8:32768:1]\n"
                           "                     [--pfb-taps 16]\n"
                           "ratio: taps / decimation (4, 8, 12 or 16); samples: per polarisation;\n"
                           "per-thread: 0 the default kernel (tensor cores where they apply), 4, 8, 16\n"
                           "the FMA kernel with that many outputs per thread;\n"
                           "chain: S:channels[:unzip] of the narrowband chain (DDC taps 8 S; unzip 1, 2\n"
                           "or 4, cbf_pfb_auto_unzip_complex when left out), \"\" for none\n",
                           argc, argv, table);
}

static int ceilings(ctx *c, double *copy_rate, double *fma_rate, const struct cudaDeviceProp *p)
{
    float t;
    c->copy_bytes = (size_t)1 << 31;
    CK(cudaMalloc(&c->src, c->copy_bytes));
    CK(cudaMalloc(&c->dst, c->copy_bytes));
    CK(cudaMemset(c->src, 0x5a, c->copy_bytes));
    if (cbf_bench_time_ms(do_copy, c, c->s, 10, &t))
        return 1;
    *copy_rate = 2.0 * (double)c->copy_bytes / (t * 1e-3);
    CK(cudaFree(c->src));
    CK(cudaFree(c->dst));
    c->probe_blocks = p->multiProcessorCount * 8;
    CK(cudaMalloc((void **)&c->probe_out, sizeof(float) * 256 * (size_t)c->probe_blocks));
    if (cbf_bench_time_ms(do_probe, c, c->s, 10, &t))
        return 1;
    *fma_rate = c->probe_flops / (t * 1e-3);
    CK(cudaFree(c->probe_out));
    return 0;
}

#ifdef CBF_BENCH_NARROW
typedef struct chain_ctx {
    cudaStream_t s;
    cbf_ddc_cuda *ddc;
    cbf_pfb_cuda *pfb;
    cbf_fft_post_cuda *post;
    cbf_ddc_job dj;
    cbf_pfb_cjob pj;
    cbf_fft_post_args pa;
} chain_ctx;

static int chain_fail(const char *msg)
{
    fprintf(stderr, "cbf-bench ddc: chain: %s\n", msg);
    return 1;
}
static int do_c_ddc(void *p)
{
    ctx *c = p;
    char msg[256];
    chain_ctx *k = (chain_ctx *)c->src;
    return cbf_ddc_cuda_run(k->ddc, &k->dj, k->s, msg, sizeof msg) ? chain_fail(msg) : 0;
}
static int do_c_pfb(void *p)
{
    ctx *c = p;
    char msg[256];
    chain_ctx *k = (chain_ctx *)c->src;
    return cbf_pfb_cuda_run_complex(k->pfb, &k->pj, k->s, msg, sizeof msg) ? chain_fail(msg) : 0;
}
static int do_c_fft(void *p)
{
    ctx *c = p;
    char msg[256];
    chain_ctx *k = (chain_ctx *)c->src;
    return cbf_fft_post_cuda_fft(k->post, &k->pa, msg, sizeof msg) ? chain_fail(msg) : 0;
}
static int do_c_post(void *p)
{
    ctx *c = p;
    char msg[256];
    chain_ctx *k = (chain_ctx *)c->src;
    return cbf_fft_post_cuda_post(k->post, &k->pa, msg, sizeof msg) ? chain_fail(msg) : 0;
}
static int do_c_all(void *p)
{
    ctx *c = p;
    return do_c_ddc(c) || do_c_pfb(c) || do_c_fft(c) || do_c_post(c);
}

/* One (S, N) of the chain on `spectra` spectra per pol; the input covers
 * their windows, and the rate counts the digitiser samples they advance
 * over (2 N S per spectrum, both pols). */
static int chain_one(const opts *o, int S, int N, int unzip, const uint8_t *const d_in[2],
                     size_t avail, float *d_ddc, float *d_fir, void *d_out, size_t per_pol_floats,
                     double copy_rate, double fma_rate, ctx *c)
{
    char msg[512];
    const int T = 8 * S, step = 2 * N;
    /* As many whole heaps of 256 spectra as --samples holds with the footprint. */
    size_t fit = (o->samples - (size_t)T) / (size_t)S / (size_t)step;
    size_t spectra = fit > (size_t)o->pfb_taps ? (fit - (size_t)o->pfb_taps) / 256 * 256 : 0;
    if (spectra < 256)
        spectra = 256;
    size_t outputs = (spectra + (size_t)o->pfb_taps - 1) * (size_t)step;
    size_t in_samples = (outputs - 1) * (size_t)S + (size_t)T;
    if (in_samples > avail || 2 * outputs > per_pol_floats || spectra * 2 * step > per_pol_floats) {
        printf("| %d | %d | (needs more than --samples %zu) |\n", S, N, o->samples);
        return 0;
    }
    cbf_ddc_config cfg = {o->bits, S, T, cbf_ddc_mix_step(0.3)};
    if (!unzip)
        unzip = cbf_pfb_auto_unzip_complex(N);
    cbf_fft_post_config pc = {N, unzip, 256, spectra, 8, 1};
    double *h = malloc(sizeof(double) * (size_t)T);
    float *z = malloc(2 * sizeof(float) * (size_t)T), *w = malloc(sizeof(float) * (size_t)step * (size_t)o->pfb_taps);
    chain_ctx k;
    memset(&k, 0, sizeof k);
    k.s = c->s;
    if (!h || !z || !w)
        return 1;
    if (cbf_fd_ddc_design(T, S, CBF_FD_DEFAULT_PASS_WEIGHT, h, NULL, NULL, msg, sizeof msg) ||
        cbf_ddc_weights(&cfg, h, z, msg, sizeof msg) ||
        cbf_ddc_cuda_create(&cfg, z, 0, &k.ddc, msg, sizeof msg) ||
        cbf_pfb_weights(N, o->pfb_taps, 1.0, CBF_PFB_HANN, w, msg, sizeof msg) ||
        cbf_pfb_cuda_create(N, o->pfb_taps, w, &k.pfb, msg, sizeof msg) ||
        cbf_fft_post_cuda_create(&pc, c->s, &k.post, msg, sizeof msg))
        return chain_fail(msg);
    k.dj = (cbf_ddc_job){{d_in[0], d_in[1]}, in_samples, (1ull << 42) + 17, 0, outputs, d_ddc,
                         per_pol_floats / 2};
    k.pj = (cbf_pfb_cjob){N, o->pfb_taps, {d_ddc, d_ddc + per_pol_floats}, outputs, {0, 0},
                          spectra, d_fir, per_pol_floats, unzip};
    k.pa = (cbf_fft_post_args){d_fir, per_pol_floats, d_out, {0.0f, 0.0f}, {0.0f, 0.0f}, NULL, 0, 0};
    void *saved = c->src;
    c->src = &k;
    float t[5];
    cbf_bench_step fns[5] = {do_c_ddc, do_c_pfb, do_c_fft, do_c_post, do_c_all};
    for (int i = 0; i < 5; i++)
        if (cbf_bench_time_ms(fns[i], c, c->s, o->reps, &t[i]))
            return 1;
    c->src = saved;
    const double samples = 2.0 * (double)spectra * step * S, rate = samples / (t[4] * 1e-3);
    const double bytes = o->bits / 8.0 + 45.0 / S;
    const double flops = 4.0 * T / S + 4.0 * o->pfb_taps / S;
    const double mem_bound = copy_rate / bytes, fma_bound = fma_rate / flops;
    const int mem = mem_bound < fma_bound;
    printf("| %2d | %5d | %d | %6.3f | %6.3f | %6.3f | %6.3f | %7.3f | %7.1f | %6.1f | %6.0f | %6.0f "
           "| %-10s | %5.1f%% |\n", S, N, unzip, t[0], t[1], t[2], t[3], t[4], rate / 1e9,
           rate / MEERKAT_ANT_RATE, mem_bound / 1e9, fma_bound / 1e9, mem ? "memory" : "arithmetic",
           100.0 * rate / (mem ? mem_bound : fma_bound));
    cbf_ddc_cuda_destroy(k.ddc);
    cbf_pfb_cuda_destroy(k.pfb);
    cbf_fft_post_cuda_destroy(k.post);
    free(h);
    free(z);
    free(w);
    return 0;
}

static int chain_table(const opts *o, const uint8_t *const d_in[2], double copy_rate,
                       double fma_rate, ctx *c)
{
    if (!o->n_chain)
        return 0;
    /* Per pol: the DDC output (complex) and the FIR output (2 x step floats
     * per spectrum) are both about 2 samples / S floats. */
    size_t per_pol = 2 * (o->samples / 8 + 65536 * 16);
    float *d_ddc, *d_fir;
    void *d_out;
    CK(cudaMalloc((void **)&d_ddc, 2 * per_pol * sizeof(float)));
    CK(cudaMalloc((void **)&d_fir, 2 * per_pol * sizeof(float)));
    CK(cudaMalloc(&d_out, per_pol));
    printf("\nNarrowband chain, ddc (taps 8 S, C 8) -> pfb (%d taps, complex; unzip n: with the "
           "first radix-n stage) -> cuFFT (n transforms of 2N / n points) "
           "-> post (8-bit); times in ms per run; rate in Gsample/s of digitiser input (both "
           "pols)\n\n", o->pfb_taps);
    printf("| S | channels | unzip | ddc | pfb | fft | post | chain | Gsample/s | antennas | memory bound "
           "| arithmetic bound | binding | of bound |\n"
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
           "|\n");
    for (int i = 0; i < o->n_chain; i++)
        if (chain_one(o, o->chain_s[i], o->chain_n[i], o->chain_u[i], d_in, o->samples, d_ddc,
                      d_fir, d_out, per_pol, copy_rate, fma_rate, c))
            return 1;
    CK(cudaFree(d_ddc));
    CK(cudaFree(d_fir));
    CK(cudaFree(d_out));
    return 0;
}
#endif

int cbf_bench_ddc(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    struct cudaDeviceProp prop;
    if (cbf_bench_gpu("ddc", &prop))
        return 1;
    ctx c = {0};
    CK(cudaStreamCreate(&c.s));
    double copy_rate, fma_rate;
    if (ceilings(&c, &copy_rate, &fma_rate, &prop))
        return 1;
    printf("GPU: %s (%d SMs); device-to-device copy %.3f TB/s (2 GiB, read + write); FP32 FMA "
           "probe %.1f TFLOP/s\n", prop.name, prop.multiProcessorCount, copy_rate / 1e12,
           fma_rate / 1e12);
    printf("%d-bit in, complex float32 out, %zu samples per pol per run, rate in Gsample/s of "
           "input (both pols), antennas at %.0f Msample/s per pol\n\n", o.bits, o.samples,
           MEERKAT_ANT_RATE / 2e6);
    printf("| S | taps | kernel | ms | Gsample/s | antennas | memory bound | arithmetic bound | "
           "binding | of bound |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    const size_t in_bytes = cbf_packed_bytes(o.samples, o.bits);
    uint8_t *host = malloc(in_bytes), *d_in[2];
    float *d_out;
    if (!host)
        return 1;
    for (int p = 0; p < 2; p++) {
        CK(cudaMalloc((void **)&d_in[p], in_bytes));
        cbf_bench_random_bytes(host, in_bytes, 0x5eed + (uint64_t)p);
        CK(cudaMemcpy(d_in[p], host, in_bytes, cudaMemcpyHostToDevice));
    }
    CK(cudaMalloc((void **)&d_out, 2 * 2 * sizeof(float) * (o.samples / 2 + 1)));
    for (int i = 0; i < o.n_dec; i++)
        for (int r = 0; r < o.n_ratio; r++)
            for (int k = 0; k < o.n_pt; k++)
                if (bench_one(&o, o.dec[i], o.ratio[r], o.per_thread[k],
                              (const uint8_t *const *)d_in, o.samples, d_out, copy_rate,
                              fma_rate, &c))
                    return 1;
    CK(cudaFree(d_out));
#ifdef CBF_BENCH_NARROW
    if (chain_table(&o, (const uint8_t *const *)d_in, copy_rate, fma_rate, &c))
        return 1;
#endif
    CK(cudaFree(d_in[0]));
    CK(cudaFree(d_in[1]));
    CK(cudaStreamDestroy(c.s));
    free(host);
    return 0;
}
