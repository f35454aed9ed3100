/* correlator: X-engine batches in, one int64 accumulator buffer out per
 * dump ("cbf.xeng.accum"). The dumps' timing, flags and counts are the
 * shared stage code of dumps.h (the xbengine plugin adds beams to them).
 *
 * On the CPU the exact int64 kernel adds into one slice of host
 * accumulators. On the GPU the accumulators are device memory with
 * `slices` slices (one per blockIdx.z of the tensor-core kernel; the
 * reducer sums them): a host input buffer is uploaded once, on a stream of
 * its own into one of two device buffers in turn (stage/path.h), so the
 * next upload overlaps this one's kernels; device input is read in place. Either way
 * the host never waits per buffer: the input is held until the kernels
 * reading it are done (stage/gpu.h's hold). Each dump's buffer carries an
 * event recorded after its last kernel, which the reducer's stream waits
 * on. */
#include <cbf/cbf.h>

#include <stdlib.h>

#include "dumps.h"
#include "stage/contracts/xeng.h"
#include "stage/gpu.h"
#include "stage/input.h"
#include "stage/path.h"

static const cbf_param_decl corr_params[] = {
    CBF_CORR_PARAMS,
    {.name = "buffers", .type = CBF_PARAM_INT, .def = "3", .has_range = 1, .min = 2, .max = 64,
     .doc = "accumulator buffers in the pool"},
};

static const cbf_port_decl corr_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = CBF_TYPE_XENG_BATCH, .doc = "X-engine batches"},
    {.name = "out", .dir = CBF_PORT_OUT, .type = CBF_TYPE_XENG_ACCUM,
     .doc = "int64 accumulators [slice][channel][baseline][product], one buffer per dump"},
};

typedef struct corr {
    cbf_corr_dumps dumps;
    cbf_stage_path path;     /* the kernels' stream; host input uploaded into two slots in turn */
    cbf_stage_hold held;     /* input buffers until their kernels are done */
    /* An input buffer's kernels, from its input on the GPU: the
     * gpu_ms_per_buffer gauge.
     * Two, used in turn: a buffer's time is read one buffer later, once
     * the hold has seen it done. */
    cbf_gpu_timer *timer[2];
    uint64_t n_timed;
    cbf_gauge *g_gpu_ms;
} corr;

#ifdef CBF_HAVE_CUDA
/* The hold, timers and (for host input) the upload slots. */
static int corr_gpu_setup(cbf_node *node, corr *s, cbf_error *err)
{
    int rc;
    if ((rc = cbf_stage_hold_init(&s->held, 1, err)) ||
        (rc = cbf_stage_path_upload_init(&s->path, s->dumps.in_bytes, err)) ||
        (rc = cbf_gpu_timer_create(&s->timer[0], err)) ||
        (rc = cbf_gpu_timer_create(&s->timer[1], err)))
        return rc;
    s->g_gpu_ms = cbf_node_gauge(node, "gpu_ms_per_buffer");
    cbf_log_info("tensor-core correlator on the GPU, %d accumulator slice(s), %s input",
                 s->dumps.slices, cbf_mem_kind_name(s->path.in->mem));
    return 0;
}
#endif

static void corr_fini(cbf_node *node)
{
    corr *s = cbf_node_state(node);
    if (!s)
        return;
    if (s->held.buf)
        cbf_stage_hold_fini(&s->held);
    cbf_stage_path_fini(&s->path); /* nothing may still write the open dump */
    cbf_corr_dumps_fini(&s->dumps);
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
    int rc;
    if ((rc = cbf_stage_path_open(&s->path, node, "in", err)) ||
        (rc = cbf_corr_dumps_init(&s->dumps, node, s->path.in, s->path.stream, err)))
        return rc;
#ifdef CBF_HAVE_CUDA
    if (s->path.gpu && (rc = corr_gpu_setup(node, s, err)))
        return rc;
#endif
    return cbf_corr_dumps_open(&s->dumps, node, cbf_node_port(node, "out", 0), s->path.in,
                               (size_t)cbf_params_int(cbf_node_params(node), "buffers"), err);
}

/* Where the kernels read this input buffer from (uploading a host one). */
static int corr_input_data(corr *s, cbf_buffer *in, const uint8_t **data, cbf_error *err)
{
    int rc = cbf_stage_path_put(&s->path, in, data, err);
    if (rc || !s->path.gpu)
        return rc;
    /* the buffer's GPU time counts from its input on the GPU */
    return cbf_gpu_timer_start(s->timer[s->n_timed % 2], s->path.stream, err);
}

/* Every kernel reading `in` is queued: the buffer is held until they are
 * done (its upload too), and its upload slot is free for the next upload
 * once they are. After an error the stream is waited for instead. */
static int corr_input_done(corr *s, cbf_buffer *in, int failed, cbf_error *err)
{
    if (!s->path.gpu)
        return 0;
    if (failed)
        return cbf_stage_stream_sync(s->path.stream, "stream", err);
    int rc = cbf_stage_path_read(&s->path, s->path.stream, err);
    return rc ? rc : cbf_stage_hold_push(&s->held, in, s->path.stream, NULL, err);
}

/* After corr_input_done: the hold has seen the previous buffer done (it
 * holds one), so its timer can be read. */
static void corr_gauge(corr *s)
{
    const uint64_t k = s->n_timed++;
    if (k > 0)
        cbf_gauge_set(s->g_gpu_ms, cbf_gpu_timer_ms(s->timer[(k - 1) % 2]));
}

static int corr_piece(void *user, const cbf_corr_job *job, cbf_error *err)
{
    corr *s = user;
    return cbf_corr_dumps_kernel(&s->dumps, job, err);
}

static int corr_buffer(void *user, cbf_buffer *in, cbf_error *err)
{
    corr *s = user;
    const uint8_t *data;
    int rc = corr_input_data(s, in, &data, err);
    if (!rc)
        rc = cbf_corr_dumps_add(&s->dumps, in, data, corr_piece, s, err);
    if (!rc && s->path.gpu)
        rc = cbf_gpu_timer_stop(s->timer[s->n_timed % 2], s->path.stream, err);
    /* even after an error: the producer may not get `in` back while the GPU reads it */
    cbf_error e2;
    int rc2 = corr_input_done(s, in, rc != 0, rc ? &e2 : err);
    if ((rc = rc ? rc : rc2) == 0 && s->path.gpu)
        corr_gauge(s);
    return rc;
}

static int corr_run(cbf_node *node, cbf_error *err)
{
    corr *s = cbf_node_state(node);
    int rc = cbf_stage_input_loop(node, "in", corr_buffer, s, err);
    if (rc)
        return rc == CBF_ESTOPPED ? 0 : rc;
    cbf_corr_dumps_end(&s->dumps);
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
