/* katcp_server.c: the katcp v5 server's connections (cbf/katcp.h). One
 * thread serves every client with poll(); lines are parsed by
 * katcp_line.c and answered by katcp_calls.c.
 *
 * Nothing a client sends can stop the thread or hold the other clients: a
 * malformed line gets an `invalid` reply or a #log inform; a slow request
 * goes to a request thread while this one goes on serving the others; a
 * line longer than KC_MAX_LINE closes that client (after a #disconnect
 * inform), a client that reads nothing back is dropped once KC_MAX_OUT
 * bytes wait for it, one that goes away mid-reply is closed quietly, and
 * one that sends nothing for the idle timeout (and samples no sensor) is
 * told so and closed. When every slot is taken a newcomer is still
 * served: the client idle longest makes room for it. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/tcp.h"
#include "cbf/log.h"
#include "katcp_server.h"

double cbf_katcp_now(clockid_t clk)
{
    struct timespec t;
    clock_gettime(clk, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void cbf_katcp_wake(cbf_katcp_server *s) { (void)!write(s->done_fd[1], "", 1); }

static void kc_disconnect(kc_client *c, const char *why)
{
    const char *a[] = {why};
    cbf_katcp_buf_msg(&c->out, '#', "disconnect", -1, 1, a);
    c->closing = true;
}

static void kc_handle_line(cbf_katcp_server *s, kc_client *c, const char *line, size_t len)
{
    if (len == 0)
        return;
    c->last_rx = cbf_katcp_now(CLOCK_MONOTONIC);
    cbf_katcp_msg m;
    cbf_error err;
    cbf_error_clear(&err);
    int rc = cbf_katcp_parse(line, len, &m, &err);
    if (rc) {
        /* Echo the name when it was read, as a reply to that request. */
        if (m.type == '?' && m.name[0]) {
            cbf_katcp_call call = {s, c, &m, &c->out, false};
            cbf_katcp_reply_fmt(&call, "invalid", "%s", err.msg);
        } else {
            char ts[32];
            snprintf(ts, sizeof ts, "%.6f", cbf_katcp_now(CLOCK_REALTIME));
            const char *a[] = {"warn", ts, "katcp", err.msg};
            cbf_katcp_buf_msg(&c->out, '#', "log", -1, 4, a);
        }
    } else if (m.type == '?') {
        cbf_katcp_answer(s, c, &m, len);
    }   /* informs and replies from a client are not for us: ignored */
    cbf_katcp_msg_free(&m);
}

static void kc_client_close(cbf_katcp_server *s, kc_client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->in);
    cbf_katcp_buf_free(&c->out);
    cbf_katcp_sampling_clear(s, c);
    unsigned gen = c->gen;   /* kept: a reply still on a request thread is not the next one's */
    memset(c, 0, sizeof *c);
    c->gen = gen;
    c->fd = -1;
}

/* Sends what it can now, without waiting. */
static void kc_write(cbf_katcp_server *s, kc_client *c)
{
    while (c->fd >= 0 && c->out_off < c->out.len) {
        ssize_t put = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0) {
            kc_client_close(s, c);   /* went away mid-reply */
            return;
        }
        c->out_off += (size_t)put;
    }
    if (c->out.oom || (c->fd >= 0 && c->out.len - c->out_off > KC_MAX_OUT)) {
        kc_client_close(s, c);
        return;
    }
    if (c->out_off == c->out.len) {
        c->out.len = c->out_off = 0;
        if (c->closing && !c->waiting)   /* a half-closed client still gets its slow reply */
            kc_client_close(s, c);
    }
}

/* The slot a newcomer takes when all are in use: one already closing,
 * else the client that has sent nothing for longest, those sampling
 * sensors (informs flow to them: a subscription in use) after the others;
 * never one whose request is on a request thread. */
