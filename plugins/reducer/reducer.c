/* reducer: one accumulator buffer per dump in ("cbf.xeng.accum"), one
 * visibility buffer out ("cbf.xeng.vis"): int32 with saturation (counted),
 * and the magic value (-2^31, 1) on every baseline of an antenna that
 * missed any batch of the dump. Runs the CPU reducer kernel. */
#include <cbf/cbf.h>

#include <stdlib.h>
#include <string.h>

#include "reducer.h"

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
    int n_ants, channels, dump_batches;
    uint8_t *bad;
    cbf_counter *c_sat, *c_dumps, *c_flagged;
} red;

static void red_fini(cbf_node *node)
{
    red *s = cbf_node_state(node);
    if (!s)
        return;
    free(s->bad);
    free(s);
    cbf_node_set_state(node, NULL);
}

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
        cbf_port_desc_get_attr(in, "heap_accumulation_threshold", &hat) || in->ndim != 3 ||
        in->dtype != CBF_DTYPE_CI64)
        return cbf_error_set(err, CBF_ECONFIG,
                             "reducer: input is not a correlator's CI64 [channel][baseline]"
                             "[product] with n_ants and heap_accumulation_threshold");
    s->n_ants = (int)n_ants;
    s->channels = (int)in->shape[0];
    s->dump_batches = (int)hat;
    s->bad = calloc((size_t)s->n_ants, 1);
    if (!s->bad)
        return cbf_error_set(err, CBF_ENOMEM, "reducer: out of memory");
    cbf_port_desc d;
    cbf_port_desc_init(&d, CBF_DTYPE_CI32, CBF_MEM_HOST);
    cbf_port_desc_add_axis(&d, "channel", in->shape[0]);
    cbf_port_desc_add_axis(&d, "baseline_product", in->shape[1] * 4);
    d.n_present = (size_t)s->n_ants;
    d.present_axis = "antenna";
    d.timestamp_step = in->timestamp_step;
    for (int i = 0; i < in->n_attrs; i++)
        cbf_port_desc_set_attr(&d, in->attr_names[i], in->attr_values[i]);
    int rc = cbf_port_set_desc(s->out, &d, err);
    if (rc)
        return rc;
    cbf_pool_config pc = {
        .name = "out",
        .kind = CBF_MEM_HOST,
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
    const size_t len = (size_t)s->channels * (size_t)s->n_ants * (s->n_ants + 1) / 2 * 8;
    cbf_reduce_job job = {s->n_ants, s->channels, in->data, 1, len, s->bad, out->data, 0};
    uint64_t sat = 0;
    char msg[256];
    if ((rc = cbf_reduce_cpu(&job, &sat, msg, sizeof msg))) {
        cbf_buffer_unref(out);
        return cbf_error_set(err, rc, "reducer: dump at %lld: %s", (long long)in->timestamp, msg);
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
