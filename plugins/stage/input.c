/* input.c: see input.h. */
#include "stage/input.h"

#include "cbf/port.h"

int cbf_stage_input_attr(const cbf_port_desc *d, const char *name, double *v, cbf_error *err)
{
    if (cbf_port_desc_get_attr(d, name, v))
        return cbf_error_set(err, CBF_ECONFIG, "input has no '%s' attribute", name);
    return 0;
}

int cbf_stage_input_loop(cbf_node *node, const char *port, cbf_stage_take_fn take, void *ctx,
                         cbf_error *err)
{
    cbf_port *in = cbf_node_port(node, port, 0);
    for (;;) {
        cbf_buffer *buf;
        int rc = cbf_port_recv(in, &buf);
        if (rc == CBF_EOS)
            return 0;
        if (rc)
            return rc;
        rc = take(ctx, buf, err);
        cbf_buffer_unref(buf);
        if (rc)
            return rc;
    }
}
