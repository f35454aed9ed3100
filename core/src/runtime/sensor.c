/* sensor.c: the status of every sensor and when it last changed, and
 * text sensors (cbf/node.h).
 *
 * Plugins set values lock-free from their hot paths; status and change
 * times are worked out by whoever reads (the sensor message, katcp,
 * Prometheus), under the node's sensor_mu, by comparing with what the
 * last reader saw. So a plugin pays nothing for them, and a change is
 * dated to within one reading interval (the sensor period, a katcp
 * sampling period, or a scrape) — the resolution a monitor sees anyway. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cbf/log.h"
#include "runtime.h"

const char *cbf_status_name(cbf_status s)
{
    switch (s) {
    case CBF_STATUS_NOMINAL: return "nominal";
    case CBF_STATUS_WARN: return "warn";
    case CBF_STATUS_ERROR: return "error";
    default: return "unknown";
    }
}

const char *cbf_rt_device_status_word(cbf_status s)
{
    return s == CBF_STATUS_ERROR ? "fail" : s == CBF_STATUS_WARN ? "degraded" : "ok";
}

double cbf_rt_unix_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void cbf_rt_node_sensors_init(cbf_node *n) { pthread_mutex_init(&n->sensor_mu, NULL); }

void cbf_rt_node_sensors_destroy(cbf_node *n)
{
    for (size_t i = 0; i < n->n_texts; i++) {
        free(n->texts[i]->value);
        free(n->texts[i]);
    }
    free(n->texts);
    n->texts = NULL;
    n->n_texts = n->cap_texts = 0;
    pthread_mutex_destroy(&n->sensor_mu);
}

/* ---- rules ---- */

void cbf_counter_warn_on_rise(cbf_counter *c)
{
    if (c)
        atomic_store(&c->warn_on_rise, true);
}

void cbf_gauge_nominal_range(cbf_gauge *g, double lo, double hi)
{
    if (!g)
        return;
    g->lo = lo;
    g->hi = hi;
    g->has_range = true;
}

static void about_describe(cbf_rt_about *a, const char *units, const char *doc)
{
    snprintf(a->units, sizeof a->units, "%s", units ? units : "");
    snprintf(a->doc, sizeof a->doc, "%s", doc ? doc : "");
}

/* A name katcp cannot carry is dropped with a warning, not published
 * half right: the plugin's author sees it at the first start. */
static void about_katcp(cbf_rt_about *a, const char *sensor, const char *name, unsigned flags)
{
    size_t l = name ? strlen(name) : 0;
    bool ok = l > 0 && l < sizeof a->katcp;
    for (size_t i = 0; ok && i < l; i++)
        ok = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
             (name[i] >= '0' && name[i] <= '9') || name[i] == '.' || name[i] == '-' || name[i] == '_';
    if (!ok) {
        cbf_log_warn("sensor '%s': katcp name '%s' is empty, too long or not letters, digits, '.', '-', "
                     "'_': not published under it", sensor, name ? name : "");
        return;
    }
    memcpy(a->katcp, name, l + 1);
    a->katcp_flags = flags;
}

void cbf_counter_describe(cbf_counter *c, const char *units, const char *doc)
{
    if (c)
        about_describe(&c->about, units, doc);
}

void cbf_gauge_describe(cbf_gauge *g, const char *units, const char *doc)
{
    if (g)
        about_describe(&g->about, units, doc);
}

void cbf_text_describe(cbf_text *t, const char *units, const char *doc)
{
    if (t)
        about_describe(&t->about, units, doc);
}

void cbf_counter_katcp(cbf_counter *c, const char *name, unsigned flags)
{
    if (c)
        about_katcp(&c->about, c->name, name, flags);
}

void cbf_gauge_katcp(cbf_gauge *g, const char *name, unsigned flags)
{
    if (g)
        about_katcp(&g->about, g->name, name, flags);
}

void cbf_text_katcp(cbf_text *t, const char *name, unsigned flags)
{
    if (t)
        about_katcp(&t->about, t->name, name, flags);
}

void cbf_gauge_set_status(cbf_gauge *g, double v, cbf_status st)
{
    if (!g)
        return;
    /* value first: a reader that sees the new status sees at least as
     * new a value (both relaxed stores on one thread, read in reverse) */
    cbf_gauge_set(g, v);
    atomic_store_explicit(&g->status, (int)st, memory_order_release);
}

/* ---- texts ---- */

cbf_text *cbf_node_text(cbf_node *n, const char *name)
{
    pthread_mutex_lock(&n->sensor_mu);
    cbf_text *t = NULL;
    for (size_t i = 0; i < n->n_texts && !t; i++)
        if (!strcmp(n->texts[i]->name, name))
            t = n->texts[i];
    if (!t && n->n_texts == n->cap_texts) {
        size_t cap = n->cap_texts ? 2 * n->cap_texts : 8;
        cbf_text **grown = realloc(n->texts, cap * sizeof *grown);
        if (grown) {
            n->texts = grown;
            n->cap_texts = cap;
        }
    }
    if (!t && n->n_texts < n->cap_texts && (t = calloc(1, sizeof *t))) {
        snprintf(t->name, sizeof t->name, "%s", name);
        t->mu = &n->sensor_mu;
        n->texts[n->n_texts++] = t;
    }
    pthread_mutex_unlock(&n->sensor_mu);
    if (!t)
        cbf_log_warn("node '%s': out of memory for text sensor '%s'", n->g->name, name);
    return t;
}

