/* product_fanout.c: katsdpcontroller's product requests on the product
 * controller: checked and split by requests.c, each engine call sent with
 * libcbf's katcp client to the engine(s) it names (in parallel, one thread
 * per engine), the reply ok once all succeed, else fail naming each engine
 * that did not and what it said.
 *
 * The engines take katgpucbf's per-engine forms with the stream argument
 * being a node of their pipeline (docs/control.md, "katcp"), so the
 * product's stream names become the planned pipelines' node names here
 * (tools/array/write.c names them): an F-engine's gains are its `post`
 * (fft_post) node's, its delays its `pfb` node's; an X/B-engine's beams are
 * `beam0`, `beam1`, ... in the order of the product's beam streams, its
 * visibilities' capture its `vsend` node's and the beams' its `bsend`
 * node's (one sender for all beams: starting or stopping one beam's
 * capture does so for every beam of the engine). capture-start's
 * timestamp goes on as katsdpcontroller sends it: the engine's sender sends
 * nothing that starts before it (docs/control.md, "katcp"). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "product_ctl_priv.h"
#include "requests.h"

#define ENGINE_CONNECT_S 2.0
#define ENGINE_CALL_S 60.0

typedef struct job {
    cbf_product_ctl *pc;
    const cbf_plan_engine *engine;
    int index;                  /* of engine in the plan */
    const char *name;
    const char **args;
    int n_args;
    int ok;
    char text[1024];            /* the reply's arguments, or why it failed */
    cbf_katcp_result result;
    int have_result;
    cbf_katcp_result steady;    /* the engine's steady-state-timestamps once it said ok */
    int have_steady;
} job;

static void *run_job(void *arg)
{
    job *j = arg;
    char addr[128];
    snprintf(addr, sizeof addr, "%s:%d", j->engine->address, j->engine->katcp_port);
    cbf_katcp_client *cl = NULL;
    cbf_error err = {0};
    if (cbf_katcp_client_connect(addr, ENGINE_CONNECT_S, &cl, &err) ||
        cbf_katcp_client_call(cl, j->name, (size_t)j->n_args, j->args, ENGINE_CALL_S, &j->result, &err)) {
        snprintf(j->text, sizeof j->text, "%s", err.msg);
        cbf_katcp_client_close(cl);
        return NULL;
    }
    j->have_result = 1;
    j->ok = !strcmp(cbf_katcp_result_status(&j->result), "ok");
    /* What took effect and when, read before the product's reply: a client
     * (katgpucbf's suite) reads the steady-state-timestamp sensors right
     * after it, and the mirror's once-a-second reading would be older. */
    static const char *const pattern[] = {"/steady-state-timestamp$/"};
    if (j->ok && !cbf_katcp_client_call(cl, "sensor-value", 1, pattern, ENGINE_CALL_S, &j->steady, &err))
        j->have_steady = !strcmp(cbf_katcp_result_status(&j->steady), "ok");
    else
        cbf_error_clear(&err);
    cbf_katcp_client_close(cl);
    size_t l = 0;
    j->text[0] = '\0';
    for (size_t i = j->ok ? 1 : 0; i < j->result.reply.n_args && l < sizeof j->text; i++)
        l += (size_t)snprintf(j->text + l, sizeof j->text - l, "%s%s", l ? " " : "", j->result.reply.args[i]);
    return NULL;
}

/* The node an engine call's stream argument becomes, NULL: the argument
 * stays (a dsim's request has none). */
static const char *node_for(const cbf_product *p, const cbf_engine_call *c, char *buf, size_t n)
{
    const char *req = c->args[0];
    if (c->task == CBF_TASK_F)
        return !strcmp(req, "delays") ? PC_NODE_DELAY : PC_NODE_EQ;
    if (c->task != CBF_TASK_XB || c->n_args < 2)
        return NULL;
    const cbf_product_stream *s = cbf_product_find(p, c->args[1]);
    if (!s)
        return NULL;
    if (!strncmp(req, "capture-", 8))
        return s->kind == CBF_STREAM_BCP ? PC_NODE_VSEND : PC_NODE_BSEND;
    pc_beam_name(p, s, buf, n);   /* beam-* */
    return buf;
}

