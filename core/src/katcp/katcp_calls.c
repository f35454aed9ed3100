/* katcp_calls.c: the katcp server's requests (cbf/katcp.h): the call a
 * handler answers through, the built-ins that are not about sensors (help,
 * watchdog, log-level, version-list), the handlers a program registers,
 * and the request threads a slow request runs on.
 *
 * A slow request (its handler says so, or a line for the fallback longer
 * than KC_INLINE_MAX) goes whole, as a job, to a queue that the request
 * threads take from; its client's next lines wait (kc_client.waiting),
 * so every client sees its replies in order while the others are served.
 * When n_jobs handed off and not yet collected reach max_jobs, another is
 * refused "busy" at once: that bounds what slow requests hold. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cbf/log.h"
#include "katcp_server.h"

/* ---- the call ---- */

const char *cbf_katcp_call_name(const cbf_katcp_call *c) { return c->m->name; }
long long cbf_katcp_call_id(const cbf_katcp_call *c) { return c->m->id; }
size_t cbf_katcp_call_nargs(const cbf_katcp_call *c) { return c->m->n_args; }
cbf_katcp_server *cbf_katcp_call_server(const cbf_katcp_call *c) { return c->s; }
const cbf_katcp_msg *cbf_katcp_call_msg(const cbf_katcp_call *c) { return c->m; }

const char *cbf_katcp_call_arg(const cbf_katcp_call *c, size_t i, size_t *len)
{
    if (i >= c->m->n_args)
        return NULL;
    if (len)
        *len = c->m->lens[i];
    return c->m->args[i];
}

void cbf_katcp_inform(cbf_katcp_call *c, size_t n, const char *const *args)
{
    if (!c->replied)
        cbf_katcp_buf_msg(c->out, '#', c->m->name, c->m->id, n, args);
}

void cbf_katcp_help(cbf_katcp_call *c, const char *name, const char *text)
{
    const char *a[] = {name, text};
    cbf_katcp_buf_msg(c->out, '#', "help", c->m->id, 2, a);
}

void cbf_katcp_reply(cbf_katcp_call *c, const char *status, size_t n, const char *const *args)
{
    if (c->replied)
        return;
    c->replied = true;
    cbf_katcp_buf_start(c->out, '!', c->m->name, c->m->id);
    cbf_katcp_buf_arg(c->out, status, strlen(status));
    for (size_t i = 0; i < n; i++)
        cbf_katcp_buf_arg(c->out, args[i], strlen(args[i]));
    cbf_katcp_buf_put(c->out, "\n", 1);
}

