/* product.c: a katsdpcontroller product configuration, checked and read
 * into cbf_product (product.h). This file holds the document's frame:
 * version, config, simulation, the inputs and outputs maps, the
 * references between streams, and the path-naming readers that
 * product_streams.c uses for each stream's fields. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cbf/control.h"
#include "graph/params_priv.h"   /* cbf_closest_name, as the pipeline loader's hints */
#include "product_priv.h"

/* ---- ownership ---- */

void *pc_alloc(pc_ctx *c, size_t n)
{
    cbf_product *p = c->p;
    if (p->n_owned == p->cap_owned) {
        int cap = p->cap_owned ? 2 * p->cap_owned : 64;
        void **o = realloc(p->owned, (size_t)cap * sizeof *o);
        if (!o)
            return NULL;
        p->owned = o;
        p->cap_owned = cap;
    }
    void *m = calloc(1, n ? n : 1);
    if (m)
        p->owned[p->n_owned++] = m;
    return m;
}

const char *pc_strdup(pc_ctx *c, const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = pc_alloc(c, n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void cbf_product_free(cbf_product *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n_owned; i++)
        free(p->owned[i]);
    free(p->owned);
    free(p->streams);
    free(p);
}

/* ---- the path and messages ---- */

int pc_name_ok(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              *s == '-'))
            return 0;
    return 1;
}

static void path_put(pc_ctx *c, const char *s, size_t n)
{
    if (c->len + n >= sizeof c->path)   /* a path this long is cut, never overrun */
        n = sizeof c->path - 1 - c->len;
    memcpy(c->path + c->len, s, n);
    c->len += n;
    c->path[c->len] = '\0';
}

size_t pc_push_key(pc_ctx *c, const char *key)
{
    size_t old = c->len;
    if (pc_name_ok(key)) {
        if (c->len)
            path_put(c, ".", 1);
        path_put(c, key, strlen(key));
        return old;
    }
    /* A key that is not a plain name is written as a quoted subscript, so
     * the path still reads as one place (outputs["a b"].type). */
    path_put(c, "[\"", 2);
    for (const unsigned char *k = (const unsigned char *)key; *k; k++) {
        char e[8];
        if (*k == '"' || *k == '\\')
            snprintf(e, sizeof e, "\\%c", *k);
        else if (*k < 0x20)
            snprintf(e, sizeof e, "\\u%04x", *k);
        else
            snprintf(e, sizeof e, "%c", *k);
        path_put(c, e, strlen(e));
    }
    path_put(c, "\"]", 2);
    return old;
}

size_t pc_push_index(pc_ctx *c, size_t i)
{
    size_t old = c->len;
    char b[32];
    snprintf(b, sizeof b, "[%zu]", i);
    path_put(c, b, strlen(b));
    return old;
}

void pc_pop(pc_ctx *c, size_t len)
{
    c->len = len;
    c->path[len] = '\0';
}

static int vfail(pc_ctx *c, const char *fmt, va_list ap)
{
    char msg[CBF_ERROR_MSG_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return cbf_error_set(c->err, CBF_ECONFIG, "%s: %s", c->len ? c->path : "the configuration", msg);
}

int pc_fail(pc_ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail(c, fmt, ap);
    va_end(ap);
    return rc;
}

int pc_fail_at(pc_ctx *c, const char *key, const char *fmt, ...)
{
    size_t old = pc_push_key(c, key);
    va_list ap;
    va_start(ap, fmt);
    int rc = vfail(c, fmt, ap);
    va_end(ap);
    pc_pop(c, old);
    return rc;
}

const char *pc_kind_of(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

int pc_want_object(pc_ctx *c, const json_t *v)
{
    return json_is_object(v) ? 0 : pc_fail(c, "expected an object, got %s", pc_kind_of(v));
}

int pc_check_fields(pc_ctx *c, const json_t *obj, const pc_field *f, int n, const char *what)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        int k = 0;
        while (k < n && strcmp(f[k].name, key))
            k++;
        if (k < n && f[k].min_minor <= c->minor)
            continue;
        if (k < n)
            return pc_fail_at(c, key, "not in schema version %s (%s has it from 4.%d on)", c->p->version, what,
                              f[k].min_minor);
        const char *names[64];
        size_t m = 0;
        for (int i = 0; i < n && m < 64; i++)
            if (f[i].min_minor <= c->minor)
                names[m++] = f[i].name;
        const char *near = cbf_closest_name(key, names, m);
        return pc_fail_at(c, key, "%s has no such field%s%s%s", what, near ? " (did you mean '" : "",
                          near ? near : "", near ? "'?)" : "");
    }
    for (int k = 0; k < n; k++)
        if (f[k].required && f[k].min_minor <= c->minor && !json_object_get(obj, f[k].name))
            return pc_fail_at(c, f[k].name, "missing: %s requires it", what);
    return 0;
}

