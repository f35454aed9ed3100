/* reducer: one accumulator buffer per dump in ("cbf.xeng.accum"), one
 * visibility buffer out ("cbf.xeng.vis"): int32 with saturation (counted),
 * and the magic value (-2^31, 1) on every baseline of an antenna that
 * missed any batch of the dump. On the CPU the input is host memory; on
 * the GPU it is the correlator's device accumulators (all slices), which
 * the CUDA kernel reduces on this node's stream after waiting for the
 * correlator's event, and the visibilities go to pinned host memory that
 * filesink and sender read directly. The stream is synchronised (the
 * saturation count comes back) before the input goes back to the
 * correlator, which then reuses it. */
#include <cbf/cbf.h>

#include <stdlib.h>
#include <string.h>

#include "reducer.h"
#ifdef CBF_HAVE_CUDA
#include <cuda_runtime.h>
#endif

static const cbf_param_decl params[] = {
    {"buffers", CBF_PARAM_INT, "3", CBF_RANGE(2, 64), NULL, "visibility buffers in the pool"},
};

static const cbf_port_decl ports[] = {
    {"in", CBF_PORT_IN, "cbf.xeng.accum", 0, 0, "int64 accumulators, one buffer per dump"},
    {"out", CBF_PORT_OUT, "cbf.xeng.vis", 0, 0,
     "CI32 visibilities [channel][baseline_product] in SPEC.md order"},
};

typedef struct red {
    cbf_port *in, *out;
    cbf_pool *pool;
    int n_ants, channels, dump_batches, slices;
    size_t slice_len, out_bytes;
    uint8_t *bad;
    int gpu;
    void *stream;            /* cudaStream_t */
    cbf_reduce_cuda *plan;
    uint8_t *d_bad;          /* device copy of bad */
    int32_t *d_out;          /* visibilities before the copy to the pinned buffer */
    cbf_counter *c_sat, *c_dumps, *c_flagged;
} red;

static void red_fini(cbf_node *node)
{
    red *s = cbf_node_state(node);
    if (!s)
        return;
#ifdef CBF_HAVE_CUDA
    if (s->stream)
        cudaStreamSynchronize((cudaStream_t)s->stream);
    cbf_reduce_cuda_destroy(s->plan);
    cudaFree(s->d_bad);
    cudaFree(s->d_out);
    if (s->stream)
        cudaStreamDestroy((cudaStream_t)s->stream);
#endif
    free(s->bad);
    free(s);
    cbf_node_set_state(node, NULL);
}

#ifdef CBF_HAVE_CUDA
static int cuda_ok(cudaError_t e, const char *what, cbf_error *err)
{
    return e == cudaSuccess ? 0
                            : cbf_error_set(err, CBF_ECUDA, "reducer: %s: %s", what,
                                            cudaGetErrorString(e));
}

