/* katgpucbf's signal language (plugins/dsim/dsim_lang.h): the strings the
 * qualification suite sends and katgpucbf's own examples parse to the
 * terms meant and print back as katgpucbf's `signals` sensor writes them
 * (which parses again to the same text); malformed programs are refused
 * with the column and the term or argument at fault. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dsim_lang.h"

/* Entropy 1000, 1001, ... for each wgn written without one. */
static uint64_t counter(void *ctx)
{
    return (*(uint64_t *)ctx)++;
}

static cbf_dsim_prog *parse(const char *text)
{
    uint64_t next = 1000;
    cbf_error err;
    cbf_error_clear(&err);
    cbf_dsim_prog *p = NULL;
    int rc = cbf_dsim_prog_parse(text, counter, &next, &p, &err);
    if (rc)
        fail_msg("'%s' refused: %s", text, err.msg);
    return p;
}

/* Every output printed, "; " between and ";" after, as katgpucbf's
 * format_signals. */
static const char *format(const cbf_dsim_prog *p)
{
    static char out[4096];
    size_t len = 0;
    out[0] = '\0';
    for (int o = 0; o < p->n_outputs; o++) {
        assert_true(cbf_dsim_prog_format(p, o, out, &len, sizeof out));
        len += (size_t)snprintf(out + len, sizeof out - len, o + 1 < p->n_outputs ? "; " : ";");
    }
    return out;
}

static void check_format(const char *text, int outputs, const char *want)
{
    cbf_dsim_prog *p = parse(text);
    assert_int_equal(p->n_outputs, outputs);
    const char *got = format(p);
    if (strcmp(got, want))
        fail_msg("'%s' printed as '%s', want '%s'", text, got, want);
    /* What it prints reads back to itself (entropies written out). */
    char again[4096];
    snprintf(again, sizeof again, "%s", got);
    cbf_dsim_prog *q = parse(again);
    assert_string_equal(format(q), want);
    cbf_dsim_prog_unref(q);
    cbf_dsim_prog_unref(p);
}

/* The qualification suite's strings (qualification/ of katgpucbf). */
static void suite_strings(void **state)
{
    (void)state;
    check_format("common=nodither(wgn(0.1)); common; common;", 2,
                 "nodither(wgn(0.1, 1000)); nodither(wgn(0.1, 1000));");
    check_format("common=wgn(0.03, 1);common;common;", 2, "wgn(0.03, 1); wgn(0.03, 1);");
    check_format("0;0;", 2, "0.0; 0.0;");
    check_format("cw(0.1, 400e6); cw(0.1, 400e6);", 2,
                 "cw(0.1, 400000000.0); cw(0.1, 400000000.0);");
    check_format("common = nodither(wgn(0.05, 1)); common; common;", 2,
                 "nodither(wgn(0.05, 1)); nodither(wgn(0.05, 1));");
    check_format("nodither(delay(wgn(0.05, 1), -8));nodither(wgn(0.05, 1));", 2,
                 "nodither(delay(wgn(0.05, 1), -8)); nodither(wgn(0.05, 1));");
    check_format("multicw(4, 0.2475, 0.0, 352741644.85931396, 2612.5); "
                 "multicw(4, 0.2475, 0.0, 352743277.35931396, 2612.5);", 2,
                 "multicw(4, 0.2475, 0.0, 352741644.85931396, 2612.5); "
                 "multicw(4, 0.2475, 0.0, 352743277.35931396, 2612.5);");
    check_format("common = cw(0.05, 100000000.0) + cw(0.05, 200001234.5) + cw(0.05, 3e8); "
                 "common; common;", 2,
                 "((cw(0.05, 100000000.0) + cw(0.05, 200001234.5)) + cw(0.05, 300000000.0)); "
                 "((cw(0.05, 100000000.0) + cw(0.05, 200001234.5)) + cw(0.05, 300000000.0));");
    check_format("cw(0.031311154598825834, 1.2e-05);cw(0.5, 107e6);", 2,
                 "cw(0.03131115459882584, 1.2e-05); cw(0.5, 107000000.0);");
}

