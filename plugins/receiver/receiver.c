/* receiver: SPEAD packets from UDP (unicast or multicast, recvmmsg, one
 * thread per socket) or from a pcap capture, placed into chunks.
 *
 * Streams: "digitiser" (MeerKAT digitiser heaps, two polarisations told
 * apart by the least significant bit of digitiser_id) into cbf.adc.packed
 * chunks; "feng" (F-engine heaps of n_ants antennas) into cbf.xeng.batch
 * chunks; "beam" (katgpucbf's beam heaps, beam b on address b) into
 * cbf.beam.batch chunks of the network form (contracts/beam.h). Each data
 * packet's items say where its heap goes, and its payload is copied once,
 * straight to its place (window.h): heaps are not gathered first, so their
 * packets may come in any order and on any thread. Descriptors, stream
 * stops and packets that do not say where they go pass through a heap
 * assembler. Chunks are kept open in a window of `chunks_in_flight` so
 * reordered packets still land, and a chunk leaves with a presence flag per
 * heap (digitiser), per batch and antenna (feng) or per batch and beam
 * (beam). Everything dropped is counted: malformed packets by reason,
 * incomplete heaps, late and duplicate packets, heaps whose items do not
 * fit the stream. */
#include <cbf/cbf.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "spead.h"
#include "stage/contracts/adc.h"
#include "stage/contracts/beam.h"
#include "stage/contracts/feng.h"
#include "stage/contracts/xeng.h"
#include "stage/flow.h"
#include "stage/netopt.h"
#include "udp.h"
#include "window.h"
#ifdef CBF_HAVE_PCAP
#include "pcap_udp.h"
#endif

#define MAX_SOCKETS 32
#define MAX_SOURCES 256   /* senders remembered for their stream stops */
#define KNOWN_BITS 8      /* per thread: sources already noted, by hash */
#define RECV_BATCH 64
#define RECV_BUF CBF_SPEAD_MAX_PACKET
#define HEAP_SAMPLES 4096   /* MeerKAT digitiser heap */

static const cbf_param_decl rx_params[] = {
    {.name = "source", .type = CBF_PARAM_CHOICE, .def = "udp", .choices = "udp|pcap",
     .doc = "where packets come from"},
    {.name = "address", .type = CBF_PARAM_STRING, .def = "127.0.0.1:7148",
     .doc = "comma-separated a.b.c.d:port to receive on (multicast groups are joined)"},
    CBF_STAGE_NET_PARAMS("receive"),
    {.name = "interface", .type = CBF_PARAM_STRING, .def = "127.0.0.1",
     .doc = "IPv4 address of the interface on which multicast groups are joined"},
    {.name = "threads_per_address", .type = CBF_PARAM_INT, .def = "1", .has_range = 1, .min = 1,
     .max = 8,
     .doc = "sockets (SO_REUSEPORT, unicast only) and threads per address; each address has its "
            "own thread anyway"},
    {.name = "spread", .type = CBF_PARAM_CHOICE, .def = "auto", .choices = "auto|flow|packet",
     .doc = "with threads_per_address > 1, how packets are shared among the sockets: flow (the "
            "kernel's hash of source address and port: a heap's packets stay on one thread), packet "
            "(each to a socket at random: even load, but every packet of a heap must carry its items, "
            "as digitisers and F-engines that repeat item pointers send them); auto = packet for "
            "stream digitiser (one packet a heap), flow for feng"},
    CBF_STAGE_AFFINITY_PARAM("receive"),
    {.name = "socket_buffer", .type = CBF_PARAM_INT, .def = "67108864", .has_range = 1,
     .min = 65536, .max = 1 << 30,
     .doc = "bytes of socket receive buffer asked for per socket (SO_RCVBUF; the kernel caps it "
            "at net.core.rmem_max)"},
    {.name = "gro", .type = CBF_PARAM_BOOL, .def = "true",
     .doc = "sockets: let the kernel hand over datagrams coalesced (UDP_GRO; a sender's "
            "UDP_SEGMENT runs arrive whole), each split again here, so the packets are the "
            "same; ignored where the kernel refuses it (the gro gauge says)"},
    {.name = "memory", .type = CBF_PARAM_CHOICE, .def = "auto", .choices = "auto|host|pinned",
     .doc = "chunk memory: pinned (page-locked, for fast uploads) or host; auto = pinned when "
            "the engine uses the GPU"},
    {.name = "pcap", .type = CBF_PARAM_STRING, .def = "", .doc = "capture file for source: pcap"},
    {.name = "stream", .type = CBF_PARAM_CHOICE, .def = "digitiser", .choices = "digitiser|feng|beam",
     .doc = "what the heaps are; beam: one address per beam, beam b on address b"},
    {.name = "antennas", .type = CBF_PARAM_INT, .def = "1", .has_range = 1, .min = 1, .max = 4096,
     .doc = "antennas in a chunk"},
    {.name = "bits", .type = CBF_PARAM_INT, .def = "10", .has_range = 1, .min = 2, .max = 16,
     .doc = "digitiser: bits per sample"},
    {.name = CBF_ATTR_SAMPLES_PER_CHUNK, .type = CBF_PARAM_INT, .def = "1048576", .has_range = 1,
     .min = 4096, .max = 1 << 30,
     .doc = "digitiser: samples per antenna and pol in a chunk, a multiple of 4096"},
    {.name = CBF_ATTR_ADC_SAMPLE_RATE, .type = CBF_PARAM_FLOAT, .def = "1712e6", .has_range = 1,
     .min = 1, .max = 1e12, .doc = "digitiser sample rate in Hz"},
    {.name = "channels", .type = CBF_PARAM_INT, .def = "1024", .has_range = 1, .min = 1,
     .max = 1 << 20,
     .doc = "feng: channels this X-engine takes (from first_channel); beam: the channels of all "
            "the X-engines received"},
    {.name = CBF_ATTR_FIRST_CHANNEL, .type = CBF_PARAM_INT, .def = "0", .has_range = 1, .min = 0,
     .max = 1 << 24, .doc = "feng, beam: first channel taken"},
    {.name = "channels_per_heap", .type = CBF_PARAM_INT, .def = "0", .has_range = 1, .min = 0,
     .max = 1 << 20,
     .doc = "feng: channels in one F-engine heap; beam: in one X-engine's beam heap; 0 = channels"},
    {.name = CBF_ATTR_SPECTRA_PER_HEAP, .type = CBF_PARAM_INT, .def = "256", .has_range = 1,
     .min = 1, .max = 1 << 16, .doc = "feng, beam: spectra per heap"},
    {.name = CBF_ATTR_SAMPLES_BETWEEN_SPECTRA, .type = CBF_PARAM_INT, .def = "0", .has_range = 1,
     .min = 0, .max = 1 << 30,
     .doc = "feng, beam: digitiser samples from one spectrum to the next; 0 = 2 x total_channels"},
    {.name = "total_channels", .type = CBF_PARAM_INT, .def = "0", .has_range = 1, .min = 0,
     .max = 1 << 24,
     .doc = "feng, beam: channels of the whole band (attribute for consumers); 0 = channels"},
    {.name = "batches", .type = CBF_PARAM_INT, .def = "4", .has_range = 1, .min = 1, .max = 4096,
     .doc = "feng, beam: batches (heap times) per chunk"},
    {.name = "chunks_in_flight", .type = CBF_PARAM_INT, .def = "2", .has_range = 1, .min = 1,
     .max = 4096, .doc = "chunks open at once: the reordering window in time"},
    {.name = "release_complete", .type = CBF_PARAM_BOOL, .def = "true",
     .doc = "a chunk at the window's tail with every heap in leaves at once, not when the window "
            "moves past it (latency of one chunk rather than chunks_in_flight); a packet again for "
            "a chunk gone is then late, not duplicate; false: only the window moves chunks on"},
    {.name = "max_ahead", .type = CBF_PARAM_FLOAT, .def = "0.1", .has_range = 1, .min = 0, .max = 3600,
     .doc = "seconds of stream time a packet may be ahead of the newest open chunk; further ahead is "
            "counted in packets_ahead and dropped (a spoofed or corrupt timestamp)"},
    {.name = "jump_packets", .type = CBF_PARAM_INT, .def = "4", .has_range = 1, .min = 1, .max = 64,
     .doc = "distinct packets that must ask for chunks past the next one (within max_ahead, and "
            "within chunks_in_flight of one another) before the window skips there; those before are "
            "held and placed then, or counted in packets_outlier when the stream goes on without "
            "them; 1 = the first such packet moves the window"},
    {.name = "resync_after", .type = CBF_PARAM_FLOAT, .def = "1", .has_range = 1, .min = 0.001,
     .max = 3600,
     .doc = "seconds with no packet fitting the window, while packets far ahead or behind it keep "
            "coming, after which the window restarts where the stream now is"},
    {.name = "heap_window", .type = CBF_PARAM_INT, .def = "64", .has_range = 1, .min = 1,
     .max = 4096, .doc = "heaps assembled at once per socket (packet reordering window)"},
    {.name = "buffers", .type = CBF_PARAM_INT, .def = "4", .has_range = 1, .min = 2, .max = 4098,
     .doc = "output buffers in the pool"},
    {.name = "stops", .type = CBF_PARAM_INT, .def = "1", .has_range = 1, .min = 0, .max = 4096,
     .doc = "stream stops (one per sender) that end the stream; 0 = run until stopped"},
    {.name = "drop_rate", .type = CBF_PARAM_FLOAT, .def = "0", .has_range = 1, .min = 0, .max = 1,
     .doc = "testing: drop this fraction of data packets on arrival (seeded), to exercise loss "
            "handling"},
    {.name = "drop_seed", .type = CBF_PARAM_INT, .def = "1", .has_range = 1, .min = 0,
     .max = 4.6e18, .doc = "testing: seed of drop_rate"},
    {.name = "idle_timeout", .type = CBF_PARAM_FLOAT, .def = "0", .has_range = 1, .min = 0,
     .max = 1e6, .doc = "end when no packet came for this many seconds after the first; 0 = never"},
};

