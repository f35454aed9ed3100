/* registry.c: finding and loading stage plugins.
 *
 * Search tiers, highest first: (0) directories given by the caller or the
 * YAML engine.plugin_path, (1) $CBF_PLUGIN_PATH, (2) <exe>/../../plugins,
 * (3) the build tree's plugins (only when this libcbf is that build's),
 * (4) the installed plugin directory. Two plugins of one name in the same
 * tier are an error naming both files, except that a file directly in a
 * directory named outranks one in a subfolder of it (with a note): a plugin
 * built with make in $PWD and with meson in $PWD/build, then run with
 * CBF_PLUGIN_PATH=$PWD, is the one in $PWD. Across tiers the higher tier wins,
 * as with $PATH, so a developer's build tree or $CBF_PLUGIN_PATH can stand
 * in front of an installed copy without removing it. The same file reached
 * through two directories (a symlink, the build tree found two ways) is one
 * plugin. A broken file (not loadable, no entry symbol, wrong ABI, invalid
 * declarations) is always an error: an instrument must not start with a
 * plugin silently missing. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cbf/graph.h"
#include "cbf/log.h"
#include "params_priv.h"

enum { TIER_GIVEN, TIER_ENV, TIER_EXE, TIER_BUILD, TIER_INSTALLED };

typedef struct entry {
    const cbf_plugin_desc *desc;
    char *path;
    char *real;
    void *handle;
    int tier;
    int depth;      /* 0: directly in a directory searched; 1: in a subfolder */
} entry;

typedef struct list {
    entry *e;
    size_t n, cap;
} list;

struct cbf_registry {
    list live;      /* what find/at see */
    list hidden;    /* shadowed by a higher tier; kept open since a graph may point into them */
    char **dirs;    /* real paths of directories already scanned */
    size_t n_dirs;
};

static int list_push(list *l, entry e)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        entry *ne = realloc(l->e, cap * sizeof *ne);
        if (!ne)
            return -1;
        l->e = ne;
        l->cap = cap;
    }
    l->e[l->n++] = e;
    return 0;
}

static void entry_free(entry *e)
{
    if (e->handle)
        dlclose(e->handle);
    free(e->path);
    free(e->real);
}

static int seen_file(const cbf_registry *r, const char *real)
{
    for (size_t i = 0; i < r->live.n; i++)
        if (!strcmp(r->live.e[i].real, real))
            return 1;
    for (size_t i = 0; i < r->hidden.n; i++)
        if (!strcmp(r->hidden.e[i].real, real))
            return 1;
    return 0;
}

bool cbf_port_type_accepts(const char *takes, const char *gives)
{
    if (!strcmp(takes, "*"))
        return true;
    size_t n = strlen(gives);
    for (const char *s = takes;;) {
        size_t len = strcspn(s, "|");
        if (len == n && !strncmp(s, gives, n))
            return true;
        if (!s[len])
            return false;
        s += len + 1;
    }
}

/* Alternatives "a|b": none empty, none "*" (a "*" alone means any). An
 * input takes any of them; an output gives one of them, named in init by
 * its descriptor's `type` (cbf/port.h). */
static int check_type(const cbf_port_decl *p, cbf_error *err)
{
    if (!strchr(p->type, '|'))
        return 0;
    for (const char *s = p->type;;) {
        size_t len = strcspn(s, "|");
        if (!len || (len == 1 && *s == '*'))
            return cbf_error_set(err, CBF_EPLUGIN,
                                 "port '%s': type '%s' has an empty or '*' alternative", p->name, p->type);
        if (!s[len])
            return 0;
        s += len + 1;
    }
}

