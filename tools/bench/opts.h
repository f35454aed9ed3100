/* opts.h: the option parsing every cbf-bench area shares. An area lists its
 * options in a table (name, kind, where the value goes, accepted range) and
 * hands argv to cbf_bench_parse, so each area's file holds what it measures
 * and not another copy of a hand-rolled argv loop. */
#ifndef CBF_BENCH_OPTS_H
#define CBF_BENCH_OPTS_H

#include <stddef.h>

typedef enum cbf_bench_opt_kind {
    CBF_BOPT_END = 0,   /* ends the table */
    CBF_BOPT_INT,       /* int *: one integer in [lo, hi] */
    CBF_BOPT_SIZE,      /* size_t *: one count in [lo, hi] (0x.. accepted) */
    CBF_BOPT_REAL,      /* double *: one number in [lo, hi] */
    CBF_BOPT_INTS,      /* int *, count, max: a comma list, each in [lo, hi] */
    CBF_BOPT_REALS,     /* double *, count, max: a comma list, each in [lo, hi] */
    CBF_BOPT_FLAG,      /* int *: takes no value; stores `set` */
    CBF_BOPT_TEXT,      /* const char **: the text, checked by `check` when given */
} cbf_bench_opt_kind;

typedef struct cbf_bench_opt {
    const char *name;          /* "--ants" */
    cbf_bench_opt_kind kind;
    void *value;
    int *count;                /* lists: entries read */
    int max;                   /* lists: capacity of value */
    double lo, hi;             /* accepted range */
    int set;                   /* flags: the value stored */
    /* TEXT (and a custom form of any kind): 0 when v is acceptable; may
     * store into value itself (value is then what it fills). */
    int (*check)(const char *v, void *value);
    const char *alias;         /* a second spelling ("-v"), or NULL */
} cbf_bench_opt;

/* Parses argv[1 .. argc-1] against the table. --help or -h prints usage to
 * stdout and returns 1; an unknown option, a missing value or one that is
 * out of range or malformed prints "cbf-bench AREA: OPTION: why" and the
 * usage to stderr and returns 2; else 0 with every value stored. */
int cbf_bench_parse(const char *area, const char *usage, int argc, char **argv, const cbf_bench_opt *opts);

#endif
