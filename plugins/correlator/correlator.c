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
 * reducer sums them): a host input buffer is uploaded once, on a stream of
 * its own into one of two device buffers in turn, so the next upload
 * overlaps this one's kernels; device input is read in place. Either way
 * the host never waits per buffer: the input is held until the kernels
 * reading it are done (stage/gpu.h's hold). Each dump's buffer carries an
 * event recorded after its last kernel, which the reducer's stream waits
 * on. */
#include <cbf/cbf.h>

#include <stdlib.h>
#include <string.h>

#include "correlator.h"
#include "reducer.h"
#include "stage/contracts/xeng.h"
#include "stage/flow.h"
#include "stage/gpu.h"
#include "stage/input.h"
#include "stage/kern.h"

static const cbf_param_decl corr_params[] = {
    {.name = CBF_ATTR_HEAP_ACCUMULATION_THRESHOLD, .type = CBF_PARAM_INT, .def = "4",
     .has_range = 1, .min = 1, .max = 1 << 24, .doc = "batches per dump"},
    {.name = "buffers", .type = CBF_PARAM_INT, .def = "3", .has_range = 1, .min = 2, .max = 64,
     .doc = "accumulator buffers in the pool"},
    {.name = "slices", .type = CBF_PARAM_INT, .def = "0", .has_range = 1, .min = 0,
     .max = 65535,
     .doc = "GPU: accumulator slices (one per blockIdx.z), 0 = enough to fill the GPU; the CPU "
            "and the Hopper kernel add into slice 0 alone"},
    {.name = "block_ants", .type = CBF_PARAM_CHOICE, .def = "auto", .choices = "auto|32|48|64",
     .doc = "GPU: antennas per thread block of the tensor-core kernel"},
};

static const cbf_port_decl corr_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = CBF_TYPE_XENG_BATCH, .doc = "X-engine batches"},
    {.name = "out", .dir = CBF_PORT_OUT, .type = CBF_TYPE_XENG_ACCUM,
     .doc = "int64 accumulators [slice][channel][baseline][product], one buffer per dump"},
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
    /* Host input: uploads on `up` into d_in[k], k in turn; uploaded[k]
     * (on up) orders the kernels after it, read[k] (on stream, after the
     * kernels) the next upload into d_in[k] after them. */
    void *up;
    uint8_t *d_in[2];
    void *uploaded[2], *read[2];
    cbf_stage_hold held;     /* input buffers until their kernels are done */
    /* An input buffer's upload and kernels: the gpu_ms_per_buffer gauge.
     * Two, used in turn: a buffer's time is read one buffer later, once
     * the hold has seen it done. */
    cbf_gpu_timer *timer[2];
    uint64_t n_timed;
    cbf_gauge *g_gpu_ms;
    cbf_counter *c_dumps, *c_dropped;
} corr;

