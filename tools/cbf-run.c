/* cbf-run: runs one pipeline YAML until it drains.
 *
 *   cbf-run PIPELINE.yaml [--set node.param=value ...] [--log-level L]
 *           [--plugin-path DIR ...] [--quiet]
 *   cbf-run --version
 *
 * Exit status: 0 the graph drained (finite sources ended, or SIGINT/SIGTERM
 * asked it to), 1 a run-time error (or a start-up failure of the machine,
 * such as gpu: required without a GPU), 2 a bad pipeline (nothing started),
 * 130 a second Ctrl-C (exit at once, without draining).
 *
 * The engine runs on its own thread; this one watches it: a progress line
 * while it runs (refreshed on a terminal, periodic log lines otherwise) and
 * the per-node counter table at the end. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cbf/graph.h"
#include "cbf/log.h"

#define MAX_NODES 256
#define MAX_ARGS 256

static _Atomic(cbf_engine *) running_engine;
static volatile sig_atomic_t interrupts;
static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    if (interrupts++ > 0) {
        static const char msg[] = "\ncbf-run: second interrupt: exiting at once, without draining\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        _exit(130);
    }
    stop_signal = sig;
    cbf_engine_stop(atomic_load(&running_engine));
    static const char msg[] = "\ncbf-run: stopping: draining the graph (interrupt again to exit at once)\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
}

typedef struct {
    const char *pipeline;
    const char *sets[MAX_ARGS];
    size_t n_sets;
    const char *dirs[MAX_ARGS];
    size_t n_dirs;
    bool quiet;
} options;

static void usage(FILE *f)
{
    fprintf(f, "usage: cbf-run PIPELINE.yaml [--set node.param=value ...] [--log-level L]\n"
               "               [--plugin-path DIR ...] [--quiet]\n"
               "  --set            override a node parameter (repeatable)\n"
               "  --log-level L    error, warn, info (default), debug, trace\n"
               "  --plugin-path D  also search D for plugins (repeatable)\n"
               "  --quiet          warnings and errors only: no progress display, no table\n"
               "  --version        print cbf-run's version and exit\n");
}

/* "--opt value" or "--opt=value". */
static const char *opt_value(int argc, char **argv, int *i, const char *opt)
{
    size_t len = strlen(opt);
    if (strncmp(argv[*i], opt, len))
        return NULL;
    if (argv[*i][len] == '=')
        return argv[*i] + len + 1;
    if (argv[*i][len] == '\0' && *i + 1 < argc)
        return argv[++*i];
    return NULL;
}

static int parse_args(int argc, char **argv, options *o)
{
    for (int i = 1; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(argv[i], "--version")) {
            printf("cbf-run %s\n", CBF_VERSION);
            exit(0);
        } else if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) {
            o->quiet = true;
        } else if ((v = opt_value(argc, argv, &i, "--set"))) {
            if (o->n_sets < MAX_ARGS)
                o->sets[o->n_sets++] = v;
        } else if ((v = opt_value(argc, argv, &i, "--plugin-path"))) {
            if (o->n_dirs < MAX_ARGS)
                o->dirs[o->n_dirs++] = v;
        } else if ((v = opt_value(argc, argv, &i, "--log-level"))) {
            cbf_log_level l;
            if (cbf_log_level_parse(v, &l)) {
                fprintf(stderr, "cbf-run: --log-level %s: use error, warn, info, debug or trace\n", v);
                return 2;
            }
            cbf_log_set_level(l);
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "cbf-run: unknown or incomplete option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!o->pipeline) {
            o->pipeline = argv[i];
        } else {
            fprintf(stderr, "cbf-run: one pipeline at a time ('%s' and '%s')\n", o->pipeline, argv[i]);
            return 2;
        }
    }
    if (!o->pipeline) {
        usage(stderr);
        return 2;
    }
    return 0;
}

/* ---- the run thread and its end signal ---- */
typedef struct {
    cbf_engine *e;
    int rc;
    cbf_error err;
    bool done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} run_state;

