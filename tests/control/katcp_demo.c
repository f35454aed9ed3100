/* katcp_demo.c: the two demonstration servers of katcp_demo.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "katcp_demo.h"

#define MEET_LIMIT_S 20   /* a safety net only: a test that works never waits for it */

static void deadline_in(struct timespec *t, int s)
{
    clock_gettime(CLOCK_REALTIME, t);
    t->tv_sec += s;
}

static long arg_long(cbf_katcp_call *c, size_t i, long lo, long hi, long *v)
{
    const char *a = cbf_katcp_call_arg(c, i, NULL);
    char *end;
    *v = a ? strtol(a, &end, 10) : 0;
    if (!a || end == a || *end || *v < lo || *v > hi) {
        cbf_katcp_reply_fmt(c, "fail", "argument %zu: a whole number from %ld to %ld", i + 1, lo, hi);
        return -1;
    }
    return 0;
}

static void meet(cbf_katcp_call *c, void *user)
{
    katcp_demo *d = user;
    long n;
    if (arg_long(c, 0, 1, 16, &n))
        return;
    struct timespec until;
    deadline_in(&until, MEET_LIMIT_S);
    pthread_mutex_lock(&d->mu);
    int round = d->met_round, rc = 0;
    if (++d->meeting >= n) {
        d->met_round++;   /* the last to come lets them all go */
        d->meeting = 0;
        pthread_cond_broadcast(&d->cv);
    }
    while (d->met_round == round && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&d->cv, &d->mu, &until);
    int inside = d->meeting;
    bool met = d->met_round != round;
    if (!met)
        d->meeting--;
    pthread_mutex_unlock(&d->mu);
    if (met)
        cbf_katcp_reply_fmt(c, "ok", "%ld", n);
    else
        cbf_katcp_reply_fmt(c, "fail", "only %d of %ld met", inside, n);
}

static void hold(cbf_katcp_call *c, void *user)
{
    katcp_demo *d = user;
    pthread_mutex_lock(&d->mu);
    while (!d->released)
        pthread_cond_wait(&d->cv, &d->mu);
    pthread_mutex_unlock(&d->mu);
    cbf_katcp_reply(c, "ok", 0, NULL);
}

static void release(cbf_katcp_call *c, void *user)
{
    katcp_demo *d = user;
    pthread_mutex_lock(&d->mu);
    d->released = true;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    cbf_katcp_reply(c, "ok", 0, NULL);
}

typedef struct count_job {
    katcp_demo *d;
    long n;
} count_job;

static void *count_main(void *arg)
{
    count_job *j = arg;
    for (long i = 1; i <= j->n; i++) {
        char v[24];
        snprintf(v, sizeof v, "%ld", i);
        cbf_katcp_sensor_set(j->d->a, "demo.counter", CBF_KATCP_NOMINAL, v, 0, NULL);
    }
    free(j);
    return NULL;
}

static void count(cbf_katcp_call *c, void *user)
{
    katcp_demo *d = user;
    long n;
    if (arg_long(c, 0, 1, 100000, &n))
        return;
    count_job *j = malloc(sizeof *j);
    if (!j) {
        cbf_katcp_reply_fmt(c, "fail", "out of memory");
        return;
    }
    *j = (count_job){d, n};
    if (d->counting)
        pthread_join(d->counter, NULL);   /* the previous count has ended, or ends soon */
    d->counting = pthread_create(&d->counter, NULL, count_main, j) == 0;
    if (!d->counting)
        free(j);
    cbf_katcp_reply(c, d->counting ? "ok" : "fail", 0, NULL);
}

static void echo(cbf_katcp_call *c, void *user)
{
    (void)user;
    size_t n = cbf_katcp_call_nargs(c);
    for (size_t i = 0; i < n; i++) {
        const char *a[] = {cbf_katcp_call_arg(c, i, NULL)};
        cbf_katcp_inform(c, 1, a);
    }
    cbf_katcp_reply_fmt(c, "ok", "%zu", n);
}

static void quiet(cbf_katcp_call *c, void *user)
{
    (void)c;
    (void)user;
}

static void drop(cbf_katcp_call *c, void *user)
{
    katcp_demo *d = user;
    const char *p = cbf_katcp_call_arg(c, 0, NULL);
    if (!p || cbf_katcp_call_nargs(c) != 1) {
        cbf_katcp_reply_fmt(c, "fail", "?drop PREFIX");
        return;
    }
    cbf_katcp_reply_fmt(c, "ok", "%zu", cbf_katcp_sensor_remove_prefix(d->a, p));
}

static void add(cbf_katcp_call *c, void *user)
{
    katcp_demo *d = user;
    const char *name = cbf_katcp_call_arg(c, 0, NULL);
    cbf_katcp_sensor_info info = {name, "a sensor added by ?add", "", CBF_KATCP_INTEGER, NULL, 0};
    cbf_error err;
    if (!name || cbf_katcp_call_nargs(c) != 1)
        cbf_katcp_reply_fmt(c, "fail", "?add NAME");
    else if (cbf_katcp_sensor_add(d->a, &info, &err))
        cbf_katcp_reply_fmt(c, "fail", "%s", err.msg);
    else
        cbf_katcp_reply(c, "ok", 0, NULL);
}

