/* cbf-bench net: SPEAD send and receive rates over UDP, through the
 * transport interface the receiver and sender plugins use (net/udp).
 *
 * T sender threads (one queue each, so the flows hash apart) encode heaps
 * of a stream's shape and send them to the interface's own address; T
 * receiver threads share the port with SO_REUSEPORT and assemble heaps.
 * With --group, thread i sends to and receives multicast group + i instead
 * (one flow per receiving queue: how the ibverbs transport, which has no
 * SO_REUSEPORT, takes several threads).
 * Reported per stream and thread count: packets/s and Gbit/s of UDP payload
 * sent and received, heaps completed, and the fraction lost (loopback drops
 * when receivers fall behind, and packets still in flight at the end count
 * as lost: the figure is the rate the codec sustains).
 *
 * With --feed ADDR:PORT it is a digitiser instead: T threads (one socket
 * each, so SO_REUSEPORT spreads them over a receiver's sockets) send one
 * antenna's MeerKAT digitiser heaps (two pols, 4096 10-bit samples a heap,
 * timestamps advancing) at --gbps of UDP payload for --seconds, then a
 * stream stop: the load for a cbf-run receiver pipeline, whose counters
 * (packets, packets_dropped_kernel, flags_missing) say what arrived. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <pthread.h>
#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "spead.h"
#include "udp.h"
#include "opts.h"

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

typedef struct options {
    const char *iface, *transport, *feed, *offload;
    /* --netns: receivers in one network namespace, senders in another,
     * joined by a veth pair; fds of the namespaces (-1: not used) and the
     * senders' address. */
    int netns, ns_rx, ns_tx, ns_home;
    bool veth_gro;               /* the receiving veth has GRO on */
    const char *tx_iface;
    double gbps;
    uint32_t group;              /* host order; 0 = unicast to the interface */
    double seconds;
    int max_threads;
} options;

typedef struct shared {
    const stream_shape *s;
    const options *o;
    int port;
    bool raw;                    /* the ceiling: datagrams of the packet size, no SPEAD */
    atomic_bool stop;
    atomic_uint_fast64_t tx_packets, tx_bytes, rx_packets, rx_bytes, rx_heaps;
} shared;

static double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct thread_arg {
    shared *sh;
    int index;
    double cpu;                  /* CPU seconds the thread used */
    cbf_net_rx *rx;
    cbf_net_tx *tx;
    cbf_udp_endpoint to;
    int rc;
    cbf_error err;
} thread_arg;

