/* run.h: one configured product, from `?product-configure NAME JSON` to
 * `?product-deconfigure NAME`: its model (product.h), its plan and folder
 * (plan.h), its supervised engines (supervise.h) and its product
 * controller's katcp port, made and undone together, so a master
 * controller keeps one of these per product. */
#ifndef CBF_CONTROLLER_RUN_H
#define CBF_CONTROLLER_RUN_H

#include "plan.h"
#include "supervise.h"

typedef struct cbf_running_product {
    char name[64];
    cbf_product *product;
    cbf_product_plan *plan;
    cbf_supervisor *supervisor;
    unsigned katcp_port;              /* the product controller's, from ranges.product_katcp */
    cbf_resources *res;
} cbf_running_product;

/* Parses json (now: the sync_time of a digitiser without one), plans it as
 * `name` on the controller's hosts, writes its folder (the pipelines, and
 * the configuration as product.json), takes a product-controller port and
 * launches the engines; returns once they are all up. The error says why
 * not: the JSON path of the fault, the range that is full, or the engine,
 * host and reason it could not start; nothing is left taken or running.
 * exec NULL: the real programs. cb: every engine's changes of state. */
int cbf_product_configure(const char *name, const char *json, size_t len, double now,
                          const cbf_controller_config *c, cbf_resources *res, const cbf_launch_exec *exec,
                          cbf_engine_callback cb, void *ctx, cbf_running_product **out, cbf_error *err);
/* Stops every engine, gives back the groups and ports and frees rp (the
 * folder stays, with the logs). 0 when no engine remains. */
int cbf_product_deconfigure(cbf_running_product *rp, cbf_error *err);

#endif
