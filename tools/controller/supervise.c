/* supervise.c: the supervisor thread (supervise.h). One thread owns every
 * engine of a product from launch to stop, so the engines it spawns die
 * with it (the launcher's PR_SET_PDEATHSIG) and a crashed controller
 * leaves none behind. It sleeps in poll() on the engines' pidfds and a
 * wake-up pipe; while an engine waits for its katcp port, or for its
 * restart, poll's timeout is the next time to look. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "supervise.h"

#define READY_POLL_MS 20      /* how often a starting engine's katcp port is tried */
#define CONNECT_MS 200        /* how long one try may take (another host's port) */
#define MAX_FDS 1024

typedef struct eng {
    const cbf_plan_engine *pe;
    cbf_launch_handle h;
    cbf_engine_state state;
    double backoff;           /* the next wait before a restart */
    double restart_at;        /* DOWN: when to start it again */
    double deadline;          /* STARTING, RESTARTING: its katcp port must open by then */
    double up_since;
    double next_look;         /* systemd: the next state read */
    int restarts;
} eng;

struct cbf_supervisor {
    const cbf_product_plan *plan;
    const cbf_controller_config *c;
    cbf_launcher L;
    cbf_engine_callback cb;
    void *ctx;
    eng *e;
    cbf_launch_handle *handles;   /* for cbf_launch_stop: copies of e[i].h */
    int n;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int wake[2];
    int stopping, launched, launch_rc;
    cbf_error launch_err, stop_err;
    int stop_rc;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

const char *cbf_engine_state_name(cbf_engine_state st)
{
    static const char *const names[] = {"starting", "up", "down", "restarting", "failed", "stopped"};
    return st >= 0 && st <= CBF_ENGINE_STOPPED ? names[st] : "?";
}

/* Moves engine i to state st and tells the callback (outside the lock). */
static void set_state(cbf_supervisor *s, int i, cbf_engine_state st, const char *reason)
{
    pthread_mutex_lock(&s->mu);
    cbf_engine_state was = s->e[i].state;
    s->e[i].state = st;
    int restarts = s->e[i].restarts;
    pthread_mutex_unlock(&s->mu);
    if (s->cb) {
        cbf_engine_event ev = {.engine = s->e[i].pe, .index = i, .state = st, .previous = was,
                               .reason = reason ? reason : "", .restarts = restarts};
        s->cb(s->ctx, &ev);
    }
}

/* How engine i ended, with its log's last line. */
static void why_ended(const cbf_supervisor *s, int i, const char *how, char *buf, size_t n)
{
    char last[512] = "";
    if (cbf_launch_children(&s->L))
        cbf_launch_last_line(s->e[i].pe->log, last, sizeof last);
    snprintf(buf, n, "%s%s%s", how, last[0] ? "; its log ends: " : "", last);
}

static int start_one(cbf_supervisor *s, int i, int first, cbf_error *err)
{
    eng *e = &s->e[i];
    cbf_launch_handle h;
    int rc = cbf_launch_start(&s->L, e->pe, first, &h, err);
    pthread_mutex_lock(&s->mu);
    e->h = h;
    e->deadline = now_s() + s->c->start_timeout;
    e->next_look = now_s() + s->c->systemd_poll;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static void stop_all(cbf_supervisor *s, cbf_error *err)
{
    for (int i = 0; i < s->n; i++)
        s->handles[i] = s->e[i].h;
    /* all told at once, then waited for: the stop takes one stop_timeout, not one per engine */
    int rc = cbf_launch_stop(&s->L, s->plan->engines, s->handles, s->n, err);
    for (int i = 0; i < s->n; i++) {
        pthread_mutex_lock(&s->mu);
        s->e[i].h = s->handles[i];
        pthread_mutex_unlock(&s->mu);
        if (s->e[i].state != CBF_ENGINE_STOPPED)
            set_state(s, i, CBF_ENGINE_STOPPED, NULL);
    }
    s->stop_rc = rc;
}

static int refuse(cbf_supervisor *s, int i, const char *why)
{
    const cbf_plan_engine *pe = s->e[i].pe;
    cbf_error_set(&s->launch_err, CBF_EIO, "engine %s (%s) on host %s: %s", pe->name, pe->task, pe->host, why);
    cbf_error ignored;
    stop_all(s, &ignored);
    return CBF_EIO;
}

static int stopping(cbf_supervisor *s)
{
    pthread_mutex_lock(&s->mu);
    int st = s->stopping;
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* Sleeps until an engine may have ended, the wake pipe is written, or ms
 * pass (-1: no limit). */
static void nap(cbf_supervisor *s, int ms)
{
    struct pollfd fds[MAX_FDS];
    int n = 0;
    fds[n++] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
    for (int i = 0; i < s->n && n < MAX_FDS; i++)
        if (s->e[i].h.running && s->e[i].h.pidfd >= 0)
            fds[n++] = (struct pollfd){.fd = s->e[i].h.pidfd, .events = POLLIN};
    if (poll(fds, (nfds_t)n, ms) > 0 && (fds[0].revents & POLLIN)) {
        char b[64];
        while (read(s->wake[0], b, sizeof b) > 0) {
        }
    }
}

/* Whether engine i has ended: at once for a child (waitpid), every
 * systemd.poll for a unit. */
static int ended(cbf_supervisor *s, int i, char *how, size_t n)
{
    eng *e = &s->e[i];
    if (!e->h.running)
        return 0;
    if (!cbf_launch_children(&s->L)) {
        if (now_s() < e->next_look)
            return 0;
        e->next_look = now_s() + s->c->systemd_poll;
    }
    cbf_launch_handle h = e->h;
    int r = cbf_launch_ended(&s->L, e->pe, &h, how, n);
    pthread_mutex_lock(&s->mu);
    e->h = h;
    pthread_mutex_unlock(&s->mu);
    return r;
}

/* A taken katcp port would make a squatter look like the engine. */
static int ports_free(cbf_supervisor *s)
{
    for (int i = 0; i < s->n; i++) {
        const cbf_plan_engine *pe = s->e[i].pe;
        if (pe->katcp_port && cbf_launch_port_open(pe->address, pe->katcp_port, CONNECT_MS)) {
            char why[256];
            snprintf(why, sizeof why, "its katcp port %s:%d is taken (something already accepts connections "
                     "there)", pe->address, pe->katcp_port);
            cbf_error_set(&s->launch_err, CBF_EIO, "engine %s (%s) on host %s: %s", pe->name, pe->task, pe->host,
                          why);
            return CBF_EIO;
        }
    }
    return 0;
}

static int launch(cbf_supervisor *s)
{
    int rc = ports_free(s);
    if (rc)
        return rc;
    char why[1024], how[512];
    for (int stage = 0; stage < s->plan->n_stages; stage++) {
        for (int i = 0; i < s->n; i++) {
            if (s->e[i].pe->stage != stage)
                continue;
            cbf_error err = {0};
            if (start_one(s, i, 1, &err)) {
                snprintf(why, sizeof why, "cannot start: %s", err.msg);
                return refuse(s, i, why);
            }
            set_state(s, i, CBF_ENGINE_STARTING, NULL);
        }
        for (;;) {
            int waiting = 0;
            for (int i = 0; i < s->n; i++) {
                eng *e = &s->e[i];
                if (e->pe->stage != stage || e->state != CBF_ENGINE_STARTING)
                    continue;
                if (ended(s, i, how, sizeof how)) {
                    char what[600];
                    snprintf(what, sizeof what, "%s before its katcp port %s:%d opened", how, e->pe->address,
                             e->pe->katcp_port);
                    why_ended(s, i, what, why, sizeof why);
                    return refuse(s, i, why);
                }
                if (cbf_launch_port_open(e->pe->address, e->pe->katcp_port, CONNECT_MS)) {
                    e->up_since = now_s();
                    set_state(s, i, CBF_ENGINE_UP, NULL);
                    continue;
                }
                if (now_s() > e->deadline) {
                    char what[600];
                    snprintf(what, sizeof what, "its katcp port %s:%d did not open within start_timeout (%g s)",
                             e->pe->address, e->pe->katcp_port, s->c->start_timeout);
                    why_ended(s, i, what, why, sizeof why);
                    return refuse(s, i, why);
                }
                waiting++;
            }
            if (!waiting)
                break;
            nap(s, READY_POLL_MS);
        }
    }
    return 0;
}

/* One pass over the engines once launched: ends seen, restarts due, ports
 * opened. The time until the next thing to do, in ms (-1: none). */
static int watch_once(cbf_supervisor *s)
{
    const cbf_controller_config *c = s->c;
    double t = now_s(), next = -1;
    char how[512], why[1024];
    for (int i = 0; i < s->n; i++) {
        eng *e = &s->e[i];
        if ((e->state == CBF_ENGINE_UP || e->state == CBF_ENGINE_RESTARTING) && ended(s, i, how, sizeof how)) {
            why_ended(s, i, how, why, sizeof why);
            if (e->state == CBF_ENGINE_UP && t - e->up_since >= c->restart_reset)
                e->backoff = c->restart_initial;   /* it stayed up: this is a new failure, not the same one */
            if (e->h.status == 2) {
                char failed[1100];
                snprintf(failed, sizeof failed, "%s (a bad pipeline: not restarted)", why);
                set_state(s, i, CBF_ENGINE_FAILED, failed);
                continue;
            }
            e->restart_at = t + e->backoff;
            set_state(s, i, CBF_ENGINE_DOWN, why);
        }
        if (e->state == CBF_ENGINE_DOWN && t >= e->restart_at) {
            double waited = e->backoff;
            e->backoff = e->backoff * 2 < c->restart_max ? e->backoff * 2 : c->restart_max;
            pthread_mutex_lock(&s->mu);
            e->restarts++;
            pthread_mutex_unlock(&s->mu);
            cbf_error err = {0};
            if (start_one(s, i, 0, &err)) {
                snprintf(why, sizeof why, "restart %d cannot start: %s", e->restarts, err.msg);
                e->restart_at = t + e->backoff;
                set_state(s, i, CBF_ENGINE_DOWN, why);
            } else {
                snprintf(why, sizeof why, "restart %d, after %g s", e->restarts, waited);
                set_state(s, i, CBF_ENGINE_RESTARTING, why);
            }
        }
        if (e->state == CBF_ENGINE_RESTARTING) {
            if (cbf_launch_port_open(e->pe->address, e->pe->katcp_port, CONNECT_MS)) {
                e->up_since = now_s();
                set_state(s, i, CBF_ENGINE_UP, NULL);
            } else if (now_s() > e->deadline) {   /* stop it and count it as ended */
                cbf_launch_handle h = e->h;
                cbf_error err;
                cbf_launch_stop(&s->L, e->pe, &h, 1, &err);
                pthread_mutex_lock(&s->mu);
                e->h = h;
                pthread_mutex_unlock(&s->mu);
                snprintf(how, sizeof how, "its katcp port %s:%d did not open within start_timeout (%g s): stopped",
                         e->pe->address, e->pe->katcp_port, c->start_timeout);
                why_ended(s, i, how, why, sizeof why);
                e->restart_at = now_s() + e->backoff;
                set_state(s, i, CBF_ENGINE_DOWN, why);
            } else {
                next = next < 0 || READY_POLL_MS < next ? READY_POLL_MS : next;
            }
        }
        double due = -1;
        if (e->state == CBF_ENGINE_DOWN)
            due = (e->restart_at - now_s()) * 1000;
        else if (e->h.running && !cbf_launch_children(&s->L))
            due = (e->next_look - now_s()) * 1000;
        else if (e->h.running && e->h.pidfd < 0)   /* no pidfd: look again soon */
            due = 100;
        if (due >= 0 || e->state == CBF_ENGINE_DOWN) {
            int ms = due < 0 ? 0 : (int)due + 1;
            next = next < 0 || ms < next ? ms : next;
        }
    }
    return (int)next;
}

static void *main_loop(void *arg)
{
    cbf_supervisor *s = arg;
    int rc = launch(s);
    pthread_mutex_lock(&s->mu);
    s->launched = 1;
    s->launch_rc = rc;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (rc)
        return NULL;
    while (!stopping(s))
        nap(s, watch_once(s));
    stop_all(s, &s->stop_err);
    return NULL;
}

static void release(cbf_supervisor *s)
{
    for (int i = 0; i < s->n; i++)
        if (s->e[i].h.pidfd >= 0)
            close(s->e[i].h.pidfd);
    if (s->wake[0] >= 0) {
        close(s->wake[0]);
        close(s->wake[1]);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->e);
    free(s->handles);
    free(s);
}

int cbf_supervisor_start(const cbf_product_plan *plan, const cbf_controller_config *c, const cbf_launch_exec *exec,
                         cbf_engine_callback cb, void *ctx, cbf_supervisor **out, cbf_error *err)
{
    *out = NULL;
    cbf_supervisor *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    s->plan = plan;
    s->c = c;
    s->cb = cb;
    s->ctx = ctx;
    s->n = plan->n_engines;
    s->wake[0] = s->wake[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    cbf_launcher_init(&s->L, c, plan->name, exec);
    s->e = calloc((size_t)s->n + 1, sizeof *s->e);
    s->handles = calloc((size_t)s->n + 1, sizeof *s->handles);
    if (!s->e || !s->handles || pipe2(s->wake, O_CLOEXEC | O_NONBLOCK)) {
        release(s);
        return cbf_error_set(err, CBF_ENOMEM, "out of memory (or descriptors) for product %s's supervisor",
                             plan->name);
    }
    for (int i = 0; i < s->n; i++) {
        s->e[i].pe = &plan->engines[i];
        s->e[i].h.pidfd = -1;
        s->e[i].state = CBF_ENGINE_STOPPED;
        s->e[i].backoff = c->restart_initial;
    }
    if (pthread_create(&s->thread, NULL, main_loop, s)) {
        release(s);
        return cbf_error_set(err, CBF_ENOMEM, "cannot start product %s's supervisor thread", plan->name);
    }
    pthread_mutex_lock(&s->mu);
    while (!s->launched)
        pthread_cond_wait(&s->cv, &s->mu);
    int rc = s->launch_rc;
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        pthread_join(s->thread, NULL);
        *err = s->launch_err;
        release(s);
        return rc;
    }
    *out = s;
    return 0;
}

int cbf_supervisor_stop(cbf_supervisor *s, cbf_error *err)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_mutex_unlock(&s->mu);
    ssize_t w = write(s->wake[1], "x", 1);
    (void)w;
    pthread_join(s->thread, NULL);
    int rc = s->stop_rc;
    if (rc)
        *err = s->stop_err;
    release(s);
    return rc;
}

cbf_engine_state cbf_supervisor_state(cbf_supervisor *s, int i, int *restarts)
{
    pthread_mutex_lock(&s->mu);
    cbf_engine_state st = s->e[i].state;
    if (restarts)
        *restarts = s->e[i].restarts;
    pthread_mutex_unlock(&s->mu);
    return st;
}

pid_t cbf_supervisor_pid(cbf_supervisor *s, int i)
{
    pthread_mutex_lock(&s->mu);
    pid_t p = s->e[i].h.running ? s->e[i].h.pid : 0;
    pthread_mutex_unlock(&s->mu);
    return p;
}