static int check_ports(const cbf_plugin_desc *d, cbf_error *err)
{
    if (d->n_ports < 0 || (d->n_ports > 0 && !d->ports))
        return cbf_error_set(err, CBF_EPLUGIN, "port table: %d entries at %p", d->n_ports,
                             (const void *)d->ports);
    for (int i = 0; i < d->n_ports; i++) {
        const cbf_port_decl *p = &d->ports[i];
        if (!p->name || !p->name[0] || strchr(p->name, '.'))
            return cbf_error_set(err, CBF_EPLUGIN, "port %d has an invalid name '%s'", i,
                                 p->name ? p->name : "(null)");
        for (int j = 0; j < i; j++)
            if (!strcmp(d->ports[j].name, p->name))
                return cbf_error_set(err, CBF_EPLUGIN, "port '%s' is declared twice", p->name);
        if (p->dir != CBF_PORT_IN && p->dir != CBF_PORT_OUT)
            return cbf_error_set(err, CBF_EPLUGIN, "port '%s': unknown direction %d", p->name,
                                 (int)p->dir);
        if (!p->type || !p->type[0])
            return cbf_error_set(err, CBF_EPLUGIN, "port '%s' has no buffer type", p->name);
        if (p->dir == CBF_PORT_OUT && !strcmp(p->type, "*"))
            return cbf_error_set(err, CBF_EPLUGIN,
                                 "output port '%s' has type '*', which only an input may have", p->name);
        if (p->dir == CBF_PORT_OUT && p->multi)
            return cbf_error_set(err, CBF_EPLUGIN,
                                 "output port '%s' is marked multi, which only an input may be", p->name);
        if (p->flags & ~CBF_PORT_WRITES_INPUT)
            return cbf_error_set(err, CBF_EPLUGIN, "port '%s': unknown flags 0x%x", p->name,
                                 p->flags & ~CBF_PORT_WRITES_INPUT);
        if (p->dir == CBF_PORT_OUT && (p->flags & CBF_PORT_WRITES_INPUT))
            return cbf_error_set(err, CBF_EPLUGIN,
                                 "output port '%s' is marked writes-input, which only an input may be", p->name);
        int rc = check_type(p, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* Names the core answers itself (frontends/zmq.c) or reads from a request. */
static const char *const reserved[] = {"requests", "sensors", "log-level", "shutdown", "request", "node"};

static int check_requests(const cbf_plugin_desc *d, cbf_error *err)
{
    if (d->n_requests < 0 || (d->n_requests && !d->requests))
        return cbf_error_set(err, CBF_EPLUGIN, "n_requests %d without a requests table", d->n_requests);
    if (d->n_requests && !d->request)
        return cbf_error_set(err, CBF_EPLUGIN, "declares requests but has no request function");
    for (int i = 0; i < d->n_requests; i++) {
        const cbf_request_decl *r = &d->requests[i];
        bool ok = r->name && r->name[0];
        for (const char *c = r->name; ok && *c; c++)
            ok = (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_';
        if (!ok)
            return cbf_error_set(err, CBF_EPLUGIN, "request name '%s' is not lower-case letters, digits, "
                                 "'-' and '_'", r->name ? r->name : "(null)");
        for (size_t k = 0; k < sizeof reserved / sizeof reserved[0]; k++)
            if (!strcmp(r->name, reserved[k]))
                return cbf_error_set(err, CBF_EPLUGIN, "request name '%s' is reserved for the core", r->name);
        for (int j = 0; j < i; j++)
            if (!strcmp(d->requests[j].name, r->name))
                return cbf_error_set(err, CBF_EPLUGIN, "request '%s' is declared twice", r->name);
        int rc = cbf_params_check_decls(r->args, r->n_args, err);
        if (rc)
            return cbf_error_prefix(err, "request '%s'", r->name);
        for (int j = 0; j < r->n_args; j++) {
            if (r->args[j].type == CBF_PARAM_RECORDS)
                return cbf_error_set(err, CBF_EPLUGIN, "request '%s': argument '%s': records are not "
                                     "accepted in requests", r->name, r->args[j].name);
            if (!strcmp(r->args[j].name, "request") || !strcmp(r->args[j].name, "node"))
                return cbf_error_set(err, CBF_EPLUGIN, "request '%s': argument name '%s' is reserved",
                                     r->name, r->args[j].name);
        }
    }
    return 0;
}

int cbf_registry_check_desc(const cbf_plugin_desc *d, cbf_error *err)
{
    if (d->abi != CBF_PLUGIN_ABI)
        return cbf_error_set(err, CBF_EPLUGIN,
                             "plugin ABI %u found, ABI %u expected (rebuild it against this libcbf)",
                             d->abi, CBF_PLUGIN_ABI);
    if (!d->name || !d->name[0])
        return cbf_error_set(err, CBF_EPLUGIN, "descriptor has no name");
    if (!d->run)
        return cbf_error_set(err, CBF_EPLUGIN, "plugin '%s' has no run function", d->name);
    int rc = cbf_params_check_decls(d->params, d->n_params, err);
    if (!rc)
        rc = check_ports(d, err);
    if (!rc)
        rc = check_requests(d, err);
    if (rc)
        cbf_error_prefix(err, "plugin '%s'", d->name);
    return rc;
}

/* Loads one file; *desc_out stays NULL when the file was already known. */
static int open_plugin(const char *path, entry *out, cbf_error *err)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return cbf_error_set(err, CBF_EPLUGIN, "cannot load: %s", dlerror());
    dlerror();
    void *sym = dlsym(h, CBF_PLUGIN_ENTRY_SYMBOL);
    if (!sym) {
        dlclose(h);
        return cbf_error_set(err, CBF_EPLUGIN,
                             "no entry symbol '%s' (a plugin ends with CBF_PLUGIN_DEFINE(desc))",
                             CBF_PLUGIN_ENTRY_SYMBOL);
    }
    cbf_plugin_entry_fn fn;
    memcpy(&fn, &sym, sizeof fn);   /* object to function pointer, as POSIX allows */
    const cbf_plugin_desc *d = fn();
    int rc = 0;
    if (!d)
        rc = cbf_error_set(err, CBF_EPLUGIN, "%s() returned NULL", CBF_PLUGIN_ENTRY_SYMBOL);
    else
        rc = cbf_registry_check_desc(d, err);
    if (rc) {
        dlclose(h);
        return rc;
    }
    out->desc = d;
    out->handle = h;
    return 0;
}

/* Two entries of one name in one tier: the shallower wins, the same depth
 * is ambiguous. Returns the loser, or NULL with err set. */
static entry *same_tier_loser(entry *old, entry *e, cbf_error *err)
{
    if (old->depth == e->depth) {
        cbf_error_set(err, CBF_EPLUGIN,
                      "plugin '%s' is defined twice: '%s' and '%s' (remove one, or name only "
                      "the folder of the one to use)",
                      e->desc->name, old->path, e->path);
        return NULL;
    }
    entry *win = e->depth < old->depth ? e : old, *lose = win == e ? old : e;
    cbf_log_info("plugin '%s': using '%s', not '%s' in a subfolder", e->desc->name, win->path,
                 lose->path);
    return lose;
}

static int add_file(cbf_registry *r, const char *path, int tier, int depth, cbf_error *err)
{
    char real[PATH_MAX];
    if (!realpath(path, real))
        return cbf_error_set(err, CBF_EIO, "plugin file '%s': %s", path, strerror(errno));
    if (seen_file(r, real))
        return 0;
    entry e = {.tier = tier, .depth = depth};
    int rc = open_plugin(path, &e, err);
    if (rc)
        return cbf_error_prefix(err, "plugin file '%s'", path);
    e.path = strdup(path);
    e.real = strdup(real);
    if (!e.path || !e.real) {
        entry_free(&e);
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < r->live.n; i++) {
        entry *old = &r->live.e[i];
        if (strcmp(old->desc->name, e.desc->name))
            continue;
        entry *lose;
        if (old->tier == tier) {
            if (!(lose = same_tier_loser(old, &e, err))) {
                entry_free(&e);
                return CBF_EPLUGIN;
            }
        } else {
            lose = tier < old->tier ? old : &e;
            cbf_log_debug("plugin '%s': '%s' shadows '%s'", e.desc->name,
                          lose == old ? e.path : old->path, lose->path);
        }
        if (list_push(&r->hidden, *lose)) {
            entry_free(&e);
            return cbf_error_set(err, CBF_ENOMEM, "out of memory");
        }
        if (lose == old)
            *old = e;
        return 0;
    }
    if (list_push(&r->live, e)) {
        entry_free(&e);
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    return 0;
}

static int is_plugin_name(const char *n)
{
    size_t len = strlen(n);
    return len > 7 && !strncmp(n, "cbf_", 4) && !strcmp(n + len - 3, ".so");
}

/* depth 0: the directory itself; 1: one level of subdirectories. */
static int scan(cbf_registry *r, const char *dir, int tier, int depth, cbf_error *err)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort);
    if (n < 0)
        return cbf_error_set(err, CBF_EIO, "plugin directory '%s': %s", dir, strerror(errno));
    int rc = 0;
    for (int i = 0; i < n; i++) {
        const char *nm = ents[i]->d_name;
        char path[PATH_MAX];
        struct stat st;
        if (!rc && nm[0] != '.' && snprintf(path, sizeof path, "%s/%s", dir, nm) < (int)sizeof path &&
            stat(path, &st) == 0) {
            if (S_ISREG(st.st_mode) && is_plugin_name(nm))
                rc = add_file(r, path, tier, depth, err);
            else if (S_ISDIR(st.st_mode) && depth == 0)
                rc = scan(r, path, tier, 1, err);
        }
        free(ents[i]);
    }
    free(ents);
    return rc;
}

static int add_dir(cbf_registry *r, const char *dir, int tier, int must_exist, cbf_error *err)
{
    char real[PATH_MAX];
    if (!dir || !dir[0])
        return 0;
    if (!realpath(dir, real)) {
        if (!must_exist)
            return 0;
        return cbf_error_set(err, CBF_EIO, "plugin directory '%s': %s", dir, strerror(errno));
    }
    for (size_t i = 0; i < r->n_dirs; i++)
        if (!strcmp(r->dirs[i], real))
            return 0;
    char **nd = realloc(r->dirs, (r->n_dirs + 1) * sizeof *nd);
    if (!nd || !(nd[r->n_dirs] = strdup(real))) {
        if (nd)
            r->dirs = nd;
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    }
    r->dirs = nd;
    r->n_dirs++;
    cbf_log_debug("plugin directory %s", dir);
    return scan(r, dir, tier, 0, err);
}

int cbf_registry_add_dir(cbf_registry *r, const char *dir, cbf_error *err)
{
    if (!r)
        return cbf_error_set(err, CBF_EINVAL, "cbf_registry_add_dir: no registry");
    return add_dir(r, dir, TIER_GIVEN, 1, err);
}

static int add_env_dirs(cbf_registry *r, cbf_error *err)
{
    const char *env = getenv("CBF_PLUGIN_PATH");
    if (!env)
        return 0;
    char *copy = strdup(env);
    if (!copy)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    int rc = 0;
    for (char *save = NULL, *d = strtok_r(copy, ":", &save); d && !rc; d = strtok_r(NULL, ":", &save))
        rc = add_dir(r, d, TIER_ENV, 0, err);
    free(copy);
    return rc ? cbf_error_prefix(err, "$CBF_PLUGIN_PATH") : 0;
}

/* <dir of the executable>/../plugins: a build tree keeps tools/ and plugins/
 * side by side, wherever it has been moved to. */
static int add_exe_dir(cbf_registry *r, cbf_error *err)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return 0;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    char dir[PATH_MAX + 16], real[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/../plugins", exe);
    /* named by its real path so that listings and messages read plainly */
    if (!realpath(dir, real))
        return 0;
    return add_dir(r, real, TIER_EXE, 0, err);
}

/* The compile-time build tree only serves the libcbf built in it: an
 * installed libcbf must not pick up a developer's build directory. */
static int add_build_dir(cbf_registry *r, cbf_error *err)
{
#ifdef CBF_BUILD_PLUGIN_DIR
    Dl_info info;
    char lib[PATH_MAX], root[PATH_MAX];
    if (!dladdr((void *)cbf_registry_open, &info) || !info.dli_fname || !realpath(info.dli_fname, lib))
        return 0;
    snprintf(root, sizeof root, "%s", CBF_BUILD_PLUGIN_DIR);
    char *slash = strrchr(root, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    char real_root[PATH_MAX];
    if (!realpath(root, real_root))
        return 0;
    size_t len = strlen(real_root);
    if (strncmp(lib, real_root, len) || lib[len] != '/')
        return 0;
    return add_dir(r, CBF_BUILD_PLUGIN_DIR, TIER_BUILD, 0, err);
#else
    (void)r;
    (void)err;
    return 0;
#endif
}

/* <dir of libcbf>/cbf/plugins: the installed layout (libdir/libcbf.so.0
 * beside libdir/cbf/plugins), found wherever the install was moved to or
 * staged (DESTDIR), when the compiled-in CBF_PLUGIN_DIR is not there. */
static int add_lib_dir(cbf_registry *r, cbf_error *err)
{
    Dl_info info;
    char lib[PATH_MAX];
    if (!dladdr((void *)cbf_registry_open, &info) || !info.dli_fname || !realpath(info.dli_fname, lib))
        return 0;
    char *slash = strrchr(lib, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    char dir[PATH_MAX + 16], real[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/cbf/plugins", lib);
    if (!realpath(dir, real))
        return 0;
#ifdef CBF_PLUGIN_DIR
    char installed[PATH_MAX];
    if (realpath(CBF_PLUGIN_DIR, installed) && !strcmp(installed, real))
        return 0;   /* the same folder: listed once, as the installed one */
#endif
    return add_dir(r, real, TIER_INSTALLED, 0, err);
}

int cbf_registry_open(const char *const *dirs, size_t n_dirs, cbf_registry **out, cbf_error *err)
{
    *out = NULL;
    cbf_registry *r = calloc(1, sizeof *r);
    if (!r)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < n_dirs && !rc; i++)
        rc = add_dir(r, dirs[i], TIER_GIVEN, 1, err);
    if (!rc)
        rc = add_env_dirs(r, err);
    if (!rc)
        rc = add_exe_dir(r, err);
    if (!rc)
        rc = add_build_dir(r, err);
#ifdef CBF_PLUGIN_DIR
    if (!rc)
        rc = add_dir(r, CBF_PLUGIN_DIR, TIER_INSTALLED, 0, err);
#endif
    if (!rc)
        rc = add_lib_dir(r, err);
    if (rc) {
        cbf_registry_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

void cbf_registry_close(cbf_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->live.n; i++)
        entry_free(&r->live.e[i]);
    for (size_t i = 0; i < r->hidden.n; i++)
        entry_free(&r->hidden.e[i]);
    free(r->live.e);
    free(r->hidden.e);
    for (size_t i = 0; i < r->n_dirs; i++)
        free(r->dirs[i]);
    free(r->dirs);
    free(r);
}

size_t cbf_registry_count(const cbf_registry *r) { return r ? r->live.n : 0; }

const cbf_plugin_desc *cbf_registry_at(const cbf_registry *r, size_t i)
{
    return r && i < r->live.n ? r->live.e[i].desc : NULL;
}

const char *cbf_registry_path_at(const cbf_registry *r, size_t i)
{
    return r && i < r->live.n ? r->live.e[i].path : NULL;
}

const cbf_plugin_desc *cbf_registry_find(const cbf_registry *r, const char *name)
{
    for (size_t i = 0; r && name && i < r->live.n; i++)
        if (!strcmp(r->live.e[i].desc->name, name))
            return r->live.e[i].desc;
    return NULL;
}
