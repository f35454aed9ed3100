/* config.h: cbf-controller's own configuration (docs/controller.md,
 * "Controller configuration"): how engines are launched, where products
 * keep their files, the hosts they run on, and the multicast groups and
 * ports products are given from.
 *
 * A small YAML file read as cbf-array's descriptions are (tools/array/
 * yamldoc.h: libcbf's parameter validation), so a mistake is one line
 * starting file:line:column with a "did you mean" where one is near. Every
 * key has a default: no file at all runs every engine on this machine over
 * loopback. */
#ifndef CBF_CONTROLLER_CONFIG_H
#define CBF_CONTROLLER_CONFIG_H

#include "array.h"
#include "cbf/error.h"

typedef enum { CBF_LAUNCHER_LOCAL, CBF_LAUNCHER_SYSTEMD, CBF_LAUNCHER_SLURM } cbf_launcher_kind;

/* An inclusive range: ports, or IPv4 groups in host order. */
typedef struct cbf_range {
    unsigned first, last;
    char where[ARRAY_WHERE];          /* file:line:column of the key, for "the range is full" */
} cbf_range;

typedef struct cbf_controller_config {
    char path[512];                   /* "" when read from no file */
    cbf_launcher_kind launcher;
    char cbf_run[1024];               /* found on PATH when it has no '/' */
    char cbf_run_args[1024];          /* more arguments, separated by spaces */
    char state_dir[1024];             /* one folder per product: pipelines and logs */
    double start_timeout;             /* seconds for an engine's katcp port to open */
    double stop_timeout;              /* seconds from SIGTERM to SIGKILL */
    int jones_per_batch;              /* F-engine heap: complex values per input (2^20 default) */
    double rx_reorder_tol;            /* seconds: the X-engines' receive window (array.rx_reorder_tol) */
    int dsim_threads;                 /* each simulated digitiser's threads (simulate.threads) */
    double restart_initial, restart_max, restart_reset;  /* back-off; reset once up this long */
    cbf_range groups, udp_ports, engine_katcp, product_katcp;
    /* systemd: cbf@INSTANCE units with the pipeline at CONFDIR/INSTANCE.yaml */
    char systemd_confdir[1024], systemd_unit[64], systemctl[256], scp[256];
    double systemd_poll;              /* seconds between state reads */
    /* slurm: one srun step per engine */
    char srun[256], srun_args[1024];
    array_host hosts[ARRAY_MAX_HOSTS];
    int n_hosts;
    char where_launcher[ARRAY_WHERE], where_hosts[ARRAY_WHERE];
} cbf_controller_config;

/* Reads path (NULL: every default). Relative state_dir, cbf_run (one with
 * a '/') and systemd.confdir are taken from the file's folder. CBF_ECONFIG
 * "file:line:column: ..." for a bad one, CBF_EIO when it cannot be read,
 * CBF_ENOMEM. */
int cbf_controller_config_load(const char *path, cbf_controller_config **out, cbf_error *err);
void cbf_controller_config_free(cbf_controller_config *c);
const char *cbf_launcher_name(cbf_launcher_kind k);
/* Whether this machine has IPv4 address a (a socket binds to it). */
int cbf_address_is_local(const char *a);
/* The host named name, NULL when the configuration has none. */
const array_host *cbf_controller_host(const cbf_controller_config *c, const char *name);

#endif
