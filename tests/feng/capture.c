/* feng_capture: a test-only sink that writes every buffer it receives to a
 * raw file, so the pipeline tests can compare whole runs byte for byte
 * without depending on the HDF5 layout. Per buffer: int64 timestamp,
 * uint64 n_present, the flags, uint64 aux_size, aux, uint64 bytes, payload.
 * `from`/`to` keep only the buffers whose timestamps fall between them. */
#include <stdio.h>
#include <stdlib.h>

#include "cbf/cbf.h"

typedef struct cap {
    FILE *f;
    int64_t from, to;       /* timestamps kept: [from, to] (to < 0: no end) */
    size_t bytes;
    void *host;
} cap;

static const cbf_param_decl params[] = {
    {"path", CBF_PARAM_STRING, NULL, CBF_NORANGE, NULL, "output file"},
    {"from", CBF_PARAM_INT, "0", CBF_RANGE(0, 9.2e18), NULL, "first buffer timestamp kept"},
    {"to", CBF_PARAM_INT, "-1", CBF_RANGE(-1, 9.2e18), NULL, "last buffer timestamp kept; -1: all"},
};
static const cbf_port_decl ports[] = {
    {"in", CBF_PORT_IN, "*", 0, 0, "any buffers"},
};

static int init(cbf_node *node, cbf_error *err)
{
    const cbf_params *p = cbf_node_params(node);
    cap *c = calloc(1, sizeof *c);
    if (!c)
        return cbf_error_set(err, CBF_ENOMEM, "capture");
    cbf_node_set_state(node, c);
    c->from = cbf_params_int(p, "from");
    c->to = cbf_params_int(p, "to");
    c->bytes = cbf_port_desc_bytes(cbf_port_get_desc(cbf_node_port(node, "in", 0)));
    c->host = malloc(c->bytes ? c->bytes : 1);
    c->f = fopen(cbf_params_string(p, "path"), "wb");
    if (!c->f || !c->host)
        return cbf_error_set(err, CBF_EIO, "%s: cannot write %s", cbf_params_where(p, "path"),
                             cbf_params_string(p, "path"));
    return 0;
}

static int put(FILE *f, const void *p, size_t n)
{
    return fwrite(p, 1, n, f) == n ? 0 : -1;
}

static int run(cbf_node *node, cbf_error *err)
{
    cap *c = cbf_node_state(node);
    for (;;) {
        cbf_buffer *b;
        int rc = cbf_port_recv(cbf_node_port(node, "in", 0), &b);
        if (rc == CBF_EOS)
            return 0;
        if (rc)
            return rc;
        if (b->timestamp < c->from || (c->to >= 0 && b->timestamp > c->to)) {
            cbf_buffer_unref(b);
            continue;
        }
        rc = cbf_buffer_copy_to_host(b, c->host, c->bytes, err);
        uint64_t np = b->n_present, as = b->aux_size, by = c->bytes;
        if (!rc && (put(c->f, &b->timestamp, 8) || put(c->f, &np, 8) ||
                    put(c->f, b->present, b->n_present) || put(c->f, &as, 8) ||
                    put(c->f, b->aux, b->aux_size) || put(c->f, &by, 8) ||
                    put(c->f, c->host, c->bytes)))
            rc = cbf_error_set(err, CBF_EIO, "capture: write failed");
        cbf_buffer_unref(b);
        if (rc)
            return rc;
    }
}

static void fini(cbf_node *node)
{
    cap *c = cbf_node_state(node);
    if (!c)
        return;
    if (c->f)
        fclose(c->f);
    free(c->host);
    free(c);
}

static const cbf_plugin_desc desc = {
    CBF_PLUGIN_ABI, "feng_capture", "0.1.0", "test sink: raw dump of every buffer",
    params, CBF_COUNT_OF(params), ports, CBF_COUNT_OF(ports), init, run, fini, NULL, 0, NULL,
};

CBF_PLUGIN_DEFINE(desc)
