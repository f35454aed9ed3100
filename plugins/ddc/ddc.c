/* ddc plugin: one antenna of a "cbf.adc.packed" stream through the
 * narrowband down-converter (kernels/ddc), out as "cbf.ddc.complex"
 * buffers of a fixed number of complex outputs per polarisation.
 *
 * Output g (absolute) is the window starting at digitiser sample g x S, so
 * buffers sit at absolute multiples of `outputs_per_buffer` outputs and do
 * not depend on the input chunking; the mixer phase comes from the absolute
 * sample number (docs/narrowband.md). Input chunks are appended to a
 * staging area per polarisation (on the GPU this copy is the upload); once
 * it holds every window of the next buffer, that buffer is made and the
 * samples no later window needs are dropped, moving the rest to the front
 * of a second staging area. A gap in the input timestamps restarts the
 * staging at the new timestamp (counted in `input_gaps`). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cbf/cbf.h"
#include "ddc.h"
#include "filter_design.h"
#ifdef CBF_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define MSG 512

typedef struct ddc_state {
    cbf_ddc_config cfg;
    int antenna, gpu, per_thread;
    size_t S, T, n_out, chunk, heap, n_ant, block, n_blocks;
    float *z;
    cbf_ddc_cuda *plan;
    void *stream;
    uint8_t *data[2][2];  /* [stage][pol] packed samples (device memory on the GPU path) */
    uint8_t *present[2];  /* [stage]: [pol][heap] flags */
    int cur;
    size_t cap;           /* samples a stage holds (a whole number of heaps) */
    int started;
    int64_t first;        /* absolute sample at the live stage's start (heap aligned) */
    size_t len;           /* samples in it */
    int64_t next;         /* first output of the next buffer (absolute) */
    cbf_pool *pool;
    cbf_counter *c_outputs, *c_missing, *c_gaps;
} ddc_state;

static const cbf_param_decl params[] = {
    {"centre_frequency", CBF_PARAM_FLOAT, NULL, CBF_RANGE(-1e12, 1e12), NULL,
     "Hz of the input band moved to DC (realised to adc_sample_rate / 2^32)"},
    {"decimation", CBF_PARAM_INT, "8", CBF_RANGE(2, 1024), NULL,
     "subsampling factor S: output rate adc_sample_rate / S, kept band / (2 S)"},
    {"taps", CBF_PARAM_INT, "0", CBF_RANGE(0, CBF_DDC_MAX_TAPS), NULL,
     "low-pass taps, 4, 8, 12 or 16 x decimation; 0 = 8 x decimation"},
    {"pass_weight", CBF_PARAM_FLOAT, "0.005", CBF_RANGE(1e-6, 1e6), NULL,
     "passband error weight against alias bands (smaller: more suppression, more ripple)"},
    {"antenna", CBF_PARAM_INT, "0", CBF_RANGE(0, 65535), NULL, "which antenna of the input"},
    {"outputs_per_buffer", CBF_PARAM_INT, "0", CBF_RANGE(0, 1 << 28), NULL,
     "complex outputs per pol per buffer, a multiple of heap_samples / decimation; "
     "0 = samples_per_chunk / decimation"},
    {"per_thread", CBF_PARAM_INT, "8", CBF_RANGE(4, 16), NULL,
     "GPU tuning: outputs per CUDA thread (4, 8 or 16)"},
    {"buffers", CBF_PARAM_INT, "4", CBF_RANGE(2, 64), NULL, "buffers in the output pool"},
};

static const cbf_port_decl ports[] = {
    {"in", CBF_PORT_IN, "cbf.adc.packed", 0, 0, "digitiser samples (all antennas)"},
    {"out", CBF_PORT_OUT, "cbf.ddc.complex", 0, 0,
     "complex float32 [pol][output], one presence flag per block of heap_samples / S outputs"},
};

static int kern(int rc, const char *msg, cbf_error *err)
{
    return rc ? cbf_error_set(err, rc, "ddc: %s", msg) : 0;
}

#ifdef CBF_HAVE_CUDA
static int cuda_ok(cudaError_t e, const char *what, cbf_error *err)
{
    return e == cudaSuccess ? 0 : cbf_error_set(err, CBF_ECUDA, "ddc: %s: %s", what,
                                                cudaGetErrorString(e));
}
#endif

