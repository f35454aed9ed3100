/* product_priv.h: what product.c (the document, its config and the
 * references between streams) and product_streams.c (each stream type's
 * fields and figures) share: the JSON path being read, typed readers that
 * refuse with that path, and the product's ownership of what it copies. */
#ifndef CBF_PRODUCT_PRIV_H
#define CBF_PRODUCT_PRIV_H

#include "product.h"

#define PC_PATH_MAX 1024
/* katsdpcontroller's stream-name pattern from schema 3.4 on. */
#define PC_NAME_CHARS "letters, digits, '_' and '-'"

typedef struct pc_ctx {
    cbf_product *p;
    cbf_error *err;
    char path[PC_PATH_MAX];
    size_t len;
    int minor;                       /* the document's 4.minor */
    const json_t *inputs, *outputs;
} pc_ctx;

/* One field an object may hold: from schema 4.min_minor on, required or not. */
typedef struct pc_field {
    const char *name;
    int min_minor;
    int required;
} pc_field;

typedef enum { PC_ANY, PC_POSITIVE, PC_NONNEG } pc_sign;

/* The path: push returns the length to pop back to. */
size_t pc_push_key(pc_ctx *c, const char *key);
size_t pc_push_index(pc_ctx *c, size_t i);
void pc_pop(pc_ctx *c, size_t len);
/* CBF_ECONFIG with "PATH: message". */
int pc_fail(pc_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with the path key pushed for the one message. */
int pc_fail_at(pc_ctx *c, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *pc_kind_of(const json_t *v);   /* "a string", "an array", ... */
int pc_name_ok(const char *s);             /* matches ^[A-Za-z0-9_-]+$ */

/* Refuses a field the type does not have (or not in this version) and a
 * required one that is missing. what: the type, for the messages. */
int pc_check_fields(pc_ctx *c, const json_t *obj, const pc_field *f, int n, const char *what);
int pc_want_object(pc_ctx *c, const json_t *v);

/* Readers of obj[key]; an absent key leaves *out at its default and *given 0. */
int pc_number(pc_ctx *c, const json_t *obj, const char *key, pc_sign sign, double *out, int *given);
int pc_int(pc_ctx *c, const json_t *obj, const char *key, long long lo, long long hi, int *out, int *given);
int pc_bool(pc_ctx *c, const json_t *obj, const char *key, int *out);
int pc_string(pc_ctx *c, const json_t *obj, const char *key, const char **out);
/* choices: NULL-terminated; *out the index (unchanged when absent). */
int pc_choice(pc_ctx *c, const json_t *obj, const char *key, const char *const *choices, int *out);
/* An array of strings; names: each must be a stream name. */
int pc_strings(pc_ctx *c, const json_t *obj, const char *key, int names, cbf_product_strings *out);

/* Ownership: every copy and array lives until cbf_product_free. */
void *pc_alloc(pc_ctx *c, size_t n);
const char *pc_strdup(pc_ctx *c, const char *s);

/* product_streams.c: one stream's own fields (no references followed), and
 * its figures once its sources are resolved and checked. */
int pc_stream_fields(pc_ctx *c, cbf_product_stream *s, const json_t *obj);
int pc_stream_figures(pc_ctx *c, cbf_product_stream *s, const json_t *obj);
/* The kinds a stream's sources may have, for the reference check. */
int pc_source_ok(const cbf_product_stream *s, const cbf_product_stream *src);
const char *pc_source_kinds(const cbf_product_stream *s);

#endif