static void *send_loop(void *arg)
{
    thread_arg *t = arg;
    shared *sh = t->sh;
    const stream_shape *s = sh->s;
    uint8_t *payload = malloc(s->heap_bytes);
    for (size_t i = 0; i < s->heap_bytes; i++)
        payload[i] = (uint8_t)(i * 131 + 7);
    uint64_t n = 0, packets = 0, bytes = 0;
    const double cpu0 = thread_cpu_s();
    while (sh->raw && !atomic_load(&sh->stop) && !t->rc) {
        /* The same batches of packet-sized datagrams with no encoding. */
        uint8_t *p;
        int full = 0;
        for (int k = 0; k < BATCH && !full && !t->rc; k++)
            if (!(t->rc = cbf_net_tx_buffer(t->tx, &p, &t->err)) &&
                (full = cbf_net_tx_commit(t->tx, s->packet, &t->to, &t->err)) < 0)
                t->rc = full;
        if (!t->rc)
            t->rc = cbf_net_tx_flush(t->tx, NULL, &t->err);
        atomic_fetch_add(&sh->tx_packets, BATCH);
        atomic_fetch_add(&sh->tx_bytes, (uint64_t)BATCH * s->packet);
    }
    while (!sh->raw && !atomic_load(&sh->stop) && !t->rc) {
        /* Heap counters distinct per thread (index in bits 40 up), all within 48 bits. */
        uint64_t cnt = ((uint64_t)t->index << 40 | n) & CBF_SPEAD_ADDR_MASK;
        cbf_spead_item_out items[] = {
            {.id = 0x1600, .immediate = true, .value = (n++ * 4096) & CBF_SPEAD_ADDR_MASK},
            {.id = 0x4101, .immediate = true, .value = (uint64_t)t->index},
            {.id = 0x4300, .data = payload, .len = s->heap_bytes},
        };
        cbf_spead_encoder e;
        if ((t->rc = cbf_spead_encoder_init(&e, cnt, items, 3, s->packet, s->repeat,
                                            &t->err)))
            break;
        for (size_t k = cbf_spead_encoder_count(&e); k > 0 && !t->rc; k--) {
            uint8_t *p;
            if ((t->rc = cbf_net_tx_buffer(t->tx, &p, &t->err)))
                break;
            size_t len = cbf_spead_encoder_next(&e, p);
            int full = cbf_net_tx_commit(t->tx, len, &t->to, &t->err);
            packets++;
            bytes += len;
            if (full < 0)
                t->rc = full;
            else if (full) {
                t->rc = cbf_net_tx_flush(t->tx, NULL, &t->err);
                /* Shared counters once per batch: per-packet atomics on one
                 * cache line would be the bottleneck with many threads. */
                atomic_fetch_add(&sh->tx_packets, packets);
                atomic_fetch_add(&sh->tx_bytes, bytes);
                packets = bytes = 0;
            }
        }
    }
    free(payload);
    t->cpu = thread_cpu_s() - cpu0;
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
    if ((t->rc = cbf_spead_assembler_create(&cfg, &a, &t->err)))
        return NULL;
    const uint8_t *pkt[BATCH];
    size_t len[BATCH];
    const double cpu0 = thread_cpu_s();
    while (!atomic_load(&sh->stop)) {
        int n = cbf_net_rx_recv(t->rx, pkt, len, &t->err);
        if (n < 0) {
            t->rc = n;
            break;
        }
        uint64_t bytes = 0;
        for (int i = 0; i < n; i++) {
            if (!sh->raw)
                cbf_spead_assembler_add(a, pkt[i], len[i]);
            bytes += len[i];
        }
        atomic_fetch_add(&sh->rx_packets, (uint64_t)n);
        atomic_fetch_add(&sh->rx_bytes, bytes);
    }
    atomic_fetch_add(&sh->rx_heaps, heaps);
    cbf_spead_assembler_destroy(a);
    t->cpu = thread_cpu_s() - cpu0;
    return NULL;
}

/* Thread i's endpoint: the interface's address on the shared port, or group + i. */
static int endpoint(const options *o, int i, int port, cbf_udp_endpoint *ep, cbf_error *err)
{
    char text[64];
    if (o->group) {
        uint32_t g = o->group + (uint32_t)i;
        snprintf(text, sizeof text, "%u.%u.%u.%u:%d", g >> 24, (g >> 16) & 255, (g >> 8) & 255, g & 255, port);
    } else {
        snprintf(text, sizeof text, "%s:%d", o->iface, port);
    }
    return cbf_udp_parse_endpoint(text, "cbf-bench net", ep, err);
}

/* ---- --netns: two namespaces and a veth pair ---- */

static char ns_name[2][32], veth_name[2][16];

static int run_ip(const char *args)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ip %s >/dev/null 2>&1", args);
    return system(cmd) == 0 ? 0 : -1;
}

static void netns_down(options *o)
{
    char a[96];
    for (int i = 0; i < 2; i++) {
        snprintf(a, sizeof a, "netns del %s", ns_name[i]);
        if (ns_name[i][0])
            run_ip(a);
    }
    if (o->ns_rx >= 0)
        close(o->ns_rx);
    if (o->ns_tx >= 0)
        close(o->ns_tx);
    if (o->ns_home >= 0)
        close(o->ns_home);
    o->ns_rx = o->ns_tx = o->ns_home = -1;
}

/* Namespace 0 (receivers) holds 10.203.0.2, namespace 1 (senders)
 * 10.203.0.1, on the two ends of a veth pair; names carry the pid. Needs
 * root and iproute2. */
static int veth_gro_on(const options *o);

/* Namespaces an earlier run left (killed before it could remove them):
 * cbfbench<pid>r/s whose process is gone. */
