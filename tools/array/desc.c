/* desc.c: the array description and the budget file, read with libyaml and
 * checked by libcbf's parameter validation (cbf_params_build), so a wrong
 * key, type or range reads as it does in a pipeline: file:line:column, the
 * section, the key, and a "did you mean" where one is near. Each section is
 * checked as a node's parameters are; the checks that span sections (roles
 * without a host, groups that do not parse) name the value's place too. */
#include <arpa/inet.h>
#include <errno.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "array.h"
#include "graph/params_priv.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct ld {
    const char *path;
    yaml_document_t doc;
    int loaded;
    cbf_error *err;
} ld;

static const cbf_param_decl array_decls[] = {
    {"name", CBF_PARAM_STRING, "array", CBF_NORANGE, NULL, "names the engines (engine.name)"},
    {"antennas", CBF_PARAM_INT, NULL, CBF_RANGE(1, 4096), NULL, "dual-polarisation antennas"},
    {"channels", CBF_PARAM_INT, NULL, CBF_RANGE(2, 1 << 22), NULL, "F-engine channels"},
    {"adc_sample_rate", CBF_PARAM_FLOAT, "1712e6", CBF_RANGE(1, 1e12), NULL, "Hz, per polarisation"},
    {"bits", CBF_PARAM_INT, "10", CBF_RANGE(2, 16), NULL, "digitiser bits per sample"},
    {"spectra_per_heap", CBF_PARAM_INT, "256", CBF_RANGE(1, 65536), NULL, "spectra per F-engine heap"},
    {"xengines", CBF_PARAM_INT, "0", CBF_RANGE(0, 65536), NULL,
     "X-engines, each an equal channel range; 0: as many as --figures sizes from 'sizing'"},
    {"beams", CBF_PARAM_INT, "0", CBF_RANGE(0, 64), NULL, "single-pol beams (pol b mod 2)"},
    {"heaps_per_dump", CBF_PARAM_INT, "0", CBF_RANGE(0, 1 << 20), NULL,
     "correlator heap_accumulation_threshold; 0: its default"},
    {"samples_per_chunk", CBF_PARAM_INT, "1048576", CBF_RANGE(4096, 1 << 30), NULL,
     "digitiser samples per chunk"},
    {"gain", CBF_PARAM_FLOAT, "1", CBF_RANGE(-1e9, 1e9), NULL, "F-engine gain (real)"},
    {"fill", CBF_PARAM_FLOAT, "0.9", CBF_RANGE(0.01, 1), NULL,
     "largest fraction of a NIC, PCIe or GPU budget a plan may use"},
    {"budget", CBF_PARAM_STRING, "", CBF_NORANGE, NULL,
     "budget file (cbf-bench's figures), relative to this file"},
};
static const cbf_param_decl mcast_decls[] = {
    {"digitiser", CBF_PARAM_STRING, NULL, CBF_NORANGE, NULL, "first group:port, input i at +i"},
    {"feng", CBF_PARAM_STRING, NULL, CBF_NORANGE, NULL, "first group:port, X-engine x at +x"},
    {"beam", CBF_PARAM_STRING, "", CBF_NORANGE, NULL, "first group:port, beam b at +b"},
};
static const cbf_param_decl sim_decls[] = {
    {"digitisers", CBF_PARAM_INT, "1", CBF_RANGE(0, 4096), NULL, "dsim processes"},
    {"length", CBF_PARAM_INT, "0", CBF_RANGE(0, 1e18), NULL, "samples per pol; 0: endless"},
    {"noise", CBF_PARAM_FLOAT, "0.05", CBF_RANGE(0, 1), NULL, "Gaussian RMS"},
    {"tone_hz", CBF_PARAM_FLOAT, "284.5e6", CBF_RANGE(0, 1e12), NULL, "one tone"},
    {"tone_amplitude", CBF_PARAM_FLOAT, "0.1", CBF_RANGE(0, 1), NULL, "its amplitude"},
    {"delay_step", CBF_PARAM_FLOAT, "0", CBF_RANGE(-1e6, 1e6), NULL, "antenna a delayed a x this, samples"},
    {"rate_gbps", CBF_PARAM_FLOAT, "0", CBF_RANGE(0, 1e4), NULL, "sender rate limit; 0: none"},
};
static const cbf_param_decl sizing_decls[] = {
    {"gpus_per_host", CBF_PARAM_INT, NULL, CBF_RANGE(1, 64), NULL, "GPUs in one host"},
    {"nics_per_host", CBF_PARAM_INT, NULL, CBF_RANGE(1, 64), NULL, "NICs (switch ports) per host"},
    {"nic_gbps", CBF_PARAM_FLOAT, NULL, CBF_RANGE(0.001, 1e5), NULL, "each NIC's rate"},
    {"first_interface", CBF_PARAM_STRING, "", CBF_NORANGE, NULL,
     "without 'hosts': the first data-interface address of the sized hosts, the others consecutive"},
};
static const cbf_param_decl host_decls[] = {
    {"roles", CBF_PARAM_STRING, NULL, CBF_NORANGE, NULL, "comma-separated: digitiser, feng, xeng, beams"},
    {"gpus", CBF_PARAM_INT, "0", CBF_RANGE(0, 64), NULL, "GPUs; 0: engines on the CPU"},
    {"interfaces", CBF_PARAM_STRING, NULL, CBF_NORANGE, NULL, "comma-separated addresses, one per NIC"},
    {"nic_gbps", CBF_PARAM_FLOAT, NULL, CBF_RANGE(0.001, 1e5), NULL, "each NIC's rate"},
};
static const cbf_param_decl budget_decls[] = {
    {"gpu", CBF_PARAM_STRING, "", CBF_NORANGE, NULL, "what was measured"},
    {"measured", CBF_PARAM_STRING, "", CBF_NORANGE, NULL, "when and with which commands"},
    {"pcie_h2d_gbs", CBF_PARAM_FLOAT, NULL, CBF_RANGE(0.001, 1e4), NULL, "GB/s host to GPU"},
    {"pcie_d2h_gbs", CBF_PARAM_FLOAT, NULL, CBF_RANGE(0.001, 1e4), NULL, "GB/s GPU to host"},
    {"feng_gsps", CBF_PARAM_FLOAT, NULL, CBF_RANGE(0.001, 1e6), NULL, "F-engine Gsample/s per GPU"},
    {"corr_ants", CBF_PARAM_INT_LIST, NULL, CBF_RANGE(1, 1 << 20), NULL, "correlator sizes N"},
    {"corr_tops", CBF_PARAM_FLOAT_LIST, NULL, CBF_RANGE(0.001, 1e6), NULL, "its Tops/s at each N"},
    {"beam_tflops", CBF_PARAM_FLOAT, NULL, CBF_RANGE(0.001, 1e6), NULL, "beamformer TFLOP/s"},
};

