/* graph.c: one pipeline YAML into the validated model of graph_model.h.
 *
 * Everything that can be checked without running is checked here, and each
 * mistake is reported as one line that starts with the YAML place
 * ("file:line:column: "), then names the node, parameter or edge. The
 * libyaml document API keeps a mark on every node, which is what makes the
 * places exact; overrides ("node.param=value") are parsed as YAML of their
 * own and stand in for the value they replace. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_model.h"
#include "params_priv.h"

typedef struct override {
    const char *text;      /* as given */
    char *node, *key;
    yaml_document_t doc;
    int loaded;
} override;

typedef struct node_src {
    cbf_kv *kv;
    size_t n_kv;
} node_src;

typedef struct loader {
    cbf_graph *g;
    cbf_registry *reg;
    cbf_error *err;
    yaml_document_t doc;
    int doc_loaded;
    char root_where[CBF_WHERE_MAX];
    override *ov;
    size_t n_ov;
    node_src *src;        /* parallel to g->nodes while loading */
    size_t *edge_count;   /* per edge: index among edges into its input, for multi */
    size_t *by_name;      /* node indices sorted by name (find_node), for n_by_name nodes */
    size_t n_by_name;
    /* Per port of every node, what earlier edges did there (check_edge):
     * port p of node i is slot port_base[i] + p. */
    struct port_seen {
        long first_out, writer_out;  /* first edge from this output; first into an input that writes */
        long first_in;               /* first edge into this input */
        size_t n_in;
    } *seen;
    size_t *port_base;
    cbf_kv rate_kv;       /* engine.adc_sample_rate as given: the default of nodes' own */
    bool has_rate_kv;
} loader;

/* ---- places and small helpers ---- */

static void where_of(const loader *L, const yaml_node_t *n, char *buf)
{
    snprintf(buf, CBF_WHERE_MAX, "%s:%zu:%zu", L->g->path, n->start_mark.line + 1,
             n->start_mark.column + 1);
}

static int fail_at(loader *L, const yaml_node_t *n, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int fail_at(loader *L, const yaml_node_t *n, const char *fmt, ...)
{
    char msg[CBF_ERROR_MSG_MAX], place[CBF_WHERE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n)
        where_of(L, n, place);
    else
        snprintf(place, sizeof place, "%s", L->root_where);
    return cbf_error_set(L->err, CBF_ECONFIG, "%s: %s", place, msg);
}

static yaml_node_t *node_at(loader *L, yaml_node_item_t id)
{
    return yaml_document_get_node(&L->doc, id);
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* 0 for anything but a mapping: the node's data is a union, and reading a
 * scalar's as pairs gave a count that no allocation could hold. */
static size_t n_pairs(const yaml_node_t *m)
{
    if (m->type != YAML_MAPPING_NODE)
        return 0;
    return (size_t)(m->data.mapping.pairs.top - m->data.mapping.pairs.start);
}

/* " (did you mean 'x'?)" or "". */
static const char *hint(char *buf, size_t n, const char *name, const char *const *cands, size_t nc)
{
    const char *near = cbf_closest_name(name, cands, nc);
    if (near)
        snprintf(buf, n, " (did you mean '%s'?)", near);
    else
        buf[0] = '\0';
    return buf;
}

static int valid_node_name(const char *s)
{
    if (!s || !s[0])
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-')
            return 0;
    return 1;
}

/* Keys of a mapping in name order, ties in file order (qsort_r: the loader
 * travels with the call, so engines may load pipelines on several threads). */
static int key_order(const void *a, const void *b, void *loader_)
{
    loader *L = loader_;
    const yaml_node_pair_t *p = *(yaml_node_pair_t *const *)a, *q = *(yaml_node_pair_t *const *)b;
    int c = strcmp(scalar(node_at(L, p->key)), scalar(node_at(L, q->key)));
    return c ? c : (p > q) - (p < q);
}

/* Walks the keys of a mapping, refusing non-scalar and repeated keys. A
 * repeated key is reported at its second place, the one earliest in the
 * file, naming the first; sorting keeps that O(n log n) for 50 000 nodes. */
static int map_keys_ok(loader *L, const yaml_node_t *m, const char *what)
{
    size_t n = (size_t)(m->data.mapping.pairs.top - m->data.mapping.pairs.start);
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node_at(L, p->key);
        if (!scalar(k))
            return fail_at(L, k, "%s names must be plain scalars", what);
    }
    if (n < 2)
        return 0;
    yaml_node_pair_t **sorted = malloc(n * sizeof *sorted);
    if (!sorted)
        return cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        sorted[i] = m->data.mapping.pairs.start + i;
    qsort_r(sorted, n, sizeof *sorted, key_order, L);
    /* In each run of one name the second is its first repeat; the report
     * names the repeat that comes first in the file. */
    yaml_node_pair_t *dup = NULL, *first = NULL;
    for (size_t i = 0; i + 1 < n; i++) {
        const char *a = scalar(node_at(L, sorted[i]->key)), *b = scalar(node_at(L, sorted[i + 1]->key));
        if (!strcmp(a, b) && (!i || strcmp(a, scalar(node_at(L, sorted[i - 1]->key)))) &&
            (!dup || sorted[i + 1] < dup)) {
            dup = sorted[i + 1];
            first = sorted[i];
        }
    }
    free(sorted);
    if (!dup)
        return 0;
    char at[CBF_WHERE_MAX];
    where_of(L, node_at(L, first->key), at);
    yaml_node_t *k = node_at(L, dup->key);
    return fail_at(L, k, "%s '%s' is given twice (first at %s)", what, scalar(k), at);
}

/* ---- parsing the file ---- */

static int load_yaml(loader *L, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return cbf_error_set(L->err, CBF_EIO, "%s: cannot open pipeline: %s", path, strerror(errno));
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        fclose(f);
        return cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
    }
    yaml_parser_set_input_file(&p, f);
    int ok = yaml_parser_load(&p, &L->doc);
    int rc = 0;
    if (!ok) {
        rc = cbf_error_set(L->err, CBF_ECONFIG, "%s:%zu:%zu: YAML syntax error: %s%s%s", path,
                           p.problem_mark.line + 1, p.problem_mark.column + 1,
                           p.problem ? p.problem : "malformed YAML", p.context ? " " : "",
                           p.context ? p.context : "");
    }
    if (ok) {
        L->doc_loaded = 1;
        /* a second document would be silently ignored: refuse it */
        yaml_document_t extra;
        if (!yaml_parser_load(&p, &extra)) {
            rc = cbf_error_set(L->err, CBF_ECONFIG, "%s:%zu:%zu: YAML syntax error: %s", path,
                               p.problem_mark.line + 1, p.problem_mark.column + 1,
                               p.problem ? p.problem : "malformed YAML");
        } else {
            if (yaml_document_get_root_node(&extra))
                rc = cbf_error_set(L->err, CBF_ECONFIG,
                                   "%s:%zu:%zu: a second YAML document; a pipeline is one document",
                                   path, extra.start_mark.line + 1, extra.start_mark.column + 1);
            yaml_document_delete(&extra);
        }
    }
    yaml_parser_delete(&p);
    fclose(f);
    if (rc)
        return rc;
    yaml_node_t *root = yaml_document_get_root_node(&L->doc);
    snprintf(L->root_where, sizeof L->root_where, "%s:1:1", path);
    if (!root)
        return fail_at(L, NULL, "the pipeline is empty: expected 'nodes:' and 'edges:'");
    where_of(L, root, L->root_where);
    if (root->type != YAML_MAPPING_NODE)
        return fail_at(L, root, "expected a mapping with 'engine:', 'nodes:' and 'edges:'");
    return 0;
}

