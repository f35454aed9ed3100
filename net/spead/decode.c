/* Packet parsing: every field is checked before anything is read past it. */
#include "spead.h"
#include "wire.h"

static const char *const reason_names[CBF_SPEAD_N_REASONS] = {
    [CBF_SPEAD_OK] = "ok",
    [CBF_SPEAD_ERR_SHORT] = "short",
    [CBF_SPEAD_ERR_MAGIC] = "magic",
    [CBF_SPEAD_ERR_VERSION] = "version",
    [CBF_SPEAD_ERR_FLAVOUR] = "flavour",
    [CBF_SPEAD_ERR_ITEM_COUNT] = "item_count",
    [CBF_SPEAD_ERR_MISSING] = "missing_item",
    [CBF_SPEAD_ERR_NOT_IMMEDIATE] = "not_immediate",
    [CBF_SPEAD_ERR_DUPLICATE] = "duplicate_item",
    [CBF_SPEAD_ERR_PAYLOAD_LEN] = "payload_length",
    [CBF_SPEAD_ERR_OFFSET] = "heap_offset",
    [CBF_SPEAD_ERR_ADDRESS] = "item_address",
    [CBF_SPEAD_ERR_HEAP_SIZE] = "heap_size",
    [CBF_SPEAD_ERR_SIZE_CHANGED] = "heap_size_changed",
};

const char *cbf_spead_reason_name(cbf_spead_reason r)
{
    if ((int)r < 0 || r >= CBF_SPEAD_N_REASONS)
        return "unknown";
    return reason_names[r];
}

uint64_t cbf_spead_counters_malformed(const cbf_spead_counters *c)
{
    uint64_t n = 0;
    for (int r = 1; r < CBF_SPEAD_N_REASONS; r++)
        n += c->malformed[r];
    return n;
}

cbf_spead_reason cbf_spead_decode(const uint8_t *buf, size_t len, cbf_spead_packet *pkt)
{
    if (len < CBF_SPEAD_HEADER_BYTES)
        return CBF_SPEAD_ERR_SHORT;
    if (buf[0] != CBF_SPEAD_MAGIC)
        return CBF_SPEAD_ERR_MAGIC;
    if (buf[1] != CBF_SPEAD_VERSION)
        return CBF_SPEAD_ERR_VERSION;
    if (buf[2] != CBF_SPEAD_ITEM_ID_BYTES || buf[3] != CBF_SPEAD_ADDR_BYTES)
        return CBF_SPEAD_ERR_FLAVOUR;
    size_t n = ((size_t)buf[6] << 8) | buf[7];
    if (n > CBF_SPEAD_MAX_ITEMS || CBF_SPEAD_HEADER_BYTES + n * CBF_SPEAD_POINTER_BYTES > len)
        return CBF_SPEAD_ERR_ITEM_COUNT;

    /* Standard items 1..6: bit i set once item i has been seen. */
    unsigned seen = 0;
    uint64_t std_val[7] = {0};
    pkt->n_items = 0;
    pkt->stream_ctrl = -1;
    for (size_t i = 0; i < n; i++) {
        uint64_t p = spead_load_be(buf + CBF_SPEAD_HEADER_BYTES + i * CBF_SPEAD_POINTER_BYTES, 8);
        bool imm = (p >> 63) != 0;
        uint16_t id = (uint16_t)((p >> 48) & 0x7fff);
        uint64_t val = p & CBF_SPEAD_ADDR_MASK;
        if (id == 0)
            continue; /* the null item: padding, as spead2 writes into stop heaps */
        if (id <= CBF_SPEAD_STREAM_CTRL && id != CBF_SPEAD_DESCRIPTOR) {
            if (!imm)
                return CBF_SPEAD_ERR_NOT_IMMEDIATE;
            if (seen & (1u << id))
                return CBF_SPEAD_ERR_DUPLICATE;
            seen |= 1u << id;
            std_val[id] = val;
            continue;
        }
        pkt->items[pkt->n_items++] = (cbf_spead_item){.id = id, .immediate = imm, .value = val};
    }
    const unsigned need = (1u << CBF_SPEAD_HEAP_CNT) | (1u << CBF_SPEAD_HEAP_SIZE) |
                          (1u << CBF_SPEAD_HEAP_OFFSET) | (1u << CBF_SPEAD_PAYLOAD_LEN);
    if ((seen & need) != need)
        return CBF_SPEAD_ERR_MISSING;
    pkt->heap_cnt = std_val[CBF_SPEAD_HEAP_CNT];
    pkt->heap_size = std_val[CBF_SPEAD_HEAP_SIZE];
    pkt->heap_offset = std_val[CBF_SPEAD_HEAP_OFFSET];
    pkt->payload_len = std_val[CBF_SPEAD_PAYLOAD_LEN];
    if (seen & (1u << CBF_SPEAD_STREAM_CTRL))
        pkt->stream_ctrl = (int)(std_val[CBF_SPEAD_STREAM_CTRL] & 0xffff);

    size_t header = CBF_SPEAD_HEADER_BYTES + n * CBF_SPEAD_POINTER_BYTES;
    if (pkt->payload_len != len - header)
        return CBF_SPEAD_ERR_PAYLOAD_LEN;
    if (pkt->heap_offset > pkt->heap_size || pkt->payload_len > pkt->heap_size - pkt->heap_offset)
        return CBF_SPEAD_ERR_OFFSET;
    for (int i = 0; i < pkt->n_items; i++)
        if (!pkt->items[i].immediate && pkt->items[i].value > pkt->heap_size)
            return CBF_SPEAD_ERR_ADDRESS;
    pkt->payload = buf + header;
    return CBF_SPEAD_OK;
}
