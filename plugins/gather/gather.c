/* gather: F-engine spectra of N antennas (one "cbf.feng.spectra" edge per
 * antenna, antenna = edge index in YAML order) into X-engine batches
 * ("cbf.xeng.batch"), as an X-engine's receiver would assemble them from
 * the network. Buffers are matched by timestamp: the inputs advance
 * together, and one arriving out of step is an error that names it. */
#include <cbf/cbf.h>

#include <stdlib.h>
#include <string.h>

#include "stage/contracts/feng.h"
#include "stage/contracts/xeng.h"
#include "stage/flow.h"

static const cbf_param_decl gather_params[] = {
    {.name = "buffers", .type = CBF_PARAM_INT, .def = "3", .has_range = 1, .min = 2, .max = 64,
     .doc = "output buffers in the pool"},
};

static const cbf_port_decl gather_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = CBF_TYPE_FENG_SPECTRA, .multi = 1,
     .doc = "one F-engine per edge; antenna = edge index in YAML order"},
    {.name = "out", .dir = CBF_PORT_OUT, .type = CBF_TYPE_XENG_BATCH,
     .doc = "X-engine batches [batch][antenna][channel][spectrum][pol]"},
};

typedef struct gather {
    cbf_port **in, *out;
    cbf_pool *pool;
    int n;
    size_t batches, slab; /* bytes of one antenna's batch */
    uint8_t *scratch;     /* one input buffer, copied to host */
    cbf_buffer **held;
    cbf_counter *c_batches, *c_missing;
} gather;

static void gather_fini(cbf_node *node)
{
    gather *s = cbf_node_state(node);
    if (!s)
        return;
    if (s->held)
        for (int a = 0; a < s->n; a++)
            if (s->held[a])
                cbf_buffer_unref(s->held[a]);
    free(s->held);
    free(s->in);
    free(s->scratch);
    free(s);
    cbf_node_set_state(node, NULL);
}

static int gather_same_shape(const cbf_port_desc *a, const cbf_port_desc *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->timestamp_step != b->timestamp_step)
        return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return 0;
    return 1;
}

static int gather_init(cbf_node *node, cbf_error *err)
{
    gather *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    cbf_node_set_state(node, s);
    s->n = cbf_node_port_count(node, "in");
    s->in = calloc((size_t)s->n, sizeof *s->in);
    s->held = calloc((size_t)s->n, sizeof *s->held);
    if (!s->in || !s->held)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    const cbf_port_desc *d0 = NULL;
    for (int a = 0; a < s->n; a++) {
        s->in[a] = cbf_node_port(node, "in", a);
        const cbf_port_desc *d = cbf_port_get_desc(s->in[a]);
        if (!d0)
            d0 = d;
        if (d->ndim != 4 || (d->dtype != CBF_DTYPE_CI8 && d->dtype != CBF_DTYPE_CI4))
            return cbf_error_set(err, CBF_ECONFIG,
                                 "input %d is not CI8/CI4 [batch][channel][spectrum][pol]", a);
        if (!gather_same_shape(d0, d))
            return cbf_error_set(err, CBF_ECONFIG,
                                 "input %d differs in shape, type or timestamp step from "
                                 "input 0", a);
    }
    s->batches = d0->shape[0];
    s->slab = cbf_port_desc_bytes(d0) / s->batches;
    s->scratch = malloc(cbf_port_desc_bytes(d0));
    if (!s->scratch)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    const cbf_xeng_batch b = {
        .dtype = d0->dtype,
        .batches = s->batches,
        .n_ants = (size_t)s->n,
        .channels = d0->shape[1],
        .spectra = d0->shape[2],
    };
    cbf_port_desc d;
    cbf_xeng_batch_desc(&d, &b, CBF_MEM_HOST);
    d.timestamp_step = d0->timestamp_step;
    /* What describes the band and the spectra; an antenna's own attributes stay behind. */
    static const char *const keep[] = {CBF_ATTR_CHANNELS, CBF_ATTR_SPECTRA_PER_HEAP,
                                       CBF_ATTR_SAMPLES_BETWEEN_SPECTRA, CBF_ATTR_ADC_SAMPLE_RATE,
                                       CBF_ATTR_CENTRE_FREQUENCY, CBF_ATTR_BANDWIDTH};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        double v;
        if (!cbf_port_desc_get_attr(d0, keep[i], &v))
            cbf_port_desc_set_attr(&d, keep[i], v);
    }
    cbf_port_desc_set_attr(&d, CBF_ATTR_N_ANTS, s->n);
    s->out = cbf_node_port(node, "out", 0);
    int rc = cbf_stage_out_open(node, s->out, &d,
                                (size_t)cbf_params_int(cbf_node_params(node), "buffers"),
                                &s->pool, err);
    if (rc)
        return rc;
    s->c_batches = cbf_node_counter(node, "batches");
    s->c_missing = cbf_node_counter(node, "missing_heaps");
    return 0;
}

