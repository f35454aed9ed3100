/* pfb plugin: one antenna of a "cbf.adc.packed" stream through the PFB FIR
 * (kernels/pfb), out as "cbf.feng.fir" buffers of a fixed number of spectra.
 *
 * Input chunks are appended to a staging area per polarisation (on the GPU
 * this copy is the upload); an output buffer is made as soon as the staging
 * holds every window it needs, then the samples no later window needs are
 * dropped by moving the tail to the front of a second staging area. Output
 * buffers sit at absolute multiples of `spectra_per_buffer` spectra, so the
 * output does not depend on the input chunk size. Spectrum g of pol p
 * starts at input sample g x step - coarse_delay[p] (the delay inverted).
 *
 * Narrowband: fed by ddc ("cbf.ddc.complex", complex float32 [pol][sample]
 * at fs / S) the same staging holds complex samples (64 "bits" each, so the
 * byte arithmetic is unchanged), step is 2 x channels complex samples, the
 * coarse delay counts ddc outputs (S digitiser samples each), and the
 * complex FIR (cbf_pfb_fir_complex_cpu / _cuda_run_complex) writes
 * [pol][spectrum][2 x step floats] for fft_post's complex mode. Timestamps
 * stay in digitiser samples (input and output x S). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cbf/cbf.h"
#include "pfb.h"
#ifdef CBF_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define MSG 512

typedef struct stage {
    uint8_t *data[2];     /* packed samples per pol (device memory on the GPU path) */
    uint8_t *present;     /* [pol][heap] */
} stage;

#define MAX_PENDING 16

/* A delay model per pol, in digitiser samples: delay d0 at output
 * timestamp t0 changing at `rate` samples per sample; phase ph0 at t0 in
 * radians changing at phr radians per sample. */
typedef struct delay_model {
    int64_t t0;
    double d0, rate, ph0, phr;
} delay_model;

typedef struct pfb_state {
    int channels, taps, bits, unzip, antenna, gpu;
    int cplx;             /* narrowband: complex input from ddc */
    int64_t scale;        /* digitiser samples per input sample (ddc decimation, else 1) */
    size_t row;           /* floats per output spectrum: step, or 2 x step when cplx */
    size_t step, window, spectra, heap, chunk, n_ant;
    int64_t delay[2];     /* coarse_delay parameter: the models' starting point */
    delay_model model[2]; /* in force, per pol */
    struct {
        delay_model m;
        int pol;          /* -1: both */
    } dpend[MAX_PENDING]; /* waiting for their timestamps, in time order */
    int n_dpend;
    int64_t *coarse;      /* [pol][spectrum] of the buffer being made */
    int aux_model;        /* aux carries the per-spectrum fine delay and phase */
    double rate;          /* digitiser samples per second */
    size_t headroom;      /* delay_headroom parameter */
    cbf_gauge *g_dbfs[2];
    cbf_counter *c_sections;
    float *weights;
    cbf_pfb_cuda *plan;
    void *stream;
    cbf_gpu_timer *timer;   /* a buffer's kernels: the gpu_ms_per_buffer gauge */
    cbf_gauge *g_gpu_ms;
    stage st[2];
    int cur;              /* which stage is live */
    size_t cap;           /* samples a stage holds */
    int started;
    int64_t first;        /* absolute sample of the live stage's start */
    size_t len;           /* samples in it */
    int64_t next_g;       /* first spectrum of the next output buffer */
    uint32_t *scratch;
    uint8_t *flags;       /* [pol][heaps] of the live stage, packed */
    cbf_pool *pool;
    cbf_counter *c_spectra, *c_missing, *c_gaps;
} pfb_state;

static const cbf_param_decl params[] = {
    {"channels", CBF_PARAM_INT, "4096", CBF_RANGE(64, 65536), NULL,
     "output channels (power of two); step = 2 x channels samples per spectrum"},
    {"taps", CBF_PARAM_INT, "16", CBF_RANGE(1, 16), NULL, "FIR taps per channel"},
    {"window", CBF_PARAM_CHOICE, "hann", CBF_NORANGE, "hann|rect", "prototype filter window"},
    {"w_cutoff", CBF_PARAM_FLOAT, "1.0", CBF_RANGE(0.01, 100), NULL,
     "sinc width scale of the prototype filter (SPEC.md)"},
    {"antenna", CBF_PARAM_INT, "0", CBF_RANGE(0, 65535), NULL,
     "which antenna of the input this F-engine channelises"},
    {"unzip", CBF_PARAM_INT, "0", CBF_RANGE(0, 4), NULL,
     "FFT unzipping factor 1, 2 or 4; 0 chooses (complex transforms <= 8192 points)"},
    {"spectra_per_buffer", CBF_PARAM_INT, "256", CBF_RANGE(1, 1 << 20), NULL,
     "spectra per output buffer (a multiple of fft_post's spectra_per_heap)"},
    {"coarse_delay", CBF_PARAM_INT_LIST, "[0, 0]", CBF_RANGE(-(1 << 24), 1 << 24), NULL,
     "whole-sample delay per polarisation: spectrum g reads from sample g x step - delay "
     "(narrowband: in ddc output samples, decimation digitiser samples each)"},
    {"delay_headroom", CBF_PARAM_INT, "262144", CBF_RANGE(0, 1 << 26), NULL,
     "staging kept for delay models (samples): bounds the difference between the pols' "
     "delays and the step a new model may make"},
};