static kc_client *kc_evict(cbf_katcp_server *s)
{
    kc_client *v = NULL;
    for (int i = 0; i < KC_MAX_CLIENTS; i++) {
        kc_client *c = &s->cl[i];
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
    cbf_log_info("%s: a new client takes the place of one idle for %.0f s (%d connected)", s->label,
                 cbf_katcp_now(CLOCK_MONOTONIC) - v->last_rx, KC_MAX_CLIENTS);
    kc_write(s, v);   /* best effort: the inform, if its socket takes it now */
    kc_client_close(s, v);
    return v;
}

static void kc_accept(cbf_katcp_server *s)
{
    int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);   /* _GNU_SOURCE */
    if (fd < 0)
        return;
    kc_client *c = NULL;
    for (int i = 0; i < KC_MAX_CLIENTS && !c; i++)
        if (s->cl[i].fd < 0)
            c = &s->cl[i];
    if (!c)
        c = kc_evict(s);
    if (!c) {
        static const char full[] = "#disconnect too\\_many\\_clients\n";
        (void)!send(fd, full, sizeof full - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        close(fd);
        return;
    }
    c->fd = fd;
    c->gen++;
    c->last_rx = cbf_katcp_now(CLOCK_MONOTONIC);
    cbf_katcp_versions(s, &c->out, "version-connect", -1);
}

void cbf_katcp_lines(cbf_katcp_server *s, kc_client *c)
{
    size_t start = 0;
    for (size_t i = c->scanned; i < c->in_len && !c->waiting; i++) {
        if (c->in[i] != '\n' && c->in[i] != '\r')
            continue;
        kc_handle_line(s, c, c->in + start, i - start);
        start = i + 1;
    }
    memmove(c->in, c->in + start, c->in_len - start);
    c->in_len -= start;
    c->scanned = c->waiting ? 0 : c->in_len;
}

static void kc_read(cbf_katcp_server *s, kc_client *c)
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
            kc_client_close(s, c);   /* gone: nothing more to answer */
            return;
        }
        if (got < 0)
            return;
        c->in_len += (size_t)got;
        cbf_katcp_lines(s, c);
        if (c->out.len - c->out_off > KC_MAX_OUT) {
            kc_client_close(s, c);
            return;
        }
    }
}

/* Clients that have sent nothing for longer than the idle timeout are told
 * so and closed; a client sampling sensors is using its connection, and
 * one waiting for a slow reply has asked. */
static void kc_idle(cbf_katcp_server *s)
{
    if (s->idle <= 0)
        return;
    double now = cbf_katcp_now(CLOCK_MONOTONIC);
    for (int i = 0; i < KC_MAX_CLIENTS; i++) {
        kc_client *c = &s->cl[i];
        if (c->fd < 0 || c->closing || c->waiting || c->n_samp || now - c->last_rx <= s->idle)
            continue;
        char why[256];
        snprintf(why, sizeof why, "idle: no request for %g s (%s)", s->idle, s->idle_setting);
        kc_disconnect(c, why);
    }
}

static void *kc_main(void *arg)
{
    cbf_katcp_server *s = arg;
    cbf_log_set_thread_name("katcp");
    struct cbf_katcp_sensors ss = {0};
    struct pollfd pf[KC_MAX_CLIENTS + 2];
    while (!atomic_load(&s->quit)) {
        double next = cbf_katcp_now(CLOCK_MONOTONIC) + 1e-3 * KC_POLL_MS;
        cbf_katcp_sample(s, &ss, &next);
        kc_idle(s);
        for (int i = 0; i < KC_MAX_CLIENTS; i++)
            if (s->cl[i].fd >= 0)
                kc_write(s, &s->cl[i]);
        pf[0] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
        pf[1] = (struct pollfd){.fd = s->done_fd[0], .events = POLLIN};
        for (int i = 0; i < KC_MAX_CLIENTS; i++) {
            kc_client *c = &s->cl[i];
            short ev = (short)((c->closing || c->waiting ? 0 : POLLIN) | (c->out_off < c->out.len ? POLLOUT : 0));
            pf[i + 2] = (struct pollfd){.fd = c->fd >= 0 ? c->fd : -1, .events = ev};
        }
        double wait = next - cbf_katcp_now(CLOCK_MONOTONIC);
        int ms = wait <= 0 ? 0 : (int)(wait * 1e3) + 1;
        if (poll(pf, KC_MAX_CLIENTS + 2, ms) <= 0)
            continue;
        if (pf[1].revents & POLLIN) {
            char b[64];
            while (read(s->done_fd[0], b, sizeof b) > 0)
                ;
            cbf_katcp_jobs_done(s);   /* table changes are taken by the next cbf_katcp_sample */
        }
        for (int i = 0; i < KC_MAX_CLIENTS; i++) {
            kc_client *c = &s->cl[i];
            if (c->fd < 0 || pf[i + 2].fd != c->fd)
                continue;
            short rev = pf[i + 2].revents;
            if (c->closing && !c->waiting && (rev & (POLLHUP | POLLERR)))
                kc_client_close(s, c);
            else if (!c->waiting && (rev & (POLLIN | POLLHUP | POLLERR)))
                kc_read(s, c);
            if (c->fd >= 0)
                kc_write(s, c);
        }
        if (pf[0].revents & POLLIN)
            kc_accept(s);
    }
    cbf_katcp_sensors_clear(&ss);
    free(ss.s);
    return NULL;
}

static char *kc_dup(const char *t, const char *def)
{
    return strdup(t ? t : def);
}

