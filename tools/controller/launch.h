/* launch.h: starting and stopping one product's engines through a process
 * manager (docs/controller.md, "Launching and supervision"), chosen by the
 * controller configuration's `launcher`:
 *
 *   local    each engine a child of this process: cbf-run PIPELINE, in its
 *            own process group, stdout and stderr appended to NAME.log in
 *            the product's folder, run in that folder;
 *   slurm    each engine a child `srun` step on the engine's host, which
 *            Slurm runs there (srun forwards SIGTERM to it);
 *   systemd  each engine a cbf@PRODUCT-NAME unit (systemd/cbf@.service.in),
 *            its pipeline copied to the unit's confdir first; `systemctl
 *            stop` stops it.
 *
 * Every program the launcher runs goes through a cbf_launch_exec, so a
 * test can see the exact commands without a systemd or a Slurm (and the
 * daemon runs the real ones, cbf_launch_exec_real). Whether an engine is
 * up is the supervisor's to judge (supervise.h): its katcp port accepts. */
#ifndef CBF_CONTROLLER_LAUNCH_H
#define CBF_CONTROLLER_LAUNCH_H

#include <stddef.h>
#include <sys/types.h>

#include "config.h"
#include "plan.h"

/* An argument vector built in place. */
#define CBF_ARGV_MAX 64
typedef struct cbf_argv {
    char *v[CBF_ARGV_MAX + 1];      /* NULL-terminated */
    int n;
    char buf[8192];
    size_t used;
    int overflow;                   /* more than fits: the command is refused */
} cbf_argv;

void cbf_argv_init(cbf_argv *a);
void cbf_argv_add(cbf_argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Each space-separated word of words. */
void cbf_argv_words(cbf_argv *a, const char *words);
/* The command as one line, words joined by spaces (for messages and tests). */
void cbf_argv_text(const cbf_argv *a, char *buf, size_t n);

typedef struct cbf_launch_exec {
    /* Runs argv to its end; its stdout and stderr into out (n bytes, NUL
     * terminated; NULL: discarded). Its exit status (128 + signal when
     * killed), or -1 with err when it could not be run. */
    int (*run)(void *ctx, char *const argv[], char *out, size_t n, cbf_error *err);
    /* Starts argv as a child of the calling thread in a process group of
     * its own, in dir, stdout and stderr appended to log (emptied first
     * when truncate). Its pid, or -1 with err when it could not be started
     * (the program not found: the message names it). */
    pid_t (*spawn)(void *ctx, char *const argv[], const char *dir, const char *log, int truncate, cbf_error *err);
    void *ctx;
} cbf_launch_exec;

/* fork and exec. The child gets SIGKILL when the thread that spawned it
 * ends (PR_SET_PDEATHSIG), so no engine outlives its supervisor, and
 * starts with default signal handling and no descriptors but 0, 1 and 2. */
extern const cbf_launch_exec cbf_launch_exec_real;

/* One engine as its launcher holds it. */
typedef struct cbf_launch_handle {
    pid_t pid;                      /* local, slurm: the child (cbf-run, srun); 0: not running */
    int pidfd;                      /* readable once the child has ended; -1: none (waitpid polls) */
    char unit[160];                 /* systemd: UNIT@PRODUCT-NAME */
    int running;
    int status;                     /* once ended: its exit status, 128 + signal if killed; -1 unknown */
} cbf_launch_handle;

typedef struct cbf_launcher {
    const cbf_controller_config *c;
    char product[64];
    cbf_launch_exec exec;
} cbf_launcher;

/* exec NULL: cbf_launch_exec_real. */
void cbf_launcher_init(cbf_launcher *L, const cbf_controller_config *c, const char *product,
                       const cbf_launch_exec *exec);
/* Whether engines are children of this process (local, slurm): their end
 * is seen on their pidfd, and signals stop them. */
int cbf_launch_children(const cbf_launcher *L);
/* The command that starts engine e: cbf-run for local, srun for slurm,
 * systemctl start for systemd. */
int cbf_launch_command(const cbf_launcher *L, const cbf_plan_engine *e, cbf_argv *a, cbf_error *err);
/* Starts e (first: its first start, which empties its log). CBF_EIO with
 * the reason when it cannot be started. */
int cbf_launch_start(cbf_launcher *L, const cbf_plan_engine *e, int first, cbf_launch_handle *h, cbf_error *err);
/* 1 when a running engine has ended (reaped; reason: how, in words),
 * 0 while it runs. */
int cbf_launch_ended(cbf_launcher *L, const cbf_plan_engine *e, cbf_launch_handle *h, char *reason, size_t n);
/* Stops the n engines whose handles run: SIGTERM to each child's process
 * group, up to the configuration's stop_timeout for them all to end, then
 * SIGKILL; systemd: systemctl stop (its unit's TimeoutStopSec applies) and
 * the copied pipelines removed. Every child is reaped before it returns. */
int cbf_launch_stop(cbf_launcher *L, const cbf_plan_engine *engines, cbf_launch_handle *h, int n, cbf_error *err);
/* Whether address:port accepts a TCP connection within timeout_ms. */
int cbf_launch_port_open(const char *address, int port, int timeout_ms);
/* The last line of a log file that is not empty, "" when none. */
void cbf_launch_last_line(const char *path, char *buf, size_t n);

/* launch_systemd.c, launch_slurm.c: each backend's commands. */
void cbf_systemd_instance(const cbf_launcher *L, const cbf_plan_engine *e, char *unit, size_t n, char *yaml,
                          size_t yn);
int cbf_systemd_start(cbf_launcher *L, const cbf_plan_engine *e, cbf_launch_handle *h, cbf_error *err);
int cbf_systemd_ended(cbf_launcher *L, const cbf_plan_engine *e, cbf_launch_handle *h, char *reason, size_t n);
int cbf_systemd_stop(cbf_launcher *L, const cbf_plan_engine *engines, cbf_launch_handle *h, int n, cbf_error *err);
int cbf_systemd_command(const cbf_launcher *L, const cbf_plan_engine *e, cbf_argv *a);
int cbf_slurm_command(const cbf_launcher *L, const cbf_plan_engine *e, cbf_argv *a);

#endif
