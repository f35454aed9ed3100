/* Plugin registry: broken files are refused with their name and fault;
 * the same file seen twice is one plugin; a name defined twice in one tier
 * is an error naming both files, unless one lies directly in a directory
 * searched and the other in a subfolder (the example plugin built with make
 * in a folder and with meson in its build/): the shallower one is used.
 * Across tiers the higher one wins. */
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

static void expect_refused(const char *group, int code, const char *a, const char *b)
{
    const char *dirs[] = {tu_plugin_dir(group)};
    cbf_registry *reg = NULL;
    cbf_error err = {0};
    int rc = cbf_registry_open(dirs, 1, &reg, &err);
    if (rc != code)
        fail_msg("%s: expected %d, got %d (%s)", group, code, rc, err.msg);
    assert_null(reg);
    if (!strstr(err.msg, a) || (b && !strstr(err.msg, b)))
        fail_msg("%s: expected '%s' and '%s' in '%s'", group, a, b ? b : "", err.msg);
    assert_null(strchr(err.msg, '\n'));
}

static void broken_files(void **state)
{
    (void)state;
    expect_refused("bad_abi", CBF_EPLUGIN, "bad_abi/cbf_tbadabi.so", "ABI 99 found, ABI 4 expected");
    expect_refused("no_symbol", CBF_EPLUGIN, "no_symbol/cbf_tnosym.so", "no entry symbol 'cbf_plugin_entry'");
    expect_refused("bad_dup_param", CBF_EPLUGIN, "bad_dup_param/cbf_tbaddecl.so",
                   "parameter 'taps' is declared twice");
    expect_refused("bad_type", CBF_EPLUGIN, "bad_type/cbf_tbaddecl.so", "parameter 'mode': unknown type 42");
    expect_refused("bad_default", CBF_EPLUGIN, "bad_default/cbf_tbaddecl.so",
                   "parameter 'taps': default '17' is not valid: 17 is out of range [1, 16]");
    expect_refused("bad_dup_port", CBF_EPLUGIN, "bad_dup_port/cbf_tbaddecl.so",
                   "plugin 'tbaddecl': port 'out' is declared twice");
    expect_refused("bad_request_arg", CBF_EPLUGIN, "request 'gain'",
                   "parameter 'value': default '3' is not valid: 3 is out of range [0, 2]");
    expect_refused("bad_request_name", CBF_EPLUGIN, "plugin 'tbaddecl'",
                   "request name 'shutdown' is reserved for the core");
    expect_refused("nowhere", CBF_EIO, "plugin directory", "nowhere");
}

static int run_nothing(cbf_node *n, cbf_error *err)
{
    (void)n, (void)err;
    return 0;
}

/* Port flags and type alternatives are checked as a file's are loaded. */
static void port_declarations(void **state)
{
    (void)state;
    static const struct {
        cbf_port_decl port;
        const char *msg;
    } bad[] = {
        {{.name = "out", .dir = CBF_PORT_OUT, .type = "a||b"}, "port 'out': type 'a||b' has an empty or '*'"},
        {{.name = "in", .dir = CBF_PORT_IN, .type = "a||b"}, "port 'in': type 'a||b' has an empty or '*'"},
        {{.name = "in", .dir = CBF_PORT_IN, .type = "a|*"}, "type 'a|*' has an empty or '*' alternative"},
        {{.name = "in", .dir = CBF_PORT_IN, .type = "a|"}, "empty or '*' alternative"},
        {{.name = "out", .dir = CBF_PORT_OUT, .type = "a", .flags = CBF_PORT_WRITES_INPUT},
         "output port 'out' is marked writes-input"},
        {{.name = "in", .dir = CBF_PORT_IN, .type = "a", .flags = 6}, "port 'in': unknown flags 0x6"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cbf_plugin_desc d = {.abi = CBF_PLUGIN_ABI, .name = "tports", .ports = &bad[i].port,
                             .n_ports = 1, .run = run_nothing};
        cbf_error err = {0};
        assert_int_equal(cbf_registry_check_desc(&d, &err), CBF_EPLUGIN);
        if (!strstr(err.msg, bad[i].msg) || !strstr(err.msg, "plugin 'tports'"))
            fail_msg("expected '%s' in '%s'", bad[i].msg, err.msg);
    }
    /* An output may declare alternatives too: its descriptor names one in init. */
    static const cbf_port_decl ok[] = {
        {.name = "in", .dir = CBF_PORT_IN, .type = "a|b", .flags = CBF_PORT_WRITES_INPUT},
        {.name = "out", .dir = CBF_PORT_OUT, .type = "a|b"},
    };
    cbf_plugin_desc d = {.abi = CBF_PLUGIN_ABI, .name = "tports", .ports = ok, .n_ports = 2,
                         .run = run_nothing};
    assert_int_equal(cbf_registry_check_desc(&d, NULL), 0);
}

static void duplicates_in_one_tier(void **state)
{
    (void)state;
    const char *dirs[] = {tu_plugin_dir("twin_a"), tu_plugin_dir("twin_b")};
    cbf_registry *reg = NULL;
    cbf_error err = {0};
    assert_int_equal(cbf_registry_open(dirs, 2, &reg, &err), CBF_EPLUGIN);
    assert_non_null(strstr(err.msg, "plugin 'ttwin' is defined twice"));
    assert_non_null(strstr(err.msg, "twin_a/cbf_ttwin.so"));
    assert_non_null(strstr(err.msg, "twin_b/cbf_ttwin.so"));
}

/* The file of the one plugin named ttwin (there must be exactly one). */
static const char *twin_path(const cbf_registry *reg)
{
    const char *path = NULL;
    int found = 0;
    for (size_t i = 0; i < cbf_registry_count(reg); i++)
        if (!strcmp(cbf_registry_at(reg, i)->name, "ttwin")) {
            found++;
            path = cbf_registry_path_at(reg, i);
        }
    assert_int_equal(found, 1);
    return path;
}

/* Copies twin_a's plugin to <tmp>/<name>/<sub> (a real copy: a link would be
 * the same file). */
static void copy_twin(const char *name, const char *sub)
{
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/%s/%s' && cp '%s/cbf_ttwin.so' '%s/%s/%s/'", tu_tmpdir(), name,
             sub, tu_plugin_dir("twin_a"), tu_tmpdir(), name, sub);
    assert_int_equal(system(cmd), 0);
}

