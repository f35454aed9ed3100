/* katcp.c: the engine's katcp v5 front end (engine key `katcp:`), the line
 * protocol MeerKAT's CAM speaks. One thread serves every client with
 * poll(); lines are parsed by katcp_line.c, answered by katcp_requests.c
 * and katcp_sensors.c (katcp_server.h).
 *
 * Built-in requests: help, watchdog, halt, log-level, version-list,
 * sensor-list, sensor-value, sensor-sampling. Any other name is a plugin
 * request, run through the same path as the ZeroMQ plane's
 * (cbf_rt_request_call): `?NAME [node=NODE] [key=value ...]`, with
 * katgpucbf's positional forms for capture-start, capture-stop and gain.
 * Sensors are the ones the ZeroMQ `sensors` request reads
 * (cbf_fe_sensors_nodes), named NODE.NAME (docs/control.md).
 *
 * Nothing a client sends can stop the thread or hold the other clients:
 * a malformed line gets an `invalid` reply; a plugin request longer than
 * KC_INLINE_MAX is answered on a second thread, the request thread, one
 * at a time (another meanwhile is refused "busy", as on the ZeroMQ plane),
 * while this one goes on serving the others; a line longer than
 * CBF_CONTROL_MAX_REQUEST closes that client (after a #disconnect inform),
 * a client that reads nothing back is dropped once KC_MAX_OUT bytes wait
 * for it, one that goes away mid-reply is closed quietly, and one that
 * sends nothing for engine.katcp_idle_timeout seconds (and samples no
 * sensor) is told so and closed. When every slot is taken a newcomer is
 * still served: the client idle longest makes room for it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cbf/log.h"
#include "katcp_server.h"
#include "listen.h"
#include "runtime/frontend.h"

static void kc_disconnect(kc_client *c, const char *why)
{
    const char *a[] = {why};
    cbf_katcp_inform(&c->out, "disconnect", -1, 1, a);
    c->closing = true;
}

/* A long plugin request goes to the request thread (*m is then emptied),
 * or, while that thread has another, is refused "busy". */
static void kc_hand_off(cbf_katcp *k, kc_client *c, cbf_katcp_msg *m)
{
    if (k->busy) {
        kc_req r = {k, c, m, &c->out};
        cbf_katcp_reply(&r, "fail", "busy: another request over %d KiB is being answered; send this one "
                        "again once it is", KC_INLINE_MAX >> 10);
        return;
    }
    pthread_mutex_lock(&k->job_mu);
    k->job.slot = (int)(c - k->cl);
    k->job.gen = c->gen;
    k->job.m = *m;
    memset(&k->job.out, 0, sizeof k->job.out);
    k->job_ready = true;
    pthread_cond_signal(&k->job_cv);
    pthread_mutex_unlock(&k->job_mu);
    memset(m, 0, sizeof *m);
    k->busy = true;
    c->waiting = true;
}

static void kc_handle_line(cbf_katcp *k, kc_client *c, const char *line, size_t len)
{
    if (len == 0)
        return;
    c->last_rx = cbf_katcp_now(CLOCK_MONOTONIC);
    cbf_katcp_msg m;
    cbf_error err;
    cbf_error_clear(&err);
    int rc = cbf_katcp_parse(line, len, &m, &err);
    kc_req r = {k, c, &m, &c->out};
    if (rc) {
        /* Echo the name when it was read, as a reply to that request. */
        if (m.type == '?' && m.name[0])
            cbf_katcp_reply(&r, "invalid", "%s", err.msg);
        else {
            const char *a[] = {"warn", "0", "katcp", err.msg};
            char ts[32];
            snprintf(ts, sizeof ts, "%.6f", cbf_katcp_now(CLOCK_REALTIME));
            a[1] = ts;
            cbf_katcp_inform(&c->out, "log", -1, 4, a);
        }
    } else if (m.type == '?' && len > KC_INLINE_MAX && !cbf_katcp_builtin(m.name)) {
        kc_hand_off(k, c, &m);
    } else if (m.type == '?') {
        cbf_katcp_dispatch(&r);
    }   /* informs and replies from a client are not for us: ignored */
    cbf_katcp_msg_free(&m);
}

static void kc_client_close(kc_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->in);
    cbf_katcp_buf_free(&c->out);
    for (size_t i = 0; i < c->n_samp; i++) {
        free(c->samp[i].name);
        free(c->samp[i].last);
    }
    free(c->samp);
    unsigned gen = c->gen;   /* kept: a reply still on the request thread is not the next one's */
    memset(c, 0, sizeof *c);
    c->gen = gen;
    c->fd = -1;
}