static int targets(const cbf_product_plan *pl, const cbf_engine_call *c, int k)
{
    const cbf_plan_engine *e = &pl->engines[k];
    /* c->acv: the channeliser the request's stream is, or comes from */
    switch (c->task) {
    case CBF_TASK_F:
        return e->kind == PROC_FENG && e->index == c->index && e->acv == c->acv;
    case CBF_TASK_XB:
        return e->kind == PROC_XENG && e->acv == c->acv;
    case CBF_TASK_SIM:
        return e->kind == PROC_DIGITISER && !strcmp(e->task, c->dsim);
    }
    return 0;
}

/* The largest valid steady-state-timestamp of the engines (0: none yet). */
static long long steady_timestamp(cbf_product_ctl *pc)
{
    long long t = 0;
    pthread_mutex_lock(&pc->mu);
    for (int i = 0; i < pc->n_eng; i++)
        t = pc->eng[i].steady > t ? pc->eng[i].steady : t;
    pthread_mutex_unlock(&pc->mu);
    return t;
}

/* capture-start/-stop done: the stream's capture state and product-state. */
static void note_capture(cbf_product_ctl *pc, const char *req, const char *stream)
{
    const cbf_product_stream *s = cbf_product_find(pc->rp->product, stream);
    if (!s)
        return;
    pthread_mutex_lock(&pc->mu);
    int on = !strcmp(req, "capture-start");
    pc->capturing += on - pc->capturing_stream[s->index];
    pc->capturing_stream[s->index] = (char)on;
    pc_set(pc, "product-state", CBF_KATCP_NOMINAL, pc->capturing ? "capturing" : "idle");
    pthread_mutex_unlock(&pc->mu);
}

static void reply_jobs(cbf_katcp_call *call, job *jobs, int n, int reply_from_first)
{
    int failed = 0;
    for (int i = 0; i < n; i++)
        failed += !jobs[i].ok;
    if (!failed && reply_from_first && n > 0 && jobs[0].have_result) {
        const cbf_katcp_msg *r = &jobs[0].result.reply;
        cbf_katcp_reply(call, "ok", r->n_args ? r->n_args - 1 : 0, (const char *const *)r->args + 1);
        return;
    }
    if (!failed) {
        cbf_katcp_reply(call, "ok", 0, NULL);
        return;
    }
    size_t cap = 1024 * (size_t)failed + 64, l = 0;
    char *msg = malloc(cap);
    if (!msg) {
        cbf_katcp_reply_fmt(call, "fail", "out of memory");
        return;
    }
    msg[0] = '\0';
    for (int i = 0; i < n; i++)
        if (!jobs[i].ok)
            l += (size_t)snprintf(msg + l, cap - l, "%sengine %s (%s) on host %s: %s", l ? "; " : "",
                                  jobs[i].engine->name, jobs[i].engine->task, jobs[i].engine->host,
                                  jobs[i].text[0] ? jobs[i].text : "failed");
    cbf_katcp_reply_fmt(call, "fail", "%s", msg);
    free(msg);
}

