/* cbf-inspect: what plugins this installation has, and what each accepts.
 *
 *   cbf-inspect [--plugin-path DIR]...          one line per plugin
 *   cbf-inspect [--plugin-path DIR]... NAME     its parameters, ports and requests
 *   cbf-inspect --version
 *
 * Descriptions and summaries are folded at spaces to about 120 columns
 * (never past 200), continued on lines indented to their column.
 *
 * Exit status: 0, 1 when a plugin file is broken (the registry refuses to
 * start with one), 2 for a usage error or an unknown plugin name. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cbf/graph.h"

/* Long texts are folded at spaces so that a page reads on a wide terminal
 * (parameter docs run to 400 characters): a description column gets
 * WIDTH less its start, at least DESC_MIN; where that would pass
 * WIDTH_MAX the text starts on the next line instead. A word longer than
 * its column stays whole. */
#define WIDTH 120
#define WIDTH_MAX 200
#define DESC_MIN 48
#define SUMMARY_MAX 64   /* the listing's summary column */

/* The length of text's first piece of at most room columns: up to the
 * last space that fits, or the whole first word where none does. */
static int piece(const char *text, int room)
{
    int n = (int)strlen(text);
    if (n <= room)
        return n;
    int cut = room;
    while (cut > 0 && text[cut] != ' ')
        cut--;
    if (cut == 0)
        for (cut = room; text[cut] && text[cut] != ' '; cut++)
            ;
    return cut;
}

static const char *skip_spaces(const char *text)
{
    while (*text == ' ')
        text++;
    return text;
}

/* Writes text from column col (the cursor is there) to at most column
 * end, continuation lines indented to col; ends the line. */
static void fold(const char *text, int col, int end)
{
    text = skip_spaces(text);
    for (bool first = true; first || *text; first = false) {
        int n = piece(text, end - col);
        printf("%*s%.*s\n", first ? 0 : col, "", n, text);
        text = skip_spaces(text + n);
    }
}

/* A row's last column (a description) at column col, indent being the
 * row's own. */
static void describe(const char *text, int col, int indent)
{
    if (!text || !*text) {
        printf("\n");
        return;
    }
    int room = WIDTH - col < DESC_MIN ? DESC_MIN : WIDTH - col;
    if (col + room <= WIDTH_MAX) {
        fold(text, col, col + room);
    } else {
        printf("\n%*s", indent + 4, "");
        fold(text, indent + 4, WIDTH);
    }
}

