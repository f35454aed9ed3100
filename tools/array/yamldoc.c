/* yamldoc.c: YAML files of sections checked by libcbf's parameter
 * validation (yamldoc.h): loading, places, sections and the `hosts`
 * section that cbf-array's descriptions and cbf-controller's configuration
 * share. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "yamldoc.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const cbf_param_decl host_decls[] = {
    {"roles", CBF_PARAM_STRING, NULL, CBF_NORANGE, NULL, "comma-separated: digitiser, feng, xeng, beams"},
    {"gpus", CBF_PARAM_INT, "0", CBF_RANGE(0, 64), NULL, "GPUs; 0: engines on the CPU"},
    {"interfaces", CBF_PARAM_STRING, NULL, CBF_NORANGE, NULL, "comma-separated addresses, one per NIC"},
    {"nic_gbps", CBF_PARAM_FLOAT, NULL, CBF_RANGE(0.001, 1e5), NULL, "each NIC's rate"},
    {"control", CBF_PARAM_STRING, "", CBF_NORANGE, NULL,
     "address the engines' katcp ports bind on this host (array.katcp); default 127.0.0.1"},
    {"netns", CBF_PARAM_STRING, "", CBF_NORANGE, NULL,
     "a network namespace standing for this host on one machine: cbf-controller's local launcher runs its "
     "engines in it (ip netns exec); \"\": none"},
};

void array_yaml_where(const array_yaml *L, const yaml_node_t *n, char *buf)
{
    snprintf(buf, CBF_WHERE_MAX, "%s:%zu:%zu", L->path, n->start_mark.line + 1, n->start_mark.column + 1);
}

int array_yaml_fail(const array_yaml *L, const yaml_node_t *n, const char *fmt, ...)
{
    char at[CBF_WHERE_MAX], msg[CBF_ERROR_MSG_MAX];
    array_yaml_where(L, n, at);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cbf_error_set(L->err, CBF_ECONFIG, "%s: %s", at, msg);
}

const char *array_yaml_scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

int array_yaml_load(array_yaml *L, const char *path, const char *what)
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

void array_yaml_free(array_yaml *L)
{
    if (L->loaded)
        yaml_document_delete(&L->doc);
    L->loaded = 0;
}

yaml_node_t *array_yaml_root(array_yaml *L)
{
    return yaml_document_get_root_node(&L->doc);
}

int array_yaml_section(array_yaml *L, const yaml_node_t *m, const char *node, const char *kind,
                       const cbf_param_decl *decls, int n_decls, cbf_params **out)
{
    if (m->type != YAML_MAPPING_NODE)
        return array_yaml_fail(L, m, "'%s' must be a mapping", node);
    size_t n = (size_t)(m->data.mapping.pairs.top - m->data.mapping.pairs.start);
    cbf_kv *kv = calloc(n ? n : 1, sizeof *kv);
    if (!kv)
        return cbf_error_set(L->err, CBF_ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        yaml_node_pair_t *pr = m->data.mapping.pairs.start + i;
        yaml_node_t *k = yaml_document_get_node(&L->doc, pr->key);
        if (!array_yaml_scalar(k)) {
            rc = array_yaml_fail(L, k, "keys of '%s' must be plain scalars", node);
            break;
        }
        kv[i].key = array_yaml_scalar(k);
        kv[i].doc = &L->doc;
        kv[i].value = yaml_document_get_node(&L->doc, pr->value);
        array_yaml_where(L, k, kv[i].key_where);
        array_yaml_where(L, kv[i].value, kv[i].where);
    }
    char node_where[CBF_WHERE_MAX];
    array_yaml_where(L, m, node_where);
    cbf_params_ctx ctx = {.file = L->path, .node = node, .node_where = node_where, .plugin = kind};
    if (!rc)
        rc = cbf_params_build(decls, n_decls, kv, n, &ctx, out, L->err);
    free(kv);
    return rc;
}

const yaml_node_t *array_yaml_get(array_yaml *L, const yaml_node_t *m, const char *key)
{
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *k = array_yaml_scalar(yaml_document_get_node(&L->doc, p->key));
        if (k && !strcmp(k, key))
            return yaml_document_get_node(&L->doc, p->value);
    }
    return NULL;
}

int array_yaml_known_sections(array_yaml *L, const yaml_node_t *root, const char *const *keys, int n)
{
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(&L->doc, p->key);
        const char *s = array_yaml_scalar(k);
        int known = 0;
        for (int i = 0; i < n && s; i++)
            known |= !strcmp(s, keys[i]);
        if (known)
            continue;
        const char *near = s ? cbf_closest_name(s, keys, (size_t)n) : NULL;
        char h[96] = "", list[512] = "";
        if (near)
            snprintf(h, sizeof h, " (did you mean '%s'?)", near);
        for (int i = 0; i < n; i++) {
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", keys[i]);
        }
        return array_yaml_fail(L, k, "unknown section '%s'%s (known: %s)", s ? s : "?", h, list);
    }
    return 0;
}

static int ipv4(const char *s)
{
    struct in_addr a;
    return inet_pton(AF_INET, s, &a) == 1;
}

static int host(array_yaml *L, const yaml_node_pair_t *pr, array_host *h)
{
    memset(h, 0, sizeof *h);
    yaml_node_t *k = yaml_document_get_node(&L->doc, pr->key);
    const char *name = array_yaml_scalar(k);
    if (!name || !name[0] || strlen(name) >= sizeof h->name || strpbrk(name, " /\t"))
        return array_yaml_fail(L, k, "a host name must be a word of at most 63 characters");
    snprintf(h->name, sizeof h->name, "%s", name);
    yaml_node_t *m = yaml_document_get_node(&L->doc, pr->value);
    array_yaml_where(L, m, h->where);
    cbf_params *p;
    int rc = array_yaml_section(L, m, name, "cbf-array host", host_decls, N(host_decls), &p);
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
        if (h->n_ifs == ARRAY_MAX_IFS || strlen(t) >= sizeof h->ifs[0] || !ipv4(t))
            rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: host '%s': interfaces: '%s' is not an IPv4 address "
                               "(or more than %d)", cbf_params_where(p, "interfaces"), name, t, ARRAY_MAX_IFS);
        else
            snprintf(h->ifs[h->n_ifs++], sizeof h->ifs[0], "%s", t);
    }
    const char *control = cbf_params_string(p, "control");
    if (!rc && control[0] && (strlen(control) >= sizeof h->control || !ipv4(control)))
        rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: host '%s': control: '%s' is not an IPv4 address",
                           cbf_params_where(p, "control"), name, control);
    snprintf(h->control, sizeof h->control, "%s", rc || !control[0] ? "127.0.0.1" : control);
    const char *netns = cbf_params_string(p, "netns");
    if (!rc && (strlen(netns) >= sizeof h->netns || strpbrk(netns, " /\t")))
        rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: host '%s': netns: '%s' is not a namespace's name",
                           cbf_params_where(p, "netns"), name, netns);
    snprintf(h->netns, sizeof h->netns, "%s", rc ? "" : netns);
    if (!rc && !h->roles)
        rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: host '%s': no roles", cbf_params_where(p, "roles"), name);
    if (!rc && !h->n_ifs)
        rc = cbf_error_set(L->err, CBF_ECONFIG, "%s: host '%s': no interfaces",
                           cbf_params_where(p, "interfaces"), name);
    cbf_params_free(p);
    return rc;
}

int array_yaml_hosts(array_yaml *L, const yaml_node_t *m, array_host *hosts, int *n, char *where)
{
    if (m->type != YAML_MAPPING_NODE)
        return array_yaml_fail(L, m, "'hosts' must be a mapping of host name to its settings");
    array_yaml_where(L, m, where);
    *n = 0;
    int rc = 0;
    for (yaml_node_pair_t *pr = m->data.mapping.pairs.start; pr < m->data.mapping.pairs.top && !rc; pr++) {
        if (*n == ARRAY_MAX_HOSTS)
            return array_yaml_fail(L, m, "more than %d hosts", ARRAY_MAX_HOSTS);
        rc = host(L, pr, &hosts[*n]);
        for (int i = 0; !rc && i < *n; i++)
            if (!strcmp(hosts[i].name, hosts[*n].name))
                rc = array_yaml_fail(L, yaml_document_get_node(&L->doc, pr->key),
                                     "host '%s' is given twice (first at %s)", hosts[i].name, hosts[i].where);
        (*n)++;
    }
    return rc;
}