static void duplicates_by_depth(void **state)
{
    (void)state;
    char top[600];
    snprintf(top, sizeof top, "%s/depth", tu_tmpdir());
    copy_twin("depth", ".");
    copy_twin("depth", "build");
    const char *dirs[] = {top};
    cbf_registry *reg = NULL;
    cbf_error err = {0};
    if (cbf_registry_open(dirs, 1, &reg, &err))
        fail_msg("%s", err.msg);
    char want[700];
    snprintf(want, sizeof want, "%s/cbf_ttwin.so", top);
    assert_string_equal(twin_path(reg), want);
    cbf_registry_close(reg);

    /* two subfolders at one depth: ambiguous, and the message says what to do */
    snprintf(top, sizeof top, "%s/level", tu_tmpdir());
    copy_twin("level", "build");
    copy_twin("level", "build2");
    reg = NULL;
    assert_int_equal(cbf_registry_open(dirs, 1, &reg, &err), CBF_EPLUGIN);
    assert_null(reg);
    if (!strstr(err.msg, "plugin 'ttwin' is defined twice") || !strstr(err.msg, "level/build/cbf_ttwin.so") ||
        !strstr(err.msg, "level/build2/cbf_ttwin.so") || !strstr(err.msg, "name only the folder"))
        fail_msg("unexpected: %s", err.msg);
}

static void same_file_twice(void **state)
{
    (void)state;
    char link[600];
    snprintf(link, sizeof link, "%s/good-link", tu_tmpdir());
    unlink(link);
    assert_int_equal(symlink(tu_plugin_dir("good"), link), 0);
    const char *dirs[] = {tu_plugin_dir("good"), link, tu_plugin_dir("good")};
    cbf_registry *reg = NULL;
    cbf_error err = {0};
    int rc = cbf_registry_open(dirs, 3, &reg, &err);
    if (rc)
        fail_msg("%s", err.msg);
    size_t seen = 0;
    for (size_t i = 0; i < cbf_registry_count(reg); i++)
        seen += !strcmp(cbf_registry_at(reg, i)->name, "tsrc");
    assert_int_equal(seen, 1);
    const cbf_plugin_desc *d = cbf_registry_find(reg, "tparams");
    assert_non_null(d);
    assert_string_equal(d->version, "2.3");
    assert_null(cbf_registry_find(reg, "tparamz"));
    assert_null(cbf_registry_find(reg, NULL));
    cbf_registry_close(reg);
}

static void higher_tier_wins(void **state)
{
    (void)state;
    /* given directories outrank $CBF_PLUGIN_PATH */
    char *old = getenv("CBF_PLUGIN_PATH") ? strdup(getenv("CBF_PLUGIN_PATH")) : NULL;
    char env[2048];
    snprintf(env, sizeof env, "%s:%s", tu_plugin_dir("twin_b"), old ? old : "");
    setenv("CBF_PLUGIN_PATH", env, 1);
    const char *dirs[] = {tu_plugin_dir("twin_a")};
    cbf_registry *reg = NULL;
    cbf_error err = {0};
    int rc = cbf_registry_open(dirs, 1, &reg, &err);
    if (old)
        setenv("CBF_PLUGIN_PATH", old, 1);
    else
        unsetenv("CBF_PLUGIN_PATH");
    free(old);
    if (rc)
        fail_msg("%s", err.msg);
    assert_non_null(strstr(twin_path(reg), "twin_a/"));
    cbf_registry_close(reg);

    /* a directory added later (engine.plugin_path) is in the given tier too */
    assert_int_equal(cbf_registry_open(dirs, 1, &reg, &err), 0);
    assert_int_equal(cbf_registry_add_dir(reg, tu_plugin_dir("twin_b"), &err), CBF_EPLUGIN);
    assert_non_null(strstr(err.msg, "defined twice"));
    cbf_registry_close(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(broken_files),
        cmocka_unit_test(port_declarations),
        cmocka_unit_test(duplicates_in_one_tier),
        cmocka_unit_test(duplicates_by_depth),
        cmocka_unit_test(same_file_twice),
        cmocka_unit_test(higher_tier_wins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
