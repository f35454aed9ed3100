/* config.c: cbf-controller's configuration file (config.h), section by
 * section through libcbf's parameter validation (tools/array/yamldoc.c),
 * then the checks that span keys: ranges that parse and do not overlap,
 * back-off limits in order, and for the local launcher hosts that are this
 * machine. */
#include <arpa/inet.h>
#include <errno.h>
#include <libgen.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "yamldoc.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define MAX_GROUPS 65536   /* a range's groups are tracked one byte each */

static const cbf_param_decl controller_decls[] = {
    {"launcher", CBF_PARAM_CHOICE, "local", CBF_NORANGE, "local|systemd|slurm",
     "how engines start: child processes here, cbf@ units, or srun steps"},
    {"cbf_run", CBF_PARAM_STRING, "cbf-run", CBF_NORANGE, NULL, "the cbf-run each engine runs (PATH without a '/')"},
    {"cbf_run_args", CBF_PARAM_STRING, "", CBF_NORANGE, NULL, "more cbf-run arguments, separated by spaces"},
    {"state_dir", CBF_PARAM_STRING, "cbf-controller", CBF_NORANGE, NULL,
     "a folder per product: its pipelines and its engines' logs"},
    {"start_timeout", CBF_PARAM_FLOAT, "60", CBF_RANGE(0.1, 3600), NULL,
     "seconds an engine has to open its katcp port"},
    {"stop_timeout", CBF_PARAM_FLOAT, "30", CBF_RANGE(0, 3600), NULL,
     "seconds from SIGTERM (cbf-run drains) to SIGKILL"},
    {"jones_per_batch", CBF_PARAM_INT, "1048576", CBF_RANGE(1, 1 << 30), NULL,
     "complex values per input in an F-engine heap (katgpucbf's --jones-per-batch): spectra per heap is this / "
     "n_chans; lower it by the factor a simulated band is slowed by, so that heaps last as long as in real time"},
    {"dsim_threads", CBF_PARAM_INT, "1", CBF_RANGE(1, 64), NULL,
     "threads each simulated digitiser computes its samples with (cbf-array's simulate.threads): one was "
     "83-90 % busy at 26.75 Msample/s per pol (1/64 of L-band) with the qualification suite's signals"},
    {"rx_reorder_tol", CBF_PARAM_FLOAT, ARRAY_RX_REORDER_TOL, CBF_RANGE(0, 60), NULL,
     "seconds an F-engine heap may arrive behind the newest and still be placed by the X-engines "
     "(katgpucbf's --rx-reorder-tol, 2^29 samples at L-band; cbf-array's array.rx_reorder_tol)"},
};
static const cbf_param_decl ranges_decls[] = {
    {"multicast", CBF_PARAM_STRING, "239.102.0.0-239.102.255.255", CBF_NORANGE, NULL,
     "multicast groups for products: FIRST-LAST or A.B.C.D/BITS"},
    {"udp_ports", CBF_PARAM_STRING, "7148-9147", CBF_NORANGE, NULL, "UDP ports of the products' streams"},
    {"engine_katcp", CBF_PARAM_STRING, "5100-5999", CBF_NORANGE, NULL, "engines' katcp (TCP) ports"},
    {"product_katcp", CBF_PARAM_STRING, "5002-5099", CBF_NORANGE, NULL, "product controllers' katcp ports"},
};
static const cbf_param_decl restart_decls[] = {
    {"initial", CBF_PARAM_FLOAT, "1", CBF_RANGE(0.001, 3600), NULL, "seconds before the first restart"},
    {"max", CBF_PARAM_FLOAT, "60", CBF_RANGE(0.001, 86400), NULL, "the longest wait (doubling up to it)"},
    {"reset_after", CBF_PARAM_FLOAT, "60", CBF_RANGE(0, 86400), NULL,
     "an engine up this long starts again from the initial wait"},
};
static const cbf_param_decl systemd_decls[] = {
    {"confdir", CBF_PARAM_STRING, "/etc/cbf", CBF_NORANGE, NULL, "cbf@.service's CONFDIR: INSTANCE.yaml goes here"},
    {"unit", CBF_PARAM_STRING, "cbf", CBF_NORANGE, NULL, "the template unit's name (UNIT@INSTANCE)"},
    {"systemctl", CBF_PARAM_STRING, "systemctl", CBF_NORANGE, NULL, "the systemctl program"},
    {"scp", CBF_PARAM_STRING, "scp", CBF_NORANGE, NULL, "copies a pipeline to another host's confdir"},
    {"poll", CBF_PARAM_FLOAT, "1", CBF_RANGE(0.01, 3600), NULL, "seconds between reads of each unit's state"},
};
static const cbf_param_decl slurm_decls[] = {
    {"srun", CBF_PARAM_STRING, "srun", CBF_NORANGE, NULL, "the srun program"},
    {"args", CBF_PARAM_STRING, "", CBF_NORANGE, NULL, "more srun arguments (partition, account), separated by spaces"},
};

