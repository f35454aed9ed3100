/* startup.c: --configure and --capture (startup.h), through the katcp
 * requests a client sends, so the start-up path is the one the tests and
 * katgpucbf's qualification suite drive. */
#include "startup.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cbf/katcp.h"
#include "product.h"

/* How long a configure may take: every engine started and answering. */
#define CONFIGURE_S 600.0
#define CALL_S 60.0

static char *slurp(const char *path, size_t *len, cbf_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        cbf_error_set(err, CBF_EIO, "--configure %s: cannot read it", path);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (size_t k; b && (k = fread(b + n, 1, cap - n - 1, f)) > 0;) {
        n += k;
        if (n + 1 == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb)
                free(b);
            b = nb;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!b || bad) {
        free(b);
        cbf_error_set(err, bad ? CBF_EIO : CBF_ENOMEM, "--configure %s: %s", path,
                      bad ? "read error" : "out of memory");
        return NULL;
    }
    b[n] = '\0';
    *len = n;
    return b;
}

/* One request on a fresh connection; its reply's arguments after the
 * status stay in *res. A refusal becomes CBF_EINVAL with its message. */
static int call(const char *address, const char *name, size_t n, const char *const *args, double timeout,
                cbf_katcp_result *res, cbf_error *err)
{
    cbf_katcp_client *cl = NULL;
    int rc = cbf_katcp_client_connect(address, 10.0, &cl, err);
    if (!rc)
        rc = cbf_katcp_client_call(cl, name, n, args, timeout, res, err);
    cbf_katcp_client_close(cl);
    if (rc)
        return rc;
    const char *st = cbf_katcp_result_status(res);
    if (!st || strcmp(st, "ok")) {
        const cbf_katcp_msg *r = &res->reply;
        cbf_error_set(err, CBF_EINVAL, "?%s: %s %s", name, st ? st : "(no status)",
                      r->n_args > 1 ? r->args[1] : "");
        cbf_katcp_result_free(res);
        return CBF_EINVAL;
    }
    return 0;
}

int cbf_controller_startup(const char *address, const char *name, const char *file, int capture, FILE *out,
                           cbf_error *err)
{
    size_t len;
    char *json = slurp(file, &len, err);
    if (!json)
        return err->code;
    cbf_katcp_result res = {0};
    const char *args[] = {name, json};
    int rc = call(address, "product-configure", 2, args, CONFIGURE_S, &res, err);
    if (rc) {
        free(json);
        return rc;
    }
    /* !product-configure ok NAME HOST PORT */
    const cbf_katcp_msg *r = &res.reply;
    char product[300] = "";
    if (r->n_args >= 4)
        snprintf(product, sizeof product, "%s:%s", r->args[2], r->args[3]);
    fprintf(out, "cbf-controller: product %s configured; its product controller on %s\n",
            r->n_args >= 2 ? r->args[1] : name, product);
    fflush(out);
    cbf_katcp_result_free(&res);
    cbf_product *p = NULL;
    if (capture && !product[0])
        rc = cbf_error_set(err, CBF_EINVAL, "?product-configure: the reply names no product controller");
    if (!rc && capture)
        rc = cbf_product_parse(json, len, (double)time(NULL), &p, err);
    for (int i = 0; !rc && p && i < p->n_streams; i++) {
        const cbf_product_stream *s = &p->streams[i];
        if (s->kind != CBF_STREAM_BCP && s->kind != CBF_STREAM_TACV)
            continue;
        const char *a[] = {s->name};
        if (!(rc = call(product, "capture-start", 1, a, CALL_S, &res, err))) {
            fprintf(out, "cbf-controller: capture-start %s\n", s->name);
            cbf_katcp_result_free(&res);
        }
    }
    fflush(out);
    cbf_product_free(p);
    free(json);
    return rc;
}