static void netns_sweep(void)
{
    DIR *d = opendir("/run/netns");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        int pid;
        char side, a[96];
        if (sscanf(e->d_name, "cbfbench%d%c", &pid, &side) == 2 && (side == 'r' || side == 's') &&
            kill(pid, 0) && errno == ESRCH) {
            snprintf(a, sizeof a, "netns del %s", e->d_name);
            run_ip(a);
        }
    }
    if (d)
        closedir(d);
}

static int netns_up(options *o)
{
    const int pid = (int)getpid();
    netns_sweep();
    static const char *const addr[2] = {"10.203.0.2/24", "10.203.0.1/24"};
    char a[160];
    for (int i = 0; i < 2; i++) {
        snprintf(ns_name[i], sizeof ns_name[i], "cbfbench%d%c", pid, i ? 's' : 'r');
        snprintf(veth_name[i], sizeof veth_name[i], "cbfv%d%c", pid % 10000000, i ? 's' : 'r');
        snprintf(a, sizeof a, "netns add %s", ns_name[i]);
        if (run_ip(a))
            return fprintf(stderr, "cbf-bench net --netns: ip %s failed (root and iproute2 needed)\n", a), -1;
    }
    snprintf(a, sizeof a, "link add %s netns %s type veth peer name %s netns %s", veth_name[0], ns_name[0],
             veth_name[1], ns_name[1]);
    if (run_ip(a))
        return fprintf(stderr, "cbf-bench net --netns: ip %s failed\n", a), -1;
    for (int i = 0; i < 2; i++) {
        snprintf(a, sizeof a, "-n %s addr add %s dev %s", ns_name[i], addr[i], veth_name[i]);
        if (run_ip(a))
            return fprintf(stderr, "cbf-bench net --netns: ip %s failed\n", a), -1;
        snprintf(a, sizeof a, "-n %s link set dev %s up mtu 9000", ns_name[i], veth_name[i]);
        if (run_ip(a))
            return fprintf(stderr, "cbf-bench net --netns: ip %s failed\n", a), -1;
        snprintf(a, sizeof a, "-n %s link set dev lo up", ns_name[i]);
        run_ip(a);
    }
    char path[96];
    o->ns_home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof path, "/run/netns/%s", ns_name[0]);
    o->ns_rx = open(path, O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof path, "/run/netns/%s", ns_name[1]);
    o->ns_tx = open(path, O_RDONLY | O_CLOEXEC);
    if (o->ns_home < 0 || o->ns_rx < 0 || o->ns_tx < 0)
        return fprintf(stderr, "cbf-bench net --netns: %s: %s\n", path, strerror(errno)), -1;
    o->iface = "10.203.0.2";
    o->tx_iface = "10.203.0.1";
    o->veth_gro = veth_gro_on(o) == 0;
    return 0;
}

/* GRO on the receiving veth (ethtool's ETHTOOL_SGRO), as physical NICs
 * have it by default: since Linux 5.13 it gives the veth NAPI, and so GRO,
 * which coalesces plain datagrams for UDP_GRO sockets. 0, or -1 (said). */
static int veth_gro_on(const options *o)
{
    int rc = -1, fd = -1;
    if (o->ns_rx >= 0 && !setns(o->ns_rx, CLONE_NEWNET) && (fd = socket(AF_INET, SOCK_DGRAM, 0)) >= 0) {
        struct ethtool_value v = {.cmd = ETHTOOL_SGRO, .data = 1};
        struct ifreq ifr = {0};
        snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", veth_name[0]);
        ifr.ifr_data = (char *)&v;
        rc = ioctl(fd, SIOCETHTOOL, &ifr);
    }
    if (rc)
        fprintf(stderr, "cbf-bench net --netns: GRO on %s: %s (left off)\n", veth_name[0], strerror(errno));
    if (fd >= 0)
        close(fd);
    if (o->ns_home >= 0)
        setns(o->ns_home, CLONE_NEWNET);
    return rc;
}

/* Into namespace fd (sockets opened now stay in it); fd < 0: none. */
static int netns_enter(int fd, cbf_error *err)
{
    if (fd >= 0 && setns(fd, CLONE_NEWNET))
        return cbf_error_set(err, CBF_EIO, "setns: %s", strerror(errno));
    return 0;
}

