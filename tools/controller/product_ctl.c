/* product_ctl.c: one product's controller (product_ctl.h): configured,
 * served on its katcp port with its sensors, and kept in step with its
 * engines' supervision. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cbf/log.h"
#include "product_ctl_priv.h"
#include "stream_sensors.h"

static const char *const state_values[] = {"starting", "up", "down", "restarting", "failed", "stopped"};
static const char *const status_values[] = {"ok", "degraded", "fail"};
static const char *const product_state_values[] = {"configuring", "idle", "capturing", "deconfiguring",
                                                   "dead", "error"};

void pc_set(cbf_product_ctl *pc, const char *name, cbf_katcp_status st, const char *value)
{
    if (pc->srv)
        cbf_katcp_sensor_set(pc->srv, name, st, value, 0, NULL);
}

/* The worst of the engines, as katsdpcontroller's device-status (under mu). */
static const char *status_locked(cbf_product_ctl *pc)
{
    int worst = 0;
    for (int i = 0; i < pc->n_eng; i++) {
        cbf_engine_state st = pc->eng[i].state;
        int w = st == CBF_ENGINE_FAILED ? 2 : st == CBF_ENGINE_UP ? 0 : 1;
        worst = w > worst ? w : worst;
    }
    return status_values[worst];
}

/* Whether engine e (not up) takes input i of set k's channeliser away:
 * an F-engine of that set its pair, a dsim every input reading its
 * digitiser antennas' streams. */
static int takes_input(const cbf_product_plan *pl, const cbf_plan_engine *e, int k, int i)
{
    if (e->kind == PROC_DIGITISER) {
        int ant = pl->sets[k].desc->input_streams[i] / 2;
        return ant >= e->dig_first && ant < e->dig_first + e->dig_count;
    }
    if (e->set != k)
        return 0;
    for (int j = 0; j < e->n_inputs; j++)
        if (e->inputs[j] == i)
            return 1;
    return 0;
}

/* Bits of what the engines that are not up carry, per channeliser set:
 * its channeliser's inputs, and its correlator's and beams' channels
 * (under mu). */
static void masks_locked(cbf_product_ctl *pc)
{
    const cbf_product_plan *pl = pc->rp->plan;
    for (int k = 0; k < pl->n_sets; k++) {
        const cbf_plan_set *t = &pl->sets[k];
        const cbf_product_acv *a = &t->acv->u.acv;
        char *inputs = malloc((size_t)a->n_inputs + 1), *chans = malloc((size_t)a->n_chans + 1);
        if (!inputs || !chans) {
            free(inputs);
            free(chans);
            return;
        }
        memset(inputs, '0', (size_t)a->n_inputs);
        inputs[a->n_inputs] = '\0';
        memset(chans, '0', (size_t)a->n_chans);
        chans[a->n_chans] = '\0';
        for (int i = 0; i < pl->n_engines && i < pc->n_eng; i++) {
            if (pc->eng[i].state == CBF_ENGINE_UP)
                continue;
            const cbf_plan_engine *e = &pl->engines[i];
            for (int j = 0; j < a->n_inputs; j++)
                if (takes_input(pl, e, k, j))
                    inputs[j] = '1';
            for (int c = 0; e->set == k && c < e->n_channels && e->first_channel + c < a->n_chans; c++)
                chans[e->first_channel + c] = '1';
        }
        char name[300];
        snprintf(name, sizeof name, "%s.input-data-suspect", t->acv->name);
        pc_set(pc, name, CBF_KATCP_NOMINAL, inputs);
        snprintf(name, sizeof name, "%s.channel-data-suspect", t->bcp->name);
        pc_set(pc, name, CBF_KATCP_NOMINAL, chans);
        for (int b = 0; b < t->n_tacv; b++) {
            snprintf(name, sizeof name, "%s.channel-data-suspect", t->tacv[b]->name);
            pc_set(pc, name, CBF_KATCP_NOMINAL, chans);
        }
        free(inputs);
        free(chans);
    }
}