static int stage_alloc(ddc_state *s, uint8_t **p, size_t n, cbf_error *err)
{
    (void)s; /* only the GPU path looks at it */
#ifdef CBF_HAVE_CUDA
    if (s->gpu)
        return cuda_ok(cudaMalloc((void **)p, n), "staging cudaMalloc", err);
#endif
    *p = malloc(n); /* malloc's alignment covers the kernel's 4 bytes */
    return *p ? 0 : cbf_error_set(err, CBF_ENOMEM, "ddc: staging of %zu bytes", n);
}

/* Copies n bytes into staging; `kind` is where src lives. */
static int stage_copy(ddc_state *s, void *dst, const void *src, size_t n, cbf_mem_kind kind,
                      cbf_error *err)
{
    (void)s;
#ifdef CBF_HAVE_CUDA
    if (s->gpu)
        return cuda_ok(cudaMemcpyAsync(dst, src, n,
                                       kind == CBF_MEM_DEVICE ? cudaMemcpyDeviceToDevice
                                                              : cudaMemcpyHostToDevice,
                                       (cudaStream_t)s->stream),
                       "staging copy", err);
#endif
    if (kind == CBF_MEM_DEVICE)
        return cbf_error_set(err, CBF_ENOTSUP, "ddc: device input on the CPU path");
    memcpy(dst, src, n);
    return 0;
}

static int read_input(cbf_node *node, ddc_state *s, double *rate, cbf_error *err)
{
    const cbf_port_desc *in = cbf_port_get_desc(cbf_node_port(node, "in", 0));
    double spc, heap;
    if (cbf_port_desc_get_attr(in, "adc_sample_rate", rate) ||
        cbf_port_desc_get_attr(in, "samples_per_chunk", &spc) ||
        cbf_port_desc_get_attr(in, "heap_samples", &heap))
        return cbf_error_set(err, CBF_ECONFIG, "ddc: input lacks adc_sample_rate, "
                             "samples_per_chunk or heap_samples");
    s->cfg.bits = in->bits;
    s->chunk = (size_t)spc;
    s->heap = (size_t)heap;
    s->n_ant = in->ndim == 3 ? in->shape[0] : 0;
    if (in->dtype != CBF_DTYPE_PACKED || in->ndim != 3 || in->shape[1] != 2 ||
        in->shape[2] != s->chunk * (size_t)in->bits / 8)
        return cbf_error_set(err, CBF_ECONFIG, "ddc: input is not [antenna][2 pols][bytes] of "
                             "%zu packed samples", s->chunk);
    if (!s->heap || s->heap % 32 || s->chunk % s->heap ||
        in->n_present != s->n_ant * 2 * (s->chunk / s->heap))
        return cbf_error_set(err, CBF_ECONFIG, "ddc: input heaps of %zu samples do not tile "
                             "chunks of %zu with one flag each", s->heap, s->chunk);
    return 0;
}

static int design(ddc_state *s, const cbf_params *p, double rate, cbf_error *err)
{
    char msg[MSG];
    double *h = malloc(sizeof(double) * s->T);
    s->z = malloc(2 * sizeof(float) * s->T);
    if (!h || !s->z) {
        free(h);
        return cbf_error_set(err, CBF_ENOMEM, "ddc: taps");
    }
    cbf_fd_report rep;
    int rc = cbf_fd_ddc_design((int)s->T, (int)s->S, cbf_params_float(p, "pass_weight"), h, NULL,
                               &rep, msg, MSG);
    if (!rc)
        rc = cbf_ddc_weights(&s->cfg, h, s->z, msg, MSG);
    free(h);
    if (rc)
        return cbf_error_set(err, CBF_ECONFIG, "%s: %s", cbf_params_where(p, "taps"), msg);
    cbf_log_info("%zu taps, decimation %zu, centre %.6f MHz: passband ripple %.4f dB, "
                 "alias suppression %.1f dB", s->T, s->S,
                 ldexp((double)s->cfg.mix_step, -32) * rate / 1e6, rep.ripple_db, rep.alias_db);
    return 0;
}

