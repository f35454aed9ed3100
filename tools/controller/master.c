/* master.c: the master controller (master.h), with katsdpcontroller's
 * rules: product names [A-Za-z0-9_]+, a trailing '*' asking for a unique
 * one, an existing name refused. A name is taken from the moment its
 * configure begins, so two requests for one name cannot both start; the
 * master's lock is never held while a product starts or stops (that takes
 * seconds, and a product's supervisor reports to the master meanwhile). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cbf/katcp.h"
#include "master.h"
#include "plan.h"
#include "product_ctl.h"

#define MAX_PRODUCTS 64

typedef struct slot {
    char name[64];
    cbf_product_ctl *pc;   /* NULL while it is being configured or reconfigured */
} slot;

struct cbf_master {
    cbf_katcp_server *srv;
    char host[64];
    const cbf_controller_config *c;
    cbf_resources *res;
    pthread_mutex_t mu;
    slot *slots[MAX_PRODUCTS];
    int n;
    int closing;   /* the server is going: sensors are no longer set */
};

static const char *const status_values[] = {"ok", "degraded", "fail"};

static int find_locked(cbf_master *m, const char *name)
{
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->slots[i]->name, name))
            return i;
    return -1;
}

/* products, device-status: from the products configured now (under mu). */
static void refresh_locked(cbf_master *m)
{
    if (m->closing)
        return;
    char list[MAX_PRODUCTS * 70 + 4];
    size_t l = (size_t)snprintf(list, sizeof list, "[");
    int worst = 0;
    for (int i = 0; i < m->n; i++) {
        if (!m->slots[i]->pc)
            continue;
        l += (size_t)snprintf(list + l, sizeof list - l, "%s\"%s\"", l > 1 ? ", " : "", m->slots[i]->name);
        const char *st = cbf_product_ctl_status(m->slots[i]->pc);
        int w = !strcmp(st, "fail") ? 2 : !strcmp(st, "degraded") ? 1 : 0;
        worst = w > worst ? w : worst;
    }
    snprintf(list + l, sizeof list - l, "]");
    cbf_katcp_sensor_set(m->srv, "products", CBF_KATCP_NOMINAL, list, 0, NULL);
    cbf_katcp_sensor_set(m->srv, "device-status", worst ? CBF_KATCP_ERROR : CBF_KATCP_NOMINAL,
                         status_values[worst], 0, NULL);
}

/* A product's supervisor: one of its engines changed state. */
static void on_changed(void *ctx)
{
    cbf_master *m = ctx;
    pthread_mutex_lock(&m->mu);
    refresh_locked(m);
    pthread_mutex_unlock(&m->mu);
}

static void add_product_sensors(cbf_master *m, const char *name, cbf_product_ctl *pc)
{
    struct {
        const char *suffix, *desc;
        cbf_katcp_type type;
        const char *value;
    } s[] = {
        {"katcp-address", "The product controller's katcp address", CBF_KATCP_ADDRESS, cbf_product_ctl_address(pc)},
        {"host", "The host the product controller runs on", CBF_KATCP_STRING, cbf_product_ctl_host(pc)},
        {"version", "The product controller's software version", CBF_KATCP_STRING, CBF_VERSION},
    };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        char full[128];
        snprintf(full, sizeof full, "%s.%s", name, s[i].suffix);
        cbf_katcp_sensor_info in = {full, s[i].desc, "", s[i].type, NULL, 0};
        cbf_katcp_sensor_add(m->srv, &in, NULL);
        cbf_katcp_sensor_set(m->srv, full, CBF_KATCP_NOMINAL, s[i].value, 0, NULL);
    }
}

static void remove_product_sensors(cbf_master *m, const char *name)
{
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s.", name);
    cbf_katcp_sensor_remove_prefix(m->srv, prefix);
}

/* Takes `name` (a '*' at its end: the first free NAME1, NAME2, ...) for a
 * product about to be configured; the slot, or NULL with the reply sent. */
static slot *reserve(cbf_master *m, cbf_katcp_call *call, const char *asked)
{
    char base[64];
    size_t l = strlen(asked);
    int unique = l > 0 && asked[l - 1] == '*';
    snprintf(base, sizeof base, "%.*s", (int)(l - (size_t)unique), asked);
    if (!cbf_product_name_ok(base) || strlen(base) > 55) {
        cbf_katcp_reply_fmt(call, "fail", "argument 1: product name '%s' is not letters, digits and '_' "
                                          "(1 to 55 of them, with an optional '*' at the end)", asked);
        return NULL;
    }
    slot *s = calloc(1, sizeof *s);
    if (!s) {
        cbf_katcp_reply_fmt(call, "fail", "out of memory");
        return NULL;
    }
    pthread_mutex_lock(&m->mu);
    snprintf(s->name, sizeof s->name, "%s", base);
    for (int k = 1; unique && find_locked(m, s->name) >= 0; k++)
        snprintf(s->name, sizeof s->name, "%s%d", base, k);
    const char *why = find_locked(m, s->name) >= 0 ? "already exists" : m->n == MAX_PRODUCTS ? "is one too many"
                                                                                             : NULL;
    if (!why)
        m->slots[m->n++] = s;
    pthread_mutex_unlock(&m->mu);
    if (why) {
        cbf_katcp_reply_fmt(call, "fail", "argument 1: product '%s' %s", s->name, why);
        free(s);
        return NULL;
    }
    return s;
}

