/* katcp_client.c: a blocking katcp client (cbf/katcp.h): one request at a
 * time, its reply matched by message id, so a reply that came too late for
 * an earlier call is passed over by the next. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/tcp.h"
#include "katcp_server.h"

struct cbf_katcp_client {
    int fd;
    char addr[300];
    long long next_id;
    char *in;              /* bytes read and not yet taken as lines */
    size_t in_len, in_cap;
};

void cbf_katcp_result_free(cbf_katcp_result *r)
{
    cbf_katcp_msg_free(&r->reply);
    for (size_t i = 0; i < r->n_informs; i++)
        cbf_katcp_msg_free(&r->informs[i]);
    free(r->informs);
    memset(r, 0, sizeof *r);
}

const char *cbf_katcp_result_status(const cbf_katcp_result *r)
{
    return r->reply.n_args ? r->reply.args[0] : "";
}

/* Milliseconds left until deadline (CLOCK_MONOTONIC seconds), at least 0. */
static int kc_left_ms(double deadline)
{
    double left = deadline - cbf_katcp_now(CLOCK_MONOTONIC);
    return left <= 0 ? 0 : left > 1e6 ? 1000000000 : (int)(left * 1e3) + 1;
}

int cbf_katcp_client_connect(const char *addr, double timeout_s, cbf_katcp_client **out, cbf_error *err)
{
    *out = NULL;
    char host[256], port[8];
    if (cbf_tcp_split(addr, host, sizeof host, port, sizeof port))
        return cbf_error_set(err, CBF_ECONFIG, "katcp client: '%s' is not PORT, HOST:PORT or [IPv6]:PORT", addr);
    struct addrinfo hints = {.ai_flags = AI_NUMERICSERV, .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    int grc = getaddrinfo(host, port, &hints, &ai);
    if (grc)
        return cbf_error_set(err, CBF_EIO, "katcp client: %s: host '%s': %s", addr, host, gai_strerror(grc));
    const double deadline = cbf_katcp_now(CLOCK_MONOTONIC) + timeout_s;
    int fd = -1, why = 0;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            why = errno;
            continue;
        }
        int rc = connect(fd, a->ai_addr, a->ai_addrlen);
        if (rc && errno == EINPROGRESS) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            int pr = poll(&pf, 1, kc_left_ms(deadline));
            socklen_t sl = sizeof why;
            why = pr == 0 ? ETIMEDOUT : pr < 0 ? errno : 0;
            if (pr > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &why, &sl))
                why = errno;
            rc = why ? -1 : 0;
        } else if (rc) {
            why = errno;
        }
        if (rc) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0)
        return cbf_error_set(err, CBF_EIO, "katcp client: cannot connect to %s: %s", addr, strerror(why));
    cbf_katcp_client *cl = calloc(1, sizeof *cl);
    if (!cl) {
        close(fd);
        return cbf_error_set(err, CBF_ENOMEM, "katcp client: out of memory");
    }
    cl->fd = fd;
    cl->next_id = 1;
    snprintf(cl->addr, sizeof cl->addr, "%s", addr);
    *out = cl;
    return CBF_OK;
}

void cbf_katcp_client_close(cbf_katcp_client *cl)
{
    if (!cl)
        return;
    if (cl->fd >= 0)
        close(cl->fd);
    free(cl->in);
    free(cl);
}

static int kc_send_all(cbf_katcp_client *cl, const char *p, size_t n, double deadline, cbf_error *err)
{
    while (n) {
        ssize_t put = send(cl->fd, p, n, MSG_NOSIGNAL);
        if (put > 0) {
            p += put;
            n -= (size_t)put;
            continue;
        }
        if (put < 0 && errno == EINTR)
            continue;
        if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pf = {.fd = cl->fd, .events = POLLOUT};
            if (poll(&pf, 1, kc_left_ms(deadline)) > 0)
                continue;
            return cbf_error_set(err, CBF_EIO, "katcp client: %s: timed out sending", cl->addr);
        }
        return cbf_error_set(err, CBF_EIO, "katcp client: %s: send: %s", cl->addr, strerror(errno));
    }
    return CBF_OK;
}

/* The next whole line into *line (its length in *len, the line end left
 * out): it stays valid until the next call. CBF_EAGAIN: the time ran out. */
