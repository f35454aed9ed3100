/* cbf-inspect shows every shipped plugin's documentation whole: the summary,
 * and each parameter's, port's, request's and request argument's text, each
 * ending its line as written in the plugin (nothing cut by a fixed buffer or
 * folded mid-word; folded at spaces onto indented lines is whole), and no
 * line of the listing or of any plugin's page is over 200 columns. The texts are read from the plugins themselves through
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

/* cbf-inspect folds long texts at spaces, continuing them on lines that
 * start with at least FOLD_INDENT spaces (a table's rows start with 2 or
 * 4). unfold(s) joins each such line to the one before with one space and
 * writes every run of spaces as one, so a text folded anywhere reads as
 * written; in place. */
#define FOLD_INDENT 6
#define LINE_MAX_COLS 200

static char *unfold(char *s)
{
    char *w = s;
    for (const char *r = s; *r;) {
        if (r[0] == '\n' && strspn(r + 1, " ") >= FOLD_INDENT) {
            r += 1 + strspn(r + 1, " ");
            *w++ = ' ';
        } else if (r[0] == ' ') {
            r += strspn(r, " ");
            *w++ = ' ';
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    return s;
}

/* The unfolded copy of a text (malloc'd). */
static char *unfolded(const char *text)
{
    char *c = strdup(text);
    return c ? unfold(c) : NULL;
}

/* text must appear in out (unfolded) as the end of a line. */
static int whole(const char *out, const char *plugin, const char *what, const char *text)
{
    if (!text || !text[0])
        return 0;
    char *t = unfolded(text);
    size_t len = strlen(t);
    for (const char *at = strstr(out, t); at; at = strstr(at + 1, t))
        if (at[len] == '\n') {
            free(t);
            return 0;
        }
    free(t);
    fprintf(stderr, "FAIL: cbf-inspect %s: %s not shown whole:\n  %s\n", plugin, what, text);
    return 1;
}

/* No line of out is wider than LINE_MAX_COLS (issue 31: 470). */
static int narrow(const char *out, const char *what)
{
    int bad = 0, n = 1;
    for (const char *line = out; *line; n++) {
        size_t len = strcspn(line, "\n");
        if (len > LINE_MAX_COLS) {
            fprintf(stderr, "FAIL: %s: line %d is %zu columns (at most %d): %.80s...\n", what, n, len,
                    LINE_MAX_COLS, line);
            bad++;
        }
        line += len + (line[len] == '\n');
    }
    return bad;
}

/* Removes every "  PATH" from s (the listing's file column sits between
 * a summary's first line and the rest); in place. */
static void drop_path(char *s, const char *path)
{
    size_t pl = strlen(path);
    for (char *at = strstr(s, path); at; at = strstr(at, path)) {
        char *from = at;
        while (from > s && from[-1] == ' ')
            from--;
        memmove(from, at + pl, strlen(at + pl) + 1);
        at = from;
    }
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
    if (list) {
        bad += narrow(list, "cbf-inspect");
        for (size_t i = 0; i < cbf_registry_count(reg); i++)
            drop_path(list, cbf_registry_path_at(reg, i));
        unfold(list);
    }
    for (size_t i = 0; list && i < cbf_registry_count(reg); i++) {
        const cbf_plugin_desc *d = cbf_registry_at(reg, i);
        char *out = run_inspect(argv[1], d->name);
        if (!out) {
            bad++;
            continue;
        }
        char what[256];
        snprintf(what, sizeof what, "cbf-inspect %s", d->name);
        bad += narrow(out, what);
        unfold(out);
        /* "name version: summary" ends the first line of the plugin's page */
        bad += whole(out, d->name, "summary", d->summary);
        char *sum = unfolded(d->summary ? d->summary : "");
        if (!sum || !strstr(list, sum)) {
            fprintf(stderr, "FAIL: cbf-inspect: %s's summary not listed whole:\n  %s\n", d->name, d->summary);
            bad++;
        }
        free(sum);
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
