/* params_priv.h (private to libcbf): how the loader (graph.c, registry.c)
 * hands YAML values to parameter validation (params.c). */
#ifndef CBF_PARAMS_PRIV_H
#define CBF_PARAMS_PRIV_H

#include <stddef.h>
#include <yaml.h>

#include "cbf/error.h"
#include "cbf/params.h"
#include "graph_model.h"

/* One key: value pair as the YAML (or an override) gave it. The document
 * is not const only because libyaml's accessors take it so. */
typedef struct cbf_kv {
    const char *key;
    yaml_document_t *doc;
    yaml_node_t *value;
    char key_where[CBF_WHERE_MAX];   /* of the key: "unknown parameter" points here */
    char where[CBF_WHERE_MAX];       /* of the value */
    const char *override;            /* "node.param=value" when it came from one */
    /* A number list read without a YAML document (cbf_params_build_text's
     * fast path): the values, already in range; doc and value are NULL. */
    bool parsed;
    size_t n;
    int64_t *ilist;
    double *flist;
} cbf_kv;

/* What the messages name. */
typedef struct cbf_params_ctx {
    const char *file;                /* for places inside a value (list items) */
    const char *node;
    const char *node_where;
    const char *plugin;
    const char *request;             /* arguments of this runtime request (frontends/zmq.c),
                                        NULL for parameters; file is NULL then */
} cbf_params_ctx;

/* Validates the given values against the declarations, fills in defaults
 * and checks that required ones are there. CBF_ECONFIG with the place. */
int cbf_params_build(const cbf_param_decl *decls, int n_decls, const cbf_kv *kv, size_t n_kv,
                     const cbf_params_ctx *ctx, cbf_params **out, cbf_error *err);

/* Values given as text, one YAML value each (a scalar or a flow list), as
 * request arguments (frontends/zmq.c) and harness parameters (harness.c) come:
 * each parsed on its own, then validated by cbf_params_build. origin, when
 * not NULL, is what messages quote for the value ("taps=16"); where is the
 * place messages name for all of them. A number list written plainly
 * ("[1, -2.5e3, 7]", as JSON writes one) is read in one linear pass with
 * the same number and range checks, and without its text form (requests
 * are never recorded), so a 65536-channel gain table costs milliseconds;
 * anything else, or any value that fails, goes through libyaml, whose
 * messages are the ones every front end shows. */
typedef struct cbf_text_kv {
    const char *key, *text, *origin;
} cbf_text_kv;
int cbf_params_build_text(const cbf_param_decl *decls, int n_decls, const cbf_text_kv *tv, size_t n,
                          const char *where, const cbf_params_ctx *ctx, cbf_params **out,
                          cbf_error *err);

/* A plugin's declaration table: unique names, known types, choices and
 * record fields well formed, min <= max, and every default valid under its
 * own declaration. CBF_EPLUGIN naming the parameter. */
int cbf_params_check_decls(const cbf_param_decl *decls, int n_decls, cbf_error *err);

/* The candidate closest to name by edit distance, or NULL if none is close
 * enough to be a likely typo. For "did you mean" hints. */
const char *cbf_closest_name(const char *name, const char *const *cands, size_t n);

/* Plain-scalar readers shared with the engine settings (graph.c).
 * cbf_parse_int: 0, or -1 not a number, -2 not a whole number, -3 too large. */
int cbf_parse_int(const char *text, int64_t *out);
int cbf_parse_float(const char *text, double *out);
/* Parses one YAML value from text (a default, an override, a request's
 * argument); on failure says why and leaves doc untouched. Lists and
 * mappings nested deeper than CBF_YAML_MAX_DEPTH are refused before libyaml
 * builds the document (its scanner is quadratic in the flow depth). */
#define CBF_YAML_MAX_DEPTH 64
int cbf_yaml_load_text(const char *text, yaml_document_t *doc, char *why, size_t wl);
/* Whether a scalar node is YAML null (empty, ~, null). */
int cbf_yaml_is_null(const yaml_node_t *n);

#endif
