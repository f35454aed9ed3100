/* pipeline.c: see pipeline.h. */
#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

const char *pl_cbf_run(void)
{
    static char path[4096];
    const char *root = getenv("CBF_BUILD_ROOT");
    if (!root)
        return NULL;
    snprintf(path, sizeof path, "%s/tools/cbf-run", root);
    return access(path, X_OK) == 0 ? path : NULL;
}

const char *pl_tmpdir(void)
{
    static char dir[256];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/cbf-test-XXXXXX");
        if (!mkdtemp(dir))
            return NULL;
    }
    return dir;
}

int pl_run(const char *name, const char *yaml)
{
    char yml[512], cmd[2048];
    snprintf(yml, sizeof yml, "%s/%s.yaml", pl_tmpdir(), name);
    FILE *f = fopen(yml, "w");
    if (!f)
        return -1;
    fputs(yaml, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' '%s' > '%s/%s.log' 2>&1", pl_tmpdir(),
             pl_cbf_run(), yml, pl_tmpdir(), name);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

hid_t pl_run_open(const char *name, const char *yaml, const char *h5)
{
    if (pl_run(name, yaml)) {
        fprintf(stderr, "%s", pl_log(name));
        return -1;
    }
    return H5Fopen(h5, H5F_ACC_RDONLY, H5P_DEFAULT);
}

const char *pl_log(const char *name)
{
    static char text[65536];
    char path[512];
    snprintf(path, sizeof path, "%s/%s.log", pl_tmpdir(), name);
    text[0] = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = 0;
        fclose(f);
    }
    return text;
}

void *pl_read(hid_t file, const char *path, hid_t memtype, int *rank, hsize_t *dims)
{
    hid_t ds = H5Dopen2(file, path, H5P_DEFAULT);
    if (ds < 0)
        return NULL;
    hid_t sp = H5Dget_space(ds);
    *rank = H5Sget_simple_extent_ndims(sp);
    void *data = NULL;
    if (*rank >= 0 && *rank <= 8) {
        H5Sget_simple_extent_dims(sp, dims, NULL);
        size_t n = 1;
        for (int i = 0; i < *rank; i++)
            n *= (size_t)dims[i];
        data = malloc(n * H5Tget_size(memtype) + 1);
        if (data && H5Dread(ds, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
            free(data);
            data = NULL;
        }
    }
    H5Sclose(sp);
    H5Dclose(ds);
    return data;
}

int pl_attr_string(hid_t loc, const char *obj, const char *name, size_t i, char *out,
                   size_t outlen)
{
    hid_t a = H5Aopen_by_name(loc, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0)
        return -1;
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    const size_t len = H5Tget_size(t);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    int rc = -1;
    char *all = malloc(len * (size_t)n + 1);
    if (all && (hssize_t)i < n && H5Aread(a, t, all) >= 0) {
        snprintf(out, outlen, "%.*s", (int)len, all + i * len);
        rc = 0;
    }
    free(all);
    H5Sclose(sp);
    H5Tclose(t);
    H5Aclose(a);
    return rc;
}

int pl_attr_double(hid_t loc, const char *obj, const char *name, double *out)
{
    hid_t a = H5Aopen_by_name(loc, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0)
        return -1;
    int rc = H5Aread(a, H5T_NATIVE_DOUBLE, out) < 0 ? -1 : 0;
    H5Aclose(a);
    return rc;
}

int pl_setup(void)
{
    if (!pl_cbf_run()) {
        printf("skipped: cbf-run is not built yet (CBF_BUILD_ROOT/tools/cbf-run)\n");
        return 77;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return 0;
}

/* The row of `node` in the table (its line starts with the name). */
static const char *pl_row(const char *table, const char *node)
{
    char start[64];
    snprintf(start, sizeof start, "\n%s ", node);
    const char *row = strstr(table, start);
    return row ? row + 1 : NULL;
}

long long pl_table_value(const char *table, const char *node, const char *name)
{
    const char *row = pl_row(table, node);
    if (!row)
        return -1;
    char key[64];
    snprintf(key, sizeof key, " %s=", name);
    const char *end = strchr(row, '\n'), *v = strstr(row, key);
    if (!v || (end && v > end))
        return -1;
    return atoll(v + strlen(key));
}

long long pl_table_column(const char *table, const char *node, int col)
{
    const char *row = pl_row(table, node);
    if (!row)
        return -1;
    char word[64];
    int used = 0;
    for (int c = 0; c <= col; c++, row += used)
        if (sscanf(row, "%63s%n", word, &used) != 1)
            return -1;
    return atoll(word);
}