static int set_output(cbf_node *node, ddc_state *s, double rate, cbf_error *err)
{
    cbf_port_desc d;
    cbf_port_desc_init(&d, CBF_DTYPE_CF32, s->gpu ? CBF_MEM_DEVICE : CBF_MEM_HOST);
    cbf_port_desc_add_axis(&d, "pol", 2);
    cbf_port_desc_add_axis(&d, "sample", s->n_out);
    d.n_present = s->n_blocks;
    d.present_axis = "block";
    d.timestamp_step = (int64_t)(s->n_out * s->S);
    double centre = ldexp((double)s->cfg.mix_step, -32) * rate;
    cbf_port_desc_set_attr(&d, "adc_sample_rate", rate);
    cbf_port_desc_set_attr(&d, "decimation", (double)s->S);
    cbf_port_desc_set_attr(&d, "taps", (double)s->T);
    cbf_port_desc_set_attr(&d, "centre_frequency", centre > rate / 2 ? centre - rate : centre);
    cbf_port_desc_set_attr(&d, "bandwidth", rate / (2.0 * (double)s->S));
    cbf_port_desc_set_attr(&d, "group_delay", 0.5 * (double)(s->T - 1));
    cbf_port_desc_set_attr(&d, "outputs_per_block", (double)s->block);
    cbf_port_desc_set_attr(&d, "antenna", s->antenna);
    cbf_port_desc_set_attr(&d, "bits", s->cfg.bits);
    int rc = cbf_port_set_desc(cbf_node_port(node, "out", 0), &d, err);
    if (rc)
        return rc;
    const cbf_params *p = cbf_node_params(node);
    cbf_pool_config pc = {"out", d.mem, (size_t)cbf_params_int(p, "buffers"),
                          cbf_port_desc_bytes(&d), d.n_present, 0};
    return cbf_node_pool_create(node, &pc, &s->pool, err);
}

static int init(cbf_node *node, cbf_error *err)
{
    const cbf_params *p = cbf_node_params(node);
    ddc_state *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "ddc: state");
    cbf_node_set_state(node, s);
    double rate;
    int rc = read_input(node, s, &rate, err);
    if (rc)
        return rc;
    s->antenna = (int)cbf_params_int(p, "antenna");
    if ((size_t)s->antenna >= s->n_ant)
        return cbf_error_set(err, CBF_ECONFIG, "%s: antenna %d: the input has %zu",
                             cbf_params_where(p, "antenna"), s->antenna, s->n_ant);
    s->S = (size_t)cbf_params_int(p, "decimation");
    s->T = (size_t)cbf_params_int(p, "taps");
    if (!s->T)
        s->T = 8 * s->S;
    s->cfg.decimation = (int)s->S;
    s->cfg.taps = (int)s->T;
    s->cfg.mix_step = cbf_ddc_mix_step(cbf_params_float(p, "centre_frequency") / rate);
    char msg[MSG];
    if (cbf_ddc_config_check(&s->cfg, msg, MSG))
        return cbf_error_set(err, CBF_ECONFIG, "%s: %s", cbf_params_where(p, "taps"), msg);
    if (s->heap % s->S)
        return cbf_error_set(err, CBF_ECONFIG, "%s: decimation %zu must divide the %zu-sample "
                             "heap", cbf_params_where(p, "decimation"), s->S, s->heap);
    s->block = s->heap / s->S;
    s->n_out = (size_t)cbf_params_int(p, "outputs_per_buffer");
    if (!s->n_out)
        s->n_out = s->chunk / s->S;
    if (!s->n_out || s->n_out % s->block)
        return cbf_error_set(err, CBF_ECONFIG, "%s: %zu outputs: must be a positive multiple of "
                             "heap_samples / decimation = %zu",
                             cbf_params_where(p, "outputs_per_buffer"), s->n_out, s->block);
    s->n_blocks = s->n_out / s->block;
    s->per_thread = (int)cbf_params_int(p, "per_thread");
    if ((rc = design(s, p, rate, err)))
        return rc;

    s->gpu = cbf_node_use_gpu(node);
