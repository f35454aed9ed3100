/* cbf-bench's shared option parser (tools/bench/opts.c): every area's
 * options go through it, so its refusals are what a user of any area sees.
 * Each case parses a real argv against a table like the areas' own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "opts.h"

typedef struct vals {
    int reps, ants[4], n_ants, dither;
    double gib, fr[3];
    int n_fr;
    size_t samples;
    const char *mode;
} vals;

static int mode_check(const char *v, void *value)
{
    *(const char **)value = v;
    return strcmp(v, "fast") && strcmp(v, "slow");
}

static int parse(vals *v, int argc, char **argv)
{
    *v = (vals){.reps = 7, .ants = {64}, .n_ants = 1, .dither = 1, .gib = 0.5, .samples = 1, .mode = "fast"};
    const cbf_bench_opt table[] = {
        {"--reps", CBF_BOPT_INT, &v->reps, .lo = 1, .hi = 64},
        {"--ants", CBF_BOPT_INTS, v->ants, &v->n_ants, 4, 1, 4096},
        {"--gib", CBF_BOPT_REAL, &v->gib, .lo = 1e-6, .hi = 8},
        {"--fractions", CBF_BOPT_REALS, v->fr, &v->n_fr, 3, 0.01, 1},
        {"--samples", CBF_BOPT_SIZE, &v->samples, .lo = 1, .hi = 1e12},
        {"--mode", CBF_BOPT_TEXT, &v->mode, .check = mode_check},
        {"--no-dither", CBF_BOPT_FLAG, &v->dither, .set = 0, .alias = "-n"},
        {0},
    };
    return cbf_bench_parse("test", "usage: test\n", argc, argv, table);
}

#define ARGV(...) ((char *[]){"cbf-bench", __VA_ARGS__})
#define ARGC(...) ((int)(sizeof((char *[]){"cbf-bench", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(v, ...) parse(v, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__))

static void values_land_where_the_table_says(void **state)
{
    (void)state;
    vals v;
    assert_int_equal(PARSE(&v, "--reps", "3", "--ants", "8,16,1024", "--gib", "0.25", "--fractions", "0.5,1",
                           "--samples", "0x10000000", "--mode", "slow", "-n"), 0);
    assert_int_equal(v.reps, 3);
    assert_int_equal(v.n_ants, 3);
    assert_int_equal(v.ants[0], 8);
    assert_int_equal(v.ants[2], 1024);
    assert_true(v.gib == 0.25);
    assert_int_equal(v.n_fr, 2);
    assert_true(v.fr[0] == 0.5 && v.fr[1] == 1.0);
    assert_int_equal(v.samples, 1u << 28);
    assert_string_equal(v.mode, "slow");
    assert_int_equal(v.dither, 0);
}

static void defaults_stay_without_options(void **state)
{
    (void)state;
    vals v;
    assert_int_equal(parse(&v, 1, ARGV(NULL)), 0);
    assert_int_equal(v.reps, 7);
    assert_int_equal(v.n_ants, 1);
    assert_int_equal(v.dither, 1);
}

static void help_is_one(void **state)
{
    (void)state;
    vals v;
    assert_int_equal(PARSE(&v, "--help"), 1);
    assert_int_equal(PARSE(&v, "--reps", "2", "-h"), 1);
}

/* Each of these is refused (2), where a hand-rolled atoi loop took it. */
static void bad_values_are_refused(void **state)
{
    (void)state;
    vals v;
    assert_int_equal(PARSE(&v, "--bogus"), 2);
    assert_int_equal(PARSE(&v, "--reps"), 2);               /* no value */
    assert_int_equal(PARSE(&v, "--reps", "0"), 2);          /* below the range */
    assert_int_equal(PARSE(&v, "--reps", "65"), 2);         /* above it */
    assert_int_equal(PARSE(&v, "--reps", "3x"), 2);         /* trailing text */
    assert_int_equal(PARSE(&v, "--reps", "-3"), 2);
    assert_int_equal(PARSE(&v, "--ants", "8,,16"), 2);      /* an empty entry */
    assert_int_equal(PARSE(&v, "--ants", "8;16"), 2);
    assert_int_equal(PARSE(&v, "--ants", "1,2,3,4,5"), 2);  /* more than the table holds */
    assert_int_equal(PARSE(&v, "--ants", ""), 2);
    assert_int_equal(PARSE(&v, "--gib", "nan"), 2);
    assert_int_equal(PARSE(&v, "--gib", "9"), 2);
    assert_int_equal(PARSE(&v, "--fractions", "0.5,2"), 2); /* an entry out of range */
    assert_int_equal(PARSE(&v, "--mode", "medium"), 2);     /* the check refuses */
    assert_int_equal(PARSE(&v, "--samples", "0"), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(values_land_where_the_table_says),
        cmocka_unit_test(defaults_stay_without_options),
        cmocka_unit_test(help_is_one),
        cmocka_unit_test(bad_values_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
