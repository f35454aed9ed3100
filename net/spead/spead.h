/* spead.h: SPEAD-64-48 codec (packets <-> heaps), item descriptors, stream stop.
 *
 * Only the flavour MeerKAT uses is accepted: version 4, 2 bytes of item
 * identifier (top bit = immediate), 6 bytes of heap address. Everything in an
 * incoming packet is checked before it is used; a packet that fails a check
 * is counted under its reason and dropped. Nothing here prints, allocates in
 * the steady state, or trusts a length it has not checked. */
#ifndef CBF_SPEAD_H
#define CBF_SPEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "cbf/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CBF_SPEAD_MAGIC 0x53
#define CBF_SPEAD_VERSION 4
#define CBF_SPEAD_ITEM_ID_BYTES 2
#define CBF_SPEAD_ADDR_BYTES 6
#define CBF_SPEAD_HEADER_BYTES 8
#define CBF_SPEAD_POINTER_BYTES 8
#define CBF_SPEAD_ADDR_MASK ((UINT64_C(1) << 48) - 1)
#define CBF_SPEAD_DEFAULT_PACKET 8872
/* The largest datagram cbf's receiver takes (a 9216-byte jumbo frame's
 * worth); the sender refuses to make larger ones. */
#define CBF_SPEAD_MAX_PACKET 9216
/* More pointers than this in one packet is refused (a 9000-byte jumbo frame
 * holds at most 1124; MeerKAT streams use fewer than 16). */
#define CBF_SPEAD_MAX_ITEMS 256

enum {
    CBF_SPEAD_HEAP_CNT = 0x0001,
    CBF_SPEAD_HEAP_SIZE = 0x0002,
    CBF_SPEAD_HEAP_OFFSET = 0x0003,
    CBF_SPEAD_PAYLOAD_LEN = 0x0004,
    CBF_SPEAD_DESCRIPTOR = 0x0005,
    CBF_SPEAD_STREAM_CTRL = 0x0006,
    /* Fields of a descriptor's own (embedded) heap. */
    CBF_SPEAD_DESC_NAME = 0x0010,
    CBF_SPEAD_DESC_DESCRIPTION = 0x0011,
    CBF_SPEAD_DESC_SHAPE = 0x0012,
    CBF_SPEAD_DESC_FORMAT = 0x0013,
    CBF_SPEAD_DESC_ID = 0x0014,
    CBF_SPEAD_DESC_DTYPE = 0x0015,
};
#define CBF_SPEAD_CTRL_START 0
#define CBF_SPEAD_CTRL_STOP 2

/* Why a packet was dropped; CBF_SPEAD_OK for a good one. */
typedef enum cbf_spead_reason {
    CBF_SPEAD_OK = 0,
    CBF_SPEAD_ERR_SHORT,          /* shorter than the 8-byte header */
    CBF_SPEAD_ERR_MAGIC,          /* first byte is not 0x53 */
    CBF_SPEAD_ERR_VERSION,        /* version is not 4 */
    CBF_SPEAD_ERR_FLAVOUR,        /* widths are not 2 and 6 (not SPEAD-64-48) */
    CBF_SPEAD_ERR_ITEM_COUNT,     /* item pointers run past the packet, or too many */
    CBF_SPEAD_ERR_MISSING,        /* heap counter, size, offset or payload length absent */
    CBF_SPEAD_ERR_NOT_IMMEDIATE,  /* a standard item given as an address */
    CBF_SPEAD_ERR_DUPLICATE,      /* a standard item given twice */
    CBF_SPEAD_ERR_PAYLOAD_LEN,    /* payload length item differs from the bytes present */
    CBF_SPEAD_ERR_OFFSET,         /* heap offset + payload length beyond the heap size */
    CBF_SPEAD_ERR_ADDRESS,        /* an item address beyond the heap size */
    CBF_SPEAD_ERR_HEAP_SIZE,      /* heap size above the receiver's maximum */
    CBF_SPEAD_ERR_SIZE_CHANGED,   /* heap size differs from earlier packets of the heap */
    CBF_SPEAD_N_REASONS
} cbf_spead_reason;

