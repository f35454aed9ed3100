/* cbf-array: plans an array of cbf-run processes from one description.
 *
 *   cbf-array DESCRIPTION.yaml --out DIR   check the plan, then write DIR: one
 *                                          pipeline per process, processes.tsv
 *                                          (start order) and multicast.tsv
 *   cbf-array DESCRIPTION.yaml --check     check only: each host's NICs and GPUs
 *   cbf-array DESCRIPTION.yaml --figures   the sizing (docs/scaling.md)
 *
 * A description that sizes the array (array.xengines 0, no `hosts`) plans
 * on what --figures counts (array/sized.c).
 *
 * It plans; it starts nothing (systemd/cbf@.service or a Slurm script does).
 * Exit status: 0 the plan fits (and was written), 1 a host's NIC, PCIe or
 * GPU budget is exceeded (named; nothing written) or a file could not be
 * written, 2 a bad description or usage. */
#include <stdio.h>
#include <string.h>

#include "array/array.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: cbf-array DESCRIPTION.yaml (--out DIR | --check | --figures)\n"
               "  --out DIR   check the plan against each host's budget, then write one\n"
               "              pipeline per process, processes.tsv and multicast.tsv to DIR\n"
               "  --check     check only; print each NIC and GPU against its budget\n"
               "  --figures   hosts, GPUs, NICs and multicast groups the array needs, and\n"
               "              what binds first (the description's 'sizing' host)\n"
               "  --version   print cbf-array's version and exit\n"
               "Description and budget formats: docs/scaling.md.\n");
}

static array_desc desc;   /* large: hosts are inline */

int main(int argc, char **argv)
{
    const char *path = NULL, *out = NULL;
    int check = 0, figures = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            printf("cbf-array %s\n", CBF_VERSION);
            return 0;
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strncmp(argv[i], "--out=", 6)) {
            out = argv[i] + 6;
        } else if (!strcmp(argv[i], "--check")) {
            check = 1;
        } else if (!strcmp(argv[i], "--figures")) {
            figures = 1;
        } else if (argv[i][0] == '-' || path) {
            usage(stderr);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path || (!!out + check + figures) != 1) {
        usage(stderr);
        return 2;
    }
    cbf_error err = {0};
    int rc = array_desc_load(path, &desc, &err);
    if (!rc && figures)
        rc = array_figures(&desc, stdout, &err);
    if (rc || figures) {
        if (rc)
            fprintf(stderr, "cbf-array: %s\n", err.msg);
        return rc == CBF_ECONFIG ? 2 : rc ? 1 : 0;
    }
    array_plan plan;
    if ((rc = array_desc_complete(&desc, &err)) || (rc = array_plan_make(&desc, &plan, &err))) {
        fprintf(stderr, "cbf-array: %s\n", err.msg);
        return rc == CBF_ECONFIG ? 2 : 1;
    }
    if (desc.hosts_sized)
        printf("cbf-array: no 'hosts': planned on the %d hosts the sizing at %s counts, %d X-engines\n",
               desc.n_hosts, desc.where_sizing, desc.xengines);
    rc = array_plan_check(&desc, &plan, stdout, &err);
    if (rc)
        fprintf(stderr, "cbf-array: refused: %s\n", err.msg);
    else if (out && (rc = array_write(&desc, &plan, out, &err)))
        fprintf(stderr, "cbf-array: %s\n", err.msg);
    else if (out)
        printf("cbf-array: %d processes written to %s (processes.tsv: start order; multicast.tsv)\n",
               plan.n_procs, out);
    array_plan_free(&plan);
    return rc ? 1 : 0;
}