/* Sends what it can now, without waiting. */
static void kc_write(kc_client *c)
{
    while (c->fd >= 0 && c->out_off < c->out.len) {
        ssize_t put = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0) {
            kc_client_close(c);   /* went away mid-reply */
            return;
        }
        c->out_off += (size_t)put;
    }
    if (c->out.oom || (c->fd >= 0 && c->out.len - c->out_off > KC_MAX_OUT)) {
        kc_client_close(c);
        return;
    }
    if (c->out_off == c->out.len) {
        c->out.len = c->out_off = 0;
        if (c->closing && !c->waiting)   /* a half-closed client still gets its long reply */
            kc_client_close(c);
    }
}

/* The slot a newcomer takes when all are in use: one already closing,
 * else the client that has sent nothing for longest, those sampling
 * sensors (informs flow to them: a subscription in use) after the others;
 * never the one whose request is on the request thread. */
static kc_client *kc_evict(cbf_katcp *k)
{
    kc_client *v = NULL;
    for (int i = 0; i < KC_MAX_CLIENTS; i++) {
        kc_client *c = &k->cl[i];
        if (c->waiting)
            continue;
        if (c->closing) {
            v = c;
            break;
        }
        if (!v || (c->n_samp == 0) > (v->n_samp == 0) ||
            ((c->n_samp == 0) == (v->n_samp == 0) && c->last_rx < v->last_rx))
            v = c;
    }
    if (!v)
        return NULL;
    if (!v->closing) {
        char why[128];
        snprintf(why, sizeof why, "%d clients are connected and another came: this one had been idle "
                 "longest (%.0f s)", KC_MAX_CLIENTS, cbf_katcp_now(CLOCK_MONOTONIC) - v->last_rx);
        kc_disconnect(v, why);
    }
    cbf_log_info("katcp: a new client takes the place of one idle for %.0f s (%d connected)",
                 cbf_katcp_now(CLOCK_MONOTONIC) - v->last_rx, KC_MAX_CLIENTS);
    kc_write(v);   /* best effort: the inform, if its socket takes it now */
    kc_client_close(v);
    return v;
}

static void kc_accept(cbf_katcp *k)
{
    int fd = accept4(k->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);   /* _GNU_SOURCE */
    if (fd < 0)
        return;
    kc_client *c = NULL;
    for (int i = 0; i < KC_MAX_CLIENTS && !c; i++)
        if (k->cl[i].fd < 0)
            c = &k->cl[i];
    if (!c)
        c = kc_evict(k);
    if (!c) {
        static const char full[] = "#disconnect too\\_many\\_clients\n";
        (void)!send(fd, full, sizeof full - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        close(fd);
        return;
    }
    c->fd = fd;
    c->gen++;
    c->last_rx = cbf_katcp_now(CLOCK_MONOTONIC);
    cbf_katcp_versions(&c->out, "version-connect", -1);
}

/* Answers the client's whole lines in order, up to one that goes to the
 * request thread (the rest wait for its reply). */
static void kc_lines(cbf_katcp *k, kc_client *c)
{
    size_t start = 0;
    for (size_t i = c->scanned; i < c->in_len && !c->waiting; i++) {
        if (c->in[i] != '\n' && c->in[i] != '\r')
            continue;
        kc_handle_line(k, c, c->in + start, i - start);
        start = i + 1;
    }
    memmove(c->in, c->in + start, c->in_len - start);
    c->in_len -= start;
    c->scanned = c->waiting ? 0 : c->in_len;
}

static void kc_read(cbf_katcp *k, kc_client *c)
{
    while (c->fd >= 0 && !c->waiting) {
        if (c->in_len > KC_MAX_LINE) {
            char why[96];
            snprintf(why, sizeof why, "line longer than %d bytes", KC_MAX_LINE);
            kc_disconnect(c, why);
            return;
        }
        if (c->in_cap - c->in_len < 65536) {
            size_t cap = c->in_cap ? c->in_cap * 2 : 65536;
            if (cap > KC_MAX_LINE + 65536)
                cap = KC_MAX_LINE + 65536;
            char *p = cap > c->in_cap ? realloc(c->in, cap) : NULL;
            if (!p) {
                kc_disconnect(c, "out of memory");
                return;
            }
            c->in = p;
            c->in_cap = cap;
        }
        ssize_t got = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        if (got == 0) {
            c->closing = true;   /* it sends no more; what it asked is still answered */
            return;
        }
        if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            kc_client_close(c);   /* gone: nothing more to answer */
            return;
        }
        if (got < 0)
            return;
        c->in_len += (size_t)got;
        kc_lines(k, c);
        if (c->out.len - c->out_off > KC_MAX_OUT) {
            kc_client_close(c);
            return;
        }
    }
}

