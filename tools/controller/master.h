/* master.h: cbf-controller's master controller (docs/controller.md,
 * "Running cbf-controller"): katsdpcontroller's product-configure,
 * -deconfigure, -reconfigure, -list and -configure-versions requests and
 * its products, device-status and per-product sensors, one product
 * controller (product_ctl.h) per configured product. */
#ifndef CBF_MASTER_H
#define CBF_MASTER_H

#include "cbf/error.h"
#include "config.h"
#include "resources.h"

typedef struct cbf_master cbf_master;

/* Opens the master's katcp server on host:port (port 0: a free one) and
 * serves it; product controllers listen on host too. */
int cbf_master_open(const char *host, unsigned port, const cbf_controller_config *c, cbf_resources *res,
                    cbf_master **out, cbf_error *err);
const char *cbf_master_address(const cbf_master *m);
/* Closes the server and deconfigures every product (no engine is left). */
void cbf_master_close(cbf_master *m);

#endif
