/* path.c: see path.h. */
#include "stage/path.h"

#include <string.h>

#include "cbf/gpu.h"
#include "stage/gpu.h"

int cbf_stage_path_open(cbf_stage_path *p, cbf_node *node, const char *port, cbf_error *err)
{
    memset(p, 0, sizeof *p);
    p->in = cbf_port_get_desc(cbf_node_port(node, port, 0));
    p->gpu = cbf_node_use_gpu(node);
#ifndef CBF_HAVE_CUDA
    if (p->gpu)
        return cbf_error_set(err, CBF_ENOTSUP, "built without CUDA");
#endif
    if (!p->gpu && p->in->mem == CBF_MEM_DEVICE)
        return cbf_error_set(err, CBF_ECONFIG, "device input on the CPU path");
    return p->gpu ? cbf_stage_stream_create(&p->stream, err) : 0;
}

int cbf_stage_path_upload_init(cbf_stage_path *p, size_t bytes, cbf_error *err)
{
    if (!p->gpu || p->in->mem == CBF_MEM_DEVICE)
        return 0;
    return cbf_stage_upload_init(&p->up, bytes, err);
}

int cbf_stage_path_put(cbf_stage_path *p, const cbf_buffer *buf, const uint8_t **data,
                       cbf_error *err)
{
    *data = buf->data;
    if (p->gpu)
        return cbf_stage_upload_put(&p->up, buf, p->stream, data, err);
    return buf->kind == CBF_MEM_HOST ? 0 : cbf_buffer_sync_host(buf, err);
}

int cbf_stage_path_read(cbf_stage_path *p, void *stream, cbf_error *err)
{
    return p->gpu ? cbf_stage_upload_read(&p->up, stream, err) : 0;
}

void cbf_stage_path_fini(cbf_stage_path *p)
{
    if (p->stream) {
        cbf_error ignored;
        cbf_stage_stream_sync(p->stream, "stream", &ignored);
    }
    cbf_stage_upload_fini(&p->up);
    cbf_stage_stream_destroy(p->stream);
    memset(p, 0, sizeof *p);
}
