/* UDP over pcap. Frames are parsed and built by net/eth with every length
 * checked: a capture is input like any other. */
#include <pcap/pcap.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include "eth.h"
#include "pcap_udp.h"

#define SNAPLEN 65535

struct cbf_pcap_reader {
    pcap_t *p;
    int linktype;
    char path[256];
};

struct cbf_pcap_writer {
    pcap_t *p;
    pcap_dumper_t *d;
    uint8_t frame[CBF_ETH_UDP_HEADERS + CBF_ETH_MAX_UDP_PAYLOAD];
    uint16_t ip_id;
};

int cbf_pcap_reader_open(const char *path, cbf_pcap_reader **out, cbf_error *err)
{
    char ebuf[PCAP_ERRBUF_SIZE];
    pcap_t *p = pcap_open_offline(path, ebuf);
    if (!p)
        return cbf_error_set(err, CBF_EIO, "pcap %s: %s", path, ebuf);
    int lt = pcap_datalink(p);
    if (lt != DLT_EN10MB && lt != DLT_LINUX_SLL && lt != DLT_RAW) {
        pcap_close(p);
        return cbf_error_set(err, CBF_EINVAL, "pcap %s: link type %d is not Ethernet, Linux cooked or raw IP",
                             path, lt);
    }
    cbf_pcap_reader *r = calloc(1, sizeof(*r));
    if (!r) {
        pcap_close(p);
        return cbf_error_set(err, CBF_ENOMEM, "pcap %s: out of memory", path);
    }
    r->p = p;
    r->linktype = lt;
    snprintf(r->path, sizeof r->path, "%s", path);
    *out = r;
    return 0;
}

int cbf_pcap_reader_next(cbf_pcap_reader *r, cbf_pcap_datagram *d, uint64_t *skipped, cbf_error *err)
{
    for (;;) {
        struct pcap_pkthdr *h;
        const uint8_t *f;
        int rc = pcap_next_ex(r->p, &h, &f);
        if (rc == PCAP_ERROR_BREAK)
            return 0;
        if (rc != 1)
            return cbf_error_set(err, CBF_EIO, "pcap %s: %s", r->path, pcap_geterr(r->p));
        cbf_eth_link link = r->linktype == DLT_EN10MB   ? CBF_ETH_LINK_ETHERNET
                            : r->linktype == DLT_LINUX_SLL ? CBF_ETH_LINK_LINUX_SLL
                                                           : CBF_ETH_LINK_RAW_IP;
        cbf_eth_udp_info u;
        if (cbf_eth_udp_parse(link, f, h->caplen, &u) == CBF_ETH_OK) {
            *d = (cbf_pcap_datagram){.src_ip = u.src_ip, .dst_ip = u.dst_ip, .src_port = u.src_port,
                                     .dst_port = u.dst_port, .payload = u.payload, .len = u.len};
            return 1;
        }
        if (skipped)
            (*skipped)++;
    }
}

void cbf_pcap_reader_close(cbf_pcap_reader *r)
{
    if (!r)
        return;
    pcap_close(r->p);
    free(r);
}

int cbf_pcap_writer_open(const char *path, cbf_pcap_writer **out, cbf_error *err)
{
    cbf_pcap_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return cbf_error_set(err, CBF_ENOMEM, "pcap %s: out of memory", path);
    w->p = pcap_open_dead(DLT_EN10MB, SNAPLEN);
    w->d = w->p ? pcap_dump_open(w->p, path) : NULL;
    if (!w->d) {
        int rc = cbf_error_set(err, CBF_EIO, "pcap %s: %s", path,
                               w->p ? pcap_geterr(w->p) : "pcap_open_dead failed");
        if (w->p)
            pcap_close(w->p);
        free(w);
        return rc;
    }
    *out = w;
    return 0;
}

int cbf_pcap_writer_write(cbf_pcap_writer *w, uint32_t dst_ip, uint16_t src_port, uint16_t dst_port,
                          const void *payload, size_t len, cbf_error *err)
{
    if (len > CBF_ETH_MAX_UDP_PAYLOAD)
        return cbf_error_set(err, CBF_EINVAL, "pcap: UDP payload of %zu bytes exceeds %d", len,
                             CBF_ETH_MAX_UDP_PAYLOAD);
    /* From 00:00:00:00:00:01, 127.0.0.1; a multicast destination gets its
     * group's MAC address, a unicast one 00:00:00:00:00:00. */
    cbf_eth_udp_addr a = {.src_mac = {0, 0, 0, 0, 0, 1}, .src_ip = 0x7f000001, .dst_ip = dst_ip,
                          .src_port = src_port, .dst_port = dst_port, .ttl = 1};
    if ((dst_ip >> 28) == 0xe)
        cbf_eth_multicast_mac(dst_ip, a.dst_mac);
    memcpy(w->frame + CBF_ETH_UDP_HEADERS, payload, len);
    size_t n = cbf_eth_udp_write(w->frame, &a, len, w->ip_id++);
    struct pcap_pkthdr h = {.caplen = (uint32_t)n, .len = (uint32_t)n};
    gettimeofday(&h.ts, NULL);
    pcap_dump((u_char *)w->d, &h, w->frame);
    return 0;
}

void cbf_pcap_writer_close(cbf_pcap_writer *w)
{
    if (!w)
        return;
    pcap_dump_close(w->d);
    pcap_close(w->p);
    free(w);
}
