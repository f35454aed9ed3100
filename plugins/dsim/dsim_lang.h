/* dsim_lang.h: katgpucbf's dsim signal language, parsed into a program.
 *
 * A program is a sequence of statements, each ended by ';': `NAME = EXPR;`
 * defines a variable, a bare `EXPR;` is the signal of the next output (one
 * per polarisation). Expressions combine signals with + - * (* first, all
 * left-associative) and parentheses; a signal is a number (a constant),
 * a variable defined before, or one of
 *
 *   cw(amplitude, frequency)              a cosine, frequency in Hz
 *   multicw(m, a0, a_step, f0, f_step)    sum over i < m of cw(a0 + i a_step, f0 + i f_step)
 *   comb(amplitude, frequency)            one-sample impulses, frequency per second
 *   wgn(std[, entropy])                   white Gaussian noise; entropy a non-negative integer
 *   delay(signal, samples)                the signal `samples` later (an integer, may be negative)
 *   nodither(signal)                      the output is not dithered; only around a whole output
 *
 * Numbers are written as in katgpucbf ([+-] digits, a '.', an exponent);
 * entropy and m are unsigned integers, a delay a signed one. A `wgn`
 * written without entropy is given a random one when parsed, so a
 * variable holding it plays the same noise wherever it is used and two
 * `wgn` are independent; the same entropy gives the same noise. Values
 * are in units of full scale. What each term means in samples (rounding
 * to the period, dither) is dsim_eval.h's.
 *
 * The program is a directed acyclic graph of terms: a variable is its
 * term, shared by every use. Programs are reference counted, so signals
 * built from one request share it. */
#ifndef CBF_DSIM_LANG_H
#define CBF_DSIM_LANG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cbf/error.h>

typedef enum cbf_dsim_op {
    CBF_DSIM_CONST,
    CBF_DSIM_CW,
    CBF_DSIM_MULTICW,
    CBF_DSIM_COMB,
    CBF_DSIM_WGN,
    CBF_DSIM_DELAY,
    CBF_DSIM_NODITHER,
    CBF_DSIM_ADD,
    CBF_DSIM_SUB,
    CBF_DSIM_MUL,
} cbf_dsim_op;

#define CBF_DSIM_MAX_ARGS 5

typedef struct cbf_dsim_term {
    cbf_dsim_op op;
    int a, b;               /* operand terms (earlier in the array); -1: none */
    int n_args;
    double arg[CBF_DSIM_MAX_ARGS];  /* the numbers written, in order (CONST: its value) */
    uint8_t whole;          /* bit k: arg k was written as an integer (printed as one) */
    int64_t delay;          /* DELAY: samples */
    uint64_t entropy;       /* WGN: the entropy modulo 2^64 (the noise's key) */
    int entropy_at;         /* WGN: offset of its decimal digits in the program's strings */
    int col;                /* 1-based column of the term in the text */
} cbf_dsim_term;

typedef struct cbf_dsim_prog {
    int refs;
    int n_terms, n_outputs;
    cbf_dsim_term *terms;
    int *outputs;           /* root term of each output */
    char *strings;          /* entropies' digits, NUL separated */
} cbf_dsim_prog;

/* Limits, each refused with a message saying which. */
#define CBF_DSIM_MAX_TERMS 16384
#define CBF_DSIM_MAX_DEPTH 256      /* operands within operands */
#define CBF_DSIM_MAX_MULTICW 65536  /* tones of one multicw */

/* Where a wgn without entropy gets its entropy; NULL: the system's random
 * source (getrandom). Tests give a counter. */
typedef uint64_t (*cbf_dsim_entropy_fn)(void *ctx);
/* 64 random bits from the system (ctx unused). */
uint64_t cbf_dsim_system_entropy(void *ctx);

/* Parses text (NUL-terminated). On error: CBF_EINVAL (or CBF_ENOMEM) and
 * a message naming the column (line and column when the text has several
 * lines) and the term or argument, *out untouched. The program has one
 * reference. */
int cbf_dsim_prog_parse(const char *text, cbf_dsim_entropy_fn entropy, void *ctx,
                        cbf_dsim_prog **out, cbf_error *err);
void cbf_dsim_prog_ref(cbf_dsim_prog *p);
void cbf_dsim_prog_unref(cbf_dsim_prog *p);

/* Whether output o is a nodither(...) (its samples are not dithered). */
bool cbf_dsim_prog_nodither(const cbf_dsim_prog *p, int o);

/* Output o as katgpucbf writes a signal (its `signals` sensor): every
 * variable written out, every wgn with its entropy, operations in
 * parentheses, numbers as Python prints them, so the text parses back to
 * the same samples. Appends to out (len bytes used of cap, NUL kept);
 * returns false when it did not fit (the text is then cut). */
bool cbf_dsim_prog_format(const cbf_dsim_prog *p, int o, char *out, size_t *len, size_t cap);

#endif