/* "short", "magic", ... (for counter names). */
const char *cbf_spead_reason_name(cbf_spead_reason r);

typedef struct cbf_spead_item {
    uint16_t id;          /* 15-bit identifier */
    bool immediate;
    uint64_t value;       /* immediate: the 48-bit value; else the heap address */
} cbf_spead_item;

/* One validated packet; payload points into the caller's bytes. */
typedef struct cbf_spead_packet {
    uint64_t heap_cnt;
    uint64_t heap_size;
    uint64_t heap_offset;
    uint64_t payload_len;
    int stream_ctrl;      /* -1 when absent */
    int n_items;          /* pointers other than 0x0001-0x0004 and 0x0006 */
    cbf_spead_item items[CBF_SPEAD_MAX_ITEMS];
    const uint8_t *payload;
} cbf_spead_packet;

/* Parses and validates one packet. Returns CBF_SPEAD_OK or the reason. */
cbf_spead_reason cbf_spead_decode(const uint8_t *buf, size_t len, cbf_spead_packet *pkt);

/* ---- Heap assembly ---------------------------------------------------- */

/* Every packet offered ends under exactly one of: malformed[reason], late,
 * duplicate, fragmented, stops, incomplete_packets, or in a heap delivered
 * complete (cbf_spead_heap.packets); while heaps are in flight, their
 * packets are in none yet. */
typedef struct cbf_spead_counters {
    uint64_t packets;            /* packets offered */
    uint64_t bytes;              /* their bytes */
    uint64_t malformed[CBF_SPEAD_N_REASONS];  /* dropped, by reason ([0] unused) */
    uint64_t heaps;              /* heaps delivered complete */
    uint64_t incomplete;         /* heaps delivered with bytes missing (evicted or flushed) */
    uint64_t incomplete_packets; /* the packets those heaps held */
    uint64_t late;               /* packets of a heap already delivered */
    uint64_t duplicate;          /* packets overlapping bytes already held */
    uint64_t fragmented;         /* packets dropped: their heap had too many gaps to track */
    uint64_t stops;              /* stream stop heaps seen */
} cbf_spead_counters;

uint64_t cbf_spead_counters_malformed(const cbf_spead_counters *c);

/* A heap handed to the caller; valid only during the callback. */
typedef struct cbf_spead_heap {
    uint64_t cnt;
    uint64_t size;
    uint64_t received;     /* payload bytes held; == size when complete */
    bool complete;
    uint64_t packets;      /* packets it was made of (duplicates not included) */
    int n_items;           /* non-standard items, first occurrence of each (id, value) */
    const cbf_spead_item *items;
    const uint8_t *payload;
    /* The heap came whole in one packet and payload points into the bytes
     * given to cbf_spead_assembler_add (valid until the caller reuses them),
     * not into the assembler's own memory: copied once, by the consumer. */
    bool in_packet;
} cbf_spead_heap;

/* The item with this id (first one), or NULL. */
const cbf_spead_item *cbf_spead_heap_find(const cbf_spead_heap *h, uint16_t id);
/* An addressed item's bytes (it must be one of h->items): from its address
 * to the next item's address (items at one address in listed order), or to
 * the heap's end. Returns 0, or CBF_EINVAL when the item is immediate. */
int cbf_spead_heap_item_bytes(const cbf_spead_heap *h, const cbf_spead_item *it,
                              const uint8_t **data, size_t *len);

typedef void (*cbf_spead_heap_fn)(const cbf_spead_heap *heap, void *user);

typedef struct cbf_spead_assembler_config {
    size_t max_heap_size;  /* larger heaps are refused (ERR_HEAP_SIZE) */
    int window;            /* heaps assembled at once; the oldest is evicted for a new one */
    int max_items;         /* item pointers kept per heap (default 64) */
    bool deliver_incomplete; /* hand evicted heaps to the callback (complete = false) */
    cbf_spead_heap_fn on_heap;
    void *user;
} cbf_spead_assembler_config;

typedef struct cbf_spead_assembler cbf_spead_assembler;

int cbf_spead_assembler_create(const cbf_spead_assembler_config *cfg,
                               cbf_spead_assembler **out, cbf_error *err);