static const cbf_port_decl rx_ports[] = {
    {.name = "out", .dir = CBF_PORT_OUT, .type = CBF_TYPE_ADC_PACKED, .optional = 1,
     .doc = "stream digitiser: packed sample chunks"},
    {.name = "batches", .dir = CBF_PORT_OUT, .type = CBF_TYPE_XENG_BATCH, .optional = 1,
     .doc = "stream feng: X-engine input chunks"},
    {.name = "beams", .dir = CBF_PORT_OUT, .type = CBF_TYPE_BEAM_BATCH, .optional = 1,
     .doc = "stream beam: beam chunks, flags per (batch, beam), beam_ants per heap in aux"},
};

/* The codec's 13 reasons are shown as four counters (a node has at most
 * CBF_MAX_NODE_COUNTERS); the end-of-run log line gives every reason. */
enum { G_FOREIGN, G_HEADER, G_LENGTH, G_SIZE, N_GROUPS };
static const char *const rx_group_names[N_GROUPS] = {
    "malformed_foreign", "malformed_header", "malformed_length", "malformed_heap_size"};

static int rx_reason_group(int reason)
{
    switch (reason) {
    case CBF_SPEAD_ERR_MAGIC: case CBF_SPEAD_ERR_VERSION: case CBF_SPEAD_ERR_FLAVOUR:
        return G_FOREIGN;   /* not SPEAD-64-48 at all */
    case CBF_SPEAD_ERR_PAYLOAD_LEN: case CBF_SPEAD_ERR_OFFSET: case CBF_SPEAD_ERR_ADDRESS:
        return G_LENGTH;
    case CBF_SPEAD_ERR_HEAP_SIZE: case CBF_SPEAD_ERR_SIZE_CHANGED:
        return G_SIZE;
    default:
        return G_HEADER;    /* short, item count, missing, not immediate, duplicate */
    }
}

typedef struct receiver receiver;

/* Where a heap went (rx_place_packet). */
typedef struct rx_seen {
    uint64_t cnt;
    int64_t idx;
    size_t piece;
    bool valid;
    bool bad;           /* the heap does not fit the stream: its packets are bad too */
} rx_seen;

#define SEEN_BITS 10

typedef struct worker {
    receiver *r;
    int index;
    int address;                /* which of the `address` list this socket takes */
    rx_place pending[RECV_BATCH];   /* places of this batch, their bytes still in the packets */
    int n_pending;
    unsigned batches;
    uint64_t packets, bytes;   /* taken without the assembler, not yet added to the node's */
    uint64_t all_packets;      /* every packet this socket took (the end-of-run log) */
    rx_seen seen_heaps[1 << SEEN_BITS];
    uint64_t known[1 << KNOWN_BITS];  /* sources this thread has already noted, by hash */
    cbf_net_rx *rx;
    cbf_spead_assembler *as;
    pthread_t thread;
    bool started;
    int rc;
    cbf_error err;
    uint64_t rng;              /* drop_rate's generator */
    cbf_net_rx_stats net_seen; /* transport counters already added to the node's */
    cbf_spead_packet *pkt;     /* the packet being looked at */
    cbf_spead_counters seen;   /* assembler counters already added to the node's */
} worker;

