/* sender: buffers out as SPEAD heaps over UDP (sendmmsg), in the item
 * layout of MeerKAT's streams so that spead2-based tools read them.
 *
 * The stream follows from the input descriptor: packed samples are
 * digitiser heaps (one per antenna, pol and 4096 samples), complex int8/int4
 * [batch][channel][spectrum][pol] is the F-engine stream (one heap per batch
 * and channel range; flagged batches are not sent), complex int32
 * [channel][baseline_product] is the X-engine stream (one heap per dump and
 * channel range, paced over the dump interval, labelled with its absolute
 * first channel; dumps with no antenna present are not sent), complex
 * int8 [batch][beam][channel][spectrum] is the beam stream (katgpucbf's
 * tied-array-channelised-voltage: one heap per batch and beam, to that
 * beam's destination, with the batch's beam_ants; batches with no antenna
 * are not sent). Channel range r goes to destination r mod n, which is how
 * X-engines subscribe to "their" group.
 *
 * With `threads` T, each buffer's heaps, in the order one thread sends
 * them, are cut into T consecutive runs, one per thread, each thread with
 * its own sockets: every heap (and its counter) is what one thread sends,
 * and heaps are reordered by at most a buffer. The rate limit is one token
 * bucket shared by all threads. */
#include <cbf/cbf.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spead.h"
#include "stage/contracts/adc.h"
#include "stage/contracts/beam.h"
#include "stage/contracts/feng.h"
#include "stage/contracts/xeng.h"
#include "stage/netopt.h"
#include "udp.h"

#define MAX_DEST 64
#define MAX_BATCH 256
#define MAX_IF 8
#define MAX_LANES 16

static const cbf_param_decl sender_params[] = {
    {.name = "destinations", .type = CBF_PARAM_STRING,
     .doc = "comma-separated a.b.c.d:port; channel range (or input) r goes to entry r mod n; beam "
            "stream: one per beam, beam b to entry b"},
    CBF_STAGE_NET_PARAMS("send"),
    {.name = "interface", .type = CBF_PARAM_STRING, .def = "127.0.0.1",
     .doc = "IPv4 address of the interface packets leave from; several, comma-separated, share "
            "the heaps round robin"},
    {.name = "ttl", .type = CBF_PARAM_INT, .def = "1", .has_range = 1, .min = 0, .max = 255,
     .doc = "multicast TTL"},
    {.name = "packet_size", .type = CBF_PARAM_INT, .def = "8872", .has_range = 1, .min = 128,
     .max = CBF_SPEAD_MAX_PACKET,
     .doc = "largest packet in bytes (UDP payload; at most what cbf's receiver takes)"},
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
    {.name = "gso", .type = CBF_PARAM_BOOL, .def = "true",
     .doc = "sockets: send each run of a batch's packets to one destination as one UDP_SEGMENT "
            "message the kernel cuts into the same datagrams (fewer trips through the stack); "
            "where the kernel refuses it, packet by packet, counted in gso_fallbacks"},
    {.name = "threads", .type = CBF_PARAM_INT, .def = "1", .has_range = 1, .min = 1,
     .max = MAX_LANES,
     .doc = "sending threads, each with its own socket per interface; a buffer's heaps are split "
            "between them in order"},
    CBF_STAGE_AFFINITY_PARAM("sending"),
    {.name = "capture", .type = CBF_PARAM_BOOL, .def = "true",
     .doc = "send from the start; false: wait for a `capture` request (action start)"},
};

static const cbf_param_decl sender_capture_args[] = {
    {.name = "action", .type = CBF_PARAM_CHOICE, .choices = "start|stop",
     .doc = "start or stop sending"},
    {.name = "from", .type = CBF_PARAM_INT, .def = "-1", .has_range = 1, .min = -1, .max = 9.2e18,
     .doc = "start: send no buffer that starts before this timestamp (katgpucbf's capture-start "
            "STREAM TIMESTAMP); -1: from the next buffer"},
};

static const cbf_request_decl sender_requests[] = {
    {.name = "capture", .args = sender_capture_args, .n_args = CBF_COUNT_OF(sender_capture_args),
     .doc = "start or stop sending, from the next buffer on, or (start) from the first buffer "
            "starting at or after `from` (buffers held back are counted, not sent)"},
};

static const cbf_port_decl sender_ports[] = {
    {.name = "in", .dir = CBF_PORT_IN,
     .type = CBF_TYPE_ADC_PACKED "|" CBF_TYPE_FENG_SPECTRA "|" CBF_TYPE_XENG_VIS "|" CBF_TYPE_BEAM_BATCH,
     .doc = "digitiser, F-engine, X-engine or beam stream (host memory or copied to it)"},
};

