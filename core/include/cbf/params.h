/* cbf/params.h: parameter declarations (what a plugin accepts) and the
 * validated values a node receives.
 *
 * The core checks every YAML value (and every --set override) against the
 * plugin's declarations before the plugin sees it: unknown names, missing
 * required values, wrong types and out-of-range values are reported with
 * file:line:column. The accessors below therefore never fail for a declared
 * name; asking for an undeclared name is a plugin bug and returns 0/NULL. */
#ifndef CBF_PARAMS_H
#define CBF_PARAMS_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cbf_param_type {
    CBF_PARAM_INT,        /* int64; also 2**20, 1_048_576, 0x10, and 1712e6 when exactly whole */
    CBF_PARAM_FLOAT,      /* double; YAML integer or float */
    CBF_PARAM_BOOL,       /* true/false */
    CBF_PARAM_STRING,     /* any scalar */
    CBF_PARAM_CHOICE,     /* one of decl.choices, "a|b|c" */
    CBF_PARAM_INT_LIST,   /* sequence of integers; range applies to each element */
    CBF_PARAM_FLOAT_LIST, /* sequence of numbers; range applies to each element */
    CBF_PARAM_RECORDS,    /* sequence of mappings whose fields are numbers; decl.choices
                             lists the fields, "name" (required) or "name=default",
                             comma separated, e.g. "frequency,amplitude,phase=0" */
} cbf_param_type;

typedef struct cbf_param_decl {
    const char *name;
    cbf_param_type type;
    const char *def;      /* default written as YAML would ("16", "[1, 2]", "hann");
                             NULL: the parameter is required */
    int has_range;        /* INT, FLOAT and lists: min <= value <= max */
    double min, max;
    const char *choices;  /* CHOICE: "a|b"; RECORDS: field list (see above) */
    const char *doc;      /* one line, shown by cbf-inspect */
    unsigned flags;       /* CBF_PARAM_* flags below; last, so positional tables still compile */
} cbf_param_decl;

/* Flags (cbf_param_decl.flags). */
/* A request argument (INT) that is an ADC timestamp: a client may give
 * NAME_unix instead, UNIX seconds (a number, or a string for more digits
 * than a double holds), which the core turns into
 * round((unix - sync_time) x adc_sample_rate) through the engine's time
 * reference before the plugin sees it (docs/control.md, "Time"). The core
 * also raises the node's steady-state-timestamp to the reply's NAME. */
#define CBF_PARAM_TIMESTAMP (1u << 0)

/* Convenience for declaration tables: { "taps", CBF_PARAM_INT, "16", CBF_RANGE(1, 16), NULL, "..." } */
#define CBF_RANGE(lo, hi) 1, (double)(lo), (double)(hi)
#define CBF_NORANGE 0, 0.0, 0.0

typedef struct cbf_params cbf_params;

int64_t cbf_params_int(const cbf_params *p, const char *name);
double cbf_params_float(const cbf_params *p, const char *name);
bool cbf_params_bool(const cbf_params *p, const char *name);
/* STRING and CHOICE values. The string lives as long as the params. */
const char *cbf_params_string(const cbf_params *p, const char *name);

/* Lists (INT_LIST, FLOAT_LIST, RECORDS). */
size_t cbf_params_len(const cbf_params *p, const char *name);
int64_t cbf_params_int_at(const cbf_params *p, const char *name, size_t i);
double cbf_params_float_at(const cbf_params *p, const char *name, size_t i);
/* RECORDS: field of record i (its declared default when the YAML left it out). */
double cbf_params_field(const cbf_params *p, const char *name, size_t i, const char *field);

/* Whether the YAML (or a --set) gave this parameter, rather than its default. */
bool cbf_params_given(const cbf_params *p, const char *name);

/* "file:line:column" of the parameter's value in the YAML (of the node when
 * the value is a default), for plugin-level checks: a plugin that rejects a
 * combination of values names the place with this. Never NULL. */
const char *cbf_params_where(const cbf_params *p, const char *name);

/* Iteration, for sinks that record the producing node's parameters as
 * metadata: name and value as YAML-ish text ("16", "[1, 2]", "hann"). */
size_t cbf_params_count(const cbf_params *p);
const char *cbf_params_name_at(const cbf_params *p, size_t i);
const char *cbf_params_text_at(const cbf_params *p, size_t i);

#ifdef __cplusplus
}
#endif
#endif