struct receiver {
    cbf_node *node;
    cbf_port *out;
    cbf_port_desc d;
    bool feng, beam;               /* stream feng, beam (else digitiser) */
    size_t n_beams;                /* beam: one per address */
    /* shape */
    int antennas, bits;
    size_t spc, heap_bytes, heaps;                 /* digitiser */
    size_t channels, first, cph, spectra, spb, batches, ranges;  /* feng */
    int64_t chunk_step;                            /* samples per chunk */
    size_t n_flags;
    rx_window win;
    pthread_mutex_t lock;          /* guards the end-of-stream state below */
    int stops_needed, stops_seen;
    /* A stream stop counts only from a source that has sent the stream
     * something else, once: a spoofed or repeated stop cannot end it. */
    uint64_t sources[MAX_SOURCES], stopped[MAX_SOURCES];
    int n_sources, n_stopped;
    bool sources_full;             /* more senders than remembered: every stop counts */
    double idle_timeout;
    atomic_llong last_packet_ns;   /* written once per batch by every thread */
    atomic_bool finished;
    double drop_rate;
    atomic_uint_fast64_t descriptors;   /* in the end-of-run log, not a counter */
    /* sockets */
    worker workers[MAX_SOCKETS];
    int n_workers;
    bool pcap;
    const char *pcap_path;
    int cores[MAX_SOCKETS], n_cores;   /* affinity */
    size_t rcvbuf;
    cbf_counter *c_packets, *c_bytes, *c_bad_heaps, *c_kernel_drops, *c_dropped_test, *c_truncated,
        *c_stops_ignored, *c_malformed[N_GROUPS];
    /* Packets, one reason each (docs/network.md "Counting packets"); the
     * window's own are in win. */
    cbf_counter *c_bad_packets, *c_control, *c_incomplete_packets, *c_other_dest;
    cbf_counter *c_coalesced;   /* datagrams that came coalesced (UDP_GRO) */
    cbf_gauge *g_gro;
#ifdef CBF_HAVE_PCAP
    cbf_udp_endpoint eps[MAX_SOCKETS];   /* source pcap: the destinations taken */
    int n_eps;
#endif
};

/* ---- Placing packets -------------------------------------------------- */

static uint64_t rx_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const cbf_spead_item *rx_item(const cbf_spead_item *items, int n, uint16_t id)
{
    for (int i = 0; i < n; i++)
        if (items[i].id == id)
            return &items[i];
    return NULL;
}

/* The data item of the stream's heaps. */
static uint16_t rx_data_id(const receiver *r)
{
    return r->beam ? CBF_BEAM_ITEM_BF_RAW : r->feng ? 0x4300 : 0x3300;
}

/* Where a heap goes, from its items (a packet's or an assembled heap's)
 * and, in a beam stream, the address it came to (its beam): 0 with *idx,
 * *piece and *note (the heap's aux word: a digitiser's clip count, a
 * beam's beam_ants) set; 1 when an item the stream needs is absent; -1
 * when they do not fit the stream (heaps_bad). */
static int rx_locate(const receiver *r, int address, const cbf_spead_item *items, int n, int64_t *idx,
                     size_t *piece, uint32_t *note)
{
    const cbf_spead_item *ts = rx_item(items, n, 0x1600),
                         *id = rx_item(items, n, r->beam   ? CBF_BEAM_ITEM_BEAM_ANTS
                                                 : r->feng ? 0x4101
                                                           : 0x3101),
                         *freq = r->feng || r->beam ? rx_item(items, n, 0x4103) : NULL;
    if (!ts || !id || ((r->feng || r->beam) && !freq))
        return 1;
    if (!ts->immediate || !id->immediate || (freq && !freq->immediate))
        return -1;
    if (!r->feng && !r->beam) {
        const cbf_spead_item *status = rx_item(items, n, 0x3102);
        *note = status && status->immediate ? cbf_adc_status_clipped(status->value) : 0;
        if (ts->value % HEAP_SAMPLES || (r->antennas > 1 && (id->value >> 1) >= (uint64_t)r->antennas))
            return -1;
        /* 2 x antenna + pol. One antenna per engine (MeerKAT's F-engines):
         * the groups joined select the antenna, and digitiser_id is only the pol. */
        size_t input = r->antennas == 1 ? (size_t)(id->value & 1) : (size_t)id->value;
        *idx = (int64_t)(ts->value / r->spc);
        *piece = input * r->heaps + (size_t)(ts->value % r->spc) / HEAP_SAMPLES;
        return 0;
    }
    uint64_t step = (uint64_t)r->spectra * r->spb, f = freq->value;
    /* feng: id is the feng_id (< antennas); beam: beam_ants (<= antennas). */
    if (ts->value % step || id->value >= (uint64_t)r->antennas + r->beam || f < r->first ||
        f >= r->first + r->channels || (f - r->first) % r->cph)
        return -1;
    uint64_t batch = ts->value / step;
    *idx = (int64_t)(batch / r->batches);
    /* feng [batch][antenna][channel][spectrum][pol]: flag (batch, antenna);
     * beam [batch][beam][channel][spectrum]: flag (batch, beam); one piece
     * per channel range (an X-engine's channels in a beam stream). */
    size_t flag = (size_t)(batch % r->batches) * (r->beam ? r->n_beams : (size_t)r->antennas) +
                  (r->beam ? (size_t)address : (size_t)id->value);
    *piece = flag * r->ranges + (size_t)(f - r->first) / r->cph;
    *note = r->beam ? (uint32_t)id->value : 0;
    return 0;
}

static void rx_pend(worker *w, const rx_place *p)
{
    if (w->n_pending < RECV_BATCH) {
        w->pending[w->n_pending++] = *p;
        return;
    }
    rx_place one = *p;
    rx_window_place(&w->r->win, &one, 1, rx_now_ns());
}

static void rx_place_pending(worker *w)
{
    rx_window_place(&w->r->win, w->pending, w->n_pending, rx_now_ns());
    w->n_pending = 0;
}

/* A heap the assembler put together (its packets did not each say where
 * they go): placed whole. One still in the packet buffers waits for the
 * batch's one lock; one in the assembler's memory is placed now (that
 * memory is reused by the next heap). */
static void rx_on_heap(const cbf_spead_heap *h, void *user)
{
    worker *w = user;
    receiver *r = w->r;
    if (cbf_spead_heap_find(h, CBF_SPEAD_DESCRIPTOR)) {
        atomic_fetch_add(&r->descriptors, 1);
        cbf_counter_add(r->c_control, h->packets);
        return;
    }
    const cbf_spead_item *data = cbf_spead_heap_find(h, rx_data_id(r));
    rx_place p = {.first = true, .packets = (uint32_t)h->packets};
    if (rx_locate(r, w->address, h->items, h->n_items, &p.idx, &p.piece, &p.note) || !data ||
        cbf_spead_heap_item_bytes(h, data, &p.data, &p.len) || p.len != r->win.piece_bytes) {
        cbf_counter_add(r->c_bad_heaps, 1);
        cbf_counter_add(r->c_bad_packets, h->packets);
        return;
    }
    if (h->in_packet)
        rx_pend(w, &p);
    else
        rx_window_place(&r->win, &p, 1, rx_now_ns());
}

