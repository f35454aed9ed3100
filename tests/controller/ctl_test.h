/* ctl_test.h: what the controller's tests share: reading the example
 * configurations (and copies with one thing changed), a scratch folder,
 * and a controller configuration written into it. Failures are cmocka's. */
#ifndef CBF_CTL_TEST_H
#define CBF_CTL_TEST_H

#include <jansson.h>
#include <stddef.h>

#include "config.h"
#include "product.h"

#define CT_NOW 1700000123.75   /* a parse's `now`: sync_time defaults to 1700000123 */

/* dir/name whole, NUL-terminated; *len its length (len may be NULL). */
char *ct_slurp(const char *dir, const char *name, size_t *len);
/* Sets (or, with value NULL, deletes) the member at a '/'-separated path;
 * a number indexes an array, one past its end appends. value is JSON text. */
void ct_mutate(json_t *root, const char *path, const char *value);
/* dir/name as JSON, with edits (path, value pairs, NULL-terminated) applied. */
json_t *ct_json(const char *dir, const char *name, const char *const *edits);
/* The same parsed as a product; NULL with err filled when refused. */
cbf_product *ct_product(const char *dir, const char *name, const char *const *edits, cbf_error *err);
/* A new empty folder under $TMPDIR (or /tmp); ct_rm_rf removes it whole. */
char *ct_tmpdir(const char *what);
void ct_rm_rf(const char *dir);
void ct_write(const char *dir, const char *name, const char *text);
/* yaml written to dir/controller.yaml and loaded; NULL with err when refused. */
cbf_controller_config *ct_config(const char *dir, const char *yaml, cbf_error *err);

#endif
