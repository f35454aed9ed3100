/* cbf-bench engine: running one pipeline on its own thread through
 * libcbf's engine API, reading its counters, and writing the YAML pieces
 * the cases share. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cbf/gpu.h"
#include "engine.h"

double cbf_bench_eng_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void cbf_bench_eng_sleep(double s)
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
bool cbf_bench_eng_supports(eng_bench *b, const char *plugin, const char *param, const char *value)
{
    const cbf_plugin_desc *d = cbf_registry_find(b->reg, plugin);
    for (int i = 0; d && i < d->n_params; i++)
        if (!strcmp(d->params[i].name, param))
            return d->params[i].type != CBF_PARAM_CHOICE || eng_choice_has(d->params[i].choices, value);
    eng_note(b, "%s has no `%s: %s` in this build: its default runs instead", plugin, param, value);
    return false;
}

/* ", param: value" when the plugin takes it; the note says when not. */
void cbf_bench_eng_opt(eng_bench *b, FILE *f, const char *plugin, const char *param, const char *value)
{
    if (cbf_bench_eng_supports(b, plugin, param, value))
        fprintf(f, ", %s: %s", param, value);
}

/* ---- one engine on its own thread ---- */


static void *eng_thread(void *arg)
{
    eng_run *r = arg;
    r->rc = cbf_engine_run(r->e, &r->err);
    atomic_store(&r->done, true);
    return NULL;
}

/* Writes the YAML to a temporary file, loads, creates and starts it. */
int cbf_bench_eng_start(eng_bench *b, eng_run *r, const char *label, const char *yaml)
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
int cbf_bench_eng_finish(eng_run *r, double grace)
{
    if (!r->started)
        return r->e ? 0 : 1;
    for (double until = cbf_bench_eng_now() + grace; !atomic_load(&r->done) && cbf_bench_eng_now() < until;)
        cbf_bench_eng_sleep(0.01);
    cbf_engine_stop(r->e);
    pthread_join(r->t, NULL);
    r->started = false;
    if (r->rc)
        fprintf(stderr, "cbf-bench engine: %s: %s\n", r->label, r->err.msg);
    return r->rc;
}

void cbf_bench_eng_free(eng_run *r)
{
    if (r->started)
        cbf_bench_eng_finish(r, 0);
    cbf_engine_free(r->e);
    cbf_graph_free(r->g);
    r->e = NULL;
    r->g = NULL;
}

/* --verbose: the window's counter deltas of every node, to see what limits. */
void cbf_bench_eng_show(const eng_run *r, const eng_snap *a, const eng_snap *z)
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

void cbf_bench_eng_take(const eng_run *r, eng_snap *s)
{
    s->n = r->e ? cbf_engine_stats(r->e, s->s, MAX_NODES) : 0;
    s->t = cbf_bench_eng_now();
}

/* Sum of a counter over the nodes of one plugin. */
uint64_t cbf_bench_eng_count(const eng_snap *s, const char *plugin, const char *counter)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->s[i].plugin, plugin))
            for (int k = 0; k < s->s[i].n_counters; k++)
                if (!strcmp(s->s[i].counter_names[k], counter))
                    sum += s->s[i].counter_values[k];
    return sum;
}

uint64_t cbf_bench_eng_delta(const eng_snap *a, const eng_snap *z, const char *plugin, const char *counter)
{
    return cbf_bench_eng_count(z, plugin, counter) - cbf_bench_eng_count(a, plugin, counter);
}

/* What a receiver lost over the window: the kernel's drops, heaps that never
 * completed or came too late, and the heaps flagged missing in its chunks. */
uint64_t cbf_bench_eng_rx_lost(const eng_snap *a, const eng_snap *z)
{
    static const char *const lost[] = {"packets_dropped_kernel", "heaps_incomplete", "heaps_late",
                                       "flags_missing"};
    uint64_t n = 0;
    for (size_t i = 0; i < sizeof lost / sizeof lost[0]; i++)
        n += cbf_bench_eng_delta(a, z, "receiver", lost[i]);
    return n;
}

