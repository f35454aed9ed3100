/* dumps.c: see dumps.h. */
#include "dumps.h"

#include <stdlib.h>
#include <string.h>

#include "reducer.h"
#include "stage/contracts/xeng.h"
#include "stage/flow.h"
#include "stage/gpu.h"
#include "stage/input.h"
#include "stage/kern.h"

#ifdef CBF_HAVE_CUDA
/* The plan and its slices. */
static int dumps_gpu_setup(cbf_corr_dumps *d, const cbf_params *p, cbf_error *err)
{
    const char *ba = cbf_params_string(p, "block_ants");
    char msg[CBF_STAGE_MSG];
    int rc;
    if ((rc = cbf_stage_kern(cbf_corr_cuda_create(&d->shape, strcmp(ba, "auto") ? atoi(ba) : 0,
                                                  &d->plan, msg, sizeof msg), msg, err)))
        return rc;
    const int64_t want = cbf_params_int(p, "slices");
    /* A call never spans more batches than one buffer or one dump holds. */
    size_t most = (size_t)d->batches < (size_t)d->dump_batches ? (size_t)d->batches
                                                               : (size_t)d->dump_batches;
    d->slices = want ? (int)want : cbf_corr_cuda_auto_slices(d->plan, most);
    return 0;
}
#endif

int cbf_corr_dumps_init(cbf_corr_dumps *d, cbf_node *node, const cbf_port_desc *in, void *stream,
                        cbf_error *err)
{
    memset(d, 0, sizeof *d);
    const cbf_params *p = cbf_node_params(node);
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
    d->batches = (int)b.batches;
    d->shape = (cbf_corr_shape){(int)b.n_ants, (int)b.channels, (int)b.spectra,
                                b.dtype == CBF_DTYPE_CI8 ? 8 : 4};
    char msg[CBF_STAGE_MSG];
    if (cbf_corr_shape_check(&d->shape, msg, sizeof msg))
        return cbf_error_set(err, CBF_ECONFIG, "input: %s", msg);
    d->batch_step = (int64_t)sph * (int64_t)sbs;
    d->dump_batches = cbf_params_int(p, CBF_ATTR_HEAP_ACCUMULATION_THRESHOLD);
    d->open_dump = -1;
    d->in_bytes = (size_t)d->batches * cbf_corr_batch_bytes(&d->shape);
    d->slices = 1;
    d->stream = stream;
#ifdef CBF_HAVE_CUDA
    if (stream && (rc = dumps_gpu_setup(d, p, err)))
        return rc;
#else
    if (stream)
        return cbf_error_set(err, CBF_ENOTSUP, "built without CUDA");
#endif
    d->acc_bytes = (size_t)d->slices * cbf_corr_accum_len(&d->shape) * sizeof(int64_t);
    d->c_dumps = cbf_node_counter(node, "dumps");
    d->c_dropped = cbf_node_counter(node, "unfinished_dumps_dropped");
    cbf_stage_chan_range(node, "chan-range", 0, in, d->shape.channels);   /* NODE.chan-range */
    return 0;
}

int cbf_corr_dumps_open(cbf_corr_dumps *d, cbf_node *node, cbf_port *out,
                        const cbf_port_desc *in, size_t buffers, cbf_error *err)
{
    const cbf_xeng_accum acc = {
        .slices = (size_t)d->slices,
        .channels = (size_t)d->shape.channels,
        .baselines = cbf_corr_baselines(d->shape.n_ants),
        .n_ants = d->shape.n_ants,
        .dump_batches = (int)d->dump_batches,
    };
    cbf_port_desc desc;
    cbf_xeng_accum_desc(&desc, &acc, d->stream ? CBF_MEM_DEVICE : CBF_MEM_HOST, in);
    desc.timestamp_step = d->batch_step * d->dump_batches;
    d->out = out;
    return cbf_stage_out_open(node, out, &desc, buffers, &d->pool, err);
}

void cbf_corr_dumps_fini(cbf_corr_dumps *d)
{
    if (d->acc)
        cbf_buffer_unref(d->acc);
#ifdef CBF_HAVE_CUDA
    cbf_corr_cuda_destroy(d->plan);
#endif
    memset(d, 0, sizeof *d);
}

