/* sender: buffers out as SPEAD heaps over UDP (sendmmsg), in the item
 * layout of MeerKAT's streams so that spead2-based tools read them.
 *
 * The stream follows from the input descriptor: packed samples are
 * digitiser heaps (one per antenna, pol and 4096 samples), complex int8/int4
 * [batch][channel][spectrum][pol] is the F-engine stream (one heap per batch
 * and channel range; flagged batches are not sent), complex int32
 * [channel][baseline_product] is the X-engine stream (one heap per dump and
 * channel range, paced over the dump interval). Channel range r goes to
 * destination r mod n, which is how X-engines subscribe to "their" group. */
#include <cbf/cbf.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spead.h"
#include "stage/contracts/adc.h"
#include "stage/contracts/feng.h"
#include "stage/contracts/xeng.h"
#include "stage/netopt.h"
#include "udp.h"

#define MAX_DEST 64
#define MAX_BATCH 256
#define MAX_IF 8

static const cbf_param_decl sender_params[] = {
    {.name = "destinations", .type = CBF_PARAM_STRING,
     .doc = "comma-separated a.b.c.d:port; channel range (or input) r goes to entry r mod n"},
    CBF_STAGE_NET_PARAMS("send"),
    {.name = "interface", .type = CBF_PARAM_STRING, .def = "127.0.0.1",
     .doc = "IPv4 address of the interface packets leave from; several, comma-separated, share "
            "the heaps round robin"},
    {.name = "ttl", .type = CBF_PARAM_INT, .def = "1", .has_range = 1, .min = 0, .max = 255,
     .doc = "multicast TTL"},
    {.name = "packet_size", .type = CBF_PARAM_INT, .def = "8872", .has_range = 1, .min = 128,
     .max = 65000, .doc = "largest packet in bytes"},
    {.name = "rate_gbps", .type = CBF_PARAM_FLOAT, .def = "0", .has_range = 1, .min = 0,
     .max = 1000,
     .doc = "rate limit in Gbit/s of UDP payload; 0 = unlimited (X-engine: paced over the dump)"},
    {.name = "channels_per_heap", .type = CBF_PARAM_INT, .def = "0", .has_range = 1, .min = 0,
     .max = 1 << 20, .doc = "F/X-engine channels per heap; 0 = channels / number of destinations"},
    {.name = "feng_id", .type = CBF_PARAM_INT, .def = "-1", .has_range = 1, .min = -1,
     .max = 65535, .doc = "F-engine stream: feng_id sent; -1 = the input's 'antenna' attribute"},
    {.name = "descriptor_interval", .type = CBF_PARAM_FLOAT, .def = "5", .has_range = 1, .min = 0,
     .max = 3600,
     .doc = "seconds between descriptor heaps (also sent at start); 0 = at start only"},
    {.name = "batch", .type = CBF_PARAM_INT, .def = "32", .has_range = 1, .min = 1,
     .max = MAX_BATCH, .doc = "packets per sendmmsg call (ibverbs: ring_slots at least 2 x batch)"},
    {.name = "capture", .type = CBF_PARAM_BOOL, .def = "true",
     .doc = "send from the start; false: wait for a `capture` request (action start)"},
};

static const cbf_param_decl sender_capture_args[] = {
    {.name = "action", .type = CBF_PARAM_CHOICE, .choices = "start|stop",
     .doc = "start or stop sending"},
};

static const cbf_request_decl sender_requests[] = {
    {.name = "capture", .args = sender_capture_args, .n_args = CBF_COUNT_OF(sender_capture_args),
     .doc = "start or stop sending, from the next buffer on (buffers meanwhile are counted, not "
            "sent)"},
};

static const cbf_port_decl sender_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN,
     .type = CBF_TYPE_ADC_PACKED "|" CBF_TYPE_FENG_SPECTRA "|" CBF_TYPE_XENG_VIS,
     .doc = "digitiser, F-engine or X-engine stream (host memory or copied to it)"},
};

typedef enum { S_DIG, S_FENG, S_XENG } stream_kind;

