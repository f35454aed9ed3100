/* correlator: X-engine batches in, one int64 accumulator buffer out per
 * dump ("cbf.xeng.accum"). Dumps hold heap_accumulation_threshold batches
 * and start at multiples of that interval in timestamp (auto-resync), so a
 * dump may begin or end inside an input buffer; the presence flags of the
 * output say, per (batch of the dump, antenna), whether data arrived. A
 * dump that was only partly seen at the start of the stream goes out with
 * its unseen batches flagged missing; the unfinished dump at end of stream
 * is dropped and counted.
 *
 * On the CPU the exact int64 kernel adds into one slice of host
 * accumulators. On the GPU the accumulators are device memory with
 * `slices` slices (one per blockIdx.z of the tensor-core kernel; the
 * reducer sums them): a host input buffer is uploaded once on the node's
 * stream and the host waits only for that copy before giving the buffer
 * back; device input is read in place and given back once the stream has
 * finished with it. Each dump's buffer carries an event recorded after its
 * last kernel, which the reducer's stream waits on. */
#include <cbf/cbf.h>

#include <stdlib.h>
#include <string.h>

#include "correlator.h"
#include "reducer.h"
#ifdef CBF_HAVE_CUDA
#include <cuda_runtime.h>
#endif

static const cbf_param_decl params[] = {
    {"heap_accumulation_threshold", CBF_PARAM_INT, "4", CBF_RANGE(1, 1 << 24), NULL,
     "batches per dump"},
    {"buffers", CBF_PARAM_INT, "3", CBF_RANGE(2, 64), NULL, "accumulator buffers in the pool"},
    {"slices", CBF_PARAM_INT, "0", CBF_RANGE(0, 65535), NULL,
     "GPU: accumulator slices (one per blockIdx.z), 0 = enough to fill the GPU; the CPU and "
     "the Hopper kernel add into slice 0 alone"},
    {"block_ants", CBF_PARAM_CHOICE, "auto", CBF_NORANGE, "auto|32|48|64",
     "GPU: antennas per thread block of the tensor-core kernel"},
};

static const cbf_port_decl ports[] = {
    {"in", CBF_PORT_IN, "cbf.xeng.batch", 0, 0, "X-engine batches"},
    {"out", CBF_PORT_OUT, "cbf.xeng.accum", 0, 0,
     "int64 accumulators [slice][channel][baseline][product], one buffer per dump"},
};

typedef struct corr {
    cbf_port *in, *out;
    cbf_pool *pool;
    cbf_corr_shape shape;
    int batches;             /* per input buffer */
    int64_t batch_step, dump_batches;
    cbf_buffer *acc;         /* the open dump, or NULL */
    int64_t open_dump;
    int slices;              /* accumulator slices per buffer (1 on the CPU) */
    size_t acc_bytes, in_bytes;
    int gpu;
    void *stream;            /* cudaStream_t */
    cbf_corr_cuda *plan;
    uint8_t *d_in;           /* device copy of a host input buffer */
    void *uploaded;          /* cudaEvent_t: the copy into d_in is done */
    cbf_counter *c_dumps, *c_dropped;
} corr;

static int kern(int rc, const char *msg, cbf_error *err)
{
    return rc ? cbf_error_set(err, rc, "correlator: %s", msg) : 0;
}

#ifdef CBF_HAVE_CUDA
static int cuda_ok(cudaError_t e, const char *what, cbf_error *err)
{
    return e == cudaSuccess ? 0
                            : cbf_error_set(err, CBF_ECUDA, "correlator: %s: %s", what,
                                            cudaGetErrorString(e));
}