static void where(const ld *L, const yaml_node_t *n, char *buf)
{
    snprintf(buf, CBF_WHERE_MAX, "%s:%zu:%zu", L->path, n->start_mark.line + 1, n->start_mark.column + 1);
}

static int fail(const ld *L, const yaml_node_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* CBF_ECONFIG at node n's place. */
static int fail(const ld *L, const yaml_node_t *n, const char *fmt, ...)
{
    char at[CBF_WHERE_MAX], msg[CBF_ERROR_MSG_MAX];
    where(L, n, at);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cbf_error_set(L->err, CBF_ECONFIG, "%s: %s", at, msg);
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int load(ld *L, const char *path, const char *what)
{
    L->path = path;
    FILE *f = fopen(path, "rb");
    if (!f)
        return cbf_error_set(L->err, CBF_EIO, "%s: cannot open %s: %s", path, what, strerror(errno));
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
        fclose(f);
        return cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
    }
    yaml_parser_set_input_file(&p, f);
    int rc = 0;
    if (!yaml_parser_load(&p, &L->doc))
        rc = cbf_error_set(L->err, CBF_ECONFIG, "%s:%zu:%zu: YAML syntax error: %s", path,
                           p.problem_mark.line + 1, p.problem_mark.column + 1,
                           p.problem ? p.problem : "malformed YAML");
    else
        L->loaded = 1;
    yaml_parser_delete(&p);
    fclose(f);
    if (rc)
        return rc;
    yaml_node_t *root = yaml_document_get_root_node(&L->doc);
    if (!root || root->type != YAML_MAPPING_NODE)
        return cbf_error_set(L->err, CBF_ECONFIG, "%s:1:1: expected a mapping (the %s)", path, what);
    return 0;
}

/* The mapping m checked against decls as node `node` of plugin `kind`. */
static int section(ld *L, const yaml_node_t *m, const char *node, const char *kind,
                   const cbf_param_decl *decls, int n_decls, cbf_params **out)
{
    if (m->type != YAML_MAPPING_NODE)
        return fail(L, m, "'%s' must be a mapping", node);
    size_t n = (size_t)(m->data.mapping.pairs.top - m->data.mapping.pairs.start);
    cbf_kv *kv = calloc(n ? n : 1, sizeof *kv);
    if (!kv)
        return cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        yaml_node_pair_t *pr = m->data.mapping.pairs.start + i;
        yaml_node_t *k = yaml_document_get_node(&L->doc, pr->key);
        if (!scalar(k)) {
            rc = fail(L, k, "keys of '%s' must be plain scalars", node);
            break;
        }
        kv[i].key = scalar(k);
        kv[i].doc = &L->doc;
        kv[i].value = yaml_document_get_node(&L->doc, pr->value);
        where(L, k, kv[i].key_where);
        where(L, kv[i].value, kv[i].where);
    }
    char node_where[CBF_WHERE_MAX];
    where(L, m, node_where);
    cbf_params_ctx ctx = {.file = L->path, .node = node, .node_where = node_where, .plugin = kind};
    if (!rc)
        rc = cbf_params_build(decls, n_decls, kv, n, &ctx, out, L->err);
    free(kv);
    return rc;
}