static int parse_overrides(loader *L, const char *const *texts, size_t n)
{
    L->ov = calloc(n + 1, sizeof *L->ov);
    if (!L->ov)
        return cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
    L->n_ov = n;
    for (size_t i = 0; i < n; i++) {
        override *o = &L->ov[i];
        o->text = texts[i];
        const char *eq = strchr(texts[i], '=');
        const char *dot = strchr(texts[i], '.');
        if (!eq || !dot || dot > eq || dot == texts[i] || eq == dot + 1)
            return fail_at(L, NULL, "override '%s': expected NODE.PARAM=VALUE", texts[i]);
        o->node = strndup(texts[i], (size_t)(dot - texts[i]));
        o->key = strndup(dot + 1, (size_t)(eq - dot - 1));
        if (!o->node || !o->key)
            return cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
        char why[256];
        if (cbf_yaml_load_text(eq + 1, &o->doc, why, sizeof why))
            return fail_at(L, NULL, "override '%s': the value is not valid YAML: %s", texts[i], why);
        o->loaded = 1;
    }
    return 0;
}

/* ---- engine settings ---- */

static const char *const engine_keys[] = {"name", "gpu", "gpu_device", "queue_depth", "plugin_path",
                                          "control", "sensors", "sensor_period", "prometheus", "katcp",
                                          "katcp_idle_timeout", "read_only", "sync_time", "adc_sample_rate"};

static int engine_string(loader *L, const cbf_kv *kv, char **out)
{
    const char *s = scalar(kv->value);
    if (!s || cbf_yaml_is_null(kv->value))
        return cbf_error_set(L->err, CBF_ECONFIG, "%s: engine.%s: expected a string", kv->where, kv->key);
    free(*out);
    *out = strdup(s);
    return *out ? 0 : cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
}

static int engine_int(loader *L, const cbf_kv *kv, int64_t min, int64_t *out)
{
    const char *s = scalar(kv->value);
    if (!s || kv->value->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || cbf_parse_int(s, out))
        return cbf_error_set(L->err, CBF_ECONFIG, "%s: engine.%s: expected an integer, got '%s'",
                             kv->where, kv->key, s ? s : "a list or mapping");
    if (*out < min)
        return cbf_error_set(L->err, CBF_ECONFIG, "%s: engine.%s: %s is below the minimum %lld",
                             kv->where, kv->key, s, (long long)min);
    return 0;
}

static int add_plugin_dir(loader *L, const yaml_node_t *n, const char *where)
{
    const char *d = scalar(n);
    if (!d || !d[0])
        return cbf_error_set(L->err, CBF_ECONFIG, "%s: engine.plugin_path: expected a directory", where);
    char full[4096];
    const char *slash = strrchr(L->g->path, '/');
    if (d[0] == '/' || !slash)
        snprintf(full, sizeof full, "%s", d);
    else
        snprintf(full, sizeof full, "%.*s/%s", (int)(slash - L->g->path), L->g->path, d);
    int rc = cbf_registry_add_dir(L->reg, full, L->err);
    if (rc == CBF_EIO)
        L->err->code = rc = CBF_ECONFIG;
    return rc ? cbf_error_prefix(L->err, "%s: engine.plugin_path", where) : 0;
}

/* UNIX seconds after this are milli-, micro- or nanoseconds given by
 * mistake (1e10 s is the year 2286). */
#define SYNC_TIME_MAX 1e10

/* sync_time is kept exact (timeref.h): a timestamp given in UNIX time
 * must land on the sample the client meant. */
static int engine_time_key(loader *L, const cbf_kv *kv)
{
    cbf_engine_settings *e = &L->g->engine;
    const char *s = scalar(kv->value);
    bool sync = !strcmp(kv->key, "sync_time");
    cbf_unix_time t;
    if (!s || kv->value->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || cbf_time_parse(s, &t))
        return cbf_error_set(L->err, CBF_ECONFIG, "%s: engine.%s: expected a number (%s), got '%s'",
                             kv->where, kv->key, sync ? "UNIX seconds" : "Hz", s ? s : "a list or mapping");
    double v = cbf_time_to_double(&t);
    if (sync) {
        if (!(v > 0 && v <= SYNC_TIME_MAX))
            return cbf_error_set(L->err, CBF_ECONFIG, "%s: engine.sync_time: %s is not UNIX seconds "
                                 "after 1970 (0 < sync_time <= %g; milliseconds given by mistake?)",
                                 kv->where, s, SYNC_TIME_MAX);
        e->has_sync_time = true;
        e->sync_time = t;
        snprintf(e->sync_time_where, sizeof e->sync_time_where, "%s", kv->where);
    } else {
        if (!(v > 0 && v <= 1e12))
            return cbf_error_set(L->err, CBF_ECONFIG, "%s: engine.adc_sample_rate: %s is not a sample "
                                 "rate in Hz (0 < rate <= 1e12)", kv->where, s);
        e->adc_sample_rate = (long double)t.sec + t.frac;
        snprintf(e->adc_sample_rate_where, sizeof e->adc_sample_rate_where, "%s", kv->where);
        L->rate_kv = *kv;
        L->has_rate_kv = true;
    }
    return 0;
}

