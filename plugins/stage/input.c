/* input.c: see input.h. */
#include "stage/input.h"

#include <stdio.h>

#include "cbf/port.h"
#include "stage/contracts/feng.h"

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

void cbf_stage_chan_range(cbf_node *node, const char *name, unsigned flags, const cbf_port_desc *d,
                          int64_t channels)
{
    double first = 0;
    cbf_port_desc_get_attr(d, CBF_ATTR_FIRST_CHANNEL, &first);
    char v[48];
    snprintf(v, sizeof v, "(%lld,%lld)", (long long)first, (long long)first + (long long)channels - 1);
    cbf_text *t = cbf_node_text(node, name);
    cbf_text_set(t, v, CBF_STATUS_NOMINAL);
    cbf_text_describe(t, "", "The range of channels processed by this engine, inclusive");
    if (flags)
        cbf_text_katcp(t, name, flags);
}