/* katgpucbf's own examples of the grammar (test/dsim/test_signal.py). */
static void grammar(void **state)
{
    (void)state;
    check_format("cw(1, 2.0);", 1, "cw(1, 2.0);");
    check_format("cw(1.5, 2.5); cw(3.0, 2.0);", 2, "cw(1.5, 2.5); cw(3.0, 2.0);");
    check_format("multicw(5, 0.2, 0.1, 0.3, 0.4);", 1, "multicw(5, 0.2, 0.1, 0.3, 0.4);");
    check_format("comb(1.0, 2);", 1, "comb(1.0, 2);");
    check_format("c = cw(1.5, +2.5e0); c + cw(1, 2);", 1, "(cw(1.5, 2.5) + cw(1, 2));");
    check_format("cw(1, 2) - cw(3, 4) * cw(5, 6);", 1, "(cw(1, 2) - (cw(3, 4) * cw(5, 6)));");
    check_format("cw(1, 2) + 0.25;", 1, "(cw(1, 2) + 0.25);");
    check_format("delay(cw(1, 2) - wgn(1.5, 12345), 42);", 1,
                 "delay((cw(1, 2) - wgn(1.5, 12345)), 42);");
    check_format("delay(1, -123);", 1, "delay(1.0, -123);");
    check_format("nodither(cw(1, 2));", 1, "nodither(cw(1, 2));");
    check_format("x = nodither(1); x; x;", 2, "nodither(1.0); nodither(1.0);");
    /* Parentheses, precedence, blanks and new lines, signs, exponents. */
    check_format("(cw(1,2) + 1) * 2;", 1, "((cw(1, 2) + 1.0) * 2.0);");
    check_format("2 * (1 - -3) - .5e1 ;", 1, "((2.0 * (1.0 - -3.0)) - 5.0);");
    check_format("\n a = 1 ;\n\t a * a ;\r\n", 1, "(1.0 * 1.0);");
    check_format("(nodither(1));", 1, "nodither(1.0);");
    check_format("cw(1., 1e+3) + cw(-1, 1E-3);", 1, "(cw(1.0, 1000.0) + cw(-1, 0.001));");
    check_format("1e16; 123456789012345678; 1e-5;", 3, "1e+16; 1.2345678901234568e+17; 1e-05;");
    /* Entropy: leading zeros dropped (Python's int), digits beyond 64 bits kept. */
    check_format("wgn(0.5, 007);", 1, "wgn(0.5, 7);");
    check_format("wgn(2, 340282366920938463463374607431768211455);", 1,
                 "wgn(2, 340282366920938463463374607431768211455);");
    /* A later definition is the one later uses see; a name may be a function's. */
    check_format("a = 1; a = a + 1; a;", 1, "(1.0 + 1.0);");
    check_format("cw = 1; cw;", 1, "1.0;");
    check_format("", 0, "");
    check_format("  \n ", 0, "");
}

static void terms(void **state)
{
    (void)state;
    cbf_dsim_prog *p = parse("a = wgn(0.5); b = wgn(0.7); a; a; b; wgn(1, 18446744073709551617);");
    assert_int_equal(p->n_outputs, 4);
    const cbf_dsim_term *t0 = &p->terms[p->outputs[0]], *t2 = &p->terms[p->outputs[2]];
    /* A variable is one term: the same noise wherever it is used. */
    assert_int_equal(p->outputs[0], p->outputs[1]);
    assert_int_equal(t0->op, CBF_DSIM_WGN);
    assert_int_equal(t0->entropy, 1000);
    assert_int_equal(t2->entropy, 1001);
    /* 2^64 + 1: the key is the entropy modulo 2^64. */
    assert_int_equal(p->terms[p->outputs[3]].entropy, 1);
    cbf_dsim_prog_unref(p);

    p = parse("nodither(cw(0.1, 4e8)); delay(multicw(3, 0.5, -0.1, 1e6, 2e3), 7);");
    assert_true(cbf_dsim_prog_nodither(p, 0));
    assert_false(cbf_dsim_prog_nodither(p, 1));
    const cbf_dsim_term *d = &p->terms[p->outputs[1]];
    assert_int_equal(d->op, CBF_DSIM_DELAY);
    assert_int_equal(d->delay, 7);
    const cbf_dsim_term *m = &p->terms[d->a];
    assert_int_equal(m->op, CBF_DSIM_MULTICW);
    assert_int_equal(m->n_args, 5);
    assert_true(m->arg[0] == 3 && m->arg[1] == 0.5 && m->arg[2] == -0.1 && m->arg[3] == 1e6 &&
                m->arg[4] == 2e3);
    assert_int_equal(m->col, 31);
    cbf_dsim_prog_unref(p);

    /* Without an entropy source given, two parses draw different entropies. */
    cbf_dsim_prog *q1, *q2;
    cbf_error err;
    assert_int_equal(cbf_dsim_prog_parse("wgn(1);", NULL, NULL, &q1, &err), 0);
    assert_int_equal(cbf_dsim_prog_parse("wgn(1);", NULL, NULL, &q2, &err), 0);
    assert_true(q1->terms[0].entropy != q2->terms[0].entropy);
    cbf_dsim_prog_unref(q1);
    cbf_dsim_prog_unref(q2);
}