static int engine_key(loader *L, const cbf_kv *kv)
{
    cbf_engine_settings *e = &L->g->engine;
    int64_t v;
    int rc = 0;
    if (!strcmp(kv->key, "name")) {
        rc = engine_string(L, kv, &e->name);
    } else if (!strcmp(kv->key, "gpu")) {
        const char *s = scalar(kv->value);
        if (s && !strcmp(s, "auto"))
            e->gpu = CBF_GPU_AUTO;
        else if (s && !strcmp(s, "required"))
            e->gpu = CBF_GPU_REQUIRED;
        else if (s && !strcmp(s, "none"))
            e->gpu = CBF_GPU_NONE;
        else
            rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: engine.gpu: '%s' is not one of auto|required|none",
                               kv->where, s ? s : "a list or mapping");
    } else if (!strcmp(kv->key, "gpu_device")) {
        if (!(rc = engine_int(L, kv, 0, &v)))
            e->gpu_device = (int)(v > 1024 ? 1024 : v);
    } else if (!strcmp(kv->key, "queue_depth")) {
        if (!(rc = engine_int(L, kv, 1, &v)))
            e->queue_depth = (size_t)v;
    } else if (!strcmp(kv->key, "control")) {
        rc = engine_string(L, kv, &e->control);
    } else if (!strcmp(kv->key, "sensors")) {
        rc = engine_string(L, kv, &e->sensors);
    } else if (!strcmp(kv->key, "prometheus")) {
        rc = engine_string(L, kv, &e->prometheus);
        snprintf(e->prometheus_where, sizeof e->prometheus_where, "%s", kv->where);
    } else if (!strcmp(kv->key, "katcp")) {
        rc = engine_string(L, kv, &e->katcp);
        snprintf(e->katcp_where, sizeof e->katcp_where, "%s", kv->where);
    } else if (!strcmp(kv->key, "read_only")) {
        const char *s = scalar(kv->value);
        if (s && (!strcmp(s, "true") || !strcmp(s, "false")) && kv->value->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
            e->read_only = !strcmp(s, "true");
        else
            rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: engine.read_only: expected true or false, got '%s'",
                               kv->where, s ? s : "a list or mapping");
        snprintf(e->read_only_where, sizeof e->read_only_where, "%s", kv->where);
    } else if (!strcmp(kv->key, "katcp_idle_timeout")) {
        const char *s = scalar(kv->value);
        double t;
        if (!s || cbf_parse_float(s, &t) || !(t >= 0 && t < 1e9))
            rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: engine.katcp_idle_timeout: expected seconds >= 0 "
                               "(0: no limit), got '%s'", kv->where, s ? s : "a list or mapping");
        else
            e->katcp_idle_timeout = t;
    } else if (!strcmp(kv->key, "sensor_period")) {
        const char *s = scalar(kv->value);
        double p;
        if (!s || cbf_parse_float(s, &p) || !(p > 0 && p < 1e9))
            rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: engine.sensor_period: expected seconds > 0, got '%s'",
                               kv->where, s ? s : "a list or mapping");
        else
            e->sensor_period = p;
    } else if (!strcmp(kv->key, "sync_time") || !strcmp(kv->key, "adc_sample_rate")) {
        rc = engine_time_key(L, kv);
    } else if (!strcmp(kv->key, "plugin_path")) {
        if (kv->value->type == YAML_SEQUENCE_NODE) {
            for (yaml_node_item_t *it = kv->value->data.sequence.items.start;
                 it < kv->value->data.sequence.items.top && !rc; it++)
                rc = add_plugin_dir(L, yaml_document_get_node(kv->doc, *it), kv->where);
        } else {
            rc = add_plugin_dir(L, kv->value, kv->where);
        }
    } else {
        char h[96];
        rc = cbf_error_set(L->err, CBF_ECONFIG,
                           "%s: unknown engine key '%s'%s (known: name, gpu, gpu_device, queue_depth, "
                           "plugin_path, control, sensors, sensor_period, prometheus, katcp, "
                           "katcp_idle_timeout, read_only, sync_time, adc_sample_rate)",
                           kv->key_where, kv->key,
                           hint(h, sizeof h, kv->key, engine_keys, CBF_COUNT_OF(engine_keys)));
    }
    return rc;
}

static void kv_from_pair(loader *L, const yaml_node_pair_t *p, cbf_kv *kv)
{
    yaml_node_t *k = node_at(L, p->key);
    memset(kv, 0, sizeof *kv);
    kv->key = scalar(k);
    kv->doc = &L->doc;
    kv->value = node_at(L, p->value);
    where_of(L, k, kv->key_where);
    where_of(L, kv->value, kv->where);
}

static void kv_from_override(override *o, const char *fallback_where, cbf_kv *kv)
{
    kv->key = o->key;
    kv->doc = &o->doc;
    kv->value = yaml_document_get_root_node(&o->doc);
    kv->override = o->text;
    snprintf(kv->key_where, sizeof kv->key_where, "%s", fallback_where);
    snprintf(kv->where, sizeof kv->where, "%s", fallback_where);
}

