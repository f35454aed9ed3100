/* Heap -> packets. The heap payload is the addressed items' bytes laid end
 * to end; every packet carries the four standard items, then item pointers
 * (all of them, or those not yet sent), then as much payload as fits. */
#include <string.h>
#include "spead.h"
#include "wire.h"

#define N_STD 4

static uint64_t pointer(uint16_t id, bool imm, uint64_t val)
{
    return ((uint64_t)imm << 63) | ((uint64_t)(id & 0x7fff) << 48) | (val & CBF_SPEAD_ADDR_MASK);
}

static void header(uint8_t *buf, size_t n_pointers)
{
    buf[0] = CBF_SPEAD_MAGIC;
    buf[1] = CBF_SPEAD_VERSION;
    buf[2] = CBF_SPEAD_ITEM_ID_BYTES;
    buf[3] = CBF_SPEAD_ADDR_BYTES;
    buf[4] = buf[5] = 0;
    buf[6] = (uint8_t)(n_pointers >> 8);
    buf[7] = (uint8_t)n_pointers;
}

int cbf_spead_encoder_init(cbf_spead_encoder *e, uint64_t heap_cnt,
                           const cbf_spead_item_out *items, int n_items,
                           size_t max_packet, bool repeat_pointers, cbf_error *err)
{
    const size_t min_packet = CBF_SPEAD_HEADER_BYTES + (N_STD + 1) * CBF_SPEAD_POINTER_BYTES + 8;
    if (max_packet < min_packet || max_packet > 65507)
        return cbf_error_set(err, CBF_EINVAL, "spead: packet size %zu outside %zu..65507",
                             max_packet, min_packet);
    if (n_items < 0 || n_items > CBF_SPEAD_MAX_ITEMS - N_STD)
        return cbf_error_set(err, CBF_EINVAL, "spead: %d items in one heap (at most %d)",
                             n_items, CBF_SPEAD_MAX_ITEMS - N_STD);
    if (heap_cnt > CBF_SPEAD_ADDR_MASK)
        return cbf_error_set(err, CBF_EINVAL, "spead: heap counter %llu exceeds 48 bits",
                             (unsigned long long)heap_cnt);
    uint64_t size = 0;
    for (int i = 0; i < n_items; i++) {
        const cbf_spead_item_out *it = &items[i];
        if (it->id == 0 || it->id > 0x7fff || (it->id <= CBF_SPEAD_STREAM_CTRL &&
                                                it->id != CBF_SPEAD_DESCRIPTOR))
            return cbf_error_set(err, CBF_EINVAL, "spead: item id 0x%x is reserved or too large",
                                 it->id);
        if (it->immediate && it->value > CBF_SPEAD_ADDR_MASK)
            return cbf_error_set(err, CBF_EINVAL, "spead: item 0x%x immediate value exceeds 48 bits",
                                 it->id);
        if (!it->immediate) {
            if (it->len && !it->data)
                return cbf_error_set(err, CBF_EINVAL, "spead: item 0x%x has no data", it->id);
            size += it->len;
        }
    }
    if (size > CBF_SPEAD_ADDR_MASK)
        return cbf_error_set(err, CBF_EINVAL, "spead: heap of %llu bytes exceeds 48 bits",
                             (unsigned long long)size);
    if (repeat_pointers &&
        CBF_SPEAD_HEADER_BYTES + (size_t)(N_STD + n_items) * CBF_SPEAD_POINTER_BYTES + 1 > max_packet)
        return cbf_error_set(err, CBF_EINVAL,
                             "spead: %d repeated item pointers leave no payload in %zu-byte packets",
                             n_items, max_packet);
    *e = (cbf_spead_encoder){
        .heap_cnt = heap_cnt, .items = items, .n_items = n_items, .max_packet = max_packet,
        .repeat_pointers = repeat_pointers, .heap_size_ = size,
    };
    return 0;
}

/* Item pointers (beyond the standard four) that the next packet carries. */
static int pointers_now(const cbf_spead_encoder *e)
{
    if (e->repeat_pointers)
        return e->n_items;
    int left = e->n_items - e->next_pointer_;
    int room = (int)((e->max_packet - CBF_SPEAD_HEADER_BYTES) / CBF_SPEAD_POINTER_BYTES) - N_STD;
    return left < room ? left : room;
}