typedef struct result {
    double tx_pps, tx_gbps, rx_pps, rx_gbps, heaps_ps, lost;
    double tx_core, rx_core;     /* Gbit/s per CPU second the threads used */
} result;

/* One measurement of send and receive together; gso, gro: the sender's
 * UDP_SEGMENT sends and the receiver's UDP_GRO (net/udp). */
static int one_run(const stream_shape *s, int threads, bool raw, bool gso, bool gro, const options *o,
                   result *out)
{
    shared sh = {.s = s, .o = o, .raw = raw};
    thread_arg rx[MAX_THREADS] = {0}, tx[MAX_THREADS] = {0};
    pthread_t rt[MAX_THREADS], tt[MAX_THREADS];
    cbf_net_choice choice = {.transport = o->transport, .where = "cbf-bench net --transport"};
    cbf_error err = {0};
    int rc = 0, opened = 0;
    /* A port free on the interface for this run: ask the kernel for one. */
    int port = 0;
    if ((rc = netns_enter(o->ns_rx, &err))) {
        fprintf(stderr, "cbf-bench net: %s\n", err.msg);
        return 1;
    }
    {
        cbf_udp_endpoint any;
        int fd;
        char text[64];
        snprintf(text, sizeof text, "%s:1", o->iface);
        if (!(rc = cbf_udp_parse_endpoint(text, "cbf-bench net --interface", &any, &err))) {
            any.addr.sin_port = 0;
            any.multicast = false;
            if (!(rc = cbf_udp_open_rx(&any, o->iface, 4096, false, &fd, &err))) {
                socklen_t l = sizeof any.addr;
                getsockname(fd, (struct sockaddr *)&any.addr, &l);
                port = ntohs(any.addr.sin_port);
                close(fd);
            }
        }
    }
    for (int i = 0; i < threads && !rc; i++, opened++) {
        rx[i] = (thread_arg){.sh = &sh, .index = i};
        tx[i] = (thread_arg){.sh = &sh, .index = i};
        cbf_net_rx_config rcfg = {.iface = o->iface, .rcvbuf = 64 << 20, .reuseport = !o->group,
                                  .timeout_ms = 100, .batch = BATCH, .max_packet = 9216, .gro = gro,
                                  .choice = choice};
        cbf_net_tx_config tcfg = {.iface = o->tx_iface ? o->tx_iface : o->iface, .ttl = 1, .sndbuf = 8 << 20,
                                  .max_packet = s->packet, .batch = BATCH, .gso = gso, .choice = choice};
        if (!(rc = netns_enter(o->ns_rx, &err)) && !(rc = endpoint(o, i, port, &rcfg.ep, &err)) &&
            !(rc = cbf_net_rx_open(&rcfg, &rx[i].rx, &err)) && !(rc = netns_enter(o->ns_tx, &err)))
            rc = cbf_net_tx_open(&tcfg, &tx[i].tx, &err);
        tx[i].to = rcfg.ep;
    }
    if (netns_enter(o->ns_home, &err) && !rc)
        rc = 1;
    if (rc) {
        fprintf(stderr, "cbf-bench net: %s\n", err.msg);
        for (int i = 0; i < opened + 1 && i < MAX_THREADS; i++) {
            cbf_net_rx_close(rx[i].rx);
            cbf_net_tx_close(tx[i].tx, NULL);
        }
        return 1;
    }
    for (int i = 0; i < threads; i++)
        pthread_create(&rt[i], NULL, recv_loop, &rx[i]);
    double t0 = now_s();
    for (int i = 0; i < threads; i++)
        pthread_create(&tt[i], NULL, send_loop, &tx[i]);
    struct timespec ts = {(time_t)o->seconds, (long)((o->seconds - (double)(time_t)o->seconds) * 1e9)};
    nanosleep(&ts, NULL);   /* the measurement interval itself */
    atomic_store(&sh.stop, true);
    for (int i = 0; i < threads; i++) {
        pthread_join(tt[i], NULL);
        pthread_join(rt[i], NULL);
        if (!rc && (rx[i].rc || tx[i].rc)) {
            fprintf(stderr, "cbf-bench net: %s\n", rx[i].rc ? rx[i].err.msg : tx[i].err.msg);
            rc = 1;
        }
        cbf_net_tx_close(tx[i].tx, NULL);
        cbf_net_rx_close(rx[i].rx);
    }
    double dt = now_s() - t0, tx_cpu = 0, rx_cpu = 0;
    for (int i = 0; i < threads; i++)
        tx_cpu += tx[i].cpu, rx_cpu += rx[i].cpu;
    double txp = (double)sh.tx_packets, rxp = (double)sh.rx_packets;
    *out = (result){.tx_pps = txp / dt, .tx_gbps = (double)sh.tx_bytes * 8 / dt / 1e9, .rx_pps = rxp / dt,
                    .rx_gbps = (double)sh.rx_bytes * 8 / dt / 1e9, .heaps_ps = (double)sh.rx_heaps / dt,
                    .lost = txp > 0 ? 100.0 * (1 - rxp / txp) : 0.0,
                    .tx_core = tx_cpu > 0 ? (double)sh.tx_bytes * 8 / tx_cpu / 1e9 : 0,
                    .rx_core = rx_cpu > 0 ? (double)sh.rx_bytes * 8 / rx_cpu / 1e9 : 0};
    return rc;
}