static const yaml_node_t *get(ld *L, const yaml_node_t *root, const char *key)
{
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        const char *k = scalar(yaml_document_get_node(&L->doc, p->key));
        if (k && !strcmp(k, key))
            return yaml_document_get_node(&L->doc, p->value);
    }
    return NULL;
}

/* A budget file's own key, named where a description was expected: the
 * file is one a description points to, not one to plan. */
static int budget_key(const char *s)
{
    for (int i = 0; s && i < N(budget_decls); i++)
        if (budget_decls[i].def == NULL && !strcmp(s, budget_decls[i].name))
            return 1;
    return 0;
}

static int top_keys(ld *L, const yaml_node_t *root)
{
    static const char *const keys[] = {"array", "multicast", "simulate", "sizing", "hosts"};
    if (!get(L, root, "array"))
        for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(&L->doc, p->key);
            if (budget_key(scalar(k)))
                return fail(L, k, "'%s' is a budget file's key: this is a budget file (cbf-bench's figures), "
                            "not an array description; a description names it in array.budget "
                            "(docs/scaling.md, \"Budget files\")", scalar(k));
        }
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(&L->doc, p->key);
        const char *s = scalar(k);
        int known = 0;
        for (int i = 0; i < N(keys) && s; i++)
            known |= !strcmp(s, keys[i]);
        if (!known) {
            const char *near = s ? cbf_closest_name(s, keys, N(keys)) : NULL;
            char h[96] = "";
            if (near)
                snprintf(h, sizeof h, " (did you mean '%s'?)", near);
            return fail(L, k, "unknown section '%s'%s (known: array, multicast, simulate, sizing, hosts)",
                        s ? s : "?", h);
        }
    }
    return 0;
}

/* "a.b.c.d:port" into g; the error names the value's place. */
static int group(const cbf_params *p, const char *key, array_group *g, cbf_error *err)
{
    const char *s = cbf_params_string(p, key);
    char ip[64];
    int port;
    struct in_addr a;
    const char *colon = strrchr(s, ':');
    if (!colon || (size_t)(colon - s) >= sizeof ip || sscanf(colon + 1, "%d", &port) != 1 || port < 1 ||
        port > 65535)
        return cbf_error_set(err, CBF_ECONFIG, "%s: multicast.%s: expected group:port, got '%s'",
                             cbf_params_where(p, key), key, s);
    memcpy(ip, s, (size_t)(colon - s));
    ip[colon - s] = '\0';
    if (inet_pton(AF_INET, ip, &a) != 1 || (ntohl(a.s_addr) >> 28) != 0xe)
        return cbf_error_set(err, CBF_ECONFIG, "%s: multicast.%s: '%s' is not an IPv4 multicast group",
                             cbf_params_where(p, key), key, ip);
    g->addr = ntohl(a.s_addr);
    g->port = port;
    return 0;
}