/* The worker's memory of where recent heaps went, by heap counter, for
 * packets that do not repeat the heap's items (senders that put them in
 * the first packet only). */
static rx_seen *rx_seen_slot(worker *w, uint64_t cnt)
{
    return &w->seen_heaps[(cnt * 0x9e3779b97f4a7c15ull) >> (64 - SEEN_BITS)];
}

/* Places one data packet straight into its chunk: 0, or 1 when it cannot
 * say where it goes (the assembler takes it), or -1 when its heap does not
 * fit the stream (the packet counted in packets_bad, the heap in heaps_bad
 * once, at its first byte). */
static int rx_place_packet(worker *w, const cbf_spead_packet *pkt)
{
    receiver *r = w->r;
    rx_place p = {.offset = pkt->heap_offset, .data = pkt->payload, .len = pkt->payload_len,
                  .first = pkt->heap_offset == 0, .packets = 1};
    rx_seen *seen = rx_seen_slot(w, pkt->heap_cnt);
    const cbf_spead_item *data = rx_item(pkt->items, pkt->n_items, rx_data_id(r));
    /* A digitiser's clip count rides in the heap's digitiser_status, a
     * beam's beam_ants in its own item; only the heap's first packet sets
     * the note. */
    int rc = rx_locate(r, w->address, pkt->items, pkt->n_items, &p.idx, &p.piece, &p.note);
    if (rc < 0 || (rc == 1 && seen->valid && seen->bad && seen->cnt == pkt->heap_cnt)) {
        /* Its later packets may not repeat the items: they follow the heap counter. */
        *seen = (rx_seen){.cnt = pkt->heap_cnt, .valid = true, .bad = true};
        cbf_counter_add(r->c_bad_heaps, p.first);
        cbf_counter_add(r->c_bad_packets, 1);
        return -1;
    }
    if (rc == 0) {
        /* Only a heap that is its data item alone maps byte for byte onto
         * its piece; any other layout is assembled first. */
        if (!data || data->immediate || data->value != 0 || pkt->heap_size != r->win.piece_bytes)
            return 1;
        *seen = (rx_seen){.cnt = pkt->heap_cnt, .idx = p.idx, .piece = p.piece, .valid = true};
    } else if (seen->valid && seen->cnt == pkt->heap_cnt && pkt->heap_size == r->win.piece_bytes) {
        p.idx = seen->idx;
        p.piece = seen->piece;
    } else {
        return 1;
    }
    rx_pend(w, &p);
    return 0;
}

/* Adds what the worker counted since last time to the node's counters.
 * Heaps are counted complete by the window, not by the assembler. */
static void rx_publish(worker *w)
{
    receiver *r = w->r;
    const cbf_spead_counters *k = cbf_spead_assembler_counters(w->as);
    w->all_packets += k->packets - w->seen.packets + w->packets;
    cbf_counter_add(r->c_packets, k->packets - w->seen.packets + w->packets);
    cbf_counter_add(r->c_bytes, k->bytes - w->seen.bytes + w->bytes);
    w->packets = w->bytes = 0;
    cbf_counter_add(r->win.c_incomplete, k->incomplete - w->seen.incomplete);
    cbf_counter_add(r->win.c_late_packets, k->late - w->seen.late);
    cbf_counter_add(r->win.c_duplicate, k->duplicate - w->seen.duplicate);
    /* Heaps the assembler could not complete: their packets are dropped with them. */
    cbf_counter_add(r->c_incomplete_packets, k->incomplete_packets - w->seen.incomplete_packets +
                                                 k->fragmented - w->seen.fragmented);
    for (int i = 1; i < CBF_SPEAD_N_REASONS; i++)
        cbf_counter_add(r->c_malformed[rx_reason_group(i)], k->malformed[i] - w->seen.malformed[i]);
    w->seen = *k;
    if (w->rx) {
        /* Frames that were not UDP at all (ibverbs sees whole frames) are foreign. */
        cbf_net_rx_stats t;
        cbf_net_rx_stats_get(w->rx, &t);
        cbf_counter_add(r->c_kernel_drops, t.kernel_drops - w->net_seen.kernel_drops);
        cbf_counter_add(r->c_malformed[G_FOREIGN], t.bad_frames - w->net_seen.bad_frames);
        cbf_counter_add(r->c_truncated, t.truncated - w->net_seen.truncated);
        cbf_counter_add(r->c_coalesced, t.coalesced - w->net_seen.coalesced);
        /* Taken from the queue, never handed on: packets too, each under its reason. */
        cbf_counter_add(r->c_packets, t.bad_frames - w->net_seen.bad_frames + t.truncated - w->net_seen.truncated);
        w->net_seen = t;
    }
}

/* ---- Sources ----------------------------------------------------------- */

static double rx_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* No lock: every thread asks once per batch. */
static bool rx_finished(receiver *r)
{
    if (atomic_load(&r->finished) || atomic_load(&r->win.send_rc))
        return true;
    long long last = atomic_load_explicit(&r->last_packet_ns, memory_order_relaxed);
    if (r->idle_timeout > 0 && last > 0 && rx_now_s() - 1e-9 * (double)last > r->idle_timeout) {
        atomic_store(&r->finished, true);
        return true;
    }
    return cbf_node_stopping(r->node);
}

static bool rx_has(const uint64_t *set, int n, uint64_t v)
{
    for (int i = 0; i < n; i++)
        if (set[i] == v)
            return true;
    return false;
}

/* A source (the group it came to << 48 | its address << 16 | its port; 0
 * = not known, as from a pcap) that sent a good packet other than a stream
 * stop. */
static void rx_note_source(worker *w, uint64_t src)
{
    /* Every data packet asks: one slot looked at, and the shared list
     * (under the lock) only for a source this thread has not seen, which
     * keeps 64 interleaved F-engines off the lock. */
    uint64_t *slot = &w->known[(src * 0x9e3779b97f4a7c15ull) >> (64 - KNOWN_BITS)];
    if (!src || *slot == src)
        return;
    *slot = src;
    receiver *r = w->r;
    pthread_mutex_lock(&r->lock);
    if (!rx_has(r->sources, r->n_sources, src)) {
        if (r->n_sources < MAX_SOURCES)
            r->sources[r->n_sources++] = src;
        else
            r->sources_full = true;
    }
    pthread_mutex_unlock(&r->lock);
}

