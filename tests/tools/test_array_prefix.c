/* test_array_prefix: a plan with array_desc.prefix set (what cbf-controller
 * does so that a product's channelisers share one folder) puts the prefix
 * before every process name and so every file the plan writes: the
 * pipelines, the tables (PREFIXprocesses.tsv, PREFIXmulticast.tsv), the
 * names in them, engine.name and the X-engines' and beam receiver's HDF5
 * files; the longest prefix (15 characters) fits, a digitiser's name
 * whole beside it. Nothing unprefixed is written. Exit 0 when all holds, 1 naming
 * what does not.
 *
 * usage: test_array_prefix (a scratch folder under $TMPDIR or /tmp) */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "array.h"

#define PREFIX "narrowband-ab1."   /* 15 characters: prefix[16] full */

static const char *const DESCRIPTION =
    "array: {name: arr, antennas: 2, channels: 256, xengines: 2, beams: 2, decimation: 8,\n"
    "        ddc_centre_frequency: 428e6}\n"
    "multicast: {digitiser: 239.30.0.0:7148, feng: 239.31.0.0:7148, beam: 239.32.0.0:7148}\n"
    "simulate: {digitisers: 1}\n"
    "hosts:\n"
    "  lo: {roles: \"digitiser, feng, xeng, beams\", interfaces: 127.0.0.1, nic_gbps: 400}\n";

static int failures;

static void check(int ok, const char *what, const char *detail)
{
    if (!ok) {
        fprintf(stderr, "FAIL: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
        failures++;
    }
}

/* The whole of dir/name, or NULL when it cannot be read. */
static char *slurp(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int exists(const char *dir, const char *name)
{
    char path[1024];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    char dir[512], desc_path[600], out[600];
    snprintf(dir, sizeof dir, "%s/array_prefix.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(desc_path, sizeof desc_path, "%s/arr.yaml", dir);
    snprintf(out, sizeof out, "%s/plan", dir);
    FILE *f = fopen(desc_path, "w");
    if (!f || fputs(DESCRIPTION, f) < 0 || fclose(f)) {
        perror(desc_path);
        return 1;
    }
    static array_desc d;   /* large: its hosts and input lists */
    array_plan p;
    cbf_error err = {0};
    if (array_desc_load(desc_path, &d, &err)) {
        fprintf(stderr, "FAIL: loading: %s\n", err.msg);
        return 1;
    }
    check(!d.prefix[0], "a description's prefix is empty", d.prefix);
    snprintf(d.prefix, sizeof d.prefix, "%s", PREFIX);   /* as cbf-controller sets it */
    check(!strcmp(d.prefix, PREFIX), "the prefix fits array_desc.prefix", d.prefix);
    if (array_desc_complete(&d, &err) || array_plan_make(&d, &p, &err)) {
        fprintf(stderr, "FAIL: planning: %s\n", err.msg);
        return 1;
    }
    int rc = array_write(&d, &p, out, &err);
    check(!rc, "array_write", rc ? err.msg : NULL);
    for (int i = 0; !rc && i < p.n_procs; i++) {
        const array_proc *q = &p.procs[i];
        char name[64], file[80], want[128];
        snprintf(name, sizeof name, "%s", q->name);
        check(!strncmp(name, PREFIX, strlen(PREFIX)) && strlen(name) > strlen(PREFIX), "a prefixed name", name);
        snprintf(file, sizeof file, "%s.yaml", name);
        const char *text = slurp(out, file);
        check(text != NULL, "its pipeline is written", file);
        snprintf(want, sizeof want, "  name: arr-%s\n", name);
        check(text && strstr(text, want), "engine.name carries the prefix", file);
        if (q->kind == PROC_XENG || q->kind == PROC_BEAMS) {
            snprintf(want, sizeof want, "path: %s.h5,", name);
            check(text && strstr(text, want), "its HDF5 file carries the prefix", file);
        }
    }
    check(p.n_procs == 6, "beams, 2 X-engines, 2 F-engines and a digitiser", NULL);
    check(p.n_procs == 6 && !strcmp(p.procs[5].name, PREFIX "digitiser0"),
          "a digitiser's name whole beside the longest prefix", p.procs[5].name);
    const char *order = rc ? NULL : slurp(out, PREFIX "processes.tsv");
    check(order && strstr(order, "\t" PREFIX "xeng1\tlo\t-\t" PREFIX "xeng1.yaml\t"),
          PREFIX "processes.tsv lists the prefixed names and files", order);
    check(!rc && exists(out, PREFIX "multicast.tsv"), PREFIX "multicast.tsv is written", NULL);
    check(!exists(out, "processes.tsv") && !exists(out, "multicast.tsv"), "no unprefixed table", NULL);
    array_plan_free(&p);
    if (nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS))   /* the scratch folder, its files first */
        fprintf(stderr, "warning: %s left behind\n", dir);
    if (!failures)
        printf("ok: prefix '%s': %d processes, their pipelines, engine names, HDF5 files and both tables "
               "prefixed\n", PREFIX, 6);
    return failures ? 1 : 0;
}