/* Stream, plan, slices and (for host input) the upload buffer. */
static int gpu_setup(cbf_node *node, corr *s, cbf_mem_kind in_mem, cbf_error *err)
{
    const cbf_params *p = cbf_node_params(node);
    const char *ba = cbf_params_string(p, "block_ants");
    char msg[256];
    int rc;
    cudaStream_t st;
    if ((rc = cuda_ok(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream", err)))
        return rc;
    s->stream = st;
    if ((rc = kern(cbf_corr_cuda_create(&s->shape, strcmp(ba, "auto") ? atoi(ba) : 0, &s->plan,
                                        msg, sizeof msg), msg, err)))
        return rc;
    const int64_t want = cbf_params_int(p, "slices");
    /* A call never spans more batches than one buffer or one dump holds. */
    size_t most = (size_t)s->batches < (size_t)s->dump_batches ? (size_t)s->batches
                                                               : (size_t)s->dump_batches;
    s->slices = want ? (int)want : cbf_corr_cuda_auto_slices(s->plan, most);
    if (in_mem != CBF_MEM_DEVICE) {
        cudaEvent_t ev;
        if ((rc = cuda_ok(cudaMalloc((void **)&s->d_in, s->in_bytes), "input cudaMalloc", err)) ||
            (rc = cuda_ok(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "event", err)))
            return rc;
        s->uploaded = ev;
    }
    cbf_log_info("tensor-core correlator on the GPU, %d accumulator slice(s), %s input",
                 s->slices, cbf_mem_kind_name(in_mem));
    return 0;
}
#endif

static void corr_fini(cbf_node *node)
{
    corr *s = cbf_node_state(node);
    if (!s)
        return;
#ifdef CBF_HAVE_CUDA
    if (s->stream)
        cudaStreamSynchronize((cudaStream_t)s->stream); /* nothing may still write s->acc */
#endif
    if (s->acc)
        cbf_buffer_unref(s->acc);
#ifdef CBF_HAVE_CUDA
    cbf_corr_cuda_destroy(s->plan);
    cudaFree(s->d_in);
    if (s->uploaded)
        cudaEventDestroy((cudaEvent_t)s->uploaded);
    if (s->stream)
        cudaStreamDestroy((cudaStream_t)s->stream);
#endif
    free(s);
    cbf_node_set_state(node, NULL);
}

static int need_attr(const cbf_port_desc *d, const char *name, double *v, cbf_error *err)
{
    if (cbf_port_desc_get_attr(d, name, v))
        return cbf_error_set(err, CBF_ECONFIG, "correlator: input descriptor lacks attribute '%s'",
                             name);
    return 0;
}

static int corr_init(cbf_node *node, cbf_error *err)
{
    corr *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "correlator: out of memory");
    cbf_node_set_state(node, s);
    const cbf_params *p = cbf_node_params(node);
    s->in = cbf_node_port(node, "in", 0);
    s->out = cbf_node_port(node, "out", 0);
    const cbf_port_desc *in = cbf_port_get_desc(s->in);
    double ch, sph, sbs, rate;
    int rc;
    if ((rc = need_attr(in, "channels", &ch, err)) || (rc = need_attr(in, "spectra_per_heap", &sph, err)) ||
        (rc = need_attr(in, "samples_between_spectra", &sbs, err)) ||
        (rc = need_attr(in, "adc_sample_rate", &rate, err)))
        return rc;
    if (in->ndim != 5 || (in->dtype != CBF_DTYPE_CI8 && in->dtype != CBF_DTYPE_CI4))
        return cbf_error_set(err, CBF_ECONFIG,
                             "correlator: input must be CI8 or CI4 [batch][antenna][channel]"
                             "[spectrum][pol]");
    s->batches = (int)in->shape[0];
    s->shape = (cbf_corr_shape){(int)in->shape[1], (int)in->shape[2], (int)in->shape[3],
                                in->dtype == CBF_DTYPE_CI8 ? 8 : 4};
    char msg[256];
    if (cbf_corr_shape_check(&s->shape, msg, sizeof msg))
        return cbf_error_set(err, CBF_ECONFIG, "correlator: input: %s", msg);
    s->batch_step = (int64_t)sph * (int64_t)sbs;
    s->dump_batches = cbf_params_int(p, "heap_accumulation_threshold");
    s->open_dump = -1;
    s->in_bytes = (size_t)s->batches * cbf_corr_batch_bytes(&s->shape);
    s->slices = 1;
    s->gpu = cbf_node_use_gpu(node);
#ifdef CBF_HAVE_CUDA
    if (s->gpu && (rc = gpu_setup(node, s, in->mem, err)))
        return rc;
#else
    if (s->gpu)
        return cbf_error_set(err, CBF_ENOTSUP, "correlator: built without CUDA");
#endif
    if (!s->gpu && in->mem == CBF_MEM_DEVICE)
        return cbf_error_set(err, CBF_ECONFIG, "correlator: device input on the CPU path");
    s->acc_bytes = (size_t)s->slices * cbf_corr_accum_len(&s->shape) * sizeof(int64_t);
    const size_t nbl = cbf_corr_baselines(s->shape.n_ants);
    cbf_port_desc d;
    cbf_port_desc_init(&d, CBF_DTYPE_CI64, s->gpu ? CBF_MEM_DEVICE : CBF_MEM_HOST);
    cbf_port_desc_add_axis(&d, "slice", (size_t)s->slices);
    cbf_port_desc_add_axis(&d, "channel", (size_t)s->shape.channels);
    cbf_port_desc_add_axis(&d, "baseline", nbl);
    cbf_port_desc_add_axis(&d, "product", 4);
    d.n_present = (size_t)s->dump_batches * (size_t)s->shape.n_ants;
    d.present_axis = "batch_antenna";
    d.timestamp_step = s->batch_step * s->dump_batches;
    for (int i = 0; i < in->n_attrs; i++)
        cbf_port_desc_set_attr(&d, in->attr_names[i], in->attr_values[i]);
    cbf_port_desc_set_attr(&d, "heap_accumulation_threshold", (double)s->dump_batches);
    cbf_port_desc_set_attr(&d, "n_baselines", (double)nbl);
    cbf_port_desc_set_attr(&d, "n_ants", s->shape.n_ants);
    if ((rc = cbf_port_set_desc(s->out, &d, err)) != 0)
        return rc;
    cbf_pool_config pc = {
        .name = "out",
        .kind = d.mem,
        .count = (size_t)cbf_params_int(p, "buffers"),
        .size = cbf_port_desc_bytes(&d),
        .n_present = d.n_present,
    };
    if ((rc = cbf_node_pool_create(node, &pc, &s->pool, err)) != 0)
        return rc;
    s->c_dumps = cbf_node_counter(node, "dumps");
    s->c_dropped = cbf_node_counter(node, "unfinished_dumps_dropped");
    return 0;
}

static int send_dump(corr *s, cbf_error *err)
{
    cbf_buffer *b = s->acc;
    s->acc = NULL;
    b->missing = 0;
    for (size_t i = 0; i < b->n_present; i++)
        b->missing += !b->present[i];
    cbf_counter_add(s->c_dumps, 1);
    if (s->gpu) {
        int rc = cbf_buffer_record(b, s->stream, err);
        if (rc) {
            cbf_buffer_unref(b);
            return rc;
        }
    }
    return cbf_port_send(s->out, b);
}

static int open_dump(corr *s, int64_t dump, cbf_error *err)
{
    int rc = cbf_pool_get(s->pool, &s->acc);
    if (rc)
        return rc == CBF_ESTOPPED ? rc : cbf_error_set(err, rc, "correlator: no accumulator buffer");
#ifdef CBF_HAVE_CUDA
    if (s->gpu) {
        /* The reducer synchronised its stream before it gave this buffer back. */
        if ((rc = cuda_ok(cudaMemsetAsync(s->acc->data, 0, s->acc_bytes, (cudaStream_t)s->stream),
                          "clearing accumulators", err)))
            return rc;
    } else
#endif
        memset(s->acc->data, 0, s->acc_bytes);
    s->acc->n_present = (size_t)s->dump_batches * s->shape.n_ants;
    memset(s->acc->present, 0, s->acc->n_present); /* nothing seen yet */
    s->acc->timestamp = dump * s->dump_batches * s->batch_step;
    s->acc->seq = (uint64_t)dump;
    s->acc->saturated = 0;
    s->open_dump = dump;
    return 0;
}

/* Where the kernels read this input buffer from (uploading a host one). */
static int input_data(corr *s, cbf_buffer *in, const uint8_t **data, cbf_error *err)
{
    *data = in->data;
    if (!s->gpu)
        return in->kind == CBF_MEM_HOST ? 0 : cbf_buffer_sync_host(in, err);
#ifdef CBF_HAVE_CUDA
    int rc = cbf_buffer_wait_stream(in, s->stream, err);
    if (rc || in->kind == CBF_MEM_DEVICE)
        return rc;
    cudaStream_t st = (cudaStream_t)s->stream;
    if ((rc = cuda_ok(cudaMemcpyAsync(s->d_in, in->data, s->in_bytes, cudaMemcpyHostToDevice, st),
                      "upload", err)) ||
        (rc = cuda_ok(cudaEventRecord((cudaEvent_t)s->uploaded, st), "event record", err)))
        return rc;
    *data = s->d_in;
    return 0;
#else
    return cbf_error_set(err, CBF_ENOTSUP, "correlator: built without CUDA");
#endif
}

/* The GPU no longer reads `in`: its upload is done, or (device input) the
 * stream has run every kernel that reads it. */
static int input_done(corr *s, cbf_buffer *in, cbf_error *err)
{
#ifdef CBF_HAVE_CUDA
    if (s->gpu && in->kind == CBF_MEM_DEVICE)
        return cuda_ok(cudaStreamSynchronize((cudaStream_t)s->stream), "stream", err);
    if (s->gpu)
        return cuda_ok(cudaEventSynchronize((cudaEvent_t)s->uploaded), "upload", err);
#endif
    (void)s;
    (void)in;
    (void)err;
    return 0;
}

static int run_kernel(corr *s, const cbf_corr_job *job, cbf_error *err)
{
    char msg[256];
#ifdef CBF_HAVE_CUDA
    if (s->gpu) {
        cbf_corr_job j = *job;
        const size_t n = j.batch_end - j.batch_begin;
        j.slices = n < (size_t)s->slices ? (int)n : s->slices;
        return kern(cbf_corr_cuda_run(s->plan, &j, s->stream, msg, sizeof msg), msg, err);
    }
#else
    (void)s;
#endif
    return kern(cbf_corr_cpu(job, msg, sizeof msg), msg, err);
}

static int correlate(corr *s, cbf_buffer *in, const uint8_t *data, cbf_error *err)
{
    cbf_dump_span sp[64];
    size_t nsp;
    char msg[256];
    /* at most 32 batches at a time, so the spans always fit in sp */
    for (int first = 0; first < s->batches;) {
        int n = s->batches - first < 32 ? s->batches - first : 32;
        int64_t ts = in->timestamp + first * s->batch_step;
        if (cbf_dump_split(ts, (size_t)n, s->batch_step, s->dump_batches, sp, sizeof sp / sizeof sp[0], &nsp, msg,
                           sizeof msg))
            return cbf_error_set(err, CBF_EINVAL, "correlator: buffer %llu: %s",
                                 (unsigned long long)in->seq, msg);
        for (size_t j = 0; j < nsp; j++) {
            int rc;
            if (s->acc && sp[j].dump != s->open_dump && (rc = send_dump(s, err)))
                return rc;
            if (!s->acc && (rc = open_dump(s, sp[j].dump, err)))
                return rc;
            cbf_corr_job job = {s->shape, data, (size_t)first + sp[j].batch_begin,
                                (size_t)first + sp[j].batch_end, s->acc->data, s->slices};
            if ((rc = run_kernel(s, &job, err)))
                return rc;
            const int64_t dump_ts = s->acc->timestamp;
            for (size_t b = job.batch_begin; b < job.batch_end; b++) {
                int64_t k = (in->timestamp + (int64_t)b * s->batch_step - dump_ts) / s->batch_step;
                for (int a = 0; a < s->shape.n_ants; a++)
                    s->acc->present[k * s->shape.n_ants + a] =
                        in->present[b * (size_t)s->shape.n_ants + a];
            }
            if (sp[j].closes && (rc = send_dump(s, err)))
                return rc;
        }
        first += n;
    }
    return 0;
}

static int corr_run(cbf_node *node, cbf_error *err)
{
    corr *s = cbf_node_state(node);
    for (;;) {
        cbf_buffer *in;
        int rc = cbf_port_recv(s->in, &in);
        if (rc == CBF_EOS)
            break;
        if (rc)
            return rc == CBF_ESTOPPED ? 0 : rc;
        const uint8_t *data;
        rc = input_data(s, in, &data, err);
        if (!rc)
            rc = correlate(s, in, data, err);
        /* even after an error: the producer may not get `in` back while the GPU reads it */
        cbf_error e2;
        int rc2 = input_done(s, in, rc ? &e2 : err);
        rc = rc ? rc : rc2;
        cbf_buffer_unref(in);
        if (rc)
            return rc == CBF_ESTOPPED ? 0 : rc;
    }
    if (s->acc) {
        cbf_buffer_unref(s->acc);
        s->acc = NULL;
        cbf_counter_add(s->c_dropped, 1);
    }
    return 0;
}

static const cbf_plugin_desc desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "correlator",
    .version = "0.1.0",
    .summary = "X-engine correlator: batches to int64 accumulators, one buffer per dump",
    .params = params,
    .n_params = CBF_COUNT_OF(params),
    .ports = ports,
    .n_ports = CBF_COUNT_OF(ports),
    .init = corr_init,
    .run = corr_run,
    .fini = corr_fini,
};

CBF_PLUGIN_DEFINE(desc)