static void rx_count_stop(receiver *r, uint64_t src)
{
    pthread_mutex_lock(&r->lock);
    if (src && !r->sources_full &&
        (!rx_has(r->sources, r->n_sources, src) || rx_has(r->stopped, r->n_stopped, src))) {
        pthread_mutex_unlock(&r->lock);
        cbf_counter_add(r->c_stops_ignored, 1);
        return;
    }
    if (src && r->n_stopped < MAX_SOURCES)
        r->stopped[r->n_stopped++] = src;
    r->stops_seen++;
    cbf_counter_add(r->c_control, 1);
    if (r->stops_needed && r->stops_seen >= r->stops_needed)
        atomic_store(&r->finished, true);
    pthread_mutex_unlock(&r->lock);
}

/* Loss injection for tests: a data packet (decoded in w->pkt) is dropped
 * with probability drop_rate, so that every drop costs exactly its heap. */
static bool rx_drop_test(worker *w)
{
    receiver *r = w->r;
    if (r->drop_rate <= 0)
        return false;
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    if ((double)(w->rng >> 11) * 0x1p-53 >= r->drop_rate)
        return false;
    cbf_counter_add(r->c_dropped_test, 1);
    return true;
}

/* One datagram: a data packet goes straight into its chunk; a malformed
 * one, a stream control or descriptor packet, or one that does not say
 * where it goes, goes to the assembler, which counts and assembles. */
static void rx_packet(worker *w, const uint8_t *buf, size_t len, uint64_t src)
{
    cbf_spead_packet *pkt = w->pkt;
    if (cbf_spead_decode(buf, len, pkt) == CBF_SPEAD_OK && pkt->stream_ctrl < 0) {
        rx_note_source(w, src);
        if (!rx_item(pkt->items, pkt->n_items, CBF_SPEAD_DESCRIPTOR) &&
            (rx_drop_test(w) || rx_place_packet(w, pkt) <= 0)) {
            /* Not the assembler's: counted here, in packets and (by the
             * drop, the window or rx_place_packet) under one reason. */
            w->packets++;
            w->bytes += len;
            return;
        }
    }
    if (cbf_spead_assembler_add(w->as, buf, len))
        rx_count_stop(w->r, src);
}

static void *rx_udp_loop(void *arg)
{
    worker *w = arg;
    receiver *r = w->r;
    if (w->index > 0)   /* worker 0 is the node's own thread */
        cbf_node_thread_start(r->node, "rx", w->index);
    if (w->index < r->n_cores && (w->rc = cbf_stage_pin_thread(r->cores[w->index], &w->err)))
        return NULL;
    const uint8_t *pkt[RECV_BATCH];
    size_t len[RECV_BATCH];
    uint64_t src[RECV_BATCH];
    while (!rx_finished(r)) {
        int n = cbf_net_rx_recv(w->rx, pkt, len, &w->err);
        if (n < 0) {
            w->rc = n;
            break;
        }
        if (n == 0) {
            rx_publish(w);
            continue;   /* the receive timeout: look at stop and idle again */
        }
        atomic_store_explicit(&r->last_packet_ns, (long long)(rx_now_s() * 1e9), memory_order_relaxed);
        cbf_net_rx_sources(w->rx, src, n);
        for (int i = 0; i < n; i++)
            /* A sender stops each group (address) it sends to: the group
             * is part of what a stop is counted against. */
            rx_packet(w, pkt[i], len[i], src[i] ? src[i] | (uint64_t)w->address << 48 : 0);
        rx_place_pending(w);   /* before the next recv reuses the packet buffers */
        /* The node's counters are shared by the threads: added to every few
         * batches, not per packet. */
        if (++w->batches % 8 == 0)
            rx_publish(w);
    }
    return NULL;
}

static int rx_pcap_loop(receiver *r, worker *w, cbf_error *err)
{
#ifdef CBF_HAVE_PCAP
    cbf_pcap_reader *pr;
    int rc = cbf_pcap_reader_open(r->pcap_path, &pr, err);
    if (rc)
        return rc;
    cbf_pcap_datagram d;
    uint64_t n = 0, skipped = 0, other = 0;
    /* Frames that are not IPv4 UDP are foreign, as on an ibverbs queue;
     * datagrams to an address and port the receiver would not bind or join
     * are not its stream, as a socket would not see them. Both are frames
     * taken, so in packets too. */
    while (!rx_finished(r) && (rc = cbf_pcap_reader_next(pr, &d, &skipped, err)) == 1) {
        bool ours = false;
        for (int e = 0; e < r->n_eps && !ours; e++)
            ours = cbf_udp_endpoint_takes(&r->eps[e], d.dst_ip, d.dst_port);
        if (!ours) {
            other++;
            continue;
        }
        rx_packet(w, d.payload, d.len, 0);   /* a capture's stops all count */
        rx_place_pending(w);
        if (++n % RECV_BATCH == 0)
            rx_publish(w);
    }
    cbf_counter_add(r->c_malformed[G_FOREIGN], skipped);
    cbf_counter_add(r->c_other_dest, other);
    cbf_counter_add(r->c_packets, skipped + other);
    cbf_pcap_reader_close(pr);
    return rc < 0 ? rc : 0;
#else
    (void)r;
    (void)w;
    return cbf_error_set(err, CBF_ENOTSUP, "source pcap needs libpcap, which this build lacks");
#endif
}

/* ---- Plugin ------------------------------------------------------------ */