const char *cbf_launcher_name(cbf_launcher_kind k)
{
    return k == CBF_LAUNCHER_SYSTEMD ? "systemd" : k == CBF_LAUNCHER_SLURM ? "slurm" : "local";
}

const array_host *cbf_controller_host(const cbf_controller_config *c, const char *name)
{
    for (int i = 0; i < c->n_hosts; i++)
        if (!strcmp(c->hosts[i].name, name))
            return &c->hosts[i];
    return NULL;
}

/* s into dst, relative to the configuration file's folder when it is a
 * relative path (and, for a program, names a path: one with a '/'). */
/* A path of the configuration, in full: relative ones from the
 * configuration's folder, or without one from the working folder (engines
 * run in their product's folder, where a relative path means another place). */
static void path_of(const cbf_controller_config *c, const char *s, int program, char *dst, size_t n)
{
    if (s[0] == '/' || (program && !strchr(s, '/'))) {
        snprintf(dst, n, "%s", s);
        return;
    }
    char dir[512];
    if (c->path[0])
        snprintf(dir, sizeof dir, "%s", c->path);
    else if (!getcwd(dir, sizeof dir - 2))
        snprintf(dir, sizeof dir, ".");
    else
        strcat(dir, "/.");   /* dirname() below keeps the working folder */
    snprintf(dst, n, "%s/%s", dirname(dir), s);
}

static int parse_ipv4(const char *s, unsigned *a)
{
    struct in_addr ia;
    if (inet_pton(AF_INET, s, &ia) != 1)
        return -1;
    *a = ntohl(ia.s_addr);
    return 0;
}

/* "FIRST-LAST" (ports, or groups), or for groups "A.B.C.D/BITS". */
static int range(const cbf_params *p, const char *key, int groups, cbf_range *r, cbf_error *err)
{
    const char *s = cbf_params_string(p, key), *where = cbf_params_where(p, key);
    snprintf(r->where, sizeof r->where, "%s", where);
    char a[64] = "", b[64] = "";
    const char *dash = strchr(s, '-'), *slash = groups ? strchr(s, '/') : NULL;
    const char *sep = dash ? dash : slash;
    if (!sep || (size_t)(sep - s) >= sizeof a || strlen(sep + 1) >= sizeof b)
        return cbf_error_set(err, CBF_ECONFIG, "%s: ranges.%s: expected %s, got '%s'", where, key,
                             groups ? "FIRST-LAST or A.B.C.D/BITS" : "FIRST-LAST", s);
    memcpy(a, s, (size_t)(sep - s));
    snprintf(b, sizeof b, "%s", sep + 1);
    char *end;
    if (groups) {
        unsigned lo, hi;
        long bits = slash ? strtol(b, &end, 10) : 0;
        if (parse_ipv4(a, &lo) || (slash ? (*end || bits < 4 || bits > 32) : parse_ipv4(b, &hi)))
            return cbf_error_set(err, CBF_ECONFIG, "%s: ranges.%s: '%s' is not a range of IPv4 groups", where,
                                 key, s);
        if (slash) {
            unsigned mask = bits == 32 ? ~0u : ~(~0u >> bits);
            lo &= mask;
            hi = lo | ~mask;
        }
        if ((lo >> 28) != 0xe || (hi >> 28) != 0xe || hi < lo)
            return cbf_error_set(err, CBF_ECONFIG, "%s: ranges.%s: '%s' is not a range of multicast groups "
                                 "(224.0.0.0 to 239.255.255.255, first to last)", where, key, s);
        if (hi - lo >= MAX_GROUPS)
            return cbf_error_set(err, CBF_ECONFIG, "%s: ranges.%s: '%s' holds %u groups; at most %d", where,
                                 key, s, hi - lo + 1, MAX_GROUPS);
        r->first = lo;
        r->last = hi;
        return 0;
    }
    long lo = strtol(a, &end, 10);
    int bad = *end || !a[0];
    long hi = strtol(b, &end, 10);
    if (bad || *end || !b[0] || lo < 1 || hi > 65535 || hi < lo)
        return cbf_error_set(err, CBF_ECONFIG, "%s: ranges.%s: '%s' is not a range of ports (1 to 65535, "
                             "first to last)", where, key, s);
    r->first = (unsigned)lo;
    r->last = (unsigned)hi;
    return 0;
}

