/* plan_priv.h: what plan.c (the product as an array description) and
 * plan_engines.c (the engines and streams of the plan made from it) share. */
#ifndef CBF_CONTROLLER_PLAN_PRIV_H
#define CBF_CONTROLLER_PLAN_PRIV_H

#include "plan.h"

/* pl->engines and pl->streams from the sets' plans. */
int cbf_plan_engines(cbf_product_plan *pl, cbf_error *err);

#endif