static int parse_engine(loader *L, const yaml_node_t *m)
{
    cbf_engine_settings *e = &L->g->engine;
    e->gpu = CBF_GPU_AUTO;
    e->queue_depth = 4;
    e->sensor_period = 1.0;
    e->katcp_idle_timeout = 300.0;
    snprintf(e->where, sizeof e->where, "%s", L->root_where);
    if (m && cbf_yaml_is_null(m))
        m = NULL;
    if (m && m->type != YAML_MAPPING_NODE)
        return fail_at(L, m, "engine: expected a mapping of settings");
    int rc = m ? map_keys_ok(L, m, "engine key") : 0;
    if (m)
        where_of(L, m, e->where);
    for (size_t i = 0; m && i < n_pairs(m) && !rc; i++) {
        cbf_kv kv;
        kv_from_pair(L, &m->data.mapping.pairs.start[i], &kv);
        int overridden = 0;
        for (size_t k = 0; k < L->n_ov; k++)
            overridden |= !strcmp(L->ov[k].node, "engine") && !strcmp(L->ov[k].key, kv.key);
        if (!overridden)
            rc = engine_key(L, &kv);
    }
    for (size_t k = 0; k < L->n_ov && !rc; k++) {
        if (strcmp(L->ov[k].node, "engine"))
            continue;
        cbf_kv kv;
        char place[CBF_WHERE_MAX];
        snprintf(place, sizeof place, "%s: override '%s'", e->where, L->ov[k].text);
        kv_from_override(&L->ov[k], place, &kv);
        rc = engine_key(L, &kv);
    }
    if (!rc && e->has_sync_time && !(e->adc_sample_rate > 0))
        rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: engine.sync_time needs engine.adc_sample_rate "
                           "(the ADC samples per second that turn UNIX time into timestamps)",
                           e->sync_time_where);
    if (!rc && !e->name) {
        const char *base = strrchr(L->g->path, '/');
        base = base ? base + 1 : L->g->path;
        const char *dot = strrchr(base, '.');
        e->name = dot && dot != base ? strndup(base, (size_t)(dot - base)) : strdup(base);
        if (!e->name)
            rc = cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
    }
    return rc;
}

/* ---- nodes ---- */

static const char *const node_keys[] = {"plugin", "params"};

static int resolve_plugin(loader *L, cbf_graph_node *gn, const yaml_node_t *pn)
{
    const char *name = scalar(pn);
    if (!name || cbf_yaml_is_null(pn))
        return fail_at(L, pn, "node '%s': plugin: expected a plugin name", gn->name);
    for (size_t i = 0; i < cbf_registry_count(L->reg); i++) {
        if (!strcmp(cbf_registry_at(L->reg, i)->name, name)) {
            gn->plugin = cbf_registry_at(L->reg, i);
            gn->plugin_path = strdup(cbf_registry_path_at(L->reg, i));
            return gn->plugin_path ? 0 : cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
        }
    }
    size_t n = cbf_registry_count(L->reg);
    const char **cands = calloc(n + 1, sizeof *cands);
    if (!cands)
        return cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        cands[i] = cbf_registry_at(L->reg, i)->name;
    char h[96];
    int rc = fail_at(L, pn, "node '%s': unknown plugin '%s'%s%s", gn->name, name,
                     hint(h, sizeof h, name, cands, n),
                     n ? "; cbf-inspect lists the plugins found"
                       : "; no plugins were found (set CBF_PLUGIN_PATH or engine.plugin_path)");
    free(cands);
    return rc;
}

static int collect_params(loader *L, size_t idx, const yaml_node_t *pm)
{
    cbf_graph_node *gn = &L->g->nodes[idx];
    node_src *s = &L->src[idx];
    /* The kind first: `params: 5` is a place in the file, not a size. */
    if (pm && pm->type != YAML_MAPPING_NODE)
        return fail_at(L, pm, "node '%s': params: expected a mapping of name: value", gn->name);
    size_t n = pm ? n_pairs(pm) : 0;
    s->kv = calloc(n + L->n_ov + 1, sizeof *s->kv);
    if (!s->kv)
        return cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
    if (!pm)
        return 0;
    int rc = map_keys_ok(L, pm, "parameter");
    for (size_t i = 0; i < n && !rc; i++)
        kv_from_pair(L, &pm->data.mapping.pairs.start[i], &s->kv[s->n_kv++]);
    return rc;
}

static int parse_node(loader *L, const yaml_node_pair_t *p, size_t idx)
{
    cbf_graph_node *gn = &L->g->nodes[idx];
    yaml_node_t *k = node_at(L, p->key), *v = node_at(L, p->value);
    const char *name = scalar(k);
    where_of(L, k, gn->where);
    if (!valid_node_name(name))
        return fail_at(L, k, "node name '%s': use letters, digits, '_' and '-'", name);
    if (!strcmp(name, "engine"))
        return fail_at(L, k, "'engine' cannot name a node (overrides engine.KEY=VALUE set engine settings)");
    if (!(gn->name = strdup(name)))
        return cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
    if (v->type != YAML_MAPPING_NODE)
        return fail_at(L, v, "node '%s': expected a mapping with 'plugin:' and 'params:'", name);
    char what[300];
    snprintf(what, sizeof what, "node '%s': key", name);
    int rc = map_keys_ok(L, v, what);
    yaml_node_t *plugin = NULL, *params = NULL;
    for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top && !rc; q++) {
        yaml_node_t *qk = node_at(L, q->key);
        if (!strcmp(scalar(qk), "plugin")) {
            plugin = node_at(L, q->value);
        } else if (!strcmp(scalar(qk), "params")) {
            params = node_at(L, q->value);
        } else {
            char h[96];
            rc = fail_at(L, qk, "node '%s': unknown key '%s'%s (a node has 'plugin:' and 'params:')",
                         name, scalar(qk), hint(h, sizeof h, scalar(qk), node_keys, 2));
        }
    }
    if (rc)
        return rc;
    if (!plugin)
        return fail_at(L, k, "node '%s' has no 'plugin:'", name);
    if ((rc = resolve_plugin(L, gn, plugin)))
        return rc;
    return collect_params(L, idx, params && !cbf_yaml_is_null(params) ? params : NULL);
}

/* Compares name[0..len) with a whole string, as strcmp would. */
static int name_cmp(const char *name, size_t len, const char *s)
{
    int c = strncmp(name, s, len);
    return c ? c : -(s[len] != 0);
}

static int node_order(const void *a, const void *b, void *graph)
{
    const cbf_graph *g = graph;
    const char *x = g->nodes[*(const size_t *)a].name, *y = g->nodes[*(const size_t *)b].name;
    return strcmp(x ? x : "", y ? y : "");
}

/* The node of that name, by binary search over an index sorted once the
 * nodes are all known (edges and overrides look up every endpoint). */