static void *run_main(void *arg)
{
    run_state *r = arg;
    int rc = cbf_engine_run(r->e, &r->err);
    pthread_mutex_lock(&r->mu);
    r->rc = rc;
    r->done = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* ---- progress ---- */
typedef struct {
    cbf_node_stats prev[MAX_NODES], now[MAX_NODES];
    size_t n;
    double t_prev;
} progress;

static uint64_t moved(const cbf_node_stats *s)
{
    return s->buffers_in ? s->buffers_in : s->buffers_out;
}

static void progress_line(progress *p, const cbf_engine *e, char *line, size_t cap)
{
    double t = cbf_engine_elapsed(e);
    p->n = cbf_engine_stats(e, p->now, MAX_NODES);
    double dt = t - p->t_prev;
    size_t len = (size_t)snprintf(line, cap, "[%8.1f s]", t);
    for (size_t i = 0; i < p->n && len < cap; i++) {
        const cbf_node_stats *a = &p->prev[i], *b = &p->now[i];
        double bufs = dt > 0 ? (double)(moved(b) - moved(a)) / dt : 0.0;
        double mbs = dt > 0 ? 1e-6 * (double)(b->bytes_out - a->bytes_out) / dt : 0.0;
        if (b->bytes_out)
            len += (size_t)snprintf(line + len, cap - len, " %s %.1f buf/s %.1f MB/s%s", b->name, bufs, mbs,
                                    i + 1 < p->n ? " |" : "");
        else
            len += (size_t)snprintf(line + len, cap - len, " %s %.1f buf/s%s", b->name, bufs,
                                    i + 1 < p->n ? " |" : "");
    }
    memcpy(p->prev, p->now, p->n * sizeof p->now[0]);
    p->t_prev = t;
}

static size_t term_width(void)
{
    struct winsize w;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 10)
        return w.ws_col;
    return 120;
}

/* Waits for the run thread, showing progress; returns with r->done set. */
static void watch(run_state *r, bool show, bool tty)
{
    progress p = {.n = 0};
    p.n = cbf_engine_stats(r->e, p.prev, MAX_NODES);
    const double period = tty ? 0.5 : 5.0;
    bool drew = false;
    pthread_mutex_lock(&r->mu);
    while (!r->done) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        long ns = until.tv_nsec + (long)(period * 1e9);
        until.tv_sec += ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        int w = 0;
        while (!r->done && w != ETIMEDOUT)
            w = pthread_cond_timedwait(&r->cv, &r->mu, &until);
        if (r->done || !show)
            continue;
        pthread_mutex_unlock(&r->mu);
        char line[4096];
        progress_line(&p, r->e, line, sizeof line);
        /* A redrawn line belongs to the foreground job only: `cbf-run ... &`
         * followed by cbf-ctl in the same terminal would have the progress
         * drawn over the other command's output. In the background (or
         * with no controlling terminal) nothing is drawn until `fg`. */
        if (tty && tcgetpgrp(STDERR_FILENO) != getpgrp()) {
            pthread_mutex_lock(&r->mu);
            continue;
        }
        if (tty) {
            size_t width = term_width() - 1;
            if (strlen(line) > width)
                line[width] = '\0';
            cbf_log_status(line);
            drew = true;
        } else {
            cbf_log_info("%s", line);
        }
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    if (drew)
        cbf_log_status(NULL);
}

/* ---- the table at exit ---- */
static void print_table(const cbf_engine *e)
{
    static cbf_node_stats s[MAX_NODES];
    size_t n = cbf_engine_stats(e, s, MAX_NODES);
    int wn = 4, wp = 6;
    for (size_t i = 0; i < n; i++) {
        int a = (int)strlen(s[i].name), b = (int)strlen(s[i].plugin);
        wn = a > wn ? a : wn;
        wp = b > wp ? b : wp;
    }
    printf("%-*s  %-*s  %10s  %10s  %9s  %10s  %9s  %s\n", wn, "node", wp, "plugin", "buffers in",
           "buffers out", "wait-in s", "wait-out s", "busy s", "counters");
    for (size_t i = 0; i < n; i++) {
        printf("%-*s  %-*s  %10llu  %11llu  %9.3f  %10.3f  %9.3f ", wn, s[i].name, wp, s[i].plugin,
               (unsigned long long)s[i].buffers_in, (unsigned long long)s[i].buffers_out,
               s[i].wait_input_s, s[i].wait_output_s, s[i].busy_s);
        for (int k = 0; k < s[i].n_counters; k++)
            printf(" %s=%llu", s[i].counter_names[k], (unsigned long long)s[i].counter_values[k]);
        /* then " |" and the gauges' last values (unset ones left out): a
         * reader tells the two apart by the bar */
        const char *bar = " |";
        for (int k = 0; k < s[i].n_gauges; k++)
            if (!isnan(s[i].gauge_values[k])) {
                printf("%s %s=%.6g", bar, s[i].gauge_names[k], s[i].gauge_values[k]);
                bar = "";
            }
        printf("\n");
    }
}