typedef struct feeder {
    const options *o;
    cbf_net_tx *tx;
    cbf_udp_endpoint to;
    int index, threads;
    double t0;
    uint64_t packets, bytes;
    int rc;
    cbf_error err;
} feeder;

/* Heaps k = index, index + threads, ...: heap k is pol k % 2 of timestamp
 * (k / 2) x 4096; paced per batch to this thread's share of the rate. */
static void *feed_loop(void *arg)
{
    feeder *f = arg;
    const options *o = f->o;
    uint8_t payload[5120];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 131 + 7);
    double share = o->gbps * 1e9 / 8 / f->threads;   /* bytes/s */
    for (uint64_t k = (uint64_t)f->index; !f->rc; k += (uint64_t)f->threads) {
        double t = now_s() - f->t0;
        if (t >= o->seconds)
            break;
        cbf_spead_item_out items[] = {
            {.id = 0x1600, .immediate = true, .value = k / 2 * 4096},
            {.id = 0x3101, .immediate = true, .value = k % 2},
            {.id = 0x3102, .immediate = true, .value = 0},
            {.id = 0x3300, .data = payload, .len = sizeof payload},
        };
        cbf_spead_encoder e;
        uint8_t *p;
        int full = 0;
        if ((f->rc = cbf_spead_encoder_init(&e, k, items, 4, 9000, true, &f->err)) ||
            (f->rc = cbf_net_tx_buffer(f->tx, &p, &f->err)))
            break;
        size_t len = cbf_spead_encoder_next(&e, p);
        if ((full = cbf_net_tx_commit(f->tx, len, &f->to, &f->err)) < 0)
            f->rc = full;
        f->packets++;
        f->bytes += len;
        if (full == 1) {
            double ahead = (double)f->bytes / share - t;
            if (ahead > 0) {
                struct timespec ts = {(time_t)ahead, (long)((ahead - (double)(time_t)ahead) * 1e9)};
                nanosleep(&ts, NULL);
            }
            f->rc = cbf_net_tx_flush(f->tx, NULL, &f->err);
        }
    }
    if (!f->rc)
        f->rc = cbf_net_tx_flush(f->tx, NULL, &f->err);
    return NULL;
}