static void ask(cbf_katcp_call *c, void *user)
{
    katcp_demo *d = user;
    size_t n = cbf_katcp_call_nargs(c);
    if (!n) {
        cbf_katcp_reply_fmt(c, "fail", "?ask NAME ARG...");
        return;
    }
    const char **args = calloc(n, sizeof *args);
    for (size_t i = 0; args && i < n; i++)
        args[i] = cbf_katcp_call_arg(c, i, NULL);
    cbf_katcp_client *cl = NULL;
    cbf_katcp_result r;
    cbf_error err;
    int rc = args ? cbf_katcp_client_connect(cbf_katcp_server_address(d->a), 5, &cl, &err)
                  : cbf_error_set(&err, CBF_ENOMEM, "out of memory");
    if (!rc)
        rc = cbf_katcp_client_call(cl, args[0], n - 1, args + 1, 30, &r, &err);
    cbf_katcp_client_close(cl);
    free(args);
    if (rc) {
        cbf_katcp_reply_fmt(c, "fail", "%s", err.msg);
        return;
    }
    for (size_t i = 0; i < r.n_informs; i++) {
        const cbf_katcp_msg *m = &r.informs[i];
        cbf_katcp_inform(c, m->n_args, (const char *const *)m->args);
    }
    cbf_katcp_reply(c, cbf_katcp_result_status(&r), r.reply.n_args ? r.reply.n_args - 1 : 0,
                    (const char *const *)r.reply.args + 1);
    cbf_katcp_result_free(&r);
}

static int b_snapshot(cbf_katcp_sensors *out, void *user)
{
    katcp_demo *d = user;
    pthread_mutex_lock(&d->mu);
    long n = ++d->reads;
    pthread_mutex_unlock(&d->mu);
    char v[24];
    snprintf(v, sizeof v, "%ld", n);
    static const cbf_katcp_sensor_info info = {"b.reads", "how often B's snapshot was read", "",
                                               CBF_KATCP_INTEGER, NULL, 0};
    return cbf_katcp_sensors_put(out, &info, CBF_KATCP_NOMINAL, v, 0);
}

static const char *const states[] = {"idle", "busy"};

int katcp_demo_open(katcp_demo *d, cbf_error *err)
{
    memset(d, 0, sizeof *d);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    const cbf_katcp_server_options ao = {.label = "demo A", .device = "demo-device", .device_build = "test"};
    const cbf_katcp_server_options bo = {.label = "demo B", .device = "demo-controller", .snapshot = b_snapshot,
                                         .snapshot_user = d};
    const cbf_katcp_request areq[] = {
        {"meet", "?meet N: answered once N are running at once", meet, d, CBF_KATCP_SLOW},
        {"hold", "?hold: answered after ?release", hold, d, CBF_KATCP_SLOW},
        {"release", "?release: lets ?hold go", release, d, 0},
        {"count", "?count N: demo.counter counts to N", count, d, 0},
        {"echo", "?echo ARG...: an inform per argument", echo, d, 0},
        {"quiet", "?quiet: no reply", quiet, d, 0},
        {"drop", "?drop PREFIX: removes sensors", drop, d, 0},
        {"add", "?add NAME: adds an integer sensor", add, d, 0},
    };
    const cbf_katcp_sensor_info sensors[] = {
        {"demo.counter", "counts when ?count is asked", "", CBF_KATCP_INTEGER, NULL, 0},
        {"demo.level", "a level", "dB", CBF_KATCP_FLOAT, NULL, 0},
        {"demo.flag", "a flag", "", CBF_KATCP_BOOLEAN, NULL, 0},
        {"demo.state", "what it does", "", CBF_KATCP_DISCRETE, states, 2},
        {"demo.where", "where it is", "", CBF_KATCP_ADDRESS, NULL, 0},
        {"demo.when", "when it began", "s", CBF_KATCP_TIMESTAMP, NULL, 0},
        {"demo.note", "a note", "", CBF_KATCP_STRING, NULL, 0},
    };
    const cbf_katcp_request ask_req = {"ask", "?ask NAME ARG...: asks server A", ask, d, CBF_KATCP_SLOW};
    int rc = cbf_katcp_server_open("127.0.0.1:0", &ao, &d->a, err);
    if (!rc)
        rc = cbf_katcp_server_open("127.0.0.1:0", &bo, &d->b, err);
    for (size_t i = 0; !rc && i < sizeof areq / sizeof areq[0]; i++)
        rc = cbf_katcp_server_add_request(d->a, &areq[i], err);
    for (size_t i = 0; !rc && i < sizeof sensors / sizeof sensors[0]; i++)
        rc = cbf_katcp_sensor_add(d->a, &sensors[i], err);
    if (!rc)
        rc = cbf_katcp_server_add_request(d->b, &ask_req, err);
    if (!rc)
        rc = cbf_katcp_server_start(d->a, err);
    if (!rc)
        rc = cbf_katcp_server_start(d->b, err);
    if (rc)
        katcp_demo_close(d);
    return rc;
}

void katcp_demo_close(katcp_demo *d)
{
    pthread_mutex_lock(&d->mu);
    d->released = true;   /* a ?hold still waiting returns */
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    if (d->counting)
        pthread_join(d->counter, NULL);   /* it sets A's sensors */
    cbf_katcp_server_close(d->b);
    cbf_katcp_server_close(d->a);
    d->a = d->b = NULL;
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
}