void cbf_spead_assembler_destroy(cbf_spead_assembler *a);
/* Offers one packet. Returns 1 when it carried stream stop, else 0; bad
 * packets are counted, never an error. A stop does not flush: the caller
 * flushes when its stream ends (after the last of several senders' stops). */
int cbf_spead_assembler_add(cbf_spead_assembler *a, const uint8_t *buf, size_t len);
/* Delivers (or drops, per deliver_incomplete) every heap in flight. */
void cbf_spead_assembler_flush(cbf_spead_assembler *a);
const cbf_spead_counters *cbf_spead_assembler_counters(const cbf_spead_assembler *a);

/* ---- Encoding --------------------------------------------------------- */

typedef struct cbf_spead_item_out {
    uint16_t id;
    bool immediate;
    uint64_t value;       /* immediate value (48 bits) */
    const void *data;     /* addressed: the bytes */
    size_t len;
} cbf_spead_item_out;

/* Cuts one heap into packets. Payload = the addressed items' bytes in order.
 * Item pointers go into the first packets (as many as fit), or into every
 * packet when repeat_pointers is set (as MeerKAT's digitisers do). */
typedef struct cbf_spead_encoder {
    uint64_t heap_cnt;
    const cbf_spead_item_out *items;
    int n_items;
    size_t max_packet;
    bool repeat_pointers;
    /* progress, private */
    uint64_t heap_size_;
    uint64_t offset_;
    int next_pointer_;
    int item_;           /* item whose bytes come next */
    size_t item_pos_;
    bool done_;
} cbf_spead_encoder;

int cbf_spead_encoder_init(cbf_spead_encoder *e, uint64_t heap_cnt,
                           const cbf_spead_item_out *items, int n_items,
                           size_t max_packet, bool repeat_pointers, cbf_error *err);
/* Writes the next packet into buf (at least max_packet bytes) and returns
 * its length, or 0 when the heap has been sent completely. */
size_t cbf_spead_encoder_next(cbf_spead_encoder *e, uint8_t *buf);
/* Packets the heap will take. */
size_t cbf_spead_encoder_count(const cbf_spead_encoder *e);

/* The single stream-stop packet; returns its length (at most 48 bytes). */
size_t cbf_spead_encode_stop(uint64_t heap_cnt, uint8_t *buf);

/* ---- Descriptors ------------------------------------------------------ */

#define CBF_SPEAD_DESC_MAX_DIMS 8
#define CBF_SPEAD_DESC_MAX_FIELDS 8

typedef struct cbf_spead_descriptor {
    uint16_t id;
    char name[64];
    char description[256];
    int ndim;
    uint64_t shape[CBF_SPEAD_DESC_MAX_DIMS];
    /* Either a format (e.g. one field 'u' of 48 bits for an immediate
     * timestamp) or a numpy dtype ("<i4", ">i2"); dtype wins when set. */
    int n_fields;
    char field_code[CBF_SPEAD_DESC_MAX_FIELDS];
    uint16_t field_bits[CBF_SPEAD_DESC_MAX_FIELDS];
    char dtype[16];
    bool fortran_order;
} cbf_spead_descriptor;

/* Fills d for an immediate item read as one unsigned 48-bit field (how
 * MeerKAT describes timestamps and indices). */
void cbf_spead_descriptor_u48(cbf_spead_descriptor *d, uint16_t id, const char *name, const char *doc);
/* Fills d for an array item with a numpy dtype ("|i1", "<i4") and shape. */
void cbf_spead_descriptor_array(cbf_spead_descriptor *d, uint16_t id, const char *name, const char *doc,
                                const char *dtype, int ndim, const size_t *shape);

/* Raw bytes of a descriptor (the embedded SPEAD packet spead2 writes):
 * returns the length, or 0 when cap is too small. */
size_t cbf_spead_descriptor_encode(const cbf_spead_descriptor *d, uint8_t *buf, size_t cap);
/* Parses an item 0x0005 value. Returns 0 or CBF_EINVAL with the field named. */
int cbf_spead_descriptor_decode(const uint8_t *buf, size_t len, cbf_spead_descriptor *d,
                                cbf_error *err);

#ifdef __cplusplus
}
#endif
#endif