static int host(ld *L, const yaml_node_pair_t *pr, array_host *h)
{
    yaml_node_t *k = yaml_document_get_node(&L->doc, pr->key);
    const char *name = scalar(k);
    if (!name || !name[0] || strlen(name) >= sizeof h->name || strpbrk(name, " /\t"))
        return fail(L, k, "a host name must be a word of at most 63 characters");
    snprintf(h->name, sizeof h->name, "%s", name);
    yaml_node_t *m = yaml_document_get_node(&L->doc, pr->value);
    where(L, m, h->where);
    cbf_params *p;
    int rc = section(L, m, name, "cbf-array host", host_decls, N(host_decls), &p);
    if (rc)
        return rc;
    h->gpus = (int)cbf_params_int(p, "gpus");
    h->nic_gbps = cbf_params_float(p, "nic_gbps");
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", cbf_params_string(p, "roles"));
    for (char *save, *t = strtok_r(buf, ", ", &save); t && !rc; t = strtok_r(NULL, ", ", &save)) {
        static const char *const names[] = {"digitiser", "feng", "xeng", "beams"};
        int r = -1;
        for (int i = 0; i < N(names); i++)
            if (!strcmp(t, names[i]))
                r = i;
        if (r < 0) {
            const char *near = cbf_closest_name(t, names, N(names));
            rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: host '%s': unknown role '%s'%s%s%s (known: "
                               "digitiser, feng, xeng, beams)", cbf_params_where(p, "roles"), name, t,
                               near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
        } else {
            h->roles |= 1u << r;
        }
    }
    snprintf(buf, sizeof buf, "%s", cbf_params_string(p, "interfaces"));
    for (char *save, *t = strtok_r(buf, ", ", &save); t && !rc; t = strtok_r(NULL, ", ", &save)) {
        struct in_addr a;
        if (h->n_ifs == ARRAY_MAX_IFS || strlen(t) >= sizeof h->ifs[0] || inet_pton(AF_INET, t, &a) != 1)
            rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: host '%s': interfaces: '%s' is not an IPv4 address "
                               "(or more than %d)", cbf_params_where(p, "interfaces"), name, t, ARRAY_MAX_IFS);
        else
            snprintf(h->ifs[h->n_ifs++], sizeof h->ifs[0], "%s", t);
    }
    if (!rc && !h->roles)
        rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: host '%s': no roles", cbf_params_where(p, "roles"), name);
    if (!rc && !h->n_ifs)
        rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: host '%s': no interfaces",
                           cbf_params_where(p, "interfaces"), name);
    cbf_params_free(p);
    return rc;
}

static int budget(const char *path, array_budget *b, cbf_error *err)
{
    ld L = {.err = err};
    cbf_params *p = NULL;
    int rc = load(&L, path, "budget");
    if (!rc)
        rc = section(&L, yaml_document_get_root_node(&L.doc), "budget", "cbf-array budget", budget_decls,
                     N(budget_decls), &p);
    if (!rc) {
        snprintf(b->path, sizeof b->path, "%s", path);
        snprintf(b->gpu, sizeof b->gpu, "%s", cbf_params_string(p, "gpu"));
        b->pcie_h2d_gbs = cbf_params_float(p, "pcie_h2d_gbs");
        b->pcie_d2h_gbs = cbf_params_float(p, "pcie_d2h_gbs");
        b->feng_gsps = cbf_params_float(p, "feng_gsps");
        b->beam_tflops = cbf_params_float(p, "beam_tflops");
        b->n_corr = (int)cbf_params_len(p, "corr_ants");
        snprintf(b->where_pcie_h2d, ARRAY_WHERE, "%s", cbf_params_where(p, "pcie_h2d_gbs"));
        snprintf(b->where_pcie_d2h, ARRAY_WHERE, "%s", cbf_params_where(p, "pcie_d2h_gbs"));
        snprintf(b->where_feng, ARRAY_WHERE, "%s", cbf_params_where(p, "feng_gsps"));
        snprintf(b->where_corr, ARRAY_WHERE, "%s", cbf_params_where(p, "corr_tops"));
        snprintf(b->where_beam, ARRAY_WHERE, "%s", cbf_params_where(p, "beam_tflops"));
        if (b->n_corr < 1 || b->n_corr > ARRAY_MAX_CORR || cbf_params_len(p, "corr_tops") != (size_t)b->n_corr)
            rc = cbf_error_set(err, CBF_ECONFIG, "%s: budget: corr_tops needs one figure per corr_ants "
                               "entry (1 to %d)", b->where_corr, ARRAY_MAX_CORR);
        for (int i = 0; !rc && i < b->n_corr; i++) {
            b->corr_ants[i] = (double)cbf_params_int_at(p, "corr_ants", (size_t)i);
            b->corr_tops[i] = cbf_params_float_at(p, "corr_tops", (size_t)i);
            if (i && b->corr_ants[i] <= b->corr_ants[i - 1])
                rc = cbf_error_set(err, CBF_ECONFIG, "%s: budget: corr_ants must increase",
                                   cbf_params_where(p, "corr_ants"));
        }
    }
    cbf_params_free(p);
    if (L.loaded)
        yaml_document_delete(&L.doc);
    return rc;
}

