/* pcap_udp.h: UDP datagrams from and to pcap capture files (libpcap), so a
 * capture can be replayed through a receiver and a sender's output kept. */
#ifndef CBF_PCAP_UDP_H
#define CBF_PCAP_UDP_H

#include <stddef.h>
#include <stdint.h>
#include "cbf/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cbf_pcap_reader cbf_pcap_reader;

/* Opens a capture (Ethernet, Linux cooked or raw IP link types). */
int cbf_pcap_reader_open(const char *path, cbf_pcap_reader **out, cbf_error *err);
/* One UDP datagram of a capture; payload valid until the next call. */
typedef struct cbf_pcap_datagram {
    uint32_t src_ip, dst_ip;   /* host order */
    uint16_t src_port, dst_port;
    const uint8_t *payload;
    size_t len;
} cbf_pcap_datagram;

/* Next IPv4 UDP datagram, whatever its destination (a replay filters as
 * its socket would, cbf_udp_endpoint_takes): returns 1 and fills *d, 0 at
 * the end of the file, or a negative CBF_E* code. Frames that are not
 * complete IPv4 UDP datagrams (fragments, other protocols, truncated
 * captures) are skipped and counted in *skipped when it is not NULL. */
int cbf_pcap_reader_next(cbf_pcap_reader *r, cbf_pcap_datagram *d, uint64_t *skipped, cbf_error *err);
void cbf_pcap_reader_close(cbf_pcap_reader *r);

typedef struct cbf_pcap_writer cbf_pcap_writer;

int cbf_pcap_writer_open(const char *path, cbf_pcap_writer **out, cbf_error *err);
/* Appends one Ethernet/IPv4/UDP frame from 127.0.0.1:src_port to
 * dst_ip:dst_port (dst_ip in host order) carrying payload. */
int cbf_pcap_writer_write(cbf_pcap_writer *w, uint32_t dst_ip, uint16_t src_port, uint16_t dst_port,
                          const void *payload, size_t len, cbf_error *err);
void cbf_pcap_writer_close(cbf_pcap_writer *w);

#ifdef __cplusplus
}
#endif
#endif
