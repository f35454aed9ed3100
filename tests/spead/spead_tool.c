/* spead_tool: the codec behind a small CLI, so that tests can put it face
 * to face with spead2 (a real peer) over loopback UDP and pcap files.
 *
 *   spead_tool send-feng PORT REF [SEED]   F-engine heaps to 127.0.0.1:PORT
 *   spead_tool send-xeng PORT REF [SEED]   X-engine heaps to 127.0.0.1:PORT
 *   spead_tool recv PORT OUT               digitiser heaps from 127.0.0.1:PORT
 *                                          (0: any free port, printed first)
 *   spead_tool recv-pcap FILE OUT          the same from a capture
 *   spead_tool pcap-dig FILE REF [SEED]    digitiser heaps written to a capture
 *
 * REF gets what was sent and OUT what was received, as records of
 * little-endian u64 fields followed by the payload (see write_record). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include "spead.h"
#ifdef CBF_HAVE_PCAP
#include "pcap_udp.h"
#endif

enum { N_HEAPS = 8, FENG_CHANS = 16, FENG_SPECTRA = 32, XENG_CHANS = 8, XENG_BASELINES = 10,
       DIG_BYTES = 5120, MAX_PKT = CBF_SPEAD_DEFAULT_PACKET };

static uint64_t rng_state;

static uint64_t splitmix(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill(uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)splitmix();
}

/* Record: n_fields u64 values (little-endian), u64 byte count, bytes. */
static void write_record(FILE *f, const uint64_t *fields, int n_fields, const void *data, size_t len)
{
    uint64_t n = len;
    fwrite(fields, sizeof(uint64_t), (size_t)n_fields, f);
    fwrite(&n, sizeof n, 1, f);
    fwrite(data, 1, len, f);
}

typedef int (*packet_fn)(const uint8_t *pkt, size_t len, void *ctx);

static int emit_heap(uint64_t cnt, const cbf_spead_item_out *items, int n, bool repeat,
                     size_t max_packet, packet_fn fn, void *ctx)
{
    static uint8_t buf[65536];
    cbf_spead_encoder e;
    cbf_error err;
    if (cbf_spead_encoder_init(&e, cnt, items, n, max_packet, repeat, &err)) {
        fprintf(stderr, "spead_tool: %s\n", err.msg);
        return -1;
    }
    size_t len;
    while ((len = cbf_spead_encoder_next(&e, buf)) > 0)
        if (fn(buf, len, ctx))
            return -1;
    return 0;
}

static int send_udp(const uint8_t *pkt, size_t len, void *ctx)
{
    int fd = *(int *)ctx;
    if (send(fd, pkt, len, 0) != (ssize_t)len) {
        perror("spead_tool: send");
        return -1;
    }
    return 0;
}

static cbf_spead_item_out descriptor_item(cbf_spead_descriptor *d, uint8_t *buf, size_t cap)
{
    size_t n = cbf_spead_descriptor_encode(d, buf, cap);
    return (cbf_spead_item_out){.id = CBF_SPEAD_DESCRIPTOR, .data = buf, .len = n};
}