/* ---- typed readers ---- */

int pc_number(pc_ctx *c, const json_t *obj, const char *key, pc_sign sign, double *out, int *given)
{
    const json_t *v = json_object_get(obj, key);
    if (given)
        *given = v != NULL;
    if (!v)
        return 0;
    if (!json_is_number(v))
        return pc_fail_at(c, key, "expected a number, got %s", pc_kind_of(v));
    double x = json_number_value(v);
    if (sign == PC_POSITIVE && !(x > 0))
        return pc_fail_at(c, key, "%.17g is out of range: it must be greater than 0", x);
    if (sign == PC_NONNEG && !(x >= 0))
        return pc_fail_at(c, key, "%.17g is out of range: it must be 0 or more", x);
    *out = x;
    return 0;
}

int pc_int(pc_ctx *c, const json_t *obj, const char *key, long long lo, long long hi, int *out, int *given)
{
    const json_t *v = json_object_get(obj, key);
    if (given)
        *given = v != NULL;
    if (!v)
        return 0;
    double x;
    /* JSON schema's "integer" takes 8.0 as well as 8 (and katsdpcontroller
     * with it); 8.5 is not one. */
    if (json_is_integer(v))
        x = (double)json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)))
        x = json_real_value(v);
    else
        return pc_fail_at(c, key, "expected an integer, got %s", pc_kind_of(v));
    if (x < (double)lo || x > (double)hi)
        return pc_fail_at(c, key, "%.17g is out of range %lld to %lld", x, lo, hi);
    *out = (int)x;
    return 0;
}

int pc_bool(pc_ctx *c, const json_t *obj, const char *key, int *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return pc_fail_at(c, key, "expected true or false, got %s", pc_kind_of(v));
    *out = json_is_true(v);
    return 0;
}

int pc_string(pc_ctx *c, const json_t *obj, const char *key, const char **out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_string(v))
        return pc_fail_at(c, key, "expected a string, got %s", pc_kind_of(v));
    if (!(*out = pc_strdup(c, json_string_value(v))))
        return cbf_error_set(c->err, CBF_ENOMEM, "out of memory reading %s", c->path);
    return 0;
}

int pc_choice(pc_ctx *c, const json_t *obj, const char *key, const char *const *choices, int *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    char list[256] = "";
    size_t n = 0;
    for (; choices[n]; n++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", n ? ", " : "", choices[n]);
    if (!json_is_string(v))
        return pc_fail_at(c, key, "expected one of %s, got %s", list, pc_kind_of(v));
    for (size_t i = 0; i < n; i++)
        if (!strcmp(json_string_value(v), choices[i])) {
            *out = (int)i;
            return 0;
        }
    return pc_fail_at(c, key, "\"%s\" is not one of %s", json_string_value(v), list);
}

int pc_strings(pc_ctx *c, const json_t *obj, const char *key, int names, cbf_product_strings *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    size_t old = pc_push_key(c, key);
    if (!json_is_array(v)) {
        int rc = pc_fail(c, "expected an array of strings, got %s", pc_kind_of(v));
        pc_pop(c, old);
        return rc;
    }
    size_t n = json_array_size(v);
    out->v = pc_alloc(c, n * sizeof *out->v);
    if (!out->v)
        return cbf_error_set(c->err, CBF_ENOMEM, "out of memory reading %s", c->path);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        size_t at = pc_push_index(c, i);
        int rc = 0;
        if (!json_is_string(e))
            rc = pc_fail(c, "expected a string, got %s", pc_kind_of(e));
        else if (names && !pc_name_ok(json_string_value(e)))
            rc = pc_fail(c, "\"%s\" is not a stream name (%s)", json_string_value(e), PC_NAME_CHARS);
        else if (!(out->v[i] = (char *)pc_strdup(c, json_string_value(e))))
            rc = cbf_error_set(c->err, CBF_ENOMEM, "out of memory reading %s", c->path);
        if (rc)
            return rc;
        pc_pop(c, at);
    }
    out->n = (int)n;
    pc_pop(c, old);
    return 0;
}