char *cbf_bench_eng_text(FILE *f, char **buf)
{
    fclose(f);
    return *buf;
}

const char *cbf_bench_eng_gpu(const eng_bench *b, const char *def)
{
    return b->o->gpu ? b->o->gpu : def;
}

int cbf_bench_eng_threads(const eng_bench *b)
{
    return b->cores < 64 ? b->cores : 64;
}

/* dsim as a replaying source at full speed or paced to the wall clock. */
void cbf_bench_eng_dsim(eng_bench *b, FILE *f, int ants, bool realtime, double rate_scale)
{
    char threads[16];
    snprintf(threads, sizeof threads, "%d", cbf_bench_eng_threads(b));
    fprintf(f, "  dsim: {plugin: dsim, params: {antennas: %d, threads: %s", ants, threads);
    cbf_bench_eng_opt(b, f, "dsim", "mode", "replay");
    cbf_bench_eng_opt(b, f, "dsim", "memory", "auto");
    if (realtime) {
        cbf_bench_eng_opt(b, f, "dsim", "realtime", "true");
        /* A digitiser has no chunks; 4 Mi samples a chunk (not 1 Mi) cut
         * the hand-offs between the sender's threads, one per buffer, by 4. */
        fprintf(f, ", samples_per_chunk: 4194304");
        if (rate_scale != 1.0)
            fprintf(f, ", adc_sample_rate: %.9g", 1712e6 * rate_scale);
    } else if (b->o->chunk) {
        fprintf(f, ", samples_per_chunk: %d", b->o->chunk);
    }
    fprintf(f, "}}\n");
}

/* K F-engine chains after `up`, ending at `end(k)`. */
void cbf_bench_eng_chains(const eng_bench *b, FILE *f, int ants, int channels)
{
    fprintf(f, "  up: {plugin: upload}\n");
    for (int k = 0; k < ants; k++) {
        fprintf(f, "  pfb%d: {plugin: pfb, params: {channels: %d, antenna: %d", k, channels, k);
        if (b->o->spectra)
            fprintf(f, ", spectra_per_buffer: %d", b->o->spectra);
        fprintf(f, "}}\n  post%d: {plugin: fft_post}\n", k);
    }
}

void cbf_bench_eng_chain_edges(FILE *f, const char *from, int ants)
{
    fprintf(f, "edges:\n  - %s -> up.in\n", from);
    for (int k = 0; k < ants; k++)
        fprintf(f, "  - up.out -> pfb%d.in\n  - pfb%d.out -> post%d.in\n", k, k, k);
}

void cbf_bench_eng_header(const eng_bench *b, const char *title)
{
    time_t t = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&t));
    printf("\n### %s\n\n%s; GPU: %s; %d CPU cores; warm-up %.1f s, window %.1f s\n\n", title, date,
           cbf_gpu_describe(0), b->cores, b->o->warmup, b->o->seconds);
}

void cbf_bench_eng_notes(eng_bench *b)
{
    for (int i = 0; i < b->n_notes; i++)
        printf("note: %s\n", b->notes[i]);
    b->n_notes = 0;
}

/* The warm-up, and then until the sink has seen `min` buffers (the first
 * carry the start-up's flagged spectra, which are not loss), for at most a
 * minute: a slow machine must not put start-up inside the window. */
void cbf_bench_eng_warm(const eng_bench *b, const eng_run *r, const char *plugin, const char *counter, uint64_t min)
{
    cbf_bench_eng_sleep(b->o->warmup);
    eng_snap *s = malloc(sizeof *s);
    for (double until = cbf_bench_eng_now() + 60; s && cbf_bench_eng_now() < until && !atomic_load(&r->done); cbf_bench_eng_sleep(0.05)) {
        cbf_bench_eng_take(r, s);
        if (cbf_bench_eng_count(s, plugin, counter) >= min)
            break;
    }
    free(s);
}