size_t cbf_spead_encoder_next(cbf_spead_encoder *e, uint8_t *buf)
{
    if (e->done_)
        return 0;
    int k = pointers_now(e);
    size_t hdr = CBF_SPEAD_HEADER_BYTES + (size_t)(N_STD + k) * CBF_SPEAD_POINTER_BYTES;
    uint64_t left = e->heap_size_ - e->offset_;
    uint64_t take = e->max_packet - hdr;
    if (take > left)
        take = left;

    header(buf, (size_t)(N_STD + k));
    uint8_t *p = buf + CBF_SPEAD_HEADER_BYTES;
    spead_store_be(p, pointer(CBF_SPEAD_HEAP_CNT, true, e->heap_cnt), 8);
    spead_store_be(p + 8, pointer(CBF_SPEAD_HEAP_SIZE, true, e->heap_size_), 8);
    spead_store_be(p + 16, pointer(CBF_SPEAD_HEAP_OFFSET, true, e->offset_), 8);
    spead_store_be(p + 24, pointer(CBF_SPEAD_PAYLOAD_LEN, true, take), 8);
    p += N_STD * CBF_SPEAD_POINTER_BYTES;
    int first = e->repeat_pointers ? 0 : e->next_pointer_;
    /* Addresses: the bytes of all addressed items before this one. */
    uint64_t addr = 0;
    for (int i = 0; i < first; i++)
        if (!e->items[i].immediate)
            addr += e->items[i].len;
    for (int i = first; i < first + k; i++) {
        const cbf_spead_item_out *it = &e->items[i];
        spead_store_be(p, pointer(it->id, it->immediate, it->immediate ? it->value : addr), 8);
        if (!it->immediate)
            addr += it->len;
        p += CBF_SPEAD_POINTER_BYTES;
    }
    if (!e->repeat_pointers)
        e->next_pointer_ += k;

    /* Payload: continue through the addressed items where the last packet stopped. */
    uint64_t copied = 0;
    while (copied < take) {
        const cbf_spead_item_out *it = &e->items[e->item_];
        if (it->immediate || e->item_pos_ == it->len) {
            e->item_++;
            e->item_pos_ = 0;
            continue;
        }
        size_t n = it->len - e->item_pos_;
        if (n > take - copied)
            n = (size_t)(take - copied);
        memcpy(p + copied, (const uint8_t *)it->data + e->item_pos_, n);
        e->item_pos_ += n;
        copied += n;
    }
    e->offset_ += take;
    bool pointers_left = !e->repeat_pointers && e->next_pointer_ < e->n_items;
    e->done_ = e->offset_ == e->heap_size_ && !pointers_left;
    return hdr + take;
}

size_t cbf_spead_encoder_count(const cbf_spead_encoder *e)
{
    size_t count = 0;
    int next_pointer = 0;
    uint64_t offset = 0;
    int room = (int)((e->max_packet - CBF_SPEAD_HEADER_BYTES) / CBF_SPEAD_POINTER_BYTES) - N_STD;
    do {
        int k = e->repeat_pointers ? e->n_items
                                   : (e->n_items - next_pointer < room ? e->n_items - next_pointer : room);
        uint64_t take = e->max_packet - CBF_SPEAD_HEADER_BYTES -
                        (uint64_t)(N_STD + k) * CBF_SPEAD_POINTER_BYTES;
        if (take > e->heap_size_ - offset)
            take = e->heap_size_ - offset;
        offset += take;
        if (!e->repeat_pointers)
            next_pointer += k;
        count++;
    } while (offset < e->heap_size_ || (!e->repeat_pointers && next_pointer < e->n_items));
    return count;
}

size_t cbf_spead_encode_stop(uint64_t heap_cnt, uint8_t *buf)
{
    header(buf, N_STD + 1);
    uint8_t *p = buf + CBF_SPEAD_HEADER_BYTES;
    spead_store_be(p, pointer(CBF_SPEAD_HEAP_CNT, true, heap_cnt), 8);
    spead_store_be(p + 8, pointer(CBF_SPEAD_HEAP_SIZE, true, 0), 8);
    spead_store_be(p + 16, pointer(CBF_SPEAD_HEAP_OFFSET, true, 0), 8);
    spead_store_be(p + 24, pointer(CBF_SPEAD_PAYLOAD_LEN, true, 0), 8);
    spead_store_be(p + 32, pointer(CBF_SPEAD_STREAM_CTRL, true, CBF_SPEAD_CTRL_STOP), 8);
    return CBF_SPEAD_HEADER_BYTES + (N_STD + 1) * CBF_SPEAD_POINTER_BYTES;
}
