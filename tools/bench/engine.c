/* cbf-bench engine: whole pipelines through the runtime, as a user runs
 * them: real YAML, real plugins, libcbf's engine API in this process (one
 * engine per thread where a case needs several), rates read from the nodes'
 * counters over a timed window after a warm-up, and every run ended by the
 * engine's stop request (what SIGINT does in cbf-run) and drained, so that
 * cbf_engine_run's pool check proves every buffer came back.
 *
 *   (a) F-engine from host memory on the GPU: dsim -> upload -> K x (pfb ->
 *       fft_post) -> discard, against the PCIe bound measured in the run;
 *   (b) the network F-engine on loopback: dsim (real time) -> sender =>
 *       receiver -> K x (pfb -> fft_post -> sender) => receiver -> discard,
 *       three engines, K = 1, 2, ... antennas until one loses data;
 *   (c) the X-engine: 64 antennas' F-engine heaps => receiver -> correlator
 *       -> reducer -> sender => a draining socket, stepping the offered rate
 *       up against a plain UDP blast measured in the run;
 *   (d) (a) on the CPU path, in antennas per core.
 *
 * Parameters other branches add (dsim mode, realtime, memory; receiver and
 * sender threads and affinity) are written only when the loaded plugin
 * declares them; otherwise the plugin's default runs and the table says so. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cbf/gpu.h"
#include "cbf/graph.h"
#include "cbf/log.h"

#ifdef CBF_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define ANT_RATE (2 * 1712e6)    /* samples/s of one MeerKAT L-band antenna, both pols */
#define IN_BYTES_PER_SAMPLE 1.25 /* 10-bit digitiser samples */
#define MAX_NODES 256
#define MAX_LIST 32
#define XENG_ANTS 64
#define DGRAM 8872 /* jumbo-frame UDP payload, the F- and X-engine packet size */

typedef struct eng_opts {
    char cases[8];
    double seconds, warmup, scale;
    int ants[MAX_LIST], n_ants;
    int channels[8], n_channels;
    int xeng_channels, rx_threads;
    bool verbose;
    double fractions[MAX_LIST];
    int n_fractions;
    const char *gpu; /* NULL: each case's own */
    const char *dirs[8];
    size_t n_dirs;
} eng_opts;

typedef struct eng_bench {
    const eng_opts *o;
    cbf_registry *reg;
    int cores;
    char notes[16][160];
    int n_notes;
} eng_bench;

static double eng_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void eng_sleep(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&t, &t))
        ;
}

/* ---- parameters the loaded plugins may not know yet ---- */

static bool eng_choice_has(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = choices; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, v, n))
            return true;
        p = bar ? bar + 1 : NULL;
    }
    return false;
}

static void eng_note(eng_bench *b, const char *fmt, const char *plugin, const char *param, const char *value)
{
    char line[160];
    snprintf(line, sizeof line, fmt, plugin, param, value);
    for (int i = 0; i < b->n_notes; i++)
        if (!strcmp(b->notes[i], line))
            return;
    if (b->n_notes < 16)
        snprintf(b->notes[b->n_notes++], sizeof b->notes[0], "%s", line);
}

/* Whether `plugin` declares `param` (and, for a choice, the value). */
static bool eng_supports(eng_bench *b, const char *plugin, const char *param, const char *value)
{
    const cbf_plugin_desc *d = cbf_registry_find(b->reg, plugin);
    for (int i = 0; d && i < d->n_params; i++)
        if (!strcmp(d->params[i].name, param))
            return d->params[i].type != CBF_PARAM_CHOICE || eng_choice_has(d->params[i].choices, value);
    eng_note(b, "%s has no `%s: %s` in this build: its default runs instead", plugin, param, value);
    return false;
}

/* ", param: value" when the plugin takes it; the note says when not. */
static void eng_opt(eng_bench *b, FILE *f, const char *plugin, const char *param, const char *value)
{
    if (eng_supports(b, plugin, param, value))
        fprintf(f, ", %s: %s", param, value);
}

/* ---- one engine on its own thread ---- */

typedef struct eng_run {
    const char *label;
    cbf_graph *g;
    cbf_engine *e;
    pthread_t t;
    bool started;
    atomic_bool done;
    int rc;
    cbf_error err;
} eng_run;

typedef struct eng_snap {
    cbf_node_stats s[MAX_NODES];
    size_t n;
    double t;
} eng_snap;

