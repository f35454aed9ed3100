/* Request arguments' number lists (cbf_params_build_text): the linear
 * reader that takes plainly written lists must give exactly what the
 * libyaml path gives (the one YAML configurations take) for every way a
 * number may be written, and leave anything it does not read to libyaml,
 * whose messages every front end shows. Random lists, fresh each run;
 * the reference is the YAML path itself and strtod/strtoll on each token. */
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "graph/params_priv.h"

static const cbf_param_decl decls[] = {
    {"values", CBF_PARAM_FLOAT_LIST, "[]", CBF_RANGE(-1e9, 1e9), NULL, "numbers"},
    {"counts", CBF_PARAM_INT_LIST, "[]", CBF_RANGE(-1e15, 1e15), NULL, "integers"},
};
static const cbf_params_ctx as_request = {NULL, "n", "here", "plug", "r"};
static const cbf_params_ctx as_param = {NULL, "n", "here", "plug", NULL};

static cbf_params *build(const cbf_params_ctx *ctx, const char *key, const char *text, cbf_error *err)
{
    cbf_text_kv tv = {key, text, NULL};
    cbf_params *p = NULL;
    cbf_error_clear(err);
    int rc = cbf_params_build_text(decls, 2, &tv, 1, "here", ctx, &p, err);
    assert_true(rc == 0 || !p);
    return p;
}

/* Both paths on text; their values equal each other and ref. */
static void same(const char *key, const char *text, const double *ref, size_t n)
{
    cbf_error e1, e2;
    cbf_params *a = build(&as_request, key, text, &e1), *b = build(&as_param, key, text, &e2);
    if (!a || !b)
        fail_msg("'%.60s...' refused: %s / %s", text, e1.msg, e2.msg);
    assert_int_equal(cbf_params_len(a, key), n);
    assert_int_equal(cbf_params_len(b, key), n);
    for (size_t i = 0; i < n; i++) {
        double x = cbf_params_float_at(a, key, i), y = cbf_params_float_at(b, key, i);
        /* Exact: both read the same token with the same function. */
        if (memcmp(&x, &y, sizeof x) || x != ref[i])
            fail_msg("item %zu of '%.60s...': %.17g (fast) %.17g (yaml) %.17g (strtod)", i, text, x,
                     y, ref[i]);
    }
    assert_true(cbf_params_given(a, key));
    cbf_params_free(a);
    cbf_params_free(b);
}

static double uniform(void) { return (double)rand() / RAND_MAX; }

static void random_float_lists(void **state)
{
    (void)state;
    static const char *const fmts[] = {"%.17g", "%.3e", "%.17E", "%+.6f", "%.0f", "%g"};
    enum { N = 5000 };
    char *text = malloc(N * 64 + 16);
    double *ref = malloc(N * sizeof *ref);
    for (int round = 0; round < 20; round++) {
        size_t l = (size_t)sprintf(text, round % 2 ? "[" : "  [ ");
        for (int i = 0; i < N; i++) {
            double v = (uniform() - 0.5) * pow(10.0, (double)(rand() % 19 - 9));
            if (fabs(v) > 1e9)
                v = 0.5;
            if (i % 97 == 0)
                v = -0.0;
            char tok[64];
            snprintf(tok, sizeof tok, fmts[rand() % 6], v);
            ref[i] = strtod(tok, NULL);
            l += (size_t)sprintf(text + l, "%s%s", i ? (round % 3 ? ", " : " ,  ") : "", tok);
        }
        sprintf(text + l, round % 2 ? "]" : " ] ");
        same("values", text, ref, N);
    }
    same("values", "[]", ref, 0);
    same("values", " [ ] ", ref, 0);
    free(text);
    free(ref);
}

static void random_int_lists(void **state)
{
    (void)state;
    enum { N = 2000 };
    char *text = malloc(N * 32 + 4);
    double *ref = malloc(N * sizeof *ref);
    size_t l = (size_t)sprintf(text, "[");
    for (int i = 0; i < N; i++) {
        int64_t v = ((int64_t)rand() << 18 ^ rand()) * (i % 2 ? -1 : 1);
        ref[i] = (double)v;
        l += (size_t)sprintf(text + l, "%s%" PRId64, i ? ", " : "", v);
    }
    sprintf(text + l, "]");
    same("counts", text, ref, N);
    /* Whole numbers written as floats, as the YAML path takes them. */
    const double r2[] = {1712e6, 1500, -3};
    same("counts", "[1712e6, 1.5e3, -3]", r2, 3);
    free(text);
    free(ref);
}

/* Anything else is libyaml's: other spellings still read, and every
 * refusal carries the item and the YAML path's words. */
static void the_rest_goes_to_yaml(void **state)
{
    (void)state;
    const double r[] = {1000, 16, 2.5};
    same("values", "[1_000, 2**4, 2.5]", r, 3);
    same("values", "[1,\n 16, 2.5]", (const double[]){1, 16, 2.5}, 3);
    static const struct {
        const char *key, *text, *want;
    } bad[] = {
        {"values", "[1, 2e9]", "item [1]: 2e9 is out of range"},
        {"values", "[1, 2, nope]", "item [2]: expected a number, got 'nope'"},
        {"values", "[1, , 2]", "did not find expected node content"},
        {"values", "[1, \"2\"]", "quoted string"},
        {"values", "[1, 2", "argument 'values'"},
        {"values", "[1.2.3]", "item [0]: expected a number"},
        {"values", "[.nan]", "item [0]: .nan is out of range"},
        {"counts", "[1, 2.5]", "item [1]: expected an integer, got '2.5'"},
        {"counts", "[1, 2e15]", "item [1]: 2e15 is out of range"},
        {"values", "7", "expected a list of numbers"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cbf_error e;
        cbf_params *p = build(&as_request, bad[i].key, bad[i].text, &e);
        if (p || !strstr(e.msg, bad[i].want))
            fail_msg("'%s': expected a refusal saying '%s', got '%s'", bad[i].text, bad[i].want,
                     p ? "ok" : e.msg);
        printf("refused: %s: %s\n", bad[i].text, e.msg);
    }
}

int main(void)
{
    unsigned seed = (unsigned)time(NULL);
    printf("seed %u\n", seed);
    srand(seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_float_lists),
        cmocka_unit_test(random_int_lists),
        cmocka_unit_test(the_rest_goes_to_yaml),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