/* text is refused, the message holding each of the NULL-ended parts. */
static void refused(const char *text, ...)
{
    uint64_t next = 1;
    cbf_error err;
    cbf_error_clear(&err);
    cbf_dsim_prog *p = NULL;
    int rc = cbf_dsim_prog_parse(text, counter, &next, &p, &err);
    if (rc != CBF_EINVAL)
        fail_msg("'%s' accepted (rc %d)", text, rc);
    assert_null(p);
    va_list ap;
    va_start(ap, text);
    for (const char *part; (part = va_arg(ap, const char *));)
        if (!strstr(err.msg, part))
            fail_msg("'%s': message '%s' lacks '%s'", text, err.msg, part);
    va_end(ap);
}

static void malformed(void **state)
{
    (void)state;
    /* Cut off part-way (katgpucbf: Expected ';'). */
    refused("cw(1, 2) +", "column 11:", "expected a signal", "found the end of the text", NULL);
    refused("a = cw(1, 2)", "column 13:", "expected ';' to end the statement", NULL);
    refused("cw(1, 2); cw(3, 4)", "column 19:", "expected ';'", NULL);
    refused("common=wgn(0.1) common;", "column 17:", "expected ';'", "found 'common'", NULL);
    refused("cw(1,2);;", "column 9:", "expected a signal", "found ';'", NULL);
    /* Names. */
    refused("foo;", "column 1:", "unknown variable 'foo'", NULL);
    refused("a = 1; a + b;", "column 12:", "unknown variable 'b'", NULL);
    refused("sin(1);", "column 1:", "unknown function 'sin'", NULL);
    /* Arguments: which one, and what it must be. */
    refused("cw(1, foo);", "column 7:", "cw(amplitude, frequency): frequency: expected a number",
            "found 'foo'", NULL);
    refused("cw(1);", "column 5:", "expected ',' before frequency", "found ')'", NULL);
    refused("cw(1, 2, 3);", "column 8:", "expected ')' after the last argument", "found ','", NULL);
    refused("cw 1, 2);", "column 1:", "unknown variable 'cw' (the function is written "
            "cw(amplitude, frequency))", NULL);
    refused("wgn(0.1, -1);", "column 10:", "wgn(std[, entropy]): entropy: expected a non-negative "
            "integer", "found '-1'", NULL);
    refused("wgn(0.1, 1.5);", "column 10:", "entropy: expected a non-negative integer", NULL);
    refused("delay(wgn(1), 1.5);", "column 15:", "delay(signal, delay): delay: expected an integer",
            "found '1.5'", NULL);
    refused("delay(wgn(1), 99999999999999999999);", "column 15:", "out of range", NULL);
    refused("multicw(2.5, 1, 0, 1e6, 1e3);", "column 9:", "m: expected a non-negative integer", NULL);
    refused("multicw(100000, 1, 0, 1e6, 1e3);", "column 9:", "at most 65536", NULL);
    refused("cw(1, 1e999);", "column 7:", "1e999 is out of range", NULL);
    refused("-cw(1, 2);", "column 1:", "expected a signal", "found '-'", NULL);
    refused("1 $ 2;", "column 3:", "expected ';'", "found '$'", NULL);
    refused("(1 + 2;", "column 7:", "expected ')' to close the parenthesis", NULL);
    /* nodither wraps a whole output only (katgpucbf's TerminalError). */
    refused("nodither(1) + 0;", "column 1:", "'nodither(1.0)' cannot be used in a larger expression",
            NULL);
    refused("x = nodither(1); x + 0;", "column 18:", "'nodither(1.0)' cannot be used", NULL);
    refused("x = nodither(1); 2 * x;", "column 22:", "'nodither(1.0)' cannot be used", NULL);
    refused("delay(nodither(1), 1);", "column 7:", "'nodither(1.0)' cannot be used", NULL);
    refused("nodither(nodither(1));", "column 10:", "'nodither(1.0)' cannot be used", NULL);
    /* A text of several lines: the line too. */
    refused("cw(1, 2);\n  foo;", "line 2, column 3:", "unknown variable 'foo'", NULL);
    /* Limits. */
    char deep[700];
    memset(deep, '(', 300);
    snprintf(deep + 300, sizeof deep - 300, "1;");
    refused(deep, "column 257:", "nested more than 256 deep", NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(suite_strings),
        cmocka_unit_test(grammar),
        cmocka_unit_test(terms),
        cmocka_unit_test(malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