static int feed(const options *o)
{
    feeder f[MAX_THREADS] = {0};
    pthread_t th[MAX_THREADS];
    cbf_error err = {0};
    cbf_udp_endpoint to;
    cbf_net_tx_config tcfg = {.iface = o->iface, .ttl = 1, .sndbuf = 8 << 20, .max_packet = 9000,
                              .batch = BATCH,
                              .choice = {.transport = o->transport, .where = "cbf-bench net --transport"}};
    int rc = cbf_udp_parse_endpoint(o->feed, "cbf-bench net --feed", &to, &err);
    for (int i = 0; i < o->max_threads && !rc; i++) {
        f[i] = (feeder){.o = o, .to = to, .index = i, .threads = o->max_threads};
        rc = cbf_net_tx_open(&tcfg, &f[i].tx, &err);
    }
    double t0 = now_s();
    for (int i = 0; i < o->max_threads && !rc; i++) {
        f[i].t0 = t0;
        pthread_create(&th[i], NULL, feed_loop, &f[i]);
    }
    uint64_t packets = 0, bytes = 0;
    for (int i = 0; i < o->max_threads && !rc; i++) {
        pthread_join(th[i], NULL);
        packets += f[i].packets;
        bytes += f[i].bytes;
        if (f[i].rc && !rc) {
            rc = f[i].rc;
            err = f[i].err;
        }
    }
    double dt = now_s() - t0;
    if (!rc) {   /* the stream stop, after every thread's last heap */
        uint8_t *p;
        if (!(rc = cbf_net_tx_buffer(f[0].tx, &p, &err)) &&
            (rc = cbf_net_tx_commit(f[0].tx, cbf_spead_encode_stop(UINT64_C(1) << 40, p), &to, &err)) >= 0)
            rc = cbf_net_tx_flush(f[0].tx, NULL, &err);
    }
    for (int i = 0; i < o->max_threads; i++)
        cbf_net_tx_close(f[i].tx, NULL);
    if (rc) {
        fprintf(stderr, "cbf-bench net: %s\n", err.msg);
        return 1;
    }
    printf("fed %llu digitiser heaps (%llu bytes) in %.3f s on %d threads: %.2f Gb/s of UDP payload\n",
           (unsigned long long)packets, (unsigned long long)bytes, dt, o->max_threads,
           (double)bytes * 8 / dt / 1e9);
    return 0;
}

static int net_transport(const char *v, void *value)
{
    *(const char **)value = v;
    return strcmp(v, "socket") && strcmp(v, "ibverbs");
}

static int net_offload(const char *v, void *value)
{
    *(const char **)value = v;
    return strcmp(v, "off") && strcmp(v, "on") && strcmp(v, "gro") && strcmp(v, "both") && strcmp(v, "all");
}

static int net_group(const char *v, void *value)
{
    struct in_addr g;
    if (inet_pton(AF_INET, v, &g) != 1 || !IN_MULTICAST(ntohl(g.s_addr)))
        return -1;
    *(uint32_t *)value = ntohl(g.s_addr);
    return 0;
}

static int net_table(const options *op);

int cbf_bench_net(int argc, char **argv)
{
    options o = {.iface = "127.0.0.1", .transport = "socket", .offload = "both", .seconds = 2,
                 .max_threads = 4, .ns_rx = -1, .ns_tx = -1, .ns_home = -1};
    const cbf_bench_opt table[] = {
        {"--seconds", CBF_BOPT_REAL, &o.seconds, .lo = 1e-3, .hi = 1e6},
        {"--threads", CBF_BOPT_INT, &o.max_threads, .lo = 1, .hi = MAX_THREADS},
        {"--feed", CBF_BOPT_TEXT, &o.feed},
        {"--gbps", CBF_BOPT_REAL, &o.gbps, .lo = 1e-6, .hi = 1e4},
        {"--interface", CBF_BOPT_TEXT, &o.iface},
        {"--transport", CBF_BOPT_TEXT, &o.transport, .check = net_transport},
        {"--group", CBF_BOPT_TEXT, &o.group, .check = net_group},
        {"--offload", CBF_BOPT_TEXT, &o.offload, .check = net_offload},
        {"--netns", CBF_BOPT_FLAG, &o.netns, .set = 1},
        {0},
    };
    int rc = cbf_bench_parse("net",
                             "usage: cbf-bench net [--seconds S (2)] [--threads MAX (4)]\n"
                             "                     [--interface ADDR (127.0.0.1)]\n"
                             "                     [--transport socket|ibverbs (socket)] [--group A.B.C.D]\n"
                             "                     [--offload off|gro|on|both|all (both)] [--netns]\n"
                             "       cbf-bench net --feed A.B.C.D:PORT --gbps R [--threads T (4)]\n"
                             "                     [--seconds S (2)]\n"
                             "SPEAD over UDP through cbf's transport interface: 1, 2, ... MAX sender\n"
                             "and receiver threads per stream, unicast to the interface's address\n"
                             "(SO_REUSEPORT), or thread i to multicast group + i with --group (needed\n"
                             "by ibverbs for several threads). --offload: the sockets' UDP_SEGMENT\n"
                             "sends and UDP_GRO receives off, the receiver's alone (gro), both (on),\n"
                             "off and on (both) or all three. --netns: senders and receivers in two\n"
                             "network namespaces joined by a veth pair with GRO on (made and removed\n"
                             "by the run; root), instead of loopback.\n"
                             "--feed: be a digitiser (one antenna's heaps, T threads, R Gb/s) for a\n"
                             "receiver pipeline.\n",
                             argc, argv, table);
    if (rc)
        return rc == 1 ? 0 : rc;
    if (o.feed) {
        if (o.gbps <= 0) {
            fprintf(stderr, "cbf-bench net: --feed needs --gbps > 0\n");
            return 2;
        }
        return feed(&o);
    }
    if (o.netns && (o.group || strcmp(o.transport, "socket"))) {
        fprintf(stderr, "cbf-bench net: --netns is for unicast sockets\n");
        return 2;
    }
    if (o.netns && netns_up(&o)) {
        netns_down(&o);
        return 1;
    }
    int st = net_table(&o);
    if (o.netns)
        netns_down(&o);
    return st;
}