int cbf_address_is_local(const char *a)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    if (inet_pton(AF_INET, a, &sa.sin_addr) != 1)
        return 0;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

/* Each section's reader gets its values checked against its declarations
 * (an absent section: every default). */
static int read_controller(const cbf_params *p, cbf_controller_config *c, cbf_error *err)
{
    (void)err;
    const char *l = cbf_params_string(p, "launcher");
    c->launcher = !strcmp(l, "systemd") ? CBF_LAUNCHER_SYSTEMD : !strcmp(l, "slurm") ? CBF_LAUNCHER_SLURM
                                                                                     : CBF_LAUNCHER_LOCAL;
    snprintf(c->where_launcher, sizeof c->where_launcher, "%s", cbf_params_where(p, "launcher"));
    path_of(c, cbf_params_string(p, "cbf_run"), 1, c->cbf_run, sizeof c->cbf_run);
    snprintf(c->cbf_run_args, sizeof c->cbf_run_args, "%s", cbf_params_string(p, "cbf_run_args"));
    path_of(c, cbf_params_string(p, "state_dir"), 0, c->state_dir, sizeof c->state_dir);
    c->start_timeout = cbf_params_float(p, "start_timeout");
    c->jones_per_batch = (int)cbf_params_int(p, "jones_per_batch");
    c->rx_reorder_tol = cbf_params_float(p, "rx_reorder_tol");
    c->dsim_threads = (int)cbf_params_int(p, "dsim_threads");
    c->stop_timeout = cbf_params_float(p, "stop_timeout");
    return 0;
}

static int overlap(const cbf_range *a, const cbf_range *b)
{
    return a->first <= b->last && b->first <= a->last;
}

static int read_ranges(const cbf_params *p, cbf_controller_config *c, cbf_error *err)
{
    int rc;
    if (!(rc = range(p, "multicast", 1, &c->groups, err)) && !(rc = range(p, "udp_ports", 0, &c->udp_ports, err)) &&
        !(rc = range(p, "engine_katcp", 0, &c->engine_katcp, err)) &&
        !(rc = range(p, "product_katcp", 0, &c->product_katcp, err)) && overlap(&c->engine_katcp, &c->product_katcp))
        rc = cbf_error_set(err, CBF_ECONFIG, "%s: ranges.product_katcp: overlaps ranges.engine_katcp (%s): "
                           "both are TCP ports of this controller's hosts", c->product_katcp.where,
                           c->engine_katcp.where);
    return rc;
}

static int read_restart(const cbf_params *p, cbf_controller_config *c, cbf_error *err)
{
    c->restart_initial = cbf_params_float(p, "initial");
    c->restart_max = cbf_params_float(p, "max");
    c->restart_reset = cbf_params_float(p, "reset_after");
    if (c->restart_max < c->restart_initial)
        return cbf_error_set(err, CBF_ECONFIG, "%s: restart.max: %g s is less than restart.initial (%g s)",
                             cbf_params_where(p, "max"), c->restart_max, c->restart_initial);
    return 0;
}

static int read_systemd(const cbf_params *p, cbf_controller_config *c, cbf_error *err)
{
    (void)err;
    path_of(c, cbf_params_string(p, "confdir"), 0, c->systemd_confdir, sizeof c->systemd_confdir);
    snprintf(c->systemd_unit, sizeof c->systemd_unit, "%s", cbf_params_string(p, "unit"));
    snprintf(c->systemctl, sizeof c->systemctl, "%s", cbf_params_string(p, "systemctl"));
    snprintf(c->scp, sizeof c->scp, "%s", cbf_params_string(p, "scp"));
    c->systemd_poll = cbf_params_float(p, "poll");
    return 0;
}

static int read_slurm(const cbf_params *p, cbf_controller_config *c, cbf_error *err)
{
    (void)err;
    snprintf(c->srun, sizeof c->srun, "%s", cbf_params_string(p, "srun"));
    snprintf(c->srun_args, sizeof c->srun_args, "%s", cbf_params_string(p, "args"));
    return 0;
}

typedef struct section {
    const char *name;
    const cbf_param_decl *decls;
    int n_decls;
    int (*read)(const cbf_params *, cbf_controller_config *, cbf_error *);
} section;