static const cbf_port_decl ports[] = {
    {"in", CBF_PORT_IN, "*", 0, 0,
     "cbf.adc.packed digitiser samples (all antennas: wideband), or cbf.ddc.complex from ddc "
     "(narrowband)"},
    {"out", CBF_PORT_OUT, "cbf.feng.fir", 0, 0,
     "FIR output [pol][spectrum][2 x channels] float32, unzipped for fft_post "
     "(narrowband: [pol][spectrum][4 x channels], 2 x channels complex)"},
};

static int attr(const cbf_port_desc *d, const char *name, double *v, cbf_error *err)
{
    if (cbf_port_desc_get_attr(d, name, v))
        return cbf_error_set(err, CBF_ECONFIG, "input has no '%s' attribute", name);
    return 0;
}

static int kern(int rc, const char *msg, cbf_error *err)
{
    return rc ? cbf_error_set(err, rc, "%s", msg) : 0;
}

#ifdef CBF_HAVE_CUDA
static int cuda_ok(cudaError_t e, const char *what, cbf_error *err)
{
    if (e == cudaSuccess)
        return 0;
    return cbf_error_set(err, CBF_ECUDA, "%s: %s", what, cudaGetErrorString(e));
}
#endif

static int alloc_bytes(pfb_state *s, uint8_t **p, size_t n, cbf_error *err)
{
    (void)s; /* only the GPU path looks at it */
#ifdef CBF_HAVE_CUDA
    if (s->gpu)
        return cuda_ok(cudaMalloc((void **)p, n), "pfb: staging cudaMalloc", err);
#endif
    *p = malloc(n);
    return *p ? 0 : cbf_error_set(err, CBF_ENOMEM, "pfb: staging of %zu bytes", n);
}

static void free_bytes(pfb_state *s, uint8_t *p)
{
    (void)s;
#ifdef CBF_HAVE_CUDA
    if (s->gpu) {
        cudaFree(p);
        return;
    }
#endif
    free(p);
}

/* Copies n bytes; `kind` is where src lives. Staging is device memory on the
 * GPU path and host memory otherwise. */
static int copy_bytes(pfb_state *s, void *dst, const void *src, size_t n, cbf_mem_kind kind,
                      cbf_error *err)
{
    (void)s;
#ifdef CBF_HAVE_CUDA
    if (s->gpu) {
        enum cudaMemcpyKind k = kind == CBF_MEM_DEVICE ? cudaMemcpyDeviceToDevice
                                                       : cudaMemcpyHostToDevice;
        return cuda_ok(cudaMemcpyAsync(dst, src, n, k, (cudaStream_t)s->stream),
                       "pfb: staging copy", err);
    }
#endif
    if (kind == CBF_MEM_DEVICE)
        return cbf_error_set(err, CBF_ENOTSUP, "pfb: device input on the CPU path");
    memcpy(dst, src, n);
    return 0;
}

/* Packed digitiser input (wideband). */
static int packed_input(pfb_state *s, const cbf_params *p, const cbf_port_desc *in, double *rate,
                        cbf_error *err)
{
    double spc, heap;
    int rc;
    if ((rc = attr(in, "adc_sample_rate", rate, err)) || (rc = attr(in, "samples_per_chunk", &spc, err)) ||
        (rc = attr(in, "heap_samples", &heap, err)))
        return rc;
    s->bits = in->bits;
    s->chunk = (size_t)spc;
    s->heap = (size_t)heap;
    s->n_ant = in->ndim == 3 ? in->shape[0] : 0;
    if (in->dtype != CBF_DTYPE_PACKED || in->ndim != 3 || in->shape[1] != 2 ||
        in->shape[2] != s->chunk * (size_t)s->bits / 8)
        return cbf_error_set(err, CBF_ECONFIG, "pfb: input is not [antenna][2 pols][bytes] of "
                             "%zu packed samples", s->chunk);
    if (!cbf_pfb_bits_ok(s->bits))
        return cbf_error_set(err, CBF_ECONFIG, "pfb: %d-bit input: supported widths are 2-10, "
                             "12 and 16", s->bits);
    if ((size_t)s->antenna >= s->n_ant)
        return cbf_error_set(err, CBF_ECONFIG, "%s: antenna %d: the input has %zu",
                             cbf_params_where(p, "antenna"), s->antenna, s->n_ant);
    if (!s->heap || s->heap % 8 || s->chunk % s->heap || in->n_present != s->n_ant * 2 * (s->chunk / s->heap))
        return cbf_error_set(err, CBF_ECONFIG, "pfb: input heaps of %zu samples do not tile "
                             "chunks of %zu with one flag each", s->heap, s->chunk);
    return 0;
}

/* Complex ddc output (narrowband): one antenna, [pol][sample] complex
 * float32, one presence flag per block of outputs_per_block for both pols.
 * A complex sample is 8 bytes: bits = 64 keeps the staging arithmetic. */