typedef enum { S_DIG, S_FENG, S_XENG, S_BEAM } stream_kind;

typedef struct sender sender;

/* One sending thread: its queue per interface, and the heaps
 * [first, end) of the current buffer, the first with counter sequence cnt. */
typedef struct lane {
    sender *s;
    int index;
    cbf_net_tx *q[MAX_IF];
    uint64_t cnt;
    size_t first, end;
    uint64_t packets, bytes, heaps, skipped;   /* added to the node's counters per buffer */
    size_t queued;                             /* bytes committed since the last paced batch */
    pthread_t thread;
    bool started;
    int rc;
    cbf_error err;
} lane;

struct sender {
    const cbf_node *node;
    stream_kind kind;
    cbf_port *in;
    cbf_port_desc d;
    lane lanes[MAX_LANES];
    int n_lanes, n_if;
    int cores[MAX_LANES], n_cores;
    /* hand-over of a buffer to the lanes (once per buffer, not per heap) */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;
    int n_done;
    bool quit;
    const cbf_buffer *cur;
    const uint8_t *cur_data;
    double cur_rate;
    bool cur_has_antenna;        /* xeng: sender_dump_has_antenna(cur) */
    atomic_llong next_ns;        /* the rate limit's next free time, shared by lanes */
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
    double dump_s;               /* xeng, beam: seconds a buffer covers, for pacing */
    size_t first_channel;        /* xeng, beam: absolute first channel of the input */
    uint64_t n_slots;            /* xeng, beam: channel ranges of per_heap in the whole band */
    cbf_beam_batch beam;         /* beam: the input's layout */
    uint8_t *host;               /* staging copy of device buffers */
    uint64_t heap_cnt;           /* counter sequence of the next heap, over all lanes */
    double last_desc;
    cbf_counter *c_packets, *c_bytes, *c_heaps, *c_skipped, *c_errors, *c_held, *c_next_ts;
    cbf_counter *c_dumps_skipped;   /* xeng only */
    cbf_counter *c_gso_fallbacks;   /* socket queues that fell back from UDP_SEGMENT */
    cbf_gauge *g_gso;               /* 1 while every socket queue sends with UDP_SEGMENT */
    bool capturing;              /* `capture` requests; read and set on the node's thread */
    int64_t capture_from;        /* while capturing: buffers starting before it are held back */
};

static double sender_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int sender_flush_q(sender *s, cbf_net_tx *q, cbf_error *err)
{
    uint64_t refused = 0;
    cbf_net_tx_stats a, b;
    cbf_net_tx_stats_get(q, &a);
    int rc = cbf_net_tx_flush(q, &refused, err);
    cbf_net_tx_stats_get(q, &b);
    cbf_counter_add(s->c_errors, refused);
    if (b.gso_fallbacks != a.gso_fallbacks) {
        cbf_counter_add(s->c_gso_fallbacks, b.gso_fallbacks - a.gso_fallbacks);
        cbf_gauge_set(s->g_gso, 0);
    }
    return rc;
}

static int lane_flush(lane *l, cbf_error *err)
{
    int rc = 0;
    for (int i = 0; i < l->s->n_if && !rc; i++)
        rc = sender_flush_q(l->s, l->q[i], err);
    return rc;
}

static int sender_flush(sender *s, cbf_error *err)
{
    int rc = 0;
    for (int i = 0; i < s->n_lanes && !rc; i++)
        rc = lane_flush(&s->lanes[i], err);
    return rc;
}

/* Paces by holding each batch until the rate allows it: a token bucket
 * whose depth is one batch, shared by the lanes (a compare-and-swap per
 * batch takes each batch's slot in time). */
static void sender_pace(sender *s, size_t bytes, double rate)
{
    if (rate <= 0)
        return;
    long long now = (long long)(sender_now_s() * 1e9), cost = (long long)((double)bytes / rate * 1e9);
    long long cur = atomic_load(&s->next_ns), start;
    do
        start = cur > now ? cur : now;
    while (!atomic_compare_exchange_weak(&s->next_ns, &cur, start + cost));
    if (start > now) {
        long long wait = start - now;
        struct timespec ts = {(time_t)(wait / 1000000000), (long)(wait % 1000000000)};
        nanosleep(&ts, NULL);
    }
}