static int rx_set_desc(receiver *r, const cbf_params *p, cbf_error *err)
{
    cbf_port_desc *d = &r->d;
    double rate = cbf_params_float(p, CBF_ATTR_ADC_SAMPLE_RATE);
    r->antennas = (int)cbf_params_int(p, "antennas");
    if (!r->feng && !r->beam) {
        r->bits = (int)cbf_params_int(p, "bits");
        r->spc = (size_t)cbf_params_int(p, CBF_ATTR_SAMPLES_PER_CHUNK);
        if (r->spc % HEAP_SAMPLES)
            return cbf_error_set(err, CBF_ECONFIG, "%s: samples_per_chunk %zu is not a multiple of %d",
                                 cbf_params_where(p, CBF_ATTR_SAMPLES_PER_CHUNK), r->spc,
                                 HEAP_SAMPLES);
        r->heap_bytes = (size_t)HEAP_SAMPLES * (size_t)r->bits / 8;
        r->heaps = r->spc / HEAP_SAMPLES;
        r->chunk_step = (int64_t)r->spc;
        cbf_port_desc_init(d, CBF_DTYPE_PACKED, CBF_MEM_HOST);
        d->bits = r->bits;
        cbf_port_desc_add_axis(d, "antenna", (size_t)r->antennas);
        cbf_port_desc_add_axis(d, "pol", 2);
        cbf_port_desc_add_axis(d, "byte", r->heaps * r->heap_bytes);
        r->n_flags = (size_t)r->antennas * 2 * r->heaps;
        d->present_axis = "heap";
        cbf_port_desc_set_attr(d, CBF_ATTR_SAMPLES_PER_CHUNK, (double)r->spc);
        cbf_port_desc_set_attr(d, CBF_ATTR_HEAP_SAMPLES, HEAP_SAMPLES);
        /* Each heap's clip count from its digitiser_status (contracts/adc.h). */
        d->aux_size = cbf_adc_clip_aux_size(r->n_flags);
        d->aux_layout = CBF_ADC_CLIP_AUX_LAYOUT;
    } else {
        r->channels = (size_t)cbf_params_int(p, "channels");
        r->first = (size_t)cbf_params_int(p, CBF_ATTR_FIRST_CHANNEL);
        r->cph = (size_t)cbf_params_int(p, "channels_per_heap");
        r->cph = r->cph ? r->cph : r->channels;
        r->spectra = (size_t)cbf_params_int(p, CBF_ATTR_SPECTRA_PER_HEAP);
        size_t total = (size_t)cbf_params_int(p, "total_channels");
        total = total ? total : r->channels;
        r->spb = (size_t)cbf_params_int(p, CBF_ATTR_SAMPLES_BETWEEN_SPECTRA);
        r->spb = r->spb ? r->spb : 2 * total;
        r->batches = (size_t)cbf_params_int(p, "batches");
        if (r->channels % r->cph)
            return cbf_error_set(err, CBF_ECONFIG, "%s: %zu channels are not whole heaps of %zu",
                                 cbf_params_where(p, "channels_per_heap"), r->channels, r->cph);
        r->ranges = r->channels / r->cph;
        r->chunk_step = (int64_t)(r->batches * r->spectra * r->spb);
        if (r->beam) {
            /* aux: beam_ants per heap, u32[batch][beam][range]. */
            const cbf_beam_batch b = {r->batches, r->n_beams, r->channels, r->spectra,
                                      (size_t)r->antennas, true, r->ranges};
            const cbf_port_desc no_attrs = {0};
            cbf_beam_batch_desc(d, &b, CBF_MEM_HOST, &no_attrs);
        } else {
            const cbf_xeng_batch b = {
                .dtype = CBF_DTYPE_CI8,
                .batches = r->batches,
                .n_ants = (size_t)r->antennas,
                .channels = r->channels,
                .spectra = r->spectra,
            };
            cbf_xeng_batch_desc(d, &b, CBF_MEM_HOST);
        }
        r->n_flags = d->n_present;
        cbf_port_desc_set_attr(d, CBF_ATTR_CHANNELS, (double)total);
        cbf_port_desc_set_attr(d, CBF_ATTR_FIRST_CHANNEL, (double)r->first);
        cbf_port_desc_set_attr(d, CBF_ATTR_SPECTRA_PER_HEAP, (double)r->spectra);
        cbf_port_desc_set_attr(d, CBF_ATTR_SAMPLES_BETWEEN_SPECTRA, (double)r->spb);
        cbf_port_desc_set_attr(d, CBF_ATTR_N_ANTS, r->antennas);
    }
    d->n_present = r->n_flags;
    d->timestamp_step = r->chunk_step;
    const char *mem = cbf_params_string(p, "memory");
    bool gpu = cbf_node_use_gpu(r->node);
    if (!strcmp(mem, "pinned") && !gpu)
        return cbf_error_set(err, CBF_ECONFIG, "%s: pinned memory needs the GPU, which this engine "
                             "does not use", cbf_params_where(p, "memory"));
    d->mem = !strcmp(mem, "pinned") || (!strcmp(mem, "auto") && gpu) ? CBF_MEM_PINNED : CBF_MEM_HOST;
    cbf_port_desc_set_attr(d, CBF_ATTR_ADC_SAMPLE_RATE, rate);
    return 0;
}

