/* supervise.h: one product's engines launched, watched, restarted and
 * stopped (docs/controller.md, "Launching and supervision").
 *
 * A supervisor thread owns the engines: it starts them stage by stage in
 * the plan's start order (receivers first), each stage once every engine
 * of the one before is up, an engine being up when its katcp port accepts
 * a TCP connection. An engine that ends first, or is not up within the
 * configuration's start_timeout, refuses the product: everything already
 * started is stopped and the error names the engine, its host and the
 * reason (how it ended and the last line of its log). Once all are up it
 * watches them: an engine that ends is reported down, started again after
 * a back-off that doubles from restart.initial up to restart.max (and
 * starts again from restart.initial once an engine has stayed up
 * restart.reset_after), and reported up again when its katcp port opens;
 * one that exits 2 (a bad pipeline, which a restart cannot fix) is
 * reported failed and left down. Every change of state reaches the
 * callback, with what the engine carries, so a product controller can flag
 * exactly those inputs or channels while it is down. */
#ifndef CBF_CONTROLLER_SUPERVISE_H
#define CBF_CONTROLLER_SUPERVISE_H

#include <sys/types.h>

#include "launch.h"
#include "plan.h"

typedef enum {
    CBF_ENGINE_STARTING,     /* started, its katcp port not open yet */
    CBF_ENGINE_UP,
    CBF_ENGINE_DOWN,         /* ended: started again after the back-off */
    CBF_ENGINE_RESTARTING,   /* started again, its katcp port not open yet */
    CBF_ENGINE_FAILED,       /* ended, not to be restarted (exit 2: a bad pipeline) */
    CBF_ENGINE_STOPPED,
} cbf_engine_state;

typedef struct cbf_engine_event {
    const cbf_plan_engine *engine;   /* its name, kind, task, host, and the inputs or channels it carries */
    int index;                       /* in the plan's engines */
    cbf_engine_state state, previous;
    const char *reason;              /* down, failed: how it ended and its log's last line;
                                        restarting: which restart, after what wait */
    int restarts;                    /* so far */
} cbf_engine_event;

/* Called on the supervisor's thread, in order, for every change of state;
 * it may read the supervisor (cbf_supervisor_state) but must not stop it. */
typedef void (*cbf_engine_callback)(void *ctx, const cbf_engine_event *ev);

typedef struct cbf_supervisor cbf_supervisor;

/* Launches the plan's engines and returns once all are up (0: the
 * supervisor then watches them until cbf_supervisor_stop) or the product is
 * refused: CBF_EIO "engine NAME (TASK) on host HOST: REASON" with nothing
 * left running (*out NULL). exec NULL: the real programs. The plan and the
 * configuration must outlive the supervisor. */
int cbf_supervisor_start(const cbf_product_plan *plan, const cbf_controller_config *c, const cbf_launch_exec *exec,
                         cbf_engine_callback cb, void *ctx, cbf_supervisor **out, cbf_error *err);
/* Stops every engine (SIGTERM, then SIGKILL after stop_timeout; systemctl
 * stop) and the thread, and frees s. 0 when no engine remains. */
int cbf_supervisor_stop(cbf_supervisor *s, cbf_error *err);
cbf_engine_state cbf_supervisor_state(cbf_supervisor *s, int engine, int *restarts);
/* local, slurm: the engine's process now (cbf-run, srun); 0 when none. */
pid_t cbf_supervisor_pid(cbf_supervisor *s, int engine);
const char *cbf_engine_state_name(cbf_engine_state st);

#endif