/* ---- config and simulation ---- */

/* Reads obj[key], when present, with fn, its path pushed meanwhile. */
typedef int (*pc_reader)(pc_ctx *c, const json_t *v);
static int member(pc_ctx *c, const json_t *obj, const char *key, pc_reader fn)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    size_t old = pc_push_key(c, key);
    int rc = fn(c, v);
    if (!rc)
        pc_pop(c, old);
    return rc;
}

static int parse_develop(pc_ctx *c, const json_t *dev)
{
    cbf_product *p = c->p;
    if (json_is_boolean(dev)) {
        /* develop: true turns on every relaxation, as katsdpcontroller does. */
        p->develop_any_gpu = p->develop_disable_ibverbs = p->develop_less_resources = json_is_true(dev);
        return 0;
    }
    if (!json_is_object(dev))
        return pc_fail(c, "expected true, false or an object, got %s", pc_kind_of(dev));
    static const pc_field f[] = {{"data_timeout", 3, 0},   {"any_gpu", 0, 0},
                                 {"disable_ibverbs", 0, 0}, {"less_resources", 0, 0},
                                 {"vlbi_recorder_protocol", 8, 0}};
    static const char *const protocols[] = {"udps", "udpsnor", NULL};
    int proto = 0, rc;
    if ((rc = pc_check_fields(c, dev, f, 5, "config.develop")) ||
        (rc = pc_number(c, dev, "data_timeout", PC_NONNEG, &p->develop_data_timeout, NULL)) ||
        (rc = pc_bool(c, dev, "any_gpu", &p->develop_any_gpu)) ||
        (rc = pc_bool(c, dev, "disable_ibverbs", &p->develop_disable_ibverbs)) ||
        (rc = pc_bool(c, dev, "less_resources", &p->develop_less_resources)) ||
        (rc = pc_choice(c, dev, "vlbi_recorder_protocol", protocols, &proto)))
        return rc;
    p->vlbi_recorder_protocol = protocols[proto];
    return 0;
}

static int parse_string_map(pc_ctx *c, const json_t *m, cbf_product_strings *out)
{
    if (!json_is_object(m))
        return pc_fail(c, "expected an object of strings, got %s", pc_kind_of(m));
    out->v = pc_alloc(c, json_object_size(m) * sizeof *out->v);
    if (!out->v)
        return cbf_error_set(c->err, CBF_ENOMEM, "out of memory");
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)m, key, v)
    {
        if (!json_is_string(v))
            return pc_fail_at(c, key, "expected a string, got %s", pc_kind_of(v));
        size_t n = strlen(key) + strlen(json_string_value(v)) + 2;
        char *kv = pc_alloc(c, n);
        if (!kv)
            return cbf_error_set(c->err, CBF_ENOMEM, "out of memory");
        snprintf(kv, n, "%s=%s", key, json_string_value(v));
        out->v[out->n++] = kv;
    }
    return 0;
}

static int parse_service_overrides(pc_ctx *c, const json_t *m)
{
    if (!json_is_object(m))
        return pc_fail(c, "expected an object, got %s", pc_kind_of(m));
    static const pc_field f[] = {{"config", 0, 0}, {"host", 0, 0}, {"taskinfo", 0, 0}};
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)m, key, v)
    {
        size_t old = pc_push_key(c, key);
        const char *host = NULL;
        int rc = pc_want_object(c, v);
        if (!rc)
            rc = pc_check_fields(c, v, f, 3, "a service override");
        if (!rc)
            rc = pc_string(c, v, "host", &host);
        for (int i = 0; !rc && i < 3; i += 2)
            if (json_object_get(v, f[i].name) && !json_is_object(json_object_get(v, f[i].name)))
                rc = pc_fail_at(c, f[i].name, "expected an object, got %s", pc_kind_of(json_object_get(v, f[i].name)));
        if (rc)
            return rc;
        pc_pop(c, old);
        c->p->n_service_overrides++;
    }
    return 0;
}

