/* ctl_test.c: helpers of the controller's tests (ctl_test.h). */
#define _POSIX_C_SOURCE 200809L   /* strdup, strtok_r, mkdtemp, nftw */
#define _XOPEN_SOURCE 700
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl_test.h"

char *ct_slurp(const char *dir, const char *name, size_t *len)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = '\0';
    fclose(f);
    if (len)
        *len = (size_t)n;
    return b;
}

void ct_mutate(json_t *root, const char *path, const char *value)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *at = root;
    char *save = NULL, *part = strtok_r(buf, "/", &save);
    while (part) {
        char *next = strtok_r(NULL, "/", &save);
        json_t *child = json_is_array(at) ? json_array_get(at, strtoul(part, NULL, 10)) : json_object_get(at, part);
        if (!next) {
            if (!value) {
                assert_int_equal(json_is_array(at) ? json_array_remove(at, strtoul(part, NULL, 10))
                                                   : json_object_del(at, part),
                                 0);
                return;
            }
            json_error_t je;
            json_t *v = json_loads(value, JSON_DECODE_ANY, &je);
            if (!v)
                fail_msg("bad test value %s: %s", value, je.text);
            size_t idx = strtoul(part, NULL, 10);
            if (json_is_array(at) && idx == json_array_size(at))
                assert_int_equal(json_array_append_new(at, v), 0);   /* one past the end: appended */
            else if (json_is_array(at))
                assert_int_equal(json_array_set_new(at, idx, v), 0);
            else
                assert_int_equal(json_object_set_new(at, part, v), 0);
            return;
        }
        if (!child)
            fail_msg("test path %s: no %s", path, part);
        at = child;
        part = next;
    }
}

json_t *ct_json(const char *dir, const char *name, const char *const *edits)
{
    char *text = ct_slurp(dir, name, NULL);
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    free(text);
    if (!root)
        fail_msg("%s: %s", name, je.text);
    for (int i = 0; edits && edits[i]; i += 2)
        ct_mutate(root, edits[i], edits[i + 1]);
    return root;
}

cbf_product *ct_product(const char *dir, const char *name, const char *const *edits, cbf_error *err)
{
    json_t *root = ct_json(dir, name, edits);
    cbf_product *p = NULL;
    int rc = cbf_product_from_json(root, CT_NOW, &p, err);
    json_decref(root);
    return rc ? NULL : p;
}

char *ct_tmpdir(const char *what)
{
    const char *t = getenv("TMPDIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/cbf-%s-XXXXXX", t && t[0] ? t : "/tmp", what);
    char *d = strdup(path);
    assert_non_null(d);
    if (!mkdtemp(d))
        fail_msg("mkdtemp %s failed", path);
    return d;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void ct_rm_rf(const char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void ct_write(const char *dir, const char *name, const char *text)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        fail_msg("cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

cbf_controller_config *ct_config(const char *dir, const char *yaml, cbf_error *err)
{
    ct_write(dir, "controller.yaml", yaml);
    char path[2048];
    snprintf(path, sizeof path, "%s/controller.yaml", dir);
    cbf_controller_config *c = NULL;
    return cbf_controller_config_load(path, &c, err) ? NULL : c;
}