static int send_engine(int port, const char *ref_path, uint64_t seed, bool xeng)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
        perror("spead_tool: socket");
        return 1;
    }
    FILE *ref = fopen(ref_path, "wb");
    if (!ref) {
        perror(ref_path);
        return 1;
    }
    rng_state = seed;
    cbf_spead_descriptor d[4];
    static uint8_t dbuf[4][512];
    cbf_spead_item_out desc[4];
    cbf_spead_descriptor_u48(&d[0], 0x1600, "timestamp", "Digitiser sample count of the first sample");
    cbf_spead_descriptor_u48(&d[1], 0x4103, "frequency", "First channel in the heap");
    cbf_spead_descriptor_u48(&d[2], 0x4101, "feng_id", "Antenna (F-engine) index");
    size_t payload;
    if (xeng) {
        size_t shape[3] = {XENG_CHANS, XENG_BASELINES * 4, 2};
        cbf_spead_descriptor_array(&d[3], 0x1800, "xeng_raw", "Integrated visibilities", "<i4", 3, shape);
        payload = XENG_CHANS * XENG_BASELINES * 4 * 2 * 4;
    } else {
        size_t shape[4] = {FENG_CHANS, FENG_SPECTRA, 2, 2};
        cbf_spead_descriptor_array(&d[3], 0x4300, "feng_raw", "Channelised complex data", "|i1", 4, shape);
        payload = FENG_CHANS * FENG_SPECTRA * 4;
    }
    int nd = xeng ? 3 : 4;   /* the X-engine stream has no feng_id */
    int di[4] = {0, 1, 3, 2};
    for (int i = 0; i < nd; i++)
        desc[i] = descriptor_item(&d[di[i]], dbuf[i], sizeof dbuf[i]);
    int rc = emit_heap(1, desc, nd, false, MAX_PKT, send_udp, &fd);

    uint8_t *data = malloc(payload);
    for (int h = 0; h < N_HEAPS && !rc; h++) {
        fill(data, payload);
        uint64_t ts = 0x100000000ull + (uint64_t)h * 8192 * FENG_SPECTRA, freq = 64, feng = 3;
        cbf_spead_item_out items[] = {
            {.id = 0x1600, .immediate = true, .value = ts},
            {.id = 0x4103, .immediate = true, .value = freq},
            {.id = xeng ? 0x1800 : 0x4300, .data = data, .len = payload},
            {.id = 0x4101, .immediate = true, .value = feng},
        };
        uint64_t fields[3] = {ts, freq, xeng ? 0 : feng};
        write_record(ref, fields, 3, data, payload);
        /* Small packets for the X-engine stream: its heaps then span several. */
        rc = emit_heap(2 + (uint64_t)h, items, xeng ? 3 : 4, false, xeng ? 1024 : MAX_PKT, send_udp, &fd);
    }
    uint8_t stop[64];
    size_t n = cbf_spead_encode_stop(2 + N_HEAPS, stop);
    if (!rc)
        rc = send_udp(stop, n, &fd);
    free(data);
    fclose(ref);
    close(fd);
    return rc ? 1 : 0;
}

typedef struct recv_ctx {
    FILE *out;
    int heaps;
} recv_ctx;

static void on_dig_heap(const cbf_spead_heap *h, void *user)
{
    recv_ctx *c = user;
    const cbf_spead_item *ts = cbf_spead_heap_find(h, 0x1600), *id = cbf_spead_heap_find(h, 0x3101),
                         *st = cbf_spead_heap_find(h, 0x3102), *raw = cbf_spead_heap_find(h, 0x3300);
    const uint8_t *data;
    size_t len;
    if (!ts || !id || !st || !raw || !ts->immediate || cbf_spead_heap_item_bytes(h, raw, &data, &len))
        return;   /* descriptors or foreign heaps */
    uint64_t fields[3] = {ts->value, id->value, st->value};
    write_record(c->out, fields, 3, data, len);
    c->heaps++;
}

static void print_counters(const cbf_spead_counters *k, int heaps)
{
    printf("packets %llu heaps %llu incomplete %llu late %llu duplicate %llu malformed %llu data_heaps %d\n",
           (unsigned long long)k->packets, (unsigned long long)k->heaps,
           (unsigned long long)k->incomplete, (unsigned long long)k->late,
           (unsigned long long)k->duplicate, (unsigned long long)cbf_spead_counters_malformed(k), heaps);
}

static int receive(int port, const char *pcap_path, const char *out_path)
{
    recv_ctx c = {.out = fopen(out_path, "wb")};
    if (!c.out) {
        perror(out_path);
        return 1;
    }
    cbf_spead_assembler_config cfg = {.max_heap_size = 1 << 20, .window = 8, .on_heap = on_dig_heap,
                                      .user = &c};
    cbf_spead_assembler *a;
    cbf_error err;
    if (cbf_spead_assembler_create(&cfg, &a, &err)) {
        fprintf(stderr, "spead_tool: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    if (pcap_path) {
#ifdef CBF_HAVE_PCAP
        cbf_pcap_reader *r;
        if (cbf_pcap_reader_open(pcap_path, &r, &err)) {
            fprintf(stderr, "spead_tool: %s\n", err.msg);
            return 1;
        }
        cbf_pcap_datagram d;
        int got;
        while ((got = cbf_pcap_reader_next(r, &d, NULL, &err)) == 1)
            if (cbf_spead_assembler_add(a, d.payload, d.len))
                break;
        if (got < 0) {
            fprintf(stderr, "spead_tool: %s\n", err.msg);
            rc = 1;
        }
        cbf_pcap_reader_close(r);
#else
        fprintf(stderr, "spead_tool: built without libpcap\n");
        return 77;
#endif
    } else {
        int fd = socket(AF_INET, SOCK_DGRAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int rcvbuf = 16 << 20;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
        socklen_t sl = sizeof sa;
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) ||
            getsockname(fd, (struct sockaddr *)&sa, &sl)) {
            perror("spead_tool: bind");
            return 1;
        }
        printf("port %d\n", ntohs(sa.sin_port));
        fflush(stdout);
        struct timeval tv = {10, 0};   /* a peer that never sends stop must not hang the test */
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        static uint8_t buf[65536];
        for (;;) {
            ssize_t n = recv(fd, buf, sizeof buf, 0);
            if (n < 0) {
                fprintf(stderr, "spead_tool: no stream stop within 10 s\n");
                rc = 1;
                break;
            }
            if (cbf_spead_assembler_add(a, buf, (size_t)n))
                break;
        }
        close(fd);
    }
    cbf_spead_assembler_flush(a);
    print_counters(cbf_spead_assembler_counters(a), c.heaps);
    cbf_spead_assembler_destroy(a);
    fclose(c.out);
    return rc;
}