/* The request thread's reply: to its client, if it is still the one that
 * asked; then that client's lines that waited. */
static void kc_job_done(cbf_katcp *k)
{
    char b[64];
    while (read(k->done_fd[0], b, sizeof b) > 0)
        ;
    pthread_mutex_lock(&k->job_mu);
    bool ready = k->job_ready;
    pthread_mutex_unlock(&k->job_mu);
    if (!k->busy || ready)
        return;
    kc_job *j = &k->job;
    kc_client *c = &k->cl[j->slot];
    if (c->fd >= 0 && c->gen == j->gen) {
        cbf_katcp_buf_put(&c->out, j->out.p ? j->out.p : "", j->out.len);
        c->out.oom |= j->out.oom;
        c->waiting = false;
        c->last_rx = cbf_katcp_now(CLOCK_MONOTONIC);
        kc_lines(k, c);
    }
    cbf_katcp_msg_free(&j->m);
    cbf_katcp_buf_free(&j->out);
    k->busy = false;
}

/* The request thread: long plugin requests, one at a time. */
static void *kc_worker(void *arg)
{
    cbf_katcp *k = arg;
    cbf_log_set_thread_name("katcp-long");
    for (;;) {
        pthread_mutex_lock(&k->job_mu);
        while (!k->job_ready && !atomic_load(&k->quit))
            pthread_cond_wait(&k->job_cv, &k->job_mu);
        if (!k->job_ready) {
            pthread_mutex_unlock(&k->job_mu);
            return NULL;
        }
        pthread_mutex_unlock(&k->job_mu);
        kc_req r = {k, NULL, &k->job.m, &k->job.out};
        double t0 = cbf_katcp_now(CLOCK_MONOTONIC);
        cbf_katcp_dispatch(&r);
        cbf_log_debug("katcp: ?%s (a long request) answered in %.1f ms", k->job.m.name,
                      1e3 * (cbf_katcp_now(CLOCK_MONOTONIC) - t0));
        pthread_mutex_lock(&k->job_mu);
        k->job_ready = false;
        pthread_mutex_unlock(&k->job_mu);
        (void)!write(k->done_fd[1], "", 1);
    }
}

/* Clients that have sent nothing for longer than engine.katcp_idle_timeout
 * are told so and closed; a client sampling sensors is using its
 * connection, and one waiting for a long reply has asked. */
static void kc_idle(cbf_katcp *k)
{
    if (k->idle <= 0)
        return;
    double now = cbf_katcp_now(CLOCK_MONOTONIC);
    for (int i = 0; i < KC_MAX_CLIENTS; i++) {
        kc_client *c = &k->cl[i];
        if (c->fd < 0 || c->closing || c->waiting || c->n_samp || now - c->last_rx <= k->idle)
            continue;
        char why[128];
        snprintf(why, sizeof why, "idle: no request for %g s (engine.katcp_idle_timeout)", k->idle);
        kc_disconnect(c, why);
    }
}

static void *kc_main(void *arg)
{
    cbf_katcp *k = arg;
    cbf_log_set_thread_name("katcp");
    kc_sensors ss = {0};
    struct pollfd pf[KC_MAX_CLIENTS + 2];
    while (!atomic_load(&k->quit)) {
        double next = cbf_katcp_now(CLOCK_MONOTONIC) + 1e-3 * KC_POLL_MS;
        cbf_katcp_sample(k, &ss, &next);
        kc_idle(k);
        for (int i = 0; i < KC_MAX_CLIENTS; i++)
            if (k->cl[i].fd >= 0)
                kc_write(&k->cl[i]);
        pf[0] = (struct pollfd){.fd = k->lfd, .events = POLLIN};
        pf[1] = (struct pollfd){.fd = k->done_fd[0], .events = POLLIN};
        for (int i = 0; i < KC_MAX_CLIENTS; i++) {
            kc_client *c = &k->cl[i];
            short ev = (short)((c->closing || c->waiting ? 0 : POLLIN) | (c->out_off < c->out.len ? POLLOUT : 0));
            pf[i + 2] = (struct pollfd){.fd = c->fd >= 0 ? c->fd : -1, .events = ev};
        }
        double wait = next - cbf_katcp_now(CLOCK_MONOTONIC);
        int ms = wait <= 0 ? 0 : (int)(wait * 1e3) + 1;
        if (poll(pf, KC_MAX_CLIENTS + 2, ms) <= 0)
            continue;
        if (pf[1].revents & POLLIN)
            kc_job_done(k);
        for (int i = 0; i < KC_MAX_CLIENTS; i++) {
            kc_client *c = &k->cl[i];
            if (c->fd < 0 || pf[i + 2].fd != c->fd)
                continue;
            short rev = pf[i + 2].revents;
            if (c->closing && !c->waiting && (rev & (POLLHUP | POLLERR)))
                kc_client_close(c);
            else if (!c->waiting && (rev & (POLLIN | POLLHUP | POLLERR)))
                kc_read(k, c);
            if (c->fd >= 0)
                kc_write(c);
        }
        if (pf[0].revents & POLLIN)
            kc_accept(k);
    }
    cbf_katcp_sensors_free(&ss);
    return NULL;
}

