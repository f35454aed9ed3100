/* cbf_rms: an example plugin built outside the cbf tree. It reads packed
 * digitiser samples ("cbf.adc.packed") and logs, per chunk, the RMS of
 * every antenna and pol in dBFS, where 0 dBFS is an RMS equal to the
 * largest sample value 2^(bits-1) - 1 (so a full-scale sine reads -3.01).
 * Heaps flagged missing are left out of the sums. */
#include <cbf/cbf.h>
#include <cbf/kernels/packed.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const cbf_param_decl rms_params[] = {
    {.name = "every", .type = CBF_PARAM_INT, .def = "1", .has_range = 1, .min = 1, .max = 1000000,
     .doc = "log every n-th chunk"},
};

static const cbf_port_decl rms_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN, .type = "cbf.adc.packed",
     .doc = "packed samples [antenna][pol][byte]"},
};

typedef struct rms {
    int bits, antennas;
    size_t stream_bytes, heaps, heap_samples;
    int64_t every;
} rms;

static int rms_init(cbf_node *node, cbf_error *err)
{
    const cbf_port_desc *d = cbf_port_get_desc(cbf_node_port(node, "in", 0));
    double heap_samples = 0;
    if (!d || d->ndim != 3 || cbf_port_desc_get_attr(d, "heap_samples", &heap_samples) != 0)
        return cbf_error_set(err, CBF_ECONFIG, "rms: input is not [antenna][pol][byte] packed");
    rms *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "rms: out of memory");
    s->bits = d->bits;
    s->antennas = (int)d->shape[0];
    s->stream_bytes = d->shape[2];
    s->heap_samples = (size_t)heap_samples;
    s->heaps = d->n_present / (d->shape[0] * d->shape[1]);
    s->every = cbf_params_int(cbf_node_params(node), "every");
    cbf_node_set_state(node, s);
    return 0;
}

static int rms_run(cbf_node *node, cbf_error *err)
{
    (void)err;
    rms *s = cbf_node_state(node);
    cbf_port *in = cbf_node_port(node, "in", 0);
    const double full_scale = (double)((1 << (s->bits - 1)) - 1);
    cbf_buffer *b;
    while (cbf_port_recv(in, &b) == 0) {
        if (b->seq % (uint64_t)s->every == 0) {
            char line[1024];
            int k = snprintf(line, sizeof line, "rms chunk %llu (t=%lld):",
                             (unsigned long long)b->seq, (long long)b->timestamp);
            for (int a = 0; a < s->antennas; a++)
                for (int p = 0; p < 2; p++) {
                    const size_t stream = (size_t)(2 * a + p);
                    const uint8_t *data = (const uint8_t *)b->data + stream * s->stream_bytes;
                    double sum = 0;
                    size_t n = 0;
                    for (size_t h = 0; h < s->heaps; h++) {
                        if (!b->present[stream * s->heaps + h])
                            continue;
                        for (size_t i = h * s->heap_samples; i < (h + 1) * s->heap_samples; i++) {
                            /* Streams are not padded: _in stops at their end. */
                            const double v =
                                cbf_packed_sample_in(data, s->stream_bytes, i, s->bits);
                            sum += v * v;
                        }
                        n += s->heap_samples;
                    }
                    const double db = n ? 10.0 * log10(sum / (double)n / (full_scale * full_scale))
                                        : NAN;
                    if (k < (int)sizeof line)
                        k += snprintf(line + k, sizeof line - (size_t)k, " %d%c %.2f dBFS", a,
                                      p ? 'y' : 'x', db);
                }
            cbf_log_info("%s", line);
        }
        cbf_buffer_unref(b);
    }
    return 0;
}

static void rms_fini(cbf_node *node)
{
    free(cbf_node_state(node));
    cbf_node_set_state(node, NULL);
}

static const cbf_plugin_desc rms_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "rms",
    .version = "0.1.0",
    .summary = "example: logs the RMS of packed digitiser samples in dBFS",
    .params = rms_params,
    .n_params = CBF_COUNT_OF(rms_params),
    .ports = rms_ports,
    .n_ports = CBF_COUNT_OF(rms_ports),
    .init = rms_init,
    .run = rms_run,
    .fini = rms_fini,
};

CBF_PLUGIN_DEFINE(rms_desc)