static int parse_vlbimeta(pc_ctx *c, const json_t *v)
{
    static const pc_field vf[] = {{"mode", 0, 0}};
    static const char *const modes[] = {"antab", "pass_through", "disabled", NULL};
    int mode = 0, rc;
    if ((rc = pc_want_object(c, v)) || (rc = pc_check_fields(c, v, vf, 1, "config.vlbimeta")) ||
        (rc = pc_choice(c, v, "mode", modes, &mode)))
        return rc;
    c->p->vlbimeta_mode = modes[mode];
    return 0;
}

static int parse_image_overrides(pc_ctx *c, const json_t *m)
{
    return parse_string_map(c, m, &c->p->image_overrides);
}

static int parse_config(pc_ctx *c, const json_t *cfg)
{
    cbf_product *p = c->p;
    static const pc_field f[] = {{"develop", 0, 0},        {"vlbimeta", 8, 0},      {"wrapper", 0, 0},
                                 {"image_tag", 0, 0},      {"image_overrides", 0, 0}, {"shutdown_delay", 1, 0},
                                 {"mirror_sensors", 6, 0}, {"service_overrides", 0, 0}};
    int rc;
    if ((rc = pc_want_object(c, cfg)) || (rc = pc_check_fields(c, cfg, f, 8, "config")))
        return rc;
    if ((rc = member(c, cfg, "develop", parse_develop)) || (rc = member(c, cfg, "vlbimeta", parse_vlbimeta)) ||
        (rc = pc_string(c, cfg, "wrapper", &p->wrapper)) || (rc = pc_string(c, cfg, "image_tag", &p->image_tag)) ||
        (rc = pc_number(c, cfg, "shutdown_delay", PC_NONNEG, &p->shutdown_delay, NULL)) ||
        (rc = pc_bool(c, cfg, "mirror_sensors", &p->mirror_sensors)) ||
        (rc = member(c, cfg, "image_overrides", parse_image_overrides)) ||
        (rc = member(c, cfg, "service_overrides", parse_service_overrides)))
        return rc;
    return 0;
}

static int parse_simulation(pc_ctx *c, const json_t *sim)
{
    static const pc_field f[] = {{"clock_ratio", 0, 0}, {"start_time", 0, 0}, {"sources", 0, 0}, {"antennas", 0, 0}};
    cbf_product_strings unused = {0};
    int rc;
    if ((rc = pc_want_object(c, sim)) || (rc = pc_check_fields(c, sim, f, 4, "simulation")) ||
        (rc = pc_number(c, sim, "clock_ratio", PC_NONNEG, &c->p->clock_ratio, NULL)) ||
        (rc = pc_number(c, sim, "start_time", PC_POSITIVE, &c->p->start_time, NULL)) ||
        (rc = pc_strings(c, sim, "sources", 0, &unused)) || (rc = pc_strings(c, sim, "antennas", 0, &unused)))
        return rc;
    return 0;
}

/* ---- streams ---- */

/* Every type katsdpcontroller's schema names, with the version it came
 * in; cbf runs the supported ones and names the others as another
 * system's streams. */
