/* to_device.c: test-only plugin "xeng_to_device". Copies X-engine batches
 * into device memory, as a GPU receiver would deliver them, so the GPU
 * pipeline test can drive the correlator's device-input path. The upload
 * goes through one pinned staging buffer and is left in flight when the
 * buffer is sent (its event says when it is done), so the consumer has to
 * wait on the event. GPU only. */
#include <cbf/cbf.h>

#include <stdlib.h>
#include <string.h>

#include "stage/contracts/xeng.h"
#include "stage/flow.h"
#include "stage/gpu.h"
#include "stage/input.h"

static const cbf_port_decl todev_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = CBF_TYPE_XENG_BATCH,
     .doc = "X-engine batches, host memory"},
    {.name = "out", .dir = CBF_PORT_OUT, .type = CBF_TYPE_XENG_BATCH,
     .doc = "the same batches in device memory"},
};

typedef struct todev {
    cbf_port *in, *out;
    cbf_pool *pool;
    size_t bytes;
    void *stream;
    void *staging;   /* pinned */
    void *done;      /* event: the last upload from staging */
} todev;

static void todev_fini(cbf_node *node)
{
    todev *s = cbf_node_state(node);
    if (!s)
        return;
    cbf_error ignored;
    if (s->stream)
        cbf_stage_stream_sync(s->stream, "stream", &ignored);
    cbf_stage_stream_destroy(s->stream);
    cbf_stage_event_destroy(s->done);
    cbf_stage_free(CBF_MEM_PINNED, s->staging);
    free(s);
    cbf_node_set_state(node, NULL);
}

static int todev_init(cbf_node *node, cbf_error *err)
{
    if (!cbf_node_use_gpu(node))
        return cbf_error_set(err, CBF_ENOTSUP, "needs the GPU (gpu: required)");
    todev *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    cbf_node_set_state(node, s);
    s->in = cbf_node_port(node, "in", 0);
    s->out = cbf_node_port(node, "out", 0);
    cbf_port_desc d = *cbf_port_get_desc(s->in);
    if (d.mem == CBF_MEM_DEVICE)
        return cbf_error_set(err, CBF_ECONFIG, "input is already on the device");
    d.mem = CBF_MEM_DEVICE;
    s->bytes = cbf_port_desc_bytes(&d);
    int rc;
    if ((rc = cbf_stage_stream_create(&s->stream, err)) ||
        (rc = cbf_stage_event_create(&s->done, err)) ||
        (rc = cbf_stage_alloc(CBF_MEM_PINNED, s->bytes, &s->staging, "staging", err)))
        return rc;
    return cbf_stage_out_open(node, s->out, &d, 3, &s->pool, err);
}

static int todev_buffer(void *user, cbf_buffer *in, cbf_error *err)
{
    todev *s = user;
    cbf_buffer *out;
    int rc = cbf_pool_get(s->pool, &out);
    if (rc)
        return rc;
    rc = cbf_buffer_sync_host(in, err);
    if (!rc)
        rc = cbf_stage_event_sync(s->done, err);
    if (!rc) {
        memcpy(s->staging, in->data, s->bytes);
        rc = cbf_stage_copy(out->data, CBF_MEM_DEVICE, s->staging, CBF_MEM_PINNED, s->bytes,
                            s->stream, "upload", err);
    }
    if (!rc)
        rc = cbf_stage_event_record(s->done, s->stream, err);
    if (!rc)
        rc = cbf_buffer_record(out, s->stream, err);
    if (rc) {
        cbf_buffer_unref(out);
        return rc;
    }
    out->timestamp = in->timestamp;
    out->seq = in->seq;
    out->n_present = in->n_present;
    memcpy(out->present, in->present, in->n_present);
    out->missing = in->missing;
    out->saturated = in->saturated;
    return cbf_port_send(s->out, out);
}

static int todev_run(cbf_node *node, cbf_error *err)
{
    todev *s = cbf_node_state(node);
    int rc = cbf_stage_input_loop(node, "in", todev_buffer, s, err);
    return rc == CBF_ESTOPPED ? 0 : rc;
}

static const cbf_plugin_desc todev_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "xeng_to_device",
    .version = "0.1.0",
    .summary = "test only: X-engine batches copied to device memory",
    .ports = todev_ports,
    .n_ports = CBF_COUNT_OF(todev_ports),
    .init = todev_init,
    .run = todev_run,
    .fini = todev_fini,
};

CBF_PLUGIN_DEFINE(todev_desc)