static void *eng_thread(void *arg)
{
    eng_run *r = arg;
    r->rc = cbf_engine_run(r->e, &r->err);
    atomic_store(&r->done, true);
    return NULL;
}

/* Writes the YAML to a temporary file, loads, creates and starts it. */
static int eng_start(eng_bench *b, eng_run *r, const char *label, const char *yaml)
{
    memset(r, 0, sizeof *r);
    r->label = label;
    char path[] = "/tmp/cbf-bench-engine-XXXXXX.yaml";
    int fd = mkstemps(path, 5);
    if (fd < 0) {
        perror("cbf-bench engine: temporary pipeline");
        return 1;
    }
    size_t len = strlen(yaml);
    bool ok = write(fd, yaml, len) == (ssize_t)len;
    close(fd);
    cbf_error_clear(&r->err);
    int rc = ok ? cbf_graph_load(path, NULL, 0, b->reg, &r->g, &r->err) : 1;
    if (!rc)
        rc = cbf_engine_create(r->g, &r->e, &r->err);
    unlink(path);
    if (rc) {
        fprintf(stderr, "cbf-bench engine: %s: %s\n%s", label, ok ? r->err.msg : "cannot write the pipeline",
                yaml);
        return 1;
    }
    if (pthread_create(&r->t, NULL, eng_thread, r)) {
        fprintf(stderr, "cbf-bench engine: %s: cannot start its thread\n", label);
        return 1;
    }
    r->started = true;
    return 0;
}

/* Waits up to `grace` seconds for the engine to drain by itself (the end of
 * its stream), then asks it to stop; returns its run status. */
static int eng_finish(eng_run *r, double grace)
{
    if (!r->started)
        return r->e ? 0 : 1;
    for (double until = eng_now() + grace; !atomic_load(&r->done) && eng_now() < until;)
        eng_sleep(0.01);
    cbf_engine_stop(r->e);
    pthread_join(r->t, NULL);
    r->started = false;
    if (r->rc)
        fprintf(stderr, "cbf-bench engine: %s: %s\n", r->label, r->err.msg);
    return r->rc;
}

static void eng_free(eng_run *r)
{
    if (r->started)
        eng_finish(r, 0);
    cbf_engine_free(r->e);
    cbf_graph_free(r->g);
    r->e = NULL;
    r->g = NULL;
}

/* --verbose: the window's counter deltas of every node, to see what limits. */
static void eng_show(const eng_run *r, const eng_snap *a, const eng_snap *z)
{
    printf("    %s, over the window:\n", r->label);
    for (size_t i = 0; i < z->n && i < a->n; i++) {
        const cbf_node_stats *p = &a->s[i], *q = &z->s[i];
        printf("      %-8s %-10s in %llu out %llu busy %.2f s wait-in %.2f s wait-out %.2f s", q->name, q->plugin,
               (unsigned long long)(q->buffers_in - p->buffers_in),
               (unsigned long long)(q->buffers_out - p->buffers_out), q->busy_s - p->busy_s,
               q->wait_input_s - p->wait_input_s, q->wait_output_s - p->wait_output_s);
        for (int k = 0; k < q->n_counters; k++)
            if (q->counter_values[k] != p->counter_values[k])
                printf(" %s+%llu", q->counter_names[k],
                       (unsigned long long)(q->counter_values[k] - p->counter_values[k]));
        printf("\n");
    }
}

static void eng_take(const eng_run *r, eng_snap *s)
{
    s->n = r->e ? cbf_engine_stats(r->e, s->s, MAX_NODES) : 0;
    s->t = eng_now();
}

/* Sum of a counter over the nodes of one plugin. */
static uint64_t eng_count(const eng_snap *s, const char *plugin, const char *counter)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->s[i].plugin, plugin))
            for (int k = 0; k < s->s[i].n_counters; k++)
                if (!strcmp(s->s[i].counter_names[k], counter))
                    sum += s->s[i].counter_values[k];
    return sum;
}

static uint64_t eng_delta(const eng_snap *a, const eng_snap *z, const char *plugin, const char *counter)
{
    return eng_count(z, plugin, counter) - eng_count(a, plugin, counter);
}

/* What a receiver lost over the window: the kernel's drops, heaps that never
 * completed or came too late, and the heaps flagged missing in its chunks. */
