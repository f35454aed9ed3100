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
#ifdef CBF_HAVE_CUDA
#include <cuda_runtime.h>
#endif

typedef struct upload_state {
    int gpu;
    size_t bytes;
    void *stream;
    cbf_pool *pool;
    cbf_counter *c_bytes;
} upload_state;

static const cbf_param_decl params[] = {
    {"buffers", CBF_PARAM_INT, "4", CBF_RANGE(2, 64), NULL, "device buffers in the output pool"},
};

static const cbf_port_decl ports[] = {
    {"in", CBF_PORT_IN, "cbf.adc.packed", 0, 0, "digitiser samples in host memory"},
    {"out", CBF_PORT_OUT, "cbf.adc.packed", 0, 0,
     "the same samples in device memory (GPU path), or the input buffer itself (CPU path)"},
};

#ifdef CBF_HAVE_CUDA
static int cuda_ok(cudaError_t e, const char *what, cbf_error *err)
{
    return e == cudaSuccess ? 0 : cbf_error_set(err, CBF_ECUDA, "upload: %s: %s", what,
                                                cudaGetErrorString(e));
}
#endif

static int init(cbf_node *node, cbf_error *err)
{
    upload_state *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "upload: state");
    cbf_node_set_state(node, s);
    const cbf_port_desc *in = cbf_port_get_desc(cbf_node_port(node, "in", 0));
    cbf_port_desc d = *in;
    s->gpu = cbf_node_use_gpu(node);
    s->bytes = cbf_port_desc_bytes(in);
    s->c_bytes = cbf_node_counter(node, "bytes_uploaded");
    if (!s->gpu)
        return cbf_port_set_desc(cbf_node_port(node, "out", 0), &d, err);
#ifdef CBF_HAVE_CUDA
    cudaStream_t st;
    int rc = cuda_ok(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream", err);
    if (rc)
        return rc;
    s->stream = st;
    d.mem = CBF_MEM_DEVICE;
    if ((rc = cbf_port_set_desc(cbf_node_port(node, "out", 0), &d, err)))
        return rc;
    cbf_pool_config pc = {"out", CBF_MEM_DEVICE,
                          (size_t)cbf_params_int(cbf_node_params(node), "buffers"), s->bytes,
                          d.n_present, d.aux_size};
    return cbf_node_pool_create(node, &pc, &s->pool, err);
#else
    return cbf_error_set(err, CBF_ENOTSUP, "upload: built without CUDA");
#endif
}

#ifdef CBF_HAVE_CUDA
/* One chunk up; the host buffer is released once the copy has finished. */
static int upload(upload_state *s, cbf_buffer *in, cbf_buffer **out, cbf_error *err)
{
    int rc = cbf_pool_get(s->pool, out);
    if (rc)
        return rc;
    cbf_buffer *o = *out;
    if (in->event)
        rc = cbf_buffer_wait_stream(in, s->stream, err);
    if (!rc)
        rc = cuda_ok(cudaMemcpyAsync(o->data, in->data, s->bytes,
                                     in->kind == CBF_MEM_DEVICE ? cudaMemcpyDeviceToDevice
                                                                : cudaMemcpyHostToDevice,
                                     (cudaStream_t)s->stream), "copy", err);
    if (!rc)
        rc = cbf_buffer_record(o, s->stream, err);
    if (!rc)
        rc = cuda_ok(cudaStreamSynchronize((cudaStream_t)s->stream), "copy", err);
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
#endif

static int run(cbf_node *node, cbf_error *err)
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
#ifdef CBF_HAVE_CUDA
        rc = upload(s, buf, &out, err);
#else
        /* init never selects the GPU in a build without CUDA */
        rc = cbf_error_set(err, CBF_EINTERNAL, "GPU upload in a build without CUDA");
#endif
        cbf_buffer_unref(buf);
        if (rc)
            return rc;
        if ((rc = cbf_port_send(outp, out)))
            return rc;
    }
}

static void fini(cbf_node *node)
{
    upload_state *s = cbf_node_state(node);
    if (!s)
        return;
#ifdef CBF_HAVE_CUDA
    if (s->stream)
        cudaStreamDestroy((cudaStream_t)s->stream);
#endif
    free(s);
}

static const cbf_plugin_desc desc = {
    CBF_PLUGIN_ABI, "upload", "0.1.0",
    "copies digitiser chunks to the GPU once, for several GPU consumers to share",
    params, CBF_COUNT_OF(params), ports, CBF_COUNT_OF(ports), init, run, fini, NULL, 0, NULL,
};

CBF_PLUGIN_DEFINE(desc)