static int read_all(array_yaml *L, const yaml_node_t *root, cbf_controller_config *c)
{
    static const section sections[] = {
        {"controller", controller_decls, N(controller_decls), read_controller},
        {"ranges", ranges_decls, N(ranges_decls), read_ranges},
        {"restart", restart_decls, N(restart_decls), read_restart},
        {"systemd", systemd_decls, N(systemd_decls), read_systemd},
        {"slurm", slurm_decls, N(slurm_decls), read_slurm},
    };
    static const char *const names[] = {"controller", "ranges", "restart", "systemd", "slurm", "hosts"};
    int rc = root ? array_yaml_known_sections(L, root, names, N(names)) : 0;
    yaml_node_t empty = {.type = YAML_MAPPING_NODE};   /* a section not given: its defaults */
    for (int i = 0; !rc && i < N(sections); i++) {
        const yaml_node_t *m = root ? array_yaml_get(L, root, sections[i].name) : NULL;
        cbf_params *p = NULL;
        rc = array_yaml_section(L, m ? m : &empty, sections[i].name, "cbf-controller", sections[i].decls,
                                sections[i].n_decls, &p);
        if (!rc)
            rc = sections[i].read(p, c, L->err);
        cbf_params_free(p);
    }
    if (!rc && !(root && array_yaml_get(L, root, "ranges"))) {   /* name a default as one, not as a place */
        cbf_range *r[] = {&c->groups, &c->udp_ports, &c->engine_katcp, &c->product_katcp};
        for (int i = 0; i < N(r); i++)
            snprintf(r[i]->where, sizeof r[i]->where, "(a default: no 'ranges' section)");
    }
    const yaml_node_t *h = root ? array_yaml_get(L, root, "hosts") : NULL;
    if (!rc && h)
        rc = array_yaml_hosts(L, h, c->hosts, &c->n_hosts, c->where_hosts);
    return rc;
}

/* The host of a configuration that names none: this machine, over loopback. */
static void default_host(cbf_controller_config *c)
{
    array_host *h = &c->hosts[0];
    memset(h, 0, sizeof *h);
    snprintf(h->name, sizeof h->name, "localhost");
    h->roles = ROLE_DIGITISER | ROLE_FENG | ROLE_XENG | ROLE_BEAMS;
    snprintf(h->ifs[0], sizeof h->ifs[0], "127.0.0.1");
    h->n_ifs = 1;
    h->nic_gbps = 10;   /* loopback multicast on one machine: a modest figure, so a product too fast is refused */
    snprintf(h->control, sizeof h->control, "127.0.0.1");
    snprintf(h->where, sizeof h->where, "(the default host)");
    c->n_hosts = 1;
}

/* The local launcher starts every engine as a child of this process: a
 * host's addresses must be here, or in the network namespace it names
 * (whose addresses this process cannot see, and does not check). */
static int check_local(const cbf_controller_config *c, cbf_error *err)
{
    for (int i = 0; i < c->n_hosts; i++) {
        const array_host *h = &c->hosts[i];
        if (h->netns[0])
            continue;
        const char *bad = cbf_address_is_local(h->control) ? NULL : h->control;
        for (int k = 0; !bad && k < h->n_ifs; k++)
            bad = cbf_address_is_local(h->ifs[k]) ? NULL : h->ifs[k];
        if (bad)
            return cbf_error_set(err, CBF_ECONFIG, "%s: host '%s': %s is not an address of this machine, and "
                                 "launcher local (%s) runs every engine here (systemd or slurm run them "
                                 "elsewhere)", h->where, h->name, bad, c->where_launcher);
    }
    return 0;
}

int cbf_controller_config_load(const char *path, cbf_controller_config **out, cbf_error *err)
{
    *out = NULL;
    cbf_controller_config *c = calloc(1, sizeof *c);
    if (!c)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    snprintf(c->path, sizeof c->path, "%s", path ? path : "");
    snprintf(c->where_launcher, sizeof c->where_launcher, "(the default)");
    snprintf(c->where_hosts, sizeof c->where_hosts, "(the default host)");
    array_yaml L = {.err = err, .path = "(defaults)"};
    int rc = path ? array_yaml_load(&L, path, "cbf-controller configuration") : 0;
    if (!rc)
        rc = read_all(&L, path ? array_yaml_root(&L) : NULL, c);
    array_yaml_free(&L);
    if (!rc && !c->n_hosts)
        default_host(c);
    if (!rc && c->launcher == CBF_LAUNCHER_LOCAL)
        rc = check_local(c, err);
    if (rc) {
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void cbf_controller_config_free(cbf_controller_config *c)
{
    free(c);
}
