/* flow.c: see flow.h. */
#include "stage/flow.h"

#include <string.h>

int cbf_stage_out_open(cbf_node *node, cbf_port *out, const cbf_port_desc *d, size_t count,
                       cbf_pool **pool, cbf_error *err)
{
    int rc = cbf_port_set_desc(out, d, err);
    if (rc)
        return rc;
    cbf_pool_config pc = {
        .name = cbf_port_name(out),
        .kind = d->mem,
        .count = count,
        .size = cbf_port_desc_bytes(d),
        .n_present = d->n_present,
        .aux_size = d->aux_size,
    };
    return cbf_node_pool_create(node, &pc, pool, err);
}

int cbf_stage_record_open(cbf_node *node, const char *port, cbf_port_desc *d,
                          const cbf_port_desc *like, cbf_stage_record *r, cbf_error *err)
{
    r->out = cbf_node_port(node, port, 0);
    if (!r->out)
        return 0;
    for (int i = 0; i < like->n_attrs; i++)
        cbf_port_desc_set_attr(d, like->attr_names[i], like->attr_values[i]);
    r->bytes = cbf_port_desc_bytes(d);
    /* Two: one being written by the sink while the next change is made. */
    return cbf_stage_out_open(node, r->out, d, 2, &r->pool, err);
}

int cbf_stage_record_send(cbf_stage_record *r, const void *payload, int64_t ts)
{
    if (!r->out)
        return 0;
    cbf_buffer *b;
    int rc = cbf_pool_get(r->pool, &b);
    if (rc)
        return rc;
    memcpy(b->data, payload, r->bytes);
    b->timestamp = ts;
    b->seq = r->seq++;
    return cbf_port_send(r->out, b);
}

int cbf_stage_source_run(const cbf_stage_source *src, cbf_error *err)
{
    for (uint64_t seq = 0; !src->buffers || seq < src->buffers; seq++) {
        if (cbf_node_stopping(src->node))
            return 0;
        cbf_buffer *buf;
        int rc = cbf_pool_get(src->pool, &buf);
        if (rc == CBF_ESTOPPED)
            return 0;
        if (rc)
            return cbf_error_set(err, rc, "no output buffer");
        buf->timestamp = src->start + (int64_t)seq * src->step;
        buf->seq = seq;
        buf->n_present = src->n_present;
        buf->saturated = buf->missing = 0;
        if ((rc = src->fill(src->user, buf, err))) {
            cbf_buffer_unref(buf);
            return rc;
        }
        for (size_t i = 0; i < buf->n_present; i++)
            buf->missing += !buf->present[i];
        cbf_counter_add(src->c_units, src->units);   /* NULL counters are fine */
        cbf_counter_add(src->c_saturated, buf->saturated);
        cbf_counter_add(src->c_missing, buf->missing);
        /* A full queue only blocks; the one failure is the engine stopping. */
        if (cbf_port_send(src->out, buf) == CBF_ESTOPPED)
            return 0;
    }
    return 0;
}