/* Heap counters: a running count with the F-engine's id in the low 12
 * bits, so that heaps of several F-engines arriving at one X-engine socket
 * never share a counter (a receiver, ours or spead2, keys heaps by it).
 * X-engine heaps (katgpucbf's xbgpu numbering, with a channel range per
 * heap in place of an X-engine): the band is cut into n_slots ranges of
 * per_heap channels, and heap seq is range seq mod n_ranges of this
 * X-engine in row seq / n_ranges, i.e. counter
 * row x n_slots + (first_channel / per_heap) + seq mod n_ranges. X-engines
 * own disjoint channel ranges, so no two of them ever use the same counter
 * and a receiver can merge their streams.
 * Beam heaps take theirs from their place, not from a running count:
 * (batch x beams + beam) x n_slots + slot, batch = timestamp / batch step
 * (sender_beam_cnt), so X-engines that start at different times still
 * never share one; descriptors and stops count in the upper half of the
 * counter space (bit 47) beside them. */
static uint64_t sender_cnt(const sender *s, uint64_t seq)
{
    if (s->kind == S_BEAM)
        return ((1ull << 47) | (seq * s->n_slots + s->first_channel / s->per_heap)) &
               CBF_SPEAD_ADDR_MASK;
    if (s->kind == S_XENG)
        return (seq / s->n_ranges * s->n_slots + s->first_channel / s->per_heap +
                seq % s->n_ranges) & CBF_SPEAD_ADDR_MASK;
    uint64_t id = s->kind == S_FENG ? s->feng_id & 0xfff : 0;
    return ((seq << 12) | id) & CBF_SPEAD_ADDR_MASK;
}

/* Heap counter `cnt` (sender_cnt of the lane's next sequence unless the
 * stream numbers heaps by place). */
static int lane_send_heap_cnt(lane *l, uint64_t cnt, const cbf_spead_item_out *items, int n, int dest,
                              bool repeat, double rate, cbf_error *err)
{
    sender *s = l->s;
    /* Whole heaps round robin over the interfaces: a heap's packets stay
     * in order on one path. */
    cbf_net_tx *q = l->q[l->cnt++ % (uint64_t)s->n_if];
    cbf_spead_encoder e;
    int rc = cbf_spead_encoder_init(&e, cnt, items, n, s->packet_size, repeat, err);
    if (rc)
        return rc;
    for (size_t k = cbf_spead_encoder_count(&e); k > 0; k--) {
        uint8_t *p;
        if ((rc = cbf_net_tx_buffer(q, &p, err)))
            return rc;
        size_t len = cbf_spead_encoder_next(&e, p);
        if ((rc = cbf_net_tx_commit(q, len, &s->dest[dest], err)) < 0)
            return rc;
        l->packets++;
        l->bytes += len;
        l->queued += len;
        if (rc == 1) {   /* a batch is ready: paced by the bytes it holds */
            sender_pace(s, l->queued, rate);
            l->queued = 0;
            if ((rc = sender_flush_q(s, q, err)))
                return rc;
        }
    }
    l->heaps++;
    return 0;
}

static int lane_send_heap(lane *l, const cbf_spead_item_out *items, int n, int dest, bool repeat,
                          double rate, cbf_error *err)
{
    return lane_send_heap_cnt(l, sender_cnt(l->s, l->cnt), items, n, dest, repeat, rate, err);
}

/* The lane's counts onto the node's counters. */
static void lane_publish(lane *l)
{
    sender *s = l->s;
    cbf_counter_add(s->c_packets, l->packets);
    cbf_counter_add(s->c_bytes, l->bytes);
    cbf_counter_add(s->c_heaps, l->heaps);
    cbf_counter_add(s->c_skipped, l->skipped);
    l->packets = l->bytes = l->heaps = l->skipped = 0;
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
    } else if (s->kind == S_XENG) {
        cbf_spead_descriptor_u48(&d[n++], 0x4103, "frequency",
                                 "First channel in the heap, counted from channel 0 of the band");
        size_t shape[3] = {s->per_heap, s->d.shape[1], 2};
        cbf_spead_descriptor_array(&d[n++], 0x1800, "xeng_raw", "Integrated baseline correlation products", "<i4", 3, shape);
    } else {
        cbf_spead_descriptor_u48(&d[n++], 0x4103, "frequency",
                                 "Value of the first channel in collections stored here");
        cbf_spead_descriptor_u48(&d[n++], CBF_BEAM_ITEM_BEAM_ANTS, "beam_ants",
                                 "Count of antennas included in the beam sum");
        size_t shape[3] = {s->beam.channels, s->beam.spectra, 2};
        cbf_spead_descriptor_array(&d[n++], CBF_BEAM_ITEM_BF_RAW, "bf_raw",
                                   "Beamformer output for frequency-domain beam", "|i1", 3, shape);
    }
    uint8_t raw[4][640];
    cbf_spead_item_out items[4];
    for (int i = 0; i < n; i++) {
        size_t len = cbf_spead_descriptor_encode(&d[i], raw[i], sizeof raw[i]);
        if (!len)
            return cbf_error_set(err, CBF_EINTERNAL, "descriptor of %s does not fit", d[i].name);
        items[i] = (cbf_spead_item_out){.id = CBF_SPEAD_DESCRIPTOR, .data = raw[i], .len = len};
    }
    lane *l = &s->lanes[0];
    l->cnt = s->heap_cnt;
    int rc = 0;
    for (int k = 0; k < s->n_dest && !rc; k++)
        rc = lane_send_heap(l, items, n, k, false, s->rate, err);
    s->heap_cnt = l->cnt;
    lane_publish(l);
    s->last_desc = sender_now_s();
    return rc ? rc : sender_flush(s, err);
}

