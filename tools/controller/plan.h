/* plan.h: a product configuration (product.h) planned as cbf engines
 * (docs/controller.md, "Planning a product").
 *
 * The product fills an array description (tools/array/array.h) as
 * docs/notes/controller-research.md section 3 maps it, cbf-array's planner
 * places the engines on the controller's hosts and checks them against
 * their NICs, and its writer puts one pipeline per engine into the
 * product's folder under the controller's state_dir. Multicast groups, UDP
 * ports and engine katcp ports come from the controller's ranges
 * (resources.h), so two products never share one. What the planner cannot
 * run yet is refused with the JSON path of the stream and the reason. */
#ifndef CBF_CONTROLLER_PLAN_H
#define CBF_CONTROLLER_PLAN_H

#include "array.h"
#include "config.h"
#include "product.h"
#include "resources.h"

/* One engine of the plan: what starts it, where it listens and what it
 * carries (what to flag while it is down). */
typedef struct cbf_plan_engine {
    char name[32];            /* the plan's process: xeng0, feng3, digitiser1 (NAME.yaml, NAME.log) */
    char task[192];           /* katsdpcontroller's task name: xb.BCP.0, f.ACV.3, sim.dsim001.1712000000.0 */
    int kind;                 /* PROC_XENG, PROC_FENG, PROC_DIGITISER (array.h) */
    const char *kind_name;    /* "xeng", "feng", "dsim" */
    int index;                /* substream, antenna, digitiser antenna */
    int stage;                /* start order: every engine of stage s once those of s - 1 are up */
    char host[64];            /* its host in the controller's configuration */
    char address[64];         /* its katcp address: the host's control address */
    char netns[64];           /* the host's network namespace ("": none), where the local launcher runs it */
    int katcp_port;
    int gpu;                  /* -1: none given (gpu: auto) */
    char pipeline[1100], log[1100];
    /* the channeliser inputs it carries (indices into its input_labels): an
     * F-engine's two, or every input reading a digitiser's streams */
    int *inputs;
    int n_inputs;
    int first_channel, n_channels;   /* an X-engine's channels; 0 0 otherwise */
    /* Its channeliser set (cbf_plan_set): the channeliser and correlator it
     * serves (NULL for a dsim, which serves every set); a dsim's digitiser
     * antennas. */
    int set;
    const cbf_product_stream *acv, *bcp;
    int dig_first, dig_count;
    char carries[512];        /* the same in words, for messages */
} cbf_plan_engine;

/* Where one of the product's streams is sent: count groups from first,
 * group first.addr + i on port first.port (+ i unless first.same_port). */
typedef struct cbf_plan_stream {
    const cbf_product_stream *stream;
    array_group first;
    int count;
} cbf_plan_stream;

/* One channeliser (gpucbf.antenna_channelised_voltage) and what is planned
 * from it, one array description: its F-engines (one per antenna, joining
 * the digitisers' groups), its correlator's X-engines and the beams they
 * form. The simulated digitisers are set 0's; a second channeliser's
 * F-engines read the same groups (katgpucbf runs one F-engine per antenna
 * for all its channelisers; cbf one per antenna per channeliser). */
#define CBF_PLAN_MAX_SETS 4
typedef struct cbf_plan_set {
    const cbf_product_stream *acv, *bcp;
    const cbf_product_stream *tacv[ARRAY_MAX_BEAMS];   /* its beams, in beam order */
    int n_tacv;
    array_desc *desc;
    array_plan plan;
} cbf_plan_set;

typedef struct cbf_product_plan {
    char name[64];
    char dir[1100];                      /* state_dir/NAME */
    const cbf_product *product;          /* not owned: outlives the plan */
    cbf_plan_set sets[CBF_PLAN_MAX_SETS];
    int n_sets;
    cbf_plan_engine *engines;            /* in start order */
    int n_engines, n_stages;
    cbf_plan_stream *streams;            /* every digitiser, the channeliser, correlator and beams */
    int n_streams;
    int *dig_stream;                     /* per product stream: its digitiser stream (2 x digitiser
                                            antenna + pol, the array's), -1 for the others */
    double dsim_rate_gbps;               /* each simulated digitiser's send rate (0: unpaced) */
    /* what was taken from the controller's ranges, given back by _free */
    cbf_resources *res;
    unsigned group0, udp0, katcp0;
    int n_groups, n_katcp, n_udp;
} cbf_product_plan;

/* The set whose channeliser, correlator or beam stream s is; NULL: none
 * (a digitiser's). */
const cbf_plan_set *cbf_product_plan_set_of(const cbf_product_plan *plan, const cbf_product_stream *s);

/* Plans product p as `name` (katsdpcontroller's product name) on the
 * controller's hosts, taking groups and ports from res. CBF_ECONFIG "PATH:
 * reason" for what cannot be planned (PATH a JSON path of the product),
 * CBF_EINVAL for a plan over a host's budget, CBF_EAGAIN when a range is
 * full, CBF_ENOMEM. */
int cbf_product_plan_make(const cbf_product *p, const char *name, const cbf_controller_config *c,
                          cbf_resources *res, cbf_product_plan **out, cbf_error *err);
/* Writes the pipelines, processes.tsv and multicast.tsv into plan->dir
 * (made, with state_dir, when missing). CBF_EIO naming the file. */
int cbf_product_plan_write(const cbf_product_plan *plan, cbf_error *err);
/* Gives back the groups and ports and frees the plan (the files stay). */
void cbf_product_plan_free(cbf_product_plan *plan);
const cbf_plan_stream *cbf_product_plan_stream(const cbf_product_plan *plan, const char *name);
/* katsdpcontroller's product names: [A-Za-z0-9_]+ (63 at most here). */
int cbf_product_name_ok(const char *name);

#endif