static int read_array(ld *L, const yaml_node_t *m, array_desc *d)
{
    cbf_params *p;
    int rc = section(L, m, "array", "cbf-array", array_decls, N(array_decls), &p);
    if (rc)
        return rc;
    snprintf(d->name, sizeof d->name, "%s", cbf_params_string(p, "name"));
    d->antennas = (int)cbf_params_int(p, "antennas");
    d->channels = (int)cbf_params_int(p, "channels");
    d->adc_sample_rate = cbf_params_float(p, "adc_sample_rate");
    d->bits = (int)cbf_params_int(p, "bits");
    d->spectra_per_heap = (int)cbf_params_int(p, "spectra_per_heap");
    d->xengines = (int)cbf_params_int(p, "xengines");
    d->beams = (int)cbf_params_int(p, "beams");
    d->heaps_per_dump = (int)cbf_params_int(p, "heaps_per_dump");
    d->samples_per_chunk = (int)cbf_params_int(p, "samples_per_chunk");
    d->gain = cbf_params_float(p, "gain");
    d->fill = cbf_params_float(p, "fill");
    snprintf(d->where_xengines, ARRAY_WHERE, "%s", cbf_params_where(p, "xengines"));
    snprintf(d->where_beams, ARRAY_WHERE, "%s", cbf_params_where(p, "beams"));
    where(L, m, d->where_array);
    const char *b = cbf_params_string(p, "budget");
    if (d->samples_per_chunk % 4096)
        rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: array.samples_per_chunk: not a multiple of 4096",
                           cbf_params_where(p, "samples_per_chunk"));
    if (!rc && b[0]) {
        char dir[512], path[1024];
        snprintf(dir, sizeof dir, "%s", d->path);
        snprintf(path, sizeof path, "%s/%s", b[0] == '/' ? "" : dirname(dir), b);
        rc = budget(b[0] == '/' ? b : path, &d->budget, L->err);
        if (rc) {   /* a budget that cannot be read is a bad description too: exit 2 */
            cbf_error_prefix(L->err, "%s: array.budget", cbf_params_where(p, "budget"));
            rc = L->err->code = CBF_ECONFIG;
        }
        d->has_budget = !rc;
    }
    cbf_params_free(p);
    return rc;
}