void cbf_text_set(cbf_text *t, const char *value, cbf_status st)
{
    if (!t)
        return;
    size_t len = strlen(value);
    bool cut = len >= CBF_TEXT_MAX;
    if (cut)
        len = CBF_TEXT_MAX - 4;
    char *copy = malloc(len + (cut ? 4 : 1));
    if (copy) {
        memcpy(copy, value, len);
        strcpy(copy + len, cut ? "..." : "");
    }
    double now = cbf_rt_unix_now();
    pthread_mutex_lock(t->mu);
    if (copy) {
        free(t->value);
        t->value = copy;
        t->status = st;
        t->updated = now;
    }
    pthread_mutex_unlock(t->mu);
}

size_t cbf_rt_text_count(cbf_node *n)
{
    pthread_mutex_lock(&n->sensor_mu);
    size_t c = n->n_texts;
    pthread_mutex_unlock(&n->sensor_mu);
    return c;
}

const char *cbf_rt_text_look(cbf_node *n, size_t i, char **value, cbf_status *st, double *updated)
{
    pthread_mutex_lock(&n->sensor_mu);
    cbf_text *t = n->texts[i];
    *value = strdup(t->value ? t->value : "");
    *st = t->value ? t->status : CBF_STATUS_UNKNOWN;
    *updated = t->updated;
    pthread_mutex_unlock(&n->sensor_mu);
    return t->name;
}

/* ---- readers' looks ---- */

cbf_status cbf_rt_counter_look(cbf_node *n, int k, double now, uint64_t *v, double *updated)
{
    cbf_counter *c = &n->counters[k];
    pthread_mutex_lock(&n->sensor_mu);
    uint64_t x = atomic_load_explicit(&c->value, memory_order_relaxed);
    if (c->updated == 0 || x != c->seen) {
        if (c->updated != 0 && x > c->seen)
            c->rose = now;
        c->seen = x;
        c->updated = now;
    }
    cbf_status st = atomic_load(&c->warn_on_rise) && c->rose != 0 && now - c->rose < CBF_RISE_HOLD_S
                        ? CBF_STATUS_WARN
                        : CBF_STATUS_NOMINAL;
    *updated = c->updated;
    pthread_mutex_unlock(&n->sensor_mu);
    *v = x;
    return st;
}

cbf_status cbf_rt_gauge_look(cbf_node *n, int k, double now, double *v, double *updated)
{
    cbf_gauge *g = &n->gauges[k];
    int explicit_st = atomic_load_explicit(&g->status, memory_order_acquire);
    pthread_mutex_lock(&n->sensor_mu);
    uint64_t bits = atomic_load_explicit(&g->bits, memory_order_relaxed);
    if (g->updated == 0 || bits != g->seen) {
        g->seen = bits;
        g->updated = now;
    }
    *updated = g->updated;
    pthread_mutex_unlock(&n->sensor_mu);
    double x;
    memcpy(&x, &bits, sizeof x);
    *v = x;
    if (explicit_st >= 0)
        return (cbf_status)explicit_st;
    if (isnan(x))
        return CBF_STATUS_UNKNOWN;
    if (g->has_range && !(x >= g->lo && x <= g->hi))
        return CBF_STATUS_WARN;
    return CBF_STATUS_NOMINAL;
}

const cbf_rt_about *cbf_rt_sensor_about(cbf_node *n, const char *name, cbf_rt_kind k)
{
    if (k == CBF_RT_TEXT) {
        const cbf_rt_about *a = NULL;
        pthread_mutex_lock(&n->sensor_mu);
        for (size_t i = 0; i < n->n_texts && !a; i++)
            if (!strcmp(n->texts[i]->name, name))
                a = &n->texts[i]->about;
        pthread_mutex_unlock(&n->sensor_mu);
        return a;
    }
    const bool gauge = k == CBF_RT_GAUGE;
    int nk = gauge ? atomic_load_explicit(&n->n_gauges, memory_order_acquire)
                   : atomic_load_explicit(&n->n_counters, memory_order_acquire);
    for (int i = 0; i < nk; i++)
        if (!strcmp(gauge ? n->gauges[i].name : n->counters[i].name, name))
            return gauge ? &n->gauges[i].about : &n->counters[i].about;
    return NULL;
}

static cbf_status worse(cbf_status a, cbf_status b) { return b > a ? b : a; }

cbf_status cbf_rt_engine_status(cbf_engine *e, double now)
{
    cbf_status worst = CBF_STATUS_NOMINAL;
    const cbf_graph *g = cbf_rt_engine_graph(e);
    for (size_t i = 0; i < g->n_nodes; i++) {
        cbf_node *n = cbf_rt_engine_node(e, i);
        double u;
        int nc = atomic_load_explicit(&n->n_counters, memory_order_acquire);
        for (int k = 0; k < nc; k++) {
            uint64_t v;
            worst = worse(worst, cbf_rt_counter_look(n, k, now, &v, &u));
        }
        int ng = atomic_load_explicit(&n->n_gauges, memory_order_acquire);
        for (int k = 0; k < ng; k++) {
            double v;
            worst = worse(worst, cbf_rt_gauge_look(n, k, now, &v, &u));
        }
        pthread_mutex_lock(&n->sensor_mu);
        for (size_t t = 0; t < n->n_texts; t++)
            if (n->texts[t]->value)
                worst = worse(worst, n->texts[t]->status);
        pthread_mutex_unlock(&n->sensor_mu);
    }
    return worst;
}
