/* correlator: X-engine batches in, one int64 accumulator buffer out per
 * dump ("cbf.xeng.accum"). Dumps hold heap_accumulation_threshold batches
 * and start at multiples of that interval in timestamp (auto-resync), so a
 * dump may begin or end inside an input buffer; the presence flags of the
 * output say, per (batch of the dump, antenna), whether data arrived. A
 * dump that was only partly seen at the start of the stream goes out with
 * its unseen batches flagged missing; the unfinished dump at end of stream
 * is dropped and counted. Correlation runs on the CPU kernel (exact int64);
 * see README.md. */
#include <cbf/cbf.h>

#include <stdlib.h>
#include <string.h>

#include "correlator.h"
#include "reducer.h"

static const cbf_param_decl params[] = {
    {"heap_accumulation_threshold", CBF_PARAM_INT, "4", CBF_RANGE(1, 1 << 24), NULL,
     "batches per dump"},
    {"buffers", CBF_PARAM_INT, "3", CBF_RANGE(2, 64), NULL, "accumulator buffers in the pool"},
};

static const cbf_port_decl ports[] = {
    {"in", CBF_PORT_IN, "cbf.xeng.batch", 0, 0, "X-engine batches"},
    {"out", CBF_PORT_OUT, "cbf.xeng.accum", 0, 0,
     "int64 accumulators [channel][baseline][product], one buffer per dump"},
};

typedef struct corr {
    cbf_port *in, *out;
    cbf_pool *pool;
    cbf_corr_shape shape;
    int batches;             /* per input buffer */
    int64_t batch_step, dump_batches;
    cbf_buffer *acc;         /* the open dump, or NULL */
    int64_t open_dump;
    cbf_counter *c_dumps, *c_dropped;
} corr;

static void corr_fini(cbf_node *node)
{
    corr *s = cbf_node_state(node);
    if (!s)
        return;
    if (s->acc)
        cbf_buffer_unref(s->acc);
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
    const size_t nbl = cbf_corr_baselines(s->shape.n_ants);
    cbf_port_desc d;
    cbf_port_desc_init(&d, CBF_DTYPE_CI64, CBF_MEM_HOST);
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
        .kind = CBF_MEM_HOST,
        .count = (size_t)cbf_params_int(p, "buffers"),
        .size = cbf_port_desc_bytes(&d),
        .n_present = d.n_present,
    };
    if ((rc = cbf_node_pool_create(node, &pc, &s->pool, err)) != 0)
        return rc;
    if (cbf_node_use_gpu(node))
        cbf_log_warn("%s: the correlator plugin has no GPU path yet; using the exact "
                "CPU kernel", cbf_node_name(node));
    s->c_dumps = cbf_node_counter(node, "dumps");
    s->c_dropped = cbf_node_counter(node, "unfinished_dumps_dropped");
    return 0;
}

static int send_dump(corr *s)
{
    cbf_buffer *b = s->acc;
    s->acc = NULL;
    b->missing = 0;
    for (size_t i = 0; i < b->n_present; i++)
        b->missing += !b->present[i];
    cbf_counter_add(s->c_dumps, 1);
    return cbf_port_send(s->out, b);
}

static int open_dump(corr *s, int64_t dump, cbf_error *err)
{
    int rc = cbf_pool_get(s->pool, &s->acc);
    if (rc)
        return rc == CBF_ESTOPPED ? rc : cbf_error_set(err, rc, "correlator: no accumulator buffer");
    memset(s->acc->data, 0, cbf_corr_accum_len(&s->shape) * sizeof(int64_t));
    s->acc->n_present = (size_t)s->dump_batches * s->shape.n_ants;
    memset(s->acc->present, 0, s->acc->n_present); /* nothing seen yet */
    s->acc->timestamp = dump * s->dump_batches * s->batch_step;
    s->acc->seq = (uint64_t)dump;
    s->acc->saturated = 0;
    s->open_dump = dump;
    return 0;
}

static int correlate(corr *s, cbf_buffer *in, cbf_error *err)
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
            if (s->acc && sp[j].dump != s->open_dump && (rc = send_dump(s)))
                return rc;
            if (!s->acc && (rc = open_dump(s, sp[j].dump, err)))
                return rc;
            cbf_corr_job job = {s->shape, in->data, (size_t)first + sp[j].batch_begin,
                                (size_t)first + sp[j].batch_end, s->acc->data, 1};
            if ((rc = cbf_corr_cpu(&job, msg, sizeof msg)))
                return cbf_error_set(err, rc, "correlator: %s", msg);
            const int64_t dump_ts = s->acc->timestamp;
            for (size_t b = job.batch_begin; b < job.batch_end; b++) {
                int64_t k = (in->timestamp + (int64_t)b * s->batch_step - dump_ts) / s->batch_step;
                for (int a = 0; a < s->shape.n_ants; a++)
                    s->acc->present[k * s->shape.n_ants + a] =
                        in->present[b * (size_t)s->shape.n_ants + a];
            }
            if (sp[j].closes && (rc = send_dump(s)))
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
        rc = correlate(s, in, err);
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