static uint64_t eng_rx_lost(const eng_snap *a, const eng_snap *z)
{
    static const char *const lost[] = {"packets_dropped_kernel", "heaps_incomplete", "heaps_late",
                                       "flags_missing"};
    uint64_t n = 0;
    for (size_t i = 0; i < sizeof lost / sizeof lost[0]; i++)
        n += eng_delta(a, z, "receiver", lost[i]);
    return n;
}

static char *eng_text(FILE *f, char **buf)
{
    fclose(f);
    return *buf;
}

static const char *eng_gpu(const eng_bench *b, const char *def)
{
    return b->o->gpu ? b->o->gpu : def;
}

static int eng_threads(const eng_bench *b)
{
    return b->cores < 64 ? b->cores : 64;
}

/* dsim as a replaying source at full speed or paced to the wall clock. */
static void eng_dsim(eng_bench *b, FILE *f, int ants, bool realtime, double rate_scale)
{
    char threads[16];
    snprintf(threads, sizeof threads, "%d", eng_threads(b));
    fprintf(f, "  dsim: {plugin: dsim, params: {antennas: %d, threads: %s", ants, threads);
    eng_opt(b, f, "dsim", "mode", "replay");
    eng_opt(b, f, "dsim", "memory", "auto");
    if (realtime) {
        eng_opt(b, f, "dsim", "realtime", "true");
        if (rate_scale != 1.0)
            fprintf(f, ", adc_sample_rate: %.9g", 1712e6 * rate_scale);
    }
    fprintf(f, "}}\n");
}

/* K F-engine chains after `up`, ending at `end(k)`. */
static void eng_chains(FILE *f, int ants, int channels)
{
    fprintf(f, "  up: {plugin: upload}\n");
    for (int k = 0; k < ants; k++)
        fprintf(f, "  pfb%d: {plugin: pfb, params: {channels: %d, antenna: %d}}\n  post%d: {plugin: fft_post}\n", k,
                channels, k, k);
}

static void eng_chain_edges(FILE *f, const char *from, int ants)
{
    fprintf(f, "edges:\n  - %s -> up.in\n", from);
    for (int k = 0; k < ants; k++)
        fprintf(f, "  - up.out -> pfb%d.in\n  - pfb%d.out -> post%d.in\n", k, k, k);
}

static void eng_header(const eng_bench *b, const char *title)
{
    time_t t = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&t));
    printf("\n### %s\n\n%s; GPU: %s; %d CPU cores; warm-up %.1f s, window %.1f s\n\n", title, date,
           cbf_gpu_describe(0), b->cores, b->o->warmup, b->o->seconds);
}

static void eng_notes(eng_bench *b)
{
    for (int i = 0; i < b->n_notes; i++)
        printf("note: %s\n", b->notes[i]);
    b->n_notes = 0;
}

/* ---- the PCIe bound (a): pinned copies both ways at once ---- */

#ifdef CBF_HAVE_CUDA
#define ECK(call)                                                                        \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            fprintf(stderr, "cbf-bench engine: %s: %s\n", #call, cudaGetErrorString(e_)); \
            rc = 1;                                                                      \
            goto out;                                                                    \
        }                                                                                \
    } while (0)

/* GB/s of host-to-device and device-to-host copies of 256 MiB between
 * pinned and device buffers, on two streams running together. */
