/* product_ctl.h: one product's controller (docs/controller.md, "Running
 * cbf-controller"): the product configured and launched (run.h), and a
 * katcp server of its own on the product's port that shows the stream
 * sensors, every engine's state and its own sensors mirrored as
 * TASK.NAME, flags the inputs and channels of an engine that is down, and
 * takes katsdpcontroller's product requests (requests.h), sending each
 * engine its share. The master controller (master.h) keeps one per
 * product. */
#ifndef CBF_PRODUCT_CTL_H
#define CBF_PRODUCT_CTL_H

#include <stddef.h>

#include "cbf/error.h"
#include "config.h"
#include "resources.h"

typedef struct cbf_product_ctl cbf_product_ctl;

/* Told (on the product's supervisor thread, with no lock of the product's
 * held) whenever an engine's state, and so the device-status, changes. */
typedef void (*cbf_product_ctl_changed)(void *ctx);

/* Configures product `name` from json (cbf_product_configure: parse,
 * plan, launch; the error names the JSON path, or the engine, host and
 * reason) and opens its controller on host:PORT, PORT the product's katcp
 * port. Returns once every engine is up and the server serves. */
int cbf_product_ctl_start(const char *name, const char *json, size_t len, const char *host,
                          const cbf_controller_config *c, cbf_resources *res, cbf_product_ctl_changed changed,
                          void *ctx, cbf_product_ctl **out, cbf_error *err);
/* Closes the server, stops the mirror and every engine, frees pc. 0 when
 * no engine remains. */
int cbf_product_ctl_stop(cbf_product_ctl *pc, cbf_error *err);

const char *cbf_product_ctl_name(const cbf_product_ctl *pc);
const char *cbf_product_ctl_json(const cbf_product_ctl *pc, size_t *len);
/* The server's bound "host:port", its host and port. */
const char *cbf_product_ctl_address(const cbf_product_ctl *pc);
const char *cbf_product_ctl_host(const cbf_product_ctl *pc);
unsigned cbf_product_ctl_port(const cbf_product_ctl *pc);
/* UNIX seconds the product was configured. */
double cbf_product_ctl_started(const cbf_product_ctl *pc);
/* katsdpcontroller's product-state word ("idle", "capturing") and the
 * device-status ("ok", "degraded": an engine is down, "fail": one failed). */
const char *cbf_product_ctl_state(cbf_product_ctl *pc);
const char *cbf_product_ctl_status(cbf_product_ctl *pc);

#endif
