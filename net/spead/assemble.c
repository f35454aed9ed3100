/* Heap assembly with a bounded reordering window.
 *
 * A heap occupies one slot from its first packet until it is complete (all
 * heap_size bytes held) or evicted (a new heap needs its slot and it is the
 * oldest). Which bytes are held is kept as sorted, merged intervals, so a
 * duplicated packet is recognised and never counted twice. Heap counters
 * delivered recently are remembered so that stragglers count as late
 * instead of opening a heap that can never complete. All memory is
 * allocated at create time. */
#include <stdlib.h>
#include <string.h>
#include "spead.h"

#define MAX_INTERVALS 64

typedef struct slot {
    bool used;
    uint64_t cnt, size, received, age;
    uint64_t packets;   /* packets whose bytes it holds */
    int n_intervals;
    uint64_t start[MAX_INTERVALS], end[MAX_INTERVALS];
    int n_items;
    cbf_spead_item *items;
    uint8_t *payload;
} slot;

struct cbf_spead_assembler {
    cbf_spead_assembler_config cfg;
    cbf_spead_counters counters;
    slot *slots;
    uint64_t next_age;
    uint64_t *recent;   /* ring of delivered heap counters */
    size_t n_recent, recent_pos;
    bool any_delivered;
    uint64_t max_delivered;   /* no heap counter above it is in recent */
    cbf_spead_packet pkt;
};

int cbf_spead_assembler_create(const cbf_spead_assembler_config *cfg,
                               cbf_spead_assembler **out, cbf_error *err)
{
    if (!cfg->on_heap || cfg->window < 1 || cfg->window > 4096 || cfg->max_heap_size == 0 ||
        cfg->max_heap_size > CBF_SPEAD_ADDR_MASK)
        return cbf_error_set(err, CBF_EINVAL,
                             "spead assembler: need a callback, window in 1..4096 and "
                             "max_heap_size in 1..2^48-1 (got window %d, max_heap_size %zu)",
                             cfg->window, cfg->max_heap_size);
    cbf_spead_assembler *a = calloc(1, sizeof(*a));
    if (!a)
        return cbf_error_set(err, CBF_ENOMEM, "spead assembler: out of memory");
    a->cfg = *cfg;
    if (a->cfg.max_items <= 0)
        a->cfg.max_items = 64;
    a->n_recent = 4 * (size_t)cfg->window;
    a->slots = calloc((size_t)cfg->window, sizeof(slot));
    a->recent = malloc(a->n_recent * sizeof(uint64_t));
    bool ok = a->slots && a->recent;
    for (int i = 0; ok && i < cfg->window; i++) {
        a->slots[i].items = malloc((size_t)a->cfg.max_items * sizeof(cbf_spead_item));
        a->slots[i].payload = malloc(cfg->max_heap_size);
        ok = a->slots[i].items && a->slots[i].payload;
    }
    if (!ok) {
        cbf_spead_assembler_destroy(a);
        return cbf_error_set(err, CBF_ENOMEM, "spead assembler: cannot allocate %d heaps of %zu bytes",
                             cfg->window, cfg->max_heap_size);
    }
    /* No heap counter is "recent" yet: fill the ring with one that a
     * sender's counter never reaches. */
    for (size_t i = 0; i < a->n_recent; i++)
        a->recent[i] = UINT64_MAX;
    *out = a;
    return 0;
}

void cbf_spead_assembler_destroy(cbf_spead_assembler *a)
{
    if (!a)
        return;
    if (a->slots)
        for (int i = 0; i < a->cfg.window; i++) {
            free(a->slots[i].items);
            free(a->slots[i].payload);
        }
    free(a->slots);
    free(a->recent);
    free(a);
}

const cbf_spead_counters *cbf_spead_assembler_counters(const cbf_spead_assembler *a)
{
    return &a->counters;
}

