/* cbf-inspect shows every shipped plugin's documentation whole: the summary,
 * and each parameter's, port's, request's and request argument's text, each
 * ending its line as written in the plugin (nothing cut by a fixed buffer or
 * folded mid-word). The texts are read from the plugins themselves through
 * the registry, so a new parameter is checked without touching this test.
 * Args: the cbf-inspect to run; plugins from $CBF_PLUGIN_PATH. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cbf/graph.h"

static char *run_inspect(const char *exe, const char *name)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s", exe, name ? name : "");
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t n = 0, cap = 1 << 16;
    char *out = malloc(cap);
    for (size_t got; out && (got = fread(out + n, 1, cap - n - 1, p)) > 0;) {
        n += got;
        if (n + 1 == cap) {
            char *bigger = realloc(out, cap *= 2);
            if (!bigger)
                free(out);
            out = bigger;
        }
    }
    int st = pclose(p);
    if (out)
        out[n] = '\0';
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "FAIL: %s exited %d\n", cmd, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        free(out);
        return NULL;
    }
    return out;
}

/* text must appear in out as the end of a line. */
static int whole(const char *out, const char *plugin, const char *what, const char *text)
{
    if (!text || !text[0])
        return 0;
    size_t len = strlen(text);
    for (const char *at = strstr(out, text); at; at = strstr(at + 1, text))
        if (at[len] == '\n')
            return 0;
    fprintf(stderr, "FAIL: cbf-inspect %s: %s not shown whole:\n  %s\n", plugin, what, text);
    return 1;
}

static int check_decls(const char *out, const char *plugin, const char *where, const cbf_param_decl *d,
                       int n)
{
    int bad = 0;
    for (int i = 0; i < n; i++) {
        char what[256];
        snprintf(what, sizeof what, "%s '%s'", where, d[i].name);
        bad += whole(out, plugin, what, d[i].doc);
    }
    return bad;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_inspect_docs CBF-INSPECT\n");
        return 2;
    }
    cbf_registry *reg;
    cbf_error err;
    if (cbf_registry_open(NULL, 0, &reg, &err)) {
        fprintf(stderr, "FAIL: %s\n", err.msg);
        return 1;
    }
    int bad = 0;
    size_t docs = 0;
    char *list = run_inspect(argv[1], NULL);
    bad += !list;
    for (size_t i = 0; list && i < cbf_registry_count(reg); i++) {
        const cbf_plugin_desc *d = cbf_registry_at(reg, i);
        char *out = run_inspect(argv[1], d->name);
        if (!out) {
            bad++;
            continue;
        }
        /* "name version: summary" ends the first line of the plugin's page */
        bad += whole(out, d->name, "summary", d->summary);
        bad += !strstr(list, d->summary ? d->summary : "");
        bad += check_decls(out, d->name, "parameter", d->params, d->n_params);
        for (int p = 0; p < d->n_ports; p++)
            bad += whole(out, d->name, d->ports[p].name, d->ports[p].doc);
        for (int r = 0; r < d->n_requests; r++) {
            const cbf_request_decl *q = &d->requests[r];
            bad += whole(out, d->name, q->name, q->doc);
            bad += check_decls(out, d->name, q->name, q->args, q->n_args);
            docs += 1 + (size_t)q->n_args;
        }
        docs += 1 + (size_t)d->n_params + (size_t)d->n_ports;
        free(out);
    }
    free(list);
    printf("%zu plugins, %zu texts checked, %d not whole\n", cbf_registry_count(reg), docs, bad);
    cbf_registry_close(reg);
    return bad ? 1 : 0;
}
