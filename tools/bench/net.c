/* cbf-bench net: SPEAD send and receive rates over loopback UDP.
 *
 * T sender threads (one socket each, so the flows hash apart) encode heaps
 * of a stream's shape and send them with sendmmsg to 127.0.0.1; T receiver
 * threads share the port with SO_REUSEPORT, recvmmsg and assemble heaps.
 * Reported per stream and thread count: packets/s and Gbit/s of UDP payload
 * sent and received, heaps completed, and the fraction lost (loopback drops
 * when receivers fall behind, and packets still in flight at the end count
 * as lost: the figure is the rate the codec sustains). */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "spead.h"

#define BATCH 32
#define MAX_THREADS 16

typedef struct stream_shape {
    const char *name;
    size_t heap_bytes, packet;
    bool repeat;
} stream_shape;

static const stream_shape shapes[] = {
    {"digitiser", 5120, 5192, true},          /* one packet per 4096 10-bit samples */
    {"feng", 64 * 256 * 4, 8872, false},      /* 64 channels x 256 spectra x 2 pols, int8 */
    {"xeng", 64 * 2080 * 4 * 8 / 4, 8872, false},  /* 64 channels, 64 antennas' baselines / 4 */
};

typedef struct shared {
    const stream_shape *s;
    int port;
    atomic_bool stop;
    atomic_uint_fast64_t tx_packets, tx_bytes, rx_packets, rx_bytes, rx_heaps;
} shared;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct thread_arg {
    shared *sh;
    int index, fd;
    int rc;
} thread_arg;

static void *send_loop(void *arg)
{
    thread_arg *t = arg;
    shared *sh = t->sh;
    const stream_shape *s = sh->s;
    uint8_t *payload = malloc(s->heap_bytes), *arena = malloc((size_t)BATCH * s->packet);
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)sh->port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (size_t i = 0; i < s->heap_bytes; i++)
        payload[i] = (uint8_t)(i * 131 + 7);
    uint64_t cnt = (uint64_t)t->index << 40;
    int n = 0;
    while (!atomic_load(&sh->stop)) {
        cbf_spead_item_out items[] = {
            {.id = 0x1600, .immediate = true, .value = cnt * 4096},
            {.id = 0x4101, .immediate = true, .value = (uint64_t)t->index},
            {.id = 0x4300, .data = payload, .len = s->heap_bytes},
        };
        cbf_spead_encoder e;
        if (cbf_spead_encoder_init(&e, cnt++ & CBF_SPEAD_ADDR_MASK, items, 3, s->packet, s->repeat, NULL))
            break;
        size_t len;
        while ((len = cbf_spead_encoder_next(&e, arena + (size_t)n * s->packet)) > 0) {
            iov[n] = (struct iovec){.iov_base = arena + (size_t)n * s->packet, .iov_len = len};
            msgs[n].msg_hdr = (struct msghdr){.msg_name = &to, .msg_namelen = sizeof to,
                                              .msg_iov = &iov[n], .msg_iovlen = 1};
            if (++n == BATCH) {
                /* Shared counters once per batch: per-packet atomics on one
                 * cache line would be the bottleneck with many threads. */
                int sent = sendmmsg(t->fd, msgs, BATCH, 0);
                uint64_t bytes = 0;
                for (int i = 0; i < sent; i++)
                    bytes += iov[i].iov_len;
                if (sent > 0) {
                    atomic_fetch_add(&sh->tx_packets, (uint64_t)sent);
                    atomic_fetch_add(&sh->tx_bytes, bytes);
                }
                n = 0;
            }
        }
    }
    free(payload);
    free(arena);
    return NULL;
}

static void count_heap(const cbf_spead_heap *h, void *user)
{
    (void)h;
    (*(uint64_t *)user)++;
}