typedef struct sender {
    stream_kind kind;
    cbf_port *in;
    cbf_port_desc d;
    cbf_net_tx *q[MAX_IF];        /* one queue per interface */
    int n_if;
    cbf_udp_endpoint dest[MAX_DEST];
    int n_dest;
    size_t packet_size;
    double rate;                 /* bytes/s; 0 = unlimited */
    double desc_interval;
    int batch;
    /* stream shape */
    size_t n_outer;              /* dig: antennas; feng: batches */
    size_t n_ranges, per_heap;   /* channel ranges and channels per range (feng, xeng) */
    size_t heap_bytes;
    size_t spectra, spb;         /* feng: spectra per heap, samples between spectra */
    uint64_t feng_id;
    double dump_s;               /* xeng: seconds per dump, for pacing */
    uint8_t *host;               /* staging copy of non-host buffers */
    uint64_t heap_cnt;
    double next_time, last_desc;
    cbf_counter *c_packets, *c_bytes, *c_heaps, *c_skipped, *c_errors, *c_held;
    bool capturing;              /* `capture` requests; read and set on the node's thread */
} sender;

static double sender_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int sender_flush_q(sender *s, cbf_net_tx *q, cbf_error *err)
{
    uint64_t refused = 0;
    int rc = cbf_net_tx_flush(q, &refused, err);
    cbf_counter_add(s->c_errors, refused);
    return rc;
}

static int sender_flush(sender *s, cbf_error *err)
{
    int rc = 0;
    for (int i = 0; i < s->n_if && !rc; i++)
        rc = sender_flush_q(s, s->q[i], err);
    return rc;
}

/* Paces by holding each batch until the rate allows it: a token bucket
 * whose depth is one batch. */
static void sender_pace(sender *s, size_t bytes, double rate)
{
    if (rate <= 0)
        return;
    double t = sender_now_s();
    if (s->next_time < t)
        s->next_time = t;
    double wait = s->next_time - t;
    if (wait > 0) {
        struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        nanosleep(&ts, NULL);
    }
    s->next_time += (double)bytes / rate;
}

/* Heap counters: a running count with the F-engine's id in the low 12
 * bits, so that heaps of several F-engines arriving at one X-engine socket
 * never share a counter (a receiver, ours or spead2, keys heaps by it). */
static uint64_t sender_next_cnt(sender *s)
{
    uint64_t id = s->kind == S_FENG ? s->feng_id & 0xfff : 0;
    return ((s->heap_cnt++ << 12) | id) & CBF_SPEAD_ADDR_MASK;
}

static int sender_send_heap(sender *s, const cbf_spead_item_out *items, int n, int dest, bool repeat,
                     double rate, cbf_error *err)
{
    /* Whole heaps round robin over the interfaces: a heap's packets stay
     * in order on one path. */
    cbf_net_tx *q = s->q[s->heap_cnt % (uint64_t)s->n_if];
    cbf_spead_encoder e;
    int rc = cbf_spead_encoder_init(&e, sender_next_cnt(s), items, n, s->packet_size, repeat, err);
    if (rc)
        return rc;
    for (size_t k = cbf_spead_encoder_count(&e); k > 0; k--) {
        uint8_t *p;
        if ((rc = cbf_net_tx_buffer(q, &p, err)))
            return rc;
        size_t len = cbf_spead_encoder_next(&e, p);
        if ((rc = cbf_net_tx_commit(q, len, &s->dest[dest], err)) < 0)
            return rc;
        cbf_counter_add(s->c_packets, 1);
        cbf_counter_add(s->c_bytes, len);
        if (rc == 1) {   /* a batch is ready */
            sender_pace(s, (size_t)s->batch * s->packet_size, rate);
            if ((rc = sender_flush_q(s, q, err)))
                return rc;
        }
    }
    cbf_counter_add(s->c_heaps, 1);
    return 0;
}