static void receiver_fini(cbf_node *node)
{
    receiver *r = cbf_node_state(node);
    if (!r)
        return;
    for (int i = 0; i < r->n_workers; i++) {
        cbf_net_rx_close(r->workers[i].rx);
        cbf_spead_assembler_destroy(r->workers[i].as);
        free(r->workers[i].pkt);
    }
    rx_window_free(&r->win);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

static int rx_open_workers(receiver *r, const cbf_params *p, const cbf_net_choice *choice, cbf_error *err)
{
    size_t heap = r->feng || r->beam ? r->win.piece_bytes : r->heap_bytes;
    cbf_spead_assembler_config ac = {
        .max_heap_size = heap > 65536 ? heap : 65536,   /* room for descriptor heaps too */
        .window = (int)cbf_params_int(p, "heap_window"), .on_heap = rx_on_heap,
    };
    cbf_udp_endpoint eps[MAX_SOCKETS];
    int n_eps = 1, per = 1;
    if (!r->pcap) {
        n_eps = cbf_udp_parse_endpoints(cbf_params_string(p, "address"), cbf_params_where(p, "address"),
                                        eps, MAX_SOCKETS, err);
        if (n_eps < 0)
            return n_eps;
        per = (int)cbf_params_int(p, "threads_per_address");
        /* Every socket joined to a group gets every packet of it, so
         * SO_REUSEPORT spreads only unicast flows. */
        for (int e = 0; e < n_eps && per > 1; e++)
            if (eps[e].multicast)
                return cbf_error_set(err, CBF_ECONFIG,
                                     "%s: threads_per_address %d needs unicast addresses: each socket "
                                     "joined to a multicast group receives all of it (list several "
                                     "groups instead, one thread each)",
                                     cbf_params_where(p, "threads_per_address"), per);
        /* Raw-packet queues have no SO_REUSEPORT: two with one flow rule
         * would each get some of the packets, or all of them. */
        if (per > 1 && cbf_net_choose_transport(choice, cbf_params_string(p, "interface"), NULL) == CBF_NET_IBVERBS)
            return cbf_error_set(err, CBF_ECONFIG, "%s: threads_per_address %d is for sockets; with "
                                 "transport ibverbs list several addresses instead",
                                 cbf_params_where(p, "threads_per_address"), per);
        if (n_eps * per > MAX_SOCKETS)
            return cbf_error_set(err, CBF_ECONFIG, "%s: more than %d sockets in all",
                                 cbf_params_where(p, "threads_per_address"), MAX_SOCKETS);
    }
    const char *how = cbf_params_string(p, "spread");
    bool spread = !strcmp(how, "packet") || (!strcmp(how, "auto") && !r->feng && !r->beam);
    for (int e = 0; e < n_eps; e++) {
        for (int k = 0; k < per; k++) {
            worker *w = &r->workers[r->n_workers];
            w->r = r;
            w->index = r->n_workers++;
            w->address = e;
            ac.user = w;
            int rc = cbf_spead_assembler_create(&ac, &w->as, err);
            w->rng = (uint64_t)cbf_params_int(p, "drop_seed") * 0x9e3779b97f4a7c15ull + 1 +
                     (uint64_t)r->n_workers;
            if (!rc && !(w->pkt = malloc(sizeof *w->pkt)))
                rc = cbf_error_set(err, CBF_ENOMEM, "out of memory");
            if (!rc && !r->pcap) {
                cbf_net_rx_config nc = {
                    .ep = eps[e], .iface = cbf_params_string(p, "interface"), .rcvbuf = r->rcvbuf,
                    .reuseport = per > 1, .timeout_ms = 100,   /* wake to see stop requests */
                    .batch = RECV_BATCH, .max_packet = RECV_BUF, .gro = cbf_params_bool(p, "gro"),
                    .ring_slots = (uint32_t)cbf_params_int(p, "ring_slots"), .choice = *choice};
                rc = cbf_net_rx_open(&nc, &w->rx, err);
                if (rc)
                    return rc == CBF_ENOTSUP ? rc : cbf_error_prefix(err, "%s", cbf_params_where(p, "address"));
            }
            if (rc)
                return rc;
        }
        if (per > 1 && spread) {   /* the group is complete: its last socket sets its program */
            int rc = cbf_net_rx_spread(r->workers[r->n_workers - 1].rx, (unsigned)per, err);
            if (rc)
                return cbf_error_prefix(err, "%s", cbf_params_where(p, "spread"));
        }
    }
    return 0;
}

static int receiver_init(cbf_node *node, cbf_error *err)
{
    receiver *r = calloc(1, sizeof(*r));
    if (!r)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    pthread_mutex_init(&r->lock, NULL);
    cbf_node_set_state(node, r);
    r->node = node;
    const cbf_params *p = cbf_node_params(node);
    const char *stream = cbf_params_string(p, "stream");
    r->feng = !strcmp(stream, "feng");
    r->beam = !strcmp(stream, "beam");
    const char *port = r->beam ? "beams" : r->feng ? "batches" : "out";
    r->out = cbf_node_port(node, port, 0);
    if (!r->out)
        return cbf_error_set(err, CBF_ECONFIG, "%s: stream %s sends on port '%s', which is not wired",
                             cbf_params_where(p, "stream"), stream, port);
    r->pcap = !strcmp(cbf_params_string(p, "source"), "pcap");
    r->pcap_path = cbf_params_string(p, "pcap");
    if (r->pcap && !r->pcap_path[0])
        return cbf_error_set(err, CBF_ECONFIG, "%s: source is pcap but no pcap file is given",
                             cbf_params_where(p, "pcap"));
#ifdef CBF_HAVE_PCAP
    /* A replay takes what its sockets would have: datagrams to `address`. */
    if (r->pcap && (r->n_eps = cbf_udp_parse_endpoints(cbf_params_string(p, "address"),
                                                       cbf_params_where(p, "address"), r->eps,
                                                       MAX_SOCKETS, err)) < 0)
        return r->n_eps;
#endif
    if (r->beam) {
        /* A beam heap does not name its beam: the address it came to does. */
        cbf_udp_endpoint eps[MAX_SOCKETS];
        int n = r->pcap ? 0 : cbf_udp_parse_endpoints(cbf_params_string(p, "address"),
                                                      cbf_params_where(p, "address"), eps, MAX_SOCKETS, err);
        if (n < 0)
            return n;
        if (n == 0)
            return cbf_error_set(err, CBF_ECONFIG, "%s: stream beam tells beams apart by the address "
                                 "they come to, which a pcap does not keep",
                                 cbf_params_where(p, "source"));
        r->n_beams = (size_t)n;
    }
    r->stops_needed = (int)cbf_params_int(p, "stops");
    r->idle_timeout = cbf_params_float(p, "idle_timeout");
    r->drop_rate = cbf_params_float(p, "drop_rate");
    r->rcvbuf = (size_t)cbf_params_int(p, "socket_buffer");
    int rc = rx_set_desc(r, p, err);
    if (rc)
        return rc;
    int n_ring = (int)cbf_params_int(p, "chunks_in_flight");
    const size_t count = (size_t)cbf_params_int(p, "buffers");
    if (n_ring >= (int)count)
        return cbf_error_set(err, CBF_ECONFIG, "%s: chunks_in_flight %d needs more than %zu buffers",
                             cbf_params_where(p, "buffers"), n_ring, count);
    r->win.out = r->out;
    /* Digitiser: piece = flag = input x heaps + heap; F-engine: flag =
     * (batch, antenna) of `ranges` pieces, one per channel range. */
    r->win.n_flags = r->n_flags;
    r->win.per_flag = r->feng || r->beam ? r->ranges : 1;
    r->win.piece_bytes = r->feng   ? r->cph * r->spectra * 4
                         : r->beam ? r->cph * r->spectra * 2
                                   : r->heap_bytes;
    r->win.chunk_step = r->chunk_step;
    /* Timestamps count ADC samples in both streams. */
    double ahead = cbf_params_float(p, "max_ahead") * cbf_params_float(p, CBF_ATTR_ADC_SAMPLE_RATE);
    r->win.max_ahead = (int64_t)(ahead / (double)r->chunk_step) + 1;
    r->win.resync_ns = (uint64_t)(cbf_params_float(p, "resync_after") * 1e9);
    r->win.jump_packets = (uint32_t)cbf_params_int(p, "jump_packets");
    r->win.release_complete = cbf_params_bool(p, "release_complete");
    r->win.hold_bytes = RECV_BUF;   /* one datagram's payload at most */
    r->win.piece_notes = !r->feng;   /* clip counts; beam_ants */
    if ((rc = cbf_stage_out_open(node, r->out, &r->d, count, &r->win.pool, err)) ||
        (rc = rx_window_init(&r->win, n_ring, err)))
        return rc;
    static const char *names[] = {"packets", "bytes", "heaps", "heaps_incomplete", "packets_late",
                                  "packets_duplicate", "heaps_late", "heaps_bad", "chunks",
                                  "flags_missing", "packets_dropped_kernel", "packets_dropped_test",
                                  "packets_ahead", "packets_truncated", "stops_ignored",
                                  "packets_accepted", "packets_control", "packets_bad",
                                  "packets_incomplete", "packets_outlier", "packets_stopped",
                                  "packets_other_destination"};
    cbf_counter **slots[] = {&r->c_packets, &r->c_bytes, &r->win.c_heaps, &r->win.c_incomplete,
                             &r->win.c_late_packets, &r->win.c_duplicate, &r->win.c_late_heaps, &r->c_bad_heaps,
                             &r->win.c_chunks, &r->win.c_missing, &r->c_kernel_drops, &r->c_dropped_test,
                             &r->win.c_ahead, &r->c_truncated, &r->c_stops_ignored,
                             &r->win.c_accepted, &r->c_control, &r->c_bad_packets,
                             &r->c_incomplete_packets, &r->win.c_outlier, &r->win.c_stopped,
                             &r->c_other_dest};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        *slots[i] = cbf_node_counter(node, names[i]);
    for (int i = 0; i < N_GROUPS; i++)
        r->c_malformed[i] = cbf_node_counter(node, rx_group_names[i]);
    if (!r->feng && !r->beam) {
        r->win.c_notes = cbf_node_counter(node, "digitiser_clipped_samples");
        cbf_counter_warn_on_rise(r->win.c_notes);
    }
    r->win.g_sync = cbf_node_gauge(node, "rx.synchronised");
    r->win.node = node;
    r->win.c_rx_ts = cbf_node_counter(node, "rx.timestamp");
    r->win.g_rx_unix = cbf_node_gauge(node, "rx.unixtime");
    r->win.g_missing_unix = cbf_node_gauge(node, "rx.missing_unixtime");
    /* katgpucbf's names and types: the receive timestamps at engine level
     * (xbgpu's; an F-engine's are per input there), rx.synchronised a
     * boolean under the node */
    cbf_counter_katcp(r->win.c_rx_ts, "rx.timestamp", CBF_SENSOR_ENGINE);
    cbf_gauge_katcp(r->win.g_rx_unix, "rx.unixtime", CBF_SENSOR_ENGINE | CBF_SENSOR_TIMESTAMP);
    cbf_gauge_katcp(r->win.g_missing_unix, "rx.missing-unixtime", CBF_SENSOR_ENGINE | CBF_SENSOR_TIMESTAMP);
    cbf_gauge_katcp(r->win.g_sync, "rx.synchronised", CBF_SENSOR_BOOLEAN);
    cbf_counter_describe(r->win.c_rx_ts, "", "The timestamp (in samples) of the last chunk of data received");
    cbf_gauge_describe(r->win.g_rx_unix, "s", "The timestamp (in UNIX time) of the last chunk of data received");
    cbf_gauge_describe(r->win.g_missing_unix, "s",
                       "The timestamp (in UNIX time) when missing data was last detected");
    r->c_coalesced = cbf_node_counter(node, "packets_coalesced");
    cbf_counter_describe(r->c_coalesced, "", "datagrams the kernel handed over coalesced with others "
                         "(UDP_GRO), split here: informational, each is counted under its reason too");
    r->g_gro = cbf_node_gauge(node, "gro");
    cbf_gauge_describe(r->g_gro, "", "1 when the socket queues take coalesced datagrams (UDP_GRO)");
    const cbf_net_choice choice = cbf_stage_net_choice(p);
    if ((rc = rx_open_workers(r, p, &choice, err)))
        return rc;
    if (!r->pcap && (rc = r->n_cores = cbf_stage_affinity(p, r->n_workers, r->cores, MAX_SOCKETS, err)) < 0)
        return rc;
    if (!r->pcap && r->n_workers) {
        bool ibv = cbf_net_rx_transport(r->workers[0].rx) == CBF_NET_IBVERBS;
        cbf_log_info("%d %s queue(s)", r->n_workers, ibv ? "ibverbs" : "socket");
        cbf_net_rx_stats t;
        cbf_net_rx_stats_get(r->workers[0].rx, &t);
        cbf_gauge_set(r->g_gro, t.gro ? 1 : 0);
        /* Linux reports twice what it grants (the rest is its bookkeeping). */
        if (!ibv && t.rcvbuf / 2 < r->rcvbuf)
            cbf_log_warn("%s: socket_buffer %zu asked for, the kernel gave %zu: raise "
                         "net.core.rmem_max (sysctl -w net.core.rmem_max=%zu) or drops come sooner",
                         cbf_params_where(p, "socket_buffer"), r->rcvbuf, t.rcvbuf / 2, r->rcvbuf);
    }
    return 0;
}

static void rx_log_reasons(const receiver *r)
{
    char line[512];
    size_t n = 0;
    for (int i = 1; i < CBF_SPEAD_N_REASONS; i++) {
        uint64_t v = 0;
        for (int k = 0; k < r->n_workers; k++)
            v += cbf_spead_assembler_counters(r->workers[k].as)->malformed[i];
        if (v && n < sizeof line)
            n += (size_t)snprintf(line + n, sizeof line - n, " %s=%llu",
                                  cbf_spead_reason_name((cbf_spead_reason)i), (unsigned long long)v);
    }
    if (n)
        cbf_log_warn("malformed packets dropped:%s", line);   /* the runtime prefixes the node */
    /* How evenly the threads shared the work (spread: flow can leave some idle). */
    n = 0;
    for (int k = 0; k < r->n_workers && r->n_workers > 1 && n < sizeof line; k++)
        n += (size_t)snprintf(line + n, sizeof line - n, " %llu", (unsigned long long)r->workers[k].all_packets);
    if (n)
        cbf_log_info("packets by socket:%s", line);
    cbf_log_info("%llu descriptor heaps seen", (unsigned long long)atomic_load(&r->descriptors));
}

static int receiver_run(cbf_node *node, cbf_error *err)
{
    receiver *r = cbf_node_state(node);
    int rc = 0;
    if (r->pcap) {
        rc = rx_pcap_loop(r, &r->workers[0], err);
    } else {
        for (int i = 1; i < r->n_workers; i++)
            r->workers[i].started =
                pthread_create(&r->workers[i].thread, NULL, rx_udp_loop, &r->workers[i]) == 0;
        rx_udp_loop(&r->workers[0]);
        for (int i = 1; i < r->n_workers; i++)
            if (r->workers[i].started)
                pthread_join(r->workers[i].thread, NULL);
        for (int i = 0; i < r->n_workers && !rc; i++)
            if ((rc = r->workers[i].rc))
                *err = r->workers[i].err;
    }
    /* Heaps still incomplete are dropped and counted; the rest is placed. */
    for (int i = 0; i < r->n_workers; i++) {
        cbf_spead_assembler_flush(r->workers[i].as);
        if (r->workers[i].rx)
            cbf_net_rx_settle(r->workers[i].rx);
        rx_publish(&r->workers[i]);
    }
    rx_log_reasons(r);
    int drc = rx_window_drain(&r->win);
    if (!rc && drc && drc != CBF_ESTOPPED)
        rc = cbf_error_set(err, drc, "sending a chunk failed");
    return rc;
}

static const cbf_plugin_desc rx_desc = {
    .abi = CBF_PLUGIN_ABI,
    .name = "receiver",
    .version = "0.1.0",
    .summary = "SPEAD heaps from UDP or pcap into digitiser or X-engine input chunks",
    .params = rx_params,
    .n_params = CBF_COUNT_OF(rx_params),
    .ports = rx_ports,
    .n_ports = CBF_COUNT_OF(rx_ports),
    .init = receiver_init,
    .run = receiver_run,
    .fini = receiver_fini,
};

CBF_PLUGIN_DEFINE(rx_desc)
