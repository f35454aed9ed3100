/* UDP over pcap. Headers are parsed by hand from the captured bytes with
 * every length checked: a capture is input like any other. */
#include <pcap/pcap.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
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
    uint8_t frame[14 + 20 + 8 + 65507];
    uint16_t ip_id;
};

static uint16_t be16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

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

/* The UDP payload of one frame, or NULL when the frame is not a whole,
 * unfragmented IPv4 UDP datagram. */
static const uint8_t *udp_payload(int linktype, const uint8_t *f, size_t caplen, uint16_t *dport,
                                  size_t *len)
{
    size_t l2 = linktype == DLT_EN10MB ? 14 : linktype == DLT_LINUX_SLL ? 16 : 0;
    if (caplen < l2 + 20)
        return NULL;
    if (l2) {
        size_t et_at = l2 - 2;
        uint16_t et = be16(f + et_at);
        if (linktype == DLT_EN10MB && et == 0x8100) {   /* one VLAN tag */
            l2 += 4;
            if (caplen < l2 + 20)
                return NULL;
            et = be16(f + l2 - 2);
        }
        if (et != 0x0800)
            return NULL;
    }
    const uint8_t *ip = f + l2;
    size_t ihl = (size_t)(ip[0] & 0x0f) * 4;
    if ((ip[0] >> 4) != 4 || ihl < 20 || ip[9] != 17)
        return NULL;
    if ((be16(ip + 6) & 0x3fff) != 0)   /* more-fragments flag or an offset */
        return NULL;
    size_t total = be16(ip + 2);
    if (total < ihl + 8 || l2 + total > caplen)
        return NULL;
    const uint8_t *udp = ip + ihl;
    size_t ulen = be16(udp + 4);
    if (ulen < 8 || ulen > total - ihl)
        return NULL;
    *dport = be16(udp + 2);
    *len = ulen - 8;
    return udp + 8;
}

int cbf_pcap_reader_next(cbf_pcap_reader *r, uint16_t dst_port, const uint8_t **payload,
                         size_t *len, uint64_t *skipped, cbf_error *err)
{
    for (;;) {
        struct pcap_pkthdr *h;
        const uint8_t *f;
        int rc = pcap_next_ex(r->p, &h, &f);
        if (rc == PCAP_ERROR_BREAK)
            return 0;
        if (rc != 1)
            return cbf_error_set(err, CBF_EIO, "pcap %s: %s", r->path, pcap_geterr(r->p));
        uint16_t dport;
        const uint8_t *pl = udp_payload(r->linktype, f, h->caplen, &dport, len);
        if (pl && (!dst_port || dport == dst_port)) {
            *payload = pl;
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

static uint16_t ip_checksum(const uint8_t *h)
{
    uint32_t s = 0;
    for (int i = 0; i < 20; i += 2)
        s += be16(h + i);
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return (uint16_t)~s;
}

int cbf_pcap_writer_write(cbf_pcap_writer *w, uint32_t dst_ip, uint16_t src_port, uint16_t dst_port,
                          const void *payload, size_t len, cbf_error *err)
{
    if (len > 65507)
        return cbf_error_set(err, CBF_EINVAL, "pcap: UDP payload of %zu bytes exceeds 65507", len);
    uint8_t *f = w->frame;
    memset(f, 0, 14 + 20 + 8);
    /* Multicast destinations get the matching multicast MAC (01:00:5e + 23 bits). */
    if ((dst_ip >> 28) == 0xe) {
        f[0] = 0x01; f[1] = 0x00; f[2] = 0x5e;
        f[3] = (uint8_t)((dst_ip >> 16) & 0x7f); f[4] = (uint8_t)(dst_ip >> 8); f[5] = (uint8_t)dst_ip;
    }
    f[11] = 1;                    /* source MAC 00:00:00:00:00:01 */
    put16(f + 12, 0x0800);
    uint8_t *ip = f + 14;
    ip[0] = 0x45;
    put16(ip + 2, (uint16_t)(20 + 8 + len));
    put16(ip + 4, w->ip_id++);
    put16(ip + 6, 0x4000);        /* don't fragment */
    ip[8] = 1;                    /* TTL */
    ip[9] = 17;
    ip[12] = 127; ip[15] = 1;     /* source 127.0.0.1 */
    ip[16] = (uint8_t)(dst_ip >> 24); ip[17] = (uint8_t)(dst_ip >> 16);
    ip[18] = (uint8_t)(dst_ip >> 8); ip[19] = (uint8_t)dst_ip;
    put16(ip + 10, ip_checksum(ip));
    uint8_t *udp = ip + 20;
    put16(udp, src_port);
    put16(udp + 2, dst_port);
    put16(udp + 4, (uint16_t)(8 + len));   /* checksum 0: none, as IPv4 allows */
    memcpy(udp + 8, payload, len);
    struct pcap_pkthdr h = {.caplen = (uint32_t)(14 + 20 + 8 + len), .len = (uint32_t)(14 + 20 + 8 + len)};
    gettimeofday(&h.ts, NULL);
    pcap_dump((u_char *)w->d, &h, f);
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