static int read_rest(ld *L, const yaml_node_t *root, array_desc *d)
{
    cbf_params *p = NULL;
    const yaml_node_t *m = get(L, root, "multicast");
    if (!m)
        return fail(L, root, "section 'multicast' is missing (first group:port of digitiser, feng%s)",
                    d->beams ? ", beam" : "");
    int rc = section(L, m, "multicast", "cbf-array", mcast_decls, N(mcast_decls), &p);
    if (!rc)
        rc = group(p, "digitiser", &d->dig, L->err);
    if (!rc)
        rc = group(p, "feng", &d->feng, L->err);
    if (!rc && (d->beams || cbf_params_string(p, "beam")[0]))
        rc = group(p, "beam", &d->beam, L->err);
    cbf_params_free(p);
    p = NULL;
    if (!rc && (m = get(L, root, "simulate"))) {
        rc = section(L, m, "simulate", "cbf-array", sim_decls, N(sim_decls), &p);
        if (!rc) {
            d->digitisers = (int)cbf_params_int(p, "digitisers");
            d->length = (long long)cbf_params_int(p, "length");
            d->noise = cbf_params_float(p, "noise");
            d->tone_hz = cbf_params_float(p, "tone_hz");
            d->tone_amplitude = cbf_params_float(p, "tone_amplitude");
            d->delay_step = cbf_params_float(p, "delay_step");
            d->sim_rate_gbps = cbf_params_float(p, "rate_gbps");
            snprintf(d->where_digitisers, ARRAY_WHERE, "%s", cbf_params_where(p, "digitisers"));
            if (d->digitisers > d->antennas)
                rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: simulate.digitisers: %d is more than the %d "
                                   "antennas", cbf_params_where(p, "digitisers"), d->digitisers, d->antennas);
            if (!rc && d->length % d->samples_per_chunk)
                rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: simulate.length: not a multiple of "
                                   "array.samples_per_chunk (%d)", cbf_params_where(p, "length"),
                                   d->samples_per_chunk);
        }
        cbf_params_free(p);
        p = NULL;
    }
    if (!rc && (m = get(L, root, "sizing"))) {
        rc = section(L, m, "sizing", "cbf-array", sizing_decls, N(sizing_decls), &p);
        if (!rc) {
            d->has_sizing = 1;
            d->size_gpus_per_host = (int)cbf_params_int(p, "gpus_per_host");
            d->size_nics_per_host = (int)cbf_params_int(p, "nics_per_host");
            d->size_nic_gbps = cbf_params_float(p, "nic_gbps");
            where(L, m, d->where_sizing);
            const char *a = cbf_params_string(p, "first_interface");
            struct in_addr ia;
            if (a[0] && inet_pton(AF_INET, a, &ia) != 1)
                rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: sizing.first_interface: '%s' is not an IPv4 "
                                   "address", cbf_params_where(p, "first_interface"), a);
            else if (a[0])
                d->size_first_if = ntohl(ia.s_addr);
        }
        cbf_params_free(p);
    }
    if (!rc && (m = get(L, root, "hosts"))) {
        if (m->type != YAML_MAPPING_NODE)
            return fail(L, m, "'hosts' must be a mapping of host name to its settings");
        where(L, m, d->where_hosts);
        for (yaml_node_pair_t *pr = m->data.mapping.pairs.start; pr < m->data.mapping.pairs.top && !rc; pr++) {
            if (d->n_hosts == ARRAY_MAX_HOSTS)
                return fail(L, m, "more than %d hosts", ARRAY_MAX_HOSTS);
            rc = host(L, pr, &d->hosts[d->n_hosts]);
            for (int i = 0; !rc && i < d->n_hosts; i++)
                if (!strcmp(d->hosts[i].name, d->hosts[d->n_hosts].name))
                    rc = fail(L, yaml_document_get_node(&L->doc, pr->key), "host '%s' is given twice (first at %s)",
                              d->hosts[i].name, d->hosts[i].where);
            d->n_hosts++;
        }
    }
    return rc;
}

int array_desc_load(const char *path, array_desc *d, cbf_error *err)
{
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", path);
    ld L = {.err = err};
    int rc = load(&L, path, "array description");
    const yaml_node_t *root = rc ? NULL : yaml_document_get_root_node(&L.doc), *m;
    if (!rc) {
        where(&L, root, d->where_root);
        snprintf(d->where_hosts, ARRAY_WHERE, "%s", d->where_root);   /* until a 'hosts' section */
        rc = top_keys(&L, root);
    }
    if (!rc && !(m = get(&L, root, "array")))
        rc = fail(&L, root, "section 'array' is missing (antennas, channels, xengines, ...)");
    if (!rc)
        rc = read_array(&L, m, d);
    if (!rc)
        rc = read_rest(&L, root, d);
    if (L.loaded)
        yaml_document_delete(&L.doc);
    return rc;
}