static long find_node(loader *L, const char *name, size_t len)
{
    const cbf_graph *g = L->g;
    if (L->n_by_name != g->n_nodes) {
        size_t *idx = realloc(L->by_name, (g->n_nodes + 1) * sizeof *idx);
        if (!idx)
            return -1;
        for (size_t i = 0; i < g->n_nodes; i++)
            idx[i] = i;
        qsort_r(idx, g->n_nodes, sizeof *idx, node_order, (void *)g);
        L->by_name = idx;
        L->n_by_name = g->n_nodes;
    }
    size_t lo = 0, hi = L->n_by_name;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *s = g->nodes[L->by_name[mid]].name;
        int c = name_cmp(name, len, s ? s : "");
        if (!c)
            return (long)L->by_name[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return -1;
}

static int node_hint(const cbf_graph *g, const char *name, char *h, size_t hn)
{
    const char **cands = calloc(g->n_nodes + 1, sizeof *cands);
    if (!cands)
        return -1;
    for (size_t i = 0; i < g->n_nodes; i++)
        cands[i] = g->nodes[i].name;
    hint(h, hn, name, cands, g->n_nodes);
    free(cands);
    return 0;
}

static int apply_overrides(loader *L)
{
    for (size_t k = 0; k < L->n_ov; k++) {
        override *o = &L->ov[k];
        if (!strcmp(o->node, "engine"))
            continue;
        long i = find_node(L, o->node, strlen(o->node));
        if (i < 0) {
            char h[96] = "";
            node_hint(L->g, o->node, h, sizeof h);
            return fail_at(L, NULL, "override '%s': no node '%s' in the pipeline%s", o->text, o->node, h);
        }
        node_src *s = &L->src[i];
        cbf_kv *kv = NULL;
        for (size_t j = 0; j < s->n_kv && !kv; j++)
            if (!strcmp(s->kv[j].key, o->key))
                kv = &s->kv[j];
        if (kv) {   /* keep the places of the value it replaces */
            kv->doc = &o->doc;
            kv->value = yaml_document_get_root_node(&o->doc);
            kv->override = o->text;
        } else {
            kv_from_override(o, L->g->nodes[i].where, &s->kv[s->n_kv++]);
        }
    }
    return 0;
}

/* A node parameter named as the engine key adc_sample_rate (a dsim's, a
 * receiver's) that the node leaves out takes the engine's value, read as
 * if written there (its errors name the engine key's place): one rate for
 * the whole engine, which the engine also checks stages against. */
static void engine_rate_default(loader *L, size_t i)
{
    const cbf_plugin_desc *d = L->g->nodes[i].plugin;
    node_src *s = &L->src[i];
    for (size_t j = 0; j < s->n_kv; j++)
        if (!strcmp(s->kv[j].key, "adc_sample_rate"))
            return;
    for (int k = 0; k < d->n_params; k++)
        if (!strcmp(d->params[k].name, "adc_sample_rate")) {
            s->kv[s->n_kv] = L->rate_kv;   /* collect_params left room for one more */
            s->kv[s->n_kv++].key = d->params[k].name;
            return;
        }
}

static int parse_nodes(loader *L, const yaml_node_t *m)
{
    if (!m || cbf_yaml_is_null(m))
        return fail_at(L, m, "the pipeline has no nodes: add 'nodes:' with at least one node");
    if (m->type != YAML_MAPPING_NODE || n_pairs(m) == 0)
        return fail_at(L, m, "nodes: expected a mapping of node name: {plugin: ..., params: ...}");
    int rc = map_keys_ok(L, m, "node");
    if (rc)
        return rc;
    size_t n = n_pairs(m);
    L->g->nodes = calloc(n, sizeof *L->g->nodes);
    L->src = calloc(n, sizeof *L->src);
    if (!L->g->nodes || !L->src)
        return cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
    L->g->n_nodes = n;
    for (size_t i = 0; i < n && !rc; i++)
        rc = parse_node(L, &m->data.mapping.pairs.start[i], i);
    if (!rc)
        rc = apply_overrides(L);
    for (size_t i = 0; i < n && !rc && L->has_rate_kv; i++)
        engine_rate_default(L, i);
    for (size_t i = 0; i < n && !rc; i++) {
        cbf_graph_node *gn = &L->g->nodes[i];
        cbf_params_ctx ctx = {L->g->path, gn->name, gn->where, gn->plugin->name, NULL};
        rc = cbf_params_build(gn->plugin->params, gn->plugin->n_params, L->src[i].kv, L->src[i].n_kv,
                              &ctx, &gn->params, L->err);
    }
    return rc;
}

/* ---- edges ---- */

/* The place of text that starts `off` characters into scalar n: exact for
 * the usual one-line plain scalar, else the scalar's own start. */
static void where_in(const loader *L, const yaml_node_t *n, size_t off, char *buf)
{
    size_t col = n->start_mark.column + 1;
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && n->start_mark.line == n->end_mark.line)
        col += off;
    snprintf(buf, CBF_WHERE_MAX, "%s:%zu:%zu", L->g->path, n->start_mark.line + 1, col);
}

static int port_list(const cbf_plugin_desc *d, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < d->n_ports && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s (%s)", i ? ", " : "", d->ports[i].name,
                              d->ports[i].dir == CBF_PORT_IN ? "input" : "output");
    return 0;
}