static void product_request(cbf_katcp_call *call, void *user)
{
    cbf_product_ctl *pc = user;
    const cbf_product_plan *pl = pc->rp->plan;
    size_t na = cbf_katcp_call_nargs(call);
    const char **args = calloc(na + 1, sizeof *args);
    if (!args) {
        cbf_katcp_reply_fmt(call, "fail", "out of memory");
        return;
    }
    for (size_t i = 0; i < na; i++)
        args[i] = cbf_katcp_call_arg(call, i, NULL);
    cbf_product_request req = {cbf_katcp_call_name(call), (int)na, args};
    cbf_fanout f;
    cbf_error err = {0};
    if (cbf_product_request_plan(pc->rp->product, &req, steady_timestamp(pc), &f, &err)) {
        cbf_katcp_reply_fmt(call, "fail", "%s", err.msg);
        free(args);
        return;
    }
    int n = 0;
    for (int c = 0; c < f.n; c++)
        for (int k = 0; k < pl->n_engines; k++)
            n += targets(pl, &f.calls[c], k);
    job *jobs = calloc((size_t)n + 1, sizeof *jobs);
    char (*nodes)[32] = calloc((size_t)f.n + 1, sizeof *nodes);
    const char ***argv = calloc((size_t)f.n + 1, sizeof *argv);
    pthread_t *th = calloc((size_t)n + 1, sizeof *th);
    int *started = calloc((size_t)n + 1, sizeof *started);
    if (!jobs || !nodes || !argv || !th || !started) {
        cbf_katcp_reply_fmt(call, "fail", "out of memory");
        goto done;
    }
    int j = 0;
    for (int c = 0; c < f.n; c++) {
        const cbf_engine_call *ec = &f.calls[c];
        if (!(argv[c] = calloc((size_t)ec->n_args, sizeof *argv[c]))) {
            cbf_katcp_reply_fmt(call, "fail", "out of memory");
            goto done;
        }
        int m = 0;
        const char *node = node_for(pc->rp->product, ec, nodes[c], sizeof nodes[c]);
        for (int a = 1; a < ec->n_args; a++)
            argv[c][m++] = a == 1 && node ? node : ec->args[a];
        for (int k = 0; k < pl->n_engines; k++)
            if (targets(pl, ec, k))
                jobs[j++] = (job){.pc = pc, .engine = &pl->engines[k], .index = k, .name = ec->args[0],
                                  .args = argv[c], .n_args = m};
    }
    if (!n) {
        cbf_katcp_reply_fmt(call, "fail", "%s: no engine of this product takes it", req.name);
        goto done;
    }
    for (int i = 0; i < n; i++)
        started[i] = n > 1 ? !pthread_create(&th[i], NULL, run_job, &jobs[i]) : 0;
    for (int i = 0; i < n; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        else
            run_job(&jobs[i]);
    }
    for (int i = 0; i < n; i++)
        if (jobs[i].have_steady)
            pc_mirror_reading(pc, jobs[i].index, &jobs[i].steady);
    reply_jobs(call, jobs, n, f.reply_from_first);
    int all_ok = 1;
    for (int i = 0; i < n; i++)
        all_ok &= jobs[i].ok;
    if (all_ok && !strncmp(req.name, "capture-", 8))
        note_capture(pc, req.name, args[0]);
done:
    for (int i = 0; jobs && i < n; i++)
        if (jobs[i].have_result)
            cbf_katcp_result_free(&jobs[i].result);
    for (int i = 0; jobs && i < n; i++)
        cbf_katcp_result_free(&jobs[i].steady);   /* zeroed when never asked */
    for (int c = 0; argv && c < f.n; c++)
        free(argv[c]);
    free(argv);
    free(nodes);
    free(jobs);
    free(th);
    free(started);
    free(args);
    cbf_fanout_free(&f);
}

int pc_fanout_register(cbf_product_ctl *pc, cbf_error *err)
{
    static const struct {
        const char *name, *help;
    } reqs[] = {
        {"gain", "?gain STREAM INPUT [VALUE...]: an input's complex gains (none: the gains in force)"},
        {"gain-all", "?gain-all STREAM VALUE...|default: every input's complex gains"},
        {"delays", "?delays STREAM TIME MODEL...: one delay,delay_rate:phase,phase_rate per input from TIME"},
        {"beam-weights", "?beam-weights STREAM WEIGHT...: one real weight per antenna"},
        {"beam-delays", "?beam-delays STREAM DELAY:PHASE...: one per antenna"},
        {"beam-quant-gains", "?beam-quant-gains STREAM GAIN: the beam's quantisation gain"},
        {"capture-start", "?capture-start STREAM [TIMESTAMP]: start sending a correlator or beam stream"},
        {"capture-stop", "?capture-stop STREAM: stop sending it"},
        {"dsim-signals", "?dsim-signals DSIM SIGNALS [PERIOD]: a simulated digitiser's signals"},
        {"dsim-time", "?dsim-time DSIM: a simulated digitiser's clock (UNIX seconds)"},
    };
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        cbf_katcp_request r = {reqs[i].name, reqs[i].help, product_request, pc, CBF_KATCP_SLOW};
        int rc = cbf_katcp_server_add_request(pc->srv, &r, err);
        if (rc)
            return rc;
    }
    return 0;
}