static const struct pc_type {
    const char *name;
    int input, min_minor, supported;
    cbf_stream_kind kind;
    const char *owner;
} pc_types[] = {
    {"dig.baseband_voltage", 1, 0, 1, CBF_STREAM_DIG, NULL},
    {"cbf.antenna_channelised_voltage", 1, 0, 0, 0, "another correlator's stream"},
    {"cbf.baseline_correlation_products", 1, 0, 0, 0, "another correlator's stream"},
    {"cbf.tied_array_channelised_voltage", 1, 0, 0, 0, "another correlator's stream"},
    {"cbf.tied_array_resampled_voltage", 1, 8, 0, 0, "another correlator's stream"},
    {"cam.http", 1, 0, 0, 0, "CAM's sensor-portal stream"},
    {"sim.dig.baseband_voltage", 0, 0, 1, CBF_STREAM_DIG, NULL},
    {"gpucbf.antenna_channelised_voltage", 0, 0, 1, CBF_STREAM_ACV, NULL},
    {"gpucbf.baseline_correlation_products", 0, 0, 1, CBF_STREAM_BCP, NULL},
    {"gpucbf.tied_array_channelised_voltage", 0, 0, 1, CBF_STREAM_TACV, NULL},
    {"gpucbf.tied_array_resampled_voltage", 0, 7, 1, CBF_STREAM_TARV, NULL},
    {"sim.cbf.antenna_channelised_voltage", 0, 0, 0, 0, "katcbfsim's stream"},
    {"sim.cbf.baseline_correlation_products", 0, 0, 0, 0, "katcbfsim's stream"},
    {"sim.cbf.tied_array_channelised_voltage", 0, 0, 0, 0, "katcbfsim's stream"},
    {"sdp.vis", 0, 0, 0, 0, "SDP's stream"},
    {"sdp.cal", 0, 0, 0, 0, "SDP's stream"},
    {"sdp.flags", 0, 0, 0, 0, "SDP's stream"},
    {"sdp.vdif", 0, 8, 0, 0, "SDP's stream"},
    {"sdp.continuum_image", 0, 0, 0, 0, "SDP's stream"},
    {"sdp.spectral_image", 0, 0, 0, 0, "SDP's stream"},
    {"sdp.beamformer", 0, 0, 0, 0, "SDP's stream"},
    {"sdp.beamformer_engineering", 0, 0, 0, 0, "SDP's stream"},
};
#define PC_N_TYPES (sizeof pc_types / sizeof pc_types[0])

const char *cbf_product_kind_name(cbf_stream_kind k, int is_input)
{
    for (size_t i = 0; i < PC_N_TYPES; i++)
        if (pc_types[i].supported && pc_types[i].kind == k && pc_types[i].input == is_input)
            return pc_types[i].name;
    return "?";
}

void cbf_product_dsim_task(const cbf_product_dig *d, char *buf, size_t n)
{
    char rate[40];
    cbf_format_repr(d->adc_sample_rate, rate, sizeof rate);
    snprintf(buf, n, "sim.%s.%s", d->antenna_name, rate);
}

static int parse_type(pc_ctx *c, const json_t *obj, int input, cbf_product_stream *s)
{
    const json_t *t = json_object_get(obj, "type");
    if (!t)
        return pc_fail_at(c, "type", "missing: every stream has a type");
    if (!json_is_string(t))
        return pc_fail_at(c, "type", "expected a string, got %s", pc_kind_of(t));
    const char *name = json_string_value(t);
    const char *names[PC_N_TYPES];
    size_t n = 0;
    for (size_t i = 0; i < PC_N_TYPES; i++) {
        const struct pc_type *ty = &pc_types[i];
        if (ty->input != input)
            continue;
        if (ty->min_minor <= c->minor)
            names[n++] = ty->name;
        if (strcmp(ty->name, name))
            continue;
        if (ty->min_minor > c->minor)
            return pc_fail_at(c, "type", "\"%s\" is not in schema version %s (from 4.%d on)", name,
                              c->p->version, ty->min_minor);
        if (!ty->supported)
            return pc_fail_at(c, "type", "\"%s\" is %s: cbf does not run it", name, ty->owner);
        s->kind = ty->kind;
        s->type = ty->name;
        return 0;
    }
    for (size_t i = 0; i < PC_N_TYPES; i++)
        if (pc_types[i].input != input && !strcmp(pc_types[i].name, name))
            return pc_fail_at(c, "type", "\"%s\" is %s type, not %s one", name, input ? "an output" : "an input",
                              input ? "an input" : "an output");
    const char *near = cbf_closest_name(name, names, n);
    return pc_fail_at(c, "type", "unknown stream type \"%s\"%s%s%s", name, near ? " (did you mean '" : "",
                      near ? near : "", near ? "'?)" : "");
}