static int complex_input(pfb_state *s, const cbf_params *p, const cbf_port_desc *in, double *rate,
                         cbf_error *err)
{
    double dec, block, ant = 0;
    int rc;
    if ((rc = attr(in, "adc_sample_rate", rate, err)) || (rc = attr(in, "decimation", &dec, err)) ||
        (rc = attr(in, "outputs_per_block", &block, err)))
        return rc;
    cbf_port_desc_get_attr(in, "antenna", &ant);
    s->cplx = 1;
    s->scale = (int64_t)dec;
    s->bits = 64;
    s->n_ant = 1;
    s->antenna = (int)ant;
    s->heap = (size_t)block;
    s->chunk = in->ndim == 2 ? in->shape[1] : 0;
    if (in->ndim != 2 || in->shape[0] != 2 || s->scale < 1)
        return cbf_error_set(err, CBF_ECONFIG, "pfb: complex input is not [2 pols][sample] "
                             "from ddc");
    if (!s->heap || s->heap % 8 || s->chunk % s->heap || in->n_present != s->chunk / s->heap)
        return cbf_error_set(err, CBF_ECONFIG, "pfb: ddc blocks of %zu outputs do not tile "
                             "buffers of %zu with one flag each", s->heap, s->chunk);
    if (s->unzip != 1 && cbf_params_int(p, "unzip") != 0)
        return cbf_error_set(err, CBF_ECONFIG, "%s: unzip %d: narrowband input transforms all "
                             "2 x channels points at once (unzip 0 or 1)",
                             cbf_params_where(p, "unzip"), s->unzip);
    s->unzip = 1;
    return 0;
}

static int init(cbf_node *node, cbf_error *err)
{
    const cbf_params *p = cbf_node_params(node);
    pfb_state *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "pfb: state");
    cbf_node_set_state(node, s);
    char msg[MSG];
    s->channels = (int)cbf_params_int(p, "channels");
    s->taps = (int)cbf_params_int(p, "taps");
    s->antenna = (int)cbf_params_int(p, "antenna");
    s->spectra = (size_t)cbf_params_int(p, "spectra_per_buffer");
    s->unzip = (int)cbf_params_int(p, "unzip");
    if (s->unzip == 0)
        s->unzip = cbf_pfb_auto_unzip(s->channels);
    if ((s->unzip != 1 && s->unzip != 2 && s->unzip != 4) || s->channels / s->unzip < 32)
        return cbf_error_set(err, CBF_ECONFIG, "%s: unzip %d: must be 0, 1, 2 or 4, with "
                             "channels / unzip >= 32", cbf_params_where(p, "unzip"), s->unzip);
    if (cbf_params_len(p, "coarse_delay") != 2)
        return cbf_error_set(err, CBF_ECONFIG, "%s: coarse_delay needs two values (pol 0, pol 1)",
                             cbf_params_where(p, "coarse_delay"));
    for (int q = 0; q < 2; q++)
        s->delay[q] = cbf_params_int_at(p, "coarse_delay", (size_t)q);
    s->step = 2 * (size_t)s->channels;
    s->window = s->step * (size_t)s->taps;

    const cbf_port_desc *in = cbf_port_get_desc(cbf_node_port(node, "in", 0));
    double rate;
    int rc;
    s->scale = 1;
    if (in->dtype != CBF_DTYPE_CF32 && in->dtype != CBF_DTYPE_PACKED)
        return cbf_error_set(err, CBF_ECONFIG, "pfb: input is neither packed digitiser samples "
                             "(cbf.adc.packed) nor complex ddc output (cbf.ddc.complex)");
    if (in->dtype == CBF_DTYPE_CF32)
        rc = complex_input(s, p, in, &rate, err);
    else
        rc = packed_input(s, p, in, &rate, err);
    if (rc)
        return rc;
    s->row = s->cplx ? 2 * s->step : s->step;

    s->weights = malloc(sizeof(float) * s->window);
    if (!s->weights)
        return cbf_error_set(err, CBF_ENOMEM, "pfb: weights");
    const char *win = cbf_params_string(p, "window");
    rc = cbf_pfb_weights(s->channels, s->taps, cbf_params_float(p, "w_cutoff"),
                         strcmp(win, "rect") ? CBF_PFB_HANN : CBF_PFB_RECT, s->weights, msg, MSG);
    if (rc)
        return cbf_error_set(err, CBF_ECONFIG, "%s: %s", cbf_params_where(p, "channels"), msg);

    s->gpu = cbf_node_use_gpu(node);
#ifdef CBF_HAVE_CUDA
    if (s->gpu) {
        cudaStream_t st;
        if ((rc = cuda_ok(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "pfb: stream", err)))
            return rc;
        s->stream = st;
        if ((rc = cbf_gpu_timer_create(&s->timer, err)))
            return rc;
        s->g_gpu_ms = cbf_node_gauge(node, "gpu_ms_per_buffer");
        if ((rc = kern(cbf_pfb_cuda_create(s->channels, s->taps, s->weights, &s->plan, msg, MSG), msg, err)))
            return rc;
    }
#else
    if (s->gpu)
        return cbf_error_set(err, CBF_ENOTSUP, "pfb: built without CUDA");