#ifdef CBF_HAVE_PCAP
static int write_pcap(const uint8_t *pkt, size_t len, void *ctx)
{
    cbf_error err;
    /* 239.10.0.1:7148, MeerKAT's port for digitiser streams. */
    if (cbf_pcap_writer_write(ctx, 0xef0a0001u, 7149, 7148, pkt, len, &err)) {
        fprintf(stderr, "spead_tool: %s\n", err.msg);
        return -1;
    }
    return 0;
}
#endif

static int pcap_dig(const char *path, const char *ref_path, uint64_t seed)
{
#ifdef CBF_HAVE_PCAP
    cbf_pcap_writer *w;
    cbf_error err;
    FILE *ref = fopen(ref_path, "wb");
    if (!ref || cbf_pcap_writer_open(path, &w, &err)) {
        fprintf(stderr, "spead_tool: cannot write %s or %s\n", path, ref_path);
        return 1;
    }
    rng_state = seed;
    uint8_t data[DIG_BYTES];
    int rc = 0;
    for (int h = 0; h < 2 * N_HEAPS && !rc; h++) {
        fill(data, sizeof data);
        uint64_t ts = (uint64_t)(h / 2) * 4096, id = 0x0200 | (uint64_t)(h & 1), status = 0;
        cbf_spead_item_out items[] = {
            {.id = 0x1600, .immediate = true, .value = ts},
            {.id = 0x3101, .immediate = true, .value = id},
            {.id = 0x3102, .immediate = true, .value = status},
            {.id = 0x3300, .data = data, .len = sizeof data},
        };
        uint64_t fields[3] = {ts, id, status};
        write_record(ref, fields, 3, data, sizeof data);
        /* One packet per heap with every pointer, as MeerKAT digitisers send. */
        rc = emit_heap((uint64_t)h + 1, items, 4, true, DIG_BYTES + 72, write_pcap, w);
    }
    uint8_t stop[64];
    size_t n = cbf_spead_encode_stop(1000, stop);
    if (!rc)
        rc = write_pcap(stop, n, w);
    cbf_pcap_writer_close(w);
    fclose(ref);
    return rc ? 1 : 0;
#else
    (void)path; (void)ref_path; (void)seed;
    fprintf(stderr, "spead_tool: built without libpcap\n");
    return 77;
#endif
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: spead_tool send-feng|send-xeng|recv|recv-pcap|pcap-dig ARG OUT [SEED]\n");
        return 2;
    }
    uint64_t seed = argc > 4 ? strtoull(argv[4], NULL, 0) : 1;
    if (!strcmp(argv[1], "send-feng") || !strcmp(argv[1], "send-xeng"))
        return send_engine(atoi(argv[2]), argv[3], seed, argv[1][5] == 'x');
    if (!strcmp(argv[1], "recv"))
        return receive(atoi(argv[2]), NULL, argv[3]);
    if (!strcmp(argv[1], "recv-pcap"))
        return receive(0, argv[2], argv[3]);
    if (!strcmp(argv[1], "pcap-dig"))
        return pcap_dig(argv[2], argv[3], seed);
    fprintf(stderr, "spead_tool: unknown mode %s\n", argv[1]);
    return 2;
}
