/* cbf-inspect, run as a user would: its tables for test plugins, and its
 * exit status for an unknown name (2) and a broken plugin file (1). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "loader_util.h"

static char out[65536];

static int inspect(const char *group, const char *name)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' --plugin-path '%s' %s 2>&1", CBF_INSPECT, tu_plugin_dir(group),
             name ? name : "");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void expect(const char *needle)
{
    if (!strstr(out, needle))
        fail_msg("expected '%s' in:\n%s", needle, out);
}

/* The line of out that contains needle. */
static const char *line_with(const char *needle)
{
    const char *at = strstr(out, needle);
    if (!at)
        fail_msg("expected '%s' in:\n%s", needle, out);
    while (at > out && at[-1] != '\n')
        at--;
    return at;
}

static long column_of(const char *line, const char *word)
{
    const char *end = strchr(line, '\n');
    const char *at = strstr(line, word);
    if (!at || (end && at > end))
        fail_msg("expected '%s' on line: %.*s", word, (int)(end ? end - line : 80), line);
    return at - line;
}

static void one_plugin(void **state)
{
    (void)state;
    assert_int_equal(inspect("good", "tsrc"), 0);
    expect("tsrc 1.0: test source");
    expect("file: ");
    expect("good/cbf_tsrc.so");
    /* columns line up: the header's words stand over the values */
    const char *head = line_with("DEFAULT");
    const char *row = line_with("buffers to send");
    assert_int_equal(column_of(head, "TYPE"), column_of(row, "int"));
    assert_int_equal(column_of(head, "LIMITS"), column_of(row, "1..100"));
    const char *phead = line_with("BUFFER TYPE");
    const char *aux = line_with("type b, optional");
    assert_int_equal(column_of(phead, "BUFFER TYPE"), column_of(aux, "test.b"));
    assert_int_equal(column_of(phead, "WIRING"), column_of(aux, "optional"));
    assert_int_equal(column_of(aux, "output"), column_of(phead, "DIR"));

    assert_int_equal(inspect("good", "tparams"), 0);
    expect("hann|hamming|rect");
    expect("fields frequency,amplitude,phase=0.5");
    expect("each -8..7");
    assert_true(column_of(line_with("a required integer"), "required") > 0);
    expect("(none)");   /* no ports */

    assert_int_equal(inspect("good", "tsink"), 0);
    expect("required, multi");
    expect("*");

    assert_int_equal(inspect("good", "talt"), 0);
    const char *in = line_with("type a or b");
    assert_true(column_of(in, "test.a | test.b") > 0);
    assert_int_equal(column_of(line_with("BUFFER TYPE"), "WIRING"), column_of(in, "required"));
    assert_int_equal(inspect("good", "twrite"), 0);
    assert_true(column_of(line_with("changed in place"), "required, writes input") > 0);
}

static void listing(void **state)
{
    (void)state;
    assert_int_equal(inspect("good", NULL), 0);
    const char *l = line_with("test filter");
    assert_int_equal(strncmp(l, "tfilt ", 6), 0);
    assert_true(column_of(l, "good/cbf_tfilt.so") > column_of(l, "test filter"));
    assert_int_equal(column_of(line_with("NAME"), "SUMMARY"), column_of(l, "test filter"));
}

static void unknown_and_broken(void **state)
{
    (void)state;
    assert_int_equal(inspect("good", "tsrcc"), 2);
    expect("no plugin 'tsrcc'");
    expect("did you mean 'tsrc'");
    assert_int_equal(inspect("bad_abi", NULL), 1);
    expect("cbf_tbadabi.so");
    expect("ABI 99 found, ABI 4 expected");
    assert_int_equal(inspect("no_symbol", "tsrc"), 1);
    expect("no entry symbol");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_plugin),
        cmocka_unit_test(listing),
        cmocka_unit_test(unknown_and_broken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