#endif
    /* A stage holds one output buffer's windows, the spread of the two
     * delays, an input chunk and a heap of alignment slack on each side. */
    int64_t spread = s->delay[0] > s->delay[1] ? s->delay[0] - s->delay[1] : s->delay[1] - s->delay[0];
    s->headroom = (size_t)cbf_params_int(p, "delay_headroom");
    s->cap = s->spectra * s->step + s->window + (size_t)spread + s->chunk + 2 * s->heap + s->headroom;
    s->cap = (s->cap + s->heap - 1) / s->heap * s->heap;
    size_t heaps = s->cap / s->heap;
    for (int k = 0; k < 2; k++) {
        s->st[k].present = calloc(2 * heaps, 1);
        if (!s->st[k].present)
            return cbf_error_set(err, CBF_ENOMEM, "pfb: flags");
        for (int q = 0; q < 2; q++)
            if ((rc = alloc_bytes(s, &s->st[k].data[q], cbf_pfb_packed_bytes(s->cap, s->bits), err)))
                return rc;
    }
    s->scratch = malloc(sizeof(uint32_t) * (heaps + 1));
    s->flags = malloc(2 * heaps);
    if (!s->scratch || !s->flags)
        return cbf_error_set(err, CBF_ENOMEM, "pfb: scratch");

    cbf_port_desc d;
    cbf_port_desc_init(&d, CBF_DTYPE_F32, s->gpu ? CBF_MEM_DEVICE : CBF_MEM_HOST);
    cbf_port_desc_add_axis(&d, "pol", 2);
    cbf_port_desc_add_axis(&d, "spectrum", s->spectra);
    cbf_port_desc_add_axis(&d, "sample", s->row);
    d.n_present = s->spectra;
    d.present_axis = "spectrum";
    /* Wideband: the delay model evaluated per spectrum goes to fft_post
     * with the buffer, so each buffer carries its own values (double
     * buffering per output item, as the seed does it). */
    s->aux_model = !s->cplx;
    d.aux_size = s->aux_model ? 3 * sizeof(uint64_t) + 4 * sizeof(float) * s->spectra
                              : 2 * sizeof(uint64_t);
    d.aux_layout = s->aux_model ? "u64[pol] power_sum, u64 rotate, f32[pol][spectrum][2] "
                                  "delay_phase (fine delay in samples, phase in radians)"
                                : "u64[pol] power_sum";
    d.timestamp_step = (int64_t)(s->spectra * s->step) * s->scale;
    cbf_port_desc_set_attr(&d, "channels", s->channels);
    cbf_port_desc_set_attr(&d, "unzip", s->unzip);
    cbf_port_desc_set_attr(&d, "taps", s->taps);
    cbf_port_desc_set_attr(&d, "samples_between_spectra", (double)s->step * (double)s->scale);
    cbf_port_desc_set_attr(&d, "adc_sample_rate", rate);
    cbf_port_desc_set_attr(&d, "antenna", s->antenna);
    if (s->cplx) {
        /* fft_post switches to its complex mode on `decimation`. */
        static const char *const pass[] = {"decimation", "centre_frequency", "bandwidth",
                                           "group_delay"};
        for (size_t i = 0; i < CBF_COUNT_OF(pass); i++) {
            double v;
            if (!cbf_port_desc_get_attr(in, pass[i], &v))
                cbf_port_desc_set_attr(&d, pass[i], v);
        }
    } else {
        cbf_port_desc_set_attr(&d, "bits", s->bits);
    }
    cbf_port_desc_set_attr(&d, "coarse_delay_pol0", (double)s->delay[0]);
    cbf_port_desc_set_attr(&d, "coarse_delay_pol1", (double)s->delay[1]);
    if ((rc = cbf_port_set_desc(cbf_node_port(node, "out", 0), &d, err)))
        return rc;
    cbf_pool_config pc = {"out", d.mem, 4, cbf_port_desc_bytes(&d), d.n_present, d.aux_size};
    if ((rc = cbf_node_pool_create(node, &pc, &s->pool, err)))
        return rc;
    s->c_spectra = cbf_node_counter(node, "spectra");
    s->c_missing = cbf_node_counter(node, "missing_spectra");
    s->c_gaps = cbf_node_counter(node, "input_gaps");
    s->c_sections = cbf_node_counter(node, "coarse_delay_changes");
    s->g_dbfs[0] = cbf_node_gauge(node, "rms_dbfs_pol0");
    s->g_dbfs[1] = cbf_node_gauge(node, "rms_dbfs_pol1");
    s->rate = rate;
    for (int q = 0; q < 2; q++)
        s->model[q] = (delay_model){0, (double)s->delay[q], 0, 0, 0};
    if (!(s->coarse = malloc(sizeof(int64_t) * 2 * s->spectra)))
        return cbf_error_set(err, CBF_ENOMEM, "pfb: coarse delays");
    return 0;
}

/* Moves the live stage's samples from `keep` (absolute, heap aligned) on
 * to the front of the other stage. */
static int shift_stage(pfb_state *s, int64_t keep, cbf_error *err)
{
    if (keep <= s->first)
        return 0;
    size_t drop = (size_t)(keep - s->first);
    if (drop > s->len)
        drop = s->len;
    size_t left = s->len - drop, heaps = s->cap / s->heap;
    stage *a = &s->st[s->cur], *b = &s->st[!s->cur];
    for (int q = 0; q < 2; q++) {
        int rc = copy_bytes(s, b->data[q], a->data[q] + drop / 8 * (size_t)s->bits,
                            left / 8 * (size_t)s->bits, s->gpu ? CBF_MEM_DEVICE : CBF_MEM_HOST, err);
        if (rc)
            return rc;
        memcpy(b->present + (size_t)q * heaps, a->present + (size_t)q * heaps + drop / s->heap,
               left / s->heap);
    }
    s->cur = !s->cur;
    s->first += (int64_t)drop;
    s->len = left;
    return 0;
}

/* Appends `heaps` heaps of one input buffer (or missing ones when buf is
 * NULL: a gap in the input). */