/* "node.port" with the port of the wanted direction. */
static int endpoint(loader *L, const char *text, size_t len, const char *where, cbf_port_dir want,
                    size_t *node, size_t *port)
{
    const char *dot = memchr(text, '.', len);
    const char *side = want == CBF_PORT_OUT ? "from" : "to";
    if (!dot || dot == text || dot + 1 == text + len)
        return cbf_error_set(L->err, CBF_ECONFIG, "%s: edge %s '%.*s': expected NODE.PORT", where, side,
                             (int)len, text);
    size_t nl = (size_t)(dot - text);
    long ni = find_node(L, text, nl);
    if (ni < 0) {
        char name[256], h[96] = "";
        snprintf(name, sizeof name, "%.*s", (int)nl, text);
        node_hint(L->g, name, h, sizeof h);
        return cbf_error_set(L->err, CBF_ECONFIG, "%s: edge %s '%.*s': no node '%s'%s", where, side,
                             (int)len, text, name, h);
    }
    const cbf_graph_node *gn = &L->g->nodes[ni];
    const char *pn = dot + 1;
    size_t pl = len - nl - 1;
    for (int i = 0; i < gn->plugin->n_ports; i++) {
        const cbf_port_decl *pd = &gn->plugin->ports[i];
        if (strlen(pd->name) != pl || strncmp(pd->name, pn, pl))
            continue;
        if (pd->dir != want)
            return cbf_error_set(L->err, CBF_ECONFIG,
                                 "%s: edge %s '%.*s': '%s' is an %s of node '%s' (an edge goes from an output to an input)",
                                 where, side, (int)len, text, pd->name,
                                 pd->dir == CBF_PORT_IN ? "input" : "output", gn->name);
        *node = (size_t)ni;
        *port = (size_t)i;
        return 0;
    }
    char name[256], h[96], ports[512];
    snprintf(name, sizeof name, "%.*s", (int)pl, pn);
    const char *cands[64];
    int nc = 0;
    for (int i = 0; i < gn->plugin->n_ports && nc < 64; i++)
        cands[nc++] = gn->plugin->ports[i].name;
    hint(h, sizeof h, name, cands, (size_t)nc);
    port_list(gn->plugin, ports, sizeof ports);
    return cbf_error_set(L->err, CBF_ECONFIG, "%s: edge %s '%.*s': node '%s' (plugin '%s') has no port '%s'%s; its ports: %s",
                         where, side, (int)len, text, gn->name, gn->plugin->name, name, h,
                         ports[0] ? ports : "none");
}

static void trim(const char **s, size_t *len)
{
    while (*len && isspace((unsigned char)**s))
        (*s)++, (*len)--;
    while (*len && isspace((unsigned char)(*s)[*len - 1]))
        (*len)--;
}

static int edge_short(loader *L, const yaml_node_t *n, cbf_graph_edge *e)
{
    const char *t = scalar(n);
    const char *arrow = strstr(t, "->");
    if (!arrow)
        return fail_at(L, n, "edge '%s': expected 'NODE.PORT -> NODE.PORT'", t);
    const char *a = t, *b = arrow + 2;
    size_t al = (size_t)(arrow - t), bl = strlen(b);
    trim(&a, &al);
    trim(&b, &bl);
    char wa[CBF_WHERE_MAX], wb[CBF_WHERE_MAX];
    where_in(L, n, (size_t)(a - t), wa);
    where_in(L, n, (size_t)(b - t), wb);
    int rc = endpoint(L, a, al, wa, CBF_PORT_OUT, &e->from_node, &e->from_port);
    return rc ? rc : endpoint(L, b, bl, wb, CBF_PORT_IN, &e->to_node, &e->to_port);
}

static const char *const edge_keys[] = {"from", "to", "depth"};

static int edge_long(loader *L, const yaml_node_t *m, cbf_graph_edge *e)
{
    int rc = map_keys_ok(L, m, "edge key");
    yaml_node_t *from = NULL, *to = NULL, *depth = NULL;
    for (yaml_node_pair_t *q = m->data.mapping.pairs.start; q < m->data.mapping.pairs.top && !rc; q++) {
        yaml_node_t *k = node_at(L, q->key), *v = node_at(L, q->value);
        if (!strcmp(scalar(k), "from")) {
            from = v;
        } else if (!strcmp(scalar(k), "to")) {
            to = v;
        } else if (!strcmp(scalar(k), "depth")) {
            depth = v;
        } else {
            char h[96];
            rc = fail_at(L, k, "edge: unknown key '%s'%s (an edge has from, to and depth)", scalar(k),
                         hint(h, sizeof h, scalar(k), edge_keys, 3));
        }
    }
    if (rc)
        return rc;
    if (!from || !to)
        return fail_at(L, m, "edge: needs both 'from:' and 'to:'");
    if (!scalar(from) || !scalar(to))
        return fail_at(L, scalar(from) ? to : from, "edge: expected NODE.PORT");
    char wf[CBF_WHERE_MAX], wt[CBF_WHERE_MAX];
    where_of(L, from, wf);
    where_of(L, to, wt);
    rc = endpoint(L, scalar(from), strlen(scalar(from)), wf, CBF_PORT_OUT, &e->from_node, &e->from_port);
    if (!rc)
        rc = endpoint(L, scalar(to), strlen(scalar(to)), wt, CBF_PORT_IN, &e->to_node, &e->to_port);
    if (!rc && depth) {
        int64_t d;
        const char *s = scalar(depth);
        if (!s || depth->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || cbf_parse_int(s, &d) || d < 1)
            return fail_at(L, depth, "edge: depth: expected an integer >= 1, got '%s'", s ? s : "a list or mapping");
        e->depth = (size_t)d;
    }
    return rc;
}

/* "'a' or 'b'" for the alternatives "a|b". */
static void type_list(const char *types, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = '\0';
    for (const char *s = types; k < n;) {
        size_t len = strcspn(s, "|");
        k += (size_t)snprintf(buf + k, n - k, "%s'%.*s'", s == types ? "" : strchr(s, '|') ? ", " : " or ",
                              (int)len, s);
        if (!s[len])
            break;
        s += len + 1;
    }
}

/* Whether an input that takes `takes` can be fed by an output declaring
 * `gives`: some alternative it may give is one the input takes. Which one
 * it gives is known after its init (cbf_port_set_desc checks it then). */
static bool types_meet(const char *takes, const char *gives)
{
    for (const char *s = gives;;) {
        char one[256];
        size_t len = strcspn(s, "|");
        snprintf(one, sizeof one, "%.*s", (int)len, s);
        if (cbf_port_type_accepts(takes, one))
            return true;
        if (!s[len])
            return false;
        s += len + 1;
    }
}

static const cbf_port_decl *port_of(const cbf_graph *g, size_t node, size_t port)
{
    return &g->nodes[node].plugin->ports[port];
}

/* The port's slot in L->seen, made when the first edge is checked (every
 * node is known by then). */
static struct port_seen *seen_at(loader *L, size_t node, size_t port)
{
    const cbf_graph *g = L->g;
    if (!L->seen) {
        size_t total = 0;
        if (!(L->port_base = malloc((g->n_nodes + 1) * sizeof *L->port_base)))
            return NULL;
        for (size_t i = 0; i < g->n_nodes; i++) {
            L->port_base[i] = total;
            total += (size_t)g->nodes[i].plugin->n_ports;
        }
        if (!(L->seen = malloc((total + 1) * sizeof *L->seen)))
            return NULL;
        for (size_t k = 0; k < total; k++)
            L->seen[k] = (struct port_seen){.first_out = -1, .writer_out = -1, .first_in = -1};
    }
    return &L->seen[L->port_base[node] + port];
}