static int gpu_setup(red *s, cbf_error *err)
{
    char msg[256];
    cudaStream_t st;
    int rc;
    if ((rc = cuda_ok(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream", err)))
        return rc;
    s->stream = st;
    if ((rc = cuda_ok(cudaMalloc((void **)&s->d_bad, (size_t)s->n_ants), "cudaMalloc", err)) ||
        (rc = cuda_ok(cudaMalloc((void **)&s->d_out, s->out_bytes), "cudaMalloc", err)))
        return rc;
    if ((rc = cbf_reduce_cuda_create(&s->plan, msg, sizeof msg)))
        return cbf_error_set(err, rc, "reducer: %s", msg);
    return 0;
}
#endif

static int red_init(cbf_node *node, cbf_error *err)
{
    red *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "reducer: out of memory");
    cbf_node_set_state(node, s);
    s->in = cbf_node_port(node, "in", 0);
    s->out = cbf_node_port(node, "out", 0);
    const cbf_port_desc *in = cbf_port_get_desc(s->in);
    double n_ants, hat;
    if (cbf_port_desc_get_attr(in, "n_ants", &n_ants) ||
        cbf_port_desc_get_attr(in, "heap_accumulation_threshold", &hat) || in->ndim != 4 ||
        in->dtype != CBF_DTYPE_CI64 || in->shape[2] != (size_t)n_ants * ((size_t)n_ants + 1) / 2)
        return cbf_error_set(err, CBF_ECONFIG,
                             "reducer: input is not a correlator's CI64 [slice][channel]"
                             "[baseline][product] with n_ants and heap_accumulation_threshold");
    s->n_ants = (int)n_ants;
    s->slices = (int)in->shape[0];
    s->channels = (int)in->shape[1];
    s->dump_batches = (int)hat;
    s->slice_len = in->shape[1] * in->shape[2] * 8;
    s->out_bytes = s->slice_len * sizeof(int32_t);
    s->bad = calloc((size_t)s->n_ants, 1);
    if (!s->bad)
        return cbf_error_set(err, CBF_ENOMEM, "reducer: out of memory");
    s->gpu = cbf_node_use_gpu(node);
    int rc;
#ifdef CBF_HAVE_CUDA
    if (s->gpu && (rc = gpu_setup(s, err)))
        return rc;
#else
    if (s->gpu)
        return cbf_error_set(err, CBF_ENOTSUP, "reducer: built without CUDA");
#endif
    if (s->gpu != (in->mem == CBF_MEM_DEVICE))
        return cbf_error_set(err, CBF_ECONFIG, "reducer: %s input on the %s path (the correlator "
                             "and the reducer must both run on the GPU or both on the CPU)",
                             cbf_mem_kind_name(in->mem), s->gpu ? "GPU" : "CPU");
    cbf_port_desc d;
    cbf_port_desc_init(&d, CBF_DTYPE_CI32, s->gpu ? CBF_MEM_PINNED : CBF_MEM_HOST);
    cbf_port_desc_add_axis(&d, "channel", in->shape[1]);
    cbf_port_desc_add_axis(&d, "baseline_product", in->shape[2] * 4);
    d.n_present = (size_t)s->n_ants;
    d.present_axis = "antenna";
    d.timestamp_step = in->timestamp_step;
    for (int i = 0; i < in->n_attrs; i++)
        cbf_port_desc_set_attr(&d, in->attr_names[i], in->attr_values[i]);
    if ((rc = cbf_port_set_desc(s->out, &d, err)))
        return rc;
    cbf_pool_config pc = {
        .name = "out",
        .kind = d.mem,
        .count = (size_t)cbf_params_int(cbf_node_params(node), "buffers"),
        .size = cbf_port_desc_bytes(&d),
        .n_present = d.n_present,
    };
    if ((rc = cbf_node_pool_create(node, &pc, &s->pool, err)) != 0)
        return rc;
    s->c_sat = cbf_node_counter(node, "saturated");
    s->c_dumps = cbf_node_counter(node, "dumps");
    s->c_flagged = cbf_node_counter(node, "flagged_antenna_dumps");
    return 0;
}

static int run_kernel(red *s, cbf_buffer *in, cbf_buffer *out, uint64_t *sat, cbf_error *err)
{
    char msg[256];
    cbf_reduce_job job = {s->n_ants, s->channels, in->data, s->slices, s->slice_len, s->bad,
                          out->data, 0};
    int rc;
#ifdef CBF_HAVE_CUDA
    if (s->gpu) {
        cudaStream_t st = (cudaStream_t)s->stream;
        job.ant_bad = s->d_bad;
        job.out = s->d_out;
        if ((rc = cbf_buffer_wait_stream(in, st, err)) ||
            (rc = cuda_ok(cudaMemcpyAsync(s->d_bad, s->bad, (size_t)s->n_ants,
                                          cudaMemcpyHostToDevice, st), "flags upload", err)))
            return rc;
        if ((rc = cbf_reduce_cuda_run(s->plan, &job, st, msg, sizeof msg)))
            return cbf_error_set(err, rc, "reducer: %s", msg);
        if ((rc = cuda_ok(cudaMemcpyAsync(out->data, s->d_out, s->out_bytes,
                                          cudaMemcpyDeviceToHost, st), "download", err)) ||
            (rc = cbf_buffer_record(out, st, err)))
            return rc;
        /* synchronises the stream: the output is complete and `in` is free */
        if ((rc = cbf_reduce_cuda_saturated(s->plan, st, sat, msg, sizeof msg)))
            return cbf_error_set(err, rc, "reducer: %s", msg);
        return 0;
    }
#endif
    if ((rc = cbf_reduce_cpu(&job, sat, msg, sizeof msg)))
        return cbf_error_set(err, rc, "reducer: %s", msg);
    return 0;
}

static int reduce(red *s, cbf_buffer *in, cbf_error *err)
{
    memset(s->bad, 0, (size_t)s->n_ants);
    for (size_t i = 0; i < in->n_present; i++)
        if (!in->present[i])
            s->bad[i % (size_t)s->n_ants] = 1;
    cbf_buffer *out;
    int rc = cbf_pool_get(s->pool, &out);
    if (rc)
        return rc == CBF_ESTOPPED ? rc : cbf_error_set(err, rc, "reducer: no output buffer");
    uint64_t sat = 0;
    if ((rc = run_kernel(s, in, out, &sat, err))) {
        cbf_buffer_unref(out);
        return cbf_error_prefix(err, "dump at %lld", (long long)in->timestamp);
    }
    out->timestamp = in->timestamp;
    out->seq = in->seq;
    out->saturated = sat;
    out->n_present = (size_t)s->n_ants;
    out->missing = 0;
    for (int a = 0; a < s->n_ants; a++) {
        out->present[a] = !s->bad[a];
        out->missing += s->bad[a];
    }
    cbf_counter_add(s->c_sat, sat);
    cbf_counter_add(s->c_dumps, 1);
    cbf_counter_add(s->c_flagged, out->missing);
    return cbf_port_send(s->out, out);
}

static int red_run(cbf_node *node, cbf_error *err)
{
    red *s = cbf_node_state(node);
    for (;;) {
        cbf_buffer *in;
        int rc = cbf_port_recv(s->in, &in);
        if (rc == CBF_EOS)
            return 0;
        if (rc)
            return rc == CBF_ESTOPPED ? 0 : rc;
        rc = reduce(s, in, err);
        cbf_buffer_unref(in);
        if (rc)
            return rc == CBF_ESTOPPED ? 0 : rc;
    }
}

static const cbf_plugin_desc desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "reducer",
    .version = "0.1.0",
    .summary = "X-engine reducer: int64 accumulators to int32 visibilities, saturation, magic values",
    .params = params,
    .n_params = CBF_COUNT_OF(params),
    .ports = ports,
    .n_ports = CBF_COUNT_OF(ports),
    .init = red_init,
    .run = red_run,
    .fini = red_fini,
};

CBF_PLUGIN_DEFINE(desc)