#ifdef CBF_HAVE_CUDA
/* Stream, plan, slices and (for host input) the upload buffer. */
static int corr_gpu_setup(cbf_node *node, corr *s, cbf_mem_kind in_mem, cbf_error *err)
{
    const cbf_params *p = cbf_node_params(node);
    const char *ba = cbf_params_string(p, "block_ants");
    char msg[CBF_STAGE_MSG];
    int rc;
    if ((rc = cbf_stage_stream_create(&s->stream, err)) ||
        (rc = cbf_stage_kern(cbf_corr_cuda_create(&s->shape, strcmp(ba, "auto") ? atoi(ba) : 0,
                                                  &s->plan, msg, sizeof msg), msg, err)))
        return rc;
    const int64_t want = cbf_params_int(p, "slices");
    /* A call never spans more batches than one buffer or one dump holds. */
    size_t most = (size_t)s->batches < (size_t)s->dump_batches ? (size_t)s->batches
                                                               : (size_t)s->dump_batches;
    s->slices = want ? (int)want : cbf_corr_cuda_auto_slices(s->plan, most);
    if ((rc = cbf_stage_hold_init(&s->held, 1, err)))
        return rc;
    if (in_mem != CBF_MEM_DEVICE && (rc = cbf_stage_stream_create(&s->up, err)))
        return rc;
    for (int k = 0; k < 2 && in_mem != CBF_MEM_DEVICE; k++)
        if ((rc = cbf_stage_alloc(CBF_MEM_DEVICE, s->in_bytes, (void **)&s->d_in[k], "input", err)) ||
            (rc = cbf_stage_event_create(&s->uploaded[k], err)) ||
            (rc = cbf_stage_event_create(&s->read[k], err)))
            return rc;
    if ((rc = cbf_gpu_timer_create(&s->timer[0], err)) ||
        (rc = cbf_gpu_timer_create(&s->timer[1], err)))
        return rc;
    s->g_gpu_ms = cbf_node_gauge(node, "gpu_ms_per_buffer");
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
    cbf_error ignored;
    if (s->held.buf)
        cbf_stage_hold_fini(&s->held);
    if (s->stream) /* nothing may still write s->acc */
        cbf_stage_stream_sync(s->stream, "stream", &ignored);
    if (s->acc)
        cbf_buffer_unref(s->acc);
#ifdef CBF_HAVE_CUDA
    cbf_corr_cuda_destroy(s->plan);
#endif
    for (int k = 0; k < 2; k++) {
        cbf_stage_free(CBF_MEM_DEVICE, s->d_in[k]);
        cbf_stage_event_destroy(s->uploaded[k]);
        cbf_stage_event_destroy(s->read[k]);
    }
    cbf_stage_stream_destroy(s->up);
    cbf_stage_stream_destroy(s->stream);
    cbf_gpu_timer_destroy(s->timer[0]);
    cbf_gpu_timer_destroy(s->timer[1]);
    free(s);
    cbf_node_set_state(node, NULL);
}

static int corr_init(cbf_node *node, cbf_error *err)
{
    corr *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    cbf_node_set_state(node, s);
    const cbf_params *p = cbf_node_params(node);
    s->in = cbf_node_port(node, "in", 0);
    s->out = cbf_node_port(node, "out", 0);
    const cbf_port_desc *in = cbf_port_get_desc(s->in);
    double ch, sph, sbs, rate;
    int rc;
    if ((rc = cbf_stage_input_attr(in, CBF_ATTR_CHANNELS, &ch, err)) ||
        (rc = cbf_stage_input_attr(in, CBF_ATTR_SPECTRA_PER_HEAP, &sph, err)) ||
        (rc = cbf_stage_input_attr(in, CBF_ATTR_SAMPLES_BETWEEN_SPECTRA, &sbs, err)) ||
        (rc = cbf_stage_input_attr(in, CBF_ATTR_ADC_SAMPLE_RATE, &rate, err)))
        return rc;
    cbf_xeng_batch b;
    if (cbf_xeng_batch_of(in, &b))
        return cbf_error_set(err, CBF_ECONFIG,
                             "input must be CI8 or CI4 [batch][antenna][channel][spectrum][pol]");
    s->batches = (int)b.batches;
    s->shape = (cbf_corr_shape){(int)b.n_ants, (int)b.channels, (int)b.spectra,
                                b.dtype == CBF_DTYPE_CI8 ? 8 : 4};
    char msg[CBF_STAGE_MSG];
    if (cbf_corr_shape_check(&s->shape, msg, sizeof msg))
        return cbf_error_set(err, CBF_ECONFIG, "input: %s", msg);
    s->batch_step = (int64_t)sph * (int64_t)sbs;
    s->dump_batches = cbf_params_int(p, CBF_ATTR_HEAP_ACCUMULATION_THRESHOLD);
    s->open_dump = -1;
    s->in_bytes = (size_t)s->batches * cbf_corr_batch_bytes(&s->shape);
    s->slices = 1;
    s->gpu = cbf_node_use_gpu(node);
#ifdef CBF_HAVE_CUDA
    if (s->gpu && (rc = corr_gpu_setup(node, s, in->mem, err)))
        return rc;
#else
    if (s->gpu)
        return cbf_error_set(err, CBF_ENOTSUP, "built without CUDA");
#endif
    if (!s->gpu && in->mem == CBF_MEM_DEVICE)
        return cbf_error_set(err, CBF_ECONFIG, "device input on the CPU path");
    s->acc_bytes = (size_t)s->slices * cbf_corr_accum_len(&s->shape) * sizeof(int64_t);
    const cbf_xeng_accum acc = {
        .slices = (size_t)s->slices,
        .channels = (size_t)s->shape.channels,
        .baselines = cbf_corr_baselines(s->shape.n_ants),
        .n_ants = s->shape.n_ants,
        .dump_batches = (int)s->dump_batches,
    };
    cbf_port_desc d;
    cbf_xeng_accum_desc(&d, &acc, s->gpu ? CBF_MEM_DEVICE : CBF_MEM_HOST, in);
    d.timestamp_step = s->batch_step * s->dump_batches;
    if ((rc = cbf_stage_out_open(node, s->out, &d, (size_t)cbf_params_int(p, "buffers"), &s->pool,
                                 err)))
        return rc;
    s->c_dumps = cbf_node_counter(node, "dumps");
    s->c_dropped = cbf_node_counter(node, "unfinished_dumps_dropped");
    return 0;
}

