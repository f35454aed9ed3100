/* startup.h: cbf-controller's --configure NAME FILE [--capture]: the
 * product configured at start through the master's own katcp request, as a
 * client would configure it, and (with --capture) every correlator and beam
 * stream started through the product controller's ?capture-start, so one
 * command brings an instrument up (docs/controller.md, "One command"). */
#ifndef CBF_CONTROLLER_STARTUP_H
#define CBF_CONTROLLER_STARTUP_H

#include <stdio.h>

#include "cbf/error.h"

/* Sends ?product-configure NAME <FILE's text> to the master at address
 * (host:port), then, when capture, ?capture-start for each correlator and
 * beam stream of the configuration on the product controller it names.
 * Says what happened on out. CBF_EIO for a file it cannot read, CBF_EINVAL
 * with the controller's refusal. */
int cbf_controller_startup(const char *address, const char *name, const char *file, int capture, FILE *out,
                           cbf_error *err);

#endif