/* The descriptor heap of this stream, to every destination. */
static int sender_send_descriptors(sender *s, cbf_error *err)
{
    cbf_spead_descriptor d[4];
    int n = 0;
    cbf_spead_descriptor_u48(&d[n++], 0x1600, "timestamp", "Digitiser sample count (ADC clock) of the heap's first sample");
    if (s->kind == S_DIG) {
        cbf_spead_descriptor_u48(&d[n++], 0x3101, "digitiser_id", "Digitiser serial; least significant bit = polarisation");
        cbf_spead_descriptor_u48(&d[n++], 0x3102, "digitiser_status", "Digitiser status flags");
        size_t shape[1] = {s->heap_bytes};
        cbf_spead_descriptor_array(&d[n++], 0x3300, "raw_data", "Packed big-endian signed samples", "|u1", 1, shape);
    } else if (s->kind == S_FENG) {
        cbf_spead_descriptor_u48(&d[n++], 0x4101, "feng_id", "F-engine (input antenna) index");
        cbf_spead_descriptor_u48(&d[n++], 0x4103, "frequency", "First channel in the heap");
        size_t shape[4] = {s->per_heap, s->spectra, 2, 2};
        if (s->d.dtype == CBF_DTYPE_CI8)
            cbf_spead_descriptor_array(&d[n++], 0x4300, "feng_raw", "Channelised complex data", "|i1", 4, shape);
        else
            cbf_spead_descriptor_array(&d[n++], 0x4300, "feng_raw", "Channelised complex data, 4-bit (real high nibble)",
                       "|u1", 3, shape);
    } else {
        cbf_spead_descriptor_u48(&d[n++], 0x4103, "frequency", "First channel in the heap");
        size_t shape[3] = {s->per_heap, s->d.shape[1], 2};
        cbf_spead_descriptor_array(&d[n++], 0x1800, "xeng_raw", "Integrated baseline correlation products", "<i4", 3, shape);
    }
    uint8_t raw[4][640];
    cbf_spead_item_out items[4];
    for (int i = 0; i < n; i++) {
        size_t len = cbf_spead_descriptor_encode(&d[i], raw[i], sizeof raw[i]);
        if (!len)
            return cbf_error_set(err, CBF_EINTERNAL, "descriptor of %s does not fit", d[i].name);
        items[i] = (cbf_spead_item_out){.id = CBF_SPEAD_DESCRIPTOR, .data = raw[i], .len = len};
    }
    for (int k = 0; k < s->n_dest; k++) {
        int rc = sender_send_heap(s, items, n, k, false, s->rate, err);
        if (rc)
            return rc;
    }
    s->last_desc = sender_now_s();
    return sender_flush(s, err);
}

static int sender_classify(sender *s, const cbf_params *p, cbf_error *err)
{
    const cbf_port_desc *d = &s->d;
    double v;
    if (d->dtype == CBF_DTYPE_PACKED && d->ndim == 3) {
        s->kind = S_DIG;
        if (cbf_port_desc_get_attr(d, CBF_ATTR_HEAP_SAMPLES, &v) || v <= 0 ||
            (size_t)v * (size_t)d->bits % 8)
            return cbf_error_set(err, CBF_ECONFIG,
                                 "digitiser input lacks a valid " CBF_ATTR_HEAP_SAMPLES);
        s->heap_bytes = (size_t)v * (size_t)d->bits / 8;
        s->n_outer = d->shape[0];
        if (d->shape[2] % s->heap_bytes || d->n_present != d->shape[0] * 2 * (d->shape[2] / s->heap_bytes))
            return cbf_error_set(err, CBF_ECONFIG, "digitiser buffer is not whole heaps");
        if (s->heap_bytes + 72 > s->packet_size)
            return cbf_error_set(err, CBF_ECONFIG,
                                 "%s: packet_size %zu cannot carry a %zu-byte digitiser heap in one packet",
                                 cbf_params_where(p, "packet_size"), s->packet_size, s->heap_bytes);
        return 0;
    }
    size_t chans;
    if ((d->dtype == CBF_DTYPE_CI8 || d->dtype == CBF_DTYPE_CI4) && d->ndim == 4) {
        s->kind = S_FENG;
        s->n_outer = d->shape[0];
        chans = d->shape[1];
        s->spectra = d->shape[2];
        if (d->shape[3] != 2 || d->n_present != d->shape[0])
            return cbf_error_set(err, CBF_ECONFIG,
                                 "F-engine input is not [batch][channel][spectrum][2 pols]");
        if (cbf_port_desc_get_attr(d, CBF_ATTR_SAMPLES_BETWEEN_SPECTRA, &v))
            return cbf_error_set(err, CBF_ECONFIG,
                                 "F-engine input lacks " CBF_ATTR_SAMPLES_BETWEEN_SPECTRA);
        s->spb = (size_t)v;
        s->feng_id = cbf_port_desc_get_attr(d, CBF_ATTR_ANTENNA, &v) ? 0 : (uint64_t)v;
        if (cbf_params_int(p, "feng_id") >= 0)
            s->feng_id = (uint64_t)cbf_params_int(p, "feng_id");
    } else if (d->dtype == CBF_DTYPE_CI32 && d->ndim == 2) {
        s->kind = S_XENG;
        chans = d->shape[0];
        double rate;
        if (!cbf_port_desc_get_attr(d, CBF_ATTR_ADC_SAMPLE_RATE, &rate) && rate > 0)
            s->dump_s = (double)d->timestamp_step / rate;
    } else {
        return cbf_error_set(err, CBF_ECONFIG,
                             "input is %s with %d axes: not a digitiser, F-engine or X-engine stream",
                             cbf_dtype_name(d->dtype), d->ndim);
    }
    s->per_heap = (size_t)cbf_params_int(p, "channels_per_heap");
    if (!s->per_heap)
        s->per_heap = chans / (size_t)s->n_dest;
    if (!s->per_heap || chans % s->per_heap)
        return cbf_error_set(err, CBF_ECONFIG, "%s: %zu channels do not split into heaps of %zu",
                             cbf_params_where(p, "channels_per_heap"), chans, s->per_heap);
    s->n_ranges = chans / s->per_heap;
    return 0;
}

