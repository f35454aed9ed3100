/* cbf-bench beam: the tied-array beamformer against ceilings measured in
 * the same run, and beside the correlator on the same batches.
 *
 * Bandwidth bound: the fewest bytes one call must move, its input read once
 * (N antennas x 2 pols x CI8 per channel and spectrum) and its output
 * written once (B beams x CI8), at the device-to-device copy rate.
 * Arithmetic: 8 real operations per complex multiply-accumulate, N x B per
 * channel and spectrum (coefficient generation and quantisation not
 * counted), against cuBLAS's fp32 SGEMM (what the same sums cost on CUDA
 * cores) and fp16 tensor-core GEMM (the arithmetic rates the issue names;
 * the kernel itself runs exact int8 digit products on the tensor cores,
 * docs/notes/performance-history.md says how many).
 *
 * Beside the correlator: the correlator alone on a call's batches, then
 * correlator and beamformer on the same input, one after the other on one
 * stream and side by side on two; "extra" is the time over the correlator
 * alone. Then the same for the first antenna count on a stream of engine-
 * sized buffers (beside_ring). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "beamform.h"
#include "correlator.h"


#include "corr_step.h"
#include "gpu_time.h"
#include "opts.h"

#define CK(call) CBF_BENCH_CK("beam", call)
#define MAX_LIST 8
#define SPECTRA 256   /* spectra per heap, MeerKAT's (katgpucbf's default) */
#define BATCHES 4     /* heaps per call of the single-call tables */

typedef struct opts {
    int ants[MAX_LIST], n_ants, beams[MAX_LIST], n_beams, reps, dither;
    double gib;       /* input bytes per call, GiB */
    int xb_channels[MAX_LIST], n_xb; /* an X-engine's channels, for the stream of buffers */
    int xb_heaps[MAX_LIST], n_xh;    /* and its buffers' heaps (batches) */
} opts;

typedef struct beam_ctx {
    cbf_beam_job job;
    cudaStream_t s;
} beam_ctx;

static int do_beam(void *p)
{
    beam_ctx *b = p;
    char msg[512];
    if (cbf_beam_cuda_run(&b->job, b->s, msg, sizeof msg))
        return fprintf(stderr, "cbf-bench beam: %s\n", msg), 1;
    return 0;
}

/* Correlator and beamformer on the same input: on the correlator's stream
 * one after the other (side NULL), or the beamformer on a side stream forked
 * from and joined back to the correlator's. */
typedef struct both_ctx {
    cbf_bench_corr *c;
    beam_ctx *b;
    cudaStream_t side;          /* NULL: sequential; else the beamformer's stream */
    cudaEvent_t fork, join;
} both_ctx;

/* Both from one call: the one kernel where the shape allows it. */
static int do_xb(cbf_bench_corr *c, beam_ctx *b)
{
    char msg[512];
    if (cbf_xb_cuda_run(c->plan, &c->job, &b->job, c->s, msg, sizeof msg))
        return fprintf(stderr, "cbf-bench beam: %s\n", msg), 1;
    return 0;
}

static int do_xb_one(void *p)
{
    both_ctx *x = p;
    return do_xb(x->c, x->b);
}

static int do_both(void *p)
{
    both_ctx *x = p;
    if (!x->side) {
        cudaStream_t keep = x->b->s;
        x->b->s = x->c->s;
        int rc = cbf_bench_corr_step(x->c) || do_beam(x->b);
        x->b->s = keep;
        return rc;
    }
    /* fork the side stream off the timed one and join it back */
    CK(cudaEventRecord(x->fork, x->c->s));
    CK(cudaStreamWaitEvent(x->side, x->fork, 0));
    x->b->s = x->side;
    if (cbf_bench_corr_step(x->c) || do_beam(x->b))
        return 1;
    CK(cudaEventRecord(x->join, x->side));
    CK(cudaStreamWaitEvent(x->c->s, x->join, 0));
    return 0;
}

typedef struct ceil {
    double copy_bps, f32_ops, f16_ops;
} ceil_t;