/* The X-engine's place in the band, which its heaps' frequency and
 * counters name: the input's first channel (a receiver's first_channel;
 * 0 when absent) and the band's channels (attribute `channels`; the
 * receiver's total_channels). Counters are unique across X-engines only
 * when every range starts on a heap boundary of one band. The input holds
 * `chans` channels. */
static int sender_xeng_band(sender *s, const cbf_params *p, size_t chans, cbf_error *err)
{
    const cbf_port_desc *d = &s->d;
    double v;
    size_t band = chans;
    s->first_channel = cbf_port_desc_get_attr(d, CBF_ATTR_FIRST_CHANNEL, &v) ? 0 : (size_t)v;
    if (!cbf_port_desc_get_attr(d, CBF_ATTR_CHANNELS, &v))
        band = (size_t)v;
    if (s->first_channel + chans > band)
        return cbf_error_set(err, CBF_ECONFIG,
                             "input holds channels %zu..%zu of a %zu-channel band (attribute "
                             CBF_ATTR_CHANNELS "): a receiver's total_channels must be the whole band",
                             s->first_channel, s->first_channel + chans - 1, band);
    if (s->first_channel % s->per_heap || band % s->per_heap)
        return cbf_error_set(err, CBF_ECONFIG,
                             "%s: heaps of %zu channels do not tile a %zu-channel band from "
                             "first channel %zu, so heap counters could repeat across X-engines",
                             cbf_params_where(p, "channels_per_heap"), s->per_heap, band,
                             s->first_channel);
    s->n_slots = band / s->per_heap;
    return 0;
}

/* Beam stream: a heap holds all the input's channels of one batch of one
 * beam (katgpucbf's n_channels_per_substream), and beam b goes to
 * destination b, so there is one destination per beam. */
static int sender_classify_beam(sender *s, const cbf_params *p, cbf_error *err)
{
    const cbf_port_desc *d = &s->d;
    double v, rate;
    s->kind = S_BEAM;
    if ((size_t)s->n_dest != s->beam.n_beams)
        return cbf_error_set(err, CBF_ECONFIG, "%s: %d destinations for %zu beams: list one per beam",
                             cbf_params_where(p, "destinations"), s->n_dest, s->beam.n_beams);
    s->spb = !cbf_port_desc_get_attr(d, CBF_ATTR_SAMPLES_BETWEEN_SPECTRA, &v) && v > 0 ? (size_t)v : 0;
    if (!s->spb && d->timestamp_step > 0)
        s->spb = (size_t)d->timestamp_step / (s->beam.batches * s->beam.spectra);
    if (!s->spb)
        return cbf_error_set(err, CBF_ECONFIG, "beam input lacks " CBF_ATTR_SAMPLES_BETWEEN_SPECTRA);
    if (!cbf_port_desc_get_attr(d, CBF_ATTR_ADC_SAMPLE_RATE, &rate) && rate > 0)
        s->dump_s = (double)(s->beam.batches * s->beam.spectra * s->spb) / rate;
    s->per_heap = s->beam.channels;
    s->n_ranges = 1;
    s->heap_bytes = cbf_beam_heap_bytes(&s->beam);
    return sender_xeng_band(s, p, s->beam.channels, err);
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
    if (cbf_beam_batch_of(d, &s->beam) == 0)
        return sender_classify_beam(s, p, err);
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
                             "input is %s with %d axes: not a digitiser, F-engine, X-engine or beam stream",
                             cbf_dtype_name(d->dtype), d->ndim);
    }
    s->per_heap = (size_t)cbf_params_int(p, "channels_per_heap");
    if (!s->per_heap)
        s->per_heap = chans / (size_t)s->n_dest;
    if (!s->per_heap || chans % s->per_heap)
        return cbf_error_set(err, CBF_ECONFIG, "%s: %zu channels do not split into heaps of %zu",
                             cbf_params_where(p, "channels_per_heap"), chans, s->per_heap);
    s->n_ranges = chans / s->per_heap;
    return s->kind == S_XENG ? sender_xeng_band(s, p, chans, err) : 0;
}

