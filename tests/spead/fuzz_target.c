#include <stdlib.h>
#include "eth.h"
#include "fuzz_target.h"

static volatile uint8_t sink;

static void touch_heap(const cbf_spead_heap *h, void *user)
{
    (void)user;
    uint8_t x = 0;
    for (uint64_t i = 0; i < h->size; i++)   /* the sanitizer sees any read past the payload */
        x ^= h->payload[i];
    for (int i = 0; i < h->n_items; i++) {
        const uint8_t *d;
        size_t n;
        if (cbf_spead_heap_item_bytes(h, &h->items[i], &d, &n) == 0 && n)
            x ^= d[n - 1];
    }
    sink = x;
}

int spead_fuzz_assembler(cbf_spead_assembler **out)
{
    cbf_spead_assembler_config cfg = {.max_heap_size = 1 << 16, .window = 4,
                                      .deliver_incomplete = true, .on_heap = touch_heap};
    return cbf_spead_assembler_create(&cfg, out, NULL);
}

int spead_fuzz_one(cbf_spead_assembler *a, const uint8_t *data, size_t len, const char **why)
{
    static cbf_spead_packet p;
    cbf_spead_reason r = cbf_spead_decode(data, len, &p);
    if ((int)r < 0 || r >= CBF_SPEAD_N_REASONS) {
        *why = "reason out of range";
        return -1;
    }
    if (r == CBF_SPEAD_OK) {
        size_t hdr = (size_t)(p.payload - data);
        if (hdr + p.payload_len != len || p.heap_offset + p.payload_len > p.heap_size) {
            *why = "accepted packet with inconsistent lengths";
            return -1;
        }
        for (int i = 0; i < p.n_items; i++)
            if (!p.items[i].immediate && p.items[i].value > p.heap_size) {
                *why = "accepted item address beyond the heap";
                return -1;
            }
    }
    cbf_spead_descriptor d;
    if (cbf_spead_descriptor_decode(data, len, &d, NULL) == 0 &&
        (d.ndim < 0 || d.ndim > CBF_SPEAD_DESC_MAX_DIMS || d.n_fields < 0 ||
         d.n_fields > CBF_SPEAD_DESC_MAX_FIELDS)) {
        *why = "descriptor with impossible dimensions";
        return -1;
    }
    /* The same bytes as a whole frame (ibverbs and pcap see frames): an
     * accepted datagram lies inside the frame. */
    for (int link = CBF_ETH_LINK_ETHERNET; link <= CBF_ETH_LINK_RAW_IP; link++) {
        cbf_eth_udp_info u;
        cbf_eth_reason er = cbf_eth_udp_parse((cbf_eth_link)link, data, len, &u);
        if ((int)er < 0 || er >= CBF_ETH_N_REASONS) {
            *why = "frame reason out of range";
            return -1;
        }
        if (er == CBF_ETH_OK && (u.payload < data || u.payload + u.len > data + len ||
                                 u.ip_header < data || u.ip_header + u.ip_header_len > u.payload)) {
            *why = "accepted frame with a datagram outside it";
            return -1;
        }
        if (er == CBF_ETH_OK)
            sink ^= (uint8_t)cbf_eth_checksum(u.ip_header, u.ip_header_len);
    }
    uint64_t before = cbf_spead_assembler_counters(a)->packets;
    cbf_spead_assembler_add(a, data, len);
    if (cbf_spead_assembler_counters(a)->packets != before + 1) {
        *why = "packet not counted";
        return -1;
    }
    return 0;
}