/* Channels for about o->gib of input per call, at least one. */
static int channels_for(const opts *o, int n)
{
    const double per_chan = (double)n * SPECTRA * 4.0 * BATCHES;
    const double c = o->gib * 1073741824.0 / per_chan;
    return c < 1 ? 1 : c > 65535 ? 65535 : (int)c;
}

/* Device coefficients for n antennas and b beams: weights 1/n, delays of
 * a few ns, alternating pols (what a pointed beam looks like; the kernel's
 * time does not depend on the values). */
static int make_coefs(int n, int b, int channels, cbf_beam_coef **d_coef, uint8_t **d_pol)
{
    cbf_beam_coef *h = calloc((size_t)n * b, sizeof *h);
    uint8_t *pol = calloc((size_t)b, 1);
    if (!h || !pol)
        return fprintf(stderr, "cbf-bench beam: out of memory\n"), 1;
    for (int j = 0; j < b; j++) {
        pol[j] = (uint8_t)(j & 1);
        for (int a = 0; a < n; a++)
            cbf_beam_coef_set(&h[(size_t)j * n + a], 1.0 / n, 4.0, 1e-9 * ((a * 7 + j) % 13), 0.1 * j,
                              856e6 / channels, 0.0, channels / 2.0);
    }
    CK(cudaMalloc((void **)d_coef, (size_t)n * b * sizeof *h));
    CK(cudaMalloc((void **)d_pol, (size_t)b));
    CK(cudaMemcpy(*d_coef, h, (size_t)n * b * sizeof *h, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(*d_pol, pol, (size_t)b, cudaMemcpyHostToDevice));
    free(h);
    free(pol);
    return 0;
}

typedef struct dev_in {
    uint8_t *in, *present;
    uint64_t *sat;
    int8_t *out;
    size_t in_bytes;
} dev_in;

static int alloc_io(int n, int b, int channels, int heaps, dev_in *d)
{
    cbf_beam_shape sh = {n, b, channels, SPECTRA};
    d->in_bytes = heaps * cbf_beam_in_batch_bytes(&sh);
    const size_t out_bytes = heaps * cbf_beam_out_batch_bytes(&sh);
    CK(cudaMalloc((void **)&d->in, d->in_bytes));
    CK(cudaMalloc((void **)&d->out, out_bytes));
    CK(cudaMalloc((void **)&d->present, (size_t)heaps * n));
    CK(cudaMalloc((void **)&d->sat, (size_t)b * sizeof(uint64_t)));
    CK(cudaMemset(d->present, 1, (size_t)heaps * n));
    CK(cudaMemset(d->sat, 0, (size_t)b * sizeof(uint64_t)));
    return cbf_bench_fill_random(d->in, d->in_bytes, (uint64_t)n * 131 + (uint64_t)b);
}

static void free_io(dev_in *d)
{
    cudaFree(d->in);
    cudaFree(d->out);
    cudaFree(d->present);
    cudaFree(d->sat);
}

static void job_for(beam_ctx *bc, int n, int b, int channels, int heaps, const dev_in *d,
                    cbf_beam_coef *coef, const uint8_t *pol, int dither)
{
    memset(&bc->job, 0, sizeof bc->job);
    bc->job.shape = (cbf_beam_shape){n, b, channels, SPECTRA};
    bc->job.batches = heaps;
    bc->job.in = d->in;
    bc->job.present = d->present;
    bc->job.coef = coef;
    bc->job.pol = pol;
    bc->job.out = d->out;
    bc->job.saturated = d->sat;
    bc->job.dither = dither;
    bc->job.dither_key = 1;
    bc->job.first_spectrum = 0;
    bc->job.first_channel = 0;
    bc->job.total_channels = (uint64_t)channels;
    /* the coefficients never change here: the one kernel's digits are made
     * once (in the warm-up calls), as an engine's are between requests */
    bc->job.coef_version = 1;
}

/* One call's beamformer on its own device data (the single-call tables):
 * BATCHES heaps of n antennas x channels in, b beams out, the
 * coefficients and the job on stream s. */
typedef struct beam_call {
    int channels;
    dev_in d;
    cbf_beam_coef *coef;
    uint8_t *pol;
    beam_ctx bc;
} beam_call;

static int beam_call_make(const opts *o, int n, int b, cudaStream_t s, beam_call *c)
{
    c->channels = channels_for(o, n);
    if (alloc_io(n, b, c->channels, BATCHES, &c->d) ||
        make_coefs(n, b, c->channels, &c->coef, &c->pol))
        return 1;
    c->bc = (beam_ctx){.s = s};
    job_for(&c->bc, n, b, c->channels, BATCHES, &c->d, c->coef, c->pol, o->dither);
    return 0;
}

static void beam_call_free(beam_call *c)
{
    cudaFree(c->coef);
    cudaFree(c->pol);
    free_io(&c->d);
}

static int bench_one(const opts *o, int n, int b, const ceil_t *cl, cudaStream_t s)
{
    beam_call call;
    if (beam_call_make(o, n, b, s, &call))
        return 1;
    const int channels = call.channels;
    float t;
    if (cbf_bench_time_ms(do_beam, &call.bc, s, o->reps, &t))
        return 1;
    CK(cudaGetLastError());
    const double samples = (double)BATCHES * SPECTRA * channels;   /* per antenna and pol */
    const double bytes = samples * (4.0 * n + 2.0 * b);
    const double bound_ms = bytes / cl->copy_bps * 1e3;
    const double ops = 8.0 * n * b * samples;
    const double rate = ops / (t * 1e-3);
    printf("| %d | %d | %d | %.0f | %.3f | %.0f | %.3f | %.1f%% | %.1f | %.1f%% | %.1f%% |\n", n, b,
           channels, samples, t, bytes / (t * 1e-3) / 1e9, bound_ms, 100.0 * bound_ms / t, rate / 1e12,
           100.0 * rate / cl->f32_ops, 100.0 * rate / cl->f16_ops);
    beam_call_free(&call);
    return 0;
}

/* A correlator on `in` (`heaps` heaps of n antennas x channels): its plan
 * and zeroed accumulators (slices that fill the GPU), on stream s. */
static int corr_for(int n, int channels, int heaps, const uint8_t *in, cudaStream_t s, cbf_bench_corr *cc)
{
    char msg[512];
    const cbf_corr_shape sh = {n, channels, SPECTRA, 8};
    cc->area = "beam";
    cc->s = s;
    if (cbf_corr_cuda_create(&sh, 0, &cc->plan, msg, sizeof msg))
        return fprintf(stderr, "cbf-bench beam: %s\n", msg), 1;
    const int slices = cbf_corr_cuda_auto_slices(cc->plan, heaps);
    const size_t bytes = (size_t)slices * cbf_corr_accum_len(&sh) * 8;
    int64_t *acc;
    CK(cudaMalloc((void **)&acc, bytes));
    CK(cudaMemset(acc, 0, bytes));
    cc->job = (cbf_corr_job){sh, in, 0, heaps, acc, slices};
    return 0;
}

static void corr_free(cbf_bench_corr *cc)
{
    cudaFree(cc->job.accum);
    cbf_corr_cuda_destroy(cc->plan);
}

/* The columns both beside tables share, in ms: the correlator alone (c),
 * the beamformer alone (b), both on one stream (s) and on two (p), and
 * cbf_xb_cuda_run (x), with each pair's extra time over the correlator. */
/* The last column is the xbengine plugin's choice with `fuse: auto`
 * (cbf_xb_cuda_prefer_fused): the one kernel or the two streams. */
static void print_beside(double c, double b, double s, double p, double x, int fused,
                         const cbf_bench_corr *cc, const beam_ctx *bc)
{
    const int node_fused = cbf_xb_cuda_prefer_fused(cc->plan, &bc->job.shape);
    const double n = node_fused ? x : p;
    printf("| %.3f | %.3f | %.3f | %.1f%% | %.3f | %.1f%% | %s | %.3f | %.1f%% | %s | %.1f%% |\n", c, b, s,
           100.0 * (s - c) / c, p, 100.0 * (p - c) / c, fused ? "one kernel" : "two kernels", x,
           100.0 * (x - c) / c, node_fused ? "one kernel" : "two streams", 100.0 * (n - c) / c);
}

/* Correlator alone, then with the beamformer on the same batches. */
static int beside_one(const opts *o, int n, int b, cudaStream_t s, cudaStream_t side)
{
    beam_call call;
    cbf_bench_corr cc;
    if (beam_call_make(o, n, b, s, &call) ||
        corr_for(n, call.channels, BATCHES, call.d.in, s, &cc))
        return 1;
    beam_ctx bc = call.bc;
    both_ctx seq = {&cc, &bc, NULL, NULL, NULL}, par = {&cc, &bc, side, NULL, NULL};
    CK(cudaEventCreateWithFlags(&par.fork, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&par.join, cudaEventDisableTiming));
    float tc, tb, ts, tp, tx;
    if (cbf_bench_time_ms(cbf_bench_corr_step, &cc, s, o->reps, &tc) || cbf_bench_time_ms(do_beam, &bc, s, o->reps, &tb) ||
        cbf_bench_time_ms(do_both, &seq, s, o->reps, &ts) || cbf_bench_time_ms(do_both, &par, s, o->reps, &tp) ||
        cbf_bench_time_ms(do_xb_one, &seq, s, o->reps, &tx))
        return 1;
    CK(cudaGetLastError());
    printf("| %d | %d | %d ", n, b, call.channels);
    print_beside(tc, tb, ts, tp, tx, cbf_xb_cuda_fused(cc.plan, &cc.job, &bc.job), &cc, &bc);
    cudaEventDestroy(par.fork);
    cudaEventDestroy(par.join);
    corr_free(&cc);
    beam_call_free(&call);
    return 0;
}

/* Beside the correlator as an engine meets its buffers: a stream of R
 * distinct buffers of `heaps` heaps x `channels` (an X-engine's share of
 * the band), together 4x the L2 cache so each arrives from DRAM; per
 * buffer the correlator (adding into one set of accumulators, as between
 * dumps) and the beamformer, either after it on one stream or on a second
 * stream that starts the buffer when the correlator does (the buffer's
 * arrival), so the beamformer may read what the correlator just brought
 * into L2. */
/* What one pass over the stream of buffers runs per buffer. */
typedef enum ring_mode {
    RING_CORR,  /* the correlator alone */
    RING_BEAMS, /* the beamformer alone */
    RING_SEQ,   /* the correlator, then the beamformer on its stream */
    RING_PAR,   /* the beamformer on the side stream from the buffer's arrival */
    RING_XB,    /* both by cbf_xb_cuda_run */
} ring_mode;

typedef struct ring_ctx {
    cbf_bench_corr *c;             /* [r] */
    beam_ctx *b;             /* [r] */
    int r;
    ring_mode mode;
    cudaStream_t side;       /* RING_PAR's stream for the beams */
    cudaEvent_t *arrive;     /* [r] */
    cudaEvent_t join;
} ring_ctx;

static int do_ring(void *p)
{
    ring_ctx *x = p;
    for (int i = 0; i < x->r; i++) {
        if (x->mode == RING_PAR) {
            CK(cudaEventRecord(x->arrive[i], x->c[i].s));
            CK(cudaStreamWaitEvent(x->side, x->arrive[i], 0));
        }
        if (x->mode == RING_XB) {
            if (do_xb(&x->c[i], &x->b[i]))
                return 1;
            continue;
        }
        if (x->mode != RING_BEAMS && cbf_bench_corr_step(&x->c[i]))
            return 1;
        if (x->mode != RING_CORR) {
            x->b[i].s = x->mode == RING_PAR ? x->side : x->c[i].s;
            if (do_beam(&x->b[i]))
                return 1;
        }
    }
    if (x->mode == RING_PAR) {
        CK(cudaEventRecord(x->join, x->side));
        CK(cudaStreamWaitEvent(x->c[0].s, x->join, 0));
    }
    return 0;
}

static int beside_ring(const opts *o, int n, int b, int channels, int heaps, size_t l2, cudaStream_t s,
                       cudaStream_t side)
{
    const cbf_beam_shape bs = {n, b, channels, SPECTRA};
    const size_t buf = heaps * cbf_beam_in_batch_bytes(&bs);
    int r = (int)((4 * l2 + buf - 1) / buf);
    if (r < 2)
        r = 2;
    if (r > 64)
        r = 64;
    dev_in *d = calloc((size_t)r, sizeof *d);
    cbf_bench_corr *cc = calloc((size_t)r, sizeof *cc);
    beam_ctx *bc = calloc((size_t)r, sizeof *bc);
    cudaEvent_t *ev = calloc((size_t)r, sizeof *ev);
    if (!d || !cc || !bc || !ev)
        return fprintf(stderr, "cbf-bench beam: out of memory\n"), 1;
    cbf_beam_coef *coef;
    uint8_t *pol;
    if (make_coefs(n, b, channels, &coef, &pol))
        return 1;
    for (int i = 0; i < r; i++) {
        if (alloc_io(n, b, channels, heaps, &d[i]))
            return 1;
        /* one plan and one set of accumulators for the whole stream */
        if (i == 0 && corr_for(n, channels, heaps, d[0].in, s, &cc[0]))
            return 1;
        cc[i] = cc[0];
        cc[i].job.in = d[i].in;
        bc[i].s = s;
        job_for(&bc[i], n, b, channels, heaps, &d[i], coef, pol, o->dither);
        CK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
    }
    ring_ctx x = {cc, bc, r, RING_CORR, side, ev, NULL};
    CK(cudaEventCreateWithFlags(&x.join, cudaEventDisableTiming));
    float t[5]; /* per ring_mode, for the whole stream */
    for (int m = RING_CORR; m <= RING_XB; m++) {
        x.mode = (ring_mode)m;
        if (cbf_bench_time_ms(do_ring, &x, s, o->reps, &t[m]))
            return 1;
        t[m] /= (float)r;
    }
    CK(cudaGetLastError());
    printf("| %d | %d | %d | %d | %d x %.1f MB ", n, b, channels, heaps, r, buf / 1e6);
    print_beside(t[RING_CORR], t[RING_BEAMS], t[RING_SEQ], t[RING_PAR], t[RING_XB],
                 cbf_xb_cuda_fused(cc[0].plan, &cc[0].job, &bc[0].job), &cc[0], &bc[0]);
    cudaEventDestroy(x.join);
    for (int i = 0; i < r; i++) {
        cudaEventDestroy(ev[i]);
        free_io(&d[i]);
    }
    corr_free(&cc[0]);
    cudaFree(coef);
    cudaFree(pol);
    free(d);
    free(cc);
    free(bc);
    free(ev);
    return 0;
}

static int parse(int argc, char **argv, opts *o)
{
    /* MeerKAT's 4096 channels over 32 X-engines, its 32768 over 64 and 32;
     * heaps per buffer: cbf's receiver's default chunk once, and katgpucbf's
     * (--heaps-per-fengine-per-chunk 32). */
    *o = (opts){.ants = {64, 256, 1024}, .n_ants = 3, .beams = {8, 64, 256}, .n_beams = 3, .reps = 7,
                .dither = 1, .gib = 0.5, .xb_channels = {128, 512, 1024}, .n_xb = 3, .xb_heaps = {4, 32},
                .n_xh = 2};
    const cbf_bench_opt table[] = {
        {"--ants", CBF_BOPT_INTS, o->ants, &o->n_ants, MAX_LIST, 1, 1 << 16},
        {"--beams", CBF_BOPT_INTS, o->beams, &o->n_beams, MAX_LIST, 1, 1 << 16},
        {"--reps", CBF_BOPT_INT, &o->reps, .lo = 1, .hi = 64},
        {"--gib", CBF_BOPT_REAL, &o->gib, .lo = 1e-6, .hi = 8},
        {"--xb-channels", CBF_BOPT_INTS, o->xb_channels, &o->n_xb, MAX_LIST, 1, 1 << 20},
        {"--xb-heaps", CBF_BOPT_INTS, o->xb_heaps, &o->n_xh, MAX_LIST, 1, 1 << 16},
        {"--no-dither", CBF_BOPT_FLAG, &o->dither, .set = 0},
        {0},
    };
    return cbf_bench_parse("beam",
                           "usage: cbf-bench beam [--ants 64,256,1024] [--beams 8,64,256] [--reps N]\n"
                           "                      [--gib G] [--no-dither] [--xb-channels 128,512,1024]\n"
                           "                      [--xb-heaps 4,32]\n"
                           "Times the beamformer for every (antennas, beams) pair against the copy\n"
                           "rate and the cuBLAS fp32 and fp16 GEMM rates, measured in the same run,\n"
                           "then beside the correlator on the same input (the first beam count):\n"
                           "one call of --gib, and (the first antenna count) a stream of buffers of\n"
                           "an X-engine's channels and --xb-heaps heaps (batches) each; each with\n"
                           "the two kernels on one stream and on\n"
                           "two, and with cbf_xb_cuda_run (one kernel where the shape allows).\n",
                           argc, argv, table);
}

int cbf_bench_beam(int argc, char **argv)
{
    opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    struct cudaDeviceProp prop;
    if (cbf_bench_gpu("beam", &prop))
        return 1;
    cudaStream_t s, side;
    CK(cudaStreamCreate(&s));
    CK(cudaStreamCreate(&side));
    ceil_t cl;
    if (cbf_bench_copy_rate(s, &cl.copy_bps) || cbf_bench_gemm_rate(s, CBF_BENCH_GEMM_F32, &cl.f32_ops) ||
        cbf_bench_gemm_rate(s, CBF_BENCH_GEMM_F16, &cl.f16_ops))
        return 1;
    printf("GPU: %s (%d SMs); device-to-device copy %.3f TB/s; cuBLAS SGEMM 8192^3 %.1f TFLOP/s; fp16 "
           "tensor GEMM %.0f TFLOP/s (medians)\n",
           prop.name, prop.multiProcessorCount, cl.copy_bps / 1e12, cl.f32_ops / 1e12, cl.f16_ops / 1e12);
    printf("spectra_per_heap %d, %d heaps per call, dither %s; bound = (input once + output once) / copy "
           "rate; TFLOP/s = 8 N B x samples / time\n\n",
           SPECTRA, BATCHES, o.dither ? "on" : "off");
    printf("| N | B | channels | samples/call | ms | GB/s | bound ms | of bound | TFLOP/s | of SGEMM | "
           "of fp16 GEMM |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (int i = 0; i < o.n_ants; i++)
        for (int k = 0; k < o.n_beams; k++)
            if (bench_one(&o, o.ants[i], o.beams[k], &cl, s))
                return 1;
    printf("\nBeside the correlator (same input, 8-bit, automatic kernel): extra = time over the "
           "correlator alone\n\n");
    printf("| N | B | channels | correlator ms | beamformer ms | both, one stream ms | extra | both, two "
           "streams ms | extra | cbf_xb_cuda_run | ms | extra | xbengine (fuse: auto) | extra |\n| --- | --- | --- "
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (int i = 0; i < o.n_ants; i++)
        if (beside_one(&o, o.ants[i], o.beams[0], s, side))
            return 1;
    printf("\nBeside the correlator on a stream of buffers (heaps of an X-engine's channels, "
           "distinct buffers spanning 4x the %.0f MB L2): ms per buffer; extra = time over the correlator "
           "alone\n\n", prop.l2CacheSize / 1e6);
    printf("| N | B | channels | heaps | buffers | correlator ms | beamformer ms | both, one stream ms | extra | both, "
           "two streams ms | extra | cbf_xb_cuda_run | ms | extra | xbengine (fuse: auto) | extra |\n| --- | --- "
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    /* the first antenna count only: the small array, where the beams cost
     * most beside the correlator (and large N's accumulators would not fit) */
    for (int h = 0; h < o.n_xh; h++)
        for (int k = 0; k < o.n_xb; k++)
            if (beside_ring(&o, o.ants[0], o.beams[0], o.xb_channels[k], o.xb_heaps[h],
                            (size_t)prop.l2CacheSize, s, side))
                return 1;
    CK(cudaStreamDestroy(side));
    CK(cudaStreamDestroy(s));
    return 0;
}