static int sender_open_interfaces(sender *s, const cbf_params *p, cbf_error *err)
{
    const char *list = cbf_params_string(p, "interface");
    cbf_net_tx_config tc = {.ttl = (int)cbf_params_int(p, "ttl"), .sndbuf = 8 << 20,
                            .max_packet = s->packet_size, .batch = s->batch,
                            .ring_slots = (uint32_t)cbf_params_int(p, "ring_slots"),
                            .choice = cbf_stage_net_choice(p)};
    while (*list) {
        size_t len = strcspn(list, ",");
        char addr[64];
        if (len == 0 || len >= sizeof addr || s->n_if == MAX_IF)
            return cbf_error_set(err, CBF_ECONFIG, "%s: interface list '%s' (at most %d addresses)",
                                 cbf_params_where(p, "interface"), cbf_params_string(p, "interface"),
                                 MAX_IF);
        memcpy(addr, list, len);
        addr[len] = '\0';
        list += len + (list[len] == ',');
        tc.iface = addr;
        int rc = cbf_net_tx_open(&tc, &s->q[s->n_if], err);
        if (rc)
            return rc == CBF_ENOTSUP ? rc : cbf_error_prefix(err, "%s", cbf_params_where(p, "interface"));
        s->n_if++;
        for (int k = 0; k < s->n_dest; k++)
            if ((rc = cbf_net_tx_check_destination(s->q[s->n_if - 1], &s->dest[k], err)))
                return cbf_error_prefix(err, "%s", cbf_params_where(p, "destinations"));
    }
    if (s->n_if == 0)
        return cbf_error_set(err, CBF_ECONFIG, "%s: no interface given", cbf_params_where(p, "interface"));
    return 0;
}

static void sender_fini(cbf_node *node)
{
    sender *s = cbf_node_state(node);
    if (!s)
        return;
    for (int i = 0; i < s->n_if; i++)
        cbf_net_tx_close(s->q[i], NULL);
    free(s->host);
    free(s);
}