static int append(pfb_state *s, const cbf_buffer *buf, size_t heaps, cbf_error *err)
{
    stage *a = &s->st[s->cur];
    size_t cap_heaps = s->cap / s->heap, at = s->len / s->heap;
    size_t chunk_heaps = s->chunk / s->heap, slab = s->chunk / 8 * (size_t)s->bits;
    for (int q = 0; q < 2; q++) {
        /* ddc output holds one antenna, and one flag per block for both pols. */
        size_t idx = s->cplx ? (size_t)q : ((size_t)s->antenna * 2 + (size_t)q);
        size_t fidx = s->cplx ? 0 : idx;
        if (buf) {
            int rc = copy_bytes(s, a->data[q] + s->len / 8 * (size_t)s->bits,
                                (const uint8_t *)buf->data + idx * slab, slab, buf->kind, err);
            if (rc)
                return rc;
        }
        for (size_t h = 0; h < heaps; h++)
            a->present[(size_t)q * cap_heaps + at + h] =
                buf ? buf->present[fidx * chunk_heaps + h] : 0;
    }
    s->len += heaps * s->heap;
    return 0;
}

/* The delay model of pol q that spectrum g follows: the newest pending
 * model valid by its timestamp, else the one in force. */
static const delay_model *model_for(const pfb_state *s, int q, int64_t g)
{
    const int64_t t = g * (int64_t)s->step;
    const delay_model *m = &s->model[q];
    for (int i = 0; i < s->n_dpend && s->dpend[i].m.t0 <= t; i++)
        if (s->dpend[i].pol < 0 || s->dpend[i].pol == q)
            m = &s->dpend[i].m;
    return m;
}

/* The model inverted for spectrum g (output timestamp t = g step): its
 * window starts `coarse` samples early, the nearest whole sample to the
 * delay d(t) = d0 + rate (t - t0); what is left, d - coarse in
 * [-1/2, 1/2], and the phase phi0 + phase_rate (t - t0) go to fft_post. */
static int64_t eval_model(const delay_model *m, int64_t g, int64_t step, float *fine, float *phase)
{
    double dt = (double)(g * step - m->t0);
    double d = m->d0 + m->rate * dt;
    double c = floor(d + 0.5);
    if (fine)
        *fine = (float)(d - c);
    if (phase)
        *phase = (float)remainder(m->ph0 + m->phr * dt, 2 * M_PI);
    return (int64_t)c;
}

static int64_t coarse_of(const pfb_state *s, int q, int64_t g)
{
    return eval_model(model_for(s, q, g), g, (int64_t)s->step, NULL, NULL);
}

/* Smallest and largest coarse delay over the spectra [g, g + n), both pols. */
static void coarse_range(const pfb_state *s, int64_t g, size_t n, int64_t *lo, int64_t *hi)
{
    *lo = INT64_MAX;
    *hi = INT64_MIN;
    for (int q = 0; q < 2; q++)
        for (size_t v = 0; v < n; v++) {
            int64_t c = coarse_of(s, q, g + (int64_t)v);
            *lo = c < *lo ? c : *lo;
            *hi = c > *hi ? c : *hi;
        }
}

/* FIR of the spectra [v, v + n) of the output buffer, whose windows start
 * at stage offsets a[q] + (i - v) step: one section of constant coarse
 * delay. Spectra whose windows begin before the stage are not computed;
 * their presence flags say missing. */
static int fir_section(pfb_state *s, stage *st, cbf_buffer *out, const int64_t a[2], size_t v,
                       size_t n, uint64_t power[2], cbf_error *err)
{
    char msg[MSG];
    size_t v0 = 0;
    for (int q = 0; q < 2; q++)
        while (a[q] + (int64_t)(v0 * s->step) < 0 && v0 < n)
            v0++;
    if (v0 == n)
        return 0;
    int64_t start[2] = {a[0] + (int64_t)(v0 * s->step), a[1] + (int64_t)(v0 * s->step)};
    if (s->cplx) {
        cbf_pfb_cjob job = {s->channels, s->taps, {(const float *)st->data[0], (const float *)st->data[1]},
                            s->len, {start[0], start[1]}, n - v0,
                            (float *)out->data + (v + v0) * s->row, s->spectra * s->row};
#ifdef CBF_HAVE_CUDA
        if (s->gpu)
            return kern(cbf_pfb_cuda_run_complex(s->plan, &job, s->stream, msg, MSG), msg, err);
#endif
        return kern(cbf_pfb_fir_complex_cpu(&job, s->weights, msg, MSG), msg, err);
    }
    cbf_pfb_job job = {s->channels, s->taps, s->bits, s->unzip, {st->data[0], st->data[1]},
                       s->len, {start[0], start[1]}, n - v0,
                       (float *)out->data + (v + v0) * s->step, s->spectra * s->step};
#ifdef CBF_HAVE_CUDA
    if (s->gpu)
        return kern(cbf_pfb_cuda_run(s->plan, &job, s->stream, msg, MSG), msg, err);
#endif
    return kern(cbf_pfb_fir_cpu(&job, s->weights, power, msg, MSG), msg, err);
}

/* Models whose timestamp the buffer starting at spectrum g reaches become
 * the ones in force (after the buffer has used them per spectrum). */
static void promote_models(pfb_state *s, int64_t g)
{
    const int64_t t = g * (int64_t)s->step;
    int k = 0;
    while (k < s->n_dpend && s->dpend[k].m.t0 <= t) {
        for (int q = 0; q < 2; q++)
            if (s->dpend[k].pol < 0 || s->dpend[k].pol == q)
                s->model[q] = s->dpend[k].m;
        k++;
    }
    memmove(&s->dpend[0], &s->dpend[k], sizeof s->dpend[0] * (size_t)(s->n_dpend - k));
    s->n_dpend -= k;
}

