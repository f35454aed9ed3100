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
 * (cbf_rt_sensors_nodes), named NODE.NAME (docs/control.md).
 *
 * Nothing a client sends can stop the thread: a malformed line gets an
 * `invalid` reply, a line longer than CBF_CONTROL_MAX_REQUEST closes that
 * client (after a #disconnect inform), a client that reads nothing back is
 * dropped once KC_MAX_OUT bytes wait for it, and one that goes away
 * mid-reply is closed quietly. */
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

static void kc_handle_line(cbf_katcp *k, kc_client *c, const char *line, size_t len)
{
    if (len == 0)
        return;
    cbf_katcp_msg m;
    cbf_error err;
    cbf_error_clear(&err);
    int rc = cbf_katcp_parse(line, len, &m, &err);
    kc_req r = {k, c, &m};
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
    memset(c, 0, sizeof *c);
    c->fd = -1;
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
    if (!c) {
        static const char full[] = "#disconnect too\\_many\\_clients\n";
        (void)!send(fd, full, sizeof full - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        close(fd);
        return;
    }
    c->fd = fd;
    cbf_katcp_versions(&c->out, "version-connect", -1);
}

static void kc_disconnect(kc_client *c, const char *why)
{
    const char *a[] = {why};
    cbf_katcp_inform(&c->out, "disconnect", -1, 1, a);
    c->closing = true;
}

static void kc_read(cbf_katcp *k, kc_client *c)
{
    for (;;) {
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
        /* Every whole line, in order. */
        size_t start = 0;
        for (size_t i = c->scanned; i < c->in_len; i++) {
            if (c->in[i] != '\n' && c->in[i] != '\r')
                continue;
            kc_handle_line(k, c, c->in + start, i - start);
            start = i + 1;
        }
        memmove(c->in, c->in + start, c->in_len - start);
        c->in_len -= start;
        c->scanned = c->in_len;
        if (c->in_len > KC_MAX_LINE) {
            char why[96];
            snprintf(why, sizeof why, "line longer than %d bytes", KC_MAX_LINE);
            kc_disconnect(c, why);
            return;
        }
        if (c->out.len - c->out_off > KC_MAX_OUT) {
            kc_client_close(c);
            return;
        }
    }
}

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
        if (c->closing)
            kc_client_close(c);
    }
}

static void *kc_main(void *arg)
{
    cbf_katcp *k = arg;
    cbf_log_set_thread_name("katcp");
    kc_sensors ss = {0};
    struct pollfd pf[KC_MAX_CLIENTS + 1];
    while (!atomic_load(&k->quit)) {
        double next = cbf_katcp_now(CLOCK_MONOTONIC) + 1e-3 * KC_POLL_MS;
        cbf_katcp_sample(k, &ss, &next);
        for (int i = 0; i < KC_MAX_CLIENTS; i++)
            if (k->cl[i].fd >= 0)
                kc_write(&k->cl[i]);
        pf[0] = (struct pollfd){.fd = k->lfd, .events = POLLIN};
        for (int i = 0; i < KC_MAX_CLIENTS; i++) {
            kc_client *c = &k->cl[i];
            short ev = (short)((c->closing ? 0 : POLLIN) | (c->out_off < c->out.len ? POLLOUT : 0));
            pf[i + 1] = (struct pollfd){.fd = c->fd >= 0 ? c->fd : -1, .events = ev};
        }
        double wait = next - cbf_katcp_now(CLOCK_MONOTONIC);
        int ms = wait <= 0 ? 0 : (int)(wait * 1e3) + 1;
        if (poll(pf, KC_MAX_CLIENTS + 1, ms) <= 0)
            continue;
        for (int i = 0; i < KC_MAX_CLIENTS; i++) {
            kc_client *c = &k->cl[i];
            if (c->fd < 0 || pf[i + 1].fd != c->fd)
                continue;
            short rev = pf[i + 1].revents;
            if (c->closing && (rev & (POLLHUP | POLLERR)))
                kc_client_close(c);
            else if (rev & (POLLIN | POLLHUP | POLLERR))
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

int cbf_rt_katcp_open(cbf_engine *e, cbf_katcp **out, cbf_error *err)
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
    atomic_init(&k->quit, false);
    for (int i = 0; i < KC_MAX_CLIENTS; i++)
        k->cl[i].fd = -1;
    int rc = cbf_rt_tcp_listen(g->engine.katcp, "katcp", g->engine.katcp_where, KC_MAX_CLIENTS,
                               "change gains and delays, stop captures and halt the engine", &k->lfd,
                               &k->v6, k->addr, sizeof k->addr, err);
    if (rc) {
        free(k);
        return rc;
    }
    fcntl(k->lfd, F_SETFL, fcntl(k->lfd, F_GETFL) | O_NONBLOCK);
    cbf_log_info("katcp: requests on %s", k->addr);
    *out = k;
    return CBF_OK;
}

int cbf_rt_katcp_start(cbf_katcp *k, cbf_error *err)
{
    if (pthread_create(&k->thread, NULL, kc_main, k) != 0)
        return cbf_error_set(err, CBF_ENOMEM, "katcp: cannot start its thread");
    k->started = true;
    return CBF_OK;
}

void cbf_rt_katcp_close(cbf_katcp *k)
{
    if (!k)
        return;
    if (k->started) {
        atomic_store(&k->quit, true);
        pthread_join(k->thread, NULL);
    }
    for (int i = 0; i < KC_MAX_CLIENTS; i++)
        if (k->cl[i].fd >= 0) {
            /* Best effort: a client that reads sees why the line went quiet. */
            kc_disconnect(&k->cl[i], "the engine is stopping");
            kc_write(&k->cl[i]);
            kc_client_close(&k->cl[i]);
        }
    close(k->lfd);
    free(k);
}