/* A fan-out hands every consumer the same buffer: none of them may write it. */
static int check_fanout(loader *L, const cbf_graph_edge *e, struct port_seen *out)
{
    const cbf_graph *g = L->g;
    const cbf_port_decl *tp = port_of(g, e->to_node, e->to_port);
    /* The first earlier edge from this output that makes a writer share it. */
    long k = (tp->flags & CBF_PORT_WRITES_INPUT) ? out->first_out : out->writer_out;
    if (k < 0)
        return 0;
    const cbf_graph_edge *o = &g->edges[k];
    const cbf_port_decl *op = port_of(g, o->to_node, o->to_port);
    const char *fn = g->nodes[e->from_node].name, *fp = port_of(g, e->from_node, e->from_port)->name;
    const char *wn = g->nodes[(tp->flags & CBF_PORT_WRITES_INPUT) ? e->to_node : o->to_node].name;
    const char *wp = (tp->flags & CBF_PORT_WRITES_INPUT) ? tp->name : op->name;
    return cbf_error_set(L->err, CBF_ECONFIG,
                         "%s: edge %s.%s -> %s.%s: output '%s.%s' already feeds %s.%s (at %s), and "
                         "input '%s.%s' writes its buffers in place; a fan-out shares one buffer "
                         "between its consumers, so it cannot feed an input that writes it",
                         e->where, fn, fp, g->nodes[e->to_node].name, tp->name, fn, fp,
                         g->nodes[o->to_node].name, op->name, o->where, wn, wp);
}

static int check_edge(loader *L, size_t idx)
{
    cbf_graph *g = L->g;
    cbf_graph_edge *e = &g->edges[idx];
    const cbf_graph_node *fn = &g->nodes[e->from_node], *tn = &g->nodes[e->to_node];
    const cbf_port_decl *fp = &fn->plugin->ports[e->from_port], *tp = &tn->plugin->ports[e->to_port];
    if (!types_meet(tp->type, fp->type)) {
        char takes[512], gives[512];
        type_list(tp->type, takes, sizeof takes);
        type_list(fp->type, gives, sizeof gives);
        return cbf_error_set(L->err, CBF_ECONFIG,
                             "%s: edge %s.%s -> %s.%s: buffer types differ: %s.%s gives %s, %s.%s takes %s",
                             e->where, fn->name, fp->name, tn->name, tp->name, fn->name, fp->name,
                             gives, tn->name, tp->name, takes);
    }
    struct port_seen *out = seen_at(L, e->from_node, e->from_port), *in = seen_at(L, e->to_node, e->to_port);
    if (!out || !in)
        return cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
    int rc = check_fanout(L, e, out);
    if (rc)
        return rc;
    if (in->n_in && !tp->multi)
        return cbf_error_set(L->err, CBF_ECONFIG,
                             "%s: edge %s.%s -> %s.%s: input '%s.%s' takes one edge and already has one (at %s)",
                             e->where, fn->name, fp->name, tn->name, tp->name, tn->name, tp->name,
                             g->edges[in->first_in].where);
    e->to_index = in->n_in++;
    if (in->first_in < 0)
        in->first_in = (long)idx;
    if (out->first_out < 0)
        out->first_out = (long)idx;
    if (out->writer_out < 0 && (tp->flags & CBF_PORT_WRITES_INPUT))
        out->writer_out = (long)idx;
    return 0;
}

static int parse_edges(loader *L, const yaml_node_t *s)
{
    if (!s || cbf_yaml_is_null(s))
        return 0;
    if (s->type != YAML_SEQUENCE_NODE)
        return fail_at(L, s, "edges: expected a list of 'NODE.PORT -> NODE.PORT' items");
    size_t n = (size_t)(s->data.sequence.items.top - s->data.sequence.items.start);
    L->g->edges = calloc(n + 1, sizeof *L->g->edges);
    if (!L->g->edges)
        return cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        yaml_node_t *it = node_at(L, s->data.sequence.items.start[i]);
        cbf_graph_edge *e = &L->g->edges[i];
        where_of(L, it, e->where);
        e->depth = L->g->engine.queue_depth;
        if (scalar(it))
            rc = edge_short(L, it, e);
        else if (it->type == YAML_MAPPING_NODE)
            rc = edge_long(L, it, e);
        else
            rc = fail_at(L, it, "edge: expected 'NODE.PORT -> NODE.PORT' or {from: ..., to: ..., depth: ...}");
        L->g->n_edges = i + 1;
        if (!rc)
            rc = check_edge(L, i);
    }
    return rc;
}

static int check_ports_wired(loader *L)
{
    const cbf_graph *g = L->g;
    for (size_t i = 0; i < g->n_nodes; i++) {
        const cbf_plugin_desc *d = g->nodes[i].plugin;
        for (int p = 0; p < d->n_ports; p++) {
            const cbf_port_decl *pd = &d->ports[p];
            int wired = 0;
            for (size_t j = 0; j < g->n_edges && !wired; j++) {
                const cbf_graph_edge *e = &g->edges[j];
                wired = pd->dir == CBF_PORT_IN ? (e->to_node == i && e->to_port == (size_t)p)
                                               : (e->from_node == i && e->from_port == (size_t)p);
            }
            if (!wired && !pd->optional)
                return cbf_error_set(L->err, CBF_ECONFIG,
                                     "%s: node '%s': %s '%s' (buffer type '%s') is not connected; it is required",
                                     g->nodes[i].where, g->nodes[i].name,
                                     pd->dir == CBF_PORT_IN ? "input" : "output", pd->name, pd->type);
        }
    }
    return 0;
}

/* ---- order ---- */

/* Walks back along edges among the nodes Kahn's algorithm could not place
 * (each has a predecessor among them) until a node repeats: a cycle. */