/* One buffer from every input, all of one timestamp, into one output. */
static int gather_one(gather *s, cbf_error *err)
{
    for (int a = 0; a < s->n; a++) {
        int rc = cbf_port_recv(s->in[a], &s->held[a]);
        if (rc)
            return rc; /* CBF_EOS: any input ending ends the gather */
        if (s->held[a]->timestamp != s->held[0]->timestamp)
            return cbf_error_set(err, CBF_EINVAL,
                                 "input %d has timestamp %lld where input 0 has %lld", a,
                                 (long long)s->held[a]->timestamp,
                                 (long long)s->held[0]->timestamp);
    }
    cbf_buffer *out;
    int rc = cbf_pool_get(s->pool, &out);
    if (rc)
        return rc == CBF_ESTOPPED ? rc : cbf_error_set(err, rc, "no output buffer");
    out->timestamp = s->held[0]->timestamp;
    out->seq = s->held[0]->seq;
    out->n_present = s->batches * (size_t)s->n;
    out->saturated = out->missing = 0;
    for (int a = 0; a < s->n; a++) {
        cbf_buffer *b = s->held[a];
        if ((rc = cbf_buffer_copy_to_host(b, s->scratch, s->slab * s->batches, err))) {
            cbf_buffer_unref(out);
            return rc;
        }
        for (size_t k = 0; k < s->batches; k++) {
            memcpy((uint8_t *)out->data + (k * (size_t)s->n + a) * s->slab, s->scratch + k * s->slab,
                   s->slab);
            uint8_t p = k < b->n_present ? b->present[k] : 0;
            out->present[k * (size_t)s->n + a] = p;
            out->missing += !p;
        }
        out->saturated += b->saturated;
        cbf_buffer_unref(b);
        s->held[a] = NULL;
    }
    cbf_counter_add(s->c_batches, s->batches);
    cbf_counter_add(s->c_missing, out->missing);
    return cbf_port_send(s->out, out);
}

static int gather_run(cbf_node *node, cbf_error *err)
{
    gather *s = cbf_node_state(node);
    for (;;) {
        int rc = gather_one(s, err);
        for (int a = 0; a < s->n; a++)
            if (s->held[a]) {
                cbf_buffer_unref(s->held[a]);
                s->held[a] = NULL;
            }
        if (rc == CBF_EOS || rc == CBF_ESTOPPED)
            return 0;
        if (rc)
            return rc;
    }
}

static const cbf_plugin_desc gather_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "gather",
    .version = "0.1.0",
    .summary = "gathers per-antenna F-engine spectra into X-engine batches",
    .params = gather_params,
    .n_params = CBF_COUNT_OF(gather_params),
    .ports = gather_ports,
    .n_ports = CBF_COUNT_OF(gather_ports),
    .init = gather_init,
    .run = gather_run,
    .fini = gather_fini,
};

CBF_PLUGIN_DEFINE(gather_desc)