static int net_table(const options *op)
{
    const options o = *op;
    printf("# transport %s, interface %s%s, %s; rates of UDP payload\n", o.transport, o.iface,
           !o.netns ? "" : o.veth_gro ? " (a veth pair between two namespaces, GRO on)"
                                      : " (a veth pair between two namespaces, GRO off)",
           o.group ? "one multicast group per thread" : "unicast, receivers share the port");
    printf("# each stream row follows a udp-only row: datagrams of the same size and threads with no\n"
           "# SPEAD encoding or assembly, the ceiling of the path; rx/ceil = rx pkt/s over the ceiling's;\n"
           "# off/gro/on: the sockets' UDP_SEGMENT sends and UDP_GRO receives (gro: the receiver's\n"
           "# alone); /core: Gb/s per CPU second\n"
           "# the sending or receiving threads used\n");
    printf("%-9s %3s %7s %3s %12s %8s %12s %8s %10s %8s %9s %8s %8s\n", "stream", "ofl", "packet", "thr",
           "tx pkt/s", "tx Gb/s", "rx pkt/s", "rx Gb/s", "heaps/s", "lost", "rx/ceil", "tx/core", "rx/core");
    /* Modes: off, gro (the receiver's alone), on (both). */
    static const char *const names[3] = {"off", "gro", "on"};
    bool use[3] = {false, false, false};
    const char *v = o.offload;
    use[0] = !strcmp(v, "off") || !strcmp(v, "both") || !strcmp(v, "all");
    use[1] = !strcmp(v, "gro") || !strcmp(v, "all");
    use[2] = !strcmp(v, "on") || !strcmp(v, "both") || !strcmp(v, "all");
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int t = 1; t <= o.max_threads; t *= 2)
            for (int m = 0; m < 3; m++) {
                if (!use[m])
                    continue;
                result ceil, r;
                const char *mode = names[m];
                if (one_run(&shapes[k], t, true, m == 2, m >= 1, &o, &ceil) ||
                    one_run(&shapes[k], t, false, m == 2, m >= 1, &o, &r))
                    return 1;
                printf("%-9s %3s %7zu %3d %12.0f %8.2f %12.0f %8.2f %10s %7.2f%% %9s %8.2f %8.2f\n",
                       "udp-only", mode, shapes[k].packet, t, ceil.tx_pps, ceil.tx_gbps, ceil.rx_pps,
                       ceil.rx_gbps, "-", ceil.lost, "-", ceil.tx_core, ceil.rx_core);
                printf("%-9s %3s %7zu %3d %12.0f %8.2f %12.0f %8.2f %10.0f %7.2f%% %9.2f %8.2f %8.2f\n",
                       shapes[k].name, mode, shapes[k].packet, t, r.tx_pps, r.tx_gbps, r.rx_pps, r.rx_gbps,
                       r.heaps_ps, r.lost, ceil.rx_pps > 0 ? r.rx_pps / ceil.rx_pps : 0.0, r.tx_core,
                       r.rx_core);
                fflush(stdout);
            }
    return 0;
}
