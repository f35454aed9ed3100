/* launch_slurm.c: an engine as one Slurm step (launch.h). `srun` runs on
 * the controller's host as the engine's child and lives as long as the
 * step, so it is watched and stopped as a local engine is (srun passes
 * SIGTERM on to the task); Slurm runs cbf-run on the engine's host. The
 * product's folder must be on a file system the hosts share (the pipeline
 * is read there, and the step runs in it). Not tried on a real Slurm: the
 * controller_launch test checks the command. */
#include <stdio.h>
#include <string.h>

#include "launch.h"

int cbf_slurm_command(const cbf_launcher *L, const cbf_plan_engine *e, cbf_argv *a)
{
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", e->pipeline);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    cbf_argv_add(a, "%s", L->c->srun);
    cbf_argv_add(a, "--job-name=%s-%s", L->product, e->name);
    cbf_argv_add(a, "--nodes=1");
    cbf_argv_add(a, "--ntasks=1");
    cbf_argv_add(a, "--nodelist=%s", e->host);
    cbf_argv_add(a, "--chdir=%s", slash ? dir : ".");
    /* an engine with a GPU gets one, which Slurm shows it as device 0
     * (plan.c writes gpu_device 0 for this launcher); the others none */
    cbf_argv_add(a, "%s", e->gpu >= 0 ? "--gpus-per-task=1" : "--gres=none");
    cbf_argv_words(a, L->c->srun_args);
    return 0;
}