int cbf_katcp_server_open(const char *addr, const cbf_katcp_server_options *opt, cbf_katcp_server **out,
                          cbf_error *err)
{
    *out = NULL;
    static const cbf_katcp_server_options none;
    if (!opt)
        opt = &none;
    cbf_katcp_server *s = calloc(1, sizeof *s);
    if (!s)
        return cbf_error_set(err, CBF_ENOMEM, "katcp: out of memory");
    s->lfd = s->done_fd[0] = s->done_fd[1] = -1;
    atomic_init(&s->quit, false);
    for (int i = 0; i < KC_MAX_CLIENTS; i++)
        s->cl[i].fd = -1;
    pthread_mutex_init(&s->job_mu, NULL);
    pthread_cond_init(&s->job_cv, NULL);
    pthread_mutex_init(&s->tab_mu, NULL);
    s->label = kc_dup(opt->label, "katcp");
    s->protocol = kc_dup(opt->protocol, "5.0-MI");
    s->device = kc_dup(opt->device, "cbf");
    s->device_build = opt->device_build ? strdup(opt->device_build) : NULL;
    s->idle_setting = kc_dup(opt->idle_setting, "the server's idle timeout");
    s->idle = opt->idle_timeout;
    s->n_workers = opt->slow_threads > 0 ? opt->slow_threads : KC_DEFAULT_SLOW;
    s->max_jobs = s->n_workers + (opt->slow_waiting < 0 ? KC_MAX_CLIENTS : opt->slow_waiting);
    s->fallback = opt->fallback;
    s->fallback_help = opt->fallback_help;
    s->fallback_user = opt->fallback_user;
    s->snapshot = opt->snapshot;
    s->snapshot_user = opt->snapshot_user;
    int rc = CBF_OK;
    if (!s->label || !s->protocol || !s->device || !s->idle_setting || (opt->device_build && !s->device_build))
        rc = cbf_error_set(err, CBF_ENOMEM, "katcp: out of memory");
    else if (pipe2(s->done_fd, O_NONBLOCK | O_CLOEXEC))   /* _GNU_SOURCE */
        rc = cbf_error_set(err, CBF_EIO, "%s: pipe: %s", s->label, strerror(errno));
    if (!rc)
        rc = cbf_tcp_listen(addr, s->label, opt->where, KC_MAX_CLIENTS, opt->exposes, &s->lfd, &s->v6, s->addr,
                            sizeof s->addr, err);
    if (rc) {
        cbf_katcp_server_close(s);
        return rc;
    }
    fcntl(s->lfd, F_SETFL, fcntl(s->lfd, F_GETFL) | O_NONBLOCK);
    *out = s;
    return CBF_OK;
}

int cbf_katcp_server_start(cbf_katcp_server *s, cbf_error *err)
{
    if (s->started)
        return cbf_error_set(err, CBF_EINVAL, "%s: started already", s->label);
    int rc = cbf_katcp_workers_start(s, err);
    if (rc)
        return rc;
    if (pthread_create(&s->thread, NULL, kc_main, s) != 0)
        return cbf_error_set(err, CBF_ENOMEM, "%s: cannot start its thread", s->label);
    s->started = true;
    return CBF_OK;
}

const char *cbf_katcp_server_address(const cbf_katcp_server *s) { return s->addr; }

void cbf_katcp_server_close(cbf_katcp_server *s)
{
    if (!s)
        return;
    atomic_store(&s->quit, true);
    if (s->started)
        pthread_join(s->thread, NULL);
    cbf_katcp_workers_stop(s);   /* a slow request in flight is waited for */
    for (int i = 0; i < KC_MAX_CLIENTS; i++)
        if (s->cl[i].fd >= 0) {
            /* Best effort: a client that reads sees why the line went quiet. */
            kc_disconnect(&s->cl[i], "the server is stopping");
            s->cl[i].waiting = false;
            kc_write(s, &s->cl[i]);
            kc_client_close(s, &s->cl[i]);
        }
    if (s->lfd >= 0)
        close(s->lfd);
    for (int i = 0; i < 2; i++)
        if (s->done_fd[i] >= 0)
            close(s->done_fd[i]);
    for (size_t i = 0; i < s->n_req; i++) {
        free(s->req[i].name);
        free(s->req[i].help);
    }
    free(s->req);
    cbf_katcp_sensors_clear(&s->tab);
    free(s->tab.s);
    cbf_katcp_changes_free(s->changes, s->n_changes);
    pthread_mutex_destroy(&s->job_mu);
    pthread_cond_destroy(&s->job_cv);
    pthread_mutex_destroy(&s->tab_mu);
    free(s->label);
    free(s->protocol);
    free(s->device);
    free(s->device_build);
    free(s->idle_setting);
    free(s);
}