static void drop_slot(cbf_master *m, slot *s)
{
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n; i++)
        if (m->slots[i] == s) {
            m->slots[i] = m->slots[--m->n];
            break;
        }
    refresh_locked(m);
    pthread_mutex_unlock(&m->mu);
    free(s);
}

/* Starts the product into its reserved slot; replies. */
static void start_into(cbf_master *m, cbf_katcp_call *call, slot *s, const char *json, size_t len)
{
    cbf_product_ctl *pc = NULL;
    cbf_error err = {0};
    if (cbf_product_ctl_start(s->name, json, len, m->host, m->c, m->res, on_changed, m, &pc, &err)) {
        drop_slot(m, s);
        cbf_katcp_reply_fmt(call, "fail", "%s", err.msg);
        return;
    }
    add_product_sensors(m, s->name, pc);
    pthread_mutex_lock(&m->mu);
    s->pc = pc;
    refresh_locked(m);
    pthread_mutex_unlock(&m->mu);
    char port[16];
    snprintf(port, sizeof port, "%u", cbf_product_ctl_port(pc));
    const char *args[] = {s->name, cbf_product_ctl_host(pc), port};
    cbf_katcp_reply(call, "ok", 3, args);
}

static void product_configure(cbf_katcp_call *call, void *user)
{
    cbf_master *m = user;
    if (cbf_katcp_call_nargs(call) != 2) {
        cbf_katcp_reply_fmt(call, "fail", "takes NAME CONFIG (the product configuration, JSON), got %zu "
                                          "arguments", cbf_katcp_call_nargs(call));
        return;
    }
    size_t len;
    const char *json = cbf_katcp_call_arg(call, 1, &len);
    slot *s = reserve(m, call, cbf_katcp_call_arg(call, 0, NULL));
    if (s)
        start_into(m, call, s, json, len);
}

/* The product so named, taken out of service (its slot kept, pc NULL) for
 * deconfigure or reconfigure; NULL with the reply sent. */
static cbf_product_ctl *take(cbf_master *m, cbf_katcp_call *call, slot **out)
{
    const char *name = cbf_katcp_call_arg(call, 0, NULL);
    if (!name) {
        cbf_katcp_reply_fmt(call, "fail", "the product name argument is missing");
        return NULL;
    }
    pthread_mutex_lock(&m->mu);
    int i = find_locked(m, name);
    cbf_product_ctl *pc = i >= 0 ? m->slots[i]->pc : NULL;
    if (pc) {
        m->slots[i]->pc = NULL;
        *out = m->slots[i];
        refresh_locked(m);
    }
    pthread_mutex_unlock(&m->mu);
    if (!pc)
        cbf_katcp_reply_fmt(call, "fail", i < 0 ? "argument 1: no product named '%s'"
                                                : "argument 1: product '%s' is being configured", name);
    else
        remove_product_sensors(m, name);
    return pc;
}

static void product_deconfigure(cbf_katcp_call *call, void *user)
{
    cbf_master *m = user;
    size_t n = cbf_katcp_call_nargs(call);
    const char *force = cbf_katcp_call_arg(call, 1, NULL);
    if (n < 1 || n > 2 || (force && strcmp(force, "0") && strcmp(force, "1") && strcmp(force, "true") &&
                           strcmp(force, "false"))) {
        cbf_katcp_reply_fmt(call, "fail", "takes NAME [FORCE] (FORCE a boolean), got %zu arguments", n);
        return;
    }
    slot *s;
    cbf_product_ctl *pc = take(m, call, &s);
    if (!pc)
        return;
    cbf_error err = {0};
    int rc = cbf_product_ctl_stop(pc, &err);
    drop_slot(m, s);
    if (rc)
        cbf_katcp_reply_fmt(call, "fail", "%s", err.msg);
    else
        cbf_katcp_reply(call, "ok", 0, NULL);
}

/* Deconfigure, then configure again from the same configuration. */
static void product_reconfigure(cbf_katcp_call *call, void *user)
{
    cbf_master *m = user;
    if (cbf_katcp_call_nargs(call) != 1) {
        cbf_katcp_reply_fmt(call, "fail", "takes NAME, got %zu arguments", cbf_katcp_call_nargs(call));
        return;
    }
    slot *s;
    cbf_product_ctl *pc = take(m, call, &s);
    if (!pc)
        return;
    size_t len;
    const char *j = cbf_product_ctl_json(pc, &len);
    char *json = malloc(len + 1);
    if (json)
        memcpy(json, j, len + 1);
    cbf_error err = {0};
    int rc = cbf_product_ctl_stop(pc, &err);
    if (rc || !json) {
        drop_slot(m, s);
        cbf_katcp_reply_fmt(call, "fail", "%s", json ? err.msg : "out of memory");
    } else {
        start_into(m, call, s, json, len);
    }
    free(json);
}