static int corr_send_dump(corr *s, cbf_error *err)
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

static int corr_open_dump(corr *s, int64_t dump, cbf_error *err)
{
    int rc = cbf_pool_get(s->pool, &s->acc);
    if (rc)
        return rc == CBF_ESTOPPED ? rc : cbf_error_set(err, rc, "no accumulator buffer");
    /* On the GPU, the reducer synchronised its stream before it gave this buffer back. */
    if ((rc = cbf_stage_fill(s->acc->data, s->acc->kind, 0, s->acc_bytes, s->stream,
                             "clearing accumulators", err)))
        return rc;
    s->acc->n_present = (size_t)s->dump_batches * s->shape.n_ants;
    memset(s->acc->present, 0, s->acc->n_present); /* nothing seen yet */
    s->acc->timestamp = dump * s->dump_batches * s->batch_step;
    s->acc->seq = (uint64_t)dump;
    s->acc->saturated = 0;
    s->open_dump = dump;
    return 0;
}

/* Where the kernels read this input buffer from (uploading a host one). */
static int corr_input_data(corr *s, cbf_buffer *in, const uint8_t **data, cbf_error *err)
{
    *data = in->data;
    if (!s->gpu)
        return in->kind == CBF_MEM_HOST ? 0 : cbf_buffer_sync_host(in, err);
    const int k = (int)(s->n_timed % 2);
    if (in->kind == CBF_MEM_DEVICE) {
        int rc = cbf_buffer_wait_stream(in, s->stream, err);
        return rc ? rc : cbf_gpu_timer_start(s->timer[k], s->stream, err);
    }
    int rc;
    if ((rc = cbf_gpu_timer_start(s->timer[k], s->stream, err)) ||
        (rc = cbf_buffer_wait_stream(in, s->up, err)) ||
        (rc = cbf_stage_stream_wait(s->up, s->read[k], err)) ||
        (rc = cbf_stage_copy(s->d_in[k], CBF_MEM_DEVICE, in->data, in->kind, s->in_bytes, s->up,
                             "upload", err)) ||
        (rc = cbf_stage_event_record(s->uploaded[k], s->up, err)) ||
        (rc = cbf_stage_stream_wait(s->stream, s->uploaded[k], err)))
        return rc;
    *data = s->d_in[k];
    return 0;
}

/* Every kernel reading `in` is queued: the buffer is held until they are
 * done (its upload too), and d_in's slot is free for an upload once they
 * are. After an error the stream is waited for instead. */
static int corr_input_done(corr *s, cbf_buffer *in, int failed, cbf_error *err)
{
    if (!s->gpu)
        return 0;
    if (failed)
        return cbf_stage_stream_sync(s->stream, "stream", err);
    int rc = in->kind == CBF_MEM_DEVICE
                 ? 0 : cbf_stage_event_record(s->read[s->n_timed % 2], s->stream, err);
    return rc ? rc : cbf_stage_hold_push(&s->held, in, s->stream, NULL, err);
}

/* After corr_input_done: the hold has seen the previous buffer done (it
 * holds one), so its timer can be read. */
static void corr_gauge(corr *s)
{
    const uint64_t k = s->n_timed++;
    if (k > 0)
        cbf_gauge_set(s->g_gpu_ms, cbf_gpu_timer_ms(s->timer[(k - 1) % 2]));
}