static int sender_open_interfaces(sender *s, const cbf_params *p, cbf_error *err)
{
    const char *list = cbf_params_string(p, "interface");
    cbf_net_tx_config tc = {.ttl = (int)cbf_params_int(p, "ttl"), .sndbuf = 8 << 20,
                            .max_packet = s->packet_size, .batch = s->batch,
                            .gso = cbf_params_bool(p, "gso"),
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
        for (int t = 0; t < s->n_lanes; t++) {
            cbf_net_tx **q = &s->lanes[t].q[s->n_if];
            int rc = cbf_net_tx_open(&tc, q, err);
            if (rc)
                return rc == CBF_ENOTSUP ? rc : cbf_error_prefix(err, "%s", cbf_params_where(p, "interface"));
            for (int k = 0; k < s->n_dest; k++)
                if ((rc = cbf_net_tx_check_destination(*q, &s->dest[k], err)))
                    return cbf_error_prefix(err, "%s", cbf_params_where(p, "destinations"));
        }
        s->n_if++;
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
    for (int t = 0; t < s->n_lanes; t++)
        for (int i = 0; i < MAX_IF; i++)
            cbf_net_tx_close(s->lanes[t].q[i], NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->go);
    pthread_cond_destroy(&s->done);
    free(s->host);
    free(s);
}

static int sender_init(cbf_node *node, cbf_error *err)
{
    sender *s = calloc(1, sizeof(*s));
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    cbf_node_set_state(node, s);
    s->node = node;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->go, NULL);
    pthread_cond_init(&s->done, NULL);
    const cbf_params *p = cbf_node_params(node);
    s->n_lanes = (int)cbf_params_int(p, "threads");
    for (int t = 0; t < s->n_lanes; t++)
        s->lanes[t] = (lane){.s = s, .index = t};
    if ((s->n_cores = cbf_stage_affinity(p, s->n_lanes, s->cores, MAX_LANES, err)) < 0)
        return s->n_cores;
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
    /* Pinned memory is host memory: sent from where it is, once the
     * producer's event has passed; only device memory is copied down. */
    if (s->d.mem == CBF_MEM_DEVICE && !(s->host = malloc(cbf_port_desc_bytes(&s->d))))
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    if ((rc = sender_open_interfaces(s, p, err)))
        return rc;
    cbf_log_info("%d %s queue(s)", s->n_if * s->n_lanes,
                 cbf_net_tx_transport(s->lanes[0].q[0]) == CBF_NET_IBVERBS ? "ibverbs" : "socket");
    s->c_packets = cbf_node_counter(node, "packets");
    s->c_bytes = cbf_node_counter(node, "bytes");
    s->c_heaps = cbf_node_counter(node, "heaps");
    s->c_skipped = cbf_node_counter(node, "heaps_not_sent_missing");
    s->c_errors = cbf_node_counter(node, "packets_refused");
    s->c_gso_fallbacks = cbf_node_counter(node, "gso_fallbacks");
    cbf_counter_describe(s->c_gso_fallbacks, "", "socket queues whose UDP_SEGMENT send the kernel "
                         "refused, sending packet by packet since");
    s->g_gso = cbf_node_gauge(node, "gso");
    cbf_gauge_describe(s->g_gso, "", "1 while every socket queue sends runs of packets as UDP_SEGMENT "
                       "messages, 0 when asked not to, on ibverbs, or after a fallback");
    {
        cbf_net_tx_stats t;
        cbf_net_tx_stats_get(s->lanes[0].q[0], &t);
        cbf_gauge_set(s->g_gso, t.gso ? 1 : 0);
    }
    s->c_held = cbf_node_counter(node, "buffers_not_captured");
    s->c_next_ts = cbf_node_counter(node, "tx.next_timestamp");
    if (s->kind == S_XENG)
        s->c_dumps_skipped = cbf_node_counter(node, "dumps_not_sent_no_antennas");
    s->capturing = cbf_params_bool(p, "capture");
    s->capture_from = -1;
    return 0;
}

/* A buffer's heaps in the order one thread sends them: digitiser heap h of
 * input `in` is k = h x inputs + in; F-engine range r of batch bt is
 * k = bt x ranges + r; X-engine range r is k = r; beam b of batch bt is
 * k = bt x beams + b. */