void cbf_katcp_reply_fmt(cbf_katcp_call *c, const char *status, const char *fmt, ...)
{
    if (!fmt) {
        cbf_katcp_reply(c, status, 0, NULL);
        return;
    }
    char msg[CBF_ERROR_MSG_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *a[] = {msg};
    cbf_katcp_reply(c, status, 1, a);
}

bool cbf_katcp_want_args(cbf_katcp_call *c, size_t lo, size_t hi)
{
    if (c->m->n_args >= lo && c->m->n_args <= hi)
        return true;
    cbf_katcp_reply_fmt(c, "fail", "?%s takes %zu to %zu arguments, got %zu", c->m->name, lo, hi, c->m->n_args);
    return false;
}

/* ---- built-ins ---- */

void cbf_katcp_versions(cbf_katcp_server *s, cbf_katcp_buf *b, const char *inform, long long id)
{
    const char *v[][3] = {{"katcp-protocol", s->protocol, NULL},
                          {"katcp-library", "cbf-katcp-1.0", NULL},
                          {"katcp-device", s->device, s->device_build}};
    for (int i = 0; i < 3; i++)
        cbf_katcp_buf_msg(b, '#', inform, id, v[i][2] ? 3 : 2, v[i]);
}

static void kc_watchdog(cbf_katcp_call *c)
{
    if (cbf_katcp_want_args(c, 0, 0))
        cbf_katcp_reply(c, "ok", 0, NULL);
}

static void kc_version_list(cbf_katcp_call *c)
{
    if (!cbf_katcp_want_args(c, 0, 0))
        return;
    cbf_katcp_versions(c->s, c->out, "version-list", c->m->id);
    cbf_katcp_reply_fmt(c, "ok", "3");
}

static void kc_log_level(cbf_katcp_call *c)
{
    static const char *const names[] = {"error", "warn", "info", "debug", "trace"};
    if (!cbf_katcp_want_args(c, 0, 1))
        return;
    if (c->m->n_args) {
        const char *a = c->m->args[0];
        cbf_log_level l;
        /* katcp's other levels, on the nearest of ours. */
        if (!strcmp(a, "all"))
            l = CBF_LOG_TRACE;
        else if (!strcmp(a, "fatal") || !strcmp(a, "off"))
            l = CBF_LOG_ERROR;
        else if (cbf_log_level_parse(a, &l)) {
            cbf_katcp_reply_fmt(c, "fail", "unknown level '%s' (all, trace, debug, info, warn, error, fatal, off)", a);
            return;
        }
        cbf_log_set_level(l);
        cbf_log_info("log level set to %s over katcp", names[l]);
    }
    const char *now[] = {names[cbf_log_get_level()]};
    cbf_katcp_reply(c, "ok", 1, now);
}

static void kc_help(cbf_katcp_call *c);

static const struct kc_builtin {
    const char *name, *help;
    void (*fn)(cbf_katcp_call *c);
} kc_builtins[] = {
    {"help", "?help [name]: the requests accepted here, or one of them", kc_help},
    {"watchdog", "?watchdog: answers ok (a liveness check)", kc_watchdog},
    {"log-level", "?log-level [level]: read or set the log level (all, trace, debug, info, warn, error, "
                  "fatal, off)", kc_log_level},
    {"version-list", "?version-list: protocol, library and device versions", kc_version_list},
    {"sensor-list", "?sensor-list [name|/regex/]: sensors with description, units and type",
     cbf_katcp_sensor_list},
    {"sensor-value", "?sensor-value [name|/regex/]: sensors' timestamp, status and value",
     cbf_katcp_sensor_value},
    {"sensor-sampling", "?sensor-sampling name [auto|event|none|period SECONDS]: #sensor-status informs on "
                        "this connection", cbf_katcp_sensor_sampling},
};
#define KC_N_BUILTINS (sizeof kc_builtins / sizeof kc_builtins[0])

static void kc_help(cbf_katcp_call *c)
{
    if (!cbf_katcp_want_args(c, 0, 1))
        return;
    const char *want = c->m->n_args ? c->m->args[0] : NULL;
    size_t n = 0;
    for (size_t i = 0; i < KC_N_BUILTINS; i++)
        if (!want || !strcmp(want, kc_builtins[i].name)) {
            cbf_katcp_help(c, kc_builtins[i].name, kc_builtins[i].help);
            n++;
        }
    for (size_t i = 0; i < c->s->n_req; i++)
        if (!want || !strcmp(want, c->s->req[i].name)) {
            cbf_katcp_help(c, c->s->req[i].name, c->s->req[i].help);
            n++;
        }
    if (c->s->fallback_help)
        n += c->s->fallback_help(c, want, c->s->fallback_user);
    if (want && !n)
        cbf_katcp_reply_fmt(c, "fail", "unknown request '%s'", want);
    else
        cbf_katcp_reply_fmt(c, "ok", "%zu", n);
}

/* ---- handlers ---- */

static bool kc_name_ok(const char *n)
{
    if (!n || !((*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z')) || strlen(n) >= CBF_KATCP_NAME_MAX)
        return false;
    return strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") == strlen(n);
}

static const kc_handler *kc_find(const cbf_katcp_server *s, const char *name)
{
    for (size_t i = 0; i < s->n_req; i++)
        if (!strcmp(s->req[i].name, name))
            return &s->req[i];
    return NULL;
}

int cbf_katcp_server_add_request(cbf_katcp_server *s, const cbf_katcp_request *r, cbf_error *err)
{
    if (s->started)
        return cbf_error_set(err, CBF_EINVAL, "%s: request '%s' added after start", s->label, r->name);
    if (!kc_name_ok(r->name) || !r->fn)
        return cbf_error_set(err, CBF_EINVAL, "%s: request '%s': %s", s->label, r->name ? r->name : "(null)",
                             r->fn ? "a name is a letter, then letters, digits and '-'" : "no handler");
    bool taken = kc_find(s, r->name) != NULL;
    for (size_t i = 0; i < KC_N_BUILTINS; i++)
        taken |= !strcmp(r->name, kc_builtins[i].name);
    if (taken)
        return cbf_error_set(err, CBF_EINVAL, "%s: request '%s' is there already", s->label, r->name);
    kc_handler *p = realloc(s->req, (s->n_req + 1) * sizeof *p);
    if (!p)
        return cbf_error_set(err, CBF_ENOMEM, "%s: out of memory", s->label);
    s->req = p;
    kc_handler *h = &s->req[s->n_req];
    *h = (kc_handler){strdup(r->name), strdup(r->help ? r->help : ""), r->fn, r->user, r->flags};
    if (!h->name || !h->help) {
        free(h->name);
        free(h->help);
        return cbf_error_set(err, CBF_ENOMEM, "%s: out of memory", s->label);
    }
    s->n_req++;
    return CBF_OK;
}

/* Runs a handler (h, or the fallback when h is NULL) and makes sure the
 * request is answered once. */
static void kc_run(cbf_katcp_server *s, const kc_handler *h, cbf_katcp_call *c)
{
    if (h)
        h->fn(c, h->user);
    else if (s->fallback)
        s->fallback(c, s->fallback_user);
    else
        cbf_katcp_reply_fmt(c, "invalid", "unknown request '%s' (?help lists what is accepted here)", c->m->name);
    if (!c->replied)
        cbf_katcp_reply_fmt(c, "fail", "?%s gave no reply", c->m->name);
}

/* ---- request threads ---- */

static void kc_hand_off(cbf_katcp_server *s, kc_client *c, cbf_katcp_msg *m, const kc_handler *h, bool long_line)
{
    if (s->n_jobs >= s->max_jobs) {
        cbf_katcp_call call = {s, c, m, &c->out, false};
        if (long_line && s->n_workers == 1)
            cbf_katcp_reply_fmt(&call, "fail", "busy: another request over %d KiB is being answered; send this "
                                "one again once it is", KC_INLINE_MAX >> 10);
        else
            cbf_katcp_reply_fmt(&call, "fail", "busy: %d slow requests are being answered; send this one again "
                                "once one is", s->n_jobs);
        return;
    }
    kc_job *j = calloc(1, sizeof *j);
    if (!j) {
        cbf_katcp_call call = {s, c, m, &c->out, false};
        cbf_katcp_reply_fmt(&call, "fail", "out of memory");
        return;
    }
    j->slot = (int)(c - s->cl);
    j->gen = c->gen;
    j->m = *m;
    j->h = h;
    memset(m, 0, sizeof *m);
    pthread_mutex_lock(&s->job_mu);
    if (s->queue_tail)
        s->queue_tail->next = j;
    else
        s->queue = j;
    s->queue_tail = j;
    pthread_cond_signal(&s->job_cv);
    pthread_mutex_unlock(&s->job_mu);
    s->n_jobs++;
    c->waiting = true;
}

static const struct kc_builtin *kc_builtin_of(const char *name)
{
    for (size_t i = 0; i < KC_N_BUILTINS; i++)
        if (!strcmp(name, kc_builtins[i].name))
            return &kc_builtins[i];
    return NULL;
}

void cbf_katcp_answer(cbf_katcp_server *s, kc_client *c, cbf_katcp_msg *m, size_t len)
{
    cbf_katcp_call call = {s, c, m, &c->out, false};
    /* Built-ins are quick and bounded, and some change the client's state:
     * always here. */
    const struct kc_builtin *b = kc_builtin_of(m->name);
    if (b) {
        b->fn(&call);
        return;
    }
    const kc_handler *h = kc_find(s, m->name);
    bool long_line = len > KC_INLINE_MAX;
    if ((h && (h->flags & CBF_KATCP_SLOW)) || (!h && s->fallback && long_line))
        kc_hand_off(s, c, m, h, long_line && !h);
    else
        kc_run(s, h, &call);
}

static void *kc_worker(void *arg)
{
    cbf_katcp_server *s = arg;
    cbf_log_set_thread_name("katcp-slow");
    pthread_mutex_lock(&s->job_mu);
    for (;;) {
        while (!s->queue && !atomic_load(&s->quit))
            pthread_cond_wait(&s->job_cv, &s->job_mu);
        if (atomic_load(&s->quit))
            break;   /* what still waits is freed by the closer */
        kc_job *j = s->queue;
        s->queue = j->next;
        if (!s->queue)
            s->queue_tail = NULL;
        pthread_mutex_unlock(&s->job_mu);
        cbf_katcp_call call = {s, NULL, &j->m, &j->out, false};
        double t0 = cbf_katcp_now(CLOCK_MONOTONIC);
        kc_run(s, j->h, &call);
        cbf_log_debug("%s: ?%s (slow) answered in %.1f ms", s->label, j->m.name,
                      1e3 * (cbf_katcp_now(CLOCK_MONOTONIC) - t0));
        pthread_mutex_lock(&s->job_mu);
        j->next = s->done;
        s->done = j;
        cbf_katcp_wake(s);
    }
    pthread_mutex_unlock(&s->job_mu);
    return NULL;
}

int cbf_katcp_workers_start(cbf_katcp_server *s, cbf_error *err)
{
    s->workers = calloc((size_t)s->n_workers, sizeof *s->workers);
    if (!s->workers)
        return cbf_error_set(err, CBF_ENOMEM, "%s: out of memory", s->label);
    for (int i = 0; i < s->n_workers; i++) {
        if (pthread_create(&s->workers[i], NULL, kc_worker, s) != 0) {
            s->n_workers = i;   /* the started ones are joined at close */
            return cbf_error_set(err, CBF_ENOMEM, "%s: cannot start its request threads", s->label);
        }
    }
    return CBF_OK;
}

static void kc_jobs_free(kc_job *j)
{
    while (j) {
        kc_job *next = j->next;
        cbf_katcp_msg_free(&j->m);
        cbf_katcp_buf_free(&j->out);
        free(j);
        j = next;
    }
}

void cbf_katcp_workers_stop(cbf_katcp_server *s)
{
    if (s->workers) {
        pthread_mutex_lock(&s->job_mu);
        pthread_cond_broadcast(&s->job_cv);
        pthread_mutex_unlock(&s->job_mu);
        for (int i = 0; i < s->n_workers; i++)
            pthread_join(s->workers[i], NULL);   /* a handler running is waited for */
        free(s->workers);
        s->workers = NULL;
    }
    kc_jobs_free(s->queue);
    kc_jobs_free(s->done);
    s->queue = s->queue_tail = s->done = NULL;
}

void cbf_katcp_jobs_done(cbf_katcp_server *s)
{
    pthread_mutex_lock(&s->job_mu);
    kc_job *done = s->done;
    s->done = NULL;
    pthread_mutex_unlock(&s->job_mu);
    /* Oldest first: the list was pushed at its head. */
    kc_job *rev = NULL;
    while (done) {
        kc_job *next = done->next;
        done->next = rev;
        rev = done;
        done = next;
    }
    for (kc_job *j = rev; j; j = j->next) {
        s->n_jobs--;
        kc_client *c = &s->cl[j->slot];
        if (c->fd < 0 || c->gen != j->gen)
            continue;   /* gone: its reply with it */
        cbf_katcp_buf_put(&c->out, j->out.p ? j->out.p : "", j->out.len);
        c->out.oom |= j->out.oom;
        c->waiting = false;
        c->last_rx = cbf_katcp_now(CLOCK_MONOTONIC);
        cbf_katcp_lines(s, c);
    }
    kc_jobs_free(rev);
}
