/* yamldoc.h: a YAML file of sections, each checked by libcbf's parameter
 * validation as a node's parameters are, so a mistake reads as it does in
 * a pipeline: file:line:column, the section, the key and a "did you mean".
 * cbf-array's description and budget (desc.c) and cbf-controller's own
 * configuration (tools/controller/config.c) are read through it. */
#ifndef CBF_ARRAY_YAMLDOC_H
#define CBF_ARRAY_YAMLDOC_H

#include <yaml.h>

#include "array.h"
#include "graph/params_priv.h"

typedef struct array_yaml {
    const char *path;
    yaml_document_t doc;
    int loaded;
    cbf_error *err;
} array_yaml;

/* Reads path (what: "array description", "budget", ...) and checks that
 * its root is a mapping. CBF_EIO, CBF_ECONFIG "path:line:column: ...". */
int array_yaml_load(array_yaml *L, const char *path, const char *what);
void array_yaml_free(array_yaml *L);
yaml_node_t *array_yaml_root(array_yaml *L);
/* "file:line:column" of node n into buf (CBF_WHERE_MAX bytes). */
void array_yaml_where(const array_yaml *L, const yaml_node_t *n, char *buf);
/* CBF_ECONFIG at node n's place. */
int array_yaml_fail(const array_yaml *L, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A scalar's text, NULL for anything else. */
const char *array_yaml_scalar(const yaml_node_t *n);
/* The value of key in mapping m, NULL when absent. */
const yaml_node_t *array_yaml_get(array_yaml *L, const yaml_node_t *m, const char *key);
/* Every key of the root is one of keys (n of them); otherwise CBF_ECONFIG
 * at the unknown one, with the nearest known one. */
int array_yaml_known_sections(array_yaml *L, const yaml_node_t *root, const char *const *keys, int n);
/* The mapping m checked against decls as node `node` of plugin `kind`. */
int array_yaml_section(array_yaml *L, const yaml_node_t *m, const char *node, const char *kind,
                       const cbf_param_decl *decls, int n_decls, cbf_params **out);
/* A `hosts` section (a mapping of host name to roles, gpus, interfaces,
 * nic_gbps, control) into hosts; *n the count. where: the section's place. */
int array_yaml_hosts(array_yaml *L, const yaml_node_t *m, array_host *hosts, int *n, char *where);

#endif