static int eng_pcie(double *h2d, double *d2h)
{
    const size_t bytes = (size_t)256 << 20;
    const int reps = 8;
    void *hin = NULL, *hout = NULL, *din = NULL, *dout = NULL;
    cudaStream_t s[2] = {NULL, NULL};
    cudaEvent_t ev[4] = {NULL, NULL, NULL, NULL};
    int rc = 0;
    ECK(cudaHostAlloc(&hin, bytes, cudaHostAllocDefault));
    ECK(cudaHostAlloc(&hout, bytes, cudaHostAllocDefault));
    ECK(cudaMalloc(&din, bytes));
    ECK(cudaMalloc(&dout, bytes));
    memset(hin, 1, bytes);
    for (int i = 0; i < 2; i++)
        ECK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    for (int i = 0; i < 4; i++)
        ECK(cudaEventCreate(&ev[i]));
    ECK(cudaMemcpyAsync(din, hin, bytes, cudaMemcpyHostToDevice, s[0]));
    ECK(cudaMemcpyAsync(hout, dout, bytes, cudaMemcpyDeviceToHost, s[1]));
    ECK(cudaDeviceSynchronize());
    ECK(cudaEventRecord(ev[0], s[0]));
    ECK(cudaEventRecord(ev[2], s[1]));
    for (int i = 0; i < reps; i++) {
        ECK(cudaMemcpyAsync(din, hin, bytes, cudaMemcpyHostToDevice, s[0]));
        ECK(cudaMemcpyAsync(hout, dout, bytes, cudaMemcpyDeviceToHost, s[1]));
    }
    ECK(cudaEventRecord(ev[1], s[0]));
    ECK(cudaEventRecord(ev[3], s[1]));
    ECK(cudaDeviceSynchronize());
    float ms_in, ms_out;
    ECK(cudaEventElapsedTime(&ms_in, ev[0], ev[1]));
    ECK(cudaEventElapsedTime(&ms_out, ev[2], ev[3]));
    *h2d = (double)reps * (double)bytes / (ms_in * 1e-3) / 1e9;
    *d2h = (double)reps * (double)bytes / (ms_out * 1e-3) / 1e9;
out:
    for (int i = 0; i < 4; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    for (int i = 0; i < 2; i++)
        if (s[i])
            cudaStreamDestroy(s[i]);
    cudaFree(din);
    cudaFree(dout);
    cudaFreeHost(hin);
    cudaFreeHost(hout);
    return rc;
}
#else
static int eng_pcie(double *h2d, double *d2h)
{
    *h2d = *d2h = 0;
    return 1;
}
#endif

/* ---- (a) and (d): the F-engine fed from host memory ---- */

typedef struct eng_result {
    double rate; /* input samples/s, both pols, all antennas */
    uint64_t missing, buffers;
    int rc;
} eng_result;

/* The warm-up, and then until the sink has seen `min` buffers (the first
 * carry the start-up's flagged spectra, which are not loss), for at most a
 * minute: a slow machine must not put start-up inside the window. */
static void eng_warm(const eng_bench *b, const eng_run *r, const char *plugin, const char *counter, uint64_t min)
{
    eng_sleep(b->o->warmup);
    eng_snap *s = malloc(sizeof *s);
    for (double until = eng_now() + 60; s && eng_now() < until && !atomic_load(&r->done); eng_sleep(0.05)) {
        eng_take(r, s);
        if (eng_count(s, plugin, counter) >= min)
            break;
    }
    free(s);
}

static eng_result eng_feng_once(eng_bench *b, bool gpu, int ants, int channels)
{
    eng_result res = {0, 0, 1};
    char *yaml = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&yaml, &len);
    fprintf(f, "engine: {name: bench-feng, gpu: %s}\nnodes:\n", eng_gpu(b, gpu ? "required" : "none"));
    eng_dsim(b, f, ants, false, 1.0);
    eng_chains(f, ants, channels);
    fprintf(f, "  sink: {plugin: discard}\n");
    eng_chain_edges(f, "dsim.out", ants);
    for (int k = 0; k < ants; k++)
        fprintf(f, "  - post%d.out -> sink.in\n", k);
    eng_run r;
    eng_snap *s = malloc(2 * sizeof *s);
    if (!eng_start(b, &r, "F-engine", eng_text(f, &yaml))) {
        eng_warm(b, &r, "discard", "buffers", 2 * (uint64_t)ants);
        eng_take(&r, &s[0]);
        eng_sleep(b->o->seconds);
        eng_take(&r, &s[1]);
        if (b->o->verbose)
            eng_show(&r, &s[0], &s[1]);
        res.rc = eng_finish(&r, 0);
        /* 8-bit complex out: one byte per input sample. */
        res.rate = (double)eng_delta(&s[0], &s[1], "discard", "bytes") / (s[1].t - s[0].t);
        res.missing = eng_delta(&s[0], &s[1], "discard", "missing");
        res.buffers = eng_delta(&s[0], &s[1], "discard", "buffers");
    }
    eng_free(&r);
    free(s);
    free(yaml);
    return res;
}