static int parse_streams(pc_ctx *c, const json_t *map, int input, int *at)
{
    const char *key;
    const json_t *obj;
    json_object_foreach((json_t *)map, key, obj)
    {
        size_t old = pc_push_key(c, key);
        if (!pc_name_ok(key))
            return pc_fail(c, "not a stream name (%s)", PC_NAME_CHARS);
        cbf_product_stream *s = &c->p->streams[*at];
        s->index = (*at)++;
        s->is_input = input;
        int rc;
        if (!(s->name = pc_strdup(c, key)))
            return cbf_error_set(c->err, CBF_ENOMEM, "out of memory");
        if ((rc = pc_want_object(c, obj)) || (rc = parse_type(c, obj, input, s)) ||
            (rc = pc_stream_fields(c, s, obj)))
            return rc;
        pc_pop(c, old);
    }
    return 0;
}

const cbf_product_stream *cbf_product_find(const cbf_product *p, const char *name)
{
    for (int i = 0; i < p->n_streams; i++)
        if (!strcmp(p->streams[i].name, name))
            return &p->streams[i];
    return NULL;
}

/* src_streams to pointers, each of a kind its stream takes. */
static int resolve(pc_ctx *c, cbf_product_stream *s)
{
    cbf_product *p = c->p;
    s->n_src = s->src_names.n;
    s->src = pc_alloc(c, (size_t)s->n_src * sizeof *s->src);
    if (!s->src)
        return cbf_error_set(c->err, CBF_ENOMEM, "out of memory");
    size_t o1 = pc_push_key(c, s->is_input ? "inputs" : "outputs");
    pc_push_key(c, s->name);
    pc_push_key(c, "src_streams");
    for (int i = 0; i < s->n_src; i++) {
        const char *want = s->src_names.v[i];
        const cbf_product_stream *src = cbf_product_find(p, want);
        size_t o2 = pc_push_index(c, (size_t)i);
        if (!src) {
            const char *names[256];
            size_t n = 0;
            for (int k = 0; k < p->n_streams && n < 256; k++)
                names[n++] = p->streams[k].name;
            const char *near = cbf_closest_name(want, names, n);
            return pc_fail(c, "no %s named \"%s\"%s%s%s", json_object_size(c->inputs) ? "input or output" : "output",
                           want, near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
        }
        if (src == s)
            return pc_fail(c, "\"%s\" names the stream itself", want);
        if (!pc_source_ok(s, src))
            return pc_fail(c, "\"%s\" is a %s; a %s takes %s", want, src->type, s->type, pc_source_kinds(s));
        s->src[i] = src;
        pc_pop(c, o2);
    }
    pc_pop(c, o1);
    return 0;
}

static int parse_document(pc_ctx *c, const json_t *root, double now)
{
    cbf_product *p = c->p;
    int rc;
    if (!json_is_object(root))
        return pc_fail(c, "expected a JSON object, got %s", pc_kind_of(root));
    const json_t *ver = json_object_get(root, "version");
    if (!ver)
        return pc_fail_at(c, "version", "missing: the configuration names its schema version (\"4.0\" to \"4.9\")");
    if (!json_is_string(ver))
        return pc_fail_at(c, "version", "expected a string such as \"4.7\", got %s", pc_kind_of(ver));
    const char *vs = json_string_value(ver);
    if (strlen(vs) != 3 || vs[0] != '4' || vs[1] != '.' || vs[2] < '0' || vs[2] > '9')
        return pc_fail_at(c, "version", "schema version \"%s\" is not accepted: cbf takes 4.0 to 4.9", vs);
    memcpy(p->version, vs, 4);
    c->minor = p->minor = vs[2] - '0';

    static const pc_field top[] = {
        {"version", 0, 1}, {"outputs", 0, 1}, {"inputs", 0, 0}, {"config", 0, 0}, {"simulation", 0, 0}};
    if ((rc = pc_check_fields(c, root, top, 5, "a product configuration")))
        return rc;
    if ((rc = member(c, root, "config", parse_config)) || (rc = member(c, root, "simulation", parse_simulation)))
        return rc;
    const json_t *v;
    /* An absent inputs map reads as an empty one: jansson's getters and
     * iterators take NULL. */
    c->inputs = json_object_get(root, "inputs");
    c->outputs = json_object_get(root, "outputs");
    if (c->inputs && !json_is_object(c->inputs))
        return pc_fail_at(c, "inputs", "expected an object, got %s", pc_kind_of(c->inputs));
    if (!json_is_object(c->outputs))
        return pc_fail_at(c, "outputs", "expected an object, got %s", pc_kind_of(c->outputs));

    p->n_streams = (int)(json_object_size(c->inputs) + json_object_size(c->outputs));
    if (!(p->streams = calloc((size_t)p->n_streams + 1, sizeof *p->streams)))
        return cbf_error_set(c->err, CBF_ENOMEM, "out of memory");
    int at = 0;
    size_t old = pc_push_key(c, "inputs");
    if ((rc = parse_streams(c, c->inputs, 1, &at)))
        return rc;
    pc_pop(c, old);
    pc_push_key(c, "outputs");
    if ((rc = parse_streams(c, c->outputs, 0, &at)))
        return rc;
    pc_pop(c, old);

    const char *key;
    json_object_foreach((json_t *)c->outputs, key, v)
    {
        if (json_object_get(c->inputs, key)) {
            size_t o = pc_push_key(c, "outputs");
            pc_push_key(c, key);
            rc = pc_fail(c, "also the name of an input: inputs and outputs need distinct names");
            pc_pop(c, o);
            return rc;
        }
    }
    for (int i = 0; i < p->n_streams; i++)
        if ((rc = resolve(c, &p->streams[i])))
            return rc;

    /* Figures in dependency order: the types only reference the layer
     * below (digitisers, channelisers, beams, VLBI), so this is a
     * topological order. */
    for (int i = 0; i < p->n_streams; i++)
        if (p->streams[i].kind == CBF_STREAM_DIG && !p->streams[i].u.dig.sync_time_given)
            p->streams[i].u.dig.sync_time = floor(now);
    static const cbf_stream_kind order[] = {CBF_STREAM_DIG, CBF_STREAM_ACV, CBF_STREAM_BCP, CBF_STREAM_TACV,
                                            CBF_STREAM_TARV};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++)
        for (int i = 0; i < p->n_streams; i++) {
            cbf_product_stream *s = &p->streams[i];
            if (s->kind != order[k])
                continue;
            const json_t *obj = json_object_get(s->is_input ? c->inputs : c->outputs, s->name);
            size_t o = pc_push_key(c, s->is_input ? "inputs" : "outputs");
            pc_push_key(c, s->name);
            if ((rc = pc_stream_figures(c, s, obj)))
                return rc;
            pc_pop(c, o);
        }

    /* One band per product, as katsdpcontroller requires. */
    const cbf_product_stream *first = NULL;
    for (int i = 0; i < p->n_streams; i++) {
        const cbf_product_stream *s = &p->streams[i];
        if (s->kind != CBF_STREAM_ACV)
            continue;
        if (!first) {
            first = s;
            continue;
        }
        if (strcmp(s->u.acv.band, first->u.acv.band)) {
            size_t o = pc_push_key(c, "outputs");
            pc_push_key(c, s->name);
            pc_push_key(c, "src_streams");
            pc_push_index(c, 0);
            rc = pc_fail(c, "band \"%s\" differs from band \"%s\" of outputs.%s: a product has one band",
                         s->u.acv.band, first->u.acv.band, first->name);
            pc_pop(c, o);
            return rc;
        }
    }
    return 0;
}

int cbf_product_from_json(const json_t *root, double now, cbf_product **out, cbf_error *err)
{
    *out = NULL;
    cbf_product *p = calloc(1, sizeof *p);
    if (!p)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    p->shutdown_delay = -1;
    p->mirror_sensors = 1;
    p->clock_ratio = 1.0;
    p->vlbi_recorder_protocol = "udps";
    p->vlbimeta_mode = "antab";
    pc_ctx c = {.p = p, .err = err};
    int rc = parse_document(&c, root, now);
    if (rc) {
        cbf_product_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

int cbf_product_parse(const char *text, size_t len, double now, cbf_product **out, cbf_error *err)
{
    json_error_t je;
    /* A repeated key is refused: Python's json keeps the last silently,
     * which hides a mistake in a hand-edited configuration. */
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    *out = NULL;
    if (!root)
        return cbf_error_set(err, CBF_ECONFIG, "line %d column %d: not valid JSON: %s", je.line, je.column, je.text);
    int rc = cbf_product_from_json(root, now, out, err);
    json_decref(root);
    return rc;
}