static size_t sender_n_heaps(const sender *s)
{
    if (s->kind == S_DIG)
        return s->d.shape[2] / s->heap_bytes * 2 * s->n_outer;
    if (s->kind == S_BEAM)
        return s->beam.batches * s->beam.n_beams;
    return s->kind == S_FENG ? s->n_outer * s->n_ranges : s->n_ranges;
}

/* Whether some antenna was present throughout the dump (one flag per
 * antenna). A dump without one holds nothing but the missing-data value:
 * katgpucbf's xbgpu does not send it and counts it, and so does this
 * sender (the reducer still passes it on, so a file keeps it, flagged). */
static bool sender_dump_has_antenna(const cbf_buffer *b)
{
    for (size_t a = 0; a < b->n_present; a++)
        if (b->present[a])
            return true;
    return b->n_present == 0;
}

static bool sender_heap_present(const sender *s, const cbf_buffer *b, size_t k)
{
    if (s->kind == S_DIG) {
        size_t inputs = 2 * s->n_outer, heaps = s->d.shape[2] / s->heap_bytes;
        return b->present[k % inputs * heaps + k / inputs];
    }
    uint64_t ants;
    if (s->kind == S_BEAM)
        return cbf_beam_heap(&s->beam, b->present, b->aux, k / s->beam.n_beams,
                             k % s->beam.n_beams, &ants);
    return s->kind == S_FENG ? b->present[k / s->n_ranges] != 0 : s->cur_has_antenna;
}

/* Beam heap k = bt x beams + b (present), to beam b's destination, its
 * counter from its place (sender_cnt). */
static int lane_send_beam(lane *l, const cbf_buffer *b, const uint8_t *data, size_t k, cbf_error *err)
{
    const sender *s = l->s;
    const size_t bt = k / s->beam.n_beams, beam = k % s->beam.n_beams;
    const uint64_t step = (uint64_t)(s->beam.spectra * s->spb), ts = (uint64_t)b->timestamp + bt * step;
    uint64_t ants;
    cbf_beam_heap(&s->beam, b->present, b->aux, bt, beam, &ants);
    const uint64_t slot = s->first_channel / s->per_heap;
    const uint64_t cnt = ((ts / step * s->beam.n_beams + beam) * s->n_slots + slot) &
                         CBF_SPEAD_ADDR_MASK & ~(1ull << 47);
    cbf_spead_item_out items[] = {
        {.id = 0x1600, .immediate = true, .value = ts},
        {.id = 0x4103, .immediate = true, .value = s->first_channel},
        {.id = CBF_BEAM_ITEM_BEAM_ANTS, .immediate = true, .value = ants},
        {.id = CBF_BEAM_ITEM_BF_RAW, .data = data + k * s->heap_bytes, .len = s->heap_bytes},
    };
    return lane_send_heap_cnt(l, cnt, items, 4, (int)beam, true, s->cur_rate, err);
}

/* Heap k of the buffer (present). Every packet repeats the heap's item
 * pointers, as MeerKAT's digitisers and katgpucbf's F- and X-engines do:
 * a receiver can then place each packet on its own, whatever order or
 * thread it arrives on (ours does; so do katgpucbf's chunked receivers). */
