/* upload plugin: copies each "cbf.adc.packed" chunk to GPU memory once, so
 * that several GPU consumers (a wideband pfb and narrowband ddc branches)
 * share one upload by reference instead of each copying the host chunk.
 * The consumers still copy from it into their own staging areas (the chunk
 * overlap needs that), now device to device.
 *
 * On the CPU path (gpu: none, or auto without a GPU) the input buffer is
 * passed on as it is: the same reference, no copy. */
#include <stdlib.h>
#include <string.h>

#include "cbf/cbf.h"
#include "stage/contracts/adc.h"
#include "stage/gpu.h"

typedef struct upload_state {
    int gpu;
    size_t bytes;
    void *stream;
    cbf_stage_hold held;    /* host chunks until their copies are done */
    cbf_pool *pool;
    cbf_counter *c_bytes;
} upload_state;

static const cbf_param_decl upload_params[] = {
    {.name = "buffers", .type = CBF_PARAM_INT, .def = "4", .has_range = 1, .min = 2, .max = 64,
     .doc = "device buffers in the output pool"},
};

static const cbf_port_decl upload_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = CBF_TYPE_ADC_PACKED,
     .doc = "digitiser samples in host memory"},
    {.name = "out", .dir = CBF_PORT_OUT, .type = CBF_TYPE_ADC_PACKED,
     .doc = "the same samples in device memory (GPU path), or the input buffer itself (CPU path)"},
};

static int upload_init(cbf_node *node, cbf_error *err)
{
    upload_state *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "state");
    cbf_node_set_state(node, s);
    const cbf_port_desc *in = cbf_port_get_desc(cbf_node_port(node, "in", 0));
    cbf_port_desc d = *in;
    s->gpu = cbf_node_use_gpu(node);
    s->bytes = cbf_port_desc_bytes(in);
    s->c_bytes = cbf_node_counter(node, "bytes_uploaded");
    if (!s->gpu)
        return cbf_port_set_desc(cbf_node_port(node, "out", 0), &d, err);
#ifdef CBF_HAVE_CUDA
    int rc = cbf_stage_stream_create(&s->stream, err);
    if (!rc)
        rc = cbf_stage_hold_init(&s->held, 1, err);
    if (rc)
        return rc;
    d.mem = CBF_MEM_DEVICE;
    if ((rc = cbf_port_set_desc(cbf_node_port(node, "out", 0), &d, err)))
        return rc;
    cbf_pool_config pc = {"out", CBF_MEM_DEVICE,
                          (size_t)cbf_params_int(cbf_node_params(node), "buffers"), s->bytes,
                          d.n_present, d.aux_size};
    return cbf_node_pool_create(node, &pc, &s->pool, err);
#else
    return cbf_error_set(err, CBF_ENOTSUP, "built without CUDA");
#endif
}

/* One chunk up, without waiting for it: the consumers wait on the output's
 * event, and the host buffer is held until the copy has finished. */
static int upload_one(upload_state *s, cbf_buffer *in, cbf_buffer **out, cbf_error *err)
{
    int rc = cbf_pool_get(s->pool, out);
    if (rc)
        return rc;
    cbf_buffer *o = *out;
    if (in->event)
        rc = cbf_buffer_wait_stream(in, s->stream, err);
    if (!rc)
        rc = cbf_stage_copy(o->data, CBF_MEM_DEVICE, in->data, in->kind, s->bytes, s->stream,
                            "copy", err);
    if (!rc)
        rc = cbf_buffer_record(o, s->stream, err);
    if (!rc)
        rc = cbf_stage_hold_push(&s->held, in, s->stream, NULL, err);
    if (rc) {
        cbf_buffer_unref(o);
        return rc;
    }
    o->timestamp = in->timestamp;
    o->seq = in->seq;
    o->n_present = in->n_present;
    memcpy(o->present, in->present, in->n_present);
    o->saturated = in->saturated;
    o->missing = in->missing;
    if (in->aux_size && o->aux)
        memcpy(o->aux, in->aux, in->aux_size < o->aux_size ? in->aux_size : o->aux_size);
    cbf_counter_add(s->c_bytes, s->bytes);
    return 0;
}

static int upload_run(cbf_node *node, cbf_error *err)
{
    upload_state *s = cbf_node_state(node);
    cbf_port *in = cbf_node_port(node, "in", 0), *outp = cbf_node_port(node, "out", 0);
    for (;;) {
        cbf_buffer *buf, *out = NULL;
        int rc = cbf_port_recv(in, &buf);
        if (rc == CBF_EOS)
            return 0;
        if (rc)
            return rc;
        if (!s->gpu) {
            if ((rc = cbf_port_send(outp, buf)))
                return rc;
            continue;
        }
        rc = upload_one(s, buf, &out, err);
        cbf_buffer_unref(buf);
        if (rc)
            return rc;
        if ((rc = cbf_port_send(outp, out)))
            return rc;
    }
}

static void upload_fini(cbf_node *node)
{
    upload_state *s = cbf_node_state(node);
    if (!s)
        return;
    if (s->held.buf)
        cbf_stage_hold_fini(&s->held);
    cbf_stage_stream_destroy(s->stream);
    free(s);
}

static const cbf_plugin_desc upload_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "upload",
    .version = "0.1.0",
    .summary = "copies digitiser chunks to the GPU once, for several GPU consumers to share",
    .params = upload_params,
    .n_params = CBF_COUNT_OF(upload_params),
    .ports = upload_ports,
    .n_ports = CBF_COUNT_OF(upload_ports),
    .init = upload_init,
    .run = upload_run,
    .fini = upload_fini,
};

CBF_PLUGIN_DEFINE(upload_desc)