static int start_error_status(int code)
{
    /* What the pipeline says is wrong: 2. What the machine lacks or a
     * failure while starting: 1. */
    return code == CBF_ECONFIG || code == CBF_EPLUGIN || code == CBF_EINVAL ? 2 : 1;
}

int main(int argc, char **argv)
{
    options o = {0};
    int st = parse_args(argc, argv, &o);
    if (st)
        return st;
    if (o.quiet && cbf_log_get_level() > CBF_LOG_WARN)
        cbf_log_set_level(CBF_LOG_WARN);

    cbf_error err;
    cbf_error_clear(&err);
    cbf_registry *reg = NULL;
    if (cbf_registry_open(o.dirs, o.n_dirs, &reg, &err)) {
        fprintf(stderr, "cbf-run: %s\n", err.msg);
        return 2;
    }
    cbf_graph *g = NULL;
    if (cbf_graph_load(o.pipeline, o.sets, o.n_sets, reg, &g, &err)) {
        fprintf(stderr, "cbf-run: %s\n", err.msg);
        cbf_registry_close(reg);
        return 2;
    }
    /* Handlers first: an interrupt while the nodes initialise (FFTW
     * planning, GPU set-up) stops the engine as soon as it exists, and
     * it drains at once, instead of killing the process mid-init. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    cbf_engine *e = NULL;
    int rc = cbf_engine_create(g, &e, &err);
    if (rc) {
        fprintf(stderr, "cbf-run: %s\n", err.msg);
        cbf_graph_free(g);
        cbf_registry_close(reg);
        return start_error_status(rc);
    }

    atomic_store(&running_engine, e);
    if (stop_signal)   /* it came before there was an engine to stop */
        cbf_engine_stop(e);

    run_state r = {.e = e};
    pthread_mutex_init(&r.mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r.cv, &ca);
    pthread_condattr_destroy(&ca);

    bool tty = isatty(STDERR_FILENO);
    cbf_log_info("running %s (%s to drain and stop)", o.pipeline, tty ? "Ctrl-C" : "SIGINT or SIGTERM");
    pthread_t t;
    if (pthread_create(&t, NULL, run_main, &r)) {
        fprintf(stderr, "cbf-run: cannot start the engine thread\n");
        return 1;
    }
    watch(&r, !o.quiet, tty);
    pthread_join(t, NULL);

    double elapsed = cbf_engine_elapsed(e);
    if (!o.quiet)
        print_table(e);
    if (r.rc)
        fprintf(stderr, "cbf-run: %s\n", r.err.msg);
    if (r.rc)
        printf("cbf-run: failed after %.3f s: %s\n", elapsed, cbf_error_name(r.rc));
    else if (!o.quiet)
        printf("cbf-run: %s after %.3f s: every buffer accounted for\n",
               stop_signal ? (stop_signal == SIGINT ? "stopped (SIGINT) and drained" : "stopped (SIGTERM) and drained")
                           : "drained",
               elapsed);
    fflush(stdout);

    /* No stop request may reach a freed engine. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    atomic_store(&running_engine, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    cbf_engine_free(e);
    cbf_graph_free(g);
    cbf_registry_close(reg);
    pthread_mutex_destroy(&r.mu);
    pthread_cond_destroy(&r.cv);
    return r.rc ? 1 : 0;
}