static int sender_init(cbf_node *node, cbf_error *err)
{
    sender *s = calloc(1, sizeof(*s));
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    cbf_node_set_state(node, s);
    const cbf_params *p = cbf_node_params(node);
    s->in = cbf_node_port(node, "in", 0);
    s->d = *cbf_port_get_desc(s->in);
    s->packet_size = (size_t)cbf_params_int(p, "packet_size");
    s->rate = cbf_params_float(p, "rate_gbps") * 1e9 / 8;
    s->desc_interval = cbf_params_float(p, "descriptor_interval");
    s->batch = (int)cbf_params_int(p, "batch");
    int n = cbf_udp_parse_endpoints(cbf_params_string(p, "destinations"),
                                    cbf_params_where(p, "destinations"), s->dest, MAX_DEST, err);
    if (n < 0)
        return n;
    s->n_dest = n;
    int rc = sender_classify(s, p, err);
    if (rc)
        return rc;
    if (s->d.mem != CBF_MEM_HOST && !(s->host = malloc(cbf_port_desc_bytes(&s->d))))
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    if ((rc = sender_open_interfaces(s, p, err)))
        return rc;
    cbf_log_info("%d %s queue(s)", s->n_if,
                 cbf_net_tx_transport(s->q[0]) == CBF_NET_IBVERBS ? "ibverbs" : "socket");
    s->c_packets = cbf_node_counter(node, "packets");
    s->c_bytes = cbf_node_counter(node, "bytes");
    s->c_heaps = cbf_node_counter(node, "heaps");
    s->c_skipped = cbf_node_counter(node, "heaps_not_sent_missing");
    s->c_errors = cbf_node_counter(node, "packets_refused");
    s->c_held = cbf_node_counter(node, "buffers_not_captured");
    s->capturing = cbf_params_bool(p, "capture");
    return 0;
}

static int sender_send_dig(sender *s, const cbf_buffer *b, const uint8_t *data, cbf_error *err)
{
    size_t per_stream = s->d.shape[2], heaps = per_stream / s->heap_bytes;
    double samples = (double)(s->heap_bytes * 8 / (size_t)s->d.bits);
    for (size_t h = 0; h < heaps; h++)
        for (size_t in = 0; in < 2 * s->n_outer; in++) {
            if (!b->present[in * heaps + h]) {
                cbf_counter_add(s->c_skipped, 1);
                continue;
            }
            cbf_spead_item_out items[] = {
                {.id = 0x1600, .immediate = true, .value = (uint64_t)b->timestamp + (uint64_t)(h * samples)},
                {.id = 0x3101, .immediate = true, .value = (uint64_t)in},   /* LSB = pol */
                {.id = 0x3102, .immediate = true, .value = 0},
                {.id = 0x3300, .data = data + in * per_stream + h * s->heap_bytes, .len = s->heap_bytes},
            };
            int rc = sender_send_heap(s, items, 4, (int)(in % (size_t)s->n_dest), true, s->rate, err);
            if (rc)
                return rc;
        }
    return 0;
}