static int dumps_send(cbf_corr_dumps *d, cbf_error *err)
{
    cbf_buffer *b = d->acc;
    d->acc = NULL;
    b->missing = 0;
    for (size_t i = 0; i < b->n_present; i++)
        b->missing += !b->present[i];
    cbf_counter_add(d->c_dumps, 1);
    if (d->stream) {
        int rc = cbf_buffer_record(b, d->stream, err);
        if (rc) {
            cbf_buffer_unref(b);
            return rc;
        }
    }
    return cbf_port_send(d->out, b);
}

static int dumps_open_dump(cbf_corr_dumps *d, int64_t dump, cbf_error *err)
{
    int rc = cbf_pool_get(d->pool, &d->acc);
    if (rc)
        return rc == CBF_ESTOPPED ? rc : cbf_error_set(err, rc, "no accumulator buffer");
    /* On the GPU, the reducer synchronised its stream before it gave this buffer back. */
    if ((rc = cbf_stage_fill(d->acc->data, d->acc->kind, 0, d->acc_bytes, d->stream,
                             "clearing accumulators", err)))
        return rc;
    d->acc->n_present = (size_t)d->dump_batches * d->shape.n_ants;
    memset(d->acc->present, 0, d->acc->n_present); /* nothing seen yet */
    d->acc->timestamp = dump * d->dump_batches * d->batch_step;
    d->acc->seq = (uint64_t)dump;
    d->acc->saturated = 0;
    d->open_dump = dump;
    return 0;
}

int cbf_corr_dumps_kernel(cbf_corr_dumps *d, const cbf_corr_job *job, cbf_error *err)
{
    char msg[CBF_STAGE_MSG];
#ifdef CBF_HAVE_CUDA
    if (d->stream) {
        cbf_corr_job j = *job;
        const size_t n = j.batch_end - j.batch_begin;
        j.slices = n < (size_t)d->slices ? (int)n : d->slices;
        return cbf_stage_kern(cbf_corr_cuda_run(d->plan, &j, d->stream, msg, sizeof msg), msg,
                              err);
    }
#else
    (void)d;
#endif
    return cbf_stage_kern(cbf_corr_cpu(job, msg, sizeof msg), msg, err);
}

int cbf_corr_dumps_add(cbf_corr_dumps *d, const cbf_buffer *in, const uint8_t *data,
                       cbf_corr_piece_fn piece, void *user, cbf_error *err)
{
    cbf_dump_span sp[64];
    size_t nsp;
    char msg[CBF_STAGE_MSG];
    /* at most 32 batches at a time, so the spans always fit in sp */
    for (int first = 0; first < d->batches;) {
        int n = d->batches - first < 32 ? d->batches - first : 32;
        int64_t ts = in->timestamp + first * d->batch_step;
        if (cbf_dump_split(ts, (size_t)n, d->batch_step, d->dump_batches, sp,
                           sizeof sp / sizeof sp[0], &nsp, msg, sizeof msg))
            return cbf_error_set(err, CBF_EINVAL, "buffer %llu: %s",
                                 (unsigned long long)in->seq, msg);
        for (size_t j = 0; j < nsp; j++) {
            int rc;
            if (d->acc && sp[j].dump != d->open_dump && (rc = dumps_send(d, err)))
                return rc;
            if (!d->acc && (rc = dumps_open_dump(d, sp[j].dump, err)))
                return rc;
            cbf_corr_job job = {d->shape, data, (size_t)first + sp[j].batch_begin,
                                (size_t)first + sp[j].batch_end, d->acc->data, d->slices};
            if ((rc = piece(user, &job, err)))
                return rc;
            const int64_t dump_ts = d->acc->timestamp;
            for (size_t b = job.batch_begin; b < job.batch_end; b++) {
                int64_t k = (in->timestamp + (int64_t)b * d->batch_step - dump_ts) / d->batch_step;
                for (int a = 0; a < d->shape.n_ants; a++)
                    d->acc->present[k * d->shape.n_ants + a] =
                        in->present[b * (size_t)d->shape.n_ants + a];
            }
            if (sp[j].closes && (rc = dumps_send(d, err)))
                return rc;
        }
        first += n;
    }
    return 0;
}

void cbf_corr_dumps_end(cbf_corr_dumps *d)
{
    if (d->acc) {
        cbf_buffer_unref(d->acc);
        d->acc = NULL;
        cbf_counter_add(d->c_dropped, 1);
    }
}