static bool is_recent(const cbf_spead_assembler *a, uint64_t cnt)
{
    /* A sender's counters mostly grow: a new heap is then above every one
     * delivered, and the ring need not be searched (it was 6% of a receive
     * thread at one packet per heap). */
    if (!a->any_delivered || cnt > a->max_delivered)
        return false;
    for (size_t i = 0; i < a->n_recent; i++)
        if (a->recent[i] == cnt)
            return true;
    return false;
}

static void deliver_from(cbf_spead_assembler *a, slot *s, const uint8_t *payload)
{
    bool complete = s->received == s->size;
    if (complete) {
        a->counters.heaps++;
    } else {
        a->counters.incomplete++;
        a->counters.incomplete_packets += s->packets;
    }
    if (complete || a->cfg.deliver_incomplete) {
        cbf_spead_heap h = {
            .cnt = s->cnt, .size = s->size, .received = s->received, .complete = complete,
            .n_items = s->n_items, .items = s->items, .payload = payload ? payload : s->payload,
            .in_packet = payload != NULL, .packets = s->packets,
        };
        a->cfg.on_heap(&h, a->cfg.user);
    }
    a->recent[a->recent_pos] = s->cnt;
    if (!a->any_delivered || s->cnt > a->max_delivered)
        a->max_delivered = s->cnt;
    a->any_delivered = true;
    a->recent_pos = (a->recent_pos + 1) % a->n_recent;
    s->used = false;
}

static void deliver(cbf_spead_assembler *a, slot *s) { deliver_from(a, s, NULL); }

void cbf_spead_assembler_flush(cbf_spead_assembler *a)
{
    /* Oldest first, so that a consumer sees heaps in arrival order. */
    for (;;) {
        slot *oldest = NULL;
        for (int i = 0; i < a->cfg.window; i++)
            if (a->slots[i].used && (!oldest || a->slots[i].age < oldest->age))
                oldest = &a->slots[i];
        if (!oldest)
            return;
        deliver(a, oldest);
    }
}

static slot *find_or_open(cbf_spead_assembler *a, const cbf_spead_packet *p)
{
    slot *free_slot = NULL, *oldest = NULL;
    for (int i = 0; i < a->cfg.window; i++) {
        slot *s = &a->slots[i];
        if (!s->used) {
            free_slot = free_slot ? free_slot : s;
            continue;
        }
        if (s->cnt == p->heap_cnt)
            return s;
        if (!oldest || s->age < oldest->age)
            oldest = s;
    }
    if (is_recent(a, p->heap_cnt)) {
        a->counters.late++;
        return NULL;
    }
    if (!free_slot) {
        deliver(a, oldest);
        free_slot = oldest;
    }
    slot *s = free_slot;
    s->used = true;
    s->cnt = p->heap_cnt;
    s->size = p->heap_size;
    s->received = 0;
    s->packets = 0;
    s->age = a->next_age++;
    s->n_intervals = 0;
    s->n_items = 0;
    return s;
}

/* Records [lo, hi) as held. Returns 0, 1 when it overlaps bytes already
 * held, 2 when there is no room for another gap. */
static int add_interval(slot *s, uint64_t lo, uint64_t hi)
{
    int i = 0;
    while (i < s->n_intervals && s->end[i] <= lo)
        i++;
    /* Intervals before i end at or before lo; interval i (if any) ends after lo. */
    if (i < s->n_intervals && s->start[i] < hi)
        return 1;
    bool join_prev = i > 0 && s->end[i - 1] == lo;
    bool join_next = i < s->n_intervals && s->start[i] == hi;
    if (join_prev && join_next) {
        s->end[i - 1] = s->end[i];
        memmove(&s->start[i], &s->start[i + 1], (size_t)(s->n_intervals - i - 1) * sizeof(uint64_t));
        memmove(&s->end[i], &s->end[i + 1], (size_t)(s->n_intervals - i - 1) * sizeof(uint64_t));
        s->n_intervals--;
    } else if (join_prev) {
        s->end[i - 1] = hi;
    } else if (join_next) {
        s->start[i] = lo;
    } else {
        if (s->n_intervals == MAX_INTERVALS)
            return 2;
        memmove(&s->start[i + 1], &s->start[i], (size_t)(s->n_intervals - i) * sizeof(uint64_t));
        memmove(&s->end[i + 1], &s->end[i], (size_t)(s->n_intervals - i) * sizeof(uint64_t));
        s->start[i] = lo;
        s->end[i] = hi;
        s->n_intervals++;
    }
    return 0;
}

