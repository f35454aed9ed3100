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
#include "stage/contracts/xeng.h"
#include "stage/flow.h"
#include "stage/gpu.h"
#include "stage/input.h"
#include "stage/kern.h"

static const cbf_param_decl red_params[] = {
    {.name = "buffers", .type = CBF_PARAM_INT, .def = "3", .has_range = 1, .min = 2, .max = 64,
     .doc = "visibility buffers in the pool"},
};

static const cbf_port_decl red_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = CBF_TYPE_XENG_ACCUM,
     .doc = "int64 accumulators, one buffer per dump"},
    {.name = "out", .dir = CBF_PORT_OUT, .type = CBF_TYPE_XENG_VIS,
     .doc = "CI32 visibilities [channel][baseline_product] in the order of docs/formats.md"},
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
    cbf_gpu_timer *timer;    /* a dump's kernel and copies: the gpu_ms_per_buffer gauge */
    cbf_gauge *g_gpu_ms;
    cbf_counter *c_sat, *c_dumps, *c_flagged;
} red;

static void red_fini(cbf_node *node)
{
    red *s = cbf_node_state(node);
    if (!s)
        return;
    cbf_error ignored;
    if (s->stream)
        cbf_stage_stream_sync(s->stream, "stream", &ignored);
#ifdef CBF_HAVE_CUDA
    cbf_reduce_cuda_destroy(s->plan);
#endif
    cbf_stage_free(CBF_MEM_DEVICE, s->d_bad);
    cbf_stage_free(CBF_MEM_DEVICE, s->d_out);
    cbf_stage_stream_destroy(s->stream);
    cbf_gpu_timer_destroy(s->timer);
    free(s->bad);
    free(s);
    cbf_node_set_state(node, NULL);
}

#ifdef CBF_HAVE_CUDA
static int red_gpu_setup(red *s, cbf_error *err)
{
    char msg[CBF_STAGE_MSG];
    int rc;
    if ((rc = cbf_stage_stream_create(&s->stream, err)) ||
        (rc = cbf_stage_alloc(CBF_MEM_DEVICE, (size_t)s->n_ants, (void **)&s->d_bad,
                              "antenna flags", err)) ||
        (rc = cbf_stage_alloc(CBF_MEM_DEVICE, s->out_bytes, (void **)&s->d_out, "visibilities",
                              err)) ||
        (rc = cbf_gpu_timer_create(&s->timer, err)))
        return rc;
    return cbf_stage_kern(cbf_reduce_cuda_create(&s->plan, msg, sizeof msg), msg, err);
}
#endif

static int red_init(cbf_node *node, cbf_error *err)
{
    red *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    cbf_node_set_state(node, s);
    s->in = cbf_node_port(node, "in", 0);
    s->out = cbf_node_port(node, "out", 0);
    const cbf_port_desc *in = cbf_port_get_desc(s->in);
    cbf_xeng_accum acc;
    if (cbf_xeng_accum_of(in, &acc))
        return cbf_error_set(err, CBF_ECONFIG,
                             "input is not a correlator's CI64 [slice][channel][baseline][product] "
                             "with " CBF_ATTR_N_ANTS " and " CBF_ATTR_HEAP_ACCUMULATION_THRESHOLD);
    s->n_ants = acc.n_ants;
    s->slices = (int)acc.slices;
    s->channels = (int)acc.channels;
    s->dump_batches = acc.dump_batches;
    s->slice_len = cbf_xeng_accum_slice_len(&acc);
    s->out_bytes = s->slice_len * sizeof(int32_t);
    s->bad = calloc((size_t)s->n_ants, 1);
    if (!s->bad)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    s->gpu = cbf_node_use_gpu(node);
    int rc;
#ifdef CBF_HAVE_CUDA
    if (s->gpu && (rc = red_gpu_setup(s, err)))
        return rc;
#else
    if (s->gpu)
        return cbf_error_set(err, CBF_ENOTSUP, "built without CUDA");
#endif
    if (s->gpu != (in->mem == CBF_MEM_DEVICE))
        return cbf_error_set(err, CBF_ECONFIG, "%s input on the %s path (the correlator "
                             "and the reducer must both run on the GPU or both on the CPU)",
                             cbf_mem_kind_name(in->mem), s->gpu ? "GPU" : "CPU");
    cbf_port_desc d;
    cbf_port_desc_init(&d, CBF_DTYPE_CI32, s->gpu ? CBF_MEM_PINNED : CBF_MEM_HOST);
    cbf_port_desc_add_axis(&d, "channel", acc.channels);
    cbf_port_desc_add_axis(&d, "baseline_product", acc.baselines * CBF_XENG_PRODUCTS);
    d.n_present = (size_t)s->n_ants;
    d.present_axis = "antenna";
    d.timestamp_step = in->timestamp_step;
    for (int i = 0; i < in->n_attrs; i++)
        cbf_port_desc_set_attr(&d, in->attr_names[i], in->attr_values[i]);
    if ((rc = cbf_stage_out_open(node, s->out, &d,
                                 (size_t)cbf_params_int(cbf_node_params(node), "buffers"),
                                 &s->pool, err)))
        return rc;
    s->c_sat = cbf_node_counter(node, "saturated");
    cbf_counter_katcp(s->c_sat, "xeng-clip-cnt", 0);   /* katgpucbf's STREAM.xeng-clip-cnt */
    cbf_counter_warn_on_rise(s->c_sat);
    s->c_dumps = cbf_node_counter(node, "dumps");
    s->c_flagged = cbf_node_counter(node, "flagged_antenna_dumps");
    if (s->gpu)
        s->g_gpu_ms = cbf_node_gauge(node, "gpu_ms_per_buffer");
    return 0;
}