/* Digitiser power of one buffer's owned samples as RMS in dB of full scale. */
static void set_power_gauges(pfb_state *s, const uint64_t power[2])
{
    double fs = (double)(1ull << (s->bits - 1)), n = (double)(s->spectra * s->step);
    for (int q = 0; q < 2; q++)
        cbf_gauge_set(s->g_dbfs[q], power[q] ? 10.0 * log10((double)power[q] / n / (fs * fs)) : -INFINITY);
}

/* Makes the output buffer for spectra [next_g, next_g + spectra), in
 * sections of constant coarse delay (both pols), as the delay models say. */
static int produce(cbf_node *node, pfb_state *s, cbf_error *err)
{
    char msg[MSG];
    cbf_buffer *out;
    int rc = cbf_pool_get(s->pool, &out);
    if (rc)
        return rc;
    float *sd = s->aux_model ? (float *)((uint64_t *)out->aux + 3) : NULL;
    bool rotate = false;
    for (int q = 0; q < 2; q++)
        for (size_t v = 0; v < s->spectra; v++) {
            float fine = 0, ph = 0;
            int64_t g = s->next_g + (int64_t)v;
            s->coarse[q * s->spectra + v] = eval_model(model_for(s, q, g), g, (int64_t)s->step, &fine, &ph);
            if (sd) {
                sd[2 * (q * s->spectra + v)] = fine;
                sd[2 * (q * s->spectra + v) + 1] = ph;
                rotate |= fine != 0 || ph != 0;
            }
        }
    size_t heaps = s->len / s->heap, cap_heaps = s->cap / s->heap;
    stage *st = &s->st[s->cur];
    /* The kernel helper wants [pol][heaps] with no gap between the pols. */
    memcpy(s->flags, st->present, heaps);
    memcpy(s->flags + heaps, st->present + cap_heaps, heaps);
    uint64_t power[2] = {0, 0};
    size_t sections = 0;
#ifdef CBF_HAVE_CUDA
    if (s->gpu)
        rc = cbf_gpu_timer_start(s->timer, s->stream, err);
#endif
    for (size_t v = 0, e; v < s->spectra && !rc; v = e) {
        const int64_t *c0 = &s->coarse[v], *c1 = &s->coarse[s->spectra + v];
        for (e = v + 1; e < s->spectra && s->coarse[e] == *c0 && s->coarse[s->spectra + e] == *c1; e++)
            ;
        int64_t a[2];
        for (int q = 0; q < 2; q++)
            a[q] = (s->next_g + (int64_t)v) * (int64_t)s->step - (q ? *c1 : *c0) - s->first;
        rc = kern(cbf_pfb_spectrum_presence(s->flags, heaps, s->heap, a, s->step, s->window,
                                            e - v, s->scratch, out->present + v, msg, MSG),
                  msg, err);
        if (!rc)
            rc = fir_section(s, st, out, a, v, e - v, power, err);
        sections++;
    }
#ifdef CBF_HAVE_CUDA
    if (!rc && s->gpu)
        rc = cbf_gpu_timer_stop(s->timer, s->stream, err);
    /* Waits for the stream (wideband); the timer is read after that. */
    if (!rc && s->gpu && !s->cplx)
        rc = kern(cbf_pfb_cuda_power(s->plan, s->stream, power, msg, MSG), msg, err);
    if (!rc && s->gpu)
        rc = cbf_buffer_record(out, s->stream, err);
    if (!rc && s->gpu && !s->cplx)
        cbf_gauge_set(s->g_gpu_ms, cbf_gpu_timer_ms(s->timer));
#endif
    if (rc) {
        cbf_buffer_unref(out);
        return rc;
    }
    if (sections > 1)
        cbf_counter_add(s->c_sections, sections - 1);
    out->n_present = s->spectra;
    out->timestamp = s->next_g * (int64_t)s->step * s->scale;
    out->seq = (uint64_t)(s->next_g / (int64_t)s->spectra);
    out->missing = 0;
    for (size_t i = 0; i < s->spectra; i++)
        out->missing += !out->present[i];
    memcpy(out->aux, power, sizeof power);
    if (sd)
        ((uint64_t *)out->aux)[2] = rotate;
    if (!s->cplx)
        set_power_gauges(s, power);
    cbf_counter_add(s->c_spectra, s->spectra);
    cbf_counter_add(s->c_missing, out->missing);
    s->next_g += (int64_t)s->spectra;
    promote_models(s, s->next_g);
    if ((rc = cbf_port_send(cbf_node_port(node, "out", 0), out)))
        return rc;
    /* Keep what the next buffer's earliest window needs, from a heap
     * boundary, and half the headroom more: a model requested later may
     * step the delay by that much (on_request refuses larger steps), and
     * its windows then still find their samples. */
    int64_t lo, hi;
    coarse_range(s, s->next_g, s->spectra, &lo, &hi);
    int64_t keep = s->next_g * (int64_t)s->step - hi - (int64_t)(s->headroom / 2);
    keep -= ((keep % (int64_t)s->heap) + (int64_t)s->heap) % (int64_t)s->heap;
    return shift_stage(s, keep, err);
}