static const char *type_name(cbf_param_type t)
{
    static const char *const names[] = {"int", "float", "bool", "string", "choice",
                                        "int list", "float list", "records"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

static int cmp_index(const void *a, const void *b, void *reg)
{
    const cbf_plugin_desc *x = cbf_registry_at(reg, *(const size_t *)a);
    const cbf_plugin_desc *y = cbf_registry_at(reg, *(const size_t *)b);
    return strcmp(x->name, y->name);
}

static int list_all(const cbf_registry *reg)
{
    size_t n = cbf_registry_count(reg);
    if (!n) {
        printf("no plugins found (searched --plugin-path, $CBF_PLUGIN_PATH, the build tree, "
               "the installed plugin directory)\n");
        return 0;
    }
    size_t *idx = calloc(n, sizeof *idx);
    if (!idx)
        return 1;
    int wn = 4, wv = 7, ws = 7;
    for (size_t i = 0; i < n; i++) {
        const cbf_plugin_desc *d = cbf_registry_at(reg, i);
        idx[i] = i;
        wn = (int)fmax(wn, strlen(d->name));
        wv = (int)fmax(wv, strlen(d->version ? d->version : ""));
        ws = (int)fmax(ws, strlen(d->summary ? d->summary : ""));
    }
    ws = ws < SUMMARY_MAX ? ws : SUMMARY_MAX;   /* longer summaries go on under it */
    qsort_r(idx, n, sizeof *idx, cmp_index, (void *)reg);
    printf("%-*s  %-*s  %-*s  %s\n", wn, "NAME", wv, "VERSION", ws, "SUMMARY", "FILE");
    for (size_t k = 0; k < n; k++) {
        const cbf_plugin_desc *d = cbf_registry_at(reg, idx[k]);
        const char *sum = skip_spaces(d->summary ? d->summary : "");
        int len = piece(sum, ws);
        printf("%-*s  %-*s  %-*.*s  %s\n", wn, d->name, wv, d->version ? d->version : "", ws, len, sum,
               cbf_registry_path_at(reg, idx[k]));
        for (sum = skip_spaces(sum + len); *sum; sum = skip_spaces(sum + len)) {
            len = piece(sum, ws);
            printf("%*s%.*s\n", wn + wv + 4, "", len, sum);
        }
    }
    free(idx);
    return 0;
}

static void fmt_bound(double v, int integer, char *buf, size_t n)
{
    if (integer && fabs(v) < 9.22e18 && v == floor(v))
        snprintf(buf, n, "%lld", (long long)v);
    else
        snprintf(buf, n, "%g", v);
}

static void limits(const cbf_param_decl *p, char *buf, size_t n)
{
    buf[0] = '\0';
    if (p->type == CBF_PARAM_CHOICE) {
        snprintf(buf, n, "%s", p->choices);
    } else if (p->type == CBF_PARAM_RECORDS) {
        snprintf(buf, n, "fields %s", p->choices);
    } else if (p->has_range) {
        char lo[32], hi[32];
        int integer = p->type == CBF_PARAM_INT || p->type == CBF_PARAM_INT_LIST;
        fmt_bound(p->min, integer, lo, sizeof lo);
        fmt_bound(p->max, integer, hi, sizeof hi);
        snprintf(buf, n, "%s%s..%s", p->type >= CBF_PARAM_INT_LIST ? "each " : "", lo, hi);
    }
}

/* A declaration table (parameters, or a request's arguments) as columns. */
static void show_decls(const cbf_param_decl *decls, int n, const char *indent, int header)
{
    int wn = 4, wt = 4, wd = 7, wl = 6;
    char lim[512];
    for (int i = 0; i < n; i++) {
        const cbf_param_decl *p = &decls[i];
        limits(p, lim, sizeof lim);
        wn = (int)fmax(wn, strlen(p->name));
        wt = (int)fmax(wt, strlen(type_name(p->type)));
        wd = (int)fmax(wd, strlen(p->def ? p->def : "required"));
        wl = (int)fmax(wl, strlen(lim));
    }
    if (header)
        printf("%s%-*s  %-*s  %-*s  %-*s  %s\n", indent, wn, "NAME", wt, "TYPE", wd, "DEFAULT", wl,
               "LIMITS", "DESCRIPTION");
    for (int i = 0; i < n; i++) {
        const cbf_param_decl *p = &decls[i];
        limits(p, lim, sizeof lim);
        int col = printf("%s%-*s  %-*s  %-*s  %-*s  ", indent, wn, p->name, wt, type_name(p->type), wd,
                         p->def ? (p->def[0] ? p->def : "\"\"") : "required", wl, lim);
        describe(p->doc, col, (int)strlen(indent));
    }
}

static void show_params(const cbf_plugin_desc *d)
{
    printf("\nParameters:\n");
    if (!d->n_params) {
        printf("  (none)\n");
        return;
    }
    show_decls(d->params, d->n_params, "  ", 1);
}

/* An input's alternatives "a|b" as "a | b", so they read as a choice. */
static void port_type(const cbf_port_decl *p, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = '\0';
    for (const char *s = p->type; *s && k + 4 < n; s++)
        k += (size_t)snprintf(buf + k, n - k, "%s", *s == '|' ? " | " : (char[2]){*s, 0});
}

static void port_wiring(const cbf_port_decl *p, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s%s", p->optional ? "optional" : "required", p->multi ? ", multi" : "",
             (p->flags & CBF_PORT_WRITES_INPUT) ? ", writes input" : "");
}

static void show_ports(const cbf_plugin_desc *d)
{
    printf("\nPorts:\n");
    if (!d->n_ports) {
        printf("  (none)\n");
        return;
    }
    int wn = 4, wt = 11, ww = 14;
    char type[512], wiring[64];
    for (int i = 0; i < d->n_ports; i++) {
        port_type(&d->ports[i], type, sizeof type);
        port_wiring(&d->ports[i], wiring, sizeof wiring);
        wn = (int)fmax(wn, strlen(d->ports[i].name));
        wt = (int)fmax(wt, strlen(type));
        ww = (int)fmax(ww, strlen(wiring));
    }
    printf("  %-*s  %-6s  %-*s  %-*s  %s\n", wn, "NAME", "DIR", wt, "BUFFER TYPE", ww, "WIRING",
           "DESCRIPTION");
    for (int i = 0; i < d->n_ports; i++) {
        const cbf_port_decl *p = &d->ports[i];
        port_type(p, type, sizeof type);
        port_wiring(p, wiring, sizeof wiring);
        int col = printf("  %-*s  %-6s  %-*s  %-*s  ", wn, p->name, p->dir == CBF_PORT_IN ? "input" : "output",
                         wt, type, ww, wiring);
        describe(p->doc, col, 2);
    }
}

static void show_requests(const cbf_plugin_desc *d)
{
    printf("\nRequests (cbf-ctl; docs/control.md):\n");
    if (!d->n_requests) {
        printf("  (none)\n");
        return;
    }
    for (int i = 0; i < d->n_requests; i++) {
        const cbf_request_decl *r = &d->requests[i];
        describe(r->doc, printf("  %s: ", r->name), 2);
        show_decls(r->args, r->n_args, "    ", 0);
    }
}

static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (la > 63 || lb > 63)
        return 99;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            best = up + 1 < best ? up + 1 : best;
            best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

static int show_one(const cbf_registry *reg, const char *name)
{
    for (size_t i = 0; i < cbf_registry_count(reg); i++) {
        const cbf_plugin_desc *d = cbf_registry_at(reg, i);
        if (strcmp(d->name, name))
            continue;
        int col = printf("%s %s: ", d->name, d->version ? d->version : "");
        describe(d->summary, col, 0);
        printf("file: %s\n", cbf_registry_path_at(reg, i));
        show_params(d);
        show_ports(d);
        show_requests(d);
        return 0;
    }
    const char *near = NULL;
    size_t best = strlen(name) / 3 + 1;
    for (size_t i = 0; i < cbf_registry_count(reg); i++) {
        size_t dist = distance(name, cbf_registry_at(reg, i)->name);
        if (dist <= best && dist <= 3) {
            best = dist;
            near = cbf_registry_at(reg, i)->name;
        }
    }
    fprintf(stderr, "cbf-inspect: no plugin '%s'%s%s%s; cbf-inspect without a name lists them\n", name,
            near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
    return 2;
}

static void usage_to(FILE *f)
{
    fprintf(f, "usage: cbf-inspect [--plugin-path DIR]... [PLUGIN]\n"
               "  without PLUGIN: every plugin found, one line each (name, version,\n"
               "  summary, file); with it: its parameters, ports and requests\n"
               "  --plugin-path DIR  search DIR first (repeatable); then\n"
               "                     $CBF_PLUGIN_PATH, the build tree, the installed\n"
               "                     plugin directory\n"
               "  --version          print cbf-inspect's version and exit\n"
               "exit: 0 ok, 1 a plugin file is broken, 2 usage or unknown plugin\n");
}

static int usage(void)
{
    usage_to(stderr);
    return 2;
}

int main(int argc, char **argv)
{
    const char **dirs = calloc((size_t)argc, sizeof *dirs);
    size_t n_dirs = 0;
    const char *name = NULL;
    if (!dirs)
        return 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--plugin-path") && i + 1 < argc) {
            dirs[n_dirs++] = argv[++i];
        } else if (!strncmp(argv[i], "--plugin-path=", 14)) {
            dirs[n_dirs++] = argv[i] + 14;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage_to(stdout);
            free(dirs);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            printf("cbf-inspect %s\n", CBF_VERSION);
            free(dirs);
            return 0;
        } else if (argv[i][0] == '-' || name) {
            free(dirs);
            return usage();
        } else {
            name = argv[i];
        }
    }
    cbf_registry *reg;
    cbf_error err;
    int rc = cbf_registry_open(dirs, n_dirs, &reg, &err);
    free(dirs);
    if (rc) {
        fprintf(stderr, "cbf-inspect: %s\n", err.msg);
        return rc == CBF_EPLUGIN ? 1 : 2;
    }
    rc = name ? show_one(reg, name) : list_all(reg);
    cbf_registry_close(reg);
    return rc;
}
