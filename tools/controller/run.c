/* run.c: a product configured and deconfigured (run.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

static int save_json(const cbf_product_plan *pl, const char *json, size_t len, cbf_error *err)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/product.json", pl->dir);
    FILE *f = fopen(path, "wb");
    if (!f)
        return cbf_error_set(err, CBF_EIO, "%s: cannot write: %s", path, strerror(errno));
    int bad = fwrite(json, 1, len, f) != len;
    bad |= fclose(f);
    return bad ? cbf_error_set(err, CBF_EIO, "%s: write failed", path) : 0;
}

static void release(cbf_running_product *rp)
{
    cbf_resources_give(rp->res, CBF_RES_PRODUCT_KATCP, rp->katcp_port, rp->katcp_port ? 1 : 0);
    cbf_product_plan_free(rp->plan);
    cbf_product_free(rp->product);
    free(rp);
}

int cbf_product_configure(const char *name, const char *json, size_t len, double now,
                          const cbf_controller_config *c, cbf_resources *res, const cbf_launch_exec *exec,
                          cbf_engine_callback cb, void *ctx, cbf_running_product **out, cbf_error *err)
{
    *out = NULL;
    cbf_running_product *rp = calloc(1, sizeof *rp);
    if (!rp)
        return cbf_error_set(err, CBF_ENOMEM, "out of memory");
    snprintf(rp->name, sizeof rp->name, "%s", name);
    rp->res = res;
    int rc = cbf_product_parse(json, len, now, &rp->product, err);
    if (!rc && c->jones_per_batch != (1 << 20))
        rc = cbf_product_set_jones_per_batch(rp->product, c->jones_per_batch, err);
    if (!rc)
        rc = cbf_product_plan_make(rp->product, name, c, res, &rp->plan, err);
    if (!rc)
        rc = cbf_product_plan_write(rp->plan, err);
    if (!rc)
        rc = save_json(rp->plan, json, len, err);
    if (!rc && (rc = cbf_resources_take(res, CBF_RES_PRODUCT_KATCP, 1, &rp->katcp_port, err)))
        cbf_error_prefix(err, "product \"%s\"", name);
    if (!rc)
        rc = cbf_supervisor_start(rp->plan, c, exec, cb, ctx, &rp->supervisor, err);
    if (rc) {
        release(rp);
        return rc;
    }
    *out = rp;
    return 0;
}

int cbf_product_deconfigure(cbf_running_product *rp, cbf_error *err)
{
    if (!rp)
        return 0;
    int rc = cbf_supervisor_stop(rp->supervisor, err);
    release(rp);
    return rc;
}