static int eng_case_feng(eng_bench *b, bool gpu)
{
    eng_header(b, gpu ? "(a) F-engine from host memory, GPU" : "(d) F-engine from host memory, CPU");
    if (gpu && !strcmp(eng_gpu(b, "required"), "required") && cbf_gpu_count() == 0) {
        printf("skipped: no GPU (%s)\n", cbf_gpu_describe(0));
        return 0;
    }
    double h2d = 0, d2h = 0, bound = 0;
    if (gpu && !eng_pcie(&h2d, &d2h)) {
        bound = h2d * 1e9 / IN_BYTES_PER_SAMPLE < d2h * 1e9 ? h2d * 1e9 / IN_BYTES_PER_SAMPLE : d2h * 1e9;
        printf("PCIe, pinned copies both ways at once: %.2f GB/s in, %.2f GB/s out: bound %.1f Gsample/s "
               "(%.2f antennas at 4.28 GB/s in, 3.42 GB/s out each)\n\n",
               h2d, d2h, bound / 1e9, bound / ANT_RATE);
    }
    if (gpu)
        printf("| channels | antennas | Gsample/s | antennas of rate | real time per antenna | of PCIe bound | "
               "buffers | missing | status |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    else
        printf("| channels | antennas | Gsample/s | antennas of rate | antennas per core | buffers | missing | "
               "status |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    int failed = 0;
    for (int c = 0; c < b->o->n_channels; c++) {
        double best = 0;
        int best_k = 0;
        for (int i = 0; i < b->o->n_ants; i++) {
            int k = b->o->ants[i], ch = b->o->channels[c];
            eng_result r = eng_feng_once(b, gpu, k, ch);
            bool ok = !r.rc && !r.missing;
            failed += !ok;
            if (ok && r.rate > best)
                best = r.rate, best_k = k;
            printf("| %d | %d | %.3f | %.3f | %.3f | ", ch, k, r.rate / 1e9, r.rate / ANT_RATE,
                   gpu ? r.rate / ANT_RATE / k : r.rate / ANT_RATE / b->cores);
            if (gpu)
                printf(bound > 0 ? "%.2f | " : "- | ", r.rate / (bound > 0 ? bound : 1));
            /* The window counts whole buffers: with few, the rate is coarse. */
            printf("%llu | %llu | %s%s |\n", (unsigned long long)r.buffers, (unsigned long long)r.missing,
                   r.rc ? "run failed" : r.missing ? "loss" : "ok, drained",
                   r.buffers < 20 && !r.rc ? " (few buffers: coarse rate)" : "");
            fflush(stdout);
        }
        printf("\nhighest at %d channels: %.3f Gsample/s with %d antennas: %.2f antennas of rate %s", b->o->channels[c],
               best / 1e9, best_k, best / ANT_RATE, gpu ? "per GPU" : "");
        if (gpu && bound > 0)
            printf(" (%.2f of the PCIe bound)", best / bound);
        if (!gpu)
            printf("(%.3f per core)", best / ANT_RATE / b->cores);
        printf("\n\n");
    }
    eng_notes(b);
    printf("case %c: %s\n", gpu ? 'a' : 'd', failed ? "LOSS or failure in some row" : "zero loss in every row");
    return failed ? 1 : 0;
}

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
    eng_sleep(b->o->warmup < 0.5 ? b->o->warmup : 0.5);
    uint64_t r0 = atomic_load(&u.rx_bytes);
    double t0 = eng_now();
    eng_sleep(b->o->seconds);
    double rate = (double)(atomic_load(&u.rx_bytes) - r0) / (eng_now() - t0);
    eng_udp_close(&u);
    return rate;
}

static void eng_rx_threads(eng_bench *b, FILE *f)
{
    char t[16];
    snprintf(t, sizeof t, "%d", b->o->rx_threads);
    if (b->o->rx_threads > 1)
        eng_opt(b, f, "receiver", "threads_per_address", t);
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
    eng_rx_threads(b, f);
    fprintf(f, "}}\n  sink: {plugin: discard}\nedges:\n  - recv.batches -> sink.in\n");
    eng_text(f, &y[2]);

    f = open_memstream(&y[1], &len[1]);
    fprintf(f, "engine: {name: bench-net-f, gpu: %s}\nnodes:\n"
               "  recv: {plugin: receiver, params: {address: 127.0.0.1:%d, antennas: %d, stops: 1, "
               "chunks_in_flight: 4, buffers: 8",
            eng_gpu(b, "auto"), p1, ants);
    eng_rx_threads(b, f);
    fprintf(f, "}}\n");
    eng_chains(f, ants, channels);
    for (int k = 0; k < ants; k++) {
        fprintf(f, "  send%d: {plugin: sender, params: {destinations: 127.0.0.1:%d, channels_per_heap: %d", k, p2,
                heap_ch);
        eng_opt(b, f, "sender", "threads", "2");
        fprintf(f, "}}\n");
    }
    eng_chain_edges(f, "recv.out", ants);
    for (int k = 0; k < ants; k++)
        fprintf(f, "  - post%d.out -> send%d.in\n", k, k);
    eng_text(f, &y[1]);

    f = open_memstream(&y[0], &len[0]);
    fprintf(f, "engine: {name: bench-net-dig}\nnodes:\n");
    eng_dsim(b, f, ants, true, b->o->scale);
    fprintf(f, "  send: {plugin: sender, params: {destinations: 127.0.0.1:%d", p1);
    if (!eng_supports(b, "dsim", "realtime", "true"))
        /* Pace the sender instead: digitiser packets carry 72 header bytes per 5120. */
        fprintf(f, ", rate_gbps: %.6g", row.target * IN_BYTES_PER_SAMPLE * 8 * 5192.0 / 5120.0 / 1e9);
    eng_opt(b, f, "sender", "threads", "2");
    fprintf(f, "}}\nedges:\n  - dsim.out -> send.in\n");
    eng_text(f, &y[0]);

    eng_run r[3];
    eng_snap *s = malloc(6 * sizeof *s);
    memset(r, 0, sizeof r);
    static const char *const labels[3] = {"digitiser engine", "F-engine", "X-side receiver"};
    /* Receivers first, so the senders find their sockets. */
    bool ok = !eng_start(b, &r[2], labels[2], y[2]) && !eng_start(b, &r[1], labels[1], y[1]) &&
              !eng_start(b, &r[0], labels[0], y[0]);
    if (ok) {
        eng_warm(b, &r[2], "discard", "buffers", 2);
        for (int i = 0; i < 3; i++)
            eng_take(&r[i], &s[i]);
        eng_sleep(b->o->seconds);
        for (int i = 0; i < 3; i++)
            eng_take(&r[i], &s[3 + i]);
        for (int i = 0; i < 3 && b->o->verbose; i++)
            eng_show(&r[i], &s[i], &s[3 + i]);
        /* Heaps, not buffers: a window holds thousands of them. A digitiser
         * heap is 4096 samples of one pol; an F-engine heap covers 256
         * spectra of 2 x channels samples, both pols, for heap_ch channels. */
        row.source = (double)eng_delta(&s[1], &s[4], "receiver", "heaps") * 4096 / (s[4].t - s[1].t);
        row.rate = (double)eng_delta(&s[2], &s[5], "receiver", "heaps") * 1024 * heap_ch / (s[5].t - s[2].t);
        row.lost_dig = eng_rx_lost(&s[1], &s[4]);
        row.lost_feng = eng_rx_lost(&s[2], &s[5]);
        row.missing = eng_delta(&s[2], &s[5], "discard", "missing");
    }
    /* The source stops; its stream stops end the next engines in turn. */
    int rc = eng_finish(&r[0], 0);
    rc |= eng_finish(&r[1], 10);
    rc |= eng_finish(&r[2], 10);
    row.rc = ok ? rc : 1;
    for (int i = 0; i < 3; i++) {
        eng_free(&r[i]);
        free(y[i]);
    }
    free(s);
    return row;
}

static int eng_case_net(eng_bench *b)
{
    eng_header(b, "(b) network F-engine on loopback");
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
    eng_notes(b);
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
            eng_gpu(b, "auto"), px, XENG_ANTS, ch, XENG_ANTS);
    eng_rx_threads(b, f);
    fprintf(f, "}}\n  corr: {plugin: correlator, params: {heap_accumulation_threshold: 4}}\n"
               "  reduce: {plugin: reducer}\n"
               "  send: {plugin: sender, params: {destinations: 127.0.0.1:%d, rate_gbps: 1000}}\n"
               "edges:\n  - recv.batches -> corr.in\n  - corr.out -> reduce.in\n  - reduce.out -> send.in\n",
            drain.port);
    eng_text(f, &y[1]);
    /* One antenna's F-engine, sent as 64 (the feng_id differs): the X-engine
     * cannot tell, and the source costs one chain instead of 64. */
    f = open_memstream(&y[0], &len[0]);
    fprintf(f, "engine: {name: bench-xeng-feed, gpu: %s}\nnodes:\n", eng_gpu(b, "auto"));
    eng_dsim(b, f, 1, false, 1.0);
    eng_chains(f, 1, ch);
    for (int k = 0; k < XENG_ANTS; k++)
        fprintf(f, "  send%d: {plugin: sender, params: {destinations: 127.0.0.1:%d, feng_id: %d, rate_gbps: %.6g}}\n",
                k, px, k, offered * 8 / XENG_ANTS / 1e9);
    eng_chain_edges(f, "dsim.out", 1);
    for (int k = 0; k < XENG_ANTS; k++)
        fprintf(f, "  - post0.out -> send%d.in\n", k);
    eng_text(f, &y[0]);

    eng_run r[2];
    eng_snap *s = malloc(4 * sizeof *s);
    memset(r, 0, sizeof r);
    bool ok = !eng_start(b, &r[1], "X-engine", y[1]) && !eng_start(b, &r[0], "F-engine feed", y[0]);
    if (ok) {
        eng_warm(b, &r[1], "reducer", "dumps", 1);
        eng_take(&r[1], &s[0]);
        eng_take(&r[0], &s[2]);
        uint64_t d0 = atomic_load(&drain.rx_bytes);
        eng_sleep(b->o->seconds);
        eng_take(&r[1], &s[1]);
        eng_take(&r[0], &s[3]);
        if (b->o->verbose) {
            eng_show(&r[0], &s[2], &s[3]);
            eng_show(&r[1], &s[0], &s[1]);
        }
        row.out_bytes = atomic_load(&drain.rx_bytes) - d0;
        row.rate = (double)eng_delta(&s[0], &s[1], "receiver", "bytes") / (s[1].t - s[0].t);
        row.lost = eng_rx_lost(&s[0], &s[1]);
    }
    int rc = eng_finish(&r[0], 0);
    rc |= eng_finish(&r[1], 10);
    row.rc = ok ? rc : 1;
    for (int i = 0; i < 2; i++) {
        eng_free(&r[i]);
        free(y[i]);
    }
    eng_udp_close(&drain);
    free(s);
    return row;
}