static int sender_send_feng(sender *s, const cbf_buffer *b, const uint8_t *data, cbf_error *err)
{
    size_t esize = s->d.dtype == CBF_DTYPE_CI8 ? 2 : 1;
    size_t heap_bytes = s->per_heap * s->spectra * 2 * esize;
    for (size_t bt = 0; bt < s->n_outer; bt++) {
        if (!b->present[bt]) {
            cbf_counter_add(s->c_skipped, s->n_ranges);
            continue;
        }
        uint64_t ts = (uint64_t)b->timestamp + bt * s->spectra * s->spb;
        for (size_t r = 0; r < s->n_ranges; r++) {
            /* [batch][channel][spectrum][pol]: a channel range of one batch is contiguous. */
            cbf_spead_item_out items[] = {
                {.id = 0x1600, .immediate = true, .value = ts},
                {.id = 0x4101, .immediate = true, .value = s->feng_id},
                {.id = 0x4103, .immediate = true, .value = r * s->per_heap},
                {.id = 0x4300, .data = data + (bt * s->n_ranges + r) * heap_bytes, .len = heap_bytes},
            };
            int rc = sender_send_heap(s, items, 4, (int)(r % (size_t)s->n_dest), false, s->rate, err);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static int sender_send_xeng(sender *s, const cbf_buffer *b, const uint8_t *data, cbf_error *err)
{
    size_t heap_bytes = s->per_heap * s->d.shape[1] * 8;
    /* Spread a dump's packets over 90% of the dump interval, so the
     * switches see a steady rate rather than a burst per dump. */
    double rate = s->rate;
    if (rate <= 0 && s->dump_s > 0)
        rate = (double)(heap_bytes * s->n_ranges) / (0.9 * s->dump_s);
    for (size_t r = 0; r < s->n_ranges; r++) {
        cbf_spead_item_out items[] = {
            {.id = 0x1600, .immediate = true, .value = (uint64_t)b->timestamp},
            {.id = 0x4103, .immediate = true, .value = r * s->per_heap},
            {.id = 0x1800, .data = data + r * heap_bytes, .len = heap_bytes},
        };
        int rc = sender_send_heap(s, items, 3, (int)(r % (size_t)s->n_dest), false, rate, err);
        if (rc)
            return rc;
    }
    return 0;
}

static int sender_run(cbf_node *node, cbf_error *err)
{
    sender *s = cbf_node_state(node);
    int rc = sender_send_descriptors(s, err);
    cbf_buffer *b;
    while (!rc && (rc = cbf_port_recv(s->in, &b)) == 0) {
        if (!s->capturing) {
            cbf_counter_add(s->c_held, 1);
            cbf_buffer_unref(b);
            continue;
        }
        const uint8_t *data = b->data;
        if (s->host) {
            rc = cbf_buffer_copy_to_host(b, s->host, cbf_port_desc_bytes(&s->d), err);
            data = s->host;
        }
        if (!rc && s->desc_interval > 0 && sender_now_s() - s->last_desc > s->desc_interval)
            rc = sender_send_descriptors(s, err);
        if (!rc)
            rc = s->kind == S_DIG ? sender_send_dig(s, b, data, err)
                 : s->kind == S_FENG ? sender_send_feng(s, b, data, err) : sender_send_xeng(s, b, data, err);
        /* Every interface's queue out at the end of a buffer: queues filling
         * at different speeds would otherwise reorder heaps by more than a
         * buffer, which receivers' windows need not cover. */
        if (!rc && s->n_if > 1)
            rc = sender_flush(s, err);
        cbf_buffer_unref(b);
    }
    if (rc == CBF_EOS)
        rc = 0;
    if (!rc)
        rc = sender_flush(s, err);
    /* Stream stop to every destination, also after an error, so receivers
     * end: through the first interface, after whatever it still holds. */
    cbf_error stop_err = {0};
    int src = sender_flush_q(s, s->q[0], &stop_err);
    for (int k = 0; k < s->n_dest && !src; k++) {
        uint8_t *p;
        if (!(src = cbf_net_tx_buffer(s->q[0], &p, &stop_err)))
            src = cbf_net_tx_commit(s->q[0], cbf_spead_encode_stop(sender_next_cnt(s), p), &s->dest[k], &stop_err);
        if (src == 1)
            src = sender_flush_q(s, s->q[0], &stop_err);
    }
    if (!src)
        src = sender_flush_q(s, s->q[0], &stop_err);
    if (src < 0 && !rc) {
        *err = stop_err;
        rc = cbf_error_prefix(err, "sending stream stop");
    }
    return rc == CBF_ESTOPPED ? 0 : rc;
}

/* On the node's thread, between buffers (cbf/control.h). */
static int sender_request(cbf_node *node, const cbf_request *req, cbf_reply *reply, cbf_error *err)
{
    (void)err;
    sender *s = cbf_node_state(node);
    s->capturing = !strcmp(cbf_params_string(cbf_request_args(req), "action"), "start");
    cbf_reply_string(reply, "capture", s->capturing ? "started" : "stopped");
    cbf_reply_int(reply, "heaps", (int64_t)cbf_counter_get(s->c_heaps));
    return 0;
}

static const cbf_plugin_desc sender_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "sender",
    .version = "0.1.0",
    .summary = "SPEAD heaps over UDP: digitiser, F-engine or X-engine stream (sendmmsg, rate limit)",
    .params = sender_params,
    .n_params = CBF_COUNT_OF(sender_params),
    .ports = sender_ports,
    .n_ports = CBF_COUNT_OF(sender_ports),
    .init = sender_init,
    .run = sender_run,
    .fini = sender_fini,
    .requests = sender_requests,
    .n_requests = CBF_COUNT_OF(sender_requests),
    .request = sender_request,
};

CBF_PLUGIN_DEFINE(sender_desc)