static int red_run_kernel(red *s, cbf_buffer *in, cbf_buffer *out, uint64_t *sat,
                          cbf_error *err)
{
    char msg[CBF_STAGE_MSG];
    cbf_reduce_job job = {s->n_ants, s->channels, in->data, s->slices, s->slice_len, s->bad,
                          out->data, 0};
#ifdef CBF_HAVE_CUDA
    if (s->gpu) {
        int rc;
        job.ant_bad = s->d_bad;
        job.out = s->d_out;
        if ((rc = cbf_buffer_wait_stream(in, s->stream, err)) ||
            (rc = cbf_gpu_timer_start(s->timer, s->stream, err)) ||
            (rc = cbf_stage_copy(s->d_bad, CBF_MEM_DEVICE, s->bad, CBF_MEM_HOST,
                                 (size_t)s->n_ants, s->stream, "flags upload", err)) ||
            (rc = cbf_stage_kern(cbf_reduce_cuda_run(s->plan, &job, s->stream, msg, sizeof msg),
                                 msg, err)) ||
            (rc = cbf_stage_copy(out->data, out->kind, s->d_out, CBF_MEM_DEVICE, s->out_bytes,
                                 s->stream, "download", err)) ||
            (rc = cbf_gpu_timer_stop(s->timer, s->stream, err)) ||
            (rc = cbf_buffer_record(out, s->stream, err)))
            return rc;
        /* synchronises the stream: the output is complete, `in` is free and the timer readable */
        if ((rc = cbf_stage_kern(cbf_reduce_cuda_saturated(s->plan, s->stream, sat, msg,
                                                           sizeof msg), msg, err)))
            return rc;
        cbf_gauge_set(s->g_gpu_ms, cbf_gpu_timer_ms(s->timer));
        return 0;
    }
#endif
    return cbf_stage_kern(cbf_reduce_cpu(&job, sat, msg, sizeof msg), msg, err);
}

static int red_reduce(void *user, cbf_buffer *in, cbf_error *err)
{
    red *s = user;
    memset(s->bad, 0, (size_t)s->n_ants);
    for (size_t i = 0; i < in->n_present; i++)
        if (!in->present[i])
            s->bad[i % (size_t)s->n_ants] = 1;
    cbf_buffer *out;
    int rc = cbf_pool_get(s->pool, &out);
    if (rc)
        return rc == CBF_ESTOPPED ? rc : cbf_error_set(err, rc, "no output buffer");
    uint64_t sat = 0;
    if ((rc = red_run_kernel(s, in, out, &sat, err))) {
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
    int rc = cbf_stage_input_loop(node, "in", red_reduce, s, err);
    return rc == CBF_ESTOPPED ? 0 : rc;
}

static const cbf_plugin_desc red_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "reducer",
    .version = "0.1.0",
    .summary = "X-engine reducer: int64 accumulators to int32 visibilities, saturation, magic values",
    .params = red_params,
    .n_params = CBF_COUNT_OF(red_params),
    .ports = red_ports,
    .n_ports = CBF_COUNT_OF(red_ports),
    .init = red_init,
    .run = red_run,
    .fini = red_fini,
};

CBF_PLUGIN_DEFINE(red_desc)