/* Every sensor that follows the engines' states (under mu). */
static void refresh_locked(cbf_product_ctl *pc)
{
    if (!pc->srv)
        return;
    const cbf_product_plan *pl = pc->rp->plan;
    for (int i = 0; i < pl->n_engines && i < pc->n_eng; i++) {
        char name[300];
        cbf_engine_state st = pc->eng[i].state;
        snprintf(name, sizeof name, "%s.state", pl->engines[i].task);
        pc_set(pc, name, st == CBF_ENGINE_UP ? CBF_KATCP_NOMINAL : st == CBF_ENGINE_FAILED ? CBF_KATCP_ERROR
                                                                                         : CBF_KATCP_WARN,
               cbf_engine_state_name(st));
        if (st != CBF_ENGINE_UP)
            pc_mirror_unreachable(pc, i);
    }
    masks_locked(pc);
    const char *status = status_locked(pc);
    pc_set(pc, "device-status", strcmp(status, "ok") ? CBF_KATCP_ERROR : CBF_KATCP_NOMINAL, status);
}

/* The supervisor's callback: one engine's change of state. */
static void on_event(void *ctx, const cbf_engine_event *ev)
{
    cbf_product_ctl *pc = ctx;
    pthread_mutex_lock(&pc->mu);
    if (ev->index >= pc->n_eng) {
        int n = ev->index + 1;
        pc_engine *e = realloc(pc->eng, (size_t)n * sizeof *e);
        if (!e) {
            pthread_mutex_unlock(&pc->mu);
            return;
        }
        memset(e + pc->n_eng, 0, (size_t)(n - pc->n_eng) * sizeof *e);
        for (int i = pc->n_eng; i < n; i++)
            e[i].steady = -1;
        pc->eng = e;
        pc->n_eng = n;
    }
    pc->eng[ev->index].state = ev->state;
    if (ev->state != CBF_ENGINE_UP)
        pc->eng[ev->index].steady = -1;
    refresh_locked(pc);
    int served = pc->srv != NULL;
    pthread_mutex_unlock(&pc->mu);
    if (served && pc->changed)
        pc->changed(pc->ctx);
}

static int add(cbf_product_ctl *pc, const char *name, cbf_katcp_type type, const char *units, const char *desc,
               const char *const *values, size_t n_values, const char *value, cbf_error *err)
{
    cbf_katcp_sensor_info in = {name, desc, units, type, values, n_values};
    int rc = cbf_katcp_sensor_add(pc->srv, &in, err);
    if (!rc)
        rc = cbf_katcp_sensor_set(pc->srv, name, CBF_KATCP_NOMINAL, value, 0, err);
    return rc;
}

static int add_stream_sensors(cbf_product_ctl *pc, cbf_error *err)
{
    cbf_stream_sensors ss = {0};
    int rc = cbf_stream_sensors_make(pc->rp->product, &ss, err);
    for (size_t i = 0; !rc && i < ss.n; i++) {
        const cbf_stream_sensor *s = &ss.s[i];
        cbf_katcp_type t = !strcmp(s->type, "integer") ? CBF_KATCP_INTEGER
                           : !strcmp(s->type, "float") ? CBF_KATCP_FLOAT
                           : !strcmp(s->type, "discrete") ? CBF_KATCP_DISCRETE
                                                          : CBF_KATCP_STRING;
        char values[256], *words[16];
        size_t nw = 0;
        if (s->values) {   /* "hann,rect" */
            snprintf(values, sizeof values, "%s", s->values);
            for (char *save, *w = strtok_r(values, ",", &save); w && nw < 16; w = strtok_r(NULL, ",", &save))
                words[nw++] = w;
        }
        rc = add(pc, s->name, t, s->units, s->description, (const char *const *)words, nw, s->value, err);
    }
    cbf_stream_sensors_free(&ss);
    return rc;
}

/* STREAM.destination as katsdpcontroller writes it: the first group,
 * "+N" for N more, and the port. */
