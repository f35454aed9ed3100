/* Shared by the engine benchmark's files: options, one engine on its own
 * thread, counter snapshots, and the YAML pieces every case writes. */
#ifndef CBF_BENCH_ENGINE_H
#define CBF_BENCH_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cbf/graph.h"

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
    int xeng_channels, rx_threads, tx_threads;
    int spectra; /* pfb spectra_per_buffer, 0: the plugin's default */
    int chunk;   /* dsim samples_per_chunk (not real time), 0: the plugin's default */
    int verbose;
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

double cbf_bench_eng_now(void);
void cbf_bench_eng_sleep(double s);
/* Whether `plugin` declares `param` (and, for a choice, the value); a note
 * says when not. cbf_bench_eng_opt writes ", param: value" when it does. */
bool cbf_bench_eng_supports(eng_bench *b, const char *plugin, const char *param, const char *value);
void cbf_bench_eng_opt(eng_bench *b, FILE *f, const char *plugin, const char *param, const char *value);
/* Loads the YAML text (through a temporary file) and starts it on a thread. */
int cbf_bench_eng_start(eng_bench *b, eng_run *r, const char *label, const char *yaml);
/* Waits up to `grace` s for the engine to drain by itself, then asks it to
 * stop; returns cbf_engine_run's status. */
int cbf_bench_eng_finish(eng_run *r, double grace);
void cbf_bench_eng_free(eng_run *r);
void cbf_bench_eng_take(const eng_run *r, eng_snap *s);
void cbf_bench_eng_show(const eng_run *r, const eng_snap *a, const eng_snap *z);
uint64_t cbf_bench_eng_count(const eng_snap *s, const char *plugin, const char *counter);
uint64_t cbf_bench_eng_delta(const eng_snap *a, const eng_snap *z, const char *plugin, const char *counter);
uint64_t cbf_bench_eng_rx_lost(const eng_snap *a, const eng_snap *z);
void cbf_bench_eng_warm(const eng_bench *b, const eng_run *r, const char *plugin, const char *counter, uint64_t min);
char *cbf_bench_eng_text(FILE *f, char **buf);
const char *cbf_bench_eng_gpu(const eng_bench *b, const char *def);
int cbf_bench_eng_threads(const eng_bench *b);
void cbf_bench_eng_dsim(eng_bench *b, FILE *f, int ants, bool realtime, double rate_scale);
void cbf_bench_eng_chains(const eng_bench *b, FILE *f, int ants, int channels);
void cbf_bench_eng_chain_edges(FILE *f, const char *from, int ants);
void cbf_bench_eng_header(const eng_bench *b, const char *title);
void cbf_bench_eng_notes(eng_bench *b);
/* Sleeps through the measuring window; with --verbose, prints every
 * thread's CPU time over it (threads.c). */
void cbf_bench_eng_window(const eng_bench *b);
/* Cases b and c (engine_net.c). */
int cbf_bench_eng_case_net(eng_bench *b);
int cbf_bench_eng_case_xeng(eng_bench *b);

#endif