static int report_cycle(loader *L, const unsigned char *done)
{
    const cbf_graph *g = L->g;
    size_t n = g->n_nodes;
    long *pos = malloc(n * sizeof *pos);
    size_t *walk = malloc(n * sizeof *walk);
    if (!pos || !walk) {
        free(pos);
        free(walk);
        return cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        pos[i] = -1;
    size_t v = 0;
    while (done[v])
        v++;
    size_t steps = 0;
    while (pos[v] < 0) {
        pos[v] = (long)steps;
        walk[steps++] = v;
        for (size_t j = 0; j < g->n_edges; j++)
            if (g->edges[j].to_node == v && !done[g->edges[j].from_node]) {
                v = g->edges[j].from_node;
                break;
            }
    }
    /* walk[pos[v] .. steps-1] is the cycle backwards; start it at its first node in YAML order. */
    size_t first = (size_t)pos[v], len = steps - first, start = first;
    for (size_t k = first; k < steps; k++)
        if (walk[k] < walk[start])
            start = k;
    char msg[CBF_ERROR_MSG_MAX];
    size_t m = 0;
    for (size_t k = 0; k <= len && m < sizeof msg; k++) {
        size_t at = first + (start - first + len - (k % len)) % len;
        m += (size_t)snprintf(msg + m, sizeof msg - m, "%s%s", k ? " -> " : "", g->nodes[walk[at]].name);
    }
    int rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: the edges form a cycle: %s", g->nodes[walk[start]].where, msg);
    free(pos);
    free(walk);
    return rc;
}

static int sort_nodes(loader *L)
{
    cbf_graph *g = L->g;
    size_t n = g->n_nodes;
    size_t *indeg = calloc(n, sizeof *indeg), *order = calloc(n, sizeof *order), *inv = calloc(n, sizeof *inv);
    unsigned char *done = calloc(n, 1);
    cbf_graph_node *sorted = calloc(n, sizeof *sorted);
    int rc = 0;
    if (!indeg || !order || !inv || !done || !sorted) {
        rc = cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t j = 0; j < g->n_edges; j++)
        indeg[g->edges[j].to_node]++;
    /* Kahn's algorithm, taking the first ready node in YAML order each time
     * so that the order is stable and predictable. */
    for (size_t k = 0; k < n; k++) {
        size_t v = 0;
        while (v < n && (done[v] || indeg[v]))
            v++;
        if (v == n) {
            rc = report_cycle(L, done);
            goto out;
        }
        done[v] = 1;
        order[k] = v;
        inv[v] = k;
        for (size_t j = 0; j < g->n_edges; j++)
            if (g->edges[j].from_node == v)
                indeg[g->edges[j].to_node]--;
    }
    for (size_t k = 0; k < n; k++)
        sorted[k] = g->nodes[order[k]];
    memcpy(g->nodes, sorted, n * sizeof *sorted);
    for (size_t j = 0; j < g->n_edges; j++) {
        g->edges[j].from_node = inv[g->edges[j].from_node];
        g->edges[j].to_node = inv[g->edges[j].to_node];
    }
out:
    free(indeg);
    free(order);
    free(inv);
    free(done);
    free(sorted);
    return rc;
}

/* ---- the whole file ---- */

static const char *const top_keys[] = {"engine", "nodes", "edges"};

static int load(loader *L, const char *path, const char *const *overrides, size_t n_ov)
{
    int rc = load_yaml(L, path);
    if (!rc)
        rc = parse_overrides(L, overrides, n_ov);
    if (rc)
        return rc;
    yaml_node_t *root = yaml_document_get_root_node(&L->doc);
    yaml_node_t *engine = NULL, *nodes = NULL, *edges = NULL;
    rc = map_keys_ok(L, root, "top-level key");
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top && !rc; p++) {
        yaml_node_t *k = node_at(L, p->key), *v = node_at(L, p->value);
        if (!strcmp(scalar(k), "engine")) {
            engine = v;
        } else if (!strcmp(scalar(k), "nodes")) {
            nodes = v;
        } else if (!strcmp(scalar(k), "edges")) {
            edges = v;
        } else {
            char h[96];
            rc = fail_at(L, k, "unknown top-level key '%s'%s (a pipeline has engine, nodes and edges)",
                         scalar(k), hint(h, sizeof h, scalar(k), top_keys, 3));
        }
    }
    if (!rc)
        rc = parse_engine(L, engine);
    if (!rc)
        rc = parse_nodes(L, nodes);
    if (!rc)
        rc = parse_edges(L, edges);
    if (!rc)
        rc = check_ports_wired(L);
    if (!rc)
        rc = sort_nodes(L);
    return rc;
}

int cbf_graph_load(const char *path, const char *const *overrides, size_t n_overrides,
                   cbf_registry *reg, cbf_graph **out, cbf_error *err)
{
    if (!out || !path || !reg || (n_overrides && !overrides))
        return cbf_error_set(err, CBF_EINVAL, "cbf_graph_load: missing argument");
    *out = NULL;
    cbf_error local;
    if (!err)
        err = &local;
    loader L = {.reg = reg, .err = err};
    L.g = calloc(1, sizeof *L.g);
    if (!L.g || !(L.g->path = strdup(path))) {
        free(L.g);
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    L.g->reg = reg;
    int rc = load(&L, path, overrides, n_overrides);
    for (size_t i = 0; L.src && i < L.g->n_nodes; i++)
        free(L.src[i].kv);
    free(L.src);
    free(L.by_name);
    free(L.seen);
    free(L.port_base);
    for (size_t i = 0; i < L.n_ov; i++) {
        if (L.ov[i].loaded)
            yaml_document_delete(&L.ov[i].doc);
        free(L.ov[i].node);
        free(L.ov[i].key);
    }
    free(L.ov);
    if (L.doc_loaded)
        yaml_document_delete(&L.doc);
    if (rc) {
        cbf_graph_free(L.g);
        return rc;
    }
    *out = L.g;
    return 0;
}

void cbf_graph_free(cbf_graph *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n_nodes; i++) {
        free(g->nodes[i].name);
        free(g->nodes[i].plugin_path);
        cbf_params_free(g->nodes[i].params);
    }
    free(g->nodes);
    free(g->edges);
    free(g->engine.name);
    free(g->engine.control);
    free(g->engine.sensors);
    free(g->engine.prometheus);
    free(g->engine.katcp);
    free(g->path);
    free(g);
}