static void iso_time(double t, char *buf, size_t n)
{
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void product_list(cbf_katcp_call *call, void *user)
{
    cbf_master *m = user;
    const char *want = cbf_katcp_call_arg(call, 0, NULL);
    int shown = 0;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n; i++) {
        slot *s = m->slots[i];
        if (want && strcmp(want, s->name))
            continue;
        char desc[160], when[40];
        if (s->pc) {
            iso_time(cbf_product_ctl_started(s->pc), when, sizeof when);
            snprintf(desc, sizeof desc, "%s, started at %s", cbf_product_ctl_state(s->pc), when);
        } else {
            snprintf(desc, sizeof desc, "configuring");
        }
        const char *args[] = {s->name, desc};
        cbf_katcp_inform(call, 2, args);
        shown++;
    }
    pthread_mutex_unlock(&m->mu);
    if (want && !shown)
        cbf_katcp_reply_fmt(call, "fail", "argument 1: no product named '%s'", want);
    else
        cbf_katcp_reply_fmt(call, "ok", "%d", shown);
}

static void configure_versions(cbf_katcp_call *call, void *user)
{
    (void)user;
    for (int v = 0; v <= 9; v++) {
        char text[8];
        snprintf(text, sizeof text, "4.%d", v);
        const char *args[] = {text};
        cbf_katcp_inform(call, 1, args);
    }
    cbf_katcp_reply_fmt(call, "ok", "10");
}

int cbf_master_open(const char *host, unsigned port, const cbf_controller_config *c, cbf_resources *res,
                    cbf_master **out, cbf_error *err)
{
    *out = NULL;
    cbf_master *m = calloc(1, sizeof *m);
    if (!m)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    snprintf(m->host, sizeof m->host, "%s", host);
    m->c = c;
    m->res = res;
    pthread_mutex_init(&m->mu, NULL);
    char addr[128];
    snprintf(addr, sizeof addr, "%s:%u", host, port);
    cbf_katcp_server_options o = {.label = "cbf-controller's master controller", .where = "--host, --port",
                                  .exposes = "configure and deconfigure products (start and stop engines)",
                                  .device = "cbf-controller", .device_build = CBF_VERSION};
    int rc = cbf_katcp_server_open(addr, &o, &m->srv, err);
    const cbf_katcp_request reqs[] = {
        {"product-configure", "?product-configure NAME CONFIG: plan, launch and serve a product (NAME*: a "
                              "unique name)", product_configure, m, CBF_KATCP_SLOW},
        {"product-deconfigure", "?product-deconfigure NAME [FORCE]: stop a product's engines",
         product_deconfigure, m, CBF_KATCP_SLOW},
        {"product-reconfigure", "?product-reconfigure NAME: deconfigure and configure it again",
         product_reconfigure, m, CBF_KATCP_SLOW},
        {"product-list", "?product-list [NAME]: the products and their states", product_list, m, 0},
        {"product-configure-versions", "?product-configure-versions: the configuration versions taken",
         configure_versions, m, 0},
    };
    for (size_t i = 0; !rc && i < sizeof reqs / sizeof reqs[0]; i++)
        rc = cbf_katcp_server_add_request(m->srv, &reqs[i], err);
    cbf_katcp_sensor_info products = {"products", "The products configured now (JSON list)", "",
                                      CBF_KATCP_STRING, NULL, 0};
    cbf_katcp_sensor_info status = {"device-status", "The worst of the products' states", "",
                                    CBF_KATCP_DISCRETE, status_values, 3};
    if (!rc)
        rc = cbf_katcp_sensor_add(m->srv, &products, err);
    if (!rc)
        rc = cbf_katcp_sensor_add(m->srv, &status, err);
    if (!rc) {
        refresh_locked(m);
        rc = cbf_katcp_server_start(m->srv, err);
    }
    if (rc) {
        cbf_katcp_server_close(m->srv);
        pthread_mutex_destroy(&m->mu);
        free(m);
        return rc;
    }
    *out = m;
    return 0;
}

const char *cbf_master_address(const cbf_master *m)
{
    return cbf_katcp_server_address(m->srv);
}

void cbf_master_close(cbf_master *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->closing = 1;
    pthread_mutex_unlock(&m->mu);
    cbf_katcp_server_close(m->srv);   /* waits for a configure still running */
    for (int i = 0; i < m->n; i++) {
        cbf_error err = {0};
        if (m->slots[i]->pc && cbf_product_ctl_stop(m->slots[i]->pc, &err))
            fprintf(stderr, "cbf-controller: product %s: %s\n", m->slots[i]->name, err.msg);
        free(m->slots[i]);
    }
    pthread_mutex_destroy(&m->mu);
    free(m);
}