static int lane_send_one(lane *l, const cbf_buffer *b, const uint8_t *data, size_t k, cbf_error *err)
{
    const sender *s = l->s;
    uint64_t ts = (uint64_t)b->timestamp;
    if (s->kind == S_DIG) {
        size_t inputs = 2 * s->n_outer, in = k % inputs, h = k / inputs, per_stream = s->d.shape[2];
        uint64_t samples = (uint64_t)(s->heap_bytes * 8 / (size_t)s->d.bits);
        /* The source's clip count per heap (contracts/adc.h), as a
         * digitiser reports it; 0 from a source that does not count. */
        const size_t heaps = per_stream / s->heap_bytes;
        const uint32_t *clipped = cbf_adc_clip_counts(b->aux, b->aux_size, 2 * s->n_outer * heaps);
        cbf_spead_item_out items[] = {
            {.id = 0x1600, .immediate = true, .value = ts + h * samples},
            {.id = 0x3101, .immediate = true, .value = (uint64_t)in},   /* LSB = pol */
            {.id = 0x3102, .immediate = true,
             .value = clipped ? cbf_adc_status_encode(clipped[in * heaps + h]) : 0},
            {.id = 0x3300, .data = data + in * per_stream + h * s->heap_bytes, .len = s->heap_bytes},
        };
        return lane_send_heap(l, items, 4, (int)(in % (size_t)s->n_dest), true, s->rate, err);
    }
    if (s->kind == S_BEAM)
        return lane_send_beam(l, b, data, k, err);
    size_t r = k % s->n_ranges;
    if (s->kind == S_FENG) {
        size_t esize = s->d.dtype == CBF_DTYPE_CI8 ? 2 : 1;
        size_t heap_bytes = s->per_heap * s->spectra * 2 * esize, bt = k / s->n_ranges;
        /* [batch][channel][spectrum][pol]: a channel range of one batch is contiguous. */
        cbf_spead_item_out items[] = {
            {.id = 0x1600, .immediate = true, .value = ts + bt * s->spectra * s->spb},
            {.id = 0x4101, .immediate = true, .value = s->feng_id},
            {.id = 0x4103, .immediate = true, .value = r * s->per_heap},
            {.id = 0x4300, .data = data + k * heap_bytes, .len = heap_bytes},
        };
        return lane_send_heap(l, items, 4, (int)(r % (size_t)s->n_dest), true, s->rate, err);
    }
    size_t heap_bytes = s->per_heap * s->d.shape[1] * 8;
    cbf_spead_item_out items[] = {
        {.id = 0x1600, .immediate = true, .value = ts},
        {.id = 0x4103, .immediate = true, .value = s->first_channel + r * s->per_heap},
        {.id = 0x1800, .data = data + r * heap_bytes, .len = heap_bytes},
    };
    return lane_send_heap(l, items, 3, (int)(r % (size_t)s->n_dest), true, s->cur_rate, err);
}

/* The lane's heaps of the current buffer, flushed at its end. Several
 * lanes (or interfaces): queues filling at different speeds would otherwise
 * reorder heaps by more than a buffer, which receivers' windows need not
 * cover. One lane too: a buffer's last packets would otherwise wait in the
 * queue for `batch` more, a visibility dump of one packet for 31 dumps
 * (seconds, where dumps are small or the band is slow). */
static void lane_run(lane *l)
{
    sender *s = l->s;
    l->rc = 0;
    for (size_t k = l->first; k < l->end && !l->rc; k++) {
        if (!sender_heap_present(s, s->cur, k))
            l->skipped++;
        else
            l->rc = lane_send_one(l, s->cur, s->cur_data, k, &l->err);
    }
    if (!l->rc)
        l->rc = lane_flush(l, &l->err);
    lane_publish(l);
}

static void *lane_thread(void *arg)
{
    lane *l = arg;
    sender *s = l->s;
    uint64_t seen = 0;
    cbf_node_thread_start(s->node, "tx", l->index);
    if (l->index < s->n_cores)
        l->rc = cbf_stage_pin_thread(s->cores[l->index], &l->err);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->gen == seen && !s->quit)
            pthread_cond_wait(&s->go, &s->mu);
        if (s->quit)
            break;
        seen = s->gen;
        pthread_mutex_unlock(&s->mu);
        if (!l->rc)
            lane_run(l);
        pthread_mutex_lock(&s->mu);
        s->n_done++;
        pthread_cond_signal(&s->done);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Sends buffer b: heaps cut into one run per lane, each run starting at
 * the counter sequence one thread would have given it. */
static int sender_send_buffer(sender *s, const cbf_buffer *b, const uint8_t *data, cbf_error *err)
{
    size_t n = sender_n_heaps(s);
    s->cur = b;
    s->cur_data = data;
    s->cur_rate = s->rate;
    if (s->kind == S_XENG) {
        s->cur_has_antenna = sender_dump_has_antenna(b);
        if (!s->cur_has_antenna)
            cbf_counter_add(s->c_dumps_skipped, 1);
        /* A dump's heaps start a row of counters: heap r carries range r's slot. */
        s->heap_cnt = (s->heap_cnt + s->n_ranges - 1) / s->n_ranges * s->n_ranges;
    }
    if ((s->kind == S_XENG || s->kind == S_BEAM) && s->rate <= 0 && s->dump_s > 0)
        /* Spread a dump's (or a beam buffer's) packets over 90% of the
         * time it covers, so the switches see a steady rate rather than a
         * burst per buffer. */
        s->cur_rate = (double)cbf_port_desc_bytes(&s->d) / (0.9 * s->dump_s);
    uint64_t cnt = s->heap_cnt;
    for (int t = 0; t < s->n_lanes; t++) {
        lane *l = &s->lanes[t];
        l->first = n * (size_t)t / (size_t)s->n_lanes;
        l->end = n * (size_t)(t + 1) / (size_t)s->n_lanes;
        l->cnt = cnt;
        for (size_t k = l->first; k < l->end; k++)
            cnt += sender_heap_present(s, b, k);
    }
    s->heap_cnt = cnt;
    if (s->n_lanes > 1) {
        pthread_mutex_lock(&s->mu);
        s->gen++;
        s->n_done = 0;
        pthread_cond_broadcast(&s->go);
        pthread_mutex_unlock(&s->mu);
    }
    lane_run(&s->lanes[0]);
    if (s->n_lanes > 1) {
        pthread_mutex_lock(&s->mu);
        while (s->n_done < s->n_lanes - 1)
            pthread_cond_wait(&s->done, &s->mu);
        pthread_mutex_unlock(&s->mu);
    }
    for (int t = 0; t < s->n_lanes; t++)
        if (s->lanes[t].rc) {
            *err = s->lanes[t].err;
            return s->lanes[t].rc;
        }
    return 0;
}