static void destination(const cbf_plan_stream *ps, char *buf, size_t n)
{
    unsigned a = ps->first.addr;
    int l = snprintf(buf, n, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
    if (ps->count > 1)
        l += snprintf(buf + l, n - (size_t)l, "+%d", ps->count - 1);
    snprintf(buf + l, n - (size_t)l, ":%d", ps->first.port);
}

/* Whether engine e serves stream s: an F-engine its channeliser, an
 * X/B-engine its set's correlator and beams, a dsim the digitiser streams of its
 * antenna. */
static int serves(const cbf_plan_engine *e, const cbf_product_stream *s)
{
    if (s->kind == CBF_STREAM_ACV)
        return e->kind == PROC_FENG && e->acv == s;
    if (s->kind == CBF_STREAM_BCP)
        return e->kind == PROC_XENG && e->bcp == s;
    if (s->kind == CBF_STREAM_TACV)
        return e->kind == PROC_XENG && e->acv == s->u.tacv.acv;
    if (s->kind != CBF_STREAM_DIG || e->kind != PROC_DIGITISER)
        return 0;
    /* sim.ANTENNA.RATE */
    size_t l = strlen(s->u.dig.antenna_name);
    return !strncmp(e->task, "sim.", 4) && !strncmp(e->task + 4, s->u.dig.antenna_name, l) && e->task[4 + l] == '.';
}

static int add_plan_sensors(cbf_product_ctl *pc, cbf_error *err)
{
    const cbf_product_plan *pl = pc->rp->plan;
    int rc = 0;
    char name[300], value[8192];
    for (int i = 0; !rc && i < pl->n_streams; i++) {
        const cbf_plan_stream *ps = &pl->streams[i];
        destination(ps, value, sizeof value);
        snprintf(name, sizeof name, "%s.destination", ps->stream->name);
        rc = add(pc, name, CBF_KATCP_STRING, "", "The IP address, range and port to which data is being sent",
                 NULL, 0, value, err);
        size_t l = (size_t)snprintf(value, sizeof value, "[");
        for (int k = 0; k < pl->n_engines; k++)
            if (serves(&pl->engines[k], ps->stream))
                l += (size_t)snprintf(value + l, sizeof value - l, "%s\"%s\"", l > 1 ? ", " : "",
                                      pl->engines[k].task);
        snprintf(value + l, sizeof value - l, "]");
        snprintf(name, sizeof name, "%s.tasks", ps->stream->name);
        if (!rc)
            rc = add(pc, name, CBF_KATCP_STRING, "", "The tasks (engines) serving this stream (JSON list)", NULL,
                     0, value, err);
    }
    for (int i = 0; !rc && i < pl->n_engines; i++) {
        const cbf_plan_engine *e = &pl->engines[i];
        snprintf(name, sizeof name, "%s.port", e->task);
        snprintf(value, sizeof value, "%s:%d", e->address, e->katcp_port);
        rc = add(pc, name, CBF_KATCP_ADDRESS, "", "The engine's katcp address", NULL, 0, value, err);
        snprintf(name, sizeof name, "%s.host", e->task);
        if (!rc)
            rc = add(pc, name, CBF_KATCP_STRING, "", "The host the engine runs on", NULL, 0, e->host, err);
        snprintf(name, sizeof name, "%s.version", e->task);
        if (!rc)
            rc = add(pc, name, CBF_KATCP_STRING, "", "The engine's software version", NULL, 0, CBF_VERSION, err);
        snprintf(name, sizeof name, "%s.state", e->task);
        if (!rc)
            rc = add(pc, name, CBF_KATCP_DISCRETE, "", "The engine's state, as the controller supervises it",
                     state_values, 6, "starting", err);
    }
    if (!rc)
        rc = add(pc, "device-status", CBF_KATCP_DISCRETE, "", "Devices status of the product", status_values, 3,
                 "ok", err);
    if (!rc)
        rc = add(pc, "product-state", CBF_KATCP_DISCRETE, "", "State of the product", product_state_values, 6,
                 "idle", err);
    return rc;
}

#define MIRROR_FIRST_S 30.0

static int serve(cbf_product_ctl *pc, cbf_error *err)
{
    char addr[128], label[128];
    snprintf(addr, sizeof addr, "%s:%u", pc->host, pc->rp->katcp_port);
    snprintf(label, sizeof label, "product %s's controller", pc->name);
    cbf_katcp_server_options o = {.label = label,
                                  .exposes = "change the product's gains, delays and captures",
                                  .device = "cbf-product-controller",
                                  .device_build = CBF_VERSION};
    int rc = cbf_katcp_server_open(addr, &o, &pc->srv, err);
    if (!rc)
        rc = add_stream_sensors(pc, err);
    if (!rc)
        rc = add_plan_sensors(pc, err);
    if (!rc)
        rc = pc_renames_make(pc, err);
    if (!rc)
        rc = pc_fanout_register(pc, err);
    if (!rc) {
        snprintf(pc->address, sizeof pc->address, "%s", cbf_katcp_server_address(pc->srv));
        pthread_mutex_lock(&pc->mu);
        refresh_locked(pc);
        pthread_mutex_unlock(&pc->mu);
        rc = cbf_katcp_server_start(pc->srv, err);
    }
    if (!rc)
        rc = pthread_create(&pc->mirror, NULL, pc_mirror_main, pc)
                 ? cbf_error_set(err, CBF_EIO, "cannot start the sensor mirror's thread")
                 : 0;
    pc->mirror_running = !rc;
    /* katsdpcontroller answers product-configure with its tasks' sensors
     * in place: the suite takes the sensors it syncs right after as the
     * product's for good (its init_sensors). An engine that does not answer
     * in time is left to later readings. */
    if (!rc && pc_mirror_wait_first(pc, MIRROR_FIRST_S))
        cbf_log_warn("product \"%s\": the engines' sensors were not all read within %g s of its start",
                     pc->name, MIRROR_FIRST_S);
    return rc;
}

int cbf_product_ctl_start(const char *name, const char *json, size_t len, const char *host,
                          const cbf_controller_config *c, cbf_resources *res, cbf_product_ctl_changed changed,
                          void *ctx, cbf_product_ctl **out, cbf_error *err)
{
    *out = NULL;
    cbf_product_ctl *pc = calloc(1, sizeof *pc);
    if (!pc || !(pc->json = malloc(len + 1))) {
        free(pc);
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    memcpy(pc->json, json, len);
    pc->json[len] = '\0';
    pc->len = len;
    snprintf(pc->name, sizeof pc->name, "%s", name);
    snprintf(pc->host, sizeof pc->host, "%s", host);
    pc->c = c;
    pc->changed = changed;
    pc->ctx = ctx;
    pthread_mutex_init(&pc->mu, NULL);
    pthread_cond_init(&pc->cv, NULL);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    pc->started = (double)now.tv_sec + now.tv_nsec * 1e-9;
    cbf_running_product *rp = NULL;
    int rc = cbf_product_configure(name, json, len, pc->started, c, res, NULL, on_event, pc, &rp, err);
    if (!rc) {
        pthread_mutex_lock(&pc->mu);
        pc->rp = rp;
        pc->capturing_stream = calloc((size_t)rp->product->n_streams, 1);
        pthread_mutex_unlock(&pc->mu);
        rc = pc->capturing_stream ? serve(pc, err) : cbf_error_set(err, CBF_ENOMEM, "out of memory");
        if (rc)
            cbf_error_prefix(err, "product \"%s\": its controller", name);
    }
    if (rc) {
        cbf_error ignored = {0};
        cbf_product_ctl_stop(pc, &ignored);
        return rc;
    }
    *out = pc;
    return 0;
}

int cbf_product_ctl_stop(cbf_product_ctl *pc, cbf_error *err)
{
    if (!pc)
        return 0;
    if (pc->mirror_running) {
        pthread_mutex_lock(&pc->mu);
        pc->stop = 1;
        pthread_cond_broadcast(&pc->cv);
        pthread_mutex_unlock(&pc->mu);
        pthread_join(pc->mirror, NULL);
    }
    /* the server first: no request reaches an engine being stopped */
    cbf_katcp_server *srv = pc->srv;
    pthread_mutex_lock(&pc->mu);
    pc->srv = NULL;
    pthread_mutex_unlock(&pc->mu);
    cbf_katcp_server_close(srv);
    int rc = cbf_product_deconfigure(pc->rp, err);
    pc_renames_free(pc);
    for (int i = 0; i < pc->n_eng; i++)
        pc_mirror_free(&pc->eng[i]);
    free(pc->eng);
    free(pc->capturing_stream);
    free(pc->json);
    pthread_mutex_destroy(&pc->mu);
    pthread_cond_destroy(&pc->cv);
    free(pc);
    return rc;
}

const char *cbf_product_ctl_name(const cbf_product_ctl *pc) { return pc->name; }
const char *cbf_product_ctl_address(const cbf_product_ctl *pc) { return pc->address; }
const char *cbf_product_ctl_host(const cbf_product_ctl *pc) { return pc->host; }
unsigned cbf_product_ctl_port(const cbf_product_ctl *pc) { return pc->rp->katcp_port; }
double cbf_product_ctl_started(const cbf_product_ctl *pc) { return pc->started; }

const char *cbf_product_ctl_json(const cbf_product_ctl *pc, size_t *len)
{
    if (len)
        *len = pc->len;
    return pc->json;
}

const char *cbf_product_ctl_state(cbf_product_ctl *pc)
{
    pthread_mutex_lock(&pc->mu);
    const char *s = pc->capturing ? "capturing" : "idle";
    pthread_mutex_unlock(&pc->mu);
    return s;
}

const char *cbf_product_ctl_status(cbf_product_ctl *pc)
{
    pthread_mutex_lock(&pc->mu);
    const char *s = status_locked(pc);
    pthread_mutex_unlock(&pc->mu);
    return s;
}