static int corr_run_kernel(corr *s, const cbf_corr_job *job, cbf_error *err)
{
    char msg[CBF_STAGE_MSG];
#ifdef CBF_HAVE_CUDA
    if (s->gpu) {
        cbf_corr_job j = *job;
        const size_t n = j.batch_end - j.batch_begin;
        j.slices = n < (size_t)s->slices ? (int)n : s->slices;
        return cbf_stage_kern(cbf_corr_cuda_run(s->plan, &j, s->stream, msg, sizeof msg), msg,
                              err);
    }
#else
    (void)s;
#endif
    return cbf_stage_kern(cbf_corr_cpu(job, msg, sizeof msg), msg, err);
}

static int corr_correlate(corr *s, cbf_buffer *in, const uint8_t *data, cbf_error *err)
{
    cbf_dump_span sp[64];
    size_t nsp;
    char msg[CBF_STAGE_MSG];
    /* at most 32 batches at a time, so the spans always fit in sp */
    for (int first = 0; first < s->batches;) {
        int n = s->batches - first < 32 ? s->batches - first : 32;
        int64_t ts = in->timestamp + first * s->batch_step;
        if (cbf_dump_split(ts, (size_t)n, s->batch_step, s->dump_batches, sp, sizeof sp / sizeof sp[0], &nsp, msg,
                           sizeof msg))
            return cbf_error_set(err, CBF_EINVAL, "buffer %llu: %s",
                                 (unsigned long long)in->seq, msg);
        for (size_t j = 0; j < nsp; j++) {
            int rc;
            if (s->acc && sp[j].dump != s->open_dump && (rc = corr_send_dump(s, err)))
                return rc;
            if (!s->acc && (rc = corr_open_dump(s, sp[j].dump, err)))
                return rc;
            cbf_corr_job job = {s->shape, data, (size_t)first + sp[j].batch_begin,
                                (size_t)first + sp[j].batch_end, s->acc->data, s->slices};
            if ((rc = corr_run_kernel(s, &job, err)))
                return rc;
            const int64_t dump_ts = s->acc->timestamp;
            for (size_t b = job.batch_begin; b < job.batch_end; b++) {
                int64_t k = (in->timestamp + (int64_t)b * s->batch_step - dump_ts) / s->batch_step;
                for (int a = 0; a < s->shape.n_ants; a++)
                    s->acc->present[k * s->shape.n_ants + a] =
                        in->present[b * (size_t)s->shape.n_ants + a];
            }
            if (sp[j].closes && (rc = corr_send_dump(s, err)))
                return rc;
        }
        first += n;
    }
    return 0;
}

static int corr_buffer(void *user, cbf_buffer *in, cbf_error *err)
{
    corr *s = user;
    const uint8_t *data;
    int rc = corr_input_data(s, in, &data, err);
    if (!rc)
        rc = corr_correlate(s, in, data, err);
    if (!rc && s->gpu)
        rc = cbf_gpu_timer_stop(s->timer[s->n_timed % 2], s->stream, err);
    /* even after an error: the producer may not get `in` back while the GPU reads it */
    cbf_error e2;
    int rc2 = corr_input_done(s, in, rc != 0, rc ? &e2 : err);
    if ((rc = rc ? rc : rc2) == 0 && s->gpu)
        corr_gauge(s);
    return rc;
}

static int corr_run(cbf_node *node, cbf_error *err)
{
    corr *s = cbf_node_state(node);
    int rc = cbf_stage_input_loop(node, "in", corr_buffer, s, err);
    if (rc)
        return rc == CBF_ESTOPPED ? 0 : rc;
    if (s->acc) {
        cbf_buffer_unref(s->acc);
        s->acc = NULL;
        cbf_counter_add(s->c_dropped, 1);
    }
    return 0;
}

static const cbf_plugin_desc corr_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "correlator",
    .version = "0.1.0",
    .summary = "X-engine correlator: batches to int64 accumulators, one buffer per dump",
    .params = corr_params,
    .n_params = CBF_COUNT_OF(corr_params),
    .ports = corr_ports,
    .n_ports = CBF_COUNT_OF(corr_ports),
    .init = corr_init,
    .run = corr_run,
    .fini = corr_fini,
};

CBF_PLUGIN_DEFINE(corr_desc)
