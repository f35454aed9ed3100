/* cbf-bench engine, cases b and c: engines talking SPEAD over loopback.
 *   (b) dsim (real time) -> sender => receiver -> K x (pfb -> fft_post ->
 *       sender) => receiver -> discard: three engines, free ports;
 *   (c) 64 antennas' F-engine heaps => receiver -> correlator -> reducer ->
 *       sender => a draining socket, against a plain UDP blast. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cbf/gpu.h"
#include "engine.h"

/* ---- loopback helpers for (b) and (c) ---- */

/* A free UDP port on 127.0.0.1 (the kernel's choice, released at once). */
static int eng_free_port(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof a) && !getsockname(fd, (struct sockaddr *)&a, &len))
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* A socket that receives and forgets (the X-engine output's destination),
 * or, with `blast`, a plain UDP sender of DGRAM-byte datagrams into it:
 * the loopback ceiling with no SPEAD encoding or assembly. */
typedef struct eng_udp {
    int rx, tx, port;
    atomic_bool stop;
    atomic_uint_fast64_t rx_bytes, tx_bytes;
    pthread_t rt, st;
    bool blast, has_tx;
} eng_udp;

static void *eng_udp_recv(void *arg)
{
    eng_udp *u = arg;
    uint8_t(*buf)[DGRAM] = malloc(32 * sizeof *buf);
    struct mmsghdr m[32];
    struct iovec io[32];
    for (int i = 0; buf && i < 32; i++) {
        io[i] = (struct iovec){buf[i], DGRAM};
        m[i] = (struct mmsghdr){.msg_hdr = {.msg_iov = &io[i], .msg_iovlen = 1}};
    }
    while (buf && !atomic_load(&u->stop)) {
        int n = recvmmsg(u->rx, m, 32, MSG_WAITFORONE, NULL);
        for (int i = 0; i < n; i++)
            atomic_fetch_add(&u->rx_bytes, m[i].msg_len);
    }
    free(buf);
    return NULL;
}

static void *eng_udp_send(void *arg)
{
    eng_udp *u = arg;
    static uint8_t buf[DGRAM]; /* never read: its contents do not matter */
    struct mmsghdr m[32];
    struct iovec io = {buf, DGRAM};
    for (int i = 0; i < 32; i++)
        m[i] = (struct mmsghdr){.msg_hdr = {.msg_iov = &io, .msg_iovlen = 1}};
    while (!atomic_load(&u->stop)) {
        int n = sendmmsg(u->tx, m, 32, 0);
        if (n > 0)
            atomic_fetch_add(&u->tx_bytes, (uint64_t)n * DGRAM);
    }
    return NULL;
}

static int eng_udp_open(eng_udp *u, bool blast)
{
    memset(u, 0, sizeof *u);
    u->blast = blast;
    u->rx = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int big = 64 << 20;
    struct timeval tv = {0, 100000}; /* so the thread sees the stop */
    setsockopt(u->rx, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(u->rx, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (u->rx < 0 || bind(u->rx, (struct sockaddr *)&a, sizeof a) ||
        getsockname(u->rx, (struct sockaddr *)&a, &len)) {
        perror("cbf-bench engine: UDP socket");
        return 1;
    }
    u->port = ntohs(a.sin_port);
    if (pthread_create(&u->rt, NULL, eng_udp_recv, u))
        return 1;
    if (blast) {
        u->tx = socket(AF_INET, SOCK_DGRAM, 0);
        if (u->tx < 0 || connect(u->tx, (struct sockaddr *)&a, sizeof a) ||
            pthread_create(&u->st, NULL, eng_udp_send, u)) {
            perror("cbf-bench engine: UDP blast");
            atomic_store(&u->stop, true);
            pthread_join(u->rt, NULL);
            return 1;
        }
        u->has_tx = true;
    }
    return 0;
}

static void eng_udp_close(eng_udp *u)
{
    atomic_store(&u->stop, true);
    if (u->has_tx)
        pthread_join(u->st, NULL);
    pthread_join(u->rt, NULL);
    if (u->has_tx)
        close(u->tx);
    close(u->rx);
}

/* Bytes/s of UDP payload received from one plain sender thread. */
static double eng_udp_ceiling(const eng_bench *b)
{
    eng_udp u;
    if (eng_udp_open(&u, true))
        return 0;
    cbf_bench_eng_sleep(b->o->warmup < 0.5 ? b->o->warmup : 0.5);
    uint64_t r0 = atomic_load(&u.rx_bytes);
    double t0 = cbf_bench_eng_now();
    cbf_bench_eng_sleep(b->o->seconds);
    double rate = (double)(atomic_load(&u.rx_bytes) - r0) / (cbf_bench_eng_now() - t0);
    eng_udp_close(&u);
    return rate;
}

/* Receiver and sender threads from the options; 1 is each plugin's default
 * and is left out, so a plugin without the parameter still loads. */
static void eng_rx_threads(eng_bench *b, FILE *f, bool feng)
{
    char t[16];
    snprintf(t, sizeof t, "%d", b->o->rx_threads);
    if (b->o->rx_threads > 1)
        cbf_bench_eng_opt(b, f, "receiver", "threads_per_address", t);
    /* cbf's F-engines repeat item pointers: their packets can go to any
     * thread, so the few senders' flows do not load the sockets unevenly. */
    if (b->o->rx_threads > 1 && feng)
        cbf_bench_eng_opt(b, f, "receiver", "spread", "packet");
}

static void eng_tx_threads(eng_bench *b, FILE *f)
{
    char t[16];
    snprintf(t, sizeof t, "%d", b->o->tx_threads);
    if (b->o->tx_threads > 1)
        cbf_bench_eng_opt(b, f, "sender", "threads", t);
}

/* ---- (b): the network F-engine on loopback ---- */

typedef struct eng_net_row {
    double target, source, rate;
    uint64_t lost_dig, lost_feng, missing;
    int rc;
} eng_net_row;

static eng_net_row eng_net_once(eng_bench *b, int ants, int channels)
{
    eng_net_row row = {.target = ants * ANT_RATE * b->o->scale, .rc = 1};
    int p1 = eng_free_port(), p2 = eng_free_port();
    int heap_ch = channels < 256 ? channels : 256;
    char *y[3] = {NULL, NULL, NULL};
    size_t len[3];
    FILE *f;

    f = open_memstream(&y[2], &len[2]);
    fprintf(f, "engine: {name: bench-net-x}\nnodes:\n"
               "  recv: {plugin: receiver, params: {address: 127.0.0.1:%d, stream: feng, antennas: %d, "
               "channels: %d, channels_per_heap: %d, spectra_per_heap: 256, batches: 1, stops: %d, "
               "chunks_in_flight: 8, buffers: 12",
            p2, ants, channels, heap_ch, ants);
    eng_rx_threads(b, f, true);
    fprintf(f, "}}\n  sink: {plugin: discard}\nedges:\n  - recv.batches -> sink.in\n");
    cbf_bench_eng_text(f, &y[2]);

    f = open_memstream(&y[1], &len[1]);
    fprintf(f, "engine: {name: bench-net-f, gpu: %s}\nnodes:\n"
               "  recv: {plugin: receiver, params: {address: 127.0.0.1:%d, antennas: %d, stops: 1, "
               "chunks_in_flight: 32, buffers: 48",
            cbf_bench_eng_gpu(b, "auto"), p1, ants);
    eng_rx_threads(b, f, false);
    fprintf(f, "}}\n");
    cbf_bench_eng_chains(b, f, ants, channels);
    for (int k = 0; k < ants; k++) {
        fprintf(f, "  send%d: {plugin: sender, params: {destinations: 127.0.0.1:%d, channels_per_heap: %d", k, p2,
                heap_ch);
        eng_tx_threads(b, f);
        fprintf(f, "}}\n");
    }
    cbf_bench_eng_chain_edges(f, "recv.out", ants);
    for (int k = 0; k < ants; k++)
        fprintf(f, "  - post%d.out -> send%d.in\n", k, k);
    cbf_bench_eng_text(f, &y[1]);

    f = open_memstream(&y[0], &len[0]);
    fprintf(f, "engine: {name: bench-net-dig}\nnodes:\n");
    cbf_bench_eng_dsim(b, f, ants, true, b->o->scale);
    fprintf(f, "  send: {plugin: sender, params: {destinations: 127.0.0.1:%d", p1);
    if (!cbf_bench_eng_supports(b, "dsim", "realtime", "true"))
        /* Pace the sender instead: digitiser packets carry 72 header bytes per 5120. */
        fprintf(f, ", rate_gbps: %.6g", row.target * IN_BYTES_PER_SAMPLE * 8 * 5192.0 / 5120.0 / 1e9);
    eng_tx_threads(b, f);
    fprintf(f, "}}\nedges:\n  - dsim.out -> send.in\n");
    cbf_bench_eng_text(f, &y[0]);

    eng_run r[3];
    eng_snap *s = malloc(6 * sizeof *s);
    memset(r, 0, sizeof r);
    static const char *const labels[3] = {"digitiser engine", "F-engine", "X-side receiver"};
    /* Receivers first, so the senders find their sockets. */
    bool ok = !cbf_bench_eng_start(b, &r[2], labels[2], y[2]) && !cbf_bench_eng_start(b, &r[1], labels[1], y[1]) &&
              !cbf_bench_eng_start(b, &r[0], labels[0], y[0]);
    if (ok) {
        cbf_bench_eng_warm(b, &r[2], "discard", "buffers", 2);
        for (int i = 0; i < 3; i++)
            cbf_bench_eng_take(&r[i], &s[i]);
        cbf_bench_eng_window(b);
        for (int i = 0; i < 3; i++)
            cbf_bench_eng_take(&r[i], &s[3 + i]);
        for (int i = 0; i < 3 && b->o->verbose; i++)
            cbf_bench_eng_show(&r[i], &s[i], &s[3 + i]);
        /* Heaps, not buffers: a window holds thousands of them. A digitiser
         * heap is 4096 samples of one pol; an F-engine heap covers 256
         * spectra of 2 x channels samples, both pols, for heap_ch channels. */
        row.source = (double)cbf_bench_eng_delta(&s[1], &s[4], "receiver", "heaps") * 4096 / (s[4].t - s[1].t);
        row.rate = (double)cbf_bench_eng_delta(&s[2], &s[5], "receiver", "heaps") * 1024 * heap_ch / (s[5].t - s[2].t);
        row.lost_dig = cbf_bench_eng_rx_lost(&s[1], &s[4]);
        row.lost_feng = cbf_bench_eng_rx_lost(&s[2], &s[5]);
        row.missing = cbf_bench_eng_delta(&s[2], &s[5], "discard", "missing");
    }
    /* The source stops; its stream stops end the next engines in turn. */
    int rc = cbf_bench_eng_finish(&r[0], 0);
    rc |= cbf_bench_eng_finish(&r[1], 10);
    rc |= cbf_bench_eng_finish(&r[2], 10);
    row.rc = ok ? rc : 1;
    for (int i = 0; i < 3; i++) {
        cbf_bench_eng_free(&r[i]);
        free(y[i]);
    }
    free(s);
    return row;
}

int cbf_bench_eng_case_net(eng_bench *b)
{
    cbf_bench_eng_header(b, "(b) network F-engine on loopback");
    printf("three engines in this process: dsim -> sender => receiver -> K x (pfb -> fft_post -> sender) => "
           "receiver -> discard; offered rate %.3g of real time per antenna\n\n",
           b->o->scale);
    fflush(stdout);
    printf("| channels | antennas | offered Gsample/s | into F-engine Gsample/s | out of F-engine Gsample/s | lost at F receiver | "
           "lost at X receiver | missing at discard | status |\n"
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    int failed = 0;
    for (int c = 0; c < b->o->n_channels; c++) {
        int best = 0;
        const char *why = "every count tried passed";
        for (int i = 0; i < b->o->n_ants; i++) {
            int k = b->o->ants[i], ch = b->o->channels[c];
            eng_net_row r = eng_net_once(b, k, ch);
            const char *st = r.rc                           ? "run failed"
                             : r.lost_dig                   ? "loss at the F-engine's receiver"
                             : r.lost_feng || r.missing     ? "loss at the X-side receiver"
                             : r.source < 0.98 * r.target   ? "digitiser stream behind real time"
                             : r.rate < 0.98 * r.target     ? "F-engine behind real time"
                                                            : "ok, drained";
            printf("| %d | %d | %.3f | %.3f | %.3f | %llu | %llu | %llu | %s |\n", ch, k, r.target / 1e9,
                   r.source / 1e9, r.rate / 1e9, (unsigned long long)r.lost_dig, (unsigned long long)r.lost_feng,
                   (unsigned long long)r.missing, st);
            fflush(stdout);
            if (strcmp(st, "ok, drained")) {
                why = st;
                failed += r.rc || r.lost_dig || r.lost_feng || r.missing;
                break;
            }
            best = k;
        }
        printf("\nat %d channels: %d antenna(s) at %.3g of real time with zero loss; the next: %s\n\n",
               b->o->channels[c], best, b->o->scale, why);
    }
    cbf_bench_eng_notes(b);
    printf("case b: %s\n", failed ? "LOSS or failure (see the status column)" : "zero loss in every row that ran");
    return 0;
}

/* ---- (c): the X-engine ---- */

typedef struct eng_x_row {
    double offered, rate;
    uint64_t lost, out_bytes;
    int rc;
} eng_x_row;

static eng_x_row eng_x_once(eng_bench *b, double offered)
{
    eng_x_row row = {.offered = offered, .rc = 1};
    const int ch = b->o->xeng_channels;
    int px = eng_free_port();
    eng_udp drain;
    if (eng_udp_open(&drain, false))
        return row;
    char *y[2] = {NULL, NULL};
    size_t len[2];
    FILE *f = open_memstream(&y[1], &len[1]);
    fprintf(f, "engine: {name: bench-xeng, gpu: %s}\nnodes:\n"
               "  recv: {plugin: receiver, params: {address: 127.0.0.1:%d, stream: feng, antennas: %d, "
               "channels: %d, spectra_per_heap: 256, batches: 1, stops: %d, chunks_in_flight: 8, buffers: 12",
            cbf_bench_eng_gpu(b, "auto"), px, XENG_ANTS, ch, XENG_ANTS);
    eng_rx_threads(b, f, true);
    fprintf(f, "}}\n  corr: {plugin: correlator, params: {heap_accumulation_threshold: 4}}\n"
               "  reduce: {plugin: reducer}\n"
               "  send: {plugin: sender, params: {destinations: 127.0.0.1:%d, rate_gbps: 1000}}\n"
               "edges:\n  - recv.batches -> corr.in\n  - corr.out -> reduce.in\n  - reduce.out -> send.in\n",
            drain.port);
    cbf_bench_eng_text(f, &y[1]);
    /* One antenna's F-engine, sent as 64 (the feng_id differs): the X-engine
     * cannot tell, and the source costs one chain instead of 64. */
    f = open_memstream(&y[0], &len[0]);
    fprintf(f, "engine: {name: bench-xeng-feed, gpu: %s}\nnodes:\n", cbf_bench_eng_gpu(b, "auto"));
    cbf_bench_eng_dsim(b, f, 1, false, 1.0);
    cbf_bench_eng_chains(b, f, 1, ch);
    for (int k = 0; k < XENG_ANTS; k++)
        fprintf(f, "  send%d: {plugin: sender, params: {destinations: 127.0.0.1:%d, feng_id: %d, rate_gbps: %.6g}}\n",
                k, px, k, offered * 8 / XENG_ANTS / 1e9);
    cbf_bench_eng_chain_edges(f, "dsim.out", 1);
    for (int k = 0; k < XENG_ANTS; k++)
        fprintf(f, "  - post0.out -> send%d.in\n", k);
    cbf_bench_eng_text(f, &y[0]);

    eng_run r[2];
    eng_snap *s = malloc(4 * sizeof *s);
    memset(r, 0, sizeof r);
    bool ok = !cbf_bench_eng_start(b, &r[1], "X-engine", y[1]) && !cbf_bench_eng_start(b, &r[0], "F-engine feed", y[0]);
    if (ok) {
        cbf_bench_eng_warm(b, &r[1], "reducer", "dumps", 1);
        cbf_bench_eng_take(&r[1], &s[0]);
        cbf_bench_eng_take(&r[0], &s[2]);
        uint64_t d0 = atomic_load(&drain.rx_bytes);
        cbf_bench_eng_window(b);
        cbf_bench_eng_take(&r[1], &s[1]);
        cbf_bench_eng_take(&r[0], &s[3]);
        if (b->o->verbose) {
            cbf_bench_eng_show(&r[0], &s[2], &s[3]);
            cbf_bench_eng_show(&r[1], &s[0], &s[1]);
        }
        row.out_bytes = atomic_load(&drain.rx_bytes) - d0;
        row.rate = (double)cbf_bench_eng_delta(&s[0], &s[1], "receiver", "bytes") / (s[1].t - s[0].t);
        row.lost = cbf_bench_eng_rx_lost(&s[0], &s[1]);
    }
    int rc = cbf_bench_eng_finish(&r[0], 0);
    rc |= cbf_bench_eng_finish(&r[1], 10);
    row.rc = ok ? rc : 1;
    for (int i = 0; i < 2; i++) {
        cbf_bench_eng_free(&r[i]);
        free(y[i]);
    }
    eng_udp_close(&drain);
    free(s);
    return row;
}

int cbf_bench_eng_case_xeng(eng_bench *b)
{
    cbf_bench_eng_header(b, "(c) X-engine, 64 antennas, one channel range");
    double ceiling = eng_udp_ceiling(b);
    printf("loopback UDP ceiling (one plain sender and receiver thread, %d-byte datagrams): %.2f Gbit/s\n\n"
           "F-engine heaps of %d antennas x %d channels x 256 spectra => receiver -> correlator -> reducer -> "
           "sender => a draining socket; offered = the feeding senders' rate limits\n\n",
           DGRAM, ceiling * 8 / 1e9, XENG_ANTS, b->o->xeng_channels);
    fflush(stdout);
    printf("| offered Gbit/s | of ceiling | received Gbit/s | of ceiling | lost heaps | X-engine out Gbit/s | status "
           "|\n| --- | --- | --- | --- | --- | --- | --- |\n");
    double best = 0;
    int failed = 0;
    for (int i = 0; i < b->o->n_fractions && ceiling > 0; i++) {
        eng_x_row r = eng_x_once(b, b->o->fractions[i] * ceiling);
        const char *st = r.rc                           ? "run failed"
                         : r.lost                       ? "loss at the X-engine's receiver"
                         : r.rate < 0.95 * r.offered    ? "feed behind the offered rate"
                                                        : "ok, drained";
        printf("| %.2f | %.2f | %.2f | %.2f | %llu | %.3f | %s |\n", r.offered * 8 / 1e9, b->o->fractions[i],
               r.rate * 8 / 1e9, r.rate / ceiling, (unsigned long long)r.lost,
               (double)r.out_bytes * 8 / b->o->seconds / 1e9, st);
        fflush(stdout);
        if (r.rc || r.lost) {
            failed = 1;
            break;
        }
        if (r.rate > best)
            best = r.rate;
    }
    printf("\nhighest zero-loss ingest: %.2f Gbit/s, %.2f of the loopback UDP ceiling\n\n", best * 8 / 1e9,
           ceiling > 0 ? best / ceiling : 0.0);
    cbf_bench_eng_notes(b);
    printf("case c: %s\n", failed ? "loss above the highest rate shown" : "zero loss at every rate offered");
    return 0;
}