static void katcp_close(void *state);

static int katcp_open(cbf_engine *e, void **out, cbf_error *err)
{
    *out = NULL;
    const cbf_graph *g = cbf_rt_engine_graph(e);
    if (!g->engine.katcp)
        return CBF_OK;
    cbf_katcp *k = calloc(1, sizeof *k);
    if (!k)
        return cbf_error_set(err, CBF_ENOMEM, "katcp: out of memory");
    k->e = e;
    k->g = g;
    k->idle = g->engine.katcp_idle_timeout;
    atomic_init(&k->quit, false);
    for (int i = 0; i < KC_MAX_CLIENTS; i++)
        k->cl[i].fd = -1;
    if (pipe2(k->done_fd, O_NONBLOCK | O_CLOEXEC)) {   /* _GNU_SOURCE */
        free(k);
        return cbf_error_set(err, CBF_EIO, "katcp: pipe: %s", strerror(errno));
    }
    pthread_mutex_init(&k->job_mu, NULL);
    pthread_cond_init(&k->job_cv, NULL);
    int rc = cbf_fe_tcp_listen(g->engine.katcp, "katcp", g->engine.katcp_where, KC_MAX_CLIENTS,
                               "change gains and delays, stop captures and halt the engine", &k->lfd,
                               &k->v6, k->addr, sizeof k->addr, err);
    if (rc) {
        k->lfd = -1;
        katcp_close(k);
        return rc;
    }
    fcntl(k->lfd, F_SETFL, fcntl(k->lfd, F_GETFL) | O_NONBLOCK);
    cbf_log_info("katcp: requests on %s", k->addr);
    *out = k;
    return CBF_OK;
}

static int katcp_start(void *state, cbf_error *err)
{
    cbf_katcp *k = state;
    if (pthread_create(&k->worker, NULL, kc_worker, k) != 0)
        return cbf_error_set(err, CBF_ENOMEM, "katcp: cannot start its request thread");
    k->worker_started = true;
    if (pthread_create(&k->thread, NULL, kc_main, k) != 0)
        return cbf_error_set(err, CBF_ENOMEM, "katcp: cannot start its thread");
    k->started = true;
    return CBF_OK;
}

static void katcp_close(void *state)
{
    cbf_katcp *k = state;
    atomic_store(&k->quit, true);
    if (k->started)
        pthread_join(k->thread, NULL);
    if (k->worker_started) {
        pthread_mutex_lock(&k->job_mu);
        pthread_cond_broadcast(&k->job_cv);
        pthread_mutex_unlock(&k->job_mu);
        pthread_join(k->worker, NULL);   /* a request in flight ends within the request timeout */
    }
    if (k->busy) {
        cbf_katcp_msg_free(&k->job.m);
        cbf_katcp_buf_free(&k->job.out);
    }
    for (int i = 0; i < KC_MAX_CLIENTS; i++)
        if (k->cl[i].fd >= 0) {
            /* Best effort: a client that reads sees why the line went quiet. */
            kc_disconnect(&k->cl[i], "the engine is stopping");
            k->cl[i].waiting = false;
            kc_write(&k->cl[i]);
            kc_client_close(&k->cl[i]);
        }
    if (k->lfd >= 0)
        close(k->lfd);
    close(k->done_fd[0]);
    close(k->done_fd[1]);
    pthread_mutex_destroy(&k->job_mu);
    pthread_cond_destroy(&k->job_cv);
    free(k);
}

static const cbf_frontend katcp_frontend = {"katcp", 30, katcp_open, katcp_start, katcp_close};
CBF_FRONTEND(katcp_frontend)
