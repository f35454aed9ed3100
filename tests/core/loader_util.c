#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loader_util.h"

static char tmpdir[256];
static cbf_registry *registry;

static void cleanup(void)
{
    cbf_registry_close(registry);
    if (tmpdir[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", tmpdir);
    }
}

const char *tu_plugin_dir(const char *group)
{
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", TEST_PLUGIN_ROOT, group);
    return buf[k];
}

const char *tu_tmpdir(void)
{
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "%s/cbf-core-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        assert_non_null(mkdtemp(tmpdir));
        atexit(cleanup);
    }
    return tmpdir;
}

const char *tu_write(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tu_tmpdir(), name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

cbf_registry *tu_registry(void)
{
    if (!registry) {
        const char *dirs[] = {tu_plugin_dir("good")};
        cbf_error err = {0};
        int rc = cbf_registry_open(dirs, 1, &registry, &err);
        if (rc)
            fail_msg("registry: %s", err.msg);
    }
    return registry;
}

int tu_load(const char *yaml, const char *const *ov, size_t n_ov, cbf_graph **g, cbf_error *err)
{
    const char *path = tu_write("p.yaml", yaml);
    return cbf_graph_load(path, ov, n_ov, tu_registry(), g, err);
}

void tu_expect_error(const char *yaml, const char *const *ov, size_t n_ov, int code, int line,
                     int col, ...)
{
    cbf_graph *g = NULL;
    cbf_error err = {0};
    int rc = tu_load(yaml, ov, n_ov, &g, &err);
    if (rc != code)
        fail_msg("expected code %d, got %d (%s) for:\n%s", code, rc, err.msg, yaml);
    assert_null(g);
    char head[600];
    snprintf(head, sizeof head, "%s/p.yaml:%d:%d: ", tu_tmpdir(), line, col);
    if (strncmp(err.msg, head, strlen(head)))
        fail_msg("expected the message to start '%s', got '%s'", head, err.msg);
    if (strchr(err.msg, '\n'))
        fail_msg("message has a newline: '%s'", err.msg);
    va_list ap;
    va_start(ap, col);
    for (const char *needle; (needle = va_arg(ap, const char *));)
        if (!strstr(err.msg, needle))
            fail_msg("expected '%s' in '%s'", needle, err.msg);
    va_end(ap);
}

long tu_node(const cbf_graph *g, const char *name)
{
    for (size_t i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].name, name))
            return (long)i;
    return -1;
}