#ifdef CBF_HAVE_CUDA
    if (s->gpu) {
        cudaStream_t st;
        if ((rc = cuda_ok(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream", err)))
            return rc;
        s->stream = st;
        if ((rc = kern(cbf_ddc_cuda_create(&s->cfg, s->z, s->per_thread, &s->plan, msg, MSG), msg,
                       err)))
            return rc;
    }
#else
    if (s->gpu)
        return cbf_error_set(err, CBF_ENOTSUP, "ddc: built without CUDA");
#endif
    /* One buffer's windows, an input chunk and a heap of alignment slack. */
    s->cap = s->n_out * s->S + s->T + s->chunk + 2 * s->heap;
    s->cap = (s->cap + s->heap - 1) / s->heap * s->heap;
    for (int k = 0; k < 2; k++) {
        s->present[k] = calloc(2 * (s->cap / s->heap), 1);
        if (!s->present[k])
            return cbf_error_set(err, CBF_ENOMEM, "ddc: flags");
        for (int q = 0; q < 2; q++)
            if ((rc = stage_alloc(s, &s->data[k][q], cbf_ddc_packed_bytes(s->cap, s->cfg.bits),
                                  err)))
                return rc;
    }
    if ((rc = set_output(node, s, rate, err)))
        return rc;
    s->c_outputs = cbf_node_counter(node, "outputs");
    s->c_missing = cbf_node_counter(node, "missing_blocks");
    s->c_gaps = cbf_node_counter(node, "input_gaps");
    return 0;
}

/* The first buffer: the first whose windows all start inside the input. */
static void start_at(ddc_state *s, int64_t ts)
{
    s->started = 1;
    s->first = ts;
    s->len = 0;
    int64_t per = (int64_t)(s->n_out * s->S);
    s->next = (ts > 0 ? (ts + per - 1) / per : 0) * (int64_t)s->n_out;
}

static int append(ddc_state *s, const cbf_buffer *buf, cbf_error *err)
{
    size_t heaps = s->chunk / s->heap, cap_heaps = s->cap / s->heap, at = s->len / s->heap;
    size_t slab = s->chunk / 8 * (size_t)s->cfg.bits;
    for (int q = 0; q < 2; q++) {
        size_t idx = (size_t)s->antenna * 2 + (size_t)q;
        int rc = stage_copy(s, s->data[s->cur][q] + s->len / 8 * (size_t)s->cfg.bits,
                            (const uint8_t *)buf->data + idx * slab, slab, buf->kind, err);
        if (rc)
            return rc;
        memcpy(s->present[s->cur] + (size_t)q * cap_heaps + at, buf->present + idx * heaps, heaps);
    }
    s->len += s->chunk;
    return 0;
}

/* Block b of the buffer is present when every heap its windows touch,
 * samples [o, o + (block - 1) S + T) from its first window start o, is
 * present in both pols. */
static uint64_t flag_blocks(const ddc_state *s, cbf_buffer *out)
{
    const uint8_t *f = s->present[s->cur];
    size_t cap_heaps = s->cap / s->heap;
    uint64_t missing = 0;
    for (size_t b = 0; b < s->n_blocks; b++) {
        size_t o = (size_t)((s->next + (int64_t)(b * s->block)) * (int64_t)s->S - s->first);
        size_t lo = o / s->heap, hi = (o + (s->block - 1) * s->S + s->T - 1) / s->heap;
        uint8_t ok = 1;
        for (int q = 0; q < 2; q++)
            for (size_t h = lo; h <= hi; h++)
                ok &= f[(size_t)q * cap_heaps + h] != 0;
        out->present[b] = ok;
        missing += !ok;
    }
    out->n_present = s->n_blocks;
    return missing;
}

/* Moves the samples from heap-aligned `keep` on to the front of the other stage. */
static int shift_stage(ddc_state *s, int64_t keep, cbf_error *err)
{
    size_t drop = (size_t)(keep - s->first), cap_heaps = s->cap / s->heap;
    if (drop > s->len)
        drop = s->len; /* before the first buffer: nothing held is needed yet */
    size_t left = s->len - drop;
    for (int q = 0; q < 2; q++) {
        int rc = stage_copy(s, s->data[!s->cur][q], s->data[s->cur][q] + drop / 8 * (size_t)s->cfg.bits,
                            left / 8 * (size_t)s->cfg.bits, s->gpu ? CBF_MEM_DEVICE : CBF_MEM_HOST,
                            err);
        if (rc)
            return rc;
        memcpy(s->present[!s->cur] + (size_t)q * cap_heaps,
               s->present[s->cur] + (size_t)q * cap_heaps + drop / s->heap, left / s->heap);
    }
    s->cur = !s->cur;
    s->first += (int64_t)drop;
    s->len = left;
    return 0;
}

static int produce(cbf_node *node, ddc_state *s, cbf_error *err)
{
    char msg[MSG];
    cbf_buffer *out;
    int rc = cbf_pool_get(s->pool, &out);
    if (rc)
        return rc;
    out->timestamp = s->next * (int64_t)s->S;
    out->seq = (uint64_t)(s->next / (int64_t)s->n_out);
    out->missing = flag_blocks(s, out);
    cbf_ddc_job job = {{s->data[s->cur][0], s->data[s->cur][1]}, s->len, (uint64_t)s->first,
                       (size_t)(out->timestamp - s->first), s->n_out, (float *)out->data, s->n_out};
#ifdef CBF_HAVE_CUDA
    if (s->gpu) {
        if (!(rc = kern(cbf_ddc_cuda_run(s->plan, &job, s->stream, msg, MSG), msg, err)))
            rc = cbf_buffer_record(out, s->stream, err);
    } else
#endif
        rc = kern(cbf_ddc_cpu(&s->cfg, s->z, &job, msg, MSG), msg, err);
    if (rc) {
        cbf_buffer_unref(out);
        return rc;
    }
    cbf_counter_add(s->c_outputs, s->n_out);
    cbf_counter_add(s->c_missing, out->missing);
    s->next += (int64_t)s->n_out;
    if ((rc = cbf_port_send(cbf_node_port(node, "out", 0), out)))
        return rc;
    int64_t keep = s->next * (int64_t)s->S;
    keep -= keep % (int64_t)s->heap; /* timestamps are non-negative */
    return keep > s->first ? shift_stage(s, keep, err) : 0;
}

static int ready(const ddc_state *s)
{
    int64_t end = (s->next + (int64_t)s->n_out - 1) * (int64_t)s->S + (int64_t)s->T;
    return end <= s->first + (int64_t)s->len;
}

static int take(cbf_node *node, ddc_state *s, cbf_buffer *buf, cbf_error *err)
{
    if (buf->timestamp < 0 || buf->timestamp % (int64_t)s->heap)
        return cbf_error_set(err, CBF_EINVAL, "ddc: input timestamp %lld is not a non-negative "
                             "multiple of the heap size %zu", (long long)buf->timestamp, s->heap);
    if (!s->started) {
        start_at(s, buf->timestamp);
    } else if (buf->timestamp != s->first + (int64_t)s->len) {
        cbf_counter_add(s->c_gaps, 1);
        cbf_log_warn("ddc: input jumps from sample %lld to %lld: restarting",
                     (long long)(s->first + (int64_t)s->len), (long long)buf->timestamp);
        start_at(s, buf->timestamp);
    }
    int rc = 0;
#ifdef CBF_HAVE_CUDA
    if (s->gpu && buf->event)
        rc = cbf_buffer_wait_stream(buf, s->stream, err);
#endif
    if (!rc && !s->gpu && buf->kind != CBF_MEM_HOST)
        rc = cbf_buffer_sync_host(buf, err);
    if (!rc)
        rc = append(s, buf, err);
#ifdef CBF_HAVE_CUDA
    /* The upload must finish before the input buffer goes back. */
    if (!rc && s->gpu)
        rc = cuda_ok(cudaStreamSynchronize((cudaStream_t)s->stream), "upload", err);
#endif
    while (!rc && ready(s))
        rc = produce(node, s, err);
    /* Before the first buffer, keep only what its windows need. */
    if (!rc && s->next * (int64_t)s->S - s->first >= (int64_t)s->heap) {
        int64_t keep = s->next * (int64_t)s->S;
        keep -= keep % (int64_t)s->heap;
        rc = shift_stage(s, keep, err);
    }
    return rc;
}

static int run(cbf_node *node, cbf_error *err)
{
    ddc_state *s = cbf_node_state(node);
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
    ddc_state *s = cbf_node_state(node);
    if (!s)
        return;
    for (int k = 0; k < 2; k++) {
        for (int q = 0; q < 2; q++) {
#ifdef CBF_HAVE_CUDA
            if (s->gpu) {
                cudaFree(s->data[k][q]);
                continue;
            }
#endif
            free(s->data[k][q]);
        }
        free(s->present[k]);
    }
#ifdef CBF_HAVE_CUDA
    cbf_ddc_cuda_destroy(s->plan);
    if (s->stream)
        cudaStreamDestroy((cudaStream_t)s->stream);
#endif
    free(s->z);
    free(s);
}

static const cbf_plugin_desc desc = {
    CBF_PLUGIN_ABI, "ddc", "0.1.0",
    "narrowband down-conversion: fixed-point mixer, alias-band low-pass, subsampling",
    params, CBF_COUNT_OF(params), ports, CBF_COUNT_OF(ports), init, run, fini, NULL, 0, NULL,
};

CBF_PLUGIN_DEFINE(desc)