static void add_items(cbf_spead_assembler *a, slot *s, const cbf_spead_packet *p)
{
    for (int i = 0; i < p->n_items; i++) {
        const cbf_spead_item *it = &p->items[i];
        bool known = false;
        for (int j = 0; j < s->n_items && !known; j++)
            known = s->items[j].id == it->id && s->items[j].value == it->value &&
                    s->items[j].immediate == it->immediate;
        if (!known && s->n_items < a->cfg.max_items)
            s->items[s->n_items++] = *it;
    }
}

int cbf_spead_assembler_add(cbf_spead_assembler *a, const uint8_t *buf, size_t len)
{
    cbf_spead_packet *p = &a->pkt;
    a->counters.packets++;
    a->counters.bytes += len;
    cbf_spead_reason r = cbf_spead_decode(buf, len, p);
    if (r == CBF_SPEAD_OK && p->heap_size > a->cfg.max_heap_size)
        r = CBF_SPEAD_ERR_HEAP_SIZE;
    if (r != CBF_SPEAD_OK) {
        a->counters.malformed[r]++;
        return 0;
    }
    if (p->stream_ctrl == CBF_SPEAD_CTRL_STOP) {
        /* Not flushed here: with several senders into one socket, one
         * sender's stop must not cut the others' heaps short. */
        a->counters.stops++;
        return 1;
    }
    slot *s = find_or_open(a, p);
    if (!s)
        return 0;
    if (s->received == 0 && p->heap_offset == 0 && p->payload_len == s->size) {
        /* A whole heap in one packet (a digitiser heap): handed on from the
         * packet itself, so its bytes are copied once, by the consumer. */
        add_items(a, s, p);
        s->received = s->size;
        s->packets++;
        deliver_from(a, s, p->payload);
        return 0;
    }
    if (s->size != p->heap_size) {
        a->counters.malformed[CBF_SPEAD_ERR_SIZE_CHANGED]++;
        return 0;
    }
    if (p->payload_len > 0) {
        int rc = add_interval(s, p->heap_offset, p->heap_offset + p->payload_len);
        if (rc) {
            if (rc == 1)
                a->counters.duplicate++;
            else
                a->counters.fragmented++;
            return 0;
        }
        memcpy(s->payload + p->heap_offset, p->payload, p->payload_len);
        s->received += p->payload_len;
    }
    s->packets++;
    add_items(a, s, p);
    if (s->received == s->size)
        deliver(a, s);
    return 0;
}

const cbf_spead_item *cbf_spead_heap_find(const cbf_spead_heap *h, uint16_t id)
{
    for (int i = 0; i < h->n_items; i++)
        if (h->items[i].id == id)
            return &h->items[i];
    return NULL;
}

int cbf_spead_heap_item_bytes(const cbf_spead_heap *h, const cbf_spead_item *it,
                              const uint8_t **data, size_t *len)
{
    if (it->immediate)
        return CBF_EINVAL;
    /* Items at one address (zero-length ones, as spead2 writes an empty
     * format) end where the next one listed at that address starts. */
    uint64_t end = h->size;
    ptrdiff_t self = it - h->items;
    for (int i = 0; i < h->n_items; i++) {
        const cbf_spead_item *o = &h->items[i];
        bool after = o->value > it->value || (o->value == it->value && i > self);
        if (!o->immediate && after && o->value < end)
            end = o->value;
    }
    *data = h->payload + it->value;   /* value <= size: checked at decode */
    *len = (size_t)(end - it->value);
    return 0;
}