/* Lanes 1.. on their threads; lane 0 is the node's thread. */
static int sender_start_lanes(sender *s, cbf_error *err)
{
    if (s->n_cores && (s->lanes[0].rc = cbf_stage_pin_thread(s->cores[0], err)))
        return s->lanes[0].rc;
    for (int t = 1; t < s->n_lanes; t++) {
        if (pthread_create(&s->lanes[t].thread, NULL, lane_thread, &s->lanes[t]))
            return cbf_error_set(err, CBF_EIO, "cannot start sending thread %d", t);
        s->lanes[t].started = true;
    }
    return 0;
}

static void sender_stop_lanes(sender *s)
{
    pthread_mutex_lock(&s->mu);
    s->quit = true;
    pthread_cond_broadcast(&s->go);
    pthread_mutex_unlock(&s->mu);
    for (int t = 1; t < s->n_lanes; t++)
        if (s->lanes[t].started)
            pthread_join(s->lanes[t].thread, NULL);
}

static int sender_run(cbf_node *node, cbf_error *err)
{
    sender *s = cbf_node_state(node);
    int rc = sender_start_lanes(s, err);
    if (!rc)
        rc = sender_send_descriptors(s, err);
    cbf_buffer *b;
    while (!rc && (rc = cbf_port_recv(s->in, &b)) == 0) {
        /* katgpucbf's tx.next-timestamp: past every buffer taken, sent or
         * not, so a capture started now sends nothing before it. */
        cbf_counter_set(s->c_next_ts, (uint64_t)(b->timestamp + (int64_t)s->d.timestamp_step));
        if (!s->capturing || b->timestamp < s->capture_from) {
            cbf_counter_add(s->c_held, 1);
            cbf_buffer_unref(b);
            continue;
        }
        const uint8_t *data = b->data;
        if (s->host) {
            rc = cbf_buffer_copy_to_host(b, s->host, cbf_port_desc_bytes(&s->d), err);
            data = s->host;
        } else if (b->event) {
            rc = cbf_buffer_sync_host(b, err);
        }
        if (!rc && s->desc_interval > 0 && sender_now_s() - s->last_desc > s->desc_interval)
            rc = sender_send_descriptors(s, err);
        if (!rc)
            rc = sender_send_buffer(s, b, data, err);
        cbf_buffer_unref(b);
    }
    sender_stop_lanes(s);
    if (rc == CBF_EOS)
        rc = 0;
    if (!rc)
        rc = sender_flush(s, err);
    /* Stream stop to every destination, also after an error, so receivers
     * end: through the first interface, after whatever it still holds. */
    cbf_error stop_err = {0};
    cbf_net_tx *q = s->lanes[0].q[0];
    int src = sender_flush_q(s, q, &stop_err);
    for (int k = 0; k < s->n_dest && !src; k++) {
        uint8_t *p;
        if (!(src = cbf_net_tx_buffer(q, &p, &stop_err)))
            src = cbf_net_tx_commit(q, cbf_spead_encode_stop(sender_cnt(s, s->heap_cnt++), p), &s->dest[k], &stop_err);
        if (src == 1)
            src = sender_flush_q(s, q, &stop_err);
    }
    if (!src)
        src = sender_flush_q(s, q, &stop_err);
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
    const cbf_params *a = cbf_request_args(req);
    s->capturing = !strcmp(cbf_params_string(a, "action"), "start");
    s->capture_from = s->capturing ? cbf_params_int(a, "from") : -1;
    cbf_reply_string(reply, "capture", s->capturing ? "started" : "stopped");
    if (s->capture_from >= 0)
        cbf_reply_int(reply, "from", s->capture_from);
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