static int eng_case_xeng(eng_bench *b)
{
    eng_header(b, "(c) X-engine, 64 antennas, one channel range");
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
    eng_notes(b);
    printf("case c: %s\n", failed ? "loss above the highest rate shown" : "zero loss at every rate offered");
    return 0;
}

/* ---- options ---- */

static int eng_ints(const char *s, int *out, int max)
{
    int n = 0;
    for (char *end; *s && n < max; s = *end ? end + 1 : end) {
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0 || (*end && *end != ','))
            return -1;
        out[n++] = (int)v;
    }
    return n;
}

static int eng_floats(const char *s, double *out, int max)
{
    int n = 0;
    for (char *end; *s && n < max; s = *end ? end + 1 : end) {
        double v = strtod(s, &end);
        if (end == s || v <= 0 || (*end && *end != ','))
            return -1;
        out[n++] = v;
    }
    return n;
}

static void eng_usage(FILE *f)
{
    fprintf(f,
            "usage: cbf-bench engine [--case a,b,c,d|all] [--seconds S] [--warmup S] [--ants 1,2,4,...]\n"
            "                        [--channels 32768,4096] [--gpu auto|required|none] [--scale F]\n"
            "                        [--rx-threads T] [--xeng-channels C] [--fractions 0.25,0.5,...]\n"
            "                        [--plugin-path DIR] [--verbose]\n"
            "  a  F-engine from host memory on the GPU (dsim -> upload -> K x pfb/fft_post -> discard)\n"
            "  b  network F-engine on loopback, K antennas of real time (x --scale) until one loses data\n"
            "  c  X-engine of 64 antennas' heaps against the loopback UDP ceiling (--fractions of it)\n"
            "  d  (a) on the CPU path, antennas per core\n"
            "  --verbose prints every node's counters over each run's window (what limits it)\n"
            "defaults: --case all --seconds 3 --warmup 1 --ants 1,2,4,8,16 --channels 32768,4096\n"
            "          --scale 1 --rx-threads 4 --xeng-channels 64 --fractions 0.1,0.25,0.5,0.7,0.8,0.9,1\n");
}