/* Whether the live stage holds every window of the next output buffer. */
static int ready(const pfb_state *s)
{
    int64_t lo, hi;
    coarse_range(s, s->next_g, s->spectra, &lo, &hi);
    int64_t end = (s->next_g + (int64_t)s->spectra - 1) * (int64_t)s->step - lo + (int64_t)s->window;
    return end <= s->first + (int64_t)s->len;
}

/* The first output buffer: the one holding the first spectrum whose
 * windows begin inside the input, at a multiple of spectra_per_buffer so
 * that buffers do not depend on the chunking. */
static void start_at(pfb_state *s, int64_t ts)
{
    s->started = 1;
    s->first = ts;
    s->len = 0;
    int64_t g = 0;
    /* The delay at the start: the models in force (or pending) there. */
    for (int it = 0; it < 2; it++) {
        int64_t lo, hi;
        coarse_range(s, g, 1, &lo, &hi);
        g = (ts + hi + (int64_t)s->step - 1) / (int64_t)s->step;
        if (g < 0)
            g = 0;
    }
    s->next_g = g / (int64_t)s->spectra * (int64_t)s->spectra;
}

/* A gap in the input: missing heaps stand in for it (so the spectra that
 * touch it go out flagged) unless it is longer than a few output buffers;
 * then the stream starts afresh at the new timestamp. */
static int fill_gap(cbf_node *node, pfb_state *s, int64_t ts, cbf_error *err)
{
    int64_t expect = s->first + (int64_t)s->len;
    cbf_counter_add(s->c_gaps, 1);
    if (ts < expect || ts - expect > (int64_t)(4 * s->spectra * s->step + s->window)) {
        cbf_log_warn("pfb: input jumps from digitiser sample %lld to %lld: restarting",
                     (long long)(expect * s->scale), (long long)(ts * s->scale));
        start_at(s, ts);
        return 0;
    }
    for (size_t gap = (size_t)(ts - expect) / s->heap; gap; gap--) {
        int rc = 0;
        while (!rc && ready(s))
            rc = produce(node, s, err);
        if (!rc && s->len + s->heap + s->chunk > s->cap)
            rc = cbf_error_set(err, CBF_EINTERNAL, "pfb: staging full while filling a gap");
        if (!rc)
            rc = append(s, NULL, 1, err);
        if (rc)
            return rc;
    }
    return 0;
}

static int take(cbf_node *node, pfb_state *s, cbf_buffer *buf, cbf_error *err)
{
    /* In input samples (ddc outputs when narrowband). */
    int64_t ts = buf->timestamp / s->scale;
    if (buf->timestamp % s->scale || ts % (int64_t)s->heap)
        return cbf_error_set(err, CBF_EINVAL, "pfb: input timestamp %lld is not a multiple of "
                             "the heap size %zu x %lld", (long long)buf->timestamp, s->heap,
                             (long long)s->scale);
    int rc = 0;
    if (!s->started)
        start_at(s, ts);
    else if (ts != s->first + (int64_t)s->len)
        rc = fill_gap(node, s, ts, err);
#ifdef CBF_HAVE_CUDA
    if (!rc && s->gpu && buf->event)
        rc = cbf_buffer_wait_stream(buf, s->stream, err);
#endif
    if (!rc && !s->gpu && buf->kind != CBF_MEM_HOST)
        rc = cbf_buffer_sync_host(buf, err);
    if (!rc)
        rc = s->len + s->chunk > s->cap
                 ? cbf_error_set(err, CBF_EINVAL, "pfb: the delay models need more staging than "
                                 "delay_headroom (%zu samples) leaves", s->headroom)
                 : append(s, buf, s->chunk / s->heap, err);
#ifdef CBF_HAVE_CUDA
    /* The upload must finish before the input buffer goes back. */
    if (!rc && s->gpu)
        rc = cuda_ok(cudaStreamSynchronize((cudaStream_t)s->stream), "pfb: upload", err);
#endif
    while (!rc && ready(s))
        rc = produce(node, s, err);
    return rc;
}

static int run(cbf_node *node, cbf_error *err)
{
    pfb_state *s = cbf_node_state(node);
    cbf_port *in = cbf_node_port(node, "in", 0);
    for (;;) {
        cbf_buffer *buf;
        int rc = cbf_port_recv(in, &buf);
        if (rc == CBF_EOS)
            return 0;
        if (rc)
            return rc;
        rc = take(node, s, buf, err);
        cbf_buffer_unref(buf);
        if (rc)
            return rc;
    }
}

static void fini(cbf_node *node)
{
    pfb_state *s = cbf_node_state(node);
    if (!s)
        return;
    for (int k = 0; k < 2; k++) {
        for (int q = 0; q < 2; q++)
            free_bytes(s, s->st[k].data[q]);
        free(s->st[k].present);
    }
#ifdef CBF_HAVE_CUDA
    cbf_pfb_cuda_destroy(s->plan);
    if (s->stream)
        cudaStreamDestroy((cudaStream_t)s->stream);
    cbf_gpu_timer_destroy(s->timer);
#endif
    free(s->weights);
    free(s->coarse);
    free(s->scratch);
    free(s->flags);
    free(s);
}

