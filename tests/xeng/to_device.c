/* to_device.c: test-only plugin "xeng_to_device". Copies X-engine batches
 * into device memory, as a GPU receiver would deliver them, so the GPU
 * pipeline test can drive the correlator's device-input path. The upload
 * goes through one pinned staging buffer and is left in flight when the
 * buffer is sent (its event says when it is done), so the consumer has to
 * wait on the event. GPU only. */
#include <cbf/cbf.h>

#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

static const cbf_port_decl ports[] = {
    {"in", CBF_PORT_IN, "cbf.xeng.batch", 0, 0, "X-engine batches, host memory"},
    {"out", CBF_PORT_OUT, "cbf.xeng.batch", 0, 0, "the same batches in device memory"},
};

typedef struct todev {
    cbf_port *in, *out;
    cbf_pool *pool;
    size_t bytes;
    cudaStream_t stream;
    void *staging;   /* pinned */
    cudaEvent_t done; /* the last upload from staging */
} todev;

static int cuda_ok(cudaError_t e, const char *what, cbf_error *err)
{
    return e == cudaSuccess ? 0
                            : cbf_error_set(err, CBF_ECUDA, "xeng_to_device: %s: %s", what,
                                            cudaGetErrorString(e));
}

static void fini(cbf_node *node)
{
    todev *s = cbf_node_state(node);
    if (!s)
        return;
    if (s->stream) {
        cudaStreamSynchronize(s->stream);
        cudaStreamDestroy(s->stream);
    }
    if (s->done)
        cudaEventDestroy(s->done);
    cudaFreeHost(s->staging);
    free(s);
    cbf_node_set_state(node, NULL);
}

static int init(cbf_node *node, cbf_error *err)
{
    if (!cbf_node_use_gpu(node))
        return cbf_error_set(err, CBF_ENOTSUP, "xeng_to_device: needs the GPU (gpu: required)");
    todev *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "xeng_to_device: out of memory");
    cbf_node_set_state(node, s);
    s->in = cbf_node_port(node, "in", 0);
    s->out = cbf_node_port(node, "out", 0);
    cbf_port_desc d = *cbf_port_get_desc(s->in);
    if (d.mem == CBF_MEM_DEVICE)
        return cbf_error_set(err, CBF_ECONFIG, "xeng_to_device: input is already on the device");
    d.mem = CBF_MEM_DEVICE;
    s->bytes = cbf_port_desc_bytes(&d);
    int rc;
    if ((rc = cuda_ok(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking), "stream", err)) ||
        (rc = cuda_ok(cudaEventCreateWithFlags(&s->done, cudaEventDisableTiming), "event", err)) ||
        (rc = cuda_ok(cudaMallocHost(&s->staging, s->bytes), "cudaMallocHost", err)) ||
        (rc = cbf_port_set_desc(s->out, &d, err)))
        return rc;
    cbf_pool_config pc = {"out", CBF_MEM_DEVICE, 3, s->bytes, d.n_present, 0};
    return cbf_node_pool_create(node, &pc, &s->pool, err);
}

static int run(cbf_node *node, cbf_error *err)
{
    todev *s = cbf_node_state(node);
    for (;;) {
        cbf_buffer *in, *out;
        int rc = cbf_port_recv(s->in, &in);
        if (rc == CBF_EOS)
            return 0;
        if (rc)
            return rc == CBF_ESTOPPED ? 0 : rc;
        if ((rc = cbf_pool_get(s->pool, &out))) {
            cbf_buffer_unref(in);
            return rc == CBF_ESTOPPED ? 0 : rc;
        }
        rc = cbf_buffer_sync_host(in, err);
        if (!rc)
            rc = cuda_ok(cudaEventSynchronize(s->done), "staging", err);
        if (!rc) {
            memcpy(s->staging, in->data, s->bytes);
            rc = cuda_ok(cudaMemcpyAsync(out->data, s->staging, s->bytes, cudaMemcpyHostToDevice,
                                         s->stream), "upload", err);
        }
        if (!rc)
            rc = cuda_ok(cudaEventRecord(s->done, s->stream), "event", err);
        if (!rc)
            rc = cbf_buffer_record(out, s->stream, err);
        out->timestamp = in->timestamp;
        out->seq = in->seq;
        out->n_present = in->n_present;
        memcpy(out->present, in->present, in->n_present);
        out->missing = in->missing;
        out->saturated = in->saturated;
        cbf_buffer_unref(in);
        if (rc) {
            cbf_buffer_unref(out);
            return rc;
        }
        if ((rc = cbf_port_send(s->out, out)))
            return rc == CBF_ESTOPPED ? 0 : rc;
    }
}

static const cbf_plugin_desc desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "xeng_to_device",
    .version = "0.1.0",
    .summary = "test only: X-engine batches copied to device memory",
    .ports = ports,
    .n_ports = CBF_COUNT_OF(ports),
    .init = init,
    .run = run,
    .fini = fini,
};

CBF_PLUGIN_DEFINE(desc)