static int eng_parse(int argc, char **argv, eng_opts *o)
{
    static const int ants[] = {1, 2, 4, 8, 16};
    static const double fr[] = {0.1, 0.25, 0.5, 0.7, 0.8, 0.9, 1.0};
    *o = (eng_opts){.cases = "abcd", .seconds = 3, .warmup = 1, .scale = 1, .n_ants = 5,
                    .channels = {32768, 4096}, .n_channels = 2, .xeng_channels = 64, .rx_threads = 4,
                    .n_fractions = 7};
    memcpy(o->ants, ants, sizeof ants);
    memcpy(o->fractions, fr, sizeof fr);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool bad = false;
        if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            o->verbose = true;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            eng_usage(stdout);
            return 1;
        }
        if (!v) {
            bad = true;
        } else if (!strcmp(a, "--case")) {
            /* "a", "a,d", "ad" or "all" */
            size_t n = 0;
            for (const char *c = strcmp(v, "all") ? v : "abcd"; *c && !bad; c++)
                if (*c != ',')
                    bad = !strchr("abcd", *c) || n + 1 >= sizeof o->cases || !(o->cases[n++] = *c);
            o->cases[n] = '\0';
            bad = bad || !n;
        } else if (!strcmp(a, "--seconds")) {
            bad = (o->seconds = atof(v)) <= 0;
        } else if (!strcmp(a, "--warmup")) {
            bad = (o->warmup = atof(v)) < 0;
        } else if (!strcmp(a, "--scale")) {
            bad = (o->scale = atof(v)) <= 0;
        } else if (!strcmp(a, "--ants")) {
            bad = (o->n_ants = eng_ints(v, o->ants, MAX_LIST)) <= 0;
        } else if (!strcmp(a, "--channels")) {
            bad = (o->n_channels = eng_ints(v, o->channels, 8)) <= 0;
        } else if (!strcmp(a, "--rx-threads")) {
            bad = (o->rx_threads = atoi(v)) <= 0;
        } else if (!strcmp(a, "--xeng-channels")) {
            bad = (o->xeng_channels = atoi(v)) <= 0;
        } else if (!strcmp(a, "--fractions")) {
            bad = (o->n_fractions = eng_floats(v, o->fractions, MAX_LIST)) <= 0;
        } else if (!strcmp(a, "--gpu")) {
            bad = strcmp(v, "auto") && strcmp(v, "required") && strcmp(v, "none");
            o->gpu = v;
        } else if (!strcmp(a, "--plugin-path")) {
            if (o->n_dirs < 8)
                o->dirs[o->n_dirs++] = v;
        } else {
            bad = true;
        }
        if (bad) {
            fprintf(stderr, "cbf-bench engine: bad or incomplete option '%s'\n", a);
            eng_usage(stderr);
            return 2;
        }
        i++;
    }
    return 0;
}