static void *recv_loop(void *arg)
{
    thread_arg *t = arg;
    shared *sh = t->sh;
    uint64_t heaps = 0;
    cbf_spead_assembler_config cfg = {.max_heap_size = sh->s->heap_bytes, .window = 16,
                                      .on_heap = count_heap, .user = &heaps};
    cbf_spead_assembler *a;
    if (cbf_spead_assembler_create(&cfg, &a, NULL)) {
        t->rc = 1;
        return NULL;
    }
    enum { RB = 9216 };
    uint8_t *bufs = malloc((size_t)BATCH * RB);
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    while (!atomic_load(&sh->stop)) {
        for (int i = 0; i < BATCH; i++) {
            iov[i] = (struct iovec){.iov_base = bufs + (size_t)i * RB, .iov_len = RB};
            msgs[i].msg_hdr = (struct msghdr){.msg_iov = &iov[i], .msg_iovlen = 1};
        }
        int n = recvmmsg(t->fd, msgs, BATCH, MSG_WAITFORONE, NULL);
        if (n <= 0)
            continue;
        uint64_t bytes = 0;
        for (int i = 0; i < n; i++) {
            cbf_spead_assembler_add(a, bufs + (size_t)i * RB, msgs[i].msg_len);
            bytes += msgs[i].msg_len;
        }
        atomic_fetch_add(&sh->rx_packets, (uint64_t)n);
        atomic_fetch_add(&sh->rx_bytes, bytes);
    }
    atomic_fetch_add(&sh->rx_heaps, heaps);
    free(bufs);
    cbf_spead_assembler_destroy(a);
    return NULL;
}

static int open_rx(int *port)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1, buf = 64 << 20;
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    struct timeval tv = {0, 100000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)*port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || getsockname(fd, (struct sockaddr *)&a, &l)) {
        fprintf(stderr, "cbf-bench net: bind: %s\n", strerror(errno));
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static int one_run(const stream_shape *s, int threads, double seconds)
{
    shared sh = {.s = s};
    thread_arg rx[MAX_THREADS], tx[MAX_THREADS];
    pthread_t rt[MAX_THREADS], tt[MAX_THREADS];
    int port = 0;
    for (int i = 0; i < threads; i++) {
        rx[i] = (thread_arg){.sh = &sh, .index = i, .fd = open_rx(&port)};
        if (rx[i].fd < 0)
            return 1;
    }
    sh.port = port;
    for (int i = 0; i < threads; i++) {
        tx[i] = (thread_arg){.sh = &sh, .index = i, .fd = socket(AF_INET, SOCK_DGRAM, 0)};
        int buf = 8 << 20;
        setsockopt(tx[i].fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
        pthread_create(&rt[i], NULL, recv_loop, &rx[i]);
    }
    double t0 = now_s();
    for (int i = 0; i < threads; i++)
        pthread_create(&tt[i], NULL, send_loop, &tx[i]);
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);   /* the measurement interval itself */
    atomic_store(&sh.stop, true);
    for (int i = 0; i < threads; i++) {
        pthread_join(tt[i], NULL);
        pthread_join(rt[i], NULL);
        close(tx[i].fd);
        close(rx[i].fd);
    }
    double dt = now_s() - t0;
    double txp = (double)sh.tx_packets, rxp = (double)sh.rx_packets;
    printf("%-9s %7zu %3d %12.0f %8.2f %12.0f %8.2f %10.0f %7.2f%%\n", s->name, s->packet, threads,
           txp / dt, (double)sh.tx_bytes * 8 / dt / 1e9, rxp / dt, (double)sh.rx_bytes * 8 / dt / 1e9,
           (double)sh.rx_heaps / dt, txp > 0 ? 100.0 * (1 - rxp / txp) : 0.0);
    return 0;
}

int cbf_bench_net(int argc, char **argv)
{
    double seconds = 2;
    int max_threads = 4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            max_threads = atoi(argv[++i]);
        else {
            printf("usage: cbf-bench net [--seconds S (2)] [--threads MAX (4)]\n"
                   "SPEAD over loopback UDP: 1, 2, ... MAX sender and receiver threads per stream.\n");
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (max_threads < 1 || max_threads > MAX_THREADS || seconds <= 0) {
        fprintf(stderr, "cbf-bench net: --threads 1..%d, --seconds > 0\n", MAX_THREADS);
        return 2;
    }
    printf("%-9s %7s %3s %12s %8s %12s %8s %10s %8s\n", "stream", "packet", "thr", "tx pkt/s",
           "tx Gb/s", "rx pkt/s", "rx Gb/s", "heaps/s", "lost");
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int t = 1; t <= max_threads; t *= 2)
            if (one_run(&shapes[k], t, seconds))
                return 1;
    return 0;
}