static int kc_next_line(cbf_katcp_client *cl, size_t *consumed, const char **line, size_t *len, double deadline,
                        cbf_error *err)
{
    /* what the last line took goes first */
    if (*consumed) {
        memmove(cl->in, cl->in + *consumed, cl->in_len - *consumed);
        cl->in_len -= *consumed;
        *consumed = 0;
    }
    for (size_t scanned = 0;;) {
        for (; scanned < cl->in_len; scanned++)
            if (cl->in[scanned] == '\n' || cl->in[scanned] == '\r') {
                *line = cl->in;
                *len = scanned;
                *consumed = scanned + 1;
                return CBF_OK;
            }
        if (cl->in_len > KC_MAX_LINE)
            return cbf_error_set(err, CBF_EIO, "katcp client: %s: a line longer than %d bytes", cl->addr,
                                 KC_MAX_LINE);
        if (cl->in_cap - cl->in_len < 4096) {
            size_t cap = cl->in_cap ? 2 * cl->in_cap : 65536;
            char *p = realloc(cl->in, cap);
            if (!p)
                return cbf_error_set(err, CBF_ENOMEM, "katcp client: out of memory");
            cl->in = p;
            cl->in_cap = cap;
        }
        ssize_t got = recv(cl->fd, cl->in + cl->in_len, cl->in_cap - cl->in_len, 0);
        if (got > 0) {
            cl->in_len += (size_t)got;
            continue;
        }
        if (got == 0)
            return cbf_error_set(err, CBF_EIO, "katcp client: %s: the server closed the connection", cl->addr);
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return cbf_error_set(err, CBF_EIO, "katcp client: %s: recv: %s", cl->addr, strerror(errno));
        struct pollfd pf = {.fd = cl->fd, .events = POLLIN};
        if (poll(&pf, 1, kc_left_ms(deadline)) <= 0) {
            cbf_error_set(err, CBF_EIO, "katcp client: %s: timed out waiting for the reply", cl->addr);
            return CBF_EAGAIN;   /* the connection is sound: the caller's CBF_EIO */
        }
    }
}

int cbf_katcp_client_call(cbf_katcp_client *cl, const char *name, size_t n, const char *const *args,
                          double timeout_s, cbf_katcp_result *out, cbf_error *err)
{
    memset(out, 0, sizeof *out);
    if (cl->fd < 0)
        return cbf_error_set(err, CBF_EIO, "katcp client: %s: the connection failed earlier", cl->addr);
    const double deadline = cbf_katcp_now(CLOCK_MONOTONIC) + timeout_s;
    const long long id = cl->next_id++;
    cbf_katcp_buf b = {0};
    cbf_katcp_buf_msg(&b, '?', name, id, n, args);
    int rc = b.oom ? cbf_error_set(err, CBF_ENOMEM, "katcp client: out of memory") : CBF_OK;
    if (!rc)
        rc = kc_send_all(cl, b.p, b.len, deadline, err);
    cbf_katcp_buf_free(&b);
    size_t consumed = 0;
    while (!rc) {
        const char *line = NULL;
        size_t len = 0;
        rc = kc_next_line(cl, &consumed, &line, &len, deadline, err);
        if (rc || !len)
            continue;
        cbf_katcp_msg m;
        cbf_error perr;
        if (cbf_katcp_parse(line, len, &m, &perr)) {
            cbf_katcp_msg_free(&m);   /* a line we cannot read is not ours */
            continue;
        }
        bool mine = m.id == id && !strcmp(m.name, name);
        if (mine && m.type == '!') {
            out->reply = m;
            break;
        }
        cbf_katcp_msg *p = mine && m.type == '#' ? realloc(out->informs, (out->n_informs + 1) * sizeof *p) : NULL;
        if (p) {
            out->informs = p;
            out->informs[out->n_informs++] = m;
        } else {
            cbf_katcp_msg_free(&m);
            if (mine && m.type == '#')
                rc = cbf_error_set(err, CBF_ENOMEM, "katcp client: out of memory");
        }
    }
    /* the rest of what was read is the next call's */
    if (consumed) {
        memmove(cl->in, cl->in + consumed, cl->in_len - consumed);
        cl->in_len -= consumed;
    }
    if (rc) {
        cbf_katcp_result_free(out);
        /* Timed out waiting: a later call passes the late reply over (its
         * id). Else what the stream holds is unknown: no later call trusts it. */
        if (rc != CBF_EAGAIN && rc != CBF_ENOMEM) {
            close(cl->fd);
            cl->fd = -1;
        }
        if (rc == CBF_EAGAIN)
            rc = CBF_EIO;
        if (err) {
            err->code = rc;
            cbf_error_prefix(err, "?%s", name);
        }
        return rc;
    }
    return CBF_OK;
}