int cbf_bench_engine(int argc, char **argv)
{
    eng_opts o;
    int st = eng_parse(argc, argv, &o);
    if (st)
        return st == 1 ? 0 : st;
    /* The build tree keeps cbf-bench in tools/bench/, two levels under the
     * plugins' folder; the registry's own guess is one level. */
    char exe[4096], dir[4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0 && o.n_dirs < 8) {
        exe[n] = '\0';
        *strrchr(exe, '/') = '\0';
        snprintf(dir, sizeof dir, "%s/../../plugins", exe);
        if (!access(dir, R_OK))
            o.dirs[o.n_dirs++] = dir;
    }
    if (cbf_log_get_level() > CBF_LOG_WARN)
        cbf_log_set_level(CBF_LOG_WARN);
    eng_bench b = {.o = &o, .cores = (int)sysconf(_SC_NPROCESSORS_ONLN)};
    cbf_error err;
    cbf_error_clear(&err);
    if (cbf_registry_open(o.dirs, o.n_dirs, &b.reg, &err)) {
        fprintf(stderr, "cbf-bench engine: %s\n", err.msg);
        return 2;
    }
    int rc = 0;
    printf("# cbf-bench engine: rates from the nodes' counters over %.1f s after %.1f s of warm-up; "
           "an antenna is MeerKAT L-band, 2 x 1712 Msample/s\n",
           o.seconds, o.warmup);
    for (const char *c = o.cases; *c; c++) {
        if (*c == 'a' || *c == 'd')
            rc |= eng_case_feng(&b, *c == 'a');
        else if (*c == 'b')
            rc |= eng_case_net(&b);
        else
            rc |= eng_case_xeng(&b);
    }
    cbf_registry_close(b.reg);
    return rc;
}