static const cbf_param_decl delay_args[] = {
    {"delay", CBF_PARAM_FLOAT, NULL, CBF_RANGE(-1, 1), NULL,
     "delay in seconds at `at` (a delay d: the output at time t shows the input at t - d)"},
    {"delay_rate", CBF_PARAM_FLOAT, "0", CBF_RANGE(-1e-3, 1e-3), NULL, "delay rate, seconds per second"},
    {"phase", CBF_PARAM_FLOAT, "0", CBF_RANGE(-1e6, 1e6), NULL, "phase in radians at `at`"},
    {"phase_rate", CBF_PARAM_FLOAT, "0", CBF_RANGE(-1e12, 1e12), NULL, "phase rate, radians per second"},
    {"pol", CBF_PARAM_INT, "-1", CBF_RANGE(-1, 1), NULL, "polarisation 0 or 1; -1: both"},
    {"at", CBF_PARAM_INT, "-1", CBF_RANGE(-1, 9.2e18), NULL,
     "digitiser timestamp the model is valid from (and its reference time); -1: the next spectrum"},
};

static const cbf_request_decl requests[] = {
    {"delays", delay_args, CBF_COUNT_OF(delay_args),
     "load a delay model (delay, rate, phase, phase rate) valid from a timestamp"},
};

/* On the node's thread, between buffers: checks a delay model against what
 * the staging allows and what has been processed, then queues it. Every
 * refusal leaves the models as they were. */
static int on_request(cbf_node *node, const cbf_request *req, cbf_reply *reply, cbf_error *err)
{
    pfb_state *s = cbf_node_state(node);
    const cbf_params *p = cbf_request_args(req);
    if (s->cplx)
        return cbf_error_set(err, CBF_ENOTSUP, "delays: delay models are wideband only in this "
                             "version (set coarse_delay for a narrowband pfb)");
    if (!(s->rate > 0))
        return cbf_error_set(err, CBF_EINVAL, "delays: the input has no adc_sample_rate");
    int pol = (int)cbf_params_int(p, "pol");
    int64_t at = cbf_params_int(p, "at");
    const int64_t S = (int64_t)s->step, next = s->next_g * S;
    if (at < 0)
        at = s->started ? next : 0;
    if (s->started && at < next)
        return cbf_error_set(err, CBF_EINVAL, "delays: timestamp %lld has already been processed "
                             "(the next spectrum is at %lld)", (long long)at, (long long)next);
    if (s->n_dpend && at < s->dpend[s->n_dpend - 1].m.t0)
        return cbf_error_set(err, CBF_EINVAL, "delays: a model is already pending from %lld; a "
                             "later one cannot start before it (%lld)",
                             (long long)s->dpend[s->n_dpend - 1].m.t0, (long long)at);
    if (s->n_dpend == MAX_PENDING)
        return cbf_error_set(err, CBF_EINVAL, "delays: %d models are pending already", MAX_PENDING);
    delay_model m = {at, cbf_params_float(p, "delay") * s->rate, cbf_params_float(p, "delay_rate"),
                     cbf_params_float(p, "phase"), cbf_params_float(p, "phase_rate") / s->rate};
    /* What the staging must hold: the pols' delays apart and the step from
     * the model in force, each within half the headroom, and the drift over
     * one output buffer within a quarter. */
    const double half = (double)s->headroom / 2, span = (double)(s->spectra * s->step);
    const int64_t ga = (at + S - 1) / S;
    for (int q = 0; q < 2; q++) {
        if (pol >= 0 && q != pol)
            continue;
        const delay_model *old = model_for(s, q, ga), *other = model_for(s, !q, ga);
        double d_old = old->d0 + old->rate * (double)(at - old->t0);
        double d_other = pol < 0 ? m.d0 : other->d0 + other->rate * (double)(at - other->t0);
        if (fabs(m.d0) > (double)(1 << 24))
            return cbf_error_set(err, CBF_EINVAL, "delays: %g samples is beyond the +-2^24 samples "
                                 "a coarse delay may be", m.d0);
        if (fabs(m.d0 - d_old) > half || fabs(m.d0 - d_other) > half)
            return cbf_error_set(err, CBF_EINVAL, "delays: pol %d would step by %.1f samples (the "
                                 "other pol is %.1f away); delay_headroom %zu allows %.0f", q,
                                 m.d0 - d_old, m.d0 - d_other, s->headroom, half);
        if (fabs(m.rate) * span > half / 2)
            return cbf_error_set(err, CBF_EINVAL, "delays: a rate of %g moves the delay by %.1f "
                                 "samples per output buffer; delay_headroom %zu allows %.0f",
                                 m.rate, fabs(m.rate) * span, s->headroom, half / 2);
    }
    s->dpend[s->n_dpend].m = m;
    s->dpend[s->n_dpend++].pol = pol;
    float fine, ph;
    int64_t c = eval_model(&m, ga, S, &fine, &ph);
    cbf_reply_int(reply, "at", at);
    cbf_reply_int(reply, "spectrum", ga);
    cbf_reply_int(reply, "coarse_delay", c);
    cbf_reply_float(reply, "fine_delay", fine);
    cbf_reply_int(reply, "pending", s->n_dpend);
    return 0;
}

static const cbf_plugin_desc desc = {
    CBF_PLUGIN_ABI, "pfb", "0.1.0",
    "PFB FIR: wideband (packed-sample decode, digitiser power) or narrowband (complex ddc "
    "output), with coarse delay",
    params, CBF_COUNT_OF(params), ports, CBF_COUNT_OF(ports), init, run, fini,
    requests, CBF_COUNT_OF(requests), on_request,
};

CBF_PLUGIN_DEFINE(desc)
